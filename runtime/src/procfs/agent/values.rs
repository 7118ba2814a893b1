//! Values of the proc agent's metrics from one pass: each metric of each process converted as
//! pmdaproc converts it (times in ms from clock ticks, memory in Kbyte, its field shifts), the
//! singular metrics (counts, run queue), and terminal names. No /proc access but the /dev scan
//! for a terminal the drivers table does not name.

use std::collections::HashMap;
use std::path::Path;

use crate::namespace::Value;

use super::files::{
    self, IdNames, TtyDriver, VM_DATA, VM_EXE, VM_HWM, VM_LCK, VM_LIB, VM_PIN, VM_PTE, VM_RSS,
    VM_SIZE, VM_STK, VM_SWAP,
};
use super::pass::Proc;
use super::table::{
    CL_AUTOGROUP, CL_CGROUP, CL_CONTROL, CL_CWD, CL_EXE, CL_FD, CL_IO, CL_LABEL, CL_OOM, CL_RUNQ,
    CL_SCHEDSTAT, CL_SMAPS, CL_STAT, CL_STATM, CL_STATUS, Def,
};

/// What one fetch computed once for all metrics: the processes, what several metrics share,
/// and what converting a value needs.
pub(super) struct Fetched<'a> {
    pub procs: Vec<Proc>,
    pub autogroup_enabled: bool,
    pub drivers: Vec<TtyDriver>,
    /// Terminal names found by scanning /dev, per device number (this fetch only).
    pub ttys: HashMap<u64, String>,
    /// Clock ticks per second.
    pub hz: u64,
    /// Kbyte per page.
    pub page_kb: u64,
    pub ids: &'a IdNames,
    /// The agent's root (its /dev is scanned for terminal names).
    pub root: &'a Path,
}

/// Bound on entries of a /dev directory scanned for one terminal (a /dev with millions of
/// nodes is not walked on a fetch).
const MAX_DEV_ENTRIES: usize = 65_536;

/// The name below /dev of the character device `dev` in `root/dir`, as pmdaproc's fallback
/// finds it.
fn scan_dev(root: &Path, dir: &str, dev: u64) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    for e in std::fs::read_dir(root.join(dir))
        .ok()?
        .take(MAX_DEV_ENTRIES)
    {
        let Ok(e) = e else { continue };
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let Ok(meta) = std::fs::metadata(e.path()) else {
            continue;
        };
        if meta.file_type().is_char_device() && meta.rdev() == dev {
            let below = dir
                .strip_prefix("dev")
                .unwrap_or(dir)
                .trim_start_matches('/');
            return Some(if below.is_empty() {
                name.into_owned()
            } else {
                format!("{below}/{name}")
            });
        }
    }
    None
}

/// Clock ticks to milliseconds as pmdaproc computes them (64-bit, wrapping).
fn ms(ticks: u64, hz: u64) -> Value {
    Value::Uint(ticks.wrapping_mul(1000) / hz.max(1))
}

