//! Two snapshots of a node's /proc and /sys (4 hardware threads, 2 per core, in 2 NUMA
//! domains, 2 disks and a loop
//! device, 3 interfaces), in the shapes a 5.x kernel writes them, and what cc-metric-collector
//! computes from them: each collector's reading of the files, transcribed from its Go source
//! (collectors/*.go), so the expected values come from the text, not from wasmon's code.
//! The guest collectors' files and values are `guest_tree.rs`'s.

use std::collections::BTreeMap;
use std::path::Path;

pub const CPUS: usize = 4;
/// cpustat's fields of a `cpu` line, in the file's order after the name.
pub const CPU_FIELDS: [&str; 10] = [
    "cpu_user",
    "cpu_nice",
    "cpu_system",
    "cpu_idle",
    "cpu_iowait",
    "cpu_irq",
    "cpu_softirq",
    "cpu_steal",
    "cpu_guest",
    "cpu_guest_nice",
];
/// meminfo keys in the snapshots (a 5.x x86 kernel's, less the three wasmon does not read:
/// see `ABSENT`), with the value in the first snapshot.
const MEMINFO: &[(&str, u64, &str)] = &[
    ("MemTotal", 16_318_412, "kB"),
    ("MemFree", 3_120_004, "kB"),
    ("MemAvailable", 9_870_112, "kB"),
    ("Buffers", 310_228, "kB"),
    ("Cached", 6_012_440, "kB"),
    ("SwapCached", 1_024, "kB"),
    ("Active", 7_002_116, "kB"),
    ("Inactive", 4_501_300, "kB"),
    ("Unevictable", 0, "kB"),
    ("Mlocked", 12, "kB"),
    ("SwapTotal", 2_097_148, "kB"),
    ("SwapFree", 2_090_000, "kB"),
    ("Dirty", 1_208, "kB"),
    ("Writeback", 4, "kB"),
    ("AnonPages", 4_700_000, "kB"),
    ("Mapped", 800_120, "kB"),
    ("Shmem", 412_300, "kB"),
    ("KReclaimable", 600_000, "kB"),
    ("Slab", 900_000, "kB"),
    ("SReclaimable", 600_000, "kB"),
    ("SUnreclaim", 300_000, "kB"),
    ("KernelStack", 18_000, "kB"),
    ("PageTables", 60_000, "kB"),
    ("CommitLimit", 10_256_352, "kB"),
    ("Committed_AS", 12_000_000, "kB"),
    ("VmallocTotal", 34_359_738_367, "kB"),
    ("VmallocUsed", 60_000, "kB"),
    ("VmallocChunk", 0, "kB"),
    ("AnonHugePages", 2_048_000, "kB"),
    ("HugePages_Total", 16, ""),
    ("HugePages_Free", 12, ""),
    ("HugePages_Rsvd", 2, ""),
    ("HugePages_Surp", 0, ""),
    ("Hugepagesize", 2_048, "kB"),
    ("DirectMap4k", 400_000, "kB"),
    ("DirectMap2M", 10_000_000, "kB"),
    ("DirectMap1G", 8_388_608, "kB"),
];
/// cc-metric-collector's memstat names of meminfo keys (MemstatCollector's `matches`).
const MEMSTAT: &[(&str, &str)] = &[
    ("MemTotal", "mem_total"),
    ("SwapTotal", "swap_total"),
    ("SReclaimable", "mem_sreclaimable"),
    ("Slab", "mem_slab"),
    ("MemFree", "mem_free"),
    ("Buffers", "mem_buffers"),
    ("Cached", "mem_cached"),
    ("MemAvailable", "mem_available"),
    ("SwapFree", "swap_free"),
    ("Shmem", "mem_shared"),
    ("Active", "mem_active"),
    ("Inactive", "mem_inactive"),
    ("Dirty", "mem_dirty"),
    ("Writeback", "mem_writeback"),
    ("AnonPages", "mem_anon_pages"),
    ("Mapped", "mem_mapped"),
    ("VmallocTotal", "mem_vmalloc_total"),
    ("AnonHugePages", "mem_anon_hugepages"),
    ("ShmemHugePages", "mem_shared_hugepages"),
    ("ShmemPmdMapped", "mem_shared_pmd_mapped"),
    ("HugePages_Total", "mem_hugepages_total"),
    ("HugePages_Free", "mem_hugepages_free"),
    ("HugePages_Rsvd", "mem_hugepages_reserved"),
    ("HugePages_Surp", "mem_hugepages_surplus"),
    ("Hugepagesize", "mem_hugepages_size"),
    ("DirectMap4k", "mem_direct_mapped_4k"),
    ("DirectMap4M", "mem_direct_mapped_4m"),
    ("DirectMap2M", "mem_direct_mapped_2m"),
    ("DirectMap1G", "mem_direct_mapped_1g"),
    ("Mlocked", "mem_locked"),
    ("PageTables", "mem_pagetables"),
    ("KernelStack", "mem_kernelstack"),
];
/// memstat metrics cc-metric-collector sends as 0 when their key is missing and wasmon does
/// not send: PCP's linux PMDA has no metric for these meminfo keys (README).
pub const ABSENT: &[&str] = &[
    "mem_shared_hugepages",
    "mem_shared_pmd_mapped",
    "mem_direct_mapped_4m",
];
pub const DISKS: &[&str] = &["sda", "nvme0n1", "loop0"];
pub const NICS: &[&str] = &["lo", "eth0", "ib0"];
pub const NODES: usize = 2;

