//! Interface attributes from `/sys/class/net/IF/` (cluster 3, items 21-30:
//! `network.interface.mtu`, `speed`, `baudrate`, `duplex`, `up`, `running`, `wireless`,
//! `type`, `virtual`) for the interfaces of `/proc/net/dev`, and interface addresses
//! (cluster 33, indom 17: `inet_addr`, `ipv6_addr`, `ipv6_scope`, `hw_addr`).
//!
//! pmdalinux reads sysfs and falls back to ioctls; here sysfs alone gives cluster 3 (an
//! attribute that is absent or unreadable has no value, as the ioctl path yields nothing
//! more on kernels with sysfs). Addresses: hardware from `address`, IPv6 from
//! `/proc/net/if_inet6`, IPv4 from the `SIOCGIFCONF` ioctl, which only the live host has:
//! under another root IPv4 addresses are left out.
//!
//! Owns these attributes only (`/proc/net/dev`'s counters are `net_dev`'s; its names are
//! read again here so these metrics cost nothing unless asked for).

use std::fmt::Write;

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// `IFF_UP` of `flags`. Running is not in sysfs `flags` (the kernel adds `IFF_RUNNING` only
/// for the ioctl pmdalinux uses): it is up with an operational state of up or unknown, as
/// the kernel's `dev_get_flags` decides it.
const IFF_UP: u64 = 0x1;

/// Most interfaces (or addresses) taken: see `read::MAX_ENTRIES`.
const MAX_IFACES: usize = 65_536;

#[derive(Default, Clone)]
struct Attrs {
    /// Its sysfs directory exists.
    present: bool,
    mtu: Option<u32>,
    /// Mbit/s as the kernel's `speed` reads through C's `atoi` into an unsigned: "-1"
    /// (unknown) is 4294967295, as pmcd reports it.
    speed: Option<u32>,
    duplex: Option<u32>,
    flags: Option<u64>,
    /// `operstate` is "up" or "unknown" (loopback, many virtual devices).
    oper_up: bool,
    wireless: bool,
    ty: Option<u32>,
    virt: bool,
}

#[derive(Default, Clone)]
struct Addr {
    inet: Option<String>,
    ipv6: Option<(String, u32)>,
    hw: Option<String>,
}

#[derive(Default)]
pub struct NetSysfs {
    buf: String,
    ifaces: Vec<(String, Attrs)>,
    addrs: Vec<(String, Addr)>,
}

/// C's `atoi`: leading sign and digits, the rest ignored, 0 when none.
fn atoi(s: &str) -> i64 {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let n = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |a, b| {
            a.saturating_mul(10).saturating_add((b - b'0') as i64)
        });
    if neg { -n } else { n }
}

fn scope_name(scope: u32) -> &'static str {
    match scope {
        0x00 => "Global",
        0x10 => "Host",
        0x20 => "Link",
        0x40 => "Site",
        0x80 => "Compat",
        _ => "Unknown",
    }
}

/// `fe80000000000000fc5400fffe906c44 02 40 20 80 eth0` -> ("eth0", "fe80::fc54:ff:fe90:6c44/64", 0x20).
fn if_inet6_line(line: &str) -> Option<(&str, String, u32)> {
    let mut f = line.split_ascii_whitespace();
    let hex = f.next()?;
    let _idx = f.next()?;
    let plen = u32::from_str_radix(f.next()?, 16).ok()?;
    let scope = u32::from_str_radix(f.next()?, 16).ok()?;
    let _dad = f.next()?;
    let name = f.next()?;
    if hex.len() != 32 {
        return None;
    }
    let bits = u128::from_str_radix(hex, 16).ok()?;
    let mut s = std::net::Ipv6Addr::from(bits).to_string();
    let _ = write!(s, "/{plen}");
    Some((name, s, scope))
}

