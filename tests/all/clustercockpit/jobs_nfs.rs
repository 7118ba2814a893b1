//! The node's NFS client call counts (/proc/net/rpc/nfs) and Slurm jobs' cgroups, two
//! snapshots in the shapes a 6.x kernel and Slurm 24/26 write them, and what
//! cc-metric-collector's nfs3stat, nfs4stat (`nfsMetric.go`, over `nfsstat -l --all`, whose
//! listing is transcribed from nfs-utils' nfsstat.c) and slurm_cgroup
//! (`slurmCgroupMetric.go`) send for them: transcribed from their sources, so the expected
//! values come from the text, not from wasmon's code. Kept apart from `tree.rs` (the other
//! collectors).

use std::collections::BTreeMap;
use std::path::Path;

use super::tree::{CPUS, Expected};

/// nfsstat.c's `nfsv3name`: its names of /proc/net/rpc/nfs's `proc3` columns.
const NFSSTAT_V3: [&str; 22] = [
    "null",
    "getattr",
    "setattr",
    "lookup",
    "access",
    "readlink",
    "read",
    "write",
    "create",
    "mkdir",
    "symlink",
    "mknod",
    "remove",
    "rmdir",
    "rename",
    "link",
    "readdir",
    "readdirplus",
    "fsstat",
    "fsinfo",
    "pathconf",
    "commit",
];

/// nfsstat.c's `nfscltproc4name` (CLTPROC4_SZ = 59): its names of the `proc4` columns.
const NFSSTAT_V4: [&str; 59] = [
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
    "create_session",
    "destroy_session",
    "sequence",
    "get_lease_time",
    "reclaim_comp",
    "layoutget",
    "getdevinfo",
    "layoutcommit",
    "layoutreturn",
    "secinfo_no",
    "test_stateid",
    "free_stateid",
    "getdevicelist",
    "bind_conn_to_ses",
    "destroy_clientid",
    "seek",
    "allocate",
    "deallocate",
    "layoutstats",
    "clone",
];

/// Columns a 6.x kernel writes on its `proc4` line (more than nfsstat names).
const KERNEL_V4: usize = 69;

fn file(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    // Renamed into place: a poll reads the old file or the new one, never half.
    let tmp = p.with_extension("tmp~");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
}

/// A `proc3` column's count in snapshot `s`: some operations never called, some first called
/// between the snapshots, some called in both and unchanged, the rest growing.
fn v3(i: usize, s: u64) -> u64 {
    match i {
        0 | 11 | 15 => 0,
        10 => s * 5,
        21 => 4_000,
        _ => 10_000 * (i as u64 + 1) + s * (i as u64 * 37 + 1),
    }
}

/// A `proc4` column's count: as `v3`, with every column PCP names differently from nfsstat
/// called (39, 40, 42, 47-55); columns 56-58 (NFSv4.2's deallocate, layoutstats, clone, which
/// PCP's 56 columns leave out: README) never; the columns past nfsstat's 59 called.
fn v4(i: usize, s: u64) -> u64 {
    match i {
        0 | 13 | 56..=58 => 0,
        12 => s * 3,
        20 => 77,
        _ => 1_000 * (i as u64 + 1) + s * (i as u64 * 11 + 2),
    }
}

/// /proc/net/rpc/nfs of snapshot `s` under `dir`.
pub fn write_rpc(dir: &Path, s: u64) {
    let row = |n: usize, f: &dyn Fn(usize, u64) -> u64| -> String {
        (0..n)
            .map(|i| f(i, s).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let text = format!(
        "net 0 0 0 0\nrpc {} 0 {}\nproc3 22 {}\nproc4 {KERNEL_V4} {}\n",
        900_000 + s * 1_000,
        2 + s,
        row(22, &v3),
        row(KERNEL_V4, &v4),
    );
    file(dir, "proc/net/rpc/nfs", &text);
}

/// `nfsstat -l --all`'s client lines for one version (`print_callstats_list` over what
/// `parse_raw_statfile` read): (name, count) for `total` and each operation with calls;
/// nothing when no call was counted.
fn nfsstat_list(text: &str, tag: &str, names: &[&str]) -> Vec<(String, i64)> {
    let Some(line) = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(tag))
    else {
        return Vec::new();
    };
    // valptr[0] is the column count the kernel writes; names[i] is valptr[i + 1].
    let words: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().unwrap())
        .collect();
    let calls: Vec<u64> = (0..names.len())
        .map(|i| words.get(i + 1).copied().unwrap_or(0))
        .collect();
    let total: u64 = calls.iter().sum();
    if total == 0 {
        return Vec::new();
    }
    let mut out = vec![("total".to_string(), total as i64)];
    for (n, c) in names.iter().zip(&calls) {
        if *c != 0 {
            out.push((n.to_string(), *c as i64));
        }
    }
    out
}

