//! Login records (cluster 25): users logged in, how many of them are root, and utmp's
//! record count (`kernel.all.nsessions`, which pmdalinux counts over every record, not only
//! sessions), read from `var/run/utmp` (else `run/utmp`) under the root.
//!
//! Records are glibc's 384-byte `struct utmp` of 64-bit Linux (and of 32-bit x86, whose
//! layout glibc keeps the same): `ut_type` at 0, `ut_user` (32 bytes) at 44. A file without
//! login records (or none at all) counts zero, as getutent(3) finds none.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// sizeof(struct utmp) on Linux.
const RECORD: usize = 384;
const TYPE_AT: usize = 0;
const USER_AT: usize = 44;
const USER_LEN: usize = 32;
/// ut_type of a logged-in user's record.
const USER_PROCESS: i16 = 7;

#[derive(Default)]
pub struct Login {
    bytes: Vec<u8>,
    /// users, roots, records.
    now: [u64; 3],
}

fn count(bytes: &[u8]) -> [u64; 3] {
    let mut n = [0u64; 3];
    // A partial record at the end is ignored, as getutent(3) ignores it.
    for r in bytes.chunks_exact(RECORD) {
        let ty = i16::from_ne_bytes([r[TYPE_AT], r[TYPE_AT + 1]]);
        if ty == USER_PROCESS {
            let user = &r[USER_AT..USER_AT + USER_LEN];
            let user = &user[..user.iter().position(|&b| b == 0).unwrap_or(USER_LEN)];
            if user.is_empty() {
                continue;
            }
            if user == b"root" {
                n[1] += 1;
            }
            n[0] += 1;
        }
        n[2] += 1;
    }
    n
}

impl Group for Login {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 25
    }

    fn refresh(&mut self, ctx: &Ctx) {
        let mut bytes = std::mem::take(&mut self.bytes);
        for rel in ["var/run/utmp", "run/utmp"] {
            match ctx.root.read_bytes(rel, bytes) {
                Ok(b) => {
                    self.now = count(&b);
                    self.bytes = b;
                    return;
                }
                Err(_) => bytes = Vec::new(),
            }
        }
        self.now = [0; 3];
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if let Some(v) = self.now.get(m.item as usize) {
            out.push((String::new(), Value::Uint(*v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{one, tree};
    use super::*;

    fn record(ty: i16, user: &str) -> Vec<u8> {
        let mut r = vec![0u8; RECORD];
        r[..2].copy_from_slice(&ty.to_ne_bytes());
        r[USER_AT..USER_AT + user.len()].copy_from_slice(user.as_bytes());
        r
    }

    #[test]
    fn users_roots_and_records() {
        let dir = tree(&[]);
        let mut utmp = Vec::new();
        utmp.extend(record(2, "reboot")); // BOOT_TIME
        utmp.extend(record(USER_PROCESS, "root"));
        utmp.extend(record(USER_PROCESS, "alice"));
        utmp.extend(record(USER_PROCESS, "")); // skipped, and not counted as a record
        utmp.extend(record(8, "")); // DEAD_PROCESS
        utmp.extend([1u8; 100]); // a torn record
        std::fs::create_dir_all(dir.path().join("run")).unwrap();
        std::fs::write(dir.path().join("run/utmp"), &utmp).unwrap();
        let mut a = LinuxAgent::with_root(dir.path());
        a.expect(
            "kernel.all.nusers 2
            kernel.all.nroots 1
            kernel.all.nsessions 4",
        );
        let dir = tree(&[]);
        let mut a = LinuxAgent::with_root(dir.path());
        assert_eq!(one(&mut a, "kernel.all.nsessions"), Some(0.0));
    }
}