/// IPv4 addresses of the live host's interfaces (and aliases, `eth0:1`), by `SIOCGIFCONF`.
fn ipv4_addrs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    // SAFETY: a datagram socket used for one ioctl and closed; the buffer outlives the
    // call and its length is what the kernel is told; entries are read within `ifc_len`.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return out;
        }
        let mut n = 32usize;
        loop {
            let mut reqs: Vec<libc::ifreq> = vec![std::mem::zeroed(); n];
            let mut ifc: libc::ifconf = std::mem::zeroed();
            ifc.ifc_len = (n * std::mem::size_of::<libc::ifreq>()) as libc::c_int;
            ifc.ifc_ifcu.ifcu_req = reqs.as_mut_ptr();
            if libc::ioctl(fd, libc::SIOCGIFCONF, &mut ifc) < 0 {
                break;
            }
            let got = ifc.ifc_len as usize / std::mem::size_of::<libc::ifreq>();
            if got == n && n < MAX_IFACES {
                // Possibly truncated: ask again with room to spare.
                n *= 2;
                continue;
            }
            for r in &reqs[..got.min(n)] {
                let name = std::ffi::CStr::from_ptr(r.ifr_name.as_ptr())
                    .to_string_lossy()
                    .into_owned();
                let sa = &r.ifr_ifru.ifru_addr;
                if sa.sa_family as i32 != libc::AF_INET {
                    continue;
                }
                let sin = &*(sa as *const libc::sockaddr as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                out.push((name, ip.to_string()));
            }
            break;
        }
        libc::close(fd);
    }
    out
}

impl NetSysfs {
    fn addr(&mut self, name: &str) -> &mut Addr {
        let i = match self.addrs.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.addrs.push((name.to_string(), Addr::default()));
                self.addrs.len() - 1
            }
        };
        &mut self.addrs[i].1
    }

    fn refresh_dev(&mut self, ctx: &Ctx) {
        self.ifaces.clear();
        let Ok(text) = ctx.root.read("proc/net/dev", &mut self.buf) else {
            return;
        };
        let names: Vec<String> = text
            .lines()
            .skip(2)
            .filter_map(|l| Some(l.split_once(':')?.0.trim()))
            .filter(|n| !n.is_empty() && !n.contains('/') && ctx.devices.interfaces.admits(n))
            .take(MAX_IFACES)
            .map(str::to_string)
            .collect();
        for name in names {
            let dir = format!("sys/class/net/{name}");
            if !ctx.root.exists(&dir) {
                // No sysfs for it: nothing is known, not even "not wireless".
                self.ifaces.push((name, Attrs::default()));
                continue;
            }
            let attr = |a: &str| ctx.root.attr(&format!("{dir}/{a}")).ok();
            let at = Attrs {
                present: true,
                mtu: attr("mtu").map(|v| atoi(&v) as u32).filter(|&m| m != 0),
                speed: attr("speed").map(|v| atoi(&v) as u32).filter(|&s| s != 0),
                duplex: match attr("duplex").as_deref() {
                    Some("half") => Some(1),
                    Some("full") => Some(2),
                    _ => None,
                },
                flags: attr("flags")
                    .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()),
                oper_up: matches!(attr("operstate").as_deref(), Some("up" | "unknown")),
                wireless: ctx.root.exists(&format!("{dir}/wireless")),
                ty: attr("type").map(|v| atoi(&v) as u32),
                virt: ctx.root.exists(&format!("sys/devices/virtual/net/{name}")),
            };
            self.ifaces.push((name, at));
        }
    }

    fn refresh_addr(&mut self, ctx: &Ctx) {
        self.addrs.clear();
        // pmdalinux walks the directory unsorted: its instances (indom 17) come in that
        // order, unlike the interface indom's /proc/net/dev order.
        for name in ctx.root.list_unsorted("sys/class/net") {
            if name.starts_with('.') {
                continue;
            }
            let hw = ctx.root.attr(&format!("sys/class/net/{name}/address")).ok();
            self.addr(&name).hw = hw;
        }
        if ctx.root.dir() == std::path::Path::new("/") {
            for (name, ip) in ipv4_addrs() {
                self.addr(&name).inet = Some(ip);
            }
        }
        if ctx.root.read("proc/net/if_inet6", &mut self.buf).is_ok() {
            let text = std::mem::take(&mut self.buf);
            for (name, a, scope) in text.lines().take(MAX_IFACES).filter_map(if_inet6_line) {
                self.addr(name).ipv6 = Some((a, scope));
            }
            self.buf = text;
        }
    }
}