/// Snapshot `s` (0 or 1): counters grow by amounts that differ per CPU, field, device.
pub fn write(dir: &Path, s: u64) {
    let file = |rel: &str, text: String| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    // /proc/stat: the `cpu` line is the sum of the CPUs' lines, as the kernel writes it.
    let ticks = |cpu: usize, f: usize| {
        1_000 * (cpu as u64 + 1) + 10 * f as u64 + s * (7 * (cpu as u64 + 1) * (f as u64 + 1) + 3)
    };
    let mut stat = String::from("cpu ");
    for f in 0..10 {
        stat.push_str(&format!(" {}", (0..CPUS).map(|c| ticks(c, f)).sum::<u64>()));
    }
    stat.push('\n');
    for c in 0..CPUS {
        let t: Vec<String> = (0..10).map(|f| ticks(c, f).to_string()).collect();
        stat.push_str(&format!("cpu{c} {}\n", t.join(" ")));
    }
    stat.push_str("intr 12345 0 0\nctxt 987654\nbtime 1700000000\nprocesses 4321\nprocs_running 3\nprocs_blocked 0\nsoftirq 100 0 0 0 0 0 0 0 0 0 0\n");
    file("proc/stat", stat);
    file(
        "proc/loadavg",
        [
            "0.50 0.40 0.30 3/250 12345\n",
            "1.25 0.75 0.61 5/262 12399\n",
        ][s as usize]
            .into(),
    );
    let mut mem = String::new();
    for (i, (k, v, unit)) in MEMINFO.iter().enumerate() {
        let v = v + s * (i as u64 % 5) * 1_000;
        mem.push_str(&format!(
            "{:<16}{v:>9}{}\n",
            format!("{k}:"),
            if unit.is_empty() {
                String::new()
            } else {
                format!(" {unit}")
            }
        ));
    }
    file("proc/meminfo", mem);
    let mut dev = String::from(
        "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n",
    );
    for (n, nic) in NICS.iter().enumerate() {
        let n = n as u64 + 1;
        let f: Vec<String> = (0..16u64)
            .map(|i| (n * 1_000_000 + i * 1_000 + s * (n * 7_919 + i * 13)).to_string())
            .collect();
        dev.push_str(&format!("{nic:>6}: {}\n", f.join(" ")));
    }
    file("proc/net/dev", dev);
    // /proc/diskstats with discards and flushes (5.5+): 17 counters. sda's io ticks cross
    // 2^32 between the snapshots (PCP keeps them in 32 bits; the kernel in 64).
    let mut ds = String::new();
    for (d, disk) in DISKS.iter().enumerate() {
        let (major, minor) = [(8, 0), (259, 0), (7, 0)][d];
        let f: Vec<String> = (0..17u64)
            .map(|i| {
                let base = if d == 0 && i == 9 {
                    4_294_967_290
                } else {
                    (d as u64 + 1) * 10_000 + i * 100
                };
                (base + s * ((d as u64 + 1) * 11 + i * 3)).to_string()
            })
            .collect();
        ds.push_str(&format!("{major:>4} {minor:>7} {disk} {}\n", f.join(" ")));
        std::fs::create_dir_all(dir.join("sys/block").join(disk)).unwrap();
    }
    file("proc/diskstats", ds);
    for n in 0..NODES {
        let keys = [
            "numa_hit",
            "numa_miss",
            "numa_foreign",
            "interleave_hit",
            "local_node",
            "other_node",
        ];
        let text: String = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                format!(
                    "{k} {}\n",
                    (n as u64 + 1) * 1_000_000 + i as u64 * 10 + s * (i as u64 + 1) * 99
                )
            })
            .collect();
        file(&format!("sys/devices/system/node/node{n}/numastat"), text);
        file(
            &format!("sys/devices/system/node/node{n}/cpulist"),
            format!("{}-{}\n", 2 * n, 2 * n + 1),
        );
    }
    let mut cpuinfo = String::new();
    for c in 0..CPUS {
        cpuinfo.push_str(&format!(
            "processor\t: {c}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\nstepping\t: 7\ncpu MHz\t\t: {}\ncache size\t: 28160 KB\nphysical id\t: {}\ncore id\t\t: {}\nbogomips\t: 5000.00\n\n",
            ["2593.906", "3899.998"][s as usize].replace('9', &c.to_string()),
            c / CPUS,
            c / 2
        ));
    }
    file("proc/cpuinfo", cpuinfo);
}

