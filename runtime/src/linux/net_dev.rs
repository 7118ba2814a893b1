//! `/proc/net/dev` (clusters 3 and 90): per-interface receive and transmit counters, and
//! their sums over the physical interfaces (`network.all.*`: not loopback, bonds, tunnels,
//! bridges or veth pairs, whose traffic other interfaces already count; see [`physical`]).
//! Interfaces are numbered in discovery order (the server's default), as pmdalinux's
//! instance cache numbers them.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// The 16 columns of a line: 8 receive (bytes packets errs drop fifo frame compressed
/// multicast), then 8 transmit (bytes packets errs drop fifo colls carrier compressed).
type Row = [u64; 16];

#[derive(Default)]
pub struct NetDev {
    buf: String,
    /// (interface, counters) in file order, after the interface filter.
    rows: Vec<(String, Row)>,
    ok: bool,
}

/// Two header lines, then `  name: 16 numbers`.
fn parse(text: &str, rows: &mut Vec<(String, Row)>, admit: impl Fn(&str) -> bool) {
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() || !admit(name) {
            continue;
        }
        let mut row = [0u64; 16];
        for (slot, x) in row.iter_mut().zip(rest.split_ascii_whitespace()) {
            *slot = x.parse().unwrap_or(0);
        }
        rows.push((name.to_string(), row));
    }
}

/// Each column alone, to slice one from.
const COLUMN: [usize; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
/// Receive and transmit summed: bytes, packets, errors, drops.
const BOTH: [[usize; 2]; 4] = [[0, 8], [1, 9], [2, 10], [3, 11]];

/// The columns (summed) of a cluster-3 item, `None` for items read elsewhere: 0-15 the
/// file's columns, 16-19 the totals of both directions, 20 the multicasts again
/// (`in.mcasts`).
fn columns(item: u32) -> Option<&'static [usize]> {
    let i = item as usize;
    Some(match i {
        0..=15 => &COLUMN[i..=i],
        16..=19 => &BOTH[i - 16],
        20 => &COLUMN[7..=7],
        _ => return None,
    })
}

/// The columns of a `network.all` item (cluster 90): the first four receive columns, the
/// first four transmit columns, then the totals of both.
fn all_columns(item: u32) -> Option<&'static [usize]> {
    let i = item as usize;
    Some(match i {
        0..=3 => &COLUMN[i..=i],
        4..=7 => &COLUMN[i + 4..=i + 4],
        8..=11 => &BOTH[i - 8],
        _ => return None,
    })
}

/// Counted in `network.all.*`: not loopback, an aggregate (bond, team) or a virtual
/// interface whose traffic a physical one carries again (tunnels, bridges of libvirt, CNI,
/// podman and docker, veth pairs). The pattern PCP's `linux/interfaces.conf` ships, which
/// pmdalinux reads (its built-in fallback, without that file, is only the first three and
/// `face`); an interface is excluded when its whole name is a prefix below and digits.
fn physical(name: &str) -> bool {
    let numbered = |p: &str, suffix: &str| {
        name.strip_prefix(p)
            .and_then(|n| n.strip_suffix(suffix))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    const NUMBERED: [&str; 8] = [
        "bond",
        "team",
        "tun",
        "virbr",
        "cni",
        "cni-podman",
        "docker",
        "veth",
    ];
    !(name == "lo"
        || name == "face"
        || NUMBERED.iter().any(|p| numbered(p, ""))
        || numbered("virbr", "-nic"))
}

fn sum(row: &Row, cols: &[usize]) -> u64 {
    cols.iter().fold(0u64, |a, &c| a.wrapping_add(row[c]))
}

impl Group for NetDev {
    fn answers(&self, m: &Metric) -> bool {
        (m.cluster == 3 && (columns(m.item).is_some() || m.item == 27)) || m.cluster == 90
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.rows.clear();
        self.ok = match ctx.root.read("proc/net/dev", &mut self.buf) {
            Ok(text) => {
                parse(text, &mut self.rows, |n| ctx.devices.interfaces.admits(n));
                true
            }
            Err(_) => false,
        };
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if !self.ok {
            return;
        }
        if m.cluster == 90 {
            let Some(cols) = all_columns(m.item) else {
                return;
            };
            let total = self
                .rows
                .iter()
                .filter(|(n, _)| physical(n))
                .fold(0u64, |a, (_, r)| a.wrapping_add(sum(r, cols)));
            out.push((String::new(), Value::Uint(total)));
        } else if m.item == 27 {
            out.push((String::new(), Value::Uint(self.rows.len() as u64)));
        } else if let Some(cols) = columns(m.item) {
            out.extend(
                self.rows
                    .iter()
                    .map(|(n, r)| (n.clone(), Value::Uint(sum(r, cols)))),
            );
        }
    }
}
