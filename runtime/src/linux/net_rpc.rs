//! `/proc/net/rpc/nfs` and `/proc/net/rpc/nfsd` (cluster 7): the RPC layer's client and
//! server counters (`rpc.*`) and NFS operation counts per protocol version (`nfs.*`,
//! `nfs3.*`, `nfs4.*`: `reqs` per operation, `calls` their sum). Operations are instances
//! named and numbered as pmdalinux's fixed tables have them ([`OPS2`], [`OPS3`],
//! [`OPS4_CLIENT`], [`OPS4_SERVER`]; the server's v4 list starts at instance 1, after the
//! kernel's separate NULL count). Client metrics have values when `nfs` was read, server
//! ones when `nfsd` was; the read-ahead counters (`ra_*`, gone from modern kernels) always
//! answer, 0 when absent, as pmcd answers them.
//!
//! `nfs.server.threads.*` (from `/proc/fs/nfsd`) are not read here.
//!
//! Owns these two files only.

use super::{Ctx, Group, Metric, indom};
use crate::namespace::{Value, Values};

pub const OPS2: &[&str] = &[
    "null", "getattr", "setattr", "root", "lookup", "readlink", "read", "wrcache", "write",
    "create", "remove", "rename", "link", "symlink", "mkdir", "rmdir", "readdir", "statfs",
];

pub const OPS3: &[&str] = &[
    "null", "getattr", "setattr", "lookup", "access", "readlink", "read", "write", "create",
    "mkdir", "symlink", "mknod", "remove", "rmdir", "rename", "link", "readdir", "readdir+",
    "statfs", "fsinfo", "pathconf", "commit",
];

pub const OPS4_CLIENT: &[&str] = &[
    "null",
    "read",
    "write",
    "commit",
    "open",
    "open_conf",
    "open_noat",
    "open_dgrd",
    "close",
    "setattr",
    "fsinfo",
    "renew",
    "setclntid",
    "confirm",
    "lock",
    "lockt",
    "locku",
    "access",
    "getattr",
    "lookup",
    "lookup_root",
    "remove",
    "rename",
    "link",
    "symlink",
    "create",
    "pathconf",
    "statfs",
    "readlink",
    "readdir",
    "server_caps",
    "delegreturn",
    "getacl",
    "setacl",
    "fs_locations",
    "rel_lkowner",
    "secinfo",
    "fsid_present",
    "exchange_id",
    "create_ses",
    "destroy_ses",
    "sequence",
    "get_lease_t",
    "reclaim_comp",
    "layoutget",
    "getdevinfo",
    "layoutcommit",
    "secinfononam",
    "test_stateid",
    "free_stateid",
    "getdevlist",
    "bind_ses",
    "destroy_clntid",
    "seek",
    "allocate",
    "deallocate",
];

/// Instances 1..=71: the kernel's `proc4ops` op numbers 0..=70.
pub const OPS4_SERVER: &[&str] = &[
    "op0-unused",
    "op1-unused",
    "op2-future",
    "access",
    "close",
    "commit",
    "create",
    "delegpurge",
    "delegreturn",
    "getattr",
    "getfh",
    "link",
    "lock",
    "lockt",
    "locku",
    "lookup",
    "lookup_root",
    "nverify",
    "open",
    "openattr",
    "open_conf",
    "open_dgrd",
    "putfh",
    "putpubfh",
    "putrootfh",
    "read",
    "readdir",
    "readlink",
    "remove",
    "rename",
    "renew",
    "restorefh",
    "savefh",
    "secinfo",
    "setattr",
    "setcltid",
    "setcltidconf",
    "verify",
    "write",
    "rellockowner",
    "bc_ctl",
    "bind_conn",
    "exchange_id",
    "create_ses",
    "destroy_ses",
    "free_stateid",
    "getdirdeleg",
    "getdevinfo",
    "getdevlist",
    "layoutcommit",
    "layoutget",
    "layoutreturn",
    "secinfononam",
    "sequence",
    "set_ssv",
    "test_stateid",
    "want_deleg",
    "destroy_clid",
    "reclaim_comp",
    "allocate",
    "copy",
    "copy_notify",
    "deallocate",
    "io_advise",
    "layouterror",
    "layoutstats",
    "offload_cancel",
    "offload_status",
    "read_plus",
    "seek",
    "write_same",
];