/// A cc-metric-collector sample's identity: name, level type, type-id ("" for the node),
/// and the device or stype-id it names ("" when none).
pub type Id = (String, String, String, String);
/// Each series' value and `unit` tag ("" for none).
pub type Expected = BTreeMap<Id, (f64, String)>;

pub(super) fn id(name: &str, typ: &str, tid: &str, dev: &str) -> Id {
    (name.into(), typ.into(), tid.into(), dev.into())
}

pub(super) fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap()
}

/// cpustat (`parseStatLine`) over two reads `dt` seconds apart, with the example config's
/// `exclude_metrics = ["cpu_idle"]` (so no cpu_used either), and `num_cpus`.
pub fn cpustat(a: &Path, b: &Path, dt: f64, out: &mut Expected) {
    const CLK_TCK: f64 = 100.0;
    let old: BTreeMap<String, Vec<i64>> = read(a, "proc/stat")
        .lines()
        .filter(|l| l.starts_with("cpu"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1..].iter().map(|x| x.parse().unwrap()).collect(),
            )
        })
        .collect();
    let mut num_cpus = 0;
    for l in read(b, "proc/stat")
        .lines()
        .filter(|l| l.starts_with("cpu"))
    {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (typ, tid) = match f[0].strip_prefix("cpu").unwrap() {
            "" => ("node", ""),
            n => {
                num_cpus += 1;
                ("hwthread", n)
            }
        };
        for (i, name) in CPU_FIELDS.iter().enumerate() {
            if *name == "cpu_idle" {
                continue;
            }
            let x: i64 = f[i + 1].parse().unwrap();
            let v = (x - old[f[0]][i]) as f64 / dt / CLK_TCK;
            out.insert(id(name, typ, tid, ""), (v * 100.0, "Percent".into()));
        }
    }
    out.insert(
        id("num_cpus", "node", "", ""),
        (num_cpus as f64, String::new()),
    );
}

/// loadavg, with the example config's `exclude_metrics = ["proc_total"]`.
pub fn loadavg(b: &Path, out: &mut Expected) {
    let text = read(b, "proc/loadavg");
    let ls: Vec<&str> = text.split(' ').collect();
    for (i, name) in ["load_one", "load_five", "load_fifteen"].iter().enumerate() {
        out.insert(
            id(name, "node", "", ""),
            (ls[i].parse().unwrap(), String::new()),
        );
    }
    let lv: Vec<&str> = ls[3].split('/').collect();
    out.insert(
        id("proc_run", "node", "", ""),
        (lv[0].parse().unwrap(), String::new()),
    );
}

