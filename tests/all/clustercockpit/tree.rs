//! Two snapshots of a node's /proc and /sys (4 hardware threads, 2 per core, in 2 NUMA
//! domains, 2 disks and a loop
//! device, 3 interfaces), in the shapes a 5.x kernel writes them, and what cc-metric-collector
//! computes from them: each collector's reading of the files, transcribed from its Go source
//! (collectors/*.go), so the expected values come from the text, not from wasmon's code.

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

fn id(name: &str, typ: &str, tid: &str, dev: &str) -> Id {
    (name.into(), typ.into(), tid.into(), dev.into())
}

fn read(dir: &Path, rel: &str) -> String {
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

/// The files the guest collectors read (hwmon, infiniband, nfsclient), snapshot `s`, under
/// `dir`: 2 coretemp chips (sockets, as the example config's tag_override has them), an nvme
/// and an acpitz chip; 2 HCAs whose ports have a LID and one port without (0x0); 2 NFS mounts
/// (v3, v4) among other mounts.
pub fn write_guest_files(dir: &Path, s: u64) {
    let file = |rel: &str, text: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        // Renamed into place: a poll reads the old file or the new one, never half.
        let tmp = p.with_extension("tmp~");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    };
    // (hwmonN, chip name, [(file stem, label, input, max, crit)]) in millidegrees.
    type Sensor<'a> = (&'a str, Option<&'a str>, i64, i64, i64);
    let chips: [(&str, &str, Vec<Sensor>); 4] = [
        (
            "hwmon0",
            "coretemp",
            vec![
                ("temp1", Some("Package id 0"), 45_000, 84_000, 100_000),
                ("temp2", Some("Core 0"), 43_999, 84_000, 100_000),
                ("temp3", Some("Core 1"), 44_500, 84_000, 100_000),
            ],
        ),
        (
            "hwmon1",
            "coretemp",
            vec![
                ("temp1", Some("Package id 1"), 51_000, 84_000, 100_000),
                ("temp2", Some("Core 0"), 49_001, 84_000, 100_000),
            ],
        ),
        (
            "hwmon2",
            "nvme",
            vec![
                ("temp1", Some("Composite"), 38_850, 81_850, 84_850),
                ("temp2", Some("Sensor 1"), 38_850, 65_261_850, 0),
            ],
        ),
        (
            "hwmon3",
            "acpitz",
            vec![("temp1", None, 27_800, 0, 105_000)],
        ),
    ];
    for (n, (hw, name, sensors)) in chips.iter().enumerate() {
        let base = format!("sys/class/hwmon/{hw}");
        file(&format!("{base}/name"), &format!("{name}\n"));
        for (i, (stem, label, input, max, crit)) in sensors.iter().enumerate() {
            let input = input + s as i64 * (1_250 * (n as i64 + 1) + 333 * i as i64);
            file(&format!("{base}/{stem}_input"), &format!("{input}\n"));
            file(&format!("{base}/{stem}_max"), &format!("{max}\n"));
            if *crit != 0 || n != 2 {
                file(&format!("{base}/{stem}_crit"), &format!("{crit}\n"));
            }
            if let Some(l) = label {
                file(&format!("{base}/{stem}_label"), &format!("{l}\n"));
            }
        }
        file(&format!("{base}/fan1_input"), "1200\n");
    }
    // (device, port, lid)
    for (d, (dev, port, lid)) in [
        ("mlx5_0", "1", "0x1a"),
        ("mlx5_0", "2", "0x0"),
        ("mlx5_1", "1", "0x2b"),
    ]
    .iter()
    .enumerate()
    {
        let base = format!("sys/class/infiniband/{dev}/ports/{port}");
        file(&format!("{base}/lid"), &format!("{lid}\n"));
        file(&format!("{base}/state"), "4: ACTIVE\n");
        file(&format!("{base}/rate"), "100 Gb/sec (4X EDR)\n");
        let d = d as u64 + 1;
        for (c, name) in [
            "port_rcv_data",
            "port_xmit_data",
            "port_rcv_packets",
            "port_xmit_packets",
        ]
        .iter()
        .enumerate()
        {
            let c = c as u64 + 1;
            let v = d * 40_000_000_000 + c * 1_000_003 + s * (d * 7_777_777 + c * 31);
            file(&format!("{base}/counters/{name}"), &format!("{v}\n"));
        }
    }
    let mut ms = String::from(
        "device proc mounted on /proc with fstype proc\ndevice /dev/nvme0n1p2 mounted on / with fstype ext4\n",
    );
    for (m, (export, point, fstype, vers)) in [
        ("home.hpc.example:/export/home", "/home", "nfs", "3"),
        ("scratch.hpc.example:/", "/scratch", "nfs4", "4.2"),
    ]
    .iter()
    .enumerate()
    {
        let m = m as u64 + 1;
        let bytes: Vec<String> = (0..8u64)
            .map(|i| (m * 100_000_000_000 + i * 1_234_567 + s * (m * 4_096 + i * 512)).to_string())
            .collect();
        ms.push_str(&format!(
            "device {export} mounted on {point} with fstype {fstype} statvers=1.1\n\
             \topts:\trw,vers={vers},rsize=1048576,wsize=1048576,hard,proto=tcp,sec=sys\n\
             \tage:\t86400\n\
             \tevents:\t{}\n\
             \tbytes:\t{}\n\
             \tRPC iostats version: 1.1  p/v: 100003/{} (nfs)\n\
             \txprt:\ttcp 886 1 1 0 0 5000 5000 0 5000 0 2 1000 2000\n\
             \tper-op statistics\n\
             \t        NULL: 1 1 0 44 24 0 0 0 0\n\n",
            ["1"; 27].join(" "),
            bytes.join(" "),
            &vers[..1],
        ));
    }
    ms.push_str("device tmpfs mounted on /tmp with fstype tmpfs\n");
    file("proc/self/mountstats", &ms);
    // schedstat version 15: per CPU 9 figures, the 7th and 8th running and waiting ns.
    let mut sched = String::from("version 15\ntimestamp 4300000000\n");
    for c in 0..CPUS as u64 {
        let running = 9_000_000_000_000 * (c + 1) + s * (1_700_000_000 + c * 123_456_789);
        let waiting = 50_000_000_000 * (c + 1) + s * (90_000_000 + c * 7_654_321);
        sched.push_str(&format!(
            "cpu{c} 0 0 {} {} {} {} {running} {waiting} {}\n\
             domain0 00000003 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36\n",
            1000 + c, 10 + c, 500 + c, 400 + c, 7_000 + s * 40
        ));
    }
    file("proc/schedstat", &sched);
    for c in 0..CPUS {
        let base = format!("sys/devices/system/cpu/cpu{c}");
        let khz = 2_400_000 + 100_000 * c as u64 + s * 1_099_999;
        file(
            &format!("{base}/cpufreq/scaling_cur_freq"),
            &format!("{khz}\n"),
        );
        let core = c / 2;
        file(
            &format!("{base}/topology/core_cpus_list"),
            &format!("{}-{}\n", 2 * core, 2 * core + 1),
        );
        file(&format!("{base}/topology/core_id"), &format!("{core}\n"));
        file(&format!("{base}/topology/physical_package_id"), "0\n");
    }
    file("proc/fs/nfsfs/servers", "NV SERVER   PORT USE HOSTNAME\n");
}