fn u32v(v: u64) -> Value {
    Value::Uint(u64::from(v as u32))
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

impl Fetched<'_> {
    /// One metric's value for one process; `None`: no value for it (not readable, not on
    /// this kernel, or not applicable).
    pub fn value(&mut self, def: &Def, p: &Proc) -> Option<Value> {
        let (hz, page_kb) = (self.hz, self.page_kb);
        let item = def.item as usize;
        Some(match def.cluster {
            CL_STAT => {
                let names = p.names.as_ref();
                match item {
                    0 => Value::Uint(u64::from(p.pid)),
                    41 => text(&names?.psargs),
                    40 => text(p.wchan.as_ref()?),
                    47 => text(p.environ.as_ref()?),
                    _ => {
                        let st = p.stat.as_ref()?;
                        match item {
                            1 => text(&st.cmd),
                            2 => text(&(st.state as char).to_string()),
                            3..=6 => u32v(st.get(item + 1)),
                            7 => {
                                let v = st.get(8) as i64;
                                if v < 0 {
                                    return None;
                                }
                                u32v(v as u64)
                            }
                            8..=12 => u32v(st.get(item + 1)),
                            13..=16 => ms(st.get(item + 1), hz),
                            // pmdaproc reads its priority from the field after `processor`
                            // (rt_priority), and each later field from the one after it.
                            17 => Value::Int(i64::from(
                                st.get(if st.fields >= 40 { 40 } else { 18 }) as i32,
                            )),
                            18 => Value::Int(i64::from(st.get(19) as i32)),
                            20 => u32v(st.get(21)),
                            21 => ms(st.get(22), hz),
                            22 => Value::Uint(st.get(23) / 1024),
                            23 => Value::Uint(st.get(24).wrapping_mul(page_kb)),
                            24 => Value::Uint(st.get(25) / 1024),
                            25..=33 => u32v(st.get(item + 1)),
                            34 => Value::Uint(st.get(35)),
                            35..=38 => u32v(st.get(item + 1)),
                            39 => text(&self.ttyname(st.get(7) & 0xffff_ffff)),
                            42 => u32v(st.get(41)),
                            43 => u32v(st.get(42)),
                            44..=46 => ms(st.get(item - 1), hz),
                            48 => text(files::policy_name(st.get(42) as i32)),
                            _ => return None,
                        }
                    }
                }
            }
            CL_STATM => match item {
                7 => text(p.maps.as_ref()?),
                _ => u32v(p.statm.as_ref()?[item].wrapping_mul(page_kb)),
            },
            CL_CGROUP => {
                let (line, cid) = p.cgroup.as_ref()?;
                text(if item == 0 { line } else { cid })
            }
            CL_LABEL => text(p.label.as_ref()?),
            CL_STATUS => {
                let s = p.status.as_ref()?;
                let vm = |i: usize| Value::Uint(u64::from(s.vm[i]));
                match item {
                    0..=3 => Value::Uint(u64::from(s.uid[item])),
                    // pmdaproc answers the real user id for the real group id.
                    4 => Value::Uint(u64::from(s.uid[0])),
                    5..=7 => Value::Uint(u64::from(s.gid[item - 4])),
                    8..=11 => text(self.ids.user(s.uid[item - 8])),
                    12..=15 => text(self.ids.group(s.gid[item - 12])),
                    16..=19 => text(&s.sig[item - 16]),
                    20 => vm(VM_SIZE),
                    21 => vm(VM_LCK),
                    22 => vm(VM_RSS),
                    23 => vm(VM_DATA),
                    24 => vm(VM_STK),
                    25 => vm(VM_EXE),
                    26 => vm(VM_LIB),
                    27 => vm(VM_SWAP),
                    28 => Value::Uint(u64::from(s.threads)),
                    29 => Value::Uint(u64::from(s.vctxsw)),
                    30 => Value::Uint(u64::from(s.nvctxsw)),
                    31 => text(s.cpus_allowed.as_ref()?),
                    32 => Value::Uint(u64::from(s.ngid?)),
                    33 => vm(0),
                    34 => vm(VM_PIN),
                    35 => vm(VM_HWM),
                    36 => vm(VM_PTE),
                    37..=40 => text(s.ns[item - 37].as_ref()?),
                    41 => Value::Uint(u64::from(s.tgid?)),
                    42 => Value::Uint(u64::from(s.envid?)),
                    43 | 44 => {
                        let real = u64::from(s.vm[VM_RSS]) + u64::from(s.vm[VM_SWAP]);
                        Value::Uint(if item == 43 {
                            real
                        } else {
                            real.saturating_sub(u64::from(s.vm[VM_LIB]))
                        })
                    }
                    _ => return None,
                }
            }
            CL_SCHEDSTAT => Value::Uint(p.sched.as_ref()?[item]),
            CL_IO => Value::Uint(p.io.as_ref()?[item]),
            CL_SMAPS => Value::Uint(p.smaps.as_ref()?[item]),
            CL_FD => Value::Uint(u64::from(p.fd?)),
            CL_OOM => Value::Uint(u64::from(p.oom?)),
            CL_EXE => text(p.exe.as_ref()?),
            CL_CWD => text(p.cwd.as_ref()?),
            CL_AUTOGROUP => {
                if !self.autogroup_enabled {
                    return None;
                }
                let (id, nice) = p.autogroup?;
                if item == 1 {
                    Value::Uint(u64::from(id))
                } else {
                    Value::Int(i64::from(nice))
                }
            }
            _ => return None,
        })
    }

    /// A metric with no instance domain.
    pub fn single(&self, def: &Def) -> Option<Value> {
        Some(match (def.cluster, def.item) {
            (CL_STAT, 99) => Value::Uint(self.procs.len() as u64),
            (CL_CONTROL, 1 | 2) => Value::Uint(0),
            (CL_CONTROL, 3) => text(""),
            (CL_RUNQ, item) => Value::Int(runq(&self.procs)[item as usize]),
            (CL_AUTOGROUP, 0) => Value::Uint(u64::from(self.autogroup_enabled)),
            _ => return None,
        })
    }

    fn ttyname(&mut self, dev: u64) -> String {
        if dev == 0 {
            return "?".into();
        }
        if let Some(name) = files::tty_from_drivers(&self.drivers, dev) {
            return name;
        }
        if let Some(name) = self.ttys.get(&dev) {
            return name.clone();
        }
        let name = ["dev/pts", "dev"]
            .iter()
            .find_map(|dir| scan_dev(self.root, dir, dev))
            .unwrap_or_else(|| "?".into());
        self.ttys.insert(dev, name.clone());
        name
    }
}

/// Processes by state as pmdaproc counts them: runnable, blocked, sleeping, stopped,
/// swapped (kernel threads: no address space), defunct, unknown, kernel (never counted).
fn runq(procs: &[Proc]) -> [i64; 8] {
    let mut q = [0i64; 8];
    for p in procs {
        let slot = match &p.stat {
            None => 6,
            Some(st) if st.state == b'Z' => 5,
            Some(st) if st.get(23) == 0 => 4,
            Some(st) => match st.state {
                b'R' => 0,
                b'S' => 2,
                b't' | b'T' => 3,
                b'P' | b'D' => 1,
                _ => 6,
            },
        };
        q[slot] += 1;
    }
    q
}
