//! Parsers for the per-process files the proc agent reads (`stat` in full, `status`, `statm`,
//! `io`, `smaps_rollup`, `schedstat`, `cgroup`, `autogroup`, `cmdline`), plus the instance name
//! PCP's proc agent gives a process, `/proc/tty/drivers`, and the passwd/group name tables.
//! Pure functions over byte slices (the name tables read their file when asked); no /proc
//! access here. Numbers are read as C's `strtoul` reads them (`util::strtoul`): the agent
//! answers what pmdaproc answers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::util::strtoul;

/// Bytes of an instance name and of `psargs` pmdaproc keeps (`MAXPATHLEN` less the pid).
pub const CMDLINE_CAP: usize = 4096;

/// The value after `key` on a `key value` line of a status-like file.
fn after<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    line.strip_prefix(key)
}

/// Every field of a stat line: the command between the first `(` and the last `)`, the state
/// letter, and fields 4 to 52 of proc(5) as `strtoul` reads them (absent ones are 0).
#[derive(Clone, Debug, PartialEq)]
pub struct FullStat {
    pub cmd: String,
    pub state: u8,
    /// `f[n]` is proc(5)'s field `n` (1-based); 0..=3 unused.
    pub f: [u64; 53],
    /// How many fields the line had (a line from an old kernel ends early).
    pub fields: usize,
}

impl Default for FullStat {
    fn default() -> Self {
        FullStat {
            cmd: String::new(),
            state: 0,
            f: [0; 53],
            fields: 0,
        }
    }
}

impl FullStat {
    pub fn get(&self, n: usize) -> u64 {
        self.f.get(n).copied().unwrap_or(0)
    }
}

/// A stat line; `None` when it has no `(comm)` or no state (a torn or foreign file).
pub fn parse_full_stat(b: &[u8]) -> Option<FullStat> {
    let open = b.iter().position(|&c| c == b'(')?;
    let close = b.iter().rposition(|&c| c == b')')?;
    if close < open {
        return None;
    }
    let mut st = FullStat {
        cmd: String::from_utf8_lossy(&b[open + 1..close]).into_owned(),
        ..FullStat::default()
    };
    let rest = b.get(close + 2..)?;
    st.state = *rest.first()?;
    st.fields = 3;
    let mut p = rest.get(1..).unwrap_or_default();
    for n in 4..st.f.len() {
        if p.is_empty() || p[0] == b'\n' {
            break;
        }
        let (v, r) = strtoul(&p[1..]);
        st.f[n] = v;
        st.fields = n;
        p = r;
    }
    Some(st)
}

/// What the agent uses of `/proc/PID/status`. String fields are kept as the kernel writes
/// them (blanks become commas in the namespace lists, as PCP's proc agent gives them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    pub uid: [u32; 4],
    pub gid: [u32; 4],
    /// VmPeak VmSize VmLck VmPin VmHWM VmRSS VmData VmStk VmExe VmLib VmPTE VmSwap, kB.
    pub vm: [u32; 12],
    pub threads: u32,
    pub vctxsw: u32,
    pub nvctxsw: u32,
    pub sig: [String; 4],
    pub cpus_allowed: Option<String>,
    pub ngid: Option<u32>,
    pub tgid: Option<u32>,
    pub envid: Option<u32>,
    /// NStgid NSpid NSpgid NSsid.
    pub ns: [Option<String>; 4],
}

pub const VM_KEYS: [&[u8]; 12] = [
    b"VmPeak:", b"VmSize:", b"VmLck:", b"VmPin:", b"VmHWM:", b"VmRSS:", b"VmData:", b"VmStk:",
    b"VmExe:", b"VmLib:", b"VmPTE:", b"VmSwap:",
];
const VM_PEAK: usize = 0;
pub const VM_SIZE: usize = 1;
pub const VM_LCK: usize = 2;
pub const VM_PIN: usize = 3;
pub const VM_HWM: usize = 4;
pub const VM_RSS: usize = 5;
pub const VM_DATA: usize = 6;
pub const VM_STK: usize = 7;
pub const VM_EXE: usize = 8;
pub const VM_LIB: usize = 9;
pub const VM_PTE: usize = 10;
pub const VM_SWAP: usize = 11;
const _: usize = VM_PEAK;

