//! `/proc/sys/fs` (cluster 27): open file handles (`file-nr`), inodes (`inode-state`),
//! dentries (`dentry-state`) and asynchronous I/O contexts (`aio-nr`, `aio-max-nr`).
//!
//! As pmdalinux: all five files are needed, and a file's leading numbers are read as 32-bit
//! signed integers (`%d`); with any file missing or malformed the cluster has no values.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

#[derive(Default)]
pub struct SysFs {
    buf: String,
    /// Items 0..=8: files count, free, max; inodes count, free; dentries count, free; aio
    /// count, max.
    now: Option<[i64; 9]>,
}

/// The first `N` whitespace-separated fields of `text` as `%d` reads them.
fn leading<const N: usize>(text: &str) -> Option<[i64; N]> {
    let mut out = [0i64; N];
    let mut f = text.split_ascii_whitespace();
    for slot in &mut out {
        *slot = i64::from(f.next()?.parse::<i64>().ok()? as i32);
    }
    Some(out)
}

impl SysFs {
    fn read(&mut self, ctx: &Ctx) -> Option<[i64; 9]> {
        let mut r = |rel: &str| -> Option<String> {
            ctx.root.read(rel, &mut self.buf).ok().map(str::to_string)
        };
        let files: [i64; 3] = leading(&r("proc/sys/fs/file-nr")?)?;
        let inodes: [i64; 2] = leading(&r("proc/sys/fs/inode-state")?)?;
        let dentry: [i64; 2] = leading(&r("proc/sys/fs/dentry-state")?)?;
        let [aio_max]: [i64; 1] = leading(&r("proc/sys/fs/aio-max-nr")?)?;
        let [aio]: [i64; 1] = leading(&r("proc/sys/fs/aio-nr")?)?;
        Some([
            files[0], files[1], files[2], inodes[0], inodes[1], dentry[0], dentry[1], aio, aio_max,
        ])
    }
}

impl Group for SysFs {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 27
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.now = self.read(ctx);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if let Some(v) = self.now.and_then(|n| n.get(m.item as usize).copied()) {
            out.push((String::new(), Value::Int(v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{one, tree};

    fn files(aio: bool) -> Vec<(&'static str, &'static str)> {
        let mut v = vec![
            ("proc/sys/fs/file-nr", "1184\t0\t9223372036854775807\n"),
            ("proc/sys/fs/inode-state", "41231\t102\t0\t0\t0\t0\t0\n"),
            ("proc/sys/fs/dentry-state", "52000\t31000\t45\t0\t1200\t0\n"),
        ];
        if aio {
            v.push(("proc/sys/fs/aio-nr", "12\n"));
            v.push(("proc/sys/fs/aio-max-nr", "65536\n"));
        }
        v
    }

    #[test]
    fn the_five_files_as_32_bit_counts() {
        let dir = tree(&files(true));
        let mut a = LinuxAgent::with_root(dir.path());
        a.expect(
            "vfs.files.count 1184
            # A file-max of 2^63-1 (kernels since 5.x) wraps to -1 as `%d` stores it.
            vfs.files.max -1
            vfs.inodes.free 102
            vfs.dentry.count 52000
            vfs.aio.count 12
            vfs.aio.max 65536",
        );
    }

    #[test]
    fn a_kernel_without_aio_files_has_no_vfs_values() {
        let dir = tree(&files(false));
        let mut a = LinuxAgent::with_root(dir.path());
        assert_eq!(one(&mut a, "vfs.files.count"), None);
    }
}
