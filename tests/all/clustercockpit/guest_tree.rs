//! The files the guest collectors read (hwmon, infiniband, nfsclient) in two snapshots, and
//! what cc-metric-collector's tempstat, ibstat and nfsiostat compute from them, transcribed
//! from its Go source as `tree.rs` does for the native collectors (whose helpers it uses).

use std::collections::BTreeMap;
use std::path::Path;

use super::tree::{CPUS, Expected, id, read};

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
