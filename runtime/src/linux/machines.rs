//! Trees of machines unlike the 2-CPU VM the other tests run on, written in the shapes of
//! PCP's captured test trees (qa/linux/*.tgz: an HP BL920 Gen8 with 480 CPUs in 16 NUMA
//! nodes, RHEL 6's 2.6.32 kernel, Alpha and 32-bit PowerMac uniprocessors, a container
//! host's interfaces) with numbers of our own. The expected values are what PCP 6.0.3's
//! pmdalinux answers on the same trees (`LINUX_STATSPATH=DIR LINUX_NCPUS=N pminfo -L -K
//! clear -K add,60,pmda_linux.so,linux_init -f NAMES`, run on the trees these tests write to
//! `$WASMON_FIXTURE_DIR/<name>` when that variable is set); where this agent deliberately
//! differs, the test says why. Test-only.

use super::LinuxAgent;

/// An agent on a root holding `files`; with `WASMON_FIXTURE_DIR` set, the tree is also
/// written to `$WASMON_FIXTURE_DIR/name` (to run pmdalinux on it).
fn machine(name: &str, files: &[(String, String)]) -> (tempfile::TempDir, LinuxAgent) {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    if let Some(dir) = std::env::var_os("WASMON_FIXTURE_DIR") {
        let to = std::path::Path::new(&dir).join(name);
        for (rel, text) in &refs {
            let path = to.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }
    super::testing::agent(&refs)
}

fn file(rel: impl Into<String>, text: impl Into<String>) -> (String, String) {
    (rel.into(), text.into())
}

/// HP BL920 Gen8 shape: 16 sockets of 15 cores with two hardware threads each, one NUMA
/// node per socket; socket `s` holds CPUs `15s..15s+14` and their siblings `240+15s..`.
const SOCKETS: usize = 16;
const CORES: usize = 15;
const NCPU: usize = SOCKETS * CORES * 2;

fn node_of(cpu: usize) -> usize {
    (cpu % (SOCKETS * CORES)) / CORES
}

/// CPU `c`'s /proc/stat columns (user nice system idle iowait irq softirq steal guest
/// guest_nice), in ticks.
fn ticks(c: u64) -> [u64; 10] {
    [
        1000 + c,
        c % 7,
        500 + 2 * c,
        900_000 + c,
        10 + c % 5,
        1,
        2 + c % 3,
        0,
        c % 4,
        c % 2,
    ]
}

/// A 4.18 kernel (RHEL 8) on the BL920: /proc/stat, /proc/cpuinfo, the CPU and node
/// directories of sysfs, each node's meminfo and numastat.
fn bl920() -> Vec<(String, String)> {
    let mut all = [0u64; 10];
    let mut lines = String::new();
    for c in 0..NCPU as u64 {
        let t = ticks(c);
        for (a, v) in all.iter_mut().zip(t) {
            *a += v;
        }
        let cols: Vec<String> = t.iter().map(u64::to_string).collect();
        lines += &format!("cpu{c} {}\n", cols.join(" "));
    }
    let cols: Vec<String> = all.iter().map(u64::to_string).collect();
    let stat = format!(
        "cpu  {}\n{lines}intr 98765432 27 0 0 0\nctxt 123456789\nbtime 1546300800\n\
         processes 4567890\nprocs_running 17\nprocs_blocked 2\n\
         softirq 5555 1 2 3 4 5 6 7 8 9 10\n",
        cols.join(" ")
    );
    let mut files = vec![file("proc/stat", stat)];
    let mut cpuinfo = String::new();
    for c in 0..NCPU {
        let core = c % CORES;
        cpuinfo += &format!(
            "processor\t: {c}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 62\n\
             model name\t: Intel(R) Xeon(R) CPU E7-2890 v2 @ 2.80GHz\nstepping\t: 7\n\
             microcode\t: 0x715\ncpu MHz\t\t: {}.{:03}\ncache size\t: 38400 KB\n\
             physical id\t: {}\nsiblings\t: 30\ncore id\t\t: {core}\ncpu cores\t: 15\n\
             apicid\t\t: {}\nfpu\t\t: yes\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic \
             sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe\n\
             bogomips\t: 5586.{:02}\nclflush size\t: 64\ncache_alignment\t: 64\n\
             address sizes\t: 46 bits physical, 48 bits virtual\npower management:\n\n",
            2793 + c % 3,
            c % 1000,
            node_of(c),
            c * 2,
            c % 100,
        );
    }
    files.push(file("proc/cpuinfo", cpuinfo));
    let range = format!("0-{}\n", NCPU - 1);
    for f in ["online", "possible", "present"] {
        files.push(file(format!("sys/devices/system/cpu/{f}"), range.clone()));
    }
    // x86 has no `online` file for the boot CPU.
    for c in 1..NCPU {
        files.push(file(format!("sys/devices/system/cpu/cpu{c}/online"), "1\n"));
    }
    files.push(file("sys/devices/system/cpu/cpu0/topology/core_id", "0\n"));
    for s in 0..SOCKETS {
        let (a, b) = (s * CORES, SOCKETS * CORES + s * CORES);
        let dir = format!("sys/devices/system/node/node{s}");
        files.push(file(
            format!("{dir}/cpulist"),
            format!("{a}-{},{b}-{}\n", a + CORES - 1, b + CORES - 1),
        ));
        // sysfs links each CPU into its node; pmdalinux reads these names.
        for c in (a..a + CORES).chain(b..b + CORES) {
            files.push(file(format!("{dir}/cpu{c}"), ""));
        }
        files.push(file(format!("{dir}/online"), "1\n"));
        let k = s as u64;
        let total = 134_180_864 - k * 1024;
        let free = 120_000_000 - k * 999;
        files.push(file(format!("{dir}/meminfo"), node_meminfo(s, total, free)));
        files.push(file(
            format!("{dir}/numastat"),
            format!(
                "numa_hit {}\nnuma_miss {}\nnuma_foreign {}\ninterleave_hit {}\nlocal_node {}\n\
                 other_node {}\n",
                9_000_000 + k,
                k * 3,
                k * 5,
                4096 + k,
                8_900_000 + k,
                100_000 + k
            ),
        ));
    }
    files.push(file(
        "sys/devices/system/node/online",
        format!("0-{}\n", SOCKETS - 1),
    ));
    files.push(file(
        "sys/devices/system/node/possible",
        format!("0-{}\n", SOCKETS - 1),
    ));
    files
}

/// One node's meminfo as 4.18 writes it (with the `ShmemPmdMapped:`/`FilePmdMapped:` keys
/// that end in `Mapped:`).
fn node_meminfo(n: usize, total: u64, free: u64) -> String {
    let k = n as u64;
    let keys: [(&str, u64); 33] = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemUsed", total - free),
        ("Active", 6_000_000 + k),
        ("Inactive", 3_000_000 + k),
        ("Active(anon)", 4_000_000 + k),
        ("Inactive(anon)", 100_000 + k),
        ("Active(file)", 2_000_000),
        ("Inactive(file)", 2_900_000 + k),
        ("Unevictable", 0),
        ("Mlocked", 0),
        ("Dirty", 120 + k),
        ("Writeback", 0),
        ("FilePages", 5_000_000 + k),
        ("Mapped", 345_678 + k),
        ("AnonPages", 4_050_000 + k),
        ("Shmem", 60_000 + k),
        ("KernelStack", 20_000),
        ("PageTables", 30_000 + k),
        ("NFS_Unstable", 0),
        ("Bounce", 0),
        ("WritebackTmp", 0),
        ("KReclaimable", 400_000),
        ("Slab", 700_000 + k),
        ("SReclaimable", 400_000),
        ("SUnreclaim", 300_000 + k),
        ("AnonHugePages", 2_048_000),
        ("ShmemHugePages", 0),
        ("ShmemPmdMapped", 0),
        ("FileHugePages", 0),
        ("FilePmdMapped", 0),
        ("HugePages_Total", 16 + k),
        ("HugePages_Free", 8),
    ];
    let mut text = String::new();
    for (key, v) in keys {
        let unit = if key.starts_with("HugePages") {
            ""
        } else {
            " kB"
        };
        text += &format!("Node {n} {:<17}{v:>9}{unit}\n", format!("{key}:"));
    }
    text + &format!("Node {n} HugePages_Surp:      0\n")
}

