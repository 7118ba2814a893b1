//! What a port counter is: its name, width (wrapping 64-bit or saturating "sticky" N-bit),
//! class (data, packets, congestion, error) and unit. Owns the counter tables of the sources
//! (InfiniBand PortCounters / PortCountersExtended, Linux net statistics) and the one place
//! where 4-octet data units become bytes ([`CounterDesc::to_output`]).

/// A counter value that could not be read (a file saying `N/A (no PMA)`, a missing file).
/// No saturating counter reaches it; a 64-bit counter holding exactly `u64::MAX` is read as
/// unavailable for that one epoch.
pub const NA: u64 = u64::MAX;

/// How a counter behaves at the top of its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 64-bit, wraps to 0 (PortCountersExtended, Linux net statistics).
    Wrap64,
    /// N bits, sticks at `2^N - 1` until cleared (PortCounters: 4, 8, 16 and 32 bits).
    Saturating(u8),
}

impl Width {
    /// The largest value the counter can hold.
    pub const fn max(self) -> u64 {
        match self {
            Width::Wrap64 => u64::MAX,
            Width::Saturating(bits) if bits >= 64 => u64::MAX,
            Width::Saturating(bits) => (1u64 << bits) - 1,
        }
    }

    pub const fn saturates(self) -> bool {
        matches!(self, Width::Saturating(_))
    }
}

/// What a counter counts, which decides what the engine does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Payload; reported on change threshold. May count in units of several octets.
    Data,
    /// Packets; reported on change threshold.
    Packets,
    /// Time or events of congestion (PortXmitWait); reported on change threshold.
    Congestion,
    /// Errors; a trap when the increase in one epoch reaches the counter's trap threshold.
    Error,
}

impl Class {
    /// Reported up the tree when it changed by more than its change threshold.
    pub const fn reported(self) -> bool {
        !matches!(self, Class::Error)
    }
}

/// One counter of a source's table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CounterDesc {
    /// Name as the source spells it (the sysfs file name for InfiniBand and net).
    pub name: &'static str,
    pub width: Width,
    pub class: Class,
    /// Octets per counted unit for data counters (InfiniBand counts 4-octet words), else 1.
    pub octets_per_unit: u32,
    /// The fastest plausible increase, units per second: a drop below the previous value is a
    /// 64-bit wrap only if the wrapped increase is within this bound, else a reset; any known
    /// increase above it is reported as invalid rather than as a huge rate.
    pub max_rate: f64,
}

impl CounterDesc {
    /// Units to what the engine reports (bytes for data counters, counts otherwise). The only
    /// place a data unit becomes bytes.
    #[inline]
    pub fn to_output(&self, units: u64) -> f64 {
        units as f64 * f64::from(self.octets_per_unit)
    }

    /// The unit of `to_output` values and of rates (per second).
    pub fn unit(&self) -> &'static str {
        match self.class {
            Class::Data => "B",
            _ => "",
        }
    }
}

/// 800 Gb/s in 4-octet units per second, with headroom: no port counts faster.
const IB_DATA_MAX: f64 = 4.0e10;
/// Packets per second no port exceeds (64-byte packets at 800 Gb/s with headroom).
const IB_PKT_MAX: f64 = 2.0e9;
/// PortXmitWait ticks per second (one per transmit-clock cycle at most).
const IB_WAIT_MAX: f64 = 2.0e9;
/// Error events per second: symbol errors at line rate are the fastest.
const IB_ERR_MAX: f64 = 2.0e9;
/// Bytes per second of a Linux interface (1.6 Tb/s with headroom).
const NET_BYTES_MAX: f64 = 4.0e11;
const NET_PKT_MAX: f64 = 1.0e10;

const fn ib(name: &'static str, width: Width, class: Class) -> CounterDesc {
    let (octets_per_unit, max_rate) = match class {
        Class::Data => (4, IB_DATA_MAX),
        Class::Packets => (1, IB_PKT_MAX),
        Class::Congestion => (1, IB_WAIT_MAX),
        Class::Error => (1, IB_ERR_MAX),
    };
    CounterDesc {
        name,
        width,
        class,
        octets_per_unit,
        max_rate,
    }
}

const S4: Width = Width::Saturating(4);
const S8: Width = Width::Saturating(8);
const S16: Width = Width::Saturating(16);
const S32: Width = Width::Saturating(32);
const W64: Width = Width::Wrap64;

