//! A simulated fabric for tests, benches and demos: switches and host adapters in a 3-tier
//! fat-tree (k-ary: per pod k/2 edge and k/2 aggregation switches, (k/2)² core switches),
//! up to ~48k nodes and ~1M ports, with deterministic seeded traffic, error bursts, link
//! flaps, switches that vanish and reappear (power-cycled), counters that wrap at 64 bits
//! and stick at 4/8/16/32, and clears the readers ask for.
//!
//! The fabric lives in one memory map (a file shared between processes, or anonymous), so
//! one `wasmon fabric simulate` process (the only writer, [`SimFabric::tick`]) serves any
//! number of agent processes (readers, [`SimSource`]), the way a fabric's ports are one
//! physical thing read by whoever owns them. Every shared field is an atomic; a tick is
//! bracketed by a sequence counter (odd while writing) so a reader never sees half an epoch.
//! Increments are a pure function of (seed, port, epoch), so a run is reproducible.

mod traffic;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::time::Duration;

use memmap2::MmapMut;

use crate::fabric::counters::{CounterDesc, IB_COUNTERS, IB_EXTENDED};
use crate::fabric::source::{CounterSource, Reading, SourceError};

const MAGIC: u64 = u64::from_le_bytes(*b"WMFABSIM");
const VERSION: u64 = 1;
const HEADER: usize = 4096;
const NODE_REC: usize = 48;
const PORT_REC: usize = 32;
/// A reader retries this often while the writer is in the middle of a tick.
const READ_RETRIES: u32 = 10_000;

// Header fields.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_SEED: usize = 16;
const H_NODES: usize = 24;
const H_PORTS: usize = 32;
const H_RADIX: usize = 40;
const H_PODS: usize = 48;
const H_HOSTS: usize = 56;
const H_EPOCH_NS: usize = 64;
const H_BUSY_PPM: usize = 72;
const H_ERROR_PPM: usize = 80;
const H_FLAP_PPM: usize = 88;
const H_SEQ: usize = 96;
const H_EPOCH: usize = 104;
const H_TS: usize = 112;
const H_WRAP_PPM: usize = 120;

// Node record: guid u64, first port u32, ports u32, kind u32, pod u32, index u32,
// present u32, reset-at epoch u64, seen-present u32.
const N_GUID: usize = 0;
const N_FIRST: usize = 8;
const N_PORTS: usize = 12;
const N_KIND: usize = 16;
const N_POD: usize = 20;
const N_INDEX: usize = 24;
const N_PRESENT: usize = 28;
const N_RESET_AT: usize = 32;
/// Writer-private: whether the node was present at the last tick (to see it power up).
pub(super) const N_SEEN: usize = 40;

// Port record: node u32, number u32, peer u32, clear request u32, cleared mask u32,
// injected errors u32, cleared-at epoch u64.
const P_NODE: usize = 0;
const P_NUM: usize = 4;
const P_PEER: usize = 8;
pub(super) const P_CLEAR_REQ: usize = 12;
pub(super) const P_CLEARED_MASK: usize = 16;
pub(super) const P_INJECT: usize = 20;
pub(super) const P_CLEARED_AT: usize = 24;

/// No peer (an unconnected port).
pub(super) const NO_PEER: u32 = u32::MAX;

/// Kinds of node.
pub const HCA: u32 = 0;
pub const EDGE: u32 = 1;
pub const AGG: u32 = 2;
pub const CORE: u32 = 3;

/// The shape and behaviour of a simulated fabric.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSpec {
    /// Ports per switch (even, 4..=254).
    pub radix: u32,
    /// Pods (at most `radix`: a core switch has one port per pod).
    pub pods: u32,
    /// Host adapters under each edge switch (at most `radix / 2`).
    pub hosts_per_edge: u32,
    pub seed: u64,
    /// Simulated time per tick.
    pub epoch: Duration,
    /// Ports that carry heavy traffic, parts per million (the rest send a few management
    /// packets now and then).
    pub busy_ppm: u32,
    /// Chance per port and epoch of a random error burst, parts per million.
    pub error_ppm: u32,
    /// Chance per link and epoch of a flap (link downed), parts per million.
    pub flap_ppm: u32,
    /// Ports whose 64-bit counters start close to the top so they wrap during a run, ppm.
    pub wrap_ppm: u32,
}

