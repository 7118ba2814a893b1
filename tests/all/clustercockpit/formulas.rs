//! The `clustercockpit` transformer's formulas, one test each, through the bundled component:
//! PCP samples in (as the linux agent's polls send them: one timestamp per poll, the instance
//! as the resource), cc-metric-collector's samples out, with the values its collectors'
//! arithmetic gives for the same kernel figures.

use serde_json::{Value, json};
use wasmon::host::TransformerInstance;
use wasmon::sample::Sample;

use crate::common::*;

/// Why loading with `params` was refused.
fn refused(params: Value) -> String {
    match load("clustercockpit", params) {
        Ok(_) => panic!("accepted"),
        Err(e) => format!("{e:#}"),
    }
}

fn guest(rows: Value) -> TransformerInstance {
    load("clustercockpit", json!({ "metrics": rows })).unwrap()
}

/// The profile's parameters for stage `stage` of pipeline `pipeline`.
fn profile_params(pipeline: usize, stage: usize) -> Value {
    let text = wasmon::config::profile("clustercockpit").unwrap();
    let config: Value = toml::from_str(text).unwrap();
    config["pipeline"][pipeline]["transformer"][stage]["params"].clone()
}

/// (name, tags as `k=v` joined by `,`, value) of each output, for comparing whole.
pub(super) fn seen(out: &[Sample]) -> Vec<(String, String, f64)> {
    out.iter()
        .map(|s| {
            let tags: Vec<String> = s.metadata.iter().map(|(k, v)| format!("{k}={v}")).collect();
            (s.name.to_string(), tags.join(","), s.value)
        })
        .collect()
}

pub(super) fn one(name: &str, tags: &str, v: f64) -> (String, String, f64) {
    (name.into(), tags.into(), v)
}

/// loadavg, memstat, numastats: the value as PCP has it, × factor; the tags put it at its
/// level (hwthread and memoryDomain ids from the instance), a device or a node's stype
/// named by the instance; instance filters as cc-metric-collector's device lists.
#[test]
fn value_takes_its_level_and_tags_from_the_instance() {
    let mut g = guest(json!([
        {"from": "kernel.all.load", "instance": "5 minute", "to": "load_five"},
        {"from": "mem.numa.alloc.hit", "to": "numastats_numa_hit", "type": "memoryDomain"},
        {"from": "hinv.hugepagesize", "to": "mem_hugepages_size", "factor": 0.0009765625, "unit": "kB"},
        {"from": "network.interface.in.bytes", "to": "net_bytes_in", "stype": "network", "unit": "bytes", "include": ["eth0", "ib0"]},
        {"from": "disk.dev.read", "to": "io_reads_total", "device": true, "exclude": ["loop"]},
    ]));
    let out = g
        .handle(&[
            sample("kernel.all.load", "1 minute", 0.5, 10.0),
            sample("kernel.all.load", "5 minute", 0.25, 10.0),
            sample("mem.numa.alloc.hit", "node1", 7e6, 10.0),
            sample("hinv.hugepagesize", "", 2_097_152.0, 10.0),
            sample("network.interface.in.bytes", "lo", 1.0, 10.0),
            sample("network.interface.in.bytes", "ib0", 2.0, 10.0),
            sample("disk.dev.read", "loop3", 4.0, 10.0),
            sample("disk.dev.read", "nvme0n1", 5.0, 10.0),
            sample("unmapped.metric", "", 6.0, 10.0),
        ])
        .unwrap();
    assert_eq!(
        seen(&out),
        vec![
            one("load_five", "type=node", 0.25),
            one("numastats_numa_hit", "type=memoryDomain,type-id=1", 7e6),
            one("mem_hugepages_size", "type=node,unit=kB", 2048.0),
            one(
                "net_bytes_in",
                "type=node,stype=network,stype-id=ib0,unit=bytes",
                2.0
            ),
            one("io_reads_total", "type=node,device=nvme0n1", 5.0),
        ]
    );
    assert_eq!(&*out[2].unit, "kB");
}

