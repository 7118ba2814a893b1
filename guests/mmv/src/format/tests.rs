//! Tests of the MMV parser on files from a small writer here (for byte-level control): a file
//! mid-update, truncated and corrupt files, and 100k randomly mutated files that must not
//! panic. Files from PCP's own writer are tested in `tests_pcp.rs`. Test-only.

use super::*;

// ---------------------------------------------------------------------------------------
// A writer laid out like libpcp_mmv's mmv_init, for byte-level control in tests.

struct TMetric {
    name: &'static str,
    item: u32,
    mtype: i32,
    sem: i32,
    units: u32,
    indom: i32,
    help: Option<&'static str>,
}

/// (serial, instances (internal, external), help)
type TIndom = (u32, Vec<(i32, &'static str)>, Option<&'static str>);

struct Writer {
    version: i32,
    indoms: Vec<TIndom>,
    metrics: Vec<TMetric>,
    /// (metric index, instance index or None) → (atom, string value)
    set: Vec<(usize, Option<usize>, u64, Option<&'static str>)>,
}

pub(super) fn put32(b: &mut [u8], at: u64, v: u32) {
    b[at as usize..at as usize + 4].copy_from_slice(&v.to_le_bytes());
}
pub(super) fn put64(b: &mut [u8], at: u64, v: u64) {
    b[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
}
fn putstr(b: &mut [u8], at: u64, s: &str) {
    b[at as usize..at as usize + s.len()].copy_from_slice(s.as_bytes());
}

impl Writer {
    fn build(&self) -> Vec<u8> {
        let v1 = self.version == 1;
        let (isz, msz) = if v1 {
            (INSTANCE1_SIZE, METRIC1_SIZE)
        } else {
            (INSTANCE2_SIZE, METRIC2_SIZE)
        };
        let ninst: usize = self.indoms.iter().map(|d| d.1.len()).sum();
        let inst_of = |m: &TMetric| {
            self.indoms
                .iter()
                .find(|d| d.0 as i32 == m.indom)
                .map_or(1, |d| d.1.len())
        };
        let nvalues: usize = self
            .metrics
            .iter()
            .map(|m| if m.indom == 0 { 1 } else { inst_of(m) })
            .sum();
        let mut strings: Vec<String> = Vec::new();
        let ntoc = 2 + if self.indoms.is_empty() { 0 } else { 2 } + 1;
        let ind_off = HEADER_SIZE + ntoc * TOC_SIZE;
        let inst_off = ind_off + self.indoms.len() as u64 * INDOM_SIZE;
        let met_off = inst_off + ninst as u64 * isz;
        let val_off = met_off + self.metrics.len() as u64 * msz;
        let str_off = val_off + nvalues as u64 * VALUE_SIZE;
        // Strings are appended as they come; the section is sized at the end.
        let mut b = vec![0u8; str_off as usize];
        let add = |strings: &mut Vec<String>, s: &str| -> u64 {
            strings.push(s.to_string());
            str_off + (strings.len() as u64 - 1) * STRING_SIZE
        };
        b[0..4].copy_from_slice(&MAGIC);
        put32(&mut b, 4, self.version as u32);
        put64(&mut b, 8, 0x1234);
        put64(&mut b, 16, 0x1234);
        put32(&mut b, 24, ntoc as u32);
        put32(&mut b, 36, 7);
        let mut toc = HEADER_SIZE;
        let mut entry = |b: &mut Vec<u8>, t: u32, n: u64, off: u64| {
            put32(b, toc, t);
            put32(b, toc + 4, n as u32);
            put64(b, toc + 8, off);
            toc += TOC_SIZE;
        };
        if !self.indoms.is_empty() {
            entry(&mut b, 1, self.indoms.len() as u64, ind_off);
            entry(&mut b, 2, ninst as u64, inst_off);
        }
        entry(&mut b, 3, self.metrics.len() as u64, met_off);
        entry(&mut b, 4, nvalues as u64, val_off);
        let mut inst_at = Vec::new();
        let mut k = 0u64;
        for (i, (serial, insts, help)) in self.indoms.iter().enumerate() {
            let at = ind_off + i as u64 * INDOM_SIZE;
            put32(&mut b, at, *serial);
            put32(&mut b, at + 4, insts.len() as u32);
            put64(&mut b, at + 8, inst_off + k * isz);
            if let Some(h) = help {
                let o = add(&mut strings, h);
                put64(&mut b, at + 24, o);
            }
            let mut mine = Vec::new();
            for (internal, name) in insts {
                let ia = inst_off + k * isz;
                put64(&mut b, ia, at);
                put32(&mut b, ia + 12, *internal as u32);
                if v1 {
                    putstr(&mut b, ia + 16, name);
                } else {
                    let o = add(&mut strings, name);
                    put64(&mut b, ia + 16, o);
                }
                mine.push(ia);
                k += 1;
            }
            inst_at.push((*serial, mine));
        }
        let mut v = 0u64;
        for (i, m) in self.metrics.iter().enumerate() {
            let at = met_off + i as u64 * msz;
            let f = if v1 {
                putstr(&mut b, at, m.name);
                at + NAME_MAX
            } else {
                let o = add(&mut strings, m.name);
                put64(&mut b, at, o);
                at + 8
            };
            put32(&mut b, f, m.item);
            put32(&mut b, f + 4, m.mtype as u32);
            put32(&mut b, f + 8, m.sem as u32);
            put32(&mut b, f + 12, m.units);
            put32(&mut b, f + 16, m.indom as u32);
            if let Some(h) = m.help {
                let o = add(&mut strings, h);
                put64(&mut b, f + 32, o);
            }
            let insts: Vec<Option<u64>> = match inst_at.iter().find(|d| d.0 as i32 == m.indom) {
                Some((_, list)) if m.indom != 0 => list.iter().map(|x| Some(*x)).collect(),
                _ => vec![None],
            };
            for (n, ia) in insts.iter().enumerate() {
                let va = val_off + v * VALUE_SIZE;
                put64(&mut b, va + 16, at);
                put64(&mut b, va + 24, ia.unwrap_or(0));
                for (mi, ii, atom, s) in &self.set {
                    if *mi == i && ii.unwrap_or(0) == n {
                        put64(&mut b, va, *atom);
                        if let Some(s) = s {
                            let o = add(&mut strings, s);
                            put64(&mut b, va + 8, o);
                        }
                    }
                }
                v += 1;
            }
        }
        entry(&mut b, 5, strings.len() as u64, str_off);
        b.resize((str_off + strings.len() as u64 * STRING_SIZE) as usize, 0);
        for (i, s) in strings.iter().enumerate() {
            putstr(&mut b, str_off + i as u64 * STRING_SIZE, s);
        }
        b
    }
}

/// Kbyte: dimSpace 1, scaleSpace 1.
const KBYTE: u32 = (1 << 28) | (1 << 16);

fn sample(version: i32) -> Vec<u8> {
    Writer {
        version,
        indoms: vec![(3, vec![(0, "eth0"), (1, "lo")], Some("interfaces"))],
        metrics: vec![
            TMetric {
                name: "requests",
                item: 1,
                mtype: 3,
                sem: 1,
                units: 0,
                indom: 0,
                help: Some("requests served"),
            },
            TMetric {
                name: "bytes",
                item: 2,
                mtype: 2,
                sem: 1,
                units: KBYTE,
                indom: 3,
                help: None,
            },
            TMetric {
                name: "temp",
                item: 3,
                mtype: 5,
                sem: 3,
                units: 0,
                indom: 0,
                help: None,
            },
            TMetric {
                name: "state",
                item: 4,
                mtype: 6,
                sem: 4,
                units: 0,
                indom: 0,
                help: None,
            },
            TMetric {
                name: "busy",
                item: 5,
                mtype: 9,
                sem: 1,
                units: 0,
                indom: 0,
                help: None,
            },
        ],
        set: vec![
            (0, None, 42, None),
            (1, Some(0), 1000, None),
            (1, Some(1), (-5i64) as u64, None),
            (2, None, 36.6f64.to_bits(), None),
            (3, None, 2, Some("ok")),
            (4, None, 1500, None),
        ],
    }
    .build()
}

#[test]
fn parses_v1_and_v2_from_the_test_writer() {
    for version in [1, 2] {
        let f = parse(&sample(version)).unwrap();
        assert_eq!(
            (f.version, f.generation, f.cluster),
            (version as u32, 0x1234, 7)
        );
        assert_eq!(
            f.indoms[0].instances[1],
            Instance {
                internal: 1,
                external: "lo".into()
            }
        );
        assert_eq!(f.indoms[0].helptext.as_deref(), Some("interfaces"));
        let (_, bytes) = f.metric("bytes").unwrap();
        assert_eq!(
            (bytes.indom, bytes.units.to_string()),
            (Some(3), "Kbyte".to_string())
        );
        assert_eq!(
            f.metric("requests").unwrap().1.helptext.as_deref(),
            Some("requests served")
        );
        assert_eq!(f.value("requests", None), Some(&MmvValue::U64(42)));
        assert_eq!(f.value("bytes", Some("eth0")), Some(&MmvValue::I64(1000)));
        assert_eq!(f.value("bytes", Some("lo")), Some(&MmvValue::I64(-5)));
        assert_eq!(f.value("temp", None), Some(&MmvValue::Double(36.6)));
        assert_eq!(f.metric("temp").unwrap().1.semantics, Semantics::Instant);
        assert_eq!(f.value("state", None), Some(&MmvValue::String("ok".into())));
        assert_eq!(
            f.value("busy", None),
            Some(&MmvValue::Elapsed {
                total_us: 1500,
                started_us: None
            })
        );
        assert_eq!(f.metric("busy").unwrap().1.units.to_string(), "microsec");
    }
}

#[test]
fn units_read_like_pmunitsstr() {
    let u = |ds: i32, dt: i32, dc: i32, ss: u32, st: u32, sc: i32| {
        Units::from_raw(
            (((ds as u32) & 0xf) << 28)
                | (((dt as u32) & 0xf) << 24)
                | (((dc as u32) & 0xf) << 20)
                | (ss << 16)
                | (st << 12)
                | (((sc as u32) & 0xf) << 8),
        )
        .to_string()
    };
    assert_eq!(u(1, -1, 0, 0, 3, 0), "byte / sec");
    assert_eq!(u(0, 1, 0, 0, 2, 0), "millisec");
    assert_eq!(u(0, 0, 1, 0, 0, 3), "count x 10^3");
    assert_eq!(u(0, -1, 1, 0, 3, 0), "count / sec");
    assert_eq!(u(0, 0, 0, 0, 0, 0), "");
    assert_eq!(u(2, 0, 0, 2, 0, 0), "Mbyte^2");
}

#[test]
fn mid_update_files_are_updating() {
    let mut b = sample(2);
    put64(&mut b, 16, 0x9999);
    assert_eq!(
        parse(&b),
        Err(MmvError::Updating {
            g1: 0x1234,
            g2: 0x9999
        })
    );
    put64(&mut b, 8, 0);
    put64(&mut b, 16, 0);
    assert_eq!(parse(&b), Err(MmvError::Updating { g1: 0, g2: 0 }));
    assert_eq!(generation(&b), Some((0, 0)));
}

#[test]
fn header_errors() {
    let good = sample(1);
    assert!(matches!(
        parse(&good[..10]),
        Err(MmvError::Truncated { what: "header", .. })
    ));
    let mut b = good.clone();
    b[0] = b'X';
    assert!(matches!(parse(&b), Err(MmvError::BadMagic(_))));
    let mut b = good.clone();
    put32(&mut b, 4, 4);
    assert_eq!(parse(&b), Err(MmvError::UnknownVersion(4)));
    let mut b = good.clone();
    put32(&mut b, 24, 1);
    assert!(matches!(parse(&b), Err(MmvError::BadToc { .. })));
    let mut b = good.clone();
    put32(&mut b, 24, 1000);
    assert!(matches!(
        parse(&b),
        Err(MmvError::Truncated {
            what: "table of contents",
            ..
        })
    ));
    let mut b = good.clone();
    put32(&mut b, HEADER_SIZE, 77);
    assert!(
        matches!(parse(&b), Err(MmvError::BadToc { ref reason, .. }) if reason.contains("unknown section type 77"))
    );
}

#[test]
fn every_truncation_is_an_error() {
    for version in [1, 2] {
        let good = sample(version);
        for n in 0..good.len() {
            let e = parse(&good[..n]).expect_err("a truncated file must not parse");
            let text = e.to_string();
            assert!(!text.is_empty());
        }
    }
}

#[test]
fn corrupt_references_are_named() {
    let good = sample(2);
    let f = parse(&good).unwrap();
    assert_eq!(f.values.len(), 6);
    // Value 0's metric offset moved off an entry boundary.
    let values_off = rd_u64(&good, HEADER_SIZE + 3 * TOC_SIZE + 8).unwrap();
    let mut b = good.clone();
    let m = rd_u64(&b, values_off + 16).unwrap();
    put64(&mut b, values_off + 16, m + 4);
    assert!(
        matches!(
            parse(&b),
            Err(MmvError::BadReference {
                target: "metrics",
                ..
            })
        ),
        "{:?}",
        parse(&b)
    );
    // An indom value pointing at no instance.
    let mut b = good.clone();
    put64(&mut b, values_off + VALUE_SIZE + 24, 3);
    assert!(matches!(
        parse(&b),
        Err(MmvError::BadReference {
            target: "instances",
            ..
        })
    ));
    // A string offset outside the strings section.
    let mut b = good.clone();
    let metrics_off = rd_u64(&good, HEADER_SIZE + 2 * TOC_SIZE + 8).unwrap();
    put64(&mut b, metrics_off, 8);
    assert!(matches!(
        parse(&b),
        Err(MmvError::BadReference {
            target: "strings",
            ..
        })
    ));
    // A section count past the end of the file.
    let mut b = good.clone();
    put32(&mut b, HEADER_SIZE + 3 * TOC_SIZE + 4, 1 << 30);
    assert!(matches!(parse(&b), Err(MmvError::OutOfBounds { .. })));
    // A metric with an indom nobody defines, and a bad type.
    let metrics_fields = metrics_off + METRIC2_SIZE + 8;
    let mut b = good.clone();
    put32(&mut b, metrics_fields + 16, 99);
    assert_eq!(
        parse(&b),
        Err(MmvError::UnknownIndom {
            metric: "bytes".into(),
            serial: 99
        })
    );
    let mut b = good.clone();
    put32(&mut b, metrics_fields + 4, 42);
    assert_eq!(
        parse(&b),
        Err(MmvError::BadMetricType {
            metric: "bytes".into(),
            code: 42
        })
    );
    // An unterminated string.
    let mut b = good;
    let strings_off = rd_u64(&b, HEADER_SIZE + 4 * TOC_SIZE + 8).unwrap();
    for k in 0..STRING_SIZE {
        b[(strings_off + k) as usize] = b'x';
    }
    assert!(matches!(parse(&b), Err(MmvError::BadString { .. })));
}

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn a_hundred_thousand_mutated_files_never_panic() {
    let seeds = [sample(1), sample(2)];
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let mut parsed = 0;
    for round in 0..100_000 {
        let mut b = seeds[round % 2].clone();
        for _ in 0..1 + rng.below(4) {
            if b.is_empty() {
                break;
            }
            let at = rng.below(b.len());
            match rng.below(6) {
                0 => b[at] ^= 1 << rng.below(8),
                1 => b[at] = rng.next() as u8,
                // Plausible-looking offsets and counts are the dangerous values.
                2 if at + 8 <= b.len() => {
                    let v = rng.below(b.len() * 2) as u64;
                    b[at..at + 8].copy_from_slice(&v.to_le_bytes())
                }
                3 if at + 4 <= b.len() => b[at..at + 4]
                    .copy_from_slice(&(rng.next() as u32 >> rng.below(32)).to_le_bytes()),
                4 => b.truncate(at),
                _ => b[at] = 0,
            }
        }
        // Keep the header valid half the time so mutations reach the body.
        if round % 2 == 0 && b.len() >= 40 {
            b[0..4].copy_from_slice(&MAGIC);
            let g = rd_u64(&b, 8).unwrap_or(1).max(1);
            b[8..16].copy_from_slice(&g.to_le_bytes());
            b[16..24].copy_from_slice(&g.to_le_bytes());
        }
        if parse(&b).is_ok() {
            parsed += 1;
        }
    }
    // Some mutations (e.g. in a value's atom) leave a valid file: the loop did reach bodies.
    assert!(parsed > 1000, "only {parsed} mutated files parsed");
}
