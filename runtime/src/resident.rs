//! `runtime::resident`: how much of its own binary and of malloc's spare memory the daemon
//! keeps resident. Called once by `wasmon run` before its threads start; a leaf that
//! imports nothing of the crate.
//!
//! Why: the release binary's code is ~33 MB (wasmtime, cranelift, the native agents). On a
//! page fault in a file mapping, Linux maps up to 16 neighbouring pages that are already in
//! the page cache ("fault-around"), so the few hundred functions a start runs left ~18 MB of
//! code and ~6 MB of read-only data resident, most of it never run again. With the mapping
//! advised `MADV_RANDOM` a fault maps its own page only (the kernel skips fault-around and
//! read-ahead for such mappings). That is not enough where the page cache holds the binary
//! in large folios (a fault maps the whole folio), so once the start is over its code is
//! paged out of this process ([`drop_start_code`]): what faults back in, a page at a time,
//! is the code the daemon runs (~8 MB on a 2-CPU host with the default config against ~24
//! MB of code and read-only data kept after a start). And glibc gives
//! each thread that allocates an arena of its own (up to 8 per core), each keeping freed
//! memory; the daemon's threads allocate little, so two arenas serve them.

/// Most malloc arenas: the daemon's allocating threads (tokio workers, blocking pool, agent
/// threads) contend little; each extra arena keeps its own freed pages.
pub const MALLOC_ARENAS: i32 = 2;

/// When after `wasmon run` starts its start-only code has run: config checks, component
/// loads and links by the first, the first polls, flushes and store writes of every part by
/// the second. A daemon still starting then only faults some of it back in.
pub const START_SETTLES: [std::time::Duration; 2] = [
    std::time::Duration::from_secs(15),
    std::time::Duration::from_secs(60),
];

/// Advises every read-only mapping of this process's own executable `MADV_RANDOM`; the
/// bytes advised (0 when /proc/self/maps or the executable's path cannot be read).
pub fn code_on_demand() -> usize {
    advise_own_code(libc::MADV_RANDOM)
}

/// Pages this process's own code and read-only data out of its memory (`MADV_PAGEOUT`;
/// pages other processes map too are left to them), and gives malloc's free pages back
/// (the start's garbage: parsed configs, component bytes); the bytes of code advised.
pub fn drop_start_code() -> usize {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
    advise_own_code(libc::MADV_PAGEOUT)
}

/// [`drop_start_code`] on a thread of its own at each of [`START_SETTLES`].
pub fn drop_start_code_later() {
    let _ = std::thread::Builder::new()
        .name("resident".into())
        .spawn(|| {
            let mut slept = std::time::Duration::ZERO;
            for at in START_SETTLES {
                std::thread::sleep(at.saturating_sub(slept));
                slept = at;
                drop_start_code();
            }
        });
}

fn advise_own_code(advice: libc::c_int) -> usize {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return 0;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    let exe = exe.to_string_lossy();
    let mut advised = 0;
    for line in maps.lines() {
        let Some((start, end, perms, path)) = mapping(line) else {
            continue;
        };
        if path != exe || perms.as_bytes().get(1) == Some(&b'w') {
            continue;
        }
        let len = end - start;
        // SAFETY: the range is one of this process's own read-only file mappings as the
        // kernel lists it; both advices change only which pages are resident and how later
        // faults are served, never the contents.
        if unsafe { libc::madvise(start as *mut libc::c_void, len, advice) } == 0 {
            advised += len;
        }
    }
    advised
}

/// Caps glibc's malloc arenas at [`MALLOC_ARENAS`] (before threads start).
pub fn few_malloc_arenas() {
    // SAFETY: mallopt with a valid parameter; called before the runtime's threads start.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS) };
}

/// A /proc/self/maps line: start, end, permissions and path (`None` for anonymous ones).
fn mapping(line: &str) -> Option<(usize, usize, &str, &str)> {
    let mut f = line.splitn(6, ' ');
    let range = f.next()?;
    let perms = f.next()?;
    let path = f.nth(3)?.trim_start();
    if path.is_empty() {
        return None;
    }
    let (a, b) = range.split_once('-')?;
    let start = usize::from_str_radix(a, 16).ok()?;
    let end = usize::from_str_radix(b, 16).ok()?;
    (end > start).then_some((start, end, perms, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let l = "55e2dd79e000-55e2df74b000 r-xp 00e19000 fe:00 5619795                    /usr/bin/wasmon";
        assert_eq!(
            mapping(l),
            Some((0x55e2dd79e000, 0x55e2df74b000, "r-xp", "/usr/bin/wasmon"))
        );
        assert_eq!(
            mapping("7fb4dc000000-7fb4dc437000 rw-p 00000000 00:00 0 "),
            None
        );
        assert_eq!(mapping("garbage"), None);
        assert_eq!(mapping("zz-10 r--p 0 0:0 1 /x"), None);
    }

    #[test]
    fn this_test_binary_is_advised() {
        // The test binary is an executable like the daemon: its code mappings are found.
        assert!(code_on_demand() > 0);
        let rss = || {
            let s = std::fs::read_to_string("/proc/self/status").unwrap();
            let l = s
                .lines()
                .find(|l| l.starts_with("RssFile:"))
                .unwrap()
                .to_string();
            l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
        };
        let before = rss();
        assert!(drop_start_code() > 0);
        // The code this test runs faults back in; most of the binary does not.
        assert!(rss() < before, "RssFile {before} kB -> {} kB", rss());
    }
}
