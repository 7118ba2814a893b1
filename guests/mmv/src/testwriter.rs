//! A small MMV version 2 writer for the agent's tests, laid out like libpcp_mmv's: header,
//! table of contents, indoms, instances, metrics, values, strings. Byte-level control (a
//! chosen generation, cluster, flags, bad names) that PCP's own writer does not give.
//! Test-only.

use crate::format::{
    HEADER_SIZE, INDOM_SIZE, INSTANCE2_SIZE, MAGIC, METRIC2_SIZE, STRING_SIZE, TOC_SIZE, VALUE_SIZE,
};

pub const I32: i32 = 0;
pub const U64: i32 = 3;
pub const DOUBLE: i32 = 5;
pub const STRING: i32 = 6;
pub const ELAPSED: i32 = 9;
pub const COUNTER: i32 = 1;
pub const INSTANT: i32 = 3;
pub const DISCRETE: i32 = 4;
/// pmUnits bitfield: count (dimCount 1).
pub const COUNT: u32 = 1 << 20;
/// Kbyte: dimSpace 1, scaleSpace 1.
pub const KBYTE: u32 = (1 << 28) | (1 << 16);

#[derive(Clone)]
pub struct TMetric {
    pub name: String,
    pub item: u32,
    pub mtype: i32,
    pub sem: i32,
    pub units: u32,
    /// Instance domain serial, 0 for singular.
    pub indom: u32,
    pub help: Option<String>,
    /// One atom per instance of its indom (or one); missing ones are 0.
    pub atoms: Vec<u64>,
    /// The `extra` field: a string value, or minus the start of a running interval.
    pub text: Option<String>,
    pub extra: i64,
}

pub fn metric(name: &str, item: u32, mtype: i32, atoms: &[u64]) -> TMetric {
    TMetric {
        name: name.into(),
        item,
        mtype,
        sem: COUNTER,
        units: 0,
        indom: 0,
        help: None,
        atoms: atoms.to_vec(),
        text: None,
        extra: 0,
    }
}

#[derive(Clone)]
pub struct TFile {
    pub cluster: u32,
    pub flags: u32,
    pub g1: u64,
    pub g2: u64,
    /// (serial, instances (internal, external name))
    pub indoms: Vec<(u32, Vec<(i32, String)>)>,
    pub metrics: Vec<TMetric>,
}

pub fn file(cluster: u32, metrics: Vec<TMetric>) -> TFile {
    TFile {
        cluster,
        flags: 0,
        g1: 1000,
        g2: 1000,
        indoms: Vec::new(),
        metrics,
    }
}

fn put32(b: &mut [u8], at: u64, v: u32) {
    b[at as usize..at as usize + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], at: u64, v: u64) {
    b[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
}

impl TFile {
    fn instances_of(&self, m: &TMetric) -> usize {
        if m.indom == 0 {
            return 1;
        }
        self.indoms
            .iter()
            .find(|d| d.0 == m.indom)
            .map_or(1, |d| d.1.len())
    }

    pub fn build(&self) -> Vec<u8> {
        let ninst: u64 = self.indoms.iter().map(|d| d.1.len() as u64).sum();
        let nval: u64 = self
            .metrics
            .iter()
            .map(|m| self.instances_of(m) as u64)
            .sum();
        let ind_off = HEADER_SIZE + 5 * TOC_SIZE;
        let inst_off = ind_off + self.indoms.len() as u64 * INDOM_SIZE;
        let met_off = inst_off + ninst * INSTANCE2_SIZE;
        let val_off = met_off + self.metrics.len() as u64 * METRIC2_SIZE;
        let str_off = val_off + nval * VALUE_SIZE;
        let mut strings: Vec<String> = Vec::new();
        let mut add = |s: &str| {
            strings.push(s.to_string());
            str_off + (strings.len() as u64 - 1) * STRING_SIZE
        };
        let mut b = vec![0u8; str_off as usize];
        b[0..4].copy_from_slice(&MAGIC);
        put32(&mut b, 4, 2);
        put64(&mut b, 8, self.g1);
        put64(&mut b, 16, self.g2);
        put32(&mut b, 24, 5);
        put32(&mut b, 28, self.flags);
        put32(&mut b, 32, 4242);
        put32(&mut b, 36, self.cluster);
        let mut inst_at: Vec<(u32, Vec<u64>)> = Vec::new();
        let mut k = 0;
        for (i, (serial, insts)) in self.indoms.iter().enumerate() {
            let at = ind_off + i as u64 * INDOM_SIZE;
            put32(&mut b, at, *serial);
            put32(&mut b, at + 4, insts.len() as u32);
            put64(&mut b, at + 8, inst_off + k * INSTANCE2_SIZE);
            let mut mine = Vec::new();
            for (internal, name) in insts {
                let ia = inst_off + k * INSTANCE2_SIZE;
                put64(&mut b, ia, at);
                put32(&mut b, ia + 12, *internal as u32);
                put64(&mut b, ia + 16, add(name));
                mine.push(ia);
                k += 1;
            }
            inst_at.push((*serial, mine));
        }
        let mut v = 0;
        for (i, m) in self.metrics.iter().enumerate() {
            let at = met_off + i as u64 * METRIC2_SIZE;
            put64(&mut b, at, add(&m.name));
            put32(&mut b, at + 8, m.item);
            put32(&mut b, at + 12, m.mtype as u32);
            put32(&mut b, at + 16, m.sem as u32);
            put32(&mut b, at + 20, m.units);
            put32(&mut b, at + 24, m.indom);
            if let Some(h) = &m.help {
                put64(&mut b, at + 32, add(h));
            }
            let insts: Vec<u64> = match inst_at.iter().find(|d| d.0 == m.indom) {
                Some((_, list)) if m.indom != 0 => list.clone(),
                _ => vec![0],
            };
            for (n, ia) in insts.iter().enumerate() {
                let va = val_off + v * VALUE_SIZE;
                put64(&mut b, va, m.atoms.get(n).copied().unwrap_or(0));
                let extra = match &m.text {
                    Some(s) => add(s) as i64,
                    None => m.extra,
                };
                put64(&mut b, va + 8, extra as u64);
                put64(&mut b, va + 16, at);
                put64(&mut b, va + 24, *ia);
                v += 1;
            }
        }
        let toc = [
            (1, self.indoms.len() as u64, ind_off),
            (2, ninst, inst_off),
            (3, self.metrics.len() as u64, met_off),
            (4, nval, val_off),
            (5, strings.len() as u64, str_off),
        ];
        for (i, (t, n, off)) in toc.into_iter().enumerate() {
            let at = HEADER_SIZE + i as u64 * TOC_SIZE;
            put32(&mut b, at, t);
            put32(&mut b, at + 4, n as u32);
            put64(&mut b, at + 8, off);
        }
        b.resize((str_off + strings.len() as u64 * STRING_SIZE) as usize, 0);
        for (i, s) in strings.iter().enumerate() {
            let at = (str_off + i as u64 * STRING_SIZE) as usize;
            b[at..at + s.len()].copy_from_slice(s.as_bytes());
        }
        b
    }
}
