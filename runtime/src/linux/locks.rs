//! `/proc/locks` (cluster 75): file locks held, by kind (POSIX, including `ACCESS` and
//! open-file-description `OFDLCK` locks; `FLOCK`; `LEASE` and `DELEG`) and by access (read,
//! write; `RW` counts as both).

use super::Metric;
use super::whole::{Whole, WholeFile};
use crate::namespace::{Value, Values};

pub type Locks = Whole<LocksFile>;

pub struct LocksFile;

/// `1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF` → counts by kind and access. Lines
/// pmdalinux's `sscanf("%*d: %15s %*s %15s %*d")` would not match are skipped; blocked
/// waiters (`1: -> POSIX ...`) are not counted, as their kind reads as `->`.
fn parse(text: &str) -> [[u64; 3]; 3] {
    let mut out = [[0u64; 3]; 3];
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(id) = f.next() else { continue };
        // `%*d:`: a number with its colon attached.
        let Some(num) = id.strip_suffix(':') else {
            continue;
        };
        let digits = num.strip_prefix(['-', '+']).unwrap_or(num);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // The trailing `%*d` is not counted in sscanf's result: the pid is not checked.
        let (Some(kind), Some(_), Some(access)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let k = if ["POSIX", "ACCESS", "OFDLCK"]
            .iter()
            .any(|p| kind.starts_with(p))
        {
            0
        } else if kind.starts_with("FLOCK") {
            1
        } else if kind.starts_with("DELEG") || kind.starts_with("LEASE") {
            2
        } else {
            continue;
        };
        out[k][2] += 1;
        if access.starts_with("READ") {
            out[k][0] += 1;
        } else if access.starts_with("WRITE") {
            out[k][1] += 1;
        } else if access.starts_with("RW") {
            out[k][0] += 1;
            out[k][1] += 1;
        }
    }
    out
}

impl WholeFile for LocksFile {
    const CLUSTER: u32 = 75;
    const PATH: &'static str = "proc/locks";
    /// Per kind (posix, flock, lease): [read, write, count], items 0..=8 in that order.
    type Parsed = [[u64; 3]; 3];

    fn parse(text: &str) -> Option<[[u64; 3]; 3]> {
        Some(parse(text))
    }

    fn values(n: &[[u64; 3]; 3], m: &Metric, out: &mut Values) {
        let (k, f) = (m.item as usize / 3, m.item as usize % 3);
        if let Some(v) = n.get(k).map(|x| x[f]) {
            out.push((String::new(), Value::Uint(v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, one};

    #[test]
    fn kinds_and_access_counted() {
        let text = "1: POSIX  ADVISORY  WRITE 711 00:19:527 0 EOF\n\
2: FLOCK  ADVISORY  WRITE 652 00:19:530 0 EOF\n\
3: OFDLCK ADVISORY  READ  -1 00:06:9 0 EOF\n\
4: LEASE  ACTIVE    READ  900 08:01:33 0 EOF\n\
5: DELEG  ACTIVE    RW  901 08:01:34 0 EOF\n\
5: -> POSIX  ADVISORY  WRITE 712 00:19:527 0 EOF\n\
junk\n";
        let (_dir, mut a) = agent(&[("proc/locks", text)]);
        a.expect(
            "vfs.locks.posix.count 2
            vfs.locks.posix.read 1
            vfs.locks.posix.write 1
            vfs.locks.flock.write 1
            vfs.locks.lease.count 2
            vfs.locks.lease.read 2
            vfs.locks.lease.write 1",
        );
        let (_dir, mut a) = agent(&[]);
        assert_eq!(one(&mut a, "vfs.locks.flock.count"), None);
    }
}