/// One side's counters.
#[derive(Default)]
struct Side {
    ok: bool,
    /// `net`: count, udp, tcp, tcp connections.
    net: [u32; 4],
    /// `rpc`: client count, retrans, authrefresh; server count, err, badfmt, badauth,
    /// badclnt.
    rpc: [u32; 5],
    v2: Vec<u32>,
    v3: Vec<u32>,
    /// Client: by op; server: [0] is the NULL count of `proc4`, [1..] the `proc4ops`.
    v4: Vec<u32>,
    /// Server only: `rc` (hits misses nocache), `fh` and the old `rc` tail, `io`, `th`.
    rc: [u32; 3],
    /// stale lookup anon nocache_dir nocache_nondir cached valid fixup concurrent.
    fh: [u32; 9],
    io: [u32; 2],
    th: [u32; 2],
    /// ra_size, ra_hits (sum of the depths), ra_misses.
    ra: [u32; 3],
}

#[derive(Default)]
pub struct NetRpc {
    buf: String,
    client: Side,
    server: Side,
    /// The root has `/proc/net`.
    proc: bool,
}

/// C's `sscanf("%u ...")` of the fields after the key: stops at the first non-number.
/// Returns how many were read.
fn fill(rest: &str, out: &mut [u32]) -> usize {
    let mut n = 0;
    for (slot, f) in out.iter_mut().zip(rest.split_ascii_whitespace()) {
        match f.parse::<u64>() {
            Ok(v) => *slot = v as u32,
            Err(_) => break,
        }
        n += 1;
    }
    n
}

/// `procN <count> v0 v1 ...`: the values, at most `max` (the count is not trusted).
fn ops(rest: &str, max: usize) -> Vec<u32> {
    rest.split_ascii_whitespace()
        .skip(1)
        .take(max)
        .map(|f| f.parse::<u64>().map(|v| v as u32).unwrap_or(0))
        .collect()
}

fn parse(text: &str, s: &mut Side, server: bool) {
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(' ') else {
            continue;
        };
        match key {
            "net" => {
                fill(rest, &mut s.net);
            }
            "rpc" => {
                fill(rest, &mut s.rpc);
            }
            "proc2" => s.v2 = ops(rest, OPS2.len()),
            "proc3" => s.v3 = ops(rest, OPS3.len()),
            "proc4" if !server => s.v4 = ops(rest, OPS4_CLIENT.len()),
            "proc4" => {
                // `proc4 2 <null> <compound>`: the NULL count is instance 0.
                let null = rest.split_ascii_whitespace().nth(1);
                s.v4.resize(OPS4_SERVER.len() + 1, 0);
                s.v4[0] = null.and_then(|n| n.parse().ok()).unwrap_or(0);
            }
            "proc4ops" if server => {
                let v = ops(rest, OPS4_SERVER.len());
                s.v4.resize(OPS4_SERVER.len() + 1, 0);
                s.v4[1..=v.len()].copy_from_slice(&v);
            }
            "rc" if server => {
                let mut all = [0u32; 9];
                let got = fill(rest, &mut all);
                s.rc.copy_from_slice(&all[..3]);
                if got <= 3 {
                    continue;
                }
                // Old kernels' rc line carries the file-handle counters too.
                let [c, v, f, l, st, cc] = [all[3], all[4], all[5], all[6], all[7], all[8]];
                s.fh[0] = st;
                s.fh[1] = l;
                s.fh[5] = c;
                s.fh[6] = v;
                s.fh[7] = f;
                s.fh[8] = cc;
            }
            "fh" if server => {
                fill(rest, &mut s.fh[..5]);
            }
            "io" if server => {
                fill(rest, &mut s.io);
            }
            "th" if server => {
                fill(rest, &mut s.th);
            }
            "ra" if server => {
                let mut all = [0u32; 12];
                fill(rest, &mut all);
                s.ra = [
                    all[0],
                    all[1..11].iter().fold(0u32, |a, &d| a.wrapping_add(d)),
                    all[11],
                ];
            }
            _ => {}
        }
    }
}

