//! Captured-tree fixtures for the `/sys` agents, built here in the shapes (file layout, link
//! layout, contents) of node_exporter's `collector/fixtures/sys.ttar`, whose values come from
//! real machines: a dual-port Mellanox ConnectX-3 (mlx4, with the separate `counters_ext` of
//! older kernels), an Intel iWARP adapter without a performance management agent (every
//! counter reads `N/A (no PMA)`), a one-package RAPL, two coretemp sockets and a Nuvoton
//! nct6779 super-I/O. The expected values in the tests are what node_exporter's collectors
//! report for that tree (its `collector/fixtures/e2e-output.txt`).

use std::path::Path;

/// Writes `files` under `root` (`path`, contents; parents created).
pub fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("{text}\n")).unwrap();
    }
}

/// `link` -> `target` under `root` (a relative target, as sysfs's class links are).
pub fn link(root: &Path, link: &str, target: &str) {
    let l = root.join(link);
    std::fs::create_dir_all(l.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, l).unwrap();
}

fn ib_port(root: &Path, port: &str, counters: &[(&str, &str)], ext: &[(&str, &str)]) {
    for (name, v) in counters {
        write(root, &[(&format!("{port}/counters/{name}"), v)]);
    }
    for (name, v) in ext {
        write(root, &[(&format!("{port}/counters_ext/{name}"), v)]);
    }
}

/// `sys/class/infiniband/{mlx4_0,i40iw0}` under `root`, each a link into `sys/devices`.
pub fn infiniband(root: &Path) {
    let mlx = "sys/devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx4_0";
    let iw = "sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0/infiniband/i40iw0";
    link(
        root,
        "sys/class/infiniband/mlx4_0",
        &format!("../../{}", &mlx[4..]),
    );
    link(
        root,
        "sys/class/infiniband/i40iw0",
        &format!("../../{}", &iw[4..]),
    );
    let m = root.join(mlx);
    write(
        &m,
        &[
            ("board_id", "SM_1141000001000"),
            ("fw_ver", "2.31.5050"),
            ("hca_type", "MT4099"),
        ],
    );
    for port in ["1", "2"] {
        write(
            &m,
            &[
                (&format!("ports/{port}/link_layer"), "InfiniBand"),
                (&format!("ports/{port}/phys_state"), "5: LinkUp"),
                (&format!("ports/{port}/rate"), "40 Gb/sec (4X QDR)"),
                (&format!("ports/{port}/state"), "4: ACTIVE"),
            ],
        );
    }
    let ext = [
        ("port_multicast_rcv_packets", "93"),
        ("port_multicast_xmit_packets", "16"),
        ("port_rcv_data_64", "4631917"),
        ("port_rcv_packets_64", "0"),
        ("port_unicast_rcv_packets", "61148"),
        ("port_unicast_xmit_packets", "61239"),
        ("port_xmit_data_64", "3733440"),
        ("port_xmit_packets_64", "0"),
    ];
    ib_port(
        &m,
        "ports/1",
        &[
            ("link_downed", "0"),
            ("link_error_recovery", "0"),
            ("multicast_rcv_packets", "93"),
            ("multicast_xmit_packets", "16"),
            ("port_rcv_constraint_errors", "0"),
            ("port_rcv_data", "4631917"),
            ("port_rcv_discards", "0"),
            ("port_rcv_errors", "0"),
            ("port_rcv_packets", "6825908347"),
            ("port_xmit_constraint_errors", "0"),
            ("port_xmit_data", "3733440"),
            ("port_xmit_discards", "5"),
            ("port_xmit_packets", "6235865"),
            ("port_xmit_wait", "4294967295"),
            ("unicast_rcv_packets", "61148"),
            ("unicast_xmit_packets", "61239"),
        ],
        &ext,
    );
    ib_port(
        &m,
        "ports/2",
        &[
            ("link_downed", "0"),
            ("link_error_recovery", "0"),
            ("multicast_rcv_packets", "0"),
            ("multicast_xmit_packets", "0"),
            ("port_rcv_data", "0"),
            ("port_xmit_data", "0"),
            ("unicast_rcv_packets", "0"),
            ("unicast_xmit_packets", "0"),
        ],
        &ext,
    );
    let i = root.join(iw);
    write(
        &i,
        &[
            ("board_id", "I40IW Board ID"),
            ("fw_ver", "0.2"),
            ("hca_type", "I40IW"),
            ("ports/1/link_layer", "InfiniBand"),
            ("ports/1/phys_state", "5: LinkUp"),
            ("ports/1/rate", "10 Gb/sec (4X)"),
            ("ports/1/state", "4: ACTIVE"),
        ],
    );
    let na: Vec<(&str, &str)> = [
        "VL15_dropped",
        "excessive_buffer_overrun_errors",
        "link_downed",
        "link_error_recovery",
        "local_link_integrity_errors",
        "port_rcv_constraint_errors",
        "port_rcv_data",
        "port_rcv_errors",
        "port_rcv_packets",
        "port_rcv_remote_physical_errors",
        "port_rcv_switch_relay_errors",
        "port_xmit_constraint_errors",
        "port_xmit_data",
        "port_xmit_discards",
        "port_xmit_packets",
        "port_xmit_wait",
        "symbol_error",
    ]
    .iter()
    .map(|n| (*n, "N/A (no PMA)"))
    .collect();
    ib_port(&i, "ports/1", &na, &[]);
}

