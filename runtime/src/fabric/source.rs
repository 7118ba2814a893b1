//! The counter-source trait: what a fabric looks like to an agent (nodes, their ports, which
//! nodes are linked, which are present) and how a set of ports is read into a [`Reading`].
//! Sources: Linux net statistics and InfiniBand sysfs ([`super::sysfs`]), the simulated
//! fat-tree ([`super::sim`]). Owns no engine state.

use std::ops::Range;

use super::counters::CounterDesc;

/// Why a read failed as a whole (single ports failing are marked in the reading instead).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("reading {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// What a source returns for one epoch, column-wise: `cols[counter][i]` is the value of the
/// `i`-th requested port. The engine owns and reuses it (see `Engine::reading_mut`).
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// When the counters were read, ns since the Unix epoch (the simulated fabric's epoch
    /// time, so every reader of one epoch computes identical rates).
    pub ts_ns: i64,
    /// The source's epoch number of this reading (simulated fabric), else 0.
    pub epoch: u64,
    /// Per port: the port could be read (its node is present).
    pub ok: Vec<bool>,
    /// Per port: counters (bit per counter) set to 0 right after the previous reading, on a
    /// clear this reader asked for: the increase is the new value itself.
    pub cleared: Vec<u32>,
    /// Per port: counters reset at an unknown time since the previous reading.
    pub reset: Vec<u32>,
    pub cols: Vec<Vec<u64>>,
}

impl Reading {
    /// Size for `ports` ports of `counters` counters, every port unread.
    pub fn resize(&mut self, counters: usize, ports: usize) {
        self.ok.clear();
        self.ok.resize(ports, false);
        self.cleared.clear();
        self.cleared.resize(ports, 0);
        self.reset.clear();
        self.reset.resize(ports, 0);
        self.cols.resize_with(counters, Vec::new);
        for c in &mut self.cols {
            c.resize(ports, 0);
        }
    }

    pub fn len(&self) -> usize {
        self.ok.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ok.is_empty()
    }
}

/// A fabric's counters and topology. Node and port ids are dense indices, stable for the
/// source's life (a node that vanishes keeps its id and reads as not present).
pub trait CounterSource: Send + 'static {
    /// The counter table; every port has all of them (unavailable ones read as `NA`).
    fn schema(&self) -> &[CounterDesc];
    fn node_count(&self) -> usize;
    /// A node's name: unique, and valid as a NATS KV key (`[-_=.a-zA-Z0-9]`).
    fn node_name(&self, node: usize) -> &str;
    /// The node's ports, as global port ids.
    fn node_ports(&self, node: usize) -> Range<usize>;
    /// The port's number on its node (1-based for InfiniBand).
    fn port_number(&self, port: usize) -> u32;
    fn port_node(&self, port: usize) -> usize;
    /// How a port is named in samples (`NODE/LABEL`): its number unless the source has a
    /// better name (a net interface's).
    fn port_label(&self, port: usize) -> String {
        self.port_number(port).to_string()
    }
    /// Whether the node is there now.
    fn present(&self, node: usize) -> bool;
    /// Present nodes linked to `node` (appended to `out`): what breadth-first discovery walks.
    fn neighbors(&self, node: usize, out: &mut Vec<usize>);
    /// The source's own epoch counter, when it paces epochs (the simulated fabric); `None`:
    /// the agent's timer does.
    fn epoch(&self) -> Option<u64> {
        None
    }
    /// Read `ports` into `out` (already sized by the caller).
    fn read(&mut self, ports: &[u32], out: &mut Reading) -> Result<(), SourceError>;
    /// Whether `clear` works (the simulated fabric; sysfs counters are read-only).
    fn can_clear(&self) -> bool {
        false
    }
    /// Ask for the counters in `mask` of `port` to be set to 0; acknowledged through
    /// `Reading::cleared` at the next read.
    fn clear(&mut self, _port: usize, _mask: u32) {}
    /// Look again for nodes and ports that appeared (sysfs); cheap when nothing changed.
    fn refresh(&mut self) {}
    /// Find a node by name.
    fn find_node(&self, name: &str) -> Option<usize> {
        (0..self.node_count()).find(|&n| self.node_name(n) == name)
    }
}
