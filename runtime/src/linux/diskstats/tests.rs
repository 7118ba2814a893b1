//! Tests of the group on synthesized trees and this host's files. Test-only.

use super::super::testing::{agent, fetch_f64, one, tree};
use super::super::{DeviceFilter, Devices, LinuxAgent, Root};
use super::*;

/// A 5.5+ kernel's 17-counter line.
fn line(major: u32, minor: u32, name: &str, c: [u64; 17]) -> String {
    let c: Vec<String> = c.iter().map(u64::to_string).collect();
    format!("{major:4} {minor:7} {name} {}\n", c.join(" "))
}

/// A storage server: two NVMe disks with partitions, a SATA disk, dm-crypt and LVM
/// on top, an md RAID1 (degraded), zram swap, loop and cdrom devices to ignore.
fn server() -> tempfile::TempDir {
    let mut ds = String::new();
    let mut n = 0u64;
    let mut next = || {
        n += 1;
        std::array::from_fn::<u64, 17, _>(|i| n * 100 + i as u64)
    };
    for (ma, mi, name) in [
        (7, 0, "loop0"),
        (259, 0, "nvme0n1"),
        (259, 1, "nvme0n1p1"),
        (259, 2, "nvme0n1p2"),
        (259, 3, "nvme1n1"),
        (259, 4, "nvme1n1p1"),
        (8, 0, "sda"),
        (8, 1, "sda1"),
        (11, 0, "sr0"),
        (253, 0, "dm-0"),
        (253, 1, "dm-1"),
        (9, 127, "md127"),
        (252, 0, "zram0"),
    ] {
        ds.push_str(&line(ma, mi, name, next()));
    }
    let parts = "major minor  #blocks  name\n\n 259        0  500107608 nvme0n1\n 259        1     524288 nvme0n1p1\n 259        2  499582279 nvme0n1p2\n 259        3 1000204886 nvme1n1\n 259        4 1000203264 nvme1n1p1\n   8        0  976762584 sda\n   8        1  976761560 sda1\n 253        0  499580231 dm-0\n 253        1  104857600 dm-1\n   9      127  976630464 md127\n 252        0    8388608 zram0\n";
    let dir = tree(&[
        ("proc/diskstats", &ds),
        ("proc/partitions", parts),
        (
            "proc/mdstat",
            "Personalities : [raid1]\nmd127 : active raid1 sda1[0]\n      976630464 blocks super 1.2 [2/1] [U_]\n\nunused devices: <none>\n",
        ),
        (
            "sys/block/nvme0n1/queue/scheduler",
            "[none] mq-deadline kyber bfq\n",
        ),
        ("sys/block/nvme1n1/queue/scheduler", "none [mq-deadline]\n"),
        ("sys/block/nvme0n1/wwid", "eui.0025388b71b2c0d1\n"),
        ("sys/block/sda/device/wwid", "naa.5000c500a1b2c3d4\n"),
        ("sys/block/dm-0/dm/name", "luks-root\n"),
        ("sys/block/dm-1/dm/name", "vg0-home\n"),
        ("sys/block/zram0/disksize", "8589934592\n"),
        (
            "sys/block/zram0/mm_stat",
            "  4096000  1024000  2048000        0  3072000      10        2        1        0\n",
        ),
        (
            "sys/block/zram0/io_stat",
            "       1        2        3        4\n",
        ),
    ]);
    std::fs::create_dir_all(dir.path().join("dev/md")).unwrap();
    std::os::unix::fs::symlink("../md127", dir.path().join("dev/md/data")).unwrap();
    dir
}