fn per_op(v: &[u32], names: &[&str], first: usize, out: &mut Values) {
    out.extend(names.iter().enumerate().map(|(i, n)| {
        (
            n.to_string(),
            Value::Uint(v.get(i + first).copied().unwrap_or(0) as u64),
        )
    }));
}

fn sum(v: &[u32]) -> u32 {
    v.iter().fold(0u32, |a, &x| a.wrapping_add(x))
}

impl Group for NetRpc {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 7 && m.item < 71
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.client = Side::default();
        self.server = Side::default();
        self.proc = ctx.root.exists("proc/net");
        if let Ok(t) = ctx.root.read("proc/net/rpc/nfs", &mut self.buf) {
            self.client.ok = true;
            parse(t, &mut self.client, false);
        }
        if let Ok(t) = ctx.root.read("proc/net/rpc/nfsd", &mut self.buf) {
            self.server.ok = true;
            parse(t, &mut self.server, true);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let (c, s) = (&self.client, &self.server);
        let one = |out: &mut Values, v: u32| out.push((String::new(), Value::Uint(v as u64)));
        match m.item {
            // pmcd answers these with or without nfsd (on a host with /proc at all).
            68..=70 if self.proc => return one(out, s.ra[(m.item - 68) as usize]),
            68..=70 => return,
            1 | 4 | 20..=27 | 60 | 61 | 64 | 65 if !c.ok => return,
            12 | 30..=47 | 50..=57 | 62 | 63 | 66 | 67 if !s.ok => return,
            _ => {}
        }
        match m.item {
            1 => one(out, sum(&c.v2)),
            4 => per_op(&c.v2, OPS2, 0, out),
            12 => per_op(&s.v2, OPS2, 0, out),
            20..=22 => one(out, c.rpc[(m.item - 20) as usize]),
            24..=27 => one(out, c.net[(m.item - 24) as usize]),
            30..=34 => one(out, s.rpc[(m.item - 30) as usize]),
            35..=37 => one(out, s.rc[(m.item - 35) as usize]),
            38 => one(out, s.fh[5]),
            39 => one(out, s.fh[6]),
            40 => one(out, s.fh[7]),
            41 => one(out, s.fh[1]),
            42 => one(out, s.fh[0]),
            43 => one(out, s.fh[8]),
            44..=47 => one(out, s.net[(m.item - 44) as usize]),
            50 => one(out, sum(&s.v2)),
            51..=53 => one(out, s.fh[(m.item - 49) as usize]),
            54 | 55 => one(out, s.io[(m.item - 54) as usize]),
            56 | 57 => one(out, s.th[(m.item - 56) as usize]),
            60 => one(out, sum(&c.v3)),
            61 => per_op(&c.v3, OPS3, 0, out),
            62 => one(out, sum(&s.v3)),
            63 => per_op(&s.v3, OPS3, 0, out),
            64 => one(out, sum(&c.v4)),
            65 => per_op(&c.v4, OPS4_CLIENT, 0, out),
            66 => one(out, sum(s.v4.get(1..).unwrap_or(&[]))),
            67 => per_op(&s.v4, OPS4_SERVER, 1, out),
            _ => {}
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        let (names, first) = ops_of(indom)?;
        names
            .iter()
            .position(|n| *n == name)
            .map(|i| (i + first) as u32)
    }

    /// pmdalinux's NFS operation indoms are fixed tables, listed whether or not this host
    /// has NFS statistics.
    fn instances(&self, indom: u32) -> Option<Vec<String>> {
        Some(ops_of(indom)?.0.iter().map(|n| n.to_string()).collect())
    }
}

/// The operation names of an NFS indom, and the instance number of the first.
fn ops_of(indom: u32) -> Option<(&'static [&'static str], usize)> {
    Some(match indom {
        indom::NFS => (OPS2, 0),
        indom::NFS3 => (OPS3, 0),
        indom::NFS4_CLI => (OPS4_CLIENT, 0),
        indom::NFS4_SVR => (OPS4_SERVER, 1),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch_f64, one};
    use crate::namespace::Agent;

    const CLIENT: &str = "\
net 0 0 0 0
rpc 151360 2 0
proc3 22 0 70541 0 25024 8432 0 12011 9 2 0 0 0 1 0 0 0 0 2390 3 3 0 4
proc4 59 0 5 7 1 2 0 0 0 2 0 0 0 0 0 0 0 0 3 11 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    const SERVER: &str = "\
rc 0 31 8422
fh 0 0 0 0 0
io 1048576 4096
th 8 0 0.000 0.000 0.000 0.000 0.000 0.000 0.000 0.000 0.000 0.000
ra 32 10 1 0 0 0 0 0 0 0 0 3
net 8453 0 8453 12
rpc 8450 3 1 2 0
proc3 22 3 100 0 50 20 0 300 200 5 1 0 0 2 0 1 0 0 40 1 1 0 6
proc4 2 2 8448
proc4ops 72 0 0 0 40 12 6 1 0 3 9000 30 0 0 0 0 600 0 0 12 0 0 0 8000 0 100 700 20 0 1 2 0 0 0 0 5 0 0 0 500 0 0 0 2 2 0 0 0 0 0 0 0 0 0 8000 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn an_nfs_client_has_v3_and_v4_ops_and_no_server_values() {
        let (_dir, mut a) = agent(&[("proc/net/rpc/nfs", CLIENT)]);
        a.expect(
            "rpc.client.rpccnt 151360
            rpc.client.rpcretrans 2",
        );
        let v3 = fetch_f64(&mut a, "nfs3.client.reqs");
        assert_eq!(v3.len(), 22);
        assert_eq!(v3[1], ("getattr".into(), 70541.0));
        assert_eq!(v3[17], ("readdir+".into(), 2390.0));
        assert_eq!(one(&mut a, "nfs3.client.calls"), Some(118420.0));
        let v4 = fetch_f64(&mut a, "nfs4.client.reqs");
        assert_eq!(v4.len(), 56);
        assert_eq!(v4[2], ("write".into(), 7.0));
        assert_eq!(v4[18], ("getattr".into(), 11.0));
        a.expect(
            "nfs4.client.calls 40
            # No proc2 line: the v2 ops count 0, as pmdalinux zeroes them.
            nfs.client.calls 0
            rpc.server.rpccnt -",
        );
        assert!(fetch_f64(&mut a, "nfs3.server.reqs").is_empty());
        assert_eq!(one(&mut a, "rpc.server.ra_size"), Some(0.0));
        assert_eq!(a.instance_id(super::indom::NFS4_CLI, "getattr"), Some(18));
    }

    #[test]
    fn an_nfs_server_has_rpc_fh_io_threads_and_v4_ops_from_instance_1() {
        let (_dir, mut a) = agent(&[("proc/net/rpc/nfsd", SERVER)]);
        a.expect(
            "rpc.server.rpccnt 8450
            rpc.server.rpcbadauth 2
            rpc.server.rcnocache 8422
            rpc.server.io_read 1048576
            rpc.server.th_cnt 8
            rpc.server.nettcpconn 12
            rpc.server.ra_hits 11
            rpc.server.ra_misses 3",
        );
        let v4 = fetch_f64(&mut a, "nfs4.server.reqs");
        assert_eq!(v4.len(), 71);
        assert_eq!(v4[0], ("op0-unused".into(), 0.0));
        assert_eq!(v4[3], ("access".into(), 40.0));
        assert_eq!(v4[9], ("getattr".into(), 9000.0));
        assert_eq!(v4[53], ("sequence".into(), 8000.0));
        assert_eq!(a.instance_id(super::indom::NFS4_SVR, "op0-unused"), Some(1));
        assert_eq!(
            a.instance_id(super::indom::NFS4_SVR, "write_same"),
            Some(71)
        );
        let v3 = fetch_f64(&mut a, "nfs3.server.reqs");
        assert_eq!(v3[7], ("write".into(), 200.0));
        a.expect(
            "rpc.client.rpccnt -
            nfs.client.calls -",
        );
    }
}
