//! Fibre Channel hosts, `/sys/class/fc_host/HOST/statistics/` (cluster 91, indom 39,
//! `fchost.*`, and `hinv.nfchost`): frame and word counters (words are 4 bytes), LIP and
//! NOS counts, error and dumped frames. Counters are hex (`0x1a2b`); all-ones means the
//! driver does not keep it and counts as 0, as pmdalinux reads it.
//!
//! Unlike pmdalinux 6.0.3, which stores the counters by its table's order and so answers
//! `out.frames` with the received bytes, each metric here is its named counter.
//!
//! Owns this directory only.

use super::rows::Rows;
use super::{Ctx, Group, Metric};
use crate::namespace::Values;

/// The statistics files, in item order (items 0-7).
const FILES: [&str; 8] = [
    "rx_frames",
    "tx_frames",
    "rx_words",
    "tx_words",
    "lip_count",
    "nos_count",
    "error_frames",
    "dumped_frames",
];

/// The items counted in 4-byte words (`rx_words`, `tx_words`): answered in bytes.
const WORD_ITEMS: [usize; 2] = [2, 3];

const NFCHOST: u32 = 16;

#[derive(Default)]
pub struct FcHost {
    /// Present when the root has `/sys`: `hinv.nfchost` is 0 without Fibre Channel,
    /// nothing without sysfs.
    hosts: Rows<8>,
}

/// C's `strtoull(s, NULL, 0)`: `0x` hex, leading `0` octal, else decimal; junk is 0.
fn strtoull0(s: &str) -> u64 {
    let s = s.trim();
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    let end = digits
        .bytes()
        .take_while(|b| (*b as char).is_digit(radix))
        .count();
    u64::from_str_radix(&digits[..end], radix).unwrap_or(0)
}

impl Group for FcHost {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 91 && (m.item < 8 || m.item == NFCHOST)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.hosts.reset(ctx.root.exists("sys"));
        for host in ctx.root.list("sys/class/fc_host") {
            let stats = format!("sys/class/fc_host/{host}/statistics");
            if host.starts_with('.') || !ctx.root.exists(&stats) {
                continue;
            }
            let mut c = ctx.root.counters(&stats, FILES, |t| match strtoull0(t) {
                // All ones: the driver does not keep this counter.
                u64::MAX => 0,
                v => v,
            });
            for i in WORD_ITEMS {
                c[i] <<= 2;
            }
            self.hosts.push(host, c);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        self.hosts.values(m.item, NFCHOST, out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch_f64, one};

    #[test]
    fn hosts_with_statistics_and_their_counters() {
        let s = "sys/class/fc_host/host1/statistics";
        let (_dir, mut a) = agent(&[
            (&format!("{s}/rx_frames"), "0x10\n"),
            (&format!("{s}/tx_frames"), "0x20\n"),
            (&format!("{s}/rx_words"), "0x100\n"),
            (&format!("{s}/tx_words"), "0xffffffffffffffff\n"),
            (&format!("{s}/lip_count"), "0x2\n"),
            (&format!("{s}/fcp_input_requests"), "0x9\n"),
            ("sys/class/fc_host/host2/port_name", "0x5001\n"),
        ]);
        a.expect(
            "hinv.nfchost 1
            fchost.in.frames host1=16
            fchost.out.frames host1=32
            fchost.in.bytes host1=1024
            fchost.out.bytes host1=0
            fchost.nos_count host1=0",
        );
        let (_dir, mut a) = agent(&[("sys/class/net/lo/mtu", "65536\n")]);
        assert_eq!(one(&mut a, "hinv.nfchost"), Some(0.0));
        assert!(fetch_f64(&mut a, "fchost.in.frames").is_empty());
    }
}