/// `sys/class/powercap/intel-rapl:0` (package-0) and `intel-rapl:0:0` (core).
pub fn powercap(root: &Path) {
    write(
        root,
        &[
            ("sys/class/powercap/intel-rapl:0/name", "package-0"),
            ("sys/class/powercap/intel-rapl:0/energy_uj", "240422366267"),
            ("sys/class/powercap/intel-rapl:0:0/name", "core"),
            (
                "sys/class/powercap/intel-rapl:0:0/energy_uj",
                "118821284256",
            ),
        ],
    );
}

/// Two coretemp sockets, an nct6779 and a thermal zone, linked from `sys/class` as on a
/// real machine.
pub fn hwmon(root: &Path) {
    for (n, socket) in [(0, "coretemp.0"), (1, "coretemp.1")] {
        let dir = format!("sys/devices/platform/{socket}/hwmon/hwmon{n}");
        link(
            root,
            &format!("sys/class/hwmon/hwmon{n}"),
            &format!("../../{}", &dir[4..]),
        );
        let temps = [
            ("Physical id 0", "55000"),
            ("Core 0", "54000"),
            ("Core 1", "52000"),
            ("Core 2", "53000"),
            ("Core 3", "50000"),
        ];
        write(root, &[(&format!("{dir}/name"), "coretemp")]);
        for (i, (label, input)) in temps.iter().enumerate() {
            let t = i + 1;
            write(
                root,
                &[
                    (&format!("{dir}/temp{t}_input"), input),
                    (&format!("{dir}/temp{t}_label"), label),
                    (&format!("{dir}/temp{t}_max"), "84000"),
                    (&format!("{dir}/temp{t}_crit"), "100000"),
                ],
            );
        }
    }
    let nct = "sys/devices/platform/nct6775.656/hwmon/hwmon3";
    link(
        root,
        "sys/class/hwmon/hwmon3",
        &format!("../../{}", &nct[4..]),
    );
    write(
        root,
        &[
            (&format!("{nct}/name"), "nct6779"),
            (&format!("{nct}/fan2_input"), "1098"),
            (&format!("{nct}/fan2_min"), "0"),
            (&format!("{nct}/in0_input"), "792"),
            (&format!("{nct}/in1_input"), "1024"),
        ],
    );
    let zone = "sys/devices/virtual/thermal/thermal_zone0";
    link(
        root,
        "sys/class/thermal/thermal_zone0",
        &format!("../../{}", &zone[4..]),
    );
    write(
        root,
        &[
            (&format!("{zone}/type"), "cpu-thermal"),
            (&format!("{zone}/temp"), "12376"),
        ],
    );
}