/// cpustat: `(ticks now − ticks before) / seconds / USER_HZ × 100`, which on PCP's
/// milliseconds (ticks × 1000 / USER_HZ) is ms per second × 0.1; the first poll is only the
/// baseline, as cpustat's Init read is.
#[test]
fn rate_is_cpustat_percent_from_pcp_milliseconds() {
    let mut g = guest(json!([
        {"from": "kernel.percpu.cpu.user", "to": "cpu_user", "formula": "rate", "factor": 0.1, "type": "hwthread", "unit": "Percent"},
        {"from": "network.interface.out.bytes", "to": "net_bytes_out_bw", "formula": "rate", "stype": "network"},
    ]));
    let poll = |t: f64, user_ticks: [u64; 2], bytes: f64| {
        let mut s: Vec<Sample> = user_ticks
            .iter()
            .enumerate()
            .map(|(c, ticks)| {
                sample(
                    "kernel.percpu.cpu.user",
                    &format!("cpu{c}"),
                    (ticks * 10) as f64,
                    t,
                )
            })
            .collect();
        s.push(sample("network.interface.out.bytes", "eth0", bytes, t));
        s
    };
    assert!(
        g.handle(&poll(100.0, [1_000, 5_000], 1e9))
            .unwrap()
            .is_empty()
    );
    let out = g.handle(&poll(104.0, [1_250, 5_400], 1e9 + 4e6)).unwrap();
    let cc = |ticks: f64, dt: f64| ticks / dt / 100.0 * 100.0;
    assert_eq!(seen(&out)[0].1, "type=hwthread,type-id=0,unit=Percent");
    let values: Vec<f64> = out.iter().map(|s| s.value).collect();
    let want = [cc(250.0, 4.0), cc(400.0, 4.0), 4e6 / 4.0];
    for (got, want) in values.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{values:?} vs {want}");
    }
    assert_eq!(values.len(), 3);
}

/// iostat: each counter's change since the last read, as an integer; a PCP counter kept in
/// 32 bits (`wrap = 32`) that wrapped is put back as the kernel's 64-bit field had it.
#[test]
fn diff_is_iostat_and_undoes_32_bit_wraps() {
    let mut g = guest(json!([
        {"from": "disk.dev.avactive", "to": "io_ioops_ms", "formula": "diff", "device": true, "wrap": 32},
        {"from": "disk.dev.read", "to": "io_reads", "formula": "diff", "device": true},
    ]));
    let kernel = [4_294_967_290u64, 4_294_967_300];
    let mut values = Vec::new();
    for (t, k) in kernel.iter().enumerate() {
        let pcp = (*k as u32) as f64;
        let reads = 100.0 + 7.0 * t as f64;
        let out = g
            .handle(&[
                sample("disk.dev.avactive", "sda", pcp, t as f64),
                sample("disk.dev.read", "sda", reads, t as f64),
            ])
            .unwrap();
        values.extend(seen(&out));
    }
    assert_eq!(
        values,
        vec![
            one(
                "io_ioops_ms",
                "type=node,device=sda",
                (kernel[1] - kernel[0]) as f64
            ),
            one("io_reads", "type=node,device=sda", 7.0)
        ]
    );
}

/// cpustat's `num_cpus`: the CPU lines of /proc/stat, PCP's per-CPU instances.
#[test]
fn count_is_num_cpus() {
    let mut g =
        guest(json!([{"from": "kernel.percpu.cpu.user", "to": "num_cpus", "formula": "count"}]));
    let batch: Vec<Sample> = (0..6)
        .map(|c| sample("kernel.percpu.cpu.user", &format!("cpu{c}"), 1.0, 3.0))
        .collect();
    assert_eq!(
        seen(&g.handle(&batch).unwrap()),
        vec![one("num_cpus", "type=node", 6.0)]
    );
}