/// tempstat with the example config (report_max_temperature, report_critical_temperature,
/// tag_override of hwmon0 and hwmon1 as sockets 0 and 1): `TempCollector.Init` and `Read`.
pub fn tempstat(b: &Path, out: &mut Expected) {
    let mut inputs: Vec<std::path::PathBuf> = std::fs::read_dir(b.join("sys/class/hwmon"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with("temp") && n.ends_with("_input")
        })
        .collect();
    inputs.sort();
    let text = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .map(|t| t.trim().to_string())
    };
    for file in inputs {
        let f = file.to_str().unwrap();
        let name = text(&file.parent().unwrap().join("name")).unwrap_or_default();
        let label = text(Path::new(&f.replace("_input", "_label"))).unwrap_or_default();
        let mut metric = if name == "coretemp"
            && (label.starts_with("Core ") || label.starts_with("Package id "))
        {
            format!("temp_{label}")
        } else if !name.is_empty() && !label.is_empty() {
            format!("{name}_{label}")
        } else if !name.is_empty() {
            name.clone()
        } else {
            label.clone()
        };
        metric = metric.to_lowercase().replace(' ', "_");
        if !metric.contains("temp") {
            metric = format!("temp_{metric}");
        }
        let (typ, tid) = if f.contains("hwmon0") {
            ("socket", "0")
        } else if f.contains("hwmon1") {
            ("socket", "1")
        } else {
            ("node", "")
        };
        let int = |p: &str| text(Path::new(p)).and_then(|t| t.parse::<i64>().ok());
        let x = int(f).unwrap() / 1000;
        out.insert(id(&metric, typ, tid, ""), (x as f64, "degC".into()));
        for (suffix, word) in [("_max", "max_temp"), ("_crit", "crit_temp")] {
            if let Some(v) = int(&f.replace("_input", suffix)).map(|v| v / 1000)
                && v != 0
            {
                out.insert(
                    id(&metric.replacen("temp", word, 1), typ, tid, ""),
                    (v as f64, "degC".into()),
                );
            }
        }
    }
}

