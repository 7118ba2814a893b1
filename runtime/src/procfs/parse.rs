//! Allocation-free parsers for the /proc files the reader uses: `stat` (of a process or a
//! task), `schedstat` and `wchan`, plus the fixed-size name type that holds `comm`/`wchan`
//! without a heap allocation. Pure functions over byte slices; no I/O here.

use std::fmt;

/// A short name stored inline (no allocation): `comm` (the kernel caps it at 64 bytes for
/// kernel workers, 16 otherwise) or a `wchan` symbol (truncated past N bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Name<const N: usize> {
    len: u8,
    buf: [u8; N],
}

impl<const N: usize> Default for Name<N> {
    fn default() -> Self {
        Name {
            len: 0,
            buf: [0; N],
        }
    }
}

impl<const N: usize> Name<N> {
    pub fn from_bytes(b: &[u8]) -> Self {
        let len = b.len().min(N).min(u8::MAX as usize);
        let mut buf = [0; N];
        buf[..len].copy_from_slice(&b[..len]);
        Name {
            len: len as u8,
            buf,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }

    /// The name as text; bytes that are not UTF-8 (comm is arbitrary bytes) end it early.
    pub fn as_str(&self) -> &str {
        let b = self.as_bytes();
        match std::str::from_utf8(b) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or_default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<const N: usize> fmt::Debug for Name<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> fmt::Display for Name<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub type Comm = Name<64>;
pub type Wchan = Name<48>;

/// The fields of `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) that wasmon uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskStat {
    pub comm: Comm,
    /// One of `R S D Z T t X I P W K`.
    pub state: u8,
    pub ppid: u32,
    pub pgrp: i32,
    pub session: i32,
    pub tty_nr: i32,
    /// Foreground process group of the terminal (`+` in ps's STAT when equal to `pgrp`).
    pub tpgid: i32,
    pub minflt: u64,
    pub majflt: u64,
    /// CPU time in user mode, clock ticks.
    pub utime: u64,
    /// CPU time in kernel mode, clock ticks.
    pub stime: u64,
    pub priority: i64,
    pub nice: i64,
    pub num_threads: u32,
    /// Start time after boot, clock ticks; with the pid it identifies a process across reuse.
    pub starttime: u64,
    /// Virtual memory size, bytes.
    pub vsize: u64,
    /// Resident set size, pages.
    pub rss_pages: u64,
    /// CPU last run on.
    pub processor: i32,
}

/// Why a /proc file could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("no `(comm)` in stat line")]
    NoComm,
    #[error("stat line has too few fields")]
    Truncated,
    #[error("bad number in field {0}")]
    BadNumber(usize),
}

#[inline]
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

#[inline]
fn parse_i64(b: &[u8]) -> Option<i64> {
    match b.split_first() {
        Some((b'-', rest)) => parse_u64(rest)
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| -v),
        _ => parse_u64(b).and_then(|v| i64::try_from(v).ok()),
    }
}

/// Parse a decimal number such as a pid in a directory name.
#[inline]
pub fn parse_pid(b: &[u8]) -> Option<u32> {
    parse_u64(b).and_then(|v| u32::try_from(v).ok())
}

/// Parse a stat line. `comm` may contain spaces and parentheses, so it runs from the first `(`
/// to the *last* `)`; the numeric fields follow.
pub fn parse_stat(line: &[u8]) -> Result<(u32, TaskStat), ParseError> {
    let open = line
        .iter()
        .position(|&b| b == b'(')
        .ok_or(ParseError::NoComm)?;
    let close = line
        .iter()
        .rposition(|&b| b == b')')
        .ok_or(ParseError::NoComm)?;
    if close < open {
        return Err(ParseError::NoComm);
    }
    let pid = parse_pid(line[..open].trim_ascii()).ok_or(ParseError::BadNumber(1))?;
    let mut st = TaskStat {
        comm: Comm::from_bytes(&line[open + 1..close]),
        ..TaskStat::default()
    };
    let rest = line
        .get(close + 1..)
        .ok_or(ParseError::Truncated)?
        .trim_ascii();
    // Field numbers as in proc(5): 3 = state, 4 = ppid, ... 39 = processor.
    let mut seen = 2;
    for (i, f) in rest.split(|&b| b == b' ').enumerate() {
        let no = i + 3;
        seen = no;
        let u = || parse_u64(f).ok_or(ParseError::BadNumber(no));
        let s = || parse_i64(f).ok_or(ParseError::BadNumber(no));
        match no {
            3 => st.state = *f.first().ok_or(ParseError::BadNumber(no))?,
            4 => st.ppid = u()? as u32,
            5 => st.pgrp = s()? as i32,
            6 => st.session = s()? as i32,
            7 => st.tty_nr = s()? as i32,
            8 => st.tpgid = s()? as i32,
            10 => st.minflt = u()?,
            12 => st.majflt = u()?,
            14 => st.utime = u()?,
            15 => st.stime = u()?,
            18 => st.priority = s()?,
            19 => st.nice = s()?,
            20 => st.num_threads = u()? as u32,
            22 => st.starttime = u()?,
            23 => st.vsize = u()?,
            24 => st.rss_pages = s()?.max(0) as u64,
            39 => {
                st.processor = s()? as i32;
                break;
            }
            _ => {}
        }
    }
    // Kernels since 2.2 have at least up to `processor`; fewer fields means a torn read.
    if seen < 24 {
        return Err(ParseError::Truncated);
    }
    Ok((pid, st))
}