/// The rest of a line after its key, blanks skipped, optionally with inner blanks as commas.
fn text_value(v: &[u8], commas: bool) -> String {
    let v = v.trim_ascii_start();
    let s = String::from_utf8_lossy(v).into_owned();
    if commas {
        s.chars()
            .map(|c| if c.is_ascii_whitespace() { ',' } else { c })
            .collect()
    } else {
        s
    }
}

pub fn parse_status(b: &[u8]) -> Status {
    let mut st = Status::default();
    for line in b.split(|&c| c == b'\n') {
        let four = |v: &[u8]| {
            let mut out = [0u32; 4];
            let mut p = v;
            for slot in out.iter_mut() {
                let (n, r) = strtoul(p);
                *slot = n as u32;
                p = r;
            }
            out
        };
        if let Some(v) = after(line, b"Uid:") {
            st.uid = four(v);
        } else if let Some(v) = after(line, b"Gid:") {
            st.gid = four(v);
        } else if line.starts_with(b"Vm") {
            if let Some(i) = VM_KEYS.iter().position(|k| line.starts_with(k)) {
                st.vm[i] = strtoul(&line[VM_KEYS[i].len()..]).0 as u32;
            }
        } else if let Some(v) = after(line, b"Threads:") {
            st.threads = strtoul(v).0 as u32;
        } else if let Some(v) = after(line, b"voluntary_ctxt_switches:") {
            st.vctxsw = strtoul(v).0 as u32;
        } else if let Some(v) = after(line, b"nonvoluntary_ctxt_switches:") {
            st.nvctxsw = strtoul(v).0 as u32;
        } else if let Some(i) = [b"SigPnd:", b"SigBlk:", b"SigIgn:", b"SigCgt:"]
            .iter()
            .position(|k| line.starts_with(*k))
        {
            st.sig[i] = text_value(&line[7..], false);
        } else if let Some(v) = after(line, b"Cpus_allowed_list:") {
            st.cpus_allowed = Some(text_value(v, false));
        } else if let Some(v) = after(line, b"Ngid:") {
            st.ngid = Some(strtoul(v).0 as u32);
        } else if let Some(v) = after(line, b"Tgid:") {
            st.tgid = Some(strtoul(v).0 as u32);
        } else if let Some(v) = after(line, b"envID:") {
            st.envid = Some(strtoul(v).0 as u32);
        } else if let Some(i) = [&b"NStgid:"[..], b"NSpid:", b"NSpgid:", b"NSsid:"]
            .iter()
            .position(|k| line.starts_with(k))
        {
            let key = [7, 6, 7, 6][i];
            st.ns[i] = Some(text_value(&line[key..], true));
        }
    }
    st
}

/// Whitespace-separated numbers (statm, schedstat), up to `N`.
pub fn parse_numbers<const N: usize>(b: &[u8]) -> [u64; N] {
    let mut out = [0u64; N];
    let mut p = b;
    for slot in out.iter_mut() {
        let (v, r) = strtoul(p);
        *slot = v;
        p = r;
    }
    out
}

pub const IO_KEYS: [&[u8]; 7] = [
    b"rchar:",
    b"wchar:",
    b"syscr:",
    b"syscw:",
    b"read_bytes:",
    b"write_bytes:",
    b"cancelled_write_bytes:",
];

pub const SMAPS_KEYS: [&[u8]; 20] = [
    b"Rss:",
    b"Pss:",
    b"Pss_Anon:",
    b"Pss_File:",
    b"Pss_Shmem:",
    b"Shared_Clean:",
    b"Shared_Dirty:",
    b"Private_Clean:",
    b"Private_Dirty:",
    b"Referenced:",
    b"Anonymous:",
    b"LazyFree:",
    b"AnonHugePages:",
    b"ShmemPmdMapped:",
    b"FilePmdMapped:",
    b"Shared_Hugetlb:",
    b"Private_Hugetlb:",
    b"Swap:",
    b"SwapPss:",
    b"Locked:",
];

/// `key: value` lines (io, smaps_rollup): the value of each key of `keys`, 0 when absent.
pub fn parse_keyed<const N: usize>(b: &[u8], keys: &[&[u8]; N]) -> [u64; N] {
    let mut out = [0u64; N];
    for line in b.split(|&c| c == b'\n') {
        if let Some(i) = keys.iter().position(|k| line.starts_with(k)) {
            out[i] = strtoul(&line[keys[i].len()..]).0;
        }
    }
    out
}

