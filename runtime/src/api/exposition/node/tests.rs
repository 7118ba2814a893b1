use super::*;
use crate::linux::LinuxAgent;
use crate::linux::testing::tree;
use crate::namespace::Agent;

/// The profile's names fetched from `a` as the daemon fetches them (a name the agent does
/// not answer is left out).
fn fetch_all(a: &mut LinuxAgent) -> HashMap<String, Values> {
    let mut out = HashMap::new();
    for n in names() {
        let Ok(id) = a.lookup_name(&n) else { continue };
        if let Some((_, Ok(v))) = a.fetch(&[id]).pop() {
            out.insert(n, v);
        }
    }
    out
}

/// `family{labels}` -> value, and family -> type, from an exposition.
fn parse(text: &str) -> (HashMap<String, f64>, HashMap<String, String>) {
    let mut series = HashMap::new();
    let mut types = HashMap::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let (n, k) = t.split_once(' ').unwrap();
            types.insert(n.to_string(), k.to_string());
        } else if !l.starts_with('#') {
            let (k, v) = l.rsplit_once(' ').unwrap();
            series.insert(k.to_string(), v.parse().unwrap());
        }
    }
    (series, types)
}

/// /proc files in the shapes a 2-CPU 6.x kernel writes (values made up).
fn host() -> tempfile::TempDir {
    tree(&[
        (
            "proc/stat",
            "cpu  300 20 100 5000 40 0 6 7 0 0\n\
             cpu0 100 10 50 2500 20 0 3 7 9 1\n\
             cpu1 200 10 50 2500 20 0 3 0 0 0\n\
             intr 12345 1 2\nctxt 999\nbtime 1700000000\nprocesses 4242\n\
             procs_running 3\nprocs_blocked 1\n",
        ),
        (
            "proc/meminfo",
            "MemTotal:       16000000 kB\nMemFree:         8000000 kB\n\
             MemAvailable:   12000000 kB\nBuffers:          100000 kB\n\
             Cached:          2000000 kB\nSwapCached:            0 kB\n\
             Active(anon):      12345 kB\nHugePages_Total:       4\n\
             Hugepagesize:       2048 kB\n",
        ),
        ("proc/loadavg", "0.50 1.25 2.00 3/456 7890\n"),
        (
            "proc/diskstats",
            "   8       0 sda 1000 10 20000 300 2000 20 40000 600 0 700 900 5 0 64 8 11 12\n\
                8       1 sda1 10 0 200 3 20 0 400 6 0 7 9 0 0 0 0 0 0\n",
        ),
        (
            "proc/net/dev",
            "Inter-|   Receive                                                |  Transmit\n \
             face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n  \
             eth0: 5000 50 1 2 3 4 5 6 7000 70 7 8 9 10 11 12\n",
        ),
        (
            "proc/vmstat",
            "pgpgin 11\npgpgout 22\npswpin 0\npswpout 0\npgfault 333\npgmajfault 4\noom_kill 1\n",
        ),
        (
            "proc/net/softnet_stat",
            "00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
             00000020 00000000 00000003 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001\n",
        ),
        ("proc/sys/fs/file-nr", "801\t0\t2466177\n"),
        ("proc/sys/fs/inode-state", "100 10 0 0 0 0 0\n"),
        ("proc/sys/fs/dentry-state", "200 20 45 0 0 0\n"),
        ("proc/sys/fs/aio-nr", "0\n"),
        ("proc/sys/fs/aio-max-nr", "65536\n"),
    ])
}