impl Default for SimSpec {
    fn default() -> Self {
        SimSpec {
            radix: 24,
            pods: 10,
            hosts_per_edge: 12,
            seed: 1,
            epoch: Duration::from_secs(1),
            busy_ppm: 10_000,
            error_ppm: 20,
            flap_ppm: 5,
            wrap_ppm: 20_000,
        }
    }
}

impl SimSpec {
    pub fn check(&self) -> Result<(), String> {
        if self.radix < 4 || self.radix > 254 || !self.radix.is_multiple_of(2) {
            return Err(format!("radix {} must be even, 4..=254", self.radix));
        }
        if self.pods == 0 || self.pods > self.radix {
            return Err(format!("pods {} must be 1..={}", self.pods, self.radix));
        }
        if self.hosts_per_edge > self.radix / 2 {
            return Err(format!(
                "hosts-per-edge {} must be at most radix/2 = {}",
                self.hosts_per_edge,
                self.radix / 2
            ));
        }
        if self.epoch < Duration::from_millis(10) {
            return Err("epoch must be at least 10ms".into());
        }
        Ok(())
    }

    /// (switches, hosts, ports)
    pub fn size(&self) -> (usize, usize, usize) {
        let h = (self.radix / 2) as usize;
        let switches = self.pods as usize * 2 * h + h * h;
        let hosts = self.pods as usize * h * self.hosts_per_edge as usize;
        (switches, hosts, switches * self.radix as usize + hosts)
    }
}

/// The fabric's memory: header, node records, port records, counters (`[port][counter]`).
pub struct SimFabric {
    map: MmapMut,
    nodes: usize,
    ports: usize,
    names: Vec<String>,
}

// SAFETY: every access to the shared map after creation goes through atomics.
unsafe impl Send for SimFabric {}
unsafe impl Sync for SimFabric {}

fn layout(nodes: usize, ports: usize) -> (usize, usize, usize) {
    let ports_off = HEADER + nodes * NODE_REC;
    let counters_off = (ports_off + ports * PORT_REC).next_multiple_of(64);
    let len = counters_off + ports * IB_COUNTERS * 8;
    (ports_off, counters_off, len)
}