/// The 11 InfiniBand error counters (PortCounters; 4-, 8- and 16-bit, saturating) and
/// PortXmitWait (32-bit), shared by both tables.
macro_rules! ib_tail {
    () => {
        [
            ib("port_xmit_wait", S32, Class::Congestion),
            ib("symbol_error", S16, Class::Error),
            ib("link_error_recovery", S8, Class::Error),
            ib("link_downed", S8, Class::Error),
            ib("port_rcv_errors", S16, Class::Error),
            ib("port_rcv_remote_physical_errors", S16, Class::Error),
            ib("port_rcv_switch_relay_errors", S16, Class::Error),
            ib("port_xmit_discards", S16, Class::Error),
            ib("port_xmit_constraint_errors", S8, Class::Error),
            ib("port_rcv_constraint_errors", S8, Class::Error),
            ib("local_link_integrity_errors", S4, Class::Error),
            ib("excessive_buffer_overrun_errors", S4, Class::Error),
        ]
    };
}

const fn ib_table(data: Width) -> [CounterDesc; IB_COUNTERS] {
    let tail = ib_tail!();
    let mut out = [ib("", W64, Class::Data); IB_COUNTERS];
    out[0] = ib("port_xmit_data", data, Class::Data);
    out[1] = ib("port_rcv_data", data, Class::Data);
    out[2] = ib("port_xmit_packets", data, Class::Packets);
    out[3] = ib("port_rcv_packets", data, Class::Packets);
    let mut i = 0;
    while i < tail.len() {
        out[4 + i] = tail[i];
        i += 1;
    }
    out
}

/// Counters per InfiniBand port (and per simulated port).
pub const IB_COUNTERS: usize = 16;

/// InfiniBand with PortCountersExtended: data and packet counters are 64-bit and wrap.
pub static IB_EXTENDED: [CounterDesc; IB_COUNTERS] = ib_table(W64);

/// InfiniBand PortCounters only: data and packet counters are 32-bit and saturate.
pub static IB_LEGACY: [CounterDesc; IB_COUNTERS] = ib_table(S32);

const fn net(name: &'static str, class: Class) -> CounterDesc {
    let max_rate = match class {
        Class::Data => NET_BYTES_MAX,
        _ => NET_PKT_MAX,
    };
    CounterDesc {
        name,
        width: W64,
        class,
        octets_per_unit: 1,
        max_rate,
    }
}

/// `/sys/class/net/*/statistics` (all `unsigned long`: 64-bit on the hosts wasmon runs on).
pub static NET: [CounterDesc; 12] = [
    net("rx_bytes", Class::Data),
    net("tx_bytes", Class::Data),
    net("rx_packets", Class::Packets),
    net("tx_packets", Class::Packets),
    net("multicast", Class::Packets),
    net("rx_errors", Class::Error),
    net("tx_errors", Class::Error),
    net("rx_dropped", Class::Error),
    net("tx_dropped", Class::Error),
    net("rx_crc_errors", Class::Error),
    net("rx_fifo_errors", Class::Error),
    net("collisions", Class::Error),
];

/// Index of a counter by name in a table.
pub fn find(schema: &[CounterDesc], name: &str) -> Option<usize> {
    schema.iter().position(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_the_widths_of_the_spec() {
        assert_eq!(IB_EXTENDED[0].width, Width::Wrap64);
        assert_eq!(IB_LEGACY[0].width, Width::Saturating(32));
        let widths: Vec<u64> = IB_EXTENDED.iter().map(|c| c.width.max()).collect();
        for max in [15, 255, 65535, u32::MAX as u64, u64::MAX] {
            assert!(widths.contains(&max), "no counter of max {max}");
        }
        assert!(IB_EXTENDED.iter().all(|c| !c.name.is_empty()));
        let mut names: Vec<_> = IB_EXTENDED.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), IB_COUNTERS);
    }

    #[test]
    fn four_octet_units_become_bytes_once() {
        let d = &IB_EXTENDED[find(&IB_EXTENDED, "port_xmit_data").unwrap()];
        assert_eq!(d.to_output(1000), 4000.0);
        let p = &IB_EXTENDED[find(&IB_EXTENDED, "port_xmit_packets").unwrap()];
        assert_eq!(p.to_output(1000), 1000.0);
        assert_eq!(NET[0].to_output(1000), 1000.0);
    }
}
