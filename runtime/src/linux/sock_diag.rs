//! TCP sockets counted by state through netlink's `sock_diag` (what `ss` uses), instead of
//! reading `/proc/net/tcp{,6}` on the live host.
//!
//! Why: the kernel builds `/proc/net/tcp` by walking its whole established-socket hash
//! table, twice per file (once to find the first socket, once to the end), whatever the
//! number of sockets. On a host with ~20 GB of memory that table has 262,144 buckets and
//! one read of each file costs ~5-8 ms of kernel time, most of a full linux fetch. A
//! `sock_diag` dump skips empty buckets without the per-bucket seek and sends 88 bytes per
//! socket: ~0.3 ms per family on the same host. The counts are the same: both list the
//! sockets of the reader's network namespace of one family, request sockets as SYN_RECV
//! and time-wait sockets as TIME_WAIT.
//!
//! Owns one netlink request and its reply; the caller falls back to the files when this
//! answers `None` (no `sock_diag` in the kernel, a seccomp filter, a malformed reply).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ROOT | NLM_F_MATCH`.
const NLM_F_DUMP: u16 = 0x300;
/// Every TCP state bit, `TCPF_NEW_SYN_RECV` (request sockets) included.
const ALL_STATES: u32 = 0x1fff;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HDR: usize = 16;
/// `sizeof(struct inet_diag_msg)`: a message shorter than this is malformed.
const DIAG_MSG: usize = 72;

/// Receive buffer: the kernel fills it with as many messages as fit (~370 sockets).
const RECV_BUF: usize = 32 << 10;
/// Most bytes of reply taken from one dump: ~3 million sockets of 88 bytes, beyond any host
/// we know of; past it the dump is abandoned and the caller reads the file (bounded too).
const MAX_REPLY_BYTES: usize = 256 << 20;
/// The kernel answers a dump at once; a reply that stalls this long is given up.
const RECV_TIMEOUT: Duration = Duration::from_secs(1);

/// Sockets of `family` (`libc::AF_INET` or `AF_INET6`) counted by TCP state number (index
/// 1 ESTABLISHED ..= 11 CLOSING; 0 and 12 unused), in this process's network namespace.
/// `None` when netlink cannot answer.
pub fn tcp_states(family: i32, buf: &mut Vec<u8>) -> Option<[u32; 12]> {
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: RECV_TIMEOUT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: a valid option of the right size on our socket.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let req = request(family as u8);
    // SAFETY: `req` is a valid buffer of its length; the kernel is the default destination.
    let sent = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent != req.len() as isize {
        return None;
    }
    buf.resize(RECV_BUF, 0);
    let mut counts = [0u32; 12];
    let mut total = 0usize;
    loop {
        // SAFETY: `buf` is a valid writable buffer of its length.
        let got = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got <= 0 {
            return None;
        }
        total += got as usize;
        if total > MAX_REPLY_BYTES {
            return None;
        }
        if count(&buf[..got as usize], &mut counts)? {
            return Some(counts);
        }
    }
}

