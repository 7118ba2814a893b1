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
    if device.starts_with("/dev/mapper") || device.starts_with("/dev/md") || !device.starts_with('/')
    {
        return device.to_string();
    }
    let root = ctx.root.dir();
    match std::fs::canonicalize(ctx.root.path(device)) {
        Ok(p) => {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            let s = rel.to_string_lossy();
            if root == std::path::Path::new("/") {
                s.into_owned()
            } else {
                format!("/{}", s.trim_start_matches('/'))
            }
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