/// A Lustre client's llite `stats` in the shape Lustre 2.10's `/proc/fs/lustre/llite/*/stats`
/// has (PCP's qa/lustre tree; values of our own): counters with sizes, counters of calls,
/// `snapshot_time` first; a counter that never moved is not listed.
pub const LLITE_2_10: &str = "\
snapshot_time             1732712345.123456 secs.usecs
read_bytes                1207 samples [bytes] 0 1048576 614400000
write_bytes               311 samples [bytes] 7 1048576 97320960
osc_read                  602 samples [bytes] 4096 1048576 614400000
osc_write                 311 samples [bytes] 7 1048576 97320960
ioctl                     6 samples [regs]
open                      842 samples [regs]
close                     840 samples [regs]
mmap                      17 samples [regs]
seek                      95 samples [regs]
fsync                     2 samples [regs]
readdir                   130 samples [regs]
setattr                   12 samples [regs]
truncate                  4 samples [regs]
getattr                   5190 samples [regs]
create                    21 samples [regs]
unlink                    19 samples [regs]
mkdir                     3 samples [regs]
rename                    1 samples [regs]
statfs                    66 samples [regs]
alloc_inode               140 samples [regs]
getxattr                  388 samples [regs]
getxattr_hits             372 samples [regs]
inode_permission          12003 samples [regs]";

/// The same counters as Lustre 2.15 prints them in debugfs: start and elapsed time lines,
/// a sum of squares after the sizes, operations timed in microseconds.
pub const LLITE_2_15: &str = "\
snapshot_time             1732712345.123456789 secs.nsecs
start_time                1732700000.000000001 secs.nsecs
elapsed_time              12345.123456788 secs.nsecs
read_bytes                64 samples [bytes] 4096 4194304 134217728 281474976710656
write_bytes               16 samples [bytes] 4096 1048576 16777216 17592186044416
open                      12 samples [usecs] 3 157 603 62411
close                     12 samples [usecs] 2 44 180 4000
getattr                   30 samples [usecs] 1 20 200 3000
inode_permission          77 samples [usecs] 0 3 41 55";

/// LNet's one-line `stats`: 11 numbers.
pub const LNET: &str = "0 512 3 98765432 98700001 0 17 40000000000 39000000000 0 70000";

/// Lustre 2.10's procfs layout under `root`: two file systems (`scratch`, `home`) and LNet.
pub fn lustre_procfs(root: &Path) {
    write(
        root,
        &[
            (
                "proc/fs/lustre/llite/scratch-ffff9a1bc3e4d000/stats",
                LLITE_2_10,
            ),
            (
                "proc/fs/lustre/llite/home-ffff9a1bd0a2e800/stats",
                "snapshot_time             1732712345.123456 secs.usecs\n\
                 read_bytes                3 samples [bytes] 512 8192 9216\n\
                 open                      5 samples [regs]",
            ),
            // Lustre's other per-mount entries, which are not stats.
            (
                "proc/fs/lustre/llite/scratch-ffff9a1bc3e4d000/uuid",
                "scratch-clilov",
            ),
            ("proc/sys/lnet/stats", LNET),
        ],
    );
}

/// Lustre 2.15's debugfs layout under `root`: one file system (`work`) and LNet.
pub fn lustre_debugfs(root: &Path) {
    write(
        root,
        &[
            (
                "sys/kernel/debug/lustre/llite/work-ffff8f0e12345000/stats",
                LLITE_2_15,
            ),
            (
                "sys/kernel/debug/lnet/stats",
                "1 600 0 10 20 0 0 3000 4000 0 0",
            ),
        ],
    );
}