/// ibstat with the example config (`{}`: absolute values only), per port whose LID is not
/// 0x0; the device is the identity's last field, the port and LID tags are in `tags`.
pub fn ibstat(b: &Path, out: &mut Expected, tags: &mut BTreeMap<String, (String, String)>) {
    for dev in std::fs::read_dir(b.join("sys/class/infiniband")).unwrap() {
        let dev = dev.unwrap().path();
        for port in std::fs::read_dir(dev.join("ports")).unwrap() {
            let port = port.unwrap().path();
            let lid = std::fs::read_to_string(port.join("lid")).unwrap();
            let lid = lid.trim();
            if lid == "0x0" {
                continue;
            }
            let device = dev.file_name().unwrap().to_str().unwrap();
            let p = port.file_name().unwrap().to_str().unwrap();
            tags.insert(device.into(), (p.into(), lid.into()));
            for (name, file, four, unit) in [
                ("ib_recv", "port_rcv_data", true, "bytes"),
                ("ib_xmit", "port_xmit_data", true, "bytes"),
                ("ib_recv_pkts", "port_rcv_packets", false, "packets"),
                ("ib_xmit_pkts", "port_xmit_packets", false, "packets"),
            ] {
                let raw: u64 = std::fs::read_to_string(port.join("counters").join(file))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                let v = if four { raw * 4 } else { raw };
                out.insert(id(name, "node", "", device), (v as f64, unit.into()));
            }
        }
    }
}

/// nfsiostat with its defaults (absolute values, the mount point as stype-id): its two
/// regular expressions over /proc/self/mountstats.
pub fn nfsiostat(b: &Path, out: &mut Expected) {
    const NAMES: [&str; 8] = [
        "nread",
        "nwrite",
        "dread",
        "dwrite",
        "nfsread",
        "nfswrite",
        "pageread",
        "pagewrite",
    ];
    let mut point: Option<String> = None;
    for l in read(b, "proc/self/mountstats").lines() {
        if let Some(rest) = l.strip_prefix("device ") {
            let w: Vec<&str> = rest.split(' ').collect();
            // `SERVER mounted on POINT with fstype nfsN statvers=`
            point = (w.len() >= 8
                && w[1] == "mounted"
                && w[6]
                    .strip_prefix("nfs")
                    .is_some_and(|v| v.bytes().all(|c| c.is_ascii_digit()))
                && w[7].starts_with("statvers="))
            .then(|| w[3].to_string());
            continue;
        }
        let Some(p) = &point else { continue };
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.first() == Some(&"bytes:") && f.len() >= 9 {
            for (i, n) in NAMES.iter().enumerate() {
                out.insert(
                    id(&format!("nfsio_{n}"), "node", "", p),
                    (f[i + 1].parse::<i64>().unwrap() as f64, "bytes".into()),
                );
            }
            point = None;
        }
    }
}