impl SimFabric {
    /// Build a fabric in a new file (shared with agent processes), or in anonymous memory.
    pub fn create(path: Option<&Path>, spec: &SimSpec) -> std::io::Result<SimFabric> {
        spec.check().map_err(std::io::Error::other)?;
        let (switches, hosts, ports) = spec.size();
        let nodes = switches + hosts;
        let (_, _, len) = layout(nodes, ports);
        let map = match path {
            Some(p) => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(p)?;
                f.set_len(len as u64)?;
                // SAFETY: a file we just created; others only map it through `open`.
                unsafe { MmapMut::map_mut(&f)? }
            }
            None => MmapMut::map_anon(len)?,
        };
        let mut f = SimFabric {
            map,
            nodes,
            ports,
            names: Vec::new(),
        };
        f.build(spec);
        f.names = (0..nodes).map(|n| f.make_name(n)).collect();
        Ok(f)
    }

    /// Map a fabric another process created.
    pub fn open(path: &Path) -> std::io::Result<SimFabric> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        // SAFETY: shared fields are only touched through atomics.
        let map = unsafe { MmapMut::map_mut(&file)? };
        let bad = |what: &str| std::io::Error::other(format!("{}: {what}", path.display()));
        if map.len() < HEADER {
            return Err(bad("too short for a simulated fabric"));
        }
        let mut f = SimFabric {
            map,
            nodes: 0,
            ports: 0,
            names: Vec::new(),
        };
        if f.h(H_MAGIC) != MAGIC || f.h(H_VERSION) != VERSION {
            return Err(bad("not a simulated fabric of this version"));
        }
        f.nodes = f.h(H_NODES) as usize;
        f.ports = f.h(H_PORTS) as usize;
        if layout(f.nodes, f.ports).2 > f.map.len() {
            return Err(bad("truncated"));
        }
        f.names = (0..f.nodes).map(|n| f.make_name(n)).collect();
        Ok(f)
    }

    fn a64(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= self.map.len());
        // SAFETY: in bounds, 8-aligned (the map is page-aligned), and only used atomically.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU64) }
    }

    fn a32(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= self.map.len());
        // SAFETY: as `a64`.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU32) }
    }

    pub(super) fn h(&self, field: usize) -> u64 {
        self.a64(field).load(Acquire)
    }

    fn set_h(&self, field: usize, v: u64) {
        self.a64(field).store(v, Release)
    }

    pub(super) fn node32(&self, node: usize, field: usize) -> &AtomicU32 {
        self.a32(HEADER + node * NODE_REC + field)
    }

    pub(super) fn node64(&self, node: usize, field: usize) -> &AtomicU64 {
        self.a64(HEADER + node * NODE_REC + field)
    }

    pub(super) fn port32(&self, port: usize, field: usize) -> &AtomicU32 {
        self.a32(layout(self.nodes, 0).0 + port * PORT_REC + field)
    }

    pub(super) fn port64(&self, port: usize, field: usize) -> &AtomicU64 {
        self.a64(layout(self.nodes, 0).0 + port * PORT_REC + field)
    }

    /// The counters of one port.
    pub(super) fn counters(&self, port: usize) -> &[AtomicU64] {
        let off = layout(self.nodes, self.ports).1 + port * IB_COUNTERS * 8;
        assert!(off + IB_COUNTERS * 8 <= self.map.len());
        // SAFETY: in bounds and aligned (checked above); atomics only.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(off) as *const AtomicU64, IB_COUNTERS)
        }
    }

    pub fn spec(&self) -> SimSpec {
        SimSpec {
            radix: self.h(H_RADIX) as u32,
            pods: self.h(H_PODS) as u32,
            hosts_per_edge: self.h(H_HOSTS) as u32,
            seed: self.h(H_SEED),
            epoch: Duration::from_nanos(self.h(H_EPOCH_NS)),
            busy_ppm: self.h(H_BUSY_PPM) as u32,
            error_ppm: self.h(H_ERROR_PPM) as u32,
            flap_ppm: self.h(H_FLAP_PPM) as u32,
            wrap_ppm: self.h(H_WRAP_PPM) as u32,
        }
    }

    pub fn node_count(&self) -> usize {
        self.nodes
    }

    pub fn port_count(&self) -> usize {
        self.ports
    }

    /// The last complete epoch (0 before the first tick).
    pub fn epoch(&self) -> u64 {
        self.h(H_EPOCH)
    }

    pub fn epoch_ts(&self) -> i64 {
        self.h(H_TS) as i64
    }

    pub fn name(&self, node: usize) -> &str {
        &self.names[node]
    }

    pub fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn kind(&self, node: usize) -> u32 {
        self.node32(node, N_KIND).load(Relaxed)
    }

    pub fn guid(&self, node: usize) -> u64 {
        self.node64(node, N_GUID).load(Relaxed)
    }

    pub fn ports_of(&self, node: usize) -> std::ops::Range<usize> {
        let first = self.node32(node, N_FIRST).load(Relaxed) as usize;
        first..first + self.node32(node, N_PORTS).load(Relaxed) as usize
    }

    pub fn port_node(&self, port: usize) -> usize {
        self.port32(port, P_NODE).load(Relaxed) as usize
    }

    pub fn port_number(&self, port: usize) -> u32 {
        self.port32(port, P_NUM).load(Relaxed)
    }

    pub fn peer(&self, port: usize) -> Option<usize> {
        let p = self.port32(port, P_PEER).load(Relaxed);
        (p != NO_PEER).then_some(p as usize)
    }

    pub fn present(&self, node: usize) -> bool {
        self.node32(node, N_PRESENT).load(Acquire) != 0
    }

    /// Remove a node (it stops answering; its links go dark) or bring it back (power-cycled:
    /// its counters start again from 0 at the next tick).
    pub fn set_present(&self, node: usize, present: bool) {
        self.node32(node, N_PRESENT)
            .store(u32::from(present), Release);
    }

    /// An error burst of `errors` symbol and receive errors on a port at the next tick.
    pub fn inject_errors(&self, port: usize, errors: u32) {
        self.port32(port, P_INJECT).fetch_add(errors, AcqRel);
    }

    /// The value of one counter now (for tests and the CLI).
    pub fn counter(&self, port: usize, counter: usize) -> u64 {
        self.counters(port)[counter].load(Acquire)
    }

    fn make_name(&self, node: usize) -> String {
        let pod = self.node32(node, N_POD).load(Relaxed);
        let i = self.node32(node, N_INDEX).load(Relaxed);
        match self.kind(node) {
            EDGE => format!("sw-p{pod}-e{i}"),
            AGG => format!("sw-p{pod}-a{i}"),
            CORE => format!("sw-c{i}"),
            _ => format!("hca-p{pod}-{i}"),
        }
    }

    fn build(&self, spec: &SimSpec) {
        let (switches, hosts, ports) = spec.size();
        for (f, v) in [
            (H_MAGIC, MAGIC),
            (H_VERSION, VERSION),
            (H_SEED, spec.seed),
            (H_NODES, (switches + hosts) as u64),
            (H_PORTS, ports as u64),
            (H_RADIX, spec.radix.into()),
            (H_PODS, spec.pods.into()),
            (H_HOSTS, spec.hosts_per_edge.into()),
            (H_EPOCH_NS, spec.epoch.as_nanos() as u64),
            (H_BUSY_PPM, spec.busy_ppm.into()),
            (H_ERROR_PPM, spec.error_ppm.into()),
            (H_FLAP_PPM, spec.flap_ppm.into()),
            (H_WRAP_PPM, spec.wrap_ppm.into()),
        ] {
            self.set_h(f, v);
        }
        let k = spec.radix as usize;
        let h = k / 2;
        let pods = spec.pods as usize;
        let hpe = spec.hosts_per_edge as usize;
        // Node ids: per pod h edges then h aggs; then h*h cores; then the hosts.
        let edge = |p: usize, e: usize| p * 2 * h + e;
        let agg = |p: usize, a: usize| p * 2 * h + h + a;
        let core = |c: usize| pods * 2 * h + c;
        let host = |p: usize, i: usize| switches + p * h * hpe + i;
        let mut next_port = 0usize;
        let mut add = |f: &SimFabric, node: usize, kind: u32, pod: usize, idx: usize, n: usize| {
            f.node64(node, N_GUID)
                .store(0x0002_c903_0000_0000 | node as u64, Relaxed);
            f.node32(node, N_FIRST).store(next_port as u32, Relaxed);
            f.node32(node, N_PORTS).store(n as u32, Relaxed);
            f.node32(node, N_KIND).store(kind, Relaxed);
            f.node32(node, N_POD).store(pod as u32, Relaxed);
            f.node32(node, N_INDEX).store(idx as u32, Relaxed);
            f.node32(node, N_PRESENT).store(1, Relaxed);
            f.node32(node, N_SEEN).store(1, Relaxed);
            for i in 0..n {
                let p = next_port + i;
                f.port32(p, P_NODE).store(node as u32, Relaxed);
                f.port32(p, P_NUM).store(i as u32 + 1, Relaxed);
                f.port32(p, P_PEER).store(NO_PEER, Relaxed);
            }
            next_port += n;
        };
        for p in 0..pods {
            for e in 0..h {
                add(self, edge(p, e), EDGE, p, e, k);
            }
            for a in 0..h {
                add(self, agg(p, a), AGG, p, a, k);
            }
        }
        for c in 0..h * h {
            add(self, core(c), CORE, 0, c, k);
        }
        for p in 0..pods {
            for i in 0..h * hpe {
                add(self, host(p, i), HCA, p, i, 1);
            }
        }
        let port = |f: &SimFabric, node: usize, num: usize| f.ports_of(node).start + num - 1;
        let link = |f: &SimFabric, a: usize, b: usize| {
            f.port32(a, P_PEER).store(b as u32, Relaxed);
            f.port32(b, P_PEER).store(a as u32, Relaxed);
        };
        for p in 0..pods {
            for e in 0..h {
                for j in 0..hpe {
                    let hp = port(self, host(p, e * hpe + j), 1);
                    link(self, port(self, edge(p, e), 1 + j), hp);
                }
                for a in 0..h {
                    link(
                        self,
                        port(self, edge(p, e), h + 1 + a),
                        port(self, agg(p, a), 1 + e),
                    );
                }
            }
            for a in 0..h {
                for u in 0..h {
                    link(
                        self,
                        port(self, agg(p, a), h + 1 + u),
                        port(self, core(a * h + u), 1 + p),
                    );
                }
            }
        }
        traffic::initial_values(self, spec);
        self.set_h(H_EPOCH, 0);
        self.set_h(H_TS, 0);
    }

    /// Advance one epoch, stamped `ts_ns`. Only one writer may tick a fabric.
    pub fn tick(&self, ts_ns: i64) {
        self.a64(H_SEQ).fetch_add(1, AcqRel);
        let e = self.epoch() + 1;
        traffic::advance(self, e);
        self.set_h(H_EPOCH, e);
        self.set_h(H_TS, ts_ns as u64);
        self.a64(H_SEQ).fetch_add(1, AcqRel);
    }

    /// Tick every `spec().epoch` (wall clock) until `stop` is set.
    pub fn run(&self, stop: &std::sync::atomic::AtomicBool) {
        let epoch = self.spec().epoch;
        let mut next = std::time::Instant::now();
        while !stop.load(Relaxed) {
            self.tick(crate::procfs::now_ns());
            next += epoch;
            let now = std::time::Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now; // fell behind: no burst of catch-up ticks
            }
        }
    }

    pub(super) fn seq(&self) -> u64 {
        self.h(H_SEQ)
    }

    pub(super) fn node_reset_at(&self, node: usize) -> &AtomicU64 {
        self.node64(node, N_RESET_AT)
    }
}