impl Group for NetSysfs {
    fn answers(&self, m: &Metric) -> bool {
        (m.cluster == 3 && (21..=30).contains(&m.item) && m.item != 27)
            || (m.cluster == 33 && m.item <= 3)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        // Both clusters are cheap next to a fetch's round trip; read both.
        self.refresh_dev(ctx);
        self.refresh_addr(ctx);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if m.cluster == 33 {
            for (name, a) in &self.addrs {
                let v = match m.item {
                    0 => a.inet.clone(),
                    1 => a.ipv6.as_ref().map(|x| x.0.clone()),
                    2 => a.ipv6.as_ref().map(|x| scope_name(x.1).to_string()),
                    _ => a.hw.clone(),
                };
                if let Some(v) = v {
                    out.push((name.clone(), Value::Text(v)));
                }
            }
            return;
        }
        for (name, a) in &self.ifaces {
            let v = match m.item {
                21 => a.mtu.map(|x| Value::Uint(x as u64)),
                // pmdalinux's float arithmetic: Mbit/s to MB/s.
                22 => a
                    .speed
                    .map(|s| Value::Real((s as f32 * 1_000_000f32 / 8.0 / 1024.0 / 1024.0) as f64)),
                23 => a.speed.map(|s| Value::Uint(s as u64 * 1_000_000 / 8)),
                24 => a.duplex.map(|x| Value::Uint(x as u64)),
                25 => a.flags.map(|f| Value::Uint((f & IFF_UP != 0) as u64)),
                26 => a
                    .flags
                    .map(|f| Value::Uint((f & IFF_UP != 0 && a.oper_up) as u64)),
                28 => a.present.then_some(Value::Uint(a.wireless as u64)),
                29 => a.ty.map(|x| Value::Uint(x as u64)),
                30 => a.present.then_some(Value::Uint(a.virt as u64)),
                _ => None,
            };
            if let Some(v) = v {
                out.push((name.clone(), v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{fetch, fetch_f64, tree};
    use crate::namespace::Value;

    const DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0
  eth0: 200 2 0 0 0 0 0 0 300 3 0 0 0 0 0 0
 bond0: 200 2 0 0 0 0 0 0 300 3 0 0 0 0 0 0
vethab12: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0
   ib0: 9 1 0 0 0 0 0 0 9 1 0 0 0 0 0 0
 wlan0: 9 1 0 0 0 0 0 0 9 1 0 0 0 0 0 0
 ghost: 9 1 0 0 0 0 0 0 9 1 0 0 0 0 0 0
";

    fn host() -> tempfile::TempDir {
        let mut files: Vec<(String, String)> = vec![("proc/net/dev".into(), DEV.into())];
        // (name, mtu, speed, duplex, flags, type, virtual)
        let ifs = [
            ("lo", "65536", None, None, "0x9", "772", true),
            (
                "eth0",
                "1500",
                Some("10000"),
                Some("full"),
                "0x1003",
                "1",
                false,
            ),
            (
                "bond0",
                "9000",
                Some("20000"),
                Some("full"),
                "0x1403",
                "1",
                true,
            ),
            (
                "vethab12",
                "1500",
                Some("10000"),
                Some("full"),
                "0x1003",
                "1",
                true,
            ),
            (
                "ib0",
                "2044",
                Some("-1"),
                Some("unknown"),
                "0x1003",
                "32",
                false,
            ),
            ("wlan0", "1500", Some("0"), None, "0x1002", "1", false),
        ];
        for (n, mtu, speed, duplex, flags, ty, virt) in ifs {
            let d = format!("sys/class/net/{n}");
            files.push((format!("{d}/mtu"), format!("{mtu}\n")));
            files.push((format!("{d}/flags"), format!("{flags}\n")));
            files.push((format!("{d}/type"), format!("{ty}\n")));
            let oper = match n {
                "lo" => "unknown",
                "wlan0" => "down",
                _ => "up",
            };
            files.push((format!("{d}/operstate"), format!("{oper}\n")));
            files.push((
                format!("{d}/address"),
                format!("02:00:00:00:00:{:02x}\n", n.len()),
            ));
            if let Some(s) = speed {
                files.push((format!("{d}/speed"), format!("{s}\n")));
            }
            if let Some(x) = duplex {
                files.push((format!("{d}/duplex"), format!("{x}\n")));
            }
            if virt {
                files.push((format!("sys/devices/virtual/net/{n}/ifindex"), "1\n".into()));
            }
        }
        files.push(("sys/class/net/wlan0/wireless/status".into(), "0\n".into()));
        files.push((
            "proc/net/if_inet6".into(),
            "00000000000000000000000000000001 01 80 10 80       lo\n\
             fe80000000000000fc5400fffe906c44 02 40 20 80     eth0\n\
             20010db8000000000000000000000002 02 40 00 80     eth0\n\
             garbage\n"
                .into(),
        ));
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        tree(&refs)
    }

    #[test]
    fn attributes_of_bonds_veths_infiniband_and_wireless() {
        let dir = host();
        let mut a = LinuxAgent::with_root(dir.path());
        let get = |a: &mut LinuxAgent, m: &str| -> Vec<(String, f64)> {
            let mut v = fetch_f64(a, m);
            v.sort_by(|x, y| x.0.cmp(&y.0));
            v
        };
        let mtu = get(&mut a, "network.interface.mtu");
        assert_eq!(mtu.len(), 6, "{mtu:?}"); // not "ghost": no sysfs
        assert!(mtu.contains(&("bond0".into(), 9000.0)));
        assert!(mtu.contains(&("ib0".into(), 2044.0)));
        let speed = get(&mut a, "network.interface.baudrate");
        // lo has no speed, wlan0's is 0 (none); ib0's -1 reads as 2^32-1 Mbit/s, as in pmcd.
        assert_eq!(
            speed,
            vec![
                ("bond0".into(), 2_500_000_000.0),
                ("eth0".into(), 1_250_000_000.0),
                ("ib0".into(), 536870911875000.0),
                ("vethab12".into(), 1_250_000_000.0),
            ]
        );
        let mbs = get(&mut a, "network.interface.speed");
        assert!((mbs[1].1 - 1192.0929).abs() < 0.01, "{mbs:?}");
        let duplex = get(&mut a, "network.interface.duplex");
        assert_eq!(duplex.len(), 3); // ib0's "unknown" has none
        let up = get(&mut a, "network.interface.up");
        assert!(up.contains(&("wlan0".into(), 0.0)) && up.contains(&("eth0".into(), 1.0)));
        let running = get(&mut a, "network.interface.running");
        assert!(running.contains(&("lo".into(), 1.0)) && running.contains(&("eth0".into(), 1.0)));
        assert!(running.contains(&("wlan0".into(), 0.0)));
        let wireless = get(&mut a, "network.interface.wireless");
        assert_eq!(wireless.iter().filter(|x| x.1 == 1.0).count(), 1);
        assert!(wireless.contains(&("wlan0".into(), 1.0)));
        assert!(get(&mut a, "network.interface.type").contains(&("ib0".into(), 32.0)));
        let virt = get(&mut a, "network.interface.virtual");
        let virt: Vec<&str> = virt
            .iter()
            .filter(|x| x.1 == 1.0)
            .map(|x| x.0.as_str())
            .collect();
        assert_eq!(virt, ["bond0", "lo", "vethab12"]);
    }

    #[test]
    fn addresses_from_files_and_no_ipv4_under_another_root() {
        let dir = host();
        let mut a = LinuxAgent::with_root(dir.path());
        // Each instance's text as `name=text`, sorted (directory order varies).
        let text = |a: &mut LinuxAgent, m: &str| -> Vec<String> {
            let mut v: Vec<_> = fetch(a, &format!("network.interface.{m}"))
                .into_iter()
                .map(|(n, v)| match v {
                    Value::Text(t) => format!("{n}={t}"),
                    other => panic!("{other:?}"),
                })
                .collect();
            v.sort();
            v
        };
        let hw = text(&mut a, "hw_addr");
        assert_eq!(hw.len(), 6);
        assert!(hw.contains(&"eth0=02:00:00:00:00:04".into()));
        // The last address of an interface is the one pmdalinux keeps.
        assert_eq!(
            text(&mut a, "ipv6_addr"),
            ["eth0=2001:db8::2/64", "lo=::1/128"]
        );
        assert_eq!(text(&mut a, "ipv6_scope"), ["eth0=Global", "lo=Host"]);
        assert!(fetch(&mut a, "network.interface.inet_addr").is_empty());
    }

    /// pmcd lists indom 17 in `/sys/class/net`'s directory order (on this VM `ifb0 ifb1 lo
    /// eth0`), not sorted and not `/proc/net/dev`'s order.
    #[test]
    fn hardware_addresses_come_in_the_directorys_order() {
        let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
            return;
        };
        let want: Vec<String> = dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        let mut a = LinuxAgent::new();
        let got: Vec<String> = fetch(&mut a, "network.interface.hw_addr")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn this_hosts_loopback_has_its_address() {
        let mut a = LinuxAgent::new();
        let v4 = fetch(&mut a, "network.interface.inet_addr");
        if std::path::Path::new("/sys/class/net/lo").exists() {
            assert!(
                v4.iter()
                    .any(|(n, v)| n == "lo" && *v == Value::Text("127.0.0.1".into())),
                "{v4:?}"
            );
        }
    }
}