#[test]
fn a_480_cpu_16_node_host() {
    let files = bl920();
    let (_root, mut a) = machine("bl920", &files);
    let user = |cpus: &mut dyn Iterator<Item = usize>| -> u64 {
        cpus.map(|c| 10 * ticks(c as u64)[0]).sum()
    };
    // Formulas first (ticks of 100 Hz in milliseconds), then pmdalinux's figures.
    let node0 = user(&mut (0..15).chain(240..255));
    let all = user(&mut (0..NCPU));
    a.expect(&format!(
        "hinv.ncpu 480
        hinv.nnode 16
        kernel.all.cpu.user {all}
        kernel.pernode.cpu.user {}",
        (0..SOCKETS)
            .map(|s| {
                let (x, y) = (s * CORES, SOCKETS * CORES + s * CORES);
                format!("node{s}={}", user(&mut (x..x + CORES).chain(y..y + CORES)))
            })
            .collect::<Vec<_>>()
            .join(" ")
    ));
    assert_eq!(node0, 338_100);
    a.expect(
        "kernel.all.cpu.user 5_949_600
        kernel.all.cpu.vuser 5_942_400
        kernel.all.cpu.nice 14_340
        kernel.all.cpu.sys 4_699_200
        kernel.all.cpu.idle 4_321_149_600
        kernel.all.cpu.wait.total 57_600
        kernel.all.cpu.intr 19_200
        kernel.all.cpu.irq.soft 14_400
        kernel.all.cpu.irq.hard 4_800
        kernel.all.cpu.steal 0
        kernel.all.cpu.guest 7_200
        kernel.all.cpu.guest_nice 2_400
        kernel.all.cpu.vnice 11_940
        kernel.all.intr 98_765_432
        kernel.all.pswitch 123_456_789
        kernel.all.sysfork 4_567_890
        kernel.all.running 17
        kernel.all.blocked 2
        kernel.pernode.cpu.guest node0=420 node1=440 node2=460 node3=480 node4=420 node5=440 \
         node6=460 node7=480 node8=420 node9=440 node10=460 node11=480 node12=420 node13=440 \
         node14=460 node15=480",
    );
    // One node's value of a per-node metric, against pmdalinux's.
    for (name, node, want) in [
        ("kernel.pernode.cpu.sys", 0, 226_200.0),
        ("kernel.pernode.cpu.sys", 7, 289_200.0),
        ("kernel.pernode.cpu.sys", 15, 361_200.0),
        ("kernel.pernode.cpu.idle", 15, 270_105_600.0),
        ("mem.numa.util.used", 0, 14_180_864.0),
        ("mem.numa.util.used", 15, 14_180_489.0),
        ("mem.numa.util.slabReclaimable", 9, 400_000.0),
        ("mem.numa.alloc.other_node", 15, 100_015.0),
    ] {
        let got = super::testing::fetch_f64(&mut a, name);
        assert_eq!(got[node], (format!("node{node}"), want), "{name}");
    }
    let mut v = super::testing::fetch_f64(&mut a, "kernel.percpu.cpu.user");
    assert_eq!(v.len(), NCPU);
    assert_eq!(v.pop(), Some(("cpu479".into(), 14_790.0)));
    let map = super::testing::fetch_f64(&mut a, "hinv.map.cpu_node");
    let node = |cpu: &str| map.iter().find(|(n, _)| n == cpu).map(|(_, v)| *v);
    assert_eq!(
        (node("cpu14"), node("cpu15"), node("cpu254"), node("cpu479")),
        (Some(0.0), Some(1.0), Some(0.0), Some(15.0))
    );
    // Every CPU online (cpu0 has no `online` file on x86: pmdalinux counts it online).
    let online = super::testing::fetch_f64(&mut a, "hinv.cpu.online");
    assert_eq!(online.len(), NCPU);
    assert!(online.iter().all(|(_, v)| *v == 1.0));
    // `Mapped:` is its own key, not the tail of `ShmemPmdMapped:` or `FilePmdMapped:`
    // (pmdalinux 6.0.3 answers the 0 of the last of those lines; PCP later fixed its table,
    // commit 8e6a5ac18c, and its qa expects the file's value, as here).
    a.expect(
        "mem.numa.util.mapped node0=345_678 node1=345_679 node2=345_680 node3=345_681 \
         node4=345_682 node5=345_683 node6=345_684 node7=345_685 node8=345_686 node9=345_687 \
         node10=345_688 node11=345_689 node12=345_690 node13=345_691 node14=345_692 node15=345_693
        mem.numa.util.hugepagesTotal node0=16 node1=17 node2=18 node3=19 node4=20 node5=21 \
         node6=22 node7=23 node8=24 node9=25 node10=26 node11=27 node12=28 node13=29 node14=30 \
         node15=31",
    );
}