/// cpustat's `cpu_used` (with `cpu_idle` collected): the sum of the other percentages of the
/// same hwthread or node in the same read.
#[test]
fn sum_is_cpu_used_per_hwthread() {
    let mut g = guest(json!([
        {"from": "kernel.percpu.cpu.user", "to": "cpu_user", "formula": "rate", "factor": 0.1, "type": "hwthread"},
        {"from": "kernel.percpu.cpu.sys", "to": "cpu_system", "formula": "rate", "factor": 0.1, "type": "hwthread"},
        {"to": "cpu_used", "formula": "sum", "of": ["cpu_user", "cpu_system"], "type": "hwthread", "unit": "Percent"},
    ]));
    let poll = |t: f64, ms: [[f64; 2]; 2]| -> Vec<Sample> {
        (0..2)
            .flat_map(|c| {
                [
                    sample("kernel.percpu.cpu.user", &format!("cpu{c}"), ms[c][0], t),
                    sample("kernel.percpu.cpu.sys", &format!("cpu{c}"), ms[c][1], t),
                ]
            })
            .collect()
    };
    g.handle(&poll(0.0, [[0.0, 0.0], [0.0, 0.0]])).unwrap();
    let out = g
        .handle(&poll(2.0, [[600.0, 200.0], [100.0, 50.0]]))
        .unwrap();
    let used: Vec<_> = seen(&out)
        .into_iter()
        .filter(|(n, ..)| n == "cpu_used")
        .collect();
    // cpu0: (600 + 200) ms / 2 s × 0.1 = 40 %; cpu1: 7.5 %.
    assert_eq!(
        used,
        vec![
            one("cpu_used", "type=hwthread,type-id=0,unit=Percent", 40.0),
            one("cpu_used", "type=hwthread,type-id=1,unit=Percent", 7.5)
        ]
    );
}

/// diskstat: `disk_free` in whole GB (10^9, rounded down) of statfs's free blocks, and
/// `part_max_used`, the fullest filesystem's whole percent of whole GB, loop devices left
/// out.
#[test]
fn gbytes_and_used_percent_max_are_diskstat() {
    let mut g = guest(json!([
        {"from": "filesys.free", "to": "disk_free", "formula": "gbytes", "factor": 1024, "device": true, "unit": "GBytes", "exclude": ["loop"]},
        {"from": ["filesys.capacity", "filesys.free"], "to": "part_max_used", "formula": "used-percent-max", "factor": 1024, "unit": "percent", "exclude": ["loop"]},
    ]));
    // (device, capacity, free) in Kbyte, as PCP's filesys.* has them.
    let fs = [
        ("/dev/sda1", 97_656_250.0, 29_296_875.0), // 100 GB, 30 GB free: 70 %
        ("/dev/sdb1", 2_929_687.0, 195_312.0),     // 2 GB (2.999...), 0 GB (0.199...) free: 100 %
        ("/dev/loop0", 1_000_000.0, 0.0),
    ];
    let batch: Vec<Sample> = fs
        .iter()
        .flat_map(|(d, cap, free)| {
            [
                sample("filesys.capacity", d, *cap, 1.0),
                sample("filesys.free", d, *free, 1.0),
            ]
        })
        .collect();
    let out = g.handle(&batch).unwrap();
    let gb = |kb: f64| ((kb * 1024.0) as u64 / 1_000_000_000) as f64;
    let used =
        |cap: f64, free: f64| ((100 * (gb(cap) as u64 - gb(free) as u64)) / gb(cap) as u64) as f64;
    assert_eq!(
        seen(&out),
        vec![
            one(
                "disk_free",
                "type=node,device=/dev/sda1,unit=GBytes",
                gb(fs[0].2)
            ),
            one(
                "disk_free",
                "type=node,device=/dev/sdb1,unit=GBytes",
                gb(fs[1].2)
            ),
            one(
                "part_max_used",
                "type=node,unit=percent",
                used(fs[1].1, fs[1].2).max(used(fs[0].1, fs[0].2))
            ),
        ]
    );
    assert_eq!(out[2].value, 100.0);
}