/// An agent's view of a simulated fabric: a [`CounterSource`].
pub struct SimSource {
    fabric: Arc<SimFabric>,
    /// Per port: the epoch this reader last read it (`u64::MAX`: never).
    last_read: Vec<u64>,
}

impl SimSource {
    pub fn new(fabric: Arc<SimFabric>) -> SimSource {
        SimSource {
            last_read: vec![u64::MAX; fabric.port_count()],
            fabric,
        }
    }

    pub fn fabric(&self) -> &Arc<SimFabric> {
        &self.fabric
    }
}

impl CounterSource for SimSource {
    fn schema(&self) -> &[CounterDesc] {
        &IB_EXTENDED
    }

    fn node_count(&self) -> usize {
        self.fabric.node_count()
    }

    fn node_name(&self, node: usize) -> &str {
        self.fabric.name(node)
    }

    fn node_ports(&self, node: usize) -> std::ops::Range<usize> {
        self.fabric.ports_of(node)
    }

    fn port_number(&self, port: usize) -> u32 {
        self.fabric.port_number(port)
    }

    fn port_node(&self, port: usize) -> usize {
        self.fabric.port_node(port)
    }

    fn present(&self, node: usize) -> bool {
        self.fabric.present(node)
    }

    fn neighbors(&self, node: usize, out: &mut Vec<usize>) {
        if !self.fabric.present(node) {
            return;
        }
        for p in self.fabric.ports_of(node) {
            if let Some(q) = self.fabric.peer(p) {
                let n = self.fabric.port_node(q);
                if self.fabric.present(n) {
                    out.push(n);
                }
            }
        }
    }