/// nfs3stat and nfs4stat (`nfsCollector.updateStats` and `Read`) over the node's polls: the
/// collector's `Init` reads A, then its reads see A, B, B. Each series' one non-zero value,
/// or 0 when it only ever sent zeros; a name never sent is not in `out`.
pub fn nfsstat(a: &Path, b: &Path, out: &mut Expected) {
    #[derive(Clone, Copy)]
    struct Data {
        current: i64,
        last: i64,
    }
    let reads = [a, a, b, b].map(|d| std::fs::read_to_string(d.join("proc/net/rpc/nfs")).unwrap());
    // (Nfs3Collector's `prefix` for version v3, its line tag in the file, nfsstat's names)
    for (prefix, tag, names) in [
        ("nfs3", "proc3", &NFSSTAT_V3[..]),
        ("nfs4", "proc4", &NFSSTAT_V4[..]),
    ] {
        let mut data: BTreeMap<String, Data> = BTreeMap::new();
        let mut sent: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for (k, text) in reads.iter().enumerate() {
            for d in data.values_mut() {
                *d = Data {
                    last: d.current,
                    current: -1,
                };
            }
            for (name, value) in nfsstat_list(text, tag, names) {
                let d = data.entry(name).or_insert(Data {
                    current: 0,
                    last: -1,
                });
                d.current = value;
            }
            if k == 0 {
                continue; // Init
            }
            for (name, d) in &data {
                if d.current >= 0 && d.last >= 0 {
                    sent.entry(format!("{prefix}_{name}"))
                        .or_default()
                        .push(d.current - d.last);
                }
            }
        }
        for (name, values) in sent {
            let v = values.iter().copied().find(|v| *v != 0).unwrap_or(0);
            out.insert(
                (name, "node".into(), String::new(), String::new()),
                (v as f64, String::new()),
            );
        }
    }
}

/// A job's cgroup files in snapshot `s`: (directory, [(file, text)]).
type Job = (&'static str, Vec<(&'static str, String)>);

fn jobs(s: u64) -> Vec<Job> {
    vec![
        // Slurm 24: a numeric job on hardware threads 0 and 1, unlimited memory.
        (
            "job_4201",
            vec![
                (
                    "memory.current",
                    format!("{}\n", 3_221_225_472 + s * 104_857_600),
                ),
                (
                    "memory.peak",
                    format!("{}\n", 4_294_967_296 + s * 209_715_200),
                ),
                ("memory.max", "max\n".into()),
                (
                    "cpu.stat",
                    format!(
                        "usage_usec {}\nuser_usec {}\nsystem_usec {}\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
                        98_765_432 + s * 20_000_000,
                        90_000_000 + s * 19_000_000,
                        8_765_432 + s * 1_000_000
                    ),
                ),
                ("cpuset.cpus", "0-1\n".into()),
            ],
        ),
        // Slurm 26: a SLUID on thread 2, a memory limit, no memory.peak (before Linux 5.19),
        // and a cpu.stat whose usage is not a number (cc-metric-collector skips the line:
        // its percentages are 0).
        (
            "s0F3KQ8VZ2M4NX",
            vec![
                ("memory.current", format!("{}\n", 536_870_912 + s * 4_096)),
                ("memory.max", "17179869184\n".into()),
                (
                    "cpu.stat",
                    format!("usage_usec n/a\nuser_usec {}\nsystem_usec 5\n", 100 + s),
                ),
                ("cpuset.cpus", "2\n".into()),
            ],
        ),
    ]
}