/// `/proc/PID/schedstat`: time on CPU, time waiting on a run queue (ns), timeslices run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedStat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub slices: u64,
}

pub fn parse_schedstat(b: &[u8]) -> Option<SchedStat> {
    let mut it = b.trim_ascii().split(|&c| c == b' ');
    Some(SchedStat {
        run_ns: parse_u64(it.next()?)?,
        wait_ns: parse_u64(it.next()?)?,
        slices: parse_u64(it.next()?)?,
    })
}

/// `/proc/PID/wchan`: the kernel function a task sleeps in; `0` (running, or hidden) is empty.
pub fn parse_wchan(b: &[u8]) -> Wchan {
    let b = b.trim_ascii();
    if b == b"0" {
        Wchan::default()
    } else {
        Wchan::from_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELF_STAT: &[u8] = b"7367 (cat) R 7355 7355 4740 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 27130 3133440 411 18446744073709551615 94188129431552 94188129451433 140723426492320 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94188129467440 94188129469056 94188756062208 140723426495202 140723426495222 140723426495222 140723426496491 0\n";

    /// Parses `line`, checks its pid, command and state, and returns the fields to check.
    fn parsed(line: &[u8], pid: u32, comm: &str, state: u8) -> TaskStat {
        let (p, st) = parse_stat(line).unwrap();
        assert_eq!((p, st.comm.as_str(), st.state), (pid, comm, state));
        st
    }

    #[test]
    fn parses_a_plain_stat_line() {
        let st = parsed(SELF_STAT, 7367, "cat", b'R');
        assert_eq!(
            (st.ppid, st.pgrp, st.session, st.tpgid),
            (7355, 7355, 4740, -1)
        );
        assert_eq!((st.minflt, st.utime, st.stime), (100, 7, 3));
        assert_eq!((st.priority, st.nice, st.num_threads), (20, 0, 1));
        assert_eq!(
            (st.starttime, st.vsize, st.rss_pages),
            (27130, 3133440, 411)
        );
        assert_eq!(st.processor, 1);
    }

    #[test]
    fn comm_with_spaces_and_parentheses_splits_at_last_paren() {
        let line = b"42 (a) b) (c d)) S 1 42 42 0 -1 0 5 0 0 0 1 2 0 0 20 0 3 0 99 1000 7 0 0 0 0 0 0 0 0 0 0 0 0 0 0 2\n";
        let st = parsed(line, 42, "a) b) (c d)", b'S');
        assert_eq!(
            (st.utime, st.stime, st.num_threads, st.rss_pages),
            (1, 2, 3, 7)
        );
        assert_eq!(st.processor, 2);
    }

    #[test]
    fn rejects_torn_and_malformed_lines() {
        assert_eq!(parse_stat(b"12 (x) S 1 2 3"), Err(ParseError::Truncated));
        assert_eq!(parse_stat(b"12 x S 1 2 3"), Err(ParseError::NoComm));
        let bad = b"12 (x) S 1 2 3 0 -1 0 5 0 0 0 1z 2 0 0 20 0 3 0 99 1000 7 0";
        assert_eq!(parse_stat(bad), Err(ParseError::BadNumber(14)));
        assert_eq!(parse_stat(b""), Err(ParseError::NoComm));
    }

    #[test]
    fn long_and_non_utf8_names_are_bounded() {
        let long = [b'x'; 100];
        assert_eq!(Comm::from_bytes(&long).as_bytes().len(), 64);
        assert_eq!(Comm::from_bytes(b"ab\xffcd").as_str(), "ab");
    }

    #[test]
    fn parses_schedstat_and_wchan() {
        assert_eq!(
            parse_schedstat(b"922346 1034867 1\n"),
            Some(SchedStat {
                run_ns: 922346,
                wait_ns: 1034867,
                slices: 1
            })
        );
        assert_eq!(parse_schedstat(b"1 2"), None);
        assert!(parse_wchan(b"0").is_empty());
        assert_eq!(
            parse_wchan(b"futex_wait_queue\n").as_str(),
            "futex_wait_queue"
        );
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_u64(b"99999999999999999999999"), None);
    }
}
