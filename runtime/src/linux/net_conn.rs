//! Socket tables counted by state: `/proc/net/tcp` and `tcp6` (clusters 19 and 76,
//! `network.tcpconn{,6}.*`, item = the kernel's TCP state number), `udp`/`udp6` (79, 80:
//! established and listening, states 1 and 7), `raw`/`raw6` (77, 78: one per line after
//! the header) and `unix` (81: datagram count, stream count and its listening and
//! connected sockets).
//!
//! These files have a line per socket: a busy host's `/proc/net/tcp` runs to tens of MB.
//! They are streamed through a fixed buffer and counted in place, nothing allocated per
//! line, and at most [`MAX_TABLE_BYTES`] are read.
//!
//! Owns these seven files only.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

use super::{Ctx, Group, Metric, read::Root, sock_diag};
use crate::namespace::{Value, Values};

/// Most bytes read from one socket table: ~1.7 million sockets of ~150 bytes, beyond any
/// host we know of; a larger (or endless) file is counted up to here.
const MAX_TABLE_BYTES: u64 = 256 << 20;

/// Read size; also the longest line counted (a longer one is skipped: no table has one).
const CHUNK: usize = 64 << 10;

/// TCP states 1 (ESTABLISHED) ..= 11 (CLOSING) are items 1..=11.
const TCP_STATES: usize = 12;

const TCP: u32 = 19;
const TCP6: u32 = 76;
const RAW: u32 = 77;
const RAW6: u32 = 78;
const UDP: u32 = 79;
const UDP6: u32 = 80;
const UNIX: u32 = 81;

/// The files, by cluster.
const FILES: [(u32, &str); 7] = [
    (TCP, "proc/net/tcp"),
    (TCP6, "proc/net/tcp6"),
    (RAW, "proc/net/raw"),
    (RAW6, "proc/net/raw6"),
    (UDP, "proc/net/udp"),
    (UDP6, "proc/net/udp6"),
    (UNIX, "proc/net/unix"),
];

#[derive(Default)]
pub struct NetConn {
    buf: Vec<u8>,
    /// Per cluster (index in [`FILES`]): counters, `None` when the file was unreadable.
    /// tcp: by state; udp: [_, established, listen]; raw: [_, count]; unix: [_, datagram,
    /// stream established, stream listen, stream count].
    counts: [Option<[u32; TCP_STATES]>; 7],
}

/// The `n`th (0-based) whitespace-separated field of `line`, parsed as hex.
fn hex_field(line: &[u8], n: usize) -> Option<u32> {
    let f = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(n)?;
    u32::from_str_radix(std::str::from_utf8(f).ok()?, 16).ok()
}