/// memstat (`getStats`, `sendStats` at the node), mem_used included; the names in `ABSENT`
/// are left out (wasmon does not send them).
pub fn memstat(b: &Path, out: &mut Expected) {
    // (value, unit): the unit is the line's third field, none for counts.
    let stats: BTreeMap<String, (f64, String)> = read(b, "proc/meminfo")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let unit = f.get(2).copied().unwrap_or("").to_string();
            (f.len() == 3 || f.len() == 2).then(|| {
                (
                    f[0].trim_end_matches(':').to_string(),
                    (f[1].parse().unwrap(), unit),
                )
            })
        })
        .collect();
    for (key, name) in MEMSTAT {
        if !ABSENT.contains(name) {
            out.insert(
                id(name, "node", "", ""),
                stats.get(*key).cloned().unwrap_or((0.0, String::new())),
            );
        }
    }
    let v = |k: &str| stats[k].0;
    let used = v("MemTotal") - v("MemFree") - v("Buffers") - v("Cached") - v("Shmem");
    out.insert(
        id("mem_used", "node", "", ""),
        (used, stats["MemTotal"].1.clone()),
    );
}

/// netstat with `send_derived_values = true` for `devices` (its `include_devices`).
pub fn netstat(a: &Path, b: &Path, dt: f64, devices: &[&str], out: &mut Expected) {
    let parse = |text: String| -> BTreeMap<String, Vec<i64>> {
        text.lines()
            .filter(|l| l.contains(':'))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (
                    f[0].trim_matches(|c| c == ':' || c == ' ').to_string(),
                    f[1..].iter().map(|x| x.parse().unwrap()).collect(),
                )
            })
            .collect()
    };
    let (old, new) = (
        parse(read(a, "proc/net/dev")),
        parse(read(b, "proc/net/dev")),
    );
    for dev in devices {
        // fieldReceiveBytes .. as NetstatCollector indexes them (1-based after the name).
        let fields = [
            ("net_bytes_in", 1, "bytes"),
            ("net_pkts_in", 2, "packets"),
            ("net_bytes_out", 9, "bytes"),
            ("net_pkts_out", 10, "packets"),
        ];
        for (name, idx, unit) in fields {
            let v = new[*dev][idx - 1];
            out.insert(id(name, "node", "", dev), (v as f64, unit.into()));
            let rate = (v - old[*dev][idx - 1]) as f64 / dt;
            out.insert(
                id(&format!("{name}_bw"), "node", "", dev),
                (rate, format!("{unit}/sec")),
            );
        }
    }
}

/// iostat: each field's difference to the previous read, per device without `loop`.
pub fn iostat(a: &Path, b: &Path, out: &mut Expected) {
    const MATCHES: &[(&str, usize)] = &[
        ("io_reads", 3),
        ("io_reads_merged", 4),
        ("io_read_sectors", 5),
        ("io_read_ms", 6),
        ("io_writes", 7),
        ("io_writes_merged", 8),
        ("io_writes_sectors", 9),
        ("io_writes_ms", 10),
        ("io_ioops", 11),
        ("io_ioops_ms", 12),
        ("io_ioops_weighted_ms", 13),
        ("io_discards", 14),
        ("io_discards_merged", 15),
        ("io_discards_sectors", 16),
        ("io_discards_ms", 17),
        ("io_flushes", 18),
        ("io_flushes_ms", 19),
    ];
    let parse = |text: String| -> BTreeMap<String, Vec<String>> {
        text.lines()
            .map(|l| {
                let f: Vec<String> = l.split_whitespace().map(str::to_string).collect();
                (f[2].clone(), f)
            })
            .collect()
    };
    let (old, new) = (
        parse(read(a, "proc/diskstats")),
        parse(read(b, "proc/diskstats")),
    );
    for (dev, f) in &new {
        if dev.contains("loop") {
            continue;
        }
        for (name, idx) in MATCHES {
            let x: i64 = f[*idx].parse().unwrap();
            let prev: i64 = old[dev][*idx].parse().unwrap();
            out.insert(
                id(name, "node", "", dev),
                ((x - prev) as f64, String::new()),
            );
        }
    }
}