    fn epoch(&self) -> Option<u64> {
        Some(self.fabric.epoch())
    }

    fn read(&mut self, ports: &[u32], out: &mut Reading) -> Result<(), SourceError> {
        let f = &*self.fabric;
        let mut tries = 0;
        let epoch = loop {
            let s1 = f.seq();
            if s1 % 2 == 1 {
                tries += 1;
                if tries > READ_RETRIES {
                    return Err(SourceError::Other("the simulator is stuck mid-tick".into()));
                }
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            let epoch = f.epoch();
            out.ts_ns = f.epoch_ts();
            out.epoch = epoch;
            for (i, &p) in ports.iter().enumerate() {
                let p = p as usize;
                let node = f.port_node(p);
                out.ok[i] = f.present(node);
                out.cleared[i] = 0;
                out.reset[i] = 0;
                let cs = f.counters(p);
                for (c, v) in cs.iter().enumerate() {
                    out.set(c, i, v.load(Relaxed));
                }
            }
            if f.seq() == s1 {
                break epoch;
            }
        };
        for (i, &p) in ports.iter().enumerate() {
            let p = p as usize;
            let last = self.last_read[p];
            if !out.ok[i] {
                continue;
            }
            self.last_read[p] = epoch;
            if last == u64::MAX || last >= epoch {
                continue;
            }
            let at = f.port64(p, P_CLEARED_AT).load(Acquire);
            if at > last && at <= epoch {
                let mask = f.port32(p, P_CLEARED_MASK).load(Acquire);
                if at == last + 1 {
                    // Zeroed at the start of the tick after our reading: nothing was lost.
                    out.cleared[i] = mask;
                } else {
                    out.reset[i] = u32::MAX;
                }
            }
            let reset = f.node_reset_at(f.port_node(p)).load(Acquire);
            if reset > last && reset <= epoch {
                out.reset[i] = u32::MAX;
                out.cleared[i] = 0;
            }
        }
        Ok(())
    }

    fn can_clear(&self) -> bool {
        true
    }

    fn clear(&mut self, port: usize, mask: u32) {
        self.fabric.port32(port, P_CLEAR_REQ).fetch_or(mask, AcqRel);
    }

    fn find_node(&self, name: &str) -> Option<usize> {
        self.fabric.find(name)
    }
}

#[cfg(test)]
mod tests;