/// cpufreq_cpuinfo and loadavg parse decimal text; PCP keeps those values as 32-bit floats,
/// so `f32` gives back the decimal (2593.906, not 2593.906005859375).
#[test]
fn f32_values_are_their_decimal_text() {
    let mut g = guest(
        json!([{"from": "hinv.cpu.clock", "to": "cpufreq", "type": "hwthread", "unit": "MHz", "f32": true}]),
    );
    let pcp = 2593.906f32 as f64;
    assert_ne!(pcp, 2593.906);
    let out = g
        .handle(&[sample("hinv.cpu.clock", "cpu7", pcp, 1.0)])
        .unwrap();
    assert_eq!(
        seen(&out),
        vec![one("cpufreq", "type=hwthread,type-id=7,unit=MHz", 2593.906)]
    );
}

/// memstat's mem_used as the profile computes it: Ceilometer's arithmetic with the
/// profile's expression, then the profile's clustercockpit row: MemTotal − MemFree − Buffers
/// − Cached − Shmem, in kB.
#[test]
fn arithmetic_computes_mem_used_as_the_profile_says() {
    let mut arithmetic = load("arithmetic", profile_params(1, 0)).unwrap();
    let mut tag = load("clustercockpit", profile_params(1, 1)).unwrap();
    let meminfo = [
        ("mem.physmem", 16_318_412.0),
        ("mem.util.free", 3_120_004.0),
        ("mem.util.bufmem", 310_228.0),
        ("mem.util.cached", 6_012_440.0),
        ("mem.util.shmem", 412_300.0),
    ];
    let batch: Vec<Sample> = meminfo
        .iter()
        .map(|(n, v)| sample(n, "", *v, 5.0))
        .collect();
    assert!(arithmetic.handle(&batch).unwrap().is_empty());
    let out = tag.handle(&arithmetic.flush().unwrap()).unwrap();
    let want = 16_318_412.0 - 3_120_004.0 - 310_228.0 - 6_012_440.0 - 412_300.0;
    assert_eq!(seen(&out), vec![one("mem_used", "type=node,unit=kB", want)]);
}

/// The profile's table is accepted; a bad row is refused naming the row and field.
#[test]
fn the_profiles_table_loads_and_bad_rows_are_named() {
    load("clustercockpit", profile_params(0, 0)).unwrap();
    for (row, says) in [
        (
            json!({"from": "a", "to": "b", "formula": "ratee"}),
            "metrics[1].formula",
        ),
        (
            json!({"from": "a", "to": "b", "typ": "node"}),
            "metrics[1].typ",
        ),
        (json!({"from": "a"}), "metrics[1].to"),
        (
            json!({"from": "a", "to": "b", "type": "cpu"}),
            "metrics[1].type",
        ),
        (json!({"from": ["a", "b"], "to": "b"}), "metrics[1].from"),
        (
            json!({"from": "a", "to": "b", "wrap": 31}),
            "metrics[1].wrap",
        ),
        (json!({"to": "b", "formula": "sum"}), "metrics[1].of"),
        (
            json!({"from": "a", "to": "b", "join": {"tag": "lid", "from": "c", "format": "octal"}}),
            "metrics[1].join.format",
        ),
        (
            json!({"from": "a", "to": "b", "tag-override": {"hwmon0": {"type": "cpu", "type-id": "0"}}}),
            "metrics[1].tag-override.hwmon0.type",
        ),
        (
            json!({"from": "a", "to": "b", "nonzero": "yes"}),
            "metrics[1].nonzero",
        ),
    ] {
        let e = refused(json!({"metrics": [{"from": "a", "to": "b"}, row.clone()]}));
        assert!(e.contains(says), "{row}: {e}");
    }
    let e = refused(json!({"metric": []}));
    assert!(e.contains("`metric`"), "{e}");
}