/// numastats with absolute values (its default), per memory domain.
pub fn numastats(b: &Path, out: &mut Expected) {
    for n in 0..NODES {
        for l in read(b, &format!("sys/devices/system/node/node{n}/numastat")).lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let v: i64 = f[1].parse().unwrap();
            let name = format!("numastats_{}", f[0]);
            out.insert(
                id(&name, "memoryDomain", &n.to_string(), ""),
                (v as f64, String::new()),
            );
        }
    }
}

/// cpufreq_cpuinfo: `cpu MHz` of each hwthread but the SMT siblings (a `physical id:core
/// id` seen before), tagged with its `package_id`.
pub fn cpufreq_cpuinfo(b: &Path, out: &mut Expected, package: &mut BTreeMap<String, String>) {
    // Init: one entry per processor once its MHz, processor, core and package are known.
    let (mut freq, mut processor, mut core, mut pkg) =
        (false, String::new(), String::new(), String::new());
    let mut topology: Vec<(bool, String, String)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let text = read(b, "proc/cpuinfo");
    for l in text.lines() {
        let kv: Vec<&str> = l.split(':').collect();
        if kv.len() == 2 {
            let v = kv[1].trim().to_string();
            match kv[0].trim() {
                "cpu MHz" => freq = true,
                "processor" => processor = v,
                "core id" => core = v,
                "physical id" => pkg = v,
                _ => {}
            }
        }
        if freq && !processor.is_empty() && !core.is_empty() && !pkg.is_empty() {
            let global = format!("{pkg}:{core}");
            topology.push((seen.contains(&global), processor.clone(), pkg.clone()));
            seen.insert(global);
            (freq, processor, core, pkg) = (false, String::new(), String::new(), String::new());
        }
    }
    // Read
    let mut counter = 0;
    for l in text.lines() {
        let kv: Vec<&str> = l.split(':').collect();
        if kv.len() == 2 && kv[0].trim() == "cpu MHz" {
            let (ht, cpu, pkg) = &topology[counter];
            if !ht {
                let mhz: f64 = kv[1].trim().parse().unwrap();
                out.insert(id("cpufreq", "hwthread", cpu, ""), (mhz, "MHz".into()));
                package.insert(cpu.clone(), pkg.clone());
            }
            counter += 1;
        }
    }
}

/// schedstat over two reads `dt` seconds apart: `cpu_load_core` per hwthread.
pub fn schedstat(a: &Path, b: &Path, dt: f64, out: &mut Expected) {
    let parse = |dir: &Path| -> BTreeMap<String, (i64, i64)> {
        read(dir, "proc/schedstat")
            .lines()
            .filter(|l| l.starts_with("cpu"))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (
                    f[0].to_string(),
                    (f[7].parse().unwrap(), f[8].parse().unwrap()),
                )
            })
            .collect()
    };
    let (old, new) = (parse(a), parse(b));
    for (cpu, (running, waiting)) in &new {
        let l_running = (running - old[cpu].0) as f64 / dt / 1_000_000_000.0;
        let l_waiting = (waiting - old[cpu].1) as f64 / dt / 1_000_000_000.0;
        let tid = cpu.trim_start_matches("cpu");
        out.insert(
            id("cpu_load_core", "hwthread", tid, ""),
            (l_running + l_waiting, String::new()),
        );
    }
}

/// cpufreq (sysfs): scaling_cur_freq (kHz, with unit Hz) of each CPU that is the first of
/// its core_cpus_list, tagged with its physical_package_id.
pub fn cpufreq_sysfs(b: &Path, out: &mut Expected, package: &mut BTreeMap<String, String>) {
    for c in 0..CPUS {
        let topo = |f: &str| read(b, &format!("sys/devices/system/cpu/cpu{c}/topology/{f}"));
        let list = topo("core_cpus_list");
        let first: usize = list
            .trim()
            .split([',', '-'])
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if first != c {
            continue;
        }
        let khz: i64 = read(
            b,
            &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq"),
        )
        .trim()
        .parse()
        .unwrap();
        out.insert(
            id("cpufreq", "hwthread", &c.to_string(), ""),
            (khz as f64, "Hz".into()),
        );
        package.insert(
            c.to_string(),
            topo("physical_package_id").trim().to_string(),
        );
    }
}
