//! The counter-source trait: what a fabric looks like to an agent (nodes, their ports, which
//! nodes are linked, which are present) and how a set of ports is read into a [`Reading`].
//! Sources: Linux net statistics and InfiniBand sysfs ([`super::sysfs`]), the simulated
//! fat-tree ([`super::sim`]). Owns no engine state.

use std::ops::Range;

use super::counters::{CounterDesc, NA, Width};

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

/// What a source returns for one epoch, column-wise: counter `c` of the `i`-th requested port
/// is [`Reading::get`]`(c, i)`. The engine owns and reuses it (see `Engine::reading_mut`).
///
/// Each counter's column holds the narrowest word its width fits ([`Column`]): the error
/// counters are 4 to 16 bits, and a 1M-port epoch is read twice (this reading and the
/// previous one), so 16 × 64-bit columns would be 2.5× the bytes of what they hold.
/// An unreadable value is a bit in `na`, not a sentinel in the column.
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
    /// Per port: counters that could not be read (bit per counter; their column holds 0).
    pub na: Vec<u32>,
    pub(crate) cols: Vec<Column>,
    /// Per counter: the largest value it holds (a larger one is stored as this).
    max: Vec<u64>,
}

impl Reading {
    /// Size for `ports` ports of the counters of `schema`, every port unread.
    pub fn resize(&mut self, schema: &[CounterDesc], ports: usize) {
        self.ok.clear();
        self.ok.resize(ports, false);
        self.cleared.clear();
        self.cleared.resize(ports, 0);
        self.reset.clear();
        self.reset.resize(ports, 0);
        self.na.clear();
        self.na.resize(ports, 0);
        // The words follow the table (two tables may have as many counters).
        if !self
            .max
            .iter()
            .copied()
            .eq(schema.iter().map(|d| d.width.max()))
        {
            self.cols = schema.iter().map(|d| Column::new(d.width)).collect();
            self.max = schema.iter().map(|d| d.width.max()).collect();
        }
        for c in &mut self.cols {
            c.resize(ports);
        }
    }

    pub fn len(&self) -> usize {
        self.ok.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ok.is_empty()
    }

    /// Counter `c` of port `i`; [`NA`] when it could not be read.
    pub fn get(&self, c: usize, i: usize) -> u64 {
        if self.na[i] >> c & 1 != 0 {
            NA
        } else {
            self.cols[c].get(i)
        }
    }

    /// Set counter `c` of port `i`: [`NA`] marks it unreadable; a value above the counter's
    /// width (a confused source) is stored as its top, which reads as saturated.
    #[inline]
    pub fn set(&mut self, c: usize, i: usize, v: u64) {
        if v == NA {
            self.na[i] |= 1 << c;
            self.cols[c].set(i, 0);
        } else {
            self.na[i] &= !(1 << c);
            self.cols[c].set(i, v.min(self.max[c]));
        }
    }
}

/// A machine word a counter column is stored in.
pub(crate) trait Word:
    Copy
    + Ord
    + Into<u64>
    + std::ops::BitXor<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::fmt::Debug
    + 'static
{
    const ZERO: Self;
    /// `v`, which the caller has bounded to the word's range.
    fn narrow(v: u64) -> Self;
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            const ZERO: Self = 0;
            #[inline(always)]
            fn narrow(v: u64) -> Self {
                v as $t
            }
        }
    )*};
}
word!(u8, u16, u32, u64);

/// One counter's values, in the narrowest word that holds its range: 4- and 8-bit counters in
/// bytes, 16-bit in `u16`, 32-bit in `u32`, 64-bit in `u64`.
#[derive(Clone, Debug)]
pub(crate) enum Column {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

/// `$body` with `$v` bound to the column's vector, whatever its word.
macro_rules! each_word {
    ($col:expr, $v:ident => $body:expr) => {
        match $col {
            Column::U8($v) => $body,
            Column::U16($v) => $body,
            Column::U32($v) => $body,
            Column::U64($v) => $body,
        }
    };
}

impl Column {
    pub(crate) fn new(width: Width) -> Column {
        Column::holding(width.max())
    }

    /// An empty column of the narrowest word that holds `max`.
    pub(crate) fn holding(max: u64) -> Column {
        match max {
            m if m <= u8::MAX.into() => Column::U8(Vec::new()),
            m if m <= u16::MAX.into() => Column::U16(Vec::new()),
            m if m <= u32::MAX.into() => Column::U32(Vec::new()),
            _ => Column::U64(Vec::new()),
        }
    }

    pub(crate) fn resize(&mut self, n: usize) {
        each_word!(self, v => v.resize(n, Word::ZERO))
    }

    pub(crate) fn len(&self) -> usize {
        each_word!(self, v => v.len())
    }

    /// Every value 0.
    pub(crate) fn zero(&mut self) {
        each_word!(self, v => v.fill(Word::ZERO))
    }

    /// The largest value the word holds.
    pub(crate) fn max(&self) -> u64 {
        match self {
            Column::U8(_) => u8::MAX.into(),
            Column::U16(_) => u16::MAX.into(),
            Column::U32(_) => u32::MAX.into(),
            Column::U64(_) => u64::MAX,
        }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> u64 {
        match self {
            Column::U8(v) => v[i].into(),
            Column::U16(v) => v[i].into(),
            Column::U32(v) => v[i].into(),
            Column::U64(v) => v[i],
        }
    }

    /// Set the `i`-th value to `x`, which the caller has bounded to [`Column::max`].
    #[inline]
    pub(crate) fn set(&mut self, i: usize, x: u64) {
        each_word!(self, v => v[i] = Word::narrow(x))
    }

    /// The values of `map`'s ports: `Some(i)` takes this column's `i`-th value, `None` is 0.
    pub(crate) fn remap(&self, map: &[Option<usize>]) -> Column {
        let mut out = Column::holding(self.max());
        out.resize(map.len());
        for (j, m) in map.iter().enumerate() {
            if let Some(i) = m {
                out.set(j, self.get(*i));
            }
        }
        out
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