/// tempstat: the metric is named by the hwmon agent's `CHIP:LABEL` instance as
/// cc-metric-collector names the sensor (`to` replacing its first `temp`), in whole degrees
/// (millidegrees / 1000 in integers); `nonzero` drops the limits a chip reports as 0, and
/// `tag-override` puts the chips it names at a socket.
#[test]
fn hwmon_temp_names_sensors_as_tempstat_does() {
    let over = json!({"coretemp-1": {"type": "socket", "type-id": "1"}});
    let mut g = guest(json!([
        {"from": "hwmon.temp", "to": "temp", "formula": "hwmon-temp", "unit": "degC", "tag-override": over},
        {"from": "hwmon.temp_crit", "to": "crit_temp", "formula": "hwmon-temp", "nonzero": true, "unit": "degC", "tag-override": over},
    ]));
    let out = g
        .handle(&[
            sample("hwmon.temp", "coretemp-1:Core 4", 48.999, 1.0),
            sample("hwmon.temp", "nvme:Composite", 38.85, 1.0),
            sample("hwmon.temp", "acpitz:temp1", 27.8, 1.0),
            sample("hwmon.temp", "k10temp:Tctl", 61.5, 1.0),
            sample("hwmon.temp_crit", "coretemp-1:Core 4", 100.0, 1.0),
            sample("hwmon.temp_crit", "acpitz:temp1", 0.0, 1.0),
        ])
        .unwrap();
    assert_eq!(
        seen(&out),
        vec![
            one("temp_core_4", "type=socket,type-id=1,unit=degC", 48.0),
            one("temp_nvme_composite", "type=node,unit=degC", 38.0),
            one("temp_acpitz", "type=node,unit=degC", 27.0),
            one("k10temp_tctl", "type=node,unit=degC", 61.0),
            one("crit_temp_core_4", "type=socket,type-id=1,unit=degC", 100.0),
        ]
    );
}

/// ibstat: `split` names the instance's parts (`device`, `port`), `join` tags each port with
/// its LID from the same poll, in hex as sysfs writes it; `where` leaves out a port whose LID
/// is 0 (a port whose LID is not known yet is sent, untagged).
#[test]
fn split_and_join_tag_ibstat_ports_by_device_port_and_lid() {
    let mut g = guest(json!([
        {"from": "infiniband.port.in.bytes", "to": "ib_recv", "split": ["device", "port"],
         "where": "infiniband.port.lid", "join": {"tag": "lid", "from": "infiniband.port.lid", "format": "hex"}, "unit": "bytes"},
    ]));
    let out = g
        .handle(&[
            sample("infiniband.port.in.bytes", "mlx5_0:1", 4e9, 1.0),
            sample("infiniband.port.in.bytes", "mlx5_0:2", 8e9, 1.0),
            sample("infiniband.port.in.bytes", "mlx5_1:1", 2e9, 1.0),
            sample("infiniband.port.lid", "mlx5_0:1", 26.0, 1.0),
            sample("infiniband.port.lid", "mlx5_0:2", 0.0, 1.0),
        ])
        .unwrap();
    assert_eq!(
        seen(&out),
        vec![
            one(
                "ib_recv",
                "type=node,device=mlx5_0,port=1,lid=0x1a,unit=bytes",
                4e9
            ),
            one("ib_recv", "type=node,device=mlx5_1,port=1,unit=bytes", 2e9),
        ]
    );
}