/// SHA-256 hex length of a container id.
const CID_LEN: usize = 64;

/// `/proc/PID/cgroup` (`N:subsys:path` lines) as one line `subsys:path;...` (as `ps` shows
/// it), and the container id found in the `cpuset` line's path (`.../docker-ID.scope`,
/// `.../libpod-ID.scope` or a last component of 64 characters), empty when none.
pub fn parse_cgroup(b: &[u8]) -> (String, String) {
    let mut line_out = String::new();
    let mut cid = String::new();
    // Only whole lines count (the kernel ends each with a newline).
    let whole = b
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(&b[..0], |end| &b[..end]);
    for line in whole.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let rest = &line[colon + 1..];
        if !line_out.is_empty() {
            line_out.push(';');
        }
        line_out.push_str(&String::from_utf8_lossy(rest));
        if cid.is_empty()
            && let Some(path) = rest.strip_prefix(b"cpuset:")
            && let Some(slash) = path.iter().rposition(|&c| c == b'/')
            && slash > 0
        {
            let last = &path[slash + 1..];
            let found = if let Some(r) = last
                .strip_prefix(b"libpod-")
                .or_else(|| last.strip_prefix(b"docker-"))
            {
                r.iter()
                    .position(|&c| c == b'.')
                    .filter(|&dot| dot == CID_LEN)
                    .map(|dot| &r[..dot])
            } else {
                // pmdaproc measures the component with the line's newline and takes one
                // character less than it has: 65 characters, of which the first 64.
                (last.len() == CID_LEN + 1).then(|| &last[..CID_LEN])
            };
            if let Some(id) = found {
                cid = String::from_utf8_lossy(id).into_owned();
            }
        }
    }
    (line_out, cid)
}

/// `/proc/PID/autogroup`: `/autogroup-ID nice N`; what does not match reads as 0.
pub fn parse_autogroup(b: &[u8]) -> (u32, i32) {
    let Some(rest) = b.strip_prefix(b"/autogroup-") else {
        return (0, 0);
    };
    let (id, rest) = strtoul(rest);
    let nice = rest
        .strip_prefix(b" nice")
        .map_or(0, |r| strtoul(r).0 as i64 as i32);
    (id as u32, nice)
}

/// `psargs` from `cmdline` as read (at most [`CMDLINE_CAP`] less the pid's room): trailing
/// NULs dropped, inner NULs become spaces. A full read loses its last byte, and a leading NUL
/// makes it empty, as in pmdaproc.
pub fn psargs_of(cmdline: &[u8], room: usize) -> String {
    let mut b = cmdline;
    if b.len() >= room {
        b = &b[..room.saturating_sub(1)];
    }
    while let [rest @ .., 0] = b {
        b = rest;
    }
    if b.first() == Some(&0) {
        return String::new();
    }
    let joined: Vec<u8> = b.iter().map(|&c| if c == 0 { b' ' } else { c }).collect();
    String::from_utf8_lossy(&joined).into_owned()
}

/// The name pmdaproc gives a process without a command line (kernel threads, zombies):
/// `PID (Name)` from status's first line; its fixed offsets lose the first characters of
/// the name when the pid has more than six digits, as there.
pub fn status_name(pid: u32, status: &[u8]) -> String {
    let prefix = format!("{pid:06} ");
    let line_end = status
        .iter()
        .position(|&c| c == b'\n')
        .unwrap_or(status.len());
    let from = prefix.len() - 1;
    let name = status.get(from..line_end).unwrap_or_default();
    format!("{prefix}({})", String::from_utf8_lossy(name))
}

/// The instance name: the full name (`PID psargs`) up to its second space.
pub fn instance_name(full: &str) -> String {
    let cut = full
        .char_indices()
        .filter(|(_, c)| *c == ' ')
        .nth(1)
        .map_or(full.len(), |(i, _)| i);
    let mut cut = cut.min(CMDLINE_CAP);
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    full[..cut].to_string()
}

/// The pid at the start of an instance name (`000123 cmd`, or a bare number).
pub fn pid_of_instance(name: &str) -> Option<u32> {
    let head = name.split(' ').next()?;
    if head.is_empty() || !head.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    head.parse().ok()
}