/// The Slurm jobs' cgroups and the online threads (all `CPUS`; thread 3 runs no job) of
/// snapshot `s` under `dir`, as the slurm agent's grants see them.
pub fn write_slurm(dir: &Path, s: u64) {
    let base = "sys/fs/cgroup/system.slice/slurmstepd.scope";
    file(
        dir,
        &format!("{base}/cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    for (job, files) in jobs(s) {
        for (name, text) in files {
            file(dir, &format!("{base}/{job}/{name}"), &text);
        }
    }
    // Not a job: slurmstepd's own cgroup.
    file(dir, &format!("{base}/system/cgroup.procs"), "1234\n");
    file(
        dir,
        "sys/devices/system/cpu/online",
        &format!("0-{}\n", CPUS - 1),
    );
}

/// slurm_cgroup (`ParseCPUs`, `ReadJobData`, `Read`) over `b`: per job, each figure / the
/// job's CPUs on each of its threads; 0 on every online thread no job holds.
pub fn slurm_cgroup(b: &Path, out: &mut Expected) {
    let base = b.join("sys/fs/cgroup/system.slice/slurmstepd.scope");
    let parse_cpus = |text: &str| -> Vec<i64> {
        let mut cpus = Vec::new();
        for r in text.split(',').filter(|r| !r.is_empty()) {
            match r.split_once('-') {
                Some((lo, hi)) => {
                    cpus.extend(lo.trim().parse::<i64>().unwrap()..=hi.trim().parse().unwrap())
                }
                None => cpus.push(r.trim().parse().unwrap()),
            }
        }
        cpus
    };
    let float = |p: &Path| -> f64 {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let all = parse_cpus(
        std::fs::read_to_string(b.join("sys/devices/system/cpu/online"))
            .unwrap()
            .trim(),
    );
    let mut dirs: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| {
            let sluid = n.len() == 14
                && n.starts_with(['s', 'S'])
                && n[1..].bytes().all(|c| {
                    c.is_ascii_digit()
                        || (c.is_ascii_alphabetic()
                            && !matches!(c.to_ascii_uppercase(), b'I' | b'L' | b'O' | b'U'))
                });
            let job = n
                .strip_prefix("job_")
                .is_some_and(|id| !id.is_empty() && id.bytes().all(|c| c.is_ascii_digit()));
            (sluid || job) && base.join(n).is_dir()
        })
        .collect();
    dirs.sort();
    let mut used = std::collections::BTreeSet::new();
    let mut put = |name: &str, cpu: i64, v: f64, unit: &str| {
        out.insert(
            (
                name.into(),
                "hwthread".into(),
                cpu.to_string(),
                String::new(),
            ),
            (v, unit.into()),
        );
    };
    for d in dirs {
        let j = base.join(&d);
        let (mut user, mut sys) = (0.0, 0.0);
        if let Ok(stat) = std::fs::read_to_string(j.join("cpu.stat")) {
            let (mut usage, mut u, mut s) = (0.0, 0.0, 0.0);
            for line in stat.trim().lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                let Some(v) = f.get(1).and_then(|v| v.parse::<f64>().ok()) else {
                    continue;
                };
                match f[0] {
                    "usage_usec" => usage = v,
                    "user_usec" => u = v,
                    "system_usec" => s = v,
                    _ => {}
                }
            }
            if usage > 0.0 {
                user = u * 100.0 / usage;
                sys = s * 100.0 / usage;
            }
        }
        let cpus = std::fs::read_to_string(j.join("cpuset.cpus"))
            .map(|t| parse_cpus(t.trim()))
            .unwrap_or_default();
        let n = cpus.len() as f64;
        for cpu in cpus {
            put(
                "job_mem_used",
                cpu,
                float(&j.join("memory.current")) / n,
                "Bytes",
            );
            put(
                "job_max_mem_used",
                cpu,
                float(&j.join("memory.peak")) / n,
                "Bytes",
            );
            put(
                "job_mem_limit",
                cpu,
                float(&j.join("memory.max")) / n,
                "Bytes",
            );
            put("job_user_cpu", cpu, user / n, "%");
            put("job_sys_cpu", cpu, sys / n, "%");
            used.insert(cpu);
        }
    }
    for cpu in all.into_iter().filter(|c| !used.contains(c)) {
        for (name, unit) in [
            ("job_mem_used", "Bytes"),
            ("job_max_mem_used", "Bytes"),
            ("job_mem_limit", "Bytes"),
            ("job_user_cpu", "%"),
            ("job_sys_cpu", "%"),
        ] {
            put(name, cpu, 0.0, unit);
        }
    }
}
