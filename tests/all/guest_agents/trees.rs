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