/// PCP's names of scheduling policies.
pub fn policy_name(policy: i32) -> &'static str {
    match policy {
        0 => "NORMAL",
        1 => "FIFO",
        2 => "RR",
        3 => "BATCH",
        5 => "IDLE",
        6 => "DEADLN",
        _ => "?",
    }
}

/// One line of `/proc/tty/drivers`: device path below /dev, major, minor range.
#[derive(Clone, Debug, PartialEq)]
pub struct TtyDriver {
    pub path: String,
    pub major: u32,
    pub minor: u32,
    pub range: u32,
}

/// `/proc/tty/drivers`: `name /dev/path major minor[-last] type`; parsing stops at a line of
/// another shape, as PCP's does.
pub fn parse_tty_drivers(b: &[u8]) -> Vec<TtyDriver> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(b).lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() < 5 {
            break;
        }
        let Ok(major) = f[2].parse::<u32>() else {
            break;
        };
        let (lo, hi) = match f[3].split_once('-') {
            Some((a, b)) => (a.parse().ok(), b.parse().ok()),
            None => (f[3].parse().ok(), f[3].parse().ok()),
        };
        let (Some(minor), Some(range)) = (lo, hi) else {
            break;
        };
        out.push(TtyDriver {
            path: f[1].strip_prefix("/dev/").unwrap_or(f[1]).to_string(),
            major,
            minor,
            range,
        });
    }
    out
}

/// Major and minor of a device number as the kernel encodes `tty_nr` (and glibc `dev_t` for
/// majors below 4096).
pub fn dev_split(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// The terminal name of `dev` from the drivers table, as pmdaproc looks it up: the first
/// driver of that major decides (one exact device, or `path/minor` within its range).
pub fn tty_from_drivers(drivers: &[TtyDriver], dev: u64) -> Option<String> {
    let (major, minor) = dev_split(dev);
    let d = drivers.iter().find(|d| d.major == major)?;
    if minor == d.minor && minor == d.range {
        return Some(d.path.clone());
    }
    if minor < d.minor || minor > d.range {
        return None;
    }
    Some(format!("{}/{minor}", d.path))
}

/// Most bytes read of /etc/passwd or /etc/group (a directory service's dump can be large, but
/// a name table past this is not read whole).
const NAMES_FILE_CAP: u64 = 8 << 20;

/// Id-to-name tables from `ROOT/etc/passwd` and `ROOT/etc/group`, read again when a file's
/// modification time changes. An id not listed has the empty name, as in PCP.
#[derive(Default)]
pub struct IdNames {
    root: PathBuf,
    users: Table,
    groups: Table,
}

#[derive(Default)]
struct Table {
    stamp: Option<std::time::SystemTime>,
    names: HashMap<u32, String>,
}

impl Table {
    fn refresh(&mut self, path: &Path) {
        let stamp = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if stamp.is_some() && stamp == self.stamp {
            return;
        }
        self.stamp = stamp;
        self.names.clear();
        use std::io::Read;
        let mut text = Vec::new();
        if let Ok(f) = std::fs::File::open(path) {
            let _ = f.take(NAMES_FILE_CAP).read_to_end(&mut text);
        }
        for line in String::from_utf8_lossy(&text).lines() {
            let mut f = line.split(':');
            let (Some(name), Some(_), Some(id)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if let Ok(id) = id.parse::<u32>() {
                // The first entry of an id wins, as getpwuid answers.
                self.names.entry(id).or_insert_with(|| name.to_string());
            }
        }
    }
}

impl IdNames {
    pub fn new(root: &Path) -> IdNames {
        IdNames {
            root: root.to_path_buf(),
            ..IdNames::default()
        }
    }

    /// Re-read the tables whose files changed (once per fetch that needs names).
    pub fn refresh(&mut self) {
        self.users.refresh(&self.root.join("etc/passwd"));
        self.groups.refresh(&self.root.join("etc/group"));
    }

    pub fn user(&self, id: u32) -> &str {
        self.users.names.get(&id).map_or("", String::as_str)
    }

    pub fn group(&self, id: u32) -> &str {
        self.groups.names.get(&id).map_or("", String::as_str)
    }
}