/// Calls `each` with every line of `rel`, streaming (see the module doc). `None` when the
/// file cannot be opened or is not a regular file.
fn for_each_line(
    root: &Root,
    rel: &str,
    buf: &mut Vec<u8>,
    mut each: impl FnMut(&[u8]),
) -> Option<()> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(root.path(rel))
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut file = file.take(MAX_TABLE_BYTES);
    buf.resize(CHUNK, 0);
    let (mut held, mut skipping) = (0usize, false);
    loop {
        let got = match file.read(&mut buf[held..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let end = held + got;
        let mut start = 0;
        while let Some(nl) = buf[start..end].iter().position(|&b| b == b'\n') {
            if !skipping {
                each(&buf[start..start + nl]);
            }
            skipping = false;
            start += nl + 1;
        }
        if start == 0 && end == buf.len() {
            // A line longer than the buffer: drop it up to its newline.
            skipping = true;
            held = 0;
        } else {
            buf.copy_within(start..end, 0);
            held = end - start;
        }
    }
    if held > 0 && !skipping {
        each(&buf[..held]);
    }
    Some(())
}

impl Group for NetConn {
    fn answers(&self, m: &Metric) -> bool {
        match m.cluster {
            TCP | TCP6 => (1..TCP_STATES as u32).contains(&m.item),
            RAW | RAW6 => m.item == 1,
            UDP | UDP6 => matches!(m.item, 1 | 2),
            UNIX => (1..=4).contains(&m.item),
            _ => false,
        }
    }

    fn refresh(&mut self, ctx: &Ctx) {
        let live = ctx.root.is_live();
        for (i, (cluster, rel)) in FILES.iter().enumerate() {
            // The live host's TCP tables through netlink: the same counts for a fraction of
            // the kernel's time (see `sock_diag`); the file when netlink cannot answer.
            let family = match *cluster {
                TCP => Some(libc::AF_INET),
                TCP6 => Some(libc::AF_INET6),
                _ => None,
            };
            if live
                && let Some(f) = family
                && let Some(c) = sock_diag::tcp_states(f, &mut self.buf)
            {
                self.counts[i] = Some(c);
                continue;
            }
            let mut c = [0u32; TCP_STATES];
            let ok = for_each_line(ctx.root, rel, &mut self.buf, |line| match *cluster {
                TCP | TCP6 => {
                    // Header's 4th field is "st", not hex: it is not counted.
                    if let Some(st) = hex_field(line, 3).filter(|&s| (s as usize) < TCP_STATES) {
                        c[st as usize] += 1;
                    }
                }
                UDP | UDP6 => match hex_field(line, 3) {
                    Some(1) => c[1] += 1,
                    Some(7) => c[2] += 1,
                    _ => {}
                },
                RAW | RAW6 => c[1] += 1,
                _ => match (hex_field(line, 4), hex_field(line, 5)) {
                    (Some(2), Some(_)) => c[1] += 1,
                    (Some(1), Some(st)) => {
                        match st {
                            3 => c[2] += 1,
                            1 => c[3] += 1,
                            _ => {}
                        }
                        c[4] += 1;
                    }
                    _ => {}
                },
            });
            if matches!(*cluster, RAW | RAW6) {
                // Every line but the header is a socket.
                c[1] = c[1].saturating_sub(1);
            }
            self.counts[i] = ok.map(|_| c);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let Some(i) = FILES.iter().position(|(c, _)| *c == m.cluster) else {
            return;
        };
        if let Some(c) = &self.counts[i]
            && let Some(v) = c.get(m.item as usize)
        {
            out.push((String::new(), Value::Uint(*v as u64)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, one};

    const HEAD: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

    fn tcp_line(sl: usize, st: u32) -> String {
        format!(
            "{sl:4}: 0100007F:1F90 00000000:0000 {st:02X} 00000000:00000000 00:00000000 00000000  1000        0 {} 1 0000000000000000 100 0 0 10 0\n",
            40000 + sl
        )
    }

    #[test]
    fn tcp_states_are_counted_by_number_on_a_busy_host() {
        // 30,000 sockets (~4.5 MB): several buffers' worth, lines split across reads.
        let mut tcp = HEAD.to_string();
        for sl in 0..30_000 {
            tcp.push_str(&tcp_line(sl, [1, 1, 1, 6, 10, 8][sl % 6]));
        }
        let mut tcp6 = HEAD.to_string();
        tcp6.push_str(&tcp_line(0, 0x0A));
        tcp6.push_str(&tcp_line(1, 0x0B));
        tcp6.push_str(&tcp_line(2, 0x0C)); // no such state: not counted
        tcp6.push_str("garbage line\n");
        let (_dir, mut a) = agent(&[("proc/net/tcp", &tcp), ("proc/net/tcp6", &tcp6)]);
        a.expect(
            "network.tcpconn.established 15000
            network.tcpconn.time_wait 5000
            network.tcpconn.listen 5000
            network.tcpconn.close_wait 5000
            network.tcpconn.syn_sent 0
            network.tcpconn6.listen 1
            network.tcpconn6.closing 1
            network.tcpconn6.established 0
            # No udp file: no value.
            network.udpconn.listen -",
        );
    }

    #[test]
    fn udp_raw_and_unix_sockets() {
        let udp = format!(
            "{HEAD}{}{}{}",
            tcp_line(0, 7),
            tcp_line(1, 1),
            tcp_line(2, 7)
        );
        let raw = format!("{HEAD}{}{}", tcp_line(0, 7), tcp_line(1, 7));
        let unix = "\
Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 16977 /run/systemd/private
0000000000000000: 00000002 00000000 00000000 0001 03 16978 @/a/b
0000000000000000: 00000003 00000000 00000000 0001 03 16979
0000000000000000: 00000002 00000000 00000000 0001 02 16980
0000000000000000: 00000002 00000000 00000000 0002 01 16981 /run/systemd/notify
0000000000000000: 00000002 00000000 00000000 0005 01 16982
";
        let long = format!("{}\n", "x".repeat(200_000));
        let raw6 = format!("{HEAD}{long}{}", tcp_line(0, 7));
        let (_dir, mut a) = agent(&[
            ("proc/net/udp", &udp),
            ("proc/net/udp6", HEAD),
            ("proc/net/raw", &raw),
            ("proc/net/raw6", &raw6),
            ("proc/net/unix", unix),
        ]);
        a.expect(
            "network.udpconn.listen 2
            network.udpconn.established 1
            network.udpconn6.listen 0
            network.rawconn.count 2
            # The overlong line is skipped, not counted, and does not stop the count.
            network.rawconn6.count 1
            network.unix.datagram.count 1
            network.unix.stream.count 4
            network.unix.stream.listen 1
            network.unix.stream.established 2",
        );
    }

    #[test]
    fn this_hosts_tables_count() {
        let mut a = LinuxAgent::new();
        if std::path::Path::new("/proc/net/unix").exists() {
            assert!(one(&mut a, "network.unix.stream.count").unwrap() >= 1.0);
        }
        if std::path::Path::new("/proc/net/tcp").exists() {
            assert!(one(&mut a, "network.tcpconn.listen").is_some());
        }
    }
}
