//! `statfs` off the poll path: a small pool of threads owned by the filesystem group calls
//! `statfs` for each mount, and a fetch waits for the answers up to a deadline. A mount
//! that does not answer in time (a hung NFS server, a stuck FUSE daemon) has no values for
//! that fetch and keeps its one outstanding call: it is not asked again until that call
//! returns, so hung mounts hold at most one thread each and never pile up threads.
//!
//! Owns only the calls and their threads; knows nothing of mounts' names or metrics.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a fetch waits for a mount's `statfs`: a local filesystem answers in
/// microseconds, a healthy NFS server in milliseconds; past this the mount is taken as not
/// answering.
pub const STATFS_DEADLINE: Duration = Duration::from_secs(1);

/// Most threads the pool holds: one per mount with a call outstanding at most, and this
/// bounds them on a host with thousands of hung mounts (the rest wait their turn).
pub const MAX_WORKERS: usize = 32;

/// The figures pmdalinux uses from `struct statfs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FsStat {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u64,
}

/// The call the pool makes (tests replace it with one that never returns).
pub type StatfsFn = Arc<dyn Fn(&Path) -> std::io::Result<FsStat> + Send + Sync>;

/// The kernel's `statfs(2)`.
pub fn statfs(path: &Path) -> std::io::Result<FsStat> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a valid out-parameter.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(FsStat {
        blocks: s.f_blocks as u64,
        bfree: s.f_bfree as u64,
        bavail: s.f_bavail as u64,
        files: s.f_files as u64,
        ffree: s.f_ffree as u64,
        bsize: s.f_bsize as u64,
    })
}

#[derive(Default)]
struct State {
    jobs: VecDeque<(PathBuf, u64)>,
    /// Paths with a call queued or running.
    busy: HashSet<PathBuf>,
    /// Answers by path, with the round that asked.
    done: HashMap<PathBuf, (u64, Option<FsStat>)>,
    idle: usize,
    workers: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Workers wait here for jobs.
    work: Condvar,
    /// A fetch waits here for answers.
    answered: Condvar,
    call: StatfsFn,
}

/// The pool (see the module doc). Dropping it lets idle workers exit; a worker stuck in a
/// call exits when the call returns.
pub struct Pool {
    shared: Arc<Shared>,
    round: u64,
    pub deadline: Duration,
}

/// What a round of calls gave for one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Stat(FsStat),
    /// The call failed (no such directory, permission): no values, as pmdalinux.
    Failed,
    /// No answer within the deadline, or a previous call still outstanding.
    Hung,
}

impl Pool {
    pub fn new(call: StatfsFn) -> Pool {
        Pool {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                answered: Condvar::new(),
                call,
            }),
            round: 0,
            deadline: STATFS_DEADLINE,
        }
    }

    /// Calls `statfs` for every path at once and waits up to the deadline; one answer per
    /// path, in order.
    pub fn stat_all(&mut self, paths: &[PathBuf]) -> Vec<Answer> {
        self.round += 1;
        let round = self.round;
        let mut asked = vec![false; paths.len()];
        {
            let mut st = lock(&self.shared.state);
            for (i, p) in paths.iter().enumerate() {
                if st.busy.contains(p) {
                    continue;
                }
                st.busy.insert(p.clone());
                st.jobs.push_back((p.clone(), round));
                asked[i] = true;
                // One thread per outstanding call at most (queued or running): a worker
                // that has just answered but not yet gone idle is not counted twice.
                if st.workers < st.busy.len().min(MAX_WORKERS) && st.idle < st.jobs.len() {
                    st.workers += 1;
                    let shared = self.shared.clone();
                    let spawned = std::thread::Builder::new()
                        .name("wasmon-statfs".into())
                        .spawn(move || worker(shared));
                    if spawned.is_err() {
                        st.workers -= 1;
                    }
                }
            }
            self.shared.work.notify_all();
        }
        let until = Instant::now() + self.deadline;
        let mut st = lock(&self.shared.state);
        loop {
            let pending = paths
                .iter()
                .zip(&asked)
                .any(|(p, a)| *a && st.done.get(p).is_none_or(|(r, _)| *r != round));
            let now = Instant::now();
            if !pending || now >= until {
                break;
            }
            st = match self.shared.answered.wait_timeout(st, until - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        paths
            .iter()
            .zip(&asked)
            .map(|(p, a)| match st.done.get(p) {
                Some((r, ans)) if *a && *r == round => match ans {
                    Some(s) => Answer::Stat(*s),
                    None => Answer::Failed,
                },
                _ => Answer::Hung,
            })
            .collect()
    }

    /// Threads the pool holds now (tests: hung calls do not pile up).
    #[cfg(test)]
    pub fn workers(&self) -> usize {
        lock(&self.shared.state).workers
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let mut st = lock(&self.shared.state);
        st.shutdown = true;
        self.shared.work.notify_all();
    }
}

/// A panicking statfs function must not take the pool down with it: the crate's one lock
/// policy (take a poisoned lock over) does that.
fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    crate::util::lock(m)
}

fn worker(shared: Arc<Shared>) {
    loop {
        let (path, round) = {
            let mut st = lock(&shared.state);
            loop {
                if let Some(job) = st.jobs.pop_front() {
                    break job;
                }
                if st.shutdown {
                    st.workers -= 1;
                    return;
                }
                st.idle += 1;
                st = match shared.work.wait(st) {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                st.idle -= 1;
            }
        };
        let answer = (shared.call)(&path).ok();
        let mut st = lock(&shared.state);
        st.busy.remove(&path);
        st.done.insert(path, (round, answer));
        shared.answered.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_parallel_and_a_hung_call_is_not_repeated() {
        let calls = Arc::new(Mutex::new(Vec::<PathBuf>::new()));
        let seen = calls.clone();
        let call: StatfsFn = Arc::new(move |p: &Path| {
            crate::util::lock(&seen).push(p.to_path_buf());
            if p == Path::new("/hung") {
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            if p == Path::new("/gone") {
                return Err(std::io::ErrorKind::NotFound.into());
            }
            Ok(FsStat {
                blocks: 10,
                bsize: 4096,
                ..FsStat::default()
            })
        });
        let mut pool = Pool::new(call);
        pool.deadline = Duration::from_millis(200);
        let paths: Vec<PathBuf> = ["/", "/hung", "/gone"].iter().map(PathBuf::from).collect();
        let t = Instant::now();
        let a = pool.stat_all(&paths);
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(matches!(a[0], Answer::Stat(s) if s.blocks == 10));
        assert_eq!(a[1], Answer::Hung);
        assert_eq!(a[2], Answer::Failed);
        // Later rounds skip the hung mount at once: no new call, no wait, no new thread.
        let workers = pool.workers();
        for _ in 0..20 {
            let t = Instant::now();
            let a = pool.stat_all(&paths);
            assert_eq!(a[1], Answer::Hung);
            assert!(matches!(a[0], Answer::Stat(_)));
            assert!(
                t.elapsed() < Duration::from_millis(150),
                "{:?}",
                t.elapsed()
            );
        }
        assert_eq!(pool.workers(), workers);
        assert!(workers <= 3, "{workers}");
        let hung_calls = crate::util::lock(&calls)
            .iter()
            .filter(|p| p.as_path() == Path::new("/hung"))
            .count();
        assert_eq!(hung_calls, 1);
    }

    #[test]
    fn the_real_statfs_reads_this_hosts_root() {
        let s = statfs(Path::new("/")).unwrap();
        assert!(s.blocks > 0 && s.bsize > 0);
        assert!(statfs(Path::new("/no/such/dir")).is_err());
    }
}
