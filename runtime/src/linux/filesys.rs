//! Mounted filesystems (clusters 5 and 34): `/proc/self/mounts` for which mounts pmdalinux
//! reports (block-device filesystems and `/` in `filesys.*` named by device, tmpfs mounts
//! in `tmpfs.*` named by mount point; pseudo filesystems, NFS and automounts left out), and
//! `statfs` of each for sizes in Kbyte, file counts, fullness and block size.
//!
//! `statfs` runs in [`super::statfs`]'s pool with a deadline per mount, so a hung NFS or
//! FUSE mount costs only its own values: it is logged once when it stops answering and
//! once when it answers again. The `devices.filesystems` filter applies to mount points.
//!
//! Under a root other than `/` the mounts listed are the captured host's; `statfs` of
//! their mount points on this host would describe this host's filesystems, so figures are
//! read only for mount points that exist as directories under the root (`ROOT/mnt/x`), and
//! the others have values only for `filesys.mountdir`.
//!
//! Owns the filesystem metrics only.

use std::path::PathBuf;

use super::statfs::{Answer, FsStat, Pool, StatfsFn};
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// Filesystem types pmdalinux leaves out (pseudo filesystems, NFS, automounts).
fn skipped(ty: &str) -> bool {
    matches!(
        ty,
        "proc"
            | "nfs"
            | "devfs"
            | "devpts"
            | "devtmpfs"
            | "squashfs"
            | "selinuxfs"
            | "securityfs"
            | "configfs"
            | "cgroup"
            | "sysfs"
    ) || ty.starts_with("auto")
}

/// pmdalinux looks for mount options in a 128-byte copy of the option string.
const OPTIONS_SEEN: usize = 127;

#[derive(Clone, Debug)]
struct Mount {
    /// Instance name: the device (resolved), or the mount point for tmpfs.
    name: String,
    path: String,
    readonly: bool,
    tmpfs: bool,
    stat: Option<FsStat>,
}

pub struct FileSys {
    buf: String,
    mounts: Vec<Mount>,
    pool: Pool,
    /// Mount points that did not answer, logged once until they answer again.
    hung: std::collections::HashSet<String>,
    ok: bool,
}

impl Default for FileSys {
    fn default() -> Self {
        FileSys::with_statfs(std::sync::Arc::new(super::statfs::statfs))
    }
}

impl FileSys {
    /// With `call` in place of the kernel's `statfs` (tests).
    pub fn with_statfs(call: StatfsFn) -> FileSys {
        FileSys {
            buf: String::new(),
            mounts: Vec::new(),
            pool: Pool::new(call),
            hung: Default::default(),
            ok: false,
        }
    }

    #[cfg(test)]
    pub fn set_deadline(&mut self, d: std::time::Duration) {
        self.pool.deadline = d;
    }

    #[cfg(test)]
    pub fn workers(&self) -> usize {
        self.pool.workers()
    }
}

/// `device` resolved through links as pmdalinux's `realpath` does (under the root), except
/// dm and md names, kept persistent.
fn resolve(ctx: &Ctx, device: &str) -> String {
    if device.starts_with("/dev/mapper")
        || device.starts_with("/dev/md")
        || !device.starts_with('/')
    {
        return device.to_string();
    }
    let root = ctx.root.dir();
    match std::fs::canonicalize(ctx.root.path(device)) {
        Ok(p) if root == std::path::Path::new("/") => p.to_string_lossy().into_owned(),
        Ok(p) => {
            // Back to the captured host's view: ROOT/dev/sda1 is /dev/sda1.
            let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy();
            format!("/{}", rel.trim_start_matches('/'))
        }
        Err(_) => device.to_string(),
    }
}