/// nfsiostat: with `baseline`, an instance's first poll only records it (cc-metric-collector
/// sends a mount from its second read on); later polls send the value as it is.
#[test]
fn baseline_skips_an_instances_first_poll() {
    let mut g = guest(json!([
        {"from": "nfsclient.bytes.read.normal", "to": "nfsio_nread", "stype": "filesystem", "baseline": true, "unit": "bytes"},
    ]));
    let poll = |t: f64, mounts: &[(&str, f64)]| -> Vec<Sample> {
        mounts
            .iter()
            .map(|(m, v)| sample("nfsclient.bytes.read.normal", m, *v, t))
            .collect()
    };
    assert!(g.handle(&poll(1.0, &[("/home", 10.0)])).unwrap().is_empty());
    let out = g
        .handle(&poll(2.0, &[("/home", 12.0), ("/scratch", 5.0)]))
        .unwrap();
    assert_eq!(
        seen(&out),
        vec![one(
            "nfsio_nread",
            "type=node,stype=filesystem,stype-id=/home,unit=bytes",
            12.0
        )]
    );
    let out = g
        .handle(&poll(3.0, &[("/home", 13.0), ("/scratch", 6.0)]))
        .unwrap();
    assert_eq!(out.len(), 2, "{:?}", seen(&out));
}

/// schedstat: `hidden` rows compute the running and waiting rates per hwthread, a `sum` row
/// sends their total as cpu_load_core, `(Δrunning + Δwaiting) / s / 10^9`, and only that.
#[test]
fn hidden_parts_and_their_sum_are_cpu_load_core() {
    let params = profile_params(0, 0);
    let rows: Vec<Value> = params["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["to"] == "cpu_load_core" || r["to"].as_str().unwrap().starts_with("schedstat_")
        })
        .cloned()
        .collect();
    assert_eq!(rows.len(), 3, "the profile's schedstat rows");
    let mut g = guest(Value::Array(rows));
    let poll = |t: f64, ns: [[f64; 2]; 2]| -> Vec<Sample> {
        (0..2)
            .flat_map(|c| {
                [
                    sample("cpusys.schedstat.running", &format!("cpu{c}"), ns[c][0], t),
                    sample("cpusys.schedstat.waiting", &format!("cpu{c}"), ns[c][1], t),
                ]
            })
            .collect()
    };
    assert!(
        g.handle(&poll(10.0, [[1e12, 5e9], [2e12, 6e9]]))
            .unwrap()
            .is_empty()
    );
    let out = g
        .handle(&poll(12.0, [[1e12 + 1.5e9, 5e9 + 3e8], [2e12 + 2e9, 6e9]]))
        .unwrap();
    let cc = |run: f64, wait: f64| run / 2.0 / 1e9 + wait / 2.0 / 1e9;
    let got = seen(&out);
    assert_eq!(got.len(), 2, "{got:?}");
    for (c, want) in [cc(1.5e9, 3e8), cc(2e9, 0.0)].iter().enumerate() {
        assert_eq!(got[c].0, "cpu_load_core");
        assert_eq!(got[c].1, format!("type=hwthread,type-id={c}"));
        assert!((got[c].2 - want).abs() < 1e-12, "{got:?}");
    }
}