fn names(v: &[(String, f64)]) -> Vec<&str> {
    v.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn sorts_a_servers_devices_as_pmdalinux_does() {
    let dir = server();
    let mut a = LinuxAgent::with_root(dir.path());
    let read = fetch_f64(&mut a, "disk.dev.read");
    assert_eq!(names(&read), ["nvme0n1", "nvme1n1", "sda"]);
    // Line 2 is nvme0n1: counters 200, 201, ...
    assert_eq!(read[0].1, 200.0);
    assert_eq!(one(&mut a, "hinv.ndisk"), Some(3.0));
    let parts = fetch_f64(&mut a, "disk.partitions.read");
    assert_eq!(
        names(&parts),
        ["nvme0n1p1", "nvme0n1p2", "nvme1n1p1", "sda1"]
    );
    assert_eq!(
        names(&fetch_f64(&mut a, "disk.dm.read")),
        ["luks-root", "vg0-home"]
    );
    assert_eq!(names(&fetch_f64(&mut a, "zram.read")), ["zram0"]);
    // Kbyte from sectors, sums over disks only.
    let sda: f64 = 700.0;
    assert_eq!(
        fetch_f64(&mut a, "disk.dev.read_bytes")[2],
        ("sda".into(), ((sda + 2.0) / 2.0).floor())
    );
    let all: f64 = [200.0, 500.0, 700.0].iter().sum();
    assert_eq!(one(&mut a, "disk.all.read"), Some(all));
    assert_eq!(
        one(&mut a, "disk.all.total"),
        Some(all + [204.0, 504.0, 704.0].iter().sum::<f64>())
    );
    assert_eq!(
        fetch_f64(&mut a, "disk.dev.flush")[0],
        ("nvme0n1".into(), 215.0)
    );
    assert_eq!(
        fetch_f64(&mut a, "disk.dev.capacity")[1],
        ("nvme1n1".into(), 1000204886.0)
    );
    a.expect(
        r#"hinv.map.dmname luks-root="dm-0" vg0-home="dm-1"
        hinv.map.mdname data="md127"
        disk.md.status data=256
        disk.dev.scheduler nvme0n1="none" nvme1n1="mq-deadline" sda="unknown"
        hinv.map.scsi_id nvme0n1="20025388b71b2c0d1" nvme1n1="unknown" sda="35000c500a1b2c3d4"
        # zram: disksize in Kbyte, mm_stat bytes to Kbyte and pages to Kbyte.
        zram.capacity 8388608
        zram.mm_stat.data_size.original 4000
        zram.mm_stat.pages.same 40
        zram.io_stat.notify_free 4
        zram.bd_stat.count -
        # Multipath: each disk with a WWID is a path of it.
        disk.wwid.read 20025388b71b2c0d1=200 35000c500a1b2c3d4=700"#,
    );
}

#[test]
fn the_disk_filter_applies_everywhere() {
    let dir = server();
    let devices = Devices {
        disks: DeviceFilter {
            include: vec![],
            exclude: vec!["nvme1*".into(), "dm-1".into()],
        },
        ..Devices::default()
    };
    let mut a = LinuxAgent::with_options(Root::new(dir.path()), devices);
    assert_eq!(
        names(&fetch_f64(&mut a, "disk.dev.read")),
        ["nvme0n1", "sda"]
    );
    a.expect(
        "disk.all.read 900
        hinv.ndisk 2",
    );
    assert_eq!(
        names(&fetch_f64(&mut a, "disk.partitions.read")),
        ["nvme0n1p1", "nvme0n1p2", "sda1"]
    );
    assert_eq!(names(&fetch_f64(&mut a, "disk.dm.read")), ["luks-root"]);
}

#[test]
fn old_kernels_shapes_and_32_bit_wraps() {
    // 2.6.18: disks with 11 counters (no discard/flush), partitions with 4.
    let dir = tree(&[(
        "proc/diskstats",
        "   8    0 sda 5000 10 80000 4294967396 3000 20 64000 700 1 4294967297 900\n   8    1 sda1 4000 64000 2000 32000\n",
    )]);
    let mut a = LinuxAgent::with_root(dir.path());
    a.expect(
        "disk.dev.discard sda=0
        disk.dev.flush sda=0
        # %u fields wrap at 2^32.
        disk.dev.read_rawactive sda=100
        disk.dev.avactive sda=1
        disk.partitions.read sda1=4000
        disk.partitions.write_bytes sda1=16000",
    );
    // Short partition lines have no merges or times: no value, as pmcd answers.
    assert!(fetch_f64(&mut a, "disk.partitions.read_merge").is_empty());
    assert!(fetch_f64(&mut a, "disk.partitions.avactive").is_empty());
    // No /proc/partitions: capacity has no value.
    assert!(fetch_f64(&mut a, "disk.dev.capacity").is_empty());
    // 2.4 kernels: only /proc/partitions, with counters.
    let (_dir, mut a) = agent(&[(
        "proc/partitions",
        "major minor  #blocks  name     rio rmerge rsect ruse wio wmerge wsect wuse running use aveq\n\n   3     0   39082680 hda 446216 784926 9550688 4382310 424847 312726 5922052 19310380 0 3376340 23705160\n",
    )]);
    a.expect(
        "disk.dev.read hda=446216
        disk.dev.aveq hda=23705160
        disk.dev.capacity hda=39082680",
    );
}

#[test]
fn malformed_or_missing_files_cost_only_their_values() {
    let (_dir, mut a) = agent(&[(
        "proc/diskstats",
        "garbage\n   8 0 sda 1 2 3\n   x y sdb 1 2 3 4 5 6 7 8 9 10 11\n   8 16 sdc 1 2 3 4 5 6 7 8 9 10 11\n",
    )]);
    assert_eq!(names(&fetch_f64(&mut a, "disk.dev.read")), ["sda", "sdc"]);
    let (_dir, mut a) = agent(&[("proc/stat", "cpu 1 2 3 4\n")]);
    assert!(fetch_f64(&mut a, "disk.dev.read").is_empty());
    a.expect(
        "hinv.ndisk -
        disk.all.read -",
    );
}

#[test]
fn partition_names_of_every_family() {
    for (name, kind) in [
        ("sda", Some(Kind::Disk)),
        ("sda1", Some(Kind::Partition)),
        ("nvme0n1", Some(Kind::Disk)),
        ("nvme0n1p3", Some(Kind::Partition)),
        ("mmcblk0", Some(Kind::Disk)),
        ("mmcblk0p1", Some(Kind::Partition)),
        ("rbd0", Some(Kind::Disk)),
        ("nbd0p1", Some(Kind::Partition)),
        ("cciss/c0d0", Some(Kind::Disk)),
        ("cciss/c0d0p1", Some(Kind::Partition)),
        ("xvda", Some(Kind::Disk)),
        ("xvda1", Some(Kind::Partition)),
        ("dm-3", Some(Kind::Dm)),
        ("md0", Some(Kind::Md)),
        ("zram1", Some(Kind::Zram)),
        ("360014051234abcdef", Some(Kind::Wwid)),
        // All digits: a partition by the earlier test, as in pmdalinux.
        ("360000000000000001", Some(Kind::Partition)),
        ("loop0", None),
        ("ram0", None),
        ("sr0", None),
    ] {
        assert_eq!(kind_of(name), kind, "{name}");
    }
}

#[test]
fn this_hosts_disks() {
    let mut buf = String::new();
    let Ok(text) = Root::default().read("proc/diskstats", &mut buf) else {
        return;
    };
    let want: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| l.split_ascii_whitespace().nth(2))
        .filter(|n| kind_of(n) == Some(Kind::Disk))
        .collect();
    let mut a = LinuxAgent::new();
    let got = fetch_f64(&mut a, "disk.dev.read");
    assert_eq!(names(&got), want);
    assert_eq!(one(&mut a, "hinv.ndisk"), Some(want.len() as f64));
}