/// RHEL 6 (2.6.32): /proc/stat without the guest_nice column, meminfo without
/// MemAvailable, zoneinfo's watermarks, and an snmp6 without the counters later kernels
/// added (ECT packets, checksum errors, ignored multicasts, buffer errors).
fn rhel6() -> Vec<(String, String)> {
    let stat = "cpu  8123456 2345 3456789 987654321 123456 7890 12345 0 4567\n\
                cpu0 4061728 1172 1728394 493827160 61728 3945 6172 0 2283\n\
                cpu1 4061728 1173 1728395 493827161 61728 3945 6173 0 2284\n\
                intr 1234567890 120 9 0 0\nctxt 2345678901\nbtime 1388534400\n\
                processes 3456789\nprocs_running 3\nprocs_blocked 1\n";
    let meminfo = "MemTotal:       16333692 kB\nMemFree:         1234567 kB\n\
                   Buffers:          345678 kB\nCached:          9876543 kB\n\
                   SwapCached:         1234 kB\nActive:          7654321 kB\n\
                   Inactive:        5432109 kB\nActive(anon):    2345678 kB\n\
                   Inactive(anon):   456789 kB\nActive(file):    5308643 kB\n\
                   Inactive(file):   4975320 kB\nUnevictable:           0 kB\n\
                   Mlocked:               0 kB\nSwapTotal:       8388604 kB\n\
                   SwapFree:        8380000 kB\nDirty:               456 kB\n\
                   Writeback:             0 kB\nAnonPages:       2798765 kB\n\
                   Mapped:           123456 kB\nShmem:              3456 kB\n\
                   Slab:             876543 kB\nSReclaimable:     765432 kB\n\
                   SUnreclaim:       111111 kB\nKernelStack:        5678 kB\n\
                   PageTables:        34567 kB\nNFS_Unstable:          0 kB\n\
                   Bounce:                0 kB\nWritebackTmp:          0 kB\n\
                   CommitLimit:    16555448 kB\nCommitted_AS:    5678901 kB\n\
                   VmallocTotal:   34359738367 kB\nVmallocUsed:      345678 kB\n\
                   VmallocChunk:   34359375868 kB\nHardwareCorrupted:     0 kB\n\
                   AnonHugePages:   1234944 kB\nHugePages_Total:       0\n\
                   HugePages_Free:        0\nHugePages_Rsvd:        0\n\
                   HugePages_Surp:        0\nHugepagesize:       2048 kB\n\
                   DirectMap4k:        8192 kB\nDirectMap2M:    16762880 kB\n";
    let mut zoneinfo = String::new();
    for (zone, low, present) in [
        ("DMA", 7, 3998),
        ("DMA32", 1_789, 750_000),
        ("Normal", 5_678, 3_330_000),
    ] {
        zoneinfo += &format!(
            "Node 0, zone {zone:>8}\n  pages free     {}\n        min      {}\n        low      {low}\n\
             \x20       high     {}\n        scanned  0\n        spanned  {present}\n\
             \x20       present  {present}\n    nr_free_pages {}\n    nr_inactive_anon 0\n\
             \x20       protection: (0, 2990, 16120, 16120)\n  pagesets\n    cpu: 0\n\
             \x20             count: 0\n              high:  0\n              batch: 1\n\
             \x20 vm stats threshold: 6\n  all_unreclaimable: 0\n  start_pfn:         16\n\
             \x20 inactive_ratio:    1\n",
            present / 10,
            low * 4 / 5,
            low * 6 / 5,
            present / 10,
        );
    }
    let snmp6 = "Ip6InReceives                   \t20912\nIp6InHdrErrors                  \t0\n\
                 Ip6InTooBigErrors               \t0\nIp6InNoRoutes                   \t0\n\
                 Ip6InAddrErrors                 \t0\nIp6InUnknownProtos              \t0\n\
                 Ip6InTruncatedPkts              \t0\nIp6InDiscards                   \t0\n\
                 Ip6InDelivers                   \t20890\nIp6OutForwDatagrams             \t0\n\
                 Ip6OutRequests                  \t20933\nIp6OutDiscards                  \t0\n\
                 Ip6OutNoRoutes                  \t8\nIp6ReasmTimeout                 \t0\n\
                 Ip6ReasmReqds                   \t0\nIp6ReasmOKs                     \t0\n\
                 Ip6ReasmFails                   \t0\nIp6FragOKs                      \t0\n\
                 Ip6FragFails                    \t0\nIp6FragCreates                  \t0\n\
                 Ip6InMcastPkts                  \t22\nIp6OutMcastPkts                 \t43\n\
                 Ip6InOctets                     \t3011845\nIp6OutOctets                    \t3014477\n\
                 Ip6InMcastOctets                \t1760\nIp6OutMcastOctets               \t3264\n\
                 Ip6InBcastOctets                \t0\nIp6OutBcastOctets               \t0\n\
                 Icmp6InMsgs                     \t3\nIcmp6InErrors                   \t0\n\
                 Icmp6InDestUnreachs             \t0\nIcmp6InEchos                    \t0\n\
                 Icmp6InEchoReplies              \t0\nIcmp6InGroupMembQueries         \t0\n\
                 Icmp6InRouterAdvertisements     \t3\nIcmp6OutMsgs                    \t24\n\
                 Icmp6OutErrors                  \t0\nIcmp6OutDestUnreachs            \t0\n\
                 Icmp6OutRouterSolicits          \t3\nIcmp6OutNeighborSolicits        \t2\n\
                 Icmp6InType134                  \t3\nIcmp6OutType133                 \t3\n\
                 Udp6InDatagrams                 \t20801\nUdp6NoPorts                     \t0\n\
                 Udp6InErrors                    \t0\nUdp6OutDatagrams                \t20822\n\
                 UdpLite6InDatagrams             \t0\nUdpLite6NoPorts                 \t0\n\
                 UdpLite6InErrors                \t0\nUdpLite6OutDatagrams            \t0\n";
    vec![
        file("proc/stat", stat),
        file("proc/meminfo", meminfo),
        file("proc/zoneinfo", zoneinfo),
        file("proc/net/snmp6", snmp6),
    ]
}