#[test]
fn node_exporter_families_labels_units_and_types_from_the_linux_agent() {
    let root = host();
    let mut a = LinuxAgent::with_root(root.path());
    let values = fetch_all(&mut a);
    let env = Env {
        now: 1_700_000_123.5,
        ..Env::default()
    };
    let mut out = String::new();
    render(&values, &env, &mut out);
    let (s, types) = parse(&out);
    // Rounded to 1e-9: milliseconds times 0.001 is node_exporter's arithmetic too, and
    // 700 * 0.001 is 0.7000000000000001 in both.
    let v = |k: &str| {
        let x = *s.get(k).unwrap_or_else(|| panic!("{k} missing in\n{out}"));
        (x * 1e9).round() / 1e9
    };

    for (series, want) in [
        // USER_HZ ticks -> PCP milliseconds -> seconds.
        (r#"node_cpu_seconds_total{cpu="0",mode="user"}"#, 1.0),
        (r#"node_cpu_seconds_total{cpu="1",mode="user"}"#, 2.0),
        (r#"node_cpu_seconds_total{cpu="0",mode="system"}"#, 0.5),
        (r#"node_cpu_seconds_total{cpu="0",mode="iowait"}"#, 0.2),
        (r#"node_cpu_seconds_total{cpu="0",mode="steal"}"#, 0.07),
        (r#"node_cpu_guest_seconds_total{cpu="0",mode="user"}"#, 0.09),
        (r#"node_cpu_guest_seconds_total{cpu="0",mode="nice"}"#, 0.01),
        // kB -> bytes; counts stay counts; `(anon)` is `_anon`.
        ("node_memory_MemTotal_bytes", 16_000_000.0 * 1024.0),
        ("node_memory_MemAvailable_bytes", 12_000_000.0 * 1024.0),
        ("node_memory_Active_anon_bytes", 12_345.0 * 1024.0),
        ("node_memory_HugePages_Total", 4.0),
        ("node_load1", 0.5),
        ("node_load5", 1.25),
        ("node_load15", 2.0),
        ("node_context_switches_total", 999.0),
        ("node_forks_total", 4242.0),
        ("node_intr_total", 12345.0),
        ("node_boot_time_seconds", 1_700_000_000.0),
        ("node_procs_running", 3.0),
        ("node_procs_blocked", 1.0),
        // Disks: sectors -> bytes, milliseconds -> seconds; partitions are not disks.
        (r#"node_disk_reads_completed_total{device="sda"}"#, 1000.0),
        (
            r#"node_disk_read_bytes_total{device="sda"}"#,
            20000.0 * 512.0,
        ),
        (
            r#"node_disk_written_bytes_total{device="sda"}"#,
            40000.0 * 512.0,
        ),
        (r#"node_disk_read_time_seconds_total{device="sda"}"#, 0.3),
        (r#"node_disk_io_time_seconds_total{device="sda"}"#, 0.7),
        (
            r#"node_disk_io_time_weighted_seconds_total{device="sda"}"#,
            0.9,
        ),
        (r#"node_disk_flush_requests_total{device="sda"}"#, 11.0),
        // Interfaces.
        (r#"node_network_receive_bytes_total{device="eth0"}"#, 5000.0),
        (
            r#"node_network_receive_multicast_total{device="eth0"}"#,
            6.0,
        ),
        (r#"node_network_transmit_colls_total{device="eth0"}"#, 10.0),
        (
            r#"node_network_transmit_carrier_total{device="eth0"}"#,
            11.0,
        ),
        // vmstat is untyped, as node_exporter writes it.
        ("node_vmstat_pgfault", 333.0),
        ("node_vmstat_oom_kill", 1.0),
        // softnet: hex columns, per CPU.
        (r#"node_softnet_processed_total{cpu="1"}"#, 32.0),
        (r#"node_softnet_times_squeezed_total{cpu="1"}"#, 3.0),
        ("node_filefd_allocated", 801.0),
        ("node_filefd_maximum", 2_466_177.0),
        ("node_time_seconds", 1_700_000_123.5),
    ] {
        assert_eq!(v(series), want, "{series}");
    }
    assert_eq!(types["node_cpu_seconds_total"], "counter");
    assert_eq!(types["node_memory_MemFree_bytes"], "gauge");
    assert!(!out.contains(r#"device="sda1""#), "{out}");
    assert_eq!(types["node_vmstat_pgfault"], "untyped");
    // Every family has HELP and TYPE, every name is node_exporter's shape.
    for name in types.keys() {
        assert!(out.contains(&format!("# HELP {name} ")), "{name}");
        assert!(name.starts_with("node_"), "{name}");
    }
}

#[test]
fn absent_files_cost_only_their_families() {
    let root = tree(&[("proc/loadavg", "0.50 1.25 2.00 3/456 7890\n")]);
    let mut a = LinuxAgent::with_root(root.path());
    let values = fetch_all(&mut a);
    let mut out = String::new();
    render(&values, &Env::default(), &mut out);
    let (s, _) = parse(&out);
    assert_eq!(s["node_load5"], 1.25);
    assert!(!out.contains("node_cpu_seconds_total{"), "{out}");
    assert!(!out.contains("node_memory_MemTotal_bytes "), "{out}");
}

#[test]
fn filesystems_carry_device_fstype_and_mountpoint() {
    let mut values: HashMap<String, Values> = HashMap::new();
    values.insert(
        "filesys.mountdir".into(),
        vec![
            ("/dev/vda".into(), Value::Text("/".into())),
            ("/dev/sdb1".into(), Value::Text("/mnt/my disk".into())),
        ],
    );
    values.insert(
        "filesys.capacity".into(),
        vec![("/dev/vda".into(), Value::Uint(1000))],
    );
    values.insert(
        "filesys.avail".into(),
        vec![("/dev/vda".into(), Value::Uint(10))],
    );
    let env = Env {
        fstypes: fstypes(
            "/dev/vda / ext4 rw 0 0\n/dev/sdb1 /mnt/my\\040disk xfs rw 0 0\nproc /proc proc rw 0 0\n",
        ),
        ..Env::default()
    };
    let mut out = String::new();
    render(&values, &env, &mut out);
    let (s, _) = parse(&out);
    let root = r#"{device="/dev/vda",fstype="ext4",mountpoint="/"}"#;
    assert_eq!(s[&format!("node_filesystem_size_bytes{root}")], 1_024_000.0);
    assert_eq!(s[&format!("node_filesystem_avail_bytes{root}")], 10_240.0);
    assert_eq!(s[&format!("node_filesystem_device_error{root}")], 0.0);
    // statfs failed: the mount point is known, its sizes are not.
    assert_eq!(
        s[r#"node_filesystem_device_error{device="/dev/sdb1",fstype="xfs",mountpoint="/mnt/my disk"}"#],
        1.0
    );
}

#[test]
fn uname_info_carries_the_kernels_fields_and_the_domain_name() {
    let mut values: HashMap<String, Values> = HashMap::new();
    for (k, v) in [
        ("kernel.uname.machine", "x86_64"),
        ("kernel.uname.nodename", "vm"),
        ("kernel.uname.release", "6.1.0"),
        ("kernel.uname.sysname", "Linux"),
        ("kernel.uname.version", "#1 SMP \"quoted\""),
    ] {
        values.insert(k.into(), vec![(String::new(), Value::Text(v.into()))]);
    }
    let mut out = String::new();
    render(&values, &Env::default(), &mut out);
    assert!(
        out.contains(
            r##"node_uname_info{domainname="(none)",machine="x86_64",nodename="vm",release="6.1.0",sysname="Linux",version="#1 SMP \"quoted\""} 1"##
        ),
        "{out}"
    );
}

#[test]
fn mount_points_unescape_and_hostile_escapes_stay_as_written() {
    let m = fstypes("a /x\\011y t1\nb /bad\\9 t2\nc /end\\04 t3\nd /big\\777 t4\n");
    assert_eq!(m["/x\ty"], "t1");
    assert_eq!(m["/bad\\9"], "t2");
    assert_eq!(m["/end\\04"], "t3");
    assert_eq!(m["/big\\777"], "t4");
}
