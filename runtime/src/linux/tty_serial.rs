//! `/proc/tty/driver/serial` (cluster 74, `tty.serial.*`, indom 35): per serial port with
//! a known UART, its transmit/receive, error and break counters and its IRQ. The file is
//! root-only: unreadable, no values. Ports are named by their number (`"0"`, `"1"`).
//!
//! Owns this file only.

use super::rows::Rows;
use super::{Ctx, Group, Metric};
use crate::namespace::Values;

/// Counters of items 0..=6, by the `key:` that precedes each on a port's line.
const KEYS: [&str; 7] = ["tx:", "rx:", "fe:", "pe:", "brk:", "oe:", "irq:"];

#[derive(Default)]
pub struct TtySerial {
    buf: String,
    ports: Rows<7>,
}

/// `0: uart:16550A port:000003F8 irq:4 tx:12 rx:0 RTS|DTR` -> ("0", counters); `None` for
/// the `serinfo` header, an unknown UART or a port that is not a number.
fn port_line(line: &str) -> Option<(String, [u64; 7])> {
    let (port, rest) = line.split_once(':')?;
    let uart = rest
        .split_once("uart:")?
        .1
        .split_ascii_whitespace()
        .next()?;
    let n: i64 = port.trim().parse().ok()?;
    if n < 0 || uart == "unknown" {
        return None;
    }
    // 32-bit counters, as pmdalinux keeps them.
    let mut c = [0u64; 7];
    for (slot, key) in c.iter_mut().zip(KEYS) {
        // The first `key` anywhere on the line, as pmdalinux's strstr finds it.
        if let Some((_, after)) = line.split_once(key) {
            let digits: &str = &after[..after.bytes().take_while(u8::is_ascii_digit).count()];
            *slot = digits.parse::<u64>().map_or(0, |v| u64::from(v as u32));
        }
    }
    Some((port.trim().to_string(), c))
}

impl Group for TtySerial {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 74 && m.item < 7
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.ports.reset(true);
        if let Ok(text) = ctx.root.read("proc/tty/driver/serial", &mut self.buf) {
            for (port, counts) in text.lines().filter_map(port_line) {
                self.ports.push(port, counts);
            }
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        self.ports.column(m.item as usize, out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch_f64};

    #[test]
    fn ports_with_a_uart_and_their_counters() {
        let serial = "\
serinfo:1.0 driver revision:
0: uart:16550A port:000003F8 irq:4 tx:1234 rx:56 fe:1 pe:2 brk:3 oe:4 RTS|DTR
1: uart:unknown port:000002F8 irq:3
2: uart:16550A port:000003E8 irq:4 tx:0 rx:0
x: uart:16550A port:000003E8 irq:4 tx:9
";
        let (_dir, mut a) = agent(&[("proc/tty/driver/serial", serial)]);
        assert_eq!(
            fetch_f64(&mut a, "tty.serial.tx"),
            vec![("0".into(), 1234.0), ("2".into(), 0.0)]
        );
        assert_eq!(fetch_f64(&mut a, "tty.serial.overrun")[0].1, 4.0);
        assert_eq!(fetch_f64(&mut a, "tty.serial.brk")[0].1, 3.0);
        assert_eq!(fetch_f64(&mut a, "tty.serial.irq")[1], ("2".into(), 4.0));
        // Unreadable or absent: no values.
        let (_dir, mut a) = agent(&[]);
        assert!(fetch_f64(&mut a, "tty.serial.rx").is_empty());
    }
}
