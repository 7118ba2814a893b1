use super::*;
use crate::fabric::counters::{Width, find};
use crate::fabric::engine::{Engine, Output, Thresholds};

/// Writes `files` (path relative to `root`, content) into a fixture tree.
fn tree(root: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

/// PortCounters as an mlx5 port shows them: every error width, a saturated 32-bit data
/// counter, a counter without a PMA behind it.
fn port_counters(root: &Path, port: &str) {
    let c = |f: &str| format!("mlx5_0/ports/{port}/counters/{f}");
    let files = [
        (c("port_xmit_data"), "4294967295\n"),
        (c("port_rcv_data"), "1000\n"),
        (c("port_xmit_packets"), "10\n"),
        (c("port_rcv_packets"), "11\n"),
        (c("port_xmit_wait"), "4294967295\n"),
        (c("symbol_error"), "65535\n"),
        (c("link_error_recovery"), "255\n"),
        (c("link_downed"), "3\n"),
        (c("port_rcv_errors"), "0\n"),
        (c("port_rcv_remote_physical_errors"), "N/A (no PMA)\n"),
        (c("port_rcv_switch_relay_errors"), "0\n"),
        (c("port_xmit_discards"), "7\n"),
        (c("port_xmit_constraint_errors"), "0\n"),
        (c("port_rcv_constraint_errors"), "0\n"),
        (c("local_link_integrity_errors"), "15\n"),
        // excessive_buffer_overrun_errors: no file at all.
    ];
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), *b)).collect();
    tree(root, &refs);
}

fn extended(root: &Path, port: &str, xmit_data: u64) {
    let c = |f: &str| format!("mlx5_0/ports/{port}/counters_ext/{f}");
    tree(
        root,
        &[
            (&c("port_xmit_data_64"), &format!("{xmit_data}\n")),
            (&c("port_rcv_data_64"), "123456789012345\n"),
            (&c("port_xmit_packets_64"), "5000000000\n"),
            (&c("port_rcv_packets_64"), "N/A (no PMA)\n"),
        ],
    );
}

fn read(src: &mut SysfsSource) -> Reading {
    let ports: Vec<u32> = (0..src.ports.len() as u32).collect();
    let mut r = Reading::default();
    r.resize(src.schema(), ports.len());
    src.read(&ports, &mut r).unwrap();
    r
}

fn col(src: &SysfsSource, name: &str) -> usize {
    find(src.schema(), name).unwrap()
}

/// An engine over `src`'s schema and `ports`, trapping every counter at `trap` (0: never)
/// and reporting no changes.
fn engine(src: &SysfsSource, trap: u64, ports: Vec<u32>) -> Engine {
    let schema = src.schema().to_vec();
    let mut e = Engine::new(
        &schema,
        Thresholds {
            trap: vec![trap; schema.len()],
            change: vec![0; schema.len()],
        },
        false,
    );
    e.set_ports(ports);
    e
}

#[test]
fn port_counters_only_give_the_32_bit_table() {
    let dir = tempfile::tempdir().unwrap();
    port_counters(dir.path(), "1");
    tree(dir.path(), &[("mlx5_0/node_guid", "0002:c903:00a1:b2c3\n")]);
    let mut src = SysfsSource::open(SysfsKind::Infiniband, dir.path(), "h1").unwrap();
    assert_eq!(src.schema()[0].width, Width::Saturating(32));
    assert_eq!(src.node_count(), 1);
    assert_eq!(src.node_name(0), "hca-0002c90300a1b2c3");
    let r = read(&mut src);
    assert!(r.ok[0]);
    assert_eq!(r.get(col(&src, "port_xmit_data"), 0), u32::MAX as u64);
    assert_eq!(r.get(col(&src, "symbol_error"), 0), 65535);
    assert_eq!(r.get(col(&src, "link_error_recovery"), 0), 255);
    assert_eq!(r.get(col(&src, "local_link_integrity_errors"), 0), 15);
    assert_eq!(r.get(col(&src, "port_rcv_remote_physical_errors"), 0), NA);
    assert_eq!(r.get(col(&src, "excessive_buffer_overrun_errors"), 0), NA);
    assert!(!src.can_clear());
}