/// The dump request: `nlmsghdr` + `inet_diag_req_v2` for TCP sockets of `family` in every
/// state, no extensions (the smallest reply).
fn request(family: u8) -> [u8; NLMSG_HDR + 56] {
    const LEN: usize = NLMSG_HDR + 56;
    let mut r = [0u8; LEN];
    r[0..4].copy_from_slice(&(LEN as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence number
    // inet_diag_req_v2: family, protocol, ext, pad, states, then a zero sockid.
    r[16] = family;
    r[17] = libc::IPPROTO_TCP as u8;
    r[20..24].copy_from_slice(&ALL_STATES.to_ne_bytes());
    r
}

/// Counts the sockets of one datagram of the reply by state. `Some(true)`: the dump is done;
/// `Some(false)`: more datagrams follow; `None`: an error or a malformed message.
fn count(mut data: &[u8], counts: &mut [u32; 12]) -> Option<bool> {
    while data.len() >= NLMSG_HDR {
        let len = u32::from_ne_bytes(data[0..4].try_into().ok()?) as usize;
        let ty = u16::from_ne_bytes(data[4..6].try_into().ok()?);
        if len < NLMSG_HDR || len > data.len() {
            return None;
        }
        match ty {
            NLMSG_DONE => return Some(true),
            NLMSG_ERROR => return None,
            SOCK_DIAG_BY_FAMILY => {
                if len < NLMSG_HDR + DIAG_MSG {
                    return None;
                }
                // inet_diag_msg: family, then state.
                let state = data[NLMSG_HDR + 1] as usize;
                if let Some(c) = counts.get_mut(state) {
                    *c += 1;
                }
            }
            _ => {}
        }
        // Messages are padded to 4 bytes.
        let next = (len + 3) & !3;
        data = data.get(next..).unwrap_or(&[]);
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply message of `ty` with a diag body whose state is `state`.
    fn msg(ty: u16, state: u8) -> Vec<u8> {
        let mut m = vec![0u8; NLMSG_HDR + DIAG_MSG];
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&ty.to_ne_bytes());
        m[NLMSG_HDR] = libc::AF_INET as u8;
        m[NLMSG_HDR + 1] = state;
        m
    }

    #[test]
    fn replies_are_counted_by_state_until_done() {
        let mut c = [0u32; 12];
        let mut d = [msg(20, 1), msg(20, 1), msg(20, 10), msg(20, 13)].concat();
        assert_eq!(count(&d, &mut c), Some(false));
        assert_eq!(
            (c[1], c[10]),
            (2, 1),
            "state 13 is not a TCP state: not counted"
        );
        d = [msg(20, 6), msg(NLMSG_DONE, 0)].concat();
        assert_eq!(count(&d, &mut c), Some(true));
        assert_eq!(c[6], 1);
    }

    #[test]
    fn errors_and_malformed_replies_are_refused() {
        let mut c = [0u32; 12];
        assert_eq!(count(&msg(NLMSG_ERROR, 0), &mut c), None);
        let mut short = msg(20, 1);
        short[0..4].copy_from_slice(&20u32.to_ne_bytes());
        assert_eq!(count(&short, &mut c), None, "shorter than a diag message");
        let mut long = msg(20, 1);
        long[0..4].copy_from_slice(&4000u32.to_ne_bytes());
        assert_eq!(count(&long, &mut c), None, "longer than the datagram");
        assert_eq!(c, [0; 12]);
    }

    /// Listening sockets of this process: the kernel's netlink answer and /proc/net/tcp agree
    /// (other processes' sockets come and go, so the comparison is retried).
    #[test]
    fn netlink_counts_match_the_proc_file_on_this_host() {
        if !std::path::Path::new("/proc/net/tcp").exists() {
            return;
        }
        let _held: Vec<_> = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut buf = Vec::new();
        let Some(first) = tcp_states(libc::AF_INET, &mut buf) else {
            // A kernel without sock_diag: the group reads the file (tested there).
            return;
        };
        assert!(first[10] >= 3, "our three listeners: {first:?}");
        let from_file = || {
            let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
            let mut c = [0u32; 12];
            for l in text.lines().skip(1) {
                if let Some(st) = l.split_whitespace().nth(3)
                    && let Ok(st) = usize::from_str_radix(st, 16)
                    && st < 12
                {
                    c[st] += 1;
                }
            }
            c
        };
        let agree = (0..20).any(|_| {
            let a = tcp_states(libc::AF_INET, &mut buf).unwrap();
            let f = from_file();
            let b = tcp_states(libc::AF_INET, &mut buf).unwrap();
            (a == f && f == b) || {
                std::thread::sleep(Duration::from_millis(50));
                false
            }
        });
        assert!(agree, "netlink and /proc/net/tcp never agreed");
        assert!(tcp_states(libc::AF_INET6, &mut buf).is_some());
    }
}