#[test]
fn a_rhel6_kernel_without_later_columns_and_keys() {
    let (_root, mut a) = machine("rhel6", &rhel6());
    a.expect(
        "hinv.ncpu 2
        # pmdalinux's own figures on this tree, as every line below.
        kernel.all.cpu.user 81_234_560
        kernel.all.cpu.guest 45_670
        # No guest_nice column: no guest nice time.
        kernel.all.cpu.guest_nice 0
        kernel.all.cpu.vnice 23_450
        kernel.percpu.cpu.guest cpu0=22_830 cpu1=22_840
        mem.util.used 15_099_125
        mem.util.slabReclaimable 765_432
        mem.util.anonhugepages 1_234_944
        mem.util.hugepagesTotalBytes 0
        network.ip6.inreceives 20_912
        network.ip6.outnoroutes 8
        network.udp6.outdatagrams 20_822
        # Counters 2.6.32 does not keep.
        network.ip6.incepkts 0
        network.ip6.innoectpkts 0
        network.icmp6.incsumerrors 0
        network.udp6.ignoredmulti 0
        network.udp6.rcvbuferrors 0",
    );
}

/// MemAvailable on a kernel without it: the kernel's estimate (commit 34e431b0ae), in
/// Kbyte: free above the low watermarks, plus the page cache and reclaimable slab less the
/// smaller of their halves and the watermarks. pmdalinux 6.0.3 subtracts the watermarks in
/// bytes from Kbyte figures, which answers 0 here (checked on this tree); this agent keeps
/// the units straight.
#[test]
fn memavailable_estimated_on_a_kernel_without_it() {
    let (_root, mut a) = machine("rhel6", &rhel6());
    let low_kb = (7 + 1_789 + 5_678) * (super::meminfo::page_size() / 1024);
    let free = 1_234_567 - low_kb;
    let cache = 5_308_643 + 4_975_320;
    let slab = 765_432;
    let want = free + cache - (cache / 2).min(low_kb) + slab - (slab / 2).min(low_kb);
    assert_eq!(
        super::testing::one(&mut a, "mem.util.available"),
        Some(want as f64)
    );
    // With 4 KiB pages: 12,194,274 Kbyte of 16,333,692.
    if super::meminfo::page_size() == 4096 {
        assert_eq!(want, 12_194_274);
    }
    // Without zoneinfo there is no watermark to keep.
    let files: Vec<_> = rhel6()
        .into_iter()
        .filter(|(p, _)| p != "proc/zoneinfo")
        .collect();
    let (_root, mut a) = machine("rhel6-nozoneinfo", &files);
    assert_eq!(
        super::testing::one(&mut a, "mem.util.available"),
        Some((1_234_567 + cache + slab) as f64)
    );
}