#[test]
fn saturated_and_unavailable_counters_give_no_rate() {
    let dir = tempfile::tempdir().unwrap();
    port_counters(dir.path(), "1");
    let mut src = SysfsSource::open(SysfsKind::Infiniband, dir.path(), "h1").unwrap();
    let mut e = engine(&src, 1, vec![0]);
    let mut out = Output::default();
    for _ in 0..2 {
        src.read(&[0], e.reading_mut()).unwrap();
        e.process(&mut out);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let inv = |n: &str| out.hist[col(&src, n)].invalid;
    // Stuck at the top of 32, 16, 8 and 4 bits; no PMA; no file.
    for n in [
        "port_xmit_data",
        "port_xmit_wait",
        "symbol_error",
        "link_error_recovery",
        "local_link_integrity_errors",
        "port_rcv_remote_physical_errors",
        "excessive_buffer_overrun_errors",
    ] {
        assert_eq!(inv(n), 1, "{n}");
    }
    // Unchanged ordinary counters: rate 0.
    assert_eq!(out.hist[col(&src, "port_rcv_data")].zero, 1);
    assert_eq!(out.hist[col(&src, "link_downed")].zero, 1);
    assert!(out.traps.is_empty());
}

#[test]
fn extended_counters_are_64_bit_and_counted_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    port_counters(dir.path(), "1");
    port_counters(dir.path(), "2");
    extended(dir.path(), "1", 1000);
    extended(dir.path(), "2", 1_000_000_000_000);
    let mut src = SysfsSource::open(SysfsKind::Infiniband, dir.path(), "h1").unwrap();
    assert_eq!(src.schema()[0].width, Width::Wrap64);
    assert_eq!(
        src.node_name(0),
        "h1-mlx5_0",
        "no node_guid file: host and device"
    );
    assert_eq!(src.node_ports(0), 0..2);
    assert_eq!(src.port_number(1), 2);
    let r = read(&mut src);
    let d = col(&src, "port_xmit_data");
    assert_eq!(r.get(d, 1), 1_000_000_000_000);
    assert_eq!(r.get(col(&src, "port_rcv_packets"), 0), NA);
    // 2,500 four-octet units later: a change of 10,000 bytes.
    let mut e = engine(&src, 0, vec![0, 1]);
    let mut out = Output::default();
    src.read(&[0, 1], e.reading_mut()).unwrap();
    e.process(&mut out);
    extended(dir.path(), "1", 3500);
    std::thread::sleep(std::time::Duration::from_millis(5));
    src.read(&[0, 1], e.reading_mut()).unwrap();
    e.process(&mut out);
    let rep: Vec<_> = out
        .reports
        .iter()
        .filter(|r| r.counter as usize == d)
        .collect();
    assert_eq!(rep.len(), 1);
    assert_eq!(rep[0].slot, 0);
    assert_eq!(rep[0].change, 10_000.0);
}

#[test]
fn a_vanished_port_reads_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    port_counters(dir.path(), "1");
    let mut src = SysfsSource::open(SysfsKind::Infiniband, dir.path(), "h1").unwrap();
    std::fs::remove_dir_all(dir.path().join("mlx5_0/ports/1")).unwrap();
    let r = read(&mut src);
    assert!(!r.ok[0]);
    assert!(!src.present(0));
}

#[test]
fn net_statistics_fixture_and_the_real_tree() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            ("eth0/ifindex", "2\n"),
            ("eth0/statistics/rx_bytes", "18446744073709551000\n"),
            ("eth0/statistics/tx_bytes", "77\n"),
        ],
    );
    let mut src = SysfsSource::open(SysfsKind::Net, dir.path(), "node 1").unwrap();
    assert_eq!(src.node_name(0), "node_1");
    assert_eq!(src.port_label(0), "eth0");
    assert_eq!(src.port_number(0), 2);
    let r = read(&mut src);
    assert_eq!(r.get(0, 0), 18_446_744_073_709_551_000);
    assert_eq!(r.get(1, 0), 77);
    assert_eq!(r.get(col(&src, "collisions"), 0), NA);
    // An interface that appears later is appended.
    tree(dir.path(), &[("ib0/statistics/rx_bytes", "1\n")]);
    src.refresh();
    assert_eq!(src.node_ports(0), 0..2);
    assert_eq!(src.port_label(1), "ib0");
    // The real tree: loopback is always there.
    let mut real = SysfsSource::open(SysfsKind::Net, Path::new("/sys/class/net"), "me").unwrap();
    let lo = (0..real.ports.len())
        .find(|&p| real.port_label(p) == "lo")
        .unwrap();
    let r = read(&mut real);
    assert!(r.ok[lo]);
    assert_ne!(r.get(0, lo), NA);
}

#[test]
fn parse_counter_values() {
    assert_eq!(parse_counter(b"42\n"), 42);
    assert_eq!(parse_counter(b"N/A (no PMA)\n"), NA);
    assert_eq!(parse_counter(b"garbage"), NA);
    assert_eq!(parse_counter(b""), NA);
}