/// `where` leaves out the instances where another metric's latest value, from this poll or
/// an earlier one of another agent, is 0 (an unknown one keeps them): cpufreq reads the first
/// thread of each core.
#[test]
fn where_reads_the_latest_value_of_another_agents_poll() {
    let mut g = guest(json!([
        {"from": "hinv.cpu.clock", "to": "cpufreq", "type": "hwthread", "unit": "MHz",
         "where": "cpusys.topology.core_first",
         "join": {"tag": "package_id", "from": "cpusys.topology.package"}},
    ]));
    let clock = |t: f64| -> Vec<Sample> {
        (0..4)
            .map(|c| sample("hinv.cpu.clock", &format!("cpu{c}"), 2000.0 + c as f64, t))
            .collect()
    };
    assert_eq!(
        g.handle(&clock(1.0)).unwrap().len(),
        4,
        "no topology yet: every thread, untagged"
    );
    let topology: Vec<Sample> = (0..4)
        .flat_map(|c| {
            [
                sample(
                    "cpusys.topology.core_first",
                    &format!("cpu{c}"),
                    (c % 2 == 0) as u8 as f64,
                    1.5,
                ),
                sample(
                    "cpusys.topology.package",
                    &format!("cpu{c}"),
                    (c / 2) as f64,
                    1.5,
                ),
            ]
        })
        .collect();
    assert!(g.handle(&topology).unwrap().is_empty());
    assert_eq!(
        seen(&g.handle(&clock(2.0)).unwrap()),
        vec![
            one(
                "cpufreq",
                "type=hwthread,type-id=0,package_id=0,unit=MHz",
                2000.0
            ),
            one(
                "cpufreq",
                "type=hwthread,type-id=2,package_id=1,unit=MHz",
                2002.0
            ),
        ]
    );
}

/// cpufreq (sysfs), the profile's alternative row (commented out beside cpufreq_cpuinfo's):
/// the bundled cpusys agent on a tree, its values through that row, equal what the cpufreq
/// collector reads from the same files.
#[test]
fn cpusys_and_the_sysfs_cpufreq_row_send_what_the_cpufreq_collector_reads() {
    use wasmon::host::{AgentWorld, DirGrant, Grants, GuestConfig, Image};
    let tree = tempfile::tempdir().unwrap();
    super::guest_tree::write_guest_files(tree.path(), 1);
    let text = wasmon::config::profile("clustercockpit").unwrap();
    let row = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("# { from = \"cpusys.freq.scaling_cur\"")
        })
        .expect("the profile's sysfs cpufreq row");
    let row: Value = toml::from_str::<toml::Value>(&format!(
        "r = {{ from = \"cpusys.freq.scaling_cur\"{}",
        row.trim_end_matches(',')
    ))
    .map(|t| serde_json::to_value(&t["r"]).unwrap())
    .unwrap();
    let mut g = guest(json!([row]));

    let rt = runtime();
    let compiled = rt.compile(&guest_bytes("cpusys"), "cpusys").unwrap();
    let mut cfg = GuestConfig::new("cpusys", "{}");
    cfg.grants = Grants {
        dirs: ["proc", "sys"]
            .iter()
            .map(|d| DirGrant {
                host: tree.path().join(d),
                guest: format!("/{d}"),
                read_only: true,
            })
            .collect(),
        ..Default::default()
    };
    let mut agent = Image::<AgentWorld>::load(&rt, &compiled, cfg).unwrap();
    let names = [
        "cpusys.freq.scaling_cur",
        "cpusys.topology.core_first",
        "cpusys.topology.package",
    ];
    let ids: Vec<_> = names
        .iter()
        .map(|n| agent.lookup_name(n).unwrap().unwrap())
        .collect();
    let mut batch = Vec::new();
    for (n, set) in names.iter().zip(agent.fetch(&ids).unwrap()) {
        for v in set.values.unwrap() {
            let x = match v.value {
                wasmon::host::agent_types::Atom::Uint(u) => u as f64,
                other => panic!("{n}: {other:?}"),
            };
            batch.push(sample(n, &v.instance, x, 1.0));
        }
    }
    let out = g.handle(&batch).unwrap();

    let mut want = super::tree::Expected::new();
    let mut package = std::collections::BTreeMap::new();
    super::tree::cpufreq_sysfs(tree.path(), &mut want, &mut package);
    assert_eq!(want.len(), 2, "two cores of two threads");
    let want: Vec<(String, String, f64)> = want
        .iter()
        .map(|((n, _, tid, _), (v, unit))| {
            one(
                n,
                &format!(
                    "type=hwthread,type-id={tid},package_id={},unit={unit}",
                    package[tid]
                ),
                *v,
            )
        })
        .collect();
    assert_eq!(seen(&out), want);
}