/// Uniprocessors whose /proc/cpuinfo has no `processor` line and no sysfs CPU directories:
/// an Alpha (fields named `cpu model`, `cpu revision`, `cycle frequency [Hz]`, `BogoMIPS`)
/// and a 32-bit PowerMac (`cpu`, `clock`, `revision`, `bogomips`). The record describes
/// CPU 0.
#[test]
fn uniprocessor_cpuinfo_without_processor_lines() {
    let alpha = "cpu\t\t\t: Alpha\ncpu model\t\t: EV67\ncpu variation\t\t: 7\n\
                 cpu revision\t\t: 0\ncpu serial number\t:\nsystem type\t\t: Tsunami\n\
                 cycle frequency [Hz]\t: 666666666 est.\ntimer frequency [Hz]\t: 1024.00\n\
                 page size [bytes]\t: 8192\nBogoMIPS\t\t: 1327.10\n\
                 platform string\t\t: Compaq AlphaServer DS10 667 MHz\ncpus detected\t\t: 1\n";
    let (_root, mut a) = machine(
        "alpha",
        &[
            file("proc/cpuinfo", alpha),
            file("proc/stat", "cpu  1 2 3 4\ncpu0 1 2 3 4\n"),
        ],
    );
    a.expect(
        "hinv.ncpu 1
        hinv.cpu.online cpu0=1
        hinv.cpu.model \"EV67\"
        hinv.cpu.vendor \"unknown\"
        hinv.cpu.stepping \"0\"
        hinv.cpu.model_name \"EV67\"
        hinv.cpu.flags \"unknown\"",
    );
    // Reals in float precision, as pmdalinux keeps them (666.66669, 1327.1).
    let one = |a: &mut LinuxAgent, name: &str| super::testing::one(a, name).map(|v| v as f32);
    assert_eq!(one(&mut a, "hinv.cpu.clock"), Some(666.666_7));
    assert_eq!(one(&mut a, "hinv.cpu.bogomips"), Some(1327.1));
    assert_eq!(one(&mut a, "hinv.cpu.cache"), None);

    let g4 = "cpu\t\t: 7447A, altivec supported\nclock\t\t: 1333MHz\n\
              revision\t: 1.5 (pvr 8003 0105)\nbogomips\t: 73.72\n\
              machine\t\t: PowerBook6,8\nmotherboard\t: PowerBook6,8 MacRISC3 Power Macintosh\n\
              detected as\t: 287 (PowerBook G4 12\")\npmac flags\t: 0000001b\n\
              L2 cache\t: 512K unified\npmac-generation\t: NewWorld\n";
    let (_root, mut a) = machine(
        "powerbook",
        &[
            file("proc/cpuinfo", g4),
            file("proc/stat", "cpu  5 6 7 8\ncpu0 5 6 7 8\n"),
        ],
    );
    a.expect(
        "hinv.ncpu 1
        hinv.cpu.stepping \"1.5 (pvr 8003 0105)\"
        hinv.cpu.model \"unknown\"
        hinv.cpu.clock -",
    );
    assert_eq!(one(&mut a, "hinv.cpu.bogomips"), Some(73.72));
}

