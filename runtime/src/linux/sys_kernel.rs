//! `/proc/sys/kernel` (cluster 72): the entropy pool's available bits and size
//! (`random/entropy_avail`, `random/poolsize`), the largest PID (`pid_max`) and the number of
//! pseudo-terminals in use (`pty/nr`).
//!
//! As pmdalinux: the entropy pair has values only when both files read as numbers, and an
//! unreadable `pid_max` is reported as the kernel's own ceiling, 2^22.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// The kernel's PID_MAX_LIMIT on 64-bit hosts: what pmdalinux reports when `pid_max` is
/// unreadable.
const PID_MAX_LIMIT: u64 = 1 << 22;

#[derive(Default)]
pub struct SysKernel {
    /// (available, pool size) when both read.
    entropy: Option<(u64, u64)>,
    pid_max: u64,
    nptys: Option<u64>,
}

/// The first number of a /proc/sys file, as `fscanf("%u")` reads it.
fn first_number(ctx: &Ctx, rel: &str) -> Option<u64> {
    let text = ctx.root.attr(rel).ok()?;
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    text[..digits].parse::<u64>().ok().map(|v| v as u32 as u64)
}

impl Group for SysKernel {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 72
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.pid_max = first_number(ctx, "proc/sys/kernel/pid_max").unwrap_or(PID_MAX_LIMIT);
        self.nptys = first_number(ctx, "proc/sys/kernel/pty/nr");
        self.entropy = first_number(ctx, "proc/sys/kernel/random/entropy_avail")
            .zip(first_number(ctx, "proc/sys/kernel/random/poolsize"));
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let v = match m.item {
            0 => self.entropy.map(|e| e.0),
            1 => self.entropy.map(|e| e.1),
            2 => Some(self.pid_max),
            3 => self.nptys,
            _ => None,
        };
        if let Some(v) = v {
            out.push((String::new(), Value::Uint(v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, one};

    #[test]
    fn files_of_proc_sys_kernel() {
        let (_dir, mut a) = agent(&[
            ("proc/sys/kernel/pid_max", "4194304\n"),
            ("proc/sys/kernel/pty/nr", "3\n"),
            ("proc/sys/kernel/random/entropy_avail", "256\n"),
            ("proc/sys/kernel/random/poolsize", "256\n"),
        ]);
        a.expect(
            "kernel.all.pid_max 4194304
            kernel.all.nptys 3
            kernel.all.entropy.avail 256
            kernel.all.entropy.poolsize 256",
        );
    }

    #[test]
    fn an_old_kernel_without_poolsize_has_no_entropy_and_the_default_pid_max() {
        let (_dir, mut a) = agent(&[
            ("proc/sys/kernel/random/entropy_avail", "3000\n"),
            ("proc/sys/kernel/pid_max", "garbage\n"),
        ]);
        a.expect(
            "kernel.all.entropy.avail -
            kernel.all.pid_max 4194304
            kernel.all.nptys -",
        );
    }

    #[test]
    fn this_machines_pid_max() {
        let want: f64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut a = LinuxAgent::new();
        assert_eq!(one(&mut a, "kernel.all.pid_max"), Some(want));
    }
}