fn parse(ctx: &Ctx, text: &str, out: &mut Vec<Mount>) {
    for line in text.lines() {
        let mut it = line.split(' ');
        let (Some(device), Some(path), Some(ty), Some(options)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        if device.is_empty() || skipped(ty) {
            continue;
        }
        let tmpfs = ty == "tmpfs";
        if !tmpfs && !device.starts_with("/dev") && path != "/" {
            continue;
        }
        if !ctx.devices.filesystems.admits(path) {
            continue;
        }
        let name = resolve(ctx, if tmpfs { path } else { device });
        // A device mounted twice is reported once, at its first mount point.
        if out.iter().any(|m| m.tmpfs == tmpfs && m.name == name) {
            continue;
        }
        let mut seen = options.len().min(OPTIONS_SEEN);
        while !options.is_char_boundary(seen) {
            seen -= 1;
        }
        out.push(Mount {
            name,
            path: path.to_string(),
            readonly: options[..seen].split(',').any(|o| o == "ro"),
            tmpfs,
            stat: None,
        });
    }
}

/// Kbyte from a count of blocks of `bsize` bytes.
fn kbytes(blocks: u64, bsize: u64) -> u64 {
    blocks.wrapping_mul(bsize) / 1024
}

fn full(s: &FsStat) -> f64 {
    let used = s.blocks.wrapping_sub(s.bfree);
    let whole = used.wrapping_add(s.bavail);
    if whole == 0 {
        0.0
    } else {
        100.0 * used as f64 / whole as f64
    }
}

impl Group for FileSys {
    fn answers(&self, m: &Metric) -> bool {
        matches!(m.cluster, 5 | 34)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.mounts.clear();
        let mut buf = std::mem::take(&mut self.buf);
        let read = match ctx.root.read("proc/self/mounts", &mut buf) {
            Ok(t) => Ok(t),
            Err(_) => ctx.root.read("proc/mounts", &mut buf),
        };
        self.ok = match read {
            Ok(text) => {
                parse(ctx, text, &mut self.mounts);
                true
            }
            Err(_) => false,
        };
        self.buf = buf;
        if !self.ok {
            return;
        }
        let live = ctx.root.dir() == std::path::Path::new("/");
        // (mount index, path to stat)
        let targets: Vec<(usize, PathBuf)> = self
            .mounts
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                if live {
                    return Some((i, PathBuf::from(&m.path)));
                }
                let p = ctx.root.path(&m.path);
                p.is_dir().then_some((i, p))
            })
            .collect();
        let paths: Vec<PathBuf> = targets.iter().map(|(_, p)| p.clone()).collect();
        let answers = self.pool.stat_all(&paths);
        for ((i, _), a) in targets.iter().zip(answers) {
            let m = &mut self.mounts[*i];
            match a {
                Answer::Stat(s) => {
                    m.stat = Some(s);
                    if self.hung.remove(&m.path) {
                        tracing::info!(mount = %m.path, "filesystem {} answers statfs again", m.path);
                    }
                }
                Answer::Failed => {}
                Answer::Hung => {
                    if self.hung.insert(m.path.clone()) {
                        tracing::warn!(mount = %m.path, "filesystem {} not answering statfs", m.path);
                    }
                }
            }
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if !self.ok {
            return;
        }
        let tmpfs = m.cluster == 34;
        let mounts = self.mounts.iter().filter(|x| x.tmpfs == tmpfs);
        if m.cluster == 5 && m.item == 0 {
            out.push((String::new(), Value::Uint(mounts.count() as u64)));
            return;
        }
        // tmpfs items 1-7 are filesys items 1-6 and 8 (no mount point: it is the name).
        let item = if tmpfs && m.item == 7 { 8 } else { m.item };
        for x in mounts {
            let v = match item {
                7 => Some(Value::Text(x.path.clone())),
                _ => x.stat.as_ref().and_then(|s| {
                    Some(match item {
                        1 => Value::Uint(kbytes(s.blocks, s.bsize)),
                        2 => Value::Uint(kbytes(s.blocks.wrapping_sub(s.bfree), s.bsize)),
                        3 => Value::Uint(kbytes(s.bfree, s.bsize)),
                        // 32-bit in pmdalinux.
                        4 => Value::Uint(s.files as u32 as u64),
                        5 => Value::Uint(s.files.wrapping_sub(s.ffree) as u32 as u64),
                        6 => Value::Uint(s.ffree as u32 as u64),
                        8 => Value::Real(full(s)),
                        9 => Value::Uint(s.bsize as u32 as u64),
                        10 => Value::Uint(kbytes(s.bavail, s.bsize)),
                        // Needs a statfs answer in pmdalinux too.
                        11 => Value::Uint(x.readonly.into()),
                        _ => return None,
                    })
                }),
            };
            if let Some(v) = v {
                out.push((x.name.clone(), v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{fetch, fetch_f64, one, tree};
    use super::super::{Devices, LinuxAgent, Root, table};
    use super::*;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const MOUNTS: &str = "\
/dev/root / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
devtmpfs /dev devtmpfs rw,nosuid,size=4096k 0 0
tmpfs /run tmpfs rw,nosuid,nodev,size=1620424k,mode=755 0 0
/dev/mapper/vg0-home /home xfs rw,relatime,attr2 0 0
/dev/nvme0n1p1 /boot/efi vfat ro,relatime,fmask=0077 0 0
server:/export /net/export nfs4 rw,relatime,vers=4.2 0 0
server:/old /net/old nfs rw,relatime 0 0
systemd-1 /mnt/auto autofs rw,relatime 0 0
/dev/mapper/vg0-home /home2 xfs rw,relatime 0 0
/dev/sdb1 /scratch ext4 rw 0 0
";

    fn stat_of(path: &Path) -> FsStat {
        // Sizes that say which mount was asked.
        let n = path.to_string_lossy().len() as u64;
        FsStat {
            blocks: 1000 * n,
            bfree: 400 * n,
            bavail: 300 * n,
            files: 50 * n,
            ffree: 20 * n,
            bsize: 4096,
        }
    }

    fn host() -> tempfile::TempDir {
        let dir = tree(&[("proc/self/mounts", MOUNTS)]);
        for d in ["run", "home", "boot/efi", "scratch", "net/export"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        dir
    }

    fn values(g: &FileSys, name: &str) -> Vec<(String, Value)> {
        let t = table();
        let m = t.by_name(name).unwrap();
        let mut out = Values::new();
        g.values(m, &mut out);
        out
    }

    #[test]
    fn reports_the_mounts_pmdalinux_reports() {
        let dir = host();
        let root = Root::new(dir.path());
        let devices = Devices::default();
        let ctx = Ctx {
            root: &root,
            devices: &devices,
        };
        let mut g = FileSys::with_statfs(Arc::new(|p: &Path| Ok(stat_of(p))));
        g.refresh(&ctx);
        let names: Vec<String> = values(&g, "filesys.mountdir")
            .into_iter()
            .map(|(n, v)| format!("{n}={v:?}"))
            .collect();
        assert_eq!(
            names,
            [
                "/dev/root=Text(\"/\")",
                "/dev/mapper/vg0-home=Text(\"/home\")",
                "/dev/nvme0n1p1=Text(\"/boot/efi\")",
                "/dev/sdb1=Text(\"/scratch\")",
            ]
        );
        assert_eq!(
            values(&g, "hinv.nfilesys"),
            [(String::new(), Value::Uint(4))]
        );
        // statfs of ROOT/boot/efi, in Kbyte.
        let p = dir.path().join("boot/efi");
        let s = stat_of(&p);
        let cap = values(&g, "filesys.capacity");
        assert_eq!(cap[2].1, Value::Uint(s.blocks * 4));
        assert_eq!(
            values(&g, "filesys.used")[2].1,
            Value::Uint((s.blocks - s.bfree) * 4)
        );
        assert_eq!(
            values(&g, "filesys.usedfiles")[2].1,
            Value::Uint(s.files - s.ffree)
        );
        let full = 100.0 * 600.0 / 900.0;
        assert!(
            matches!(values(&g, "filesys.full")[2].1, Value::Real(f) if (f - full).abs() < 1e-9)
        );
        assert_eq!(
            values(&g, "filesys.readonly")
                .into_iter()
                .map(|(_, v)| v)
                .collect::<Vec<_>>(),
            [
                Value::Uint(0),
                Value::Uint(0),
                Value::Uint(1),
                Value::Uint(0)
            ]
        );
        assert_eq!(
            values(&g, "tmpfs.capacity"),
            [(
                "/run".to_string(),
                Value::Uint(stat_of(&dir.path().join("run")).blocks * 4)
            )]
        );
        // A mount point absent under the root: no statfs figures.
        let dir2 = tree(&[("proc/self/mounts", MOUNTS)]);
        let root2 = Root::new(dir2.path());
        let ctx2 = Ctx {
            root: &root2,
            devices: &devices,
        };
        g.refresh(&ctx2);
        assert_eq!(values(&g, "filesys.capacity").len(), 1); // only "/" (the tree itself)
        assert_eq!(values(&g, "filesys.mountdir").len(), 4);
    }

    #[test]
    fn a_hung_statfs_never_blocks_a_fetch_and_threads_do_not_pile_up() {
        let dir = host();
        let root = Root::new(dir.path());
        let hung = dir.path().join("home");
        let h = hung.clone();
        let mut g = FileSys::with_statfs(Arc::new(move |p: &Path| {
            if p == h {
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            Ok(stat_of(p))
        }));
        g.set_deadline(Duration::from_millis(300));
        let devices = Devices::default();
        let ctx = Ctx {
            root: &root,
            devices: &devices,
        };
        let t = Instant::now();
        g.refresh(&ctx);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        let cap: Vec<String> = values(&g, "filesys.capacity")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(cap, ["/dev/root", "/dev/nvme0n1p1", "/dev/sdb1"]);
        assert!(g.hung.contains("/home"));
        let workers = g.workers();
        for _ in 0..10 {
            let t = Instant::now();
            g.refresh(&ctx);
            assert!(
                t.elapsed() < Duration::from_millis(250),
                "{:?}",
                t.elapsed()
            );
            assert_eq!(values(&g, "filesys.capacity").len(), 3);
            assert_eq!(values(&g, "filesys.mountdir").len(), 4);
        }
        assert_eq!(g.workers(), workers);
    }

    #[test]
    fn the_filesystem_filter_applies_to_mount_points() {
        let dir = host();
        let devices = Devices {
            filesystems: crate::linux::DeviceFilter {
                include: vec![],
                exclude: vec!["/scratch".into(), "/run*".into()],
            },
            ..Devices::default()
        };
        let mut a = LinuxAgent::with_options(Root::new(dir.path()), devices);
        assert_eq!(one(&mut a, "hinv.nfilesys"), Some(3.0));
        assert!(fetch(&mut a, "tmpfs.capacity").is_empty());
        let names: Vec<String> = fetch_f64(&mut a, "filesys.blocksize")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            ["/dev/root", "/dev/mapper/vg0-home", "/dev/nvme0n1p1"]
        );
    }

    #[test]
    fn this_hosts_root_filesystem() {
        let mut a = LinuxAgent::new();
        let dirs = fetch(&mut a, "filesys.mountdir");
        let Some((dev, _)) = dirs.iter().find(|(_, v)| *v == Value::Text("/".into())) else {
            return; // a container may mount / from a non-device
        };
        let cap = fetch_f64(&mut a, "filesys.capacity");
        let real = super::super::statfs::statfs(Path::new("/")).unwrap();
        let (_, c) = cap.iter().find(|(n, _)| n == dev).unwrap();
        assert_eq!(*c, (real.blocks * real.bsize / 1024) as f64);
    }
}