/// A container and virtualisation host's interfaces: `network.all` counts the physical
/// ones only, as pmdalinux with PCP's shipped `interfaces.conf`.
#[test]
fn network_all_leaves_out_bridges_tunnels_and_veth_pairs() {
    let dev = "Inter-|   Receive                                                |  Transmit\n \
               face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n\
               \x20 eno1: 1000000 1000 1 2 0 0 0 10 2000000 2000 3 4 0 0 0 0\n\
               \x20 eno2: 300 3 0 0 0 0 0 0 400 4 0 0 0 0 0 0\n\
               \x20   lo: 77777 77 0 0 0 0 0 0 77777 77 0 0 0 0 0 0\n\
               docker0: 5000 50 0 0 0 0 0 0 6000 60 0 0 0 0 0 0\n\
               veth1234: 5000 50 0 0 0 0 0 0 6000 60 0 0 0 0 0 0\n\
               vethab12cd: 11 1 0 0 0 0 0 0 22 2 0 0 0 0 0 0\n\
               virbr0: 8000 80 0 0 0 0 0 0 9000 90 0 0 0 0 0 0\n\
               virbr0-nic: 0 0 0 0 0 0 0 0 0 0 0 5 0 0 0 0\n\
               \x20 tun0: 4444 44 0 0 0 0 0 0 5555 55 0 0 0 0 0 0\n\
               cni-podman0: 123 1 0 0 0 0 0 0 456 4 0 0 0 0 0 0\n\
               \x20 cni0: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n\
               bond0: 1000300 1003 1 2 0 0 0 10 2000400 2004 3 4 0 0 0 0\n\
               team12: 9 9 0 0 0 0 0 0 9 9 0 0 0 0 0 0\n";
    let (_root, mut a) = machine("containers", &[file("proc/net/dev", dev)]);
    a.expect(
        "# eno1, eno2 and vethab12cd (a veth name that is not veth and digits).
        network.all.in.bytes 1000311
        network.all.out.bytes 2000422
        network.all.in.packets 1004
        network.all.total.packets 3010
        network.all.total.bytes 3000733
        network.all.in.errors 1
        network.all.out.drops 4
        network.all.total.drops 6
        hinv.ninterface 13",
    );
}

/// A 4-CPU, 2-node host with cpu2 offline (`echo 0 > .../cpu2/online`): /proc/stat has no
/// `cpu2` line, sysfs still lists it under node1. pmdalinux counts the CPUs /proc/stat shows
/// (its one source of online state; `hinv.ncpu` is the active size of the CPU indom), not the
/// configured ones: 3, with cpu3 keeping its number.
#[test]
fn a_host_with_an_offline_cpu() {
    let cpu = |n: u32, user: u32| format!("cpu{n} {user} 0 50 3000 0 0 0 0 0 0\n");
    let mut stat = String::from("cpu  400 0 200 9000 0 0 0 0 0 0\n");
    stat += &(cpu(0, 100) + &cpu(1, 110) + &cpu(3, 190));
    stat += "intr 5\nctxt 6\nbtime 1700000000\nprocesses 7\nprocs_running 1\nprocs_blocked 0\n";
    let sys = "sys/devices/system";
    let files = [
        file("proc/stat", stat),
        file(format!("{sys}/cpu/online"), "0-1,3\n"),
        file(format!("{sys}/cpu/possible"), "0-3\n"),
        file(format!("{sys}/cpu/present"), "0-3\n"),
        file(format!("{sys}/cpu/offline"), "2\n"),
        file(format!("{sys}/node/node0/cpulist"), "0-1\n"),
        file(format!("{sys}/node/node1/cpulist"), "2-3\n"),
    ];
    let (_root, mut a) = machine("offline-cpu", &files);
    a.expect(
        "hinv.ncpu 3
        hinv.nnode 2
        kernel.percpu.cpu.user cpu0=1000 cpu1=1100 cpu3=1900
        kernel.pernode.cpu.user node0=2100 node1=1900",
    );
}
