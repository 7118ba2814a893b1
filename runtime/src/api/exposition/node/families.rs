//! The node_exporter profile's family table: for each node_exporter family, the PCP metrics
//! that feed it, with the family's type, help, unit scale and how PCP's instances become its
//! labels. Data only: it reads no values and writes no text (`node.rs` renders).

use std::sync::OnceLock;

pub(super) const MS: f64 = 0.001;
pub(super) const US: f64 = 0.000_001;
pub(super) const KB: f64 = 1024.0;
/// diskstats counts 512-byte sectors whatever the device's block size.
pub(super) const SECTOR: f64 = 512.0;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    Counter,
    Gauge,
    /// node_exporter types netstat's and vmstat's fields `untyped`; so do we, so a recording
    /// rule or a dashboard that checks the type sees the same.
    Untyped,
}

/// How a PCP metric's instances become a family's labels.
#[derive(Clone, Copy, Debug)]
pub(super) enum Labels {
    /// A singular metric: no labels.
    None,
    /// Only this instance of the metric, without labels (the load's `1 minute`).
    Instance(&'static str),
    /// `device` = the instance name (disks, network interfaces).
    Device,
    /// `cpu` = the instance's number (`cpu3` is `3`), and `mode` when given.
    Cpu(Option<&'static str>),
    /// `device`, `fstype`, `mountpoint` of a mounted filesystem.
    Filesystem,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Scale {
    By(f64),
    /// Pages to bytes (sockstat's `mem`): times `hinv.pagesize`.
    PageSize,
}

/// One PCP metric feeding (part of) one family.
#[derive(Debug)]
pub(super) struct Row {
    pub family: String,
    pub kind: Kind,
    pub help: String,
    pub pcp: String,
    pub scale: Scale,
    pub labels: Labels,
}

pub(super) fn row(
    family: &str,
    kind: Kind,
    pcp: &str,
    scale: f64,
    labels: Labels,
    help: &str,
) -> Row {
    Row {
        family: family.to_string(),
        kind,
        help: help.to_string(),
        pcp: pcp.to_string(),
        scale: Scale::By(scale),
        labels,
    }
}

/// Every row, in family order as built (the renderer sorts families by name).
pub(super) fn rows() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    ROWS.get_or_init(build_rows)
}

pub(super) fn build_rows() -> Vec<Row> {
    use Kind::*;
    use Labels as L;
    let mut r = Vec::new();

    // cpu: /proc/stat per CPU, PCP in milliseconds, node_exporter in seconds.
    for (mode, pcp) in [
        ("idle", "kernel.percpu.cpu.idle"),
        ("iowait", "kernel.percpu.cpu.wait.total"),
        ("irq", "kernel.percpu.cpu.irq.hard"),
        ("nice", "kernel.percpu.cpu.nice"),
        ("softirq", "kernel.percpu.cpu.irq.soft"),
        ("steal", "kernel.percpu.cpu.steal"),
        ("system", "kernel.percpu.cpu.sys"),
        ("user", "kernel.percpu.cpu.user"),
    ] {
        r.push(row(
            "node_cpu_seconds_total",
            Counter,
            pcp,
            MS,
            L::Cpu(Some(mode)),
            "Seconds each CPU spent in each mode since boot.",
        ));
    }
    for (mode, pcp) in [
        ("nice", "kernel.percpu.cpu.guest_nice"),
        ("user", "kernel.percpu.cpu.guest"),
    ] {
        r.push(row(
            "node_cpu_guest_seconds_total",
            Counter,
            pcp,
            MS,
            L::Cpu(Some(mode)),
            "Seconds each CPU ran guests (virtual CPUs), also counted in user and nice.",
        ));
    }

    // meminfo: one family per field, named as /proc/meminfo names it; kB fields in bytes.
    enum U {
        Kb,
        Count,
        Bytes,
    }
    for (field, pcp, unit) in [
        ("Active", "mem.util.active", U::Kb),
        ("Active_anon", "mem.util.active_anon", U::Kb),
        ("Active_file", "mem.util.active_file", U::Kb),
        ("AnonHugePages", "mem.util.anonhugepages", U::Kb),
        ("AnonPages", "mem.util.anonpages", U::Kb),
        ("Bounce", "mem.util.bounce", U::Kb),
        ("Buffers", "mem.util.bufmem", U::Kb),
        ("Cached", "mem.util.cached", U::Kb),
        ("CommitLimit", "mem.util.commitLimit", U::Kb),
        ("Committed_AS", "mem.util.committed_AS", U::Kb),
        ("DirectMap1G", "mem.util.directMap1G", U::Kb),
        ("DirectMap2M", "mem.util.directMap2M", U::Kb),
        ("DirectMap4k", "mem.util.directMap4k", U::Kb),
        ("Dirty", "mem.util.dirty", U::Kb),
        ("HardwareCorrupted", "mem.util.corrupthardware", U::Kb),
        ("HighFree", "mem.util.highFree", U::Kb),
        ("HighTotal", "mem.util.highTotal", U::Kb),
        ("HugePages_Free", "mem.util.hugepagesFree", U::Count),
        ("HugePages_Rsvd", "mem.util.hugepagesRsvd", U::Count),
        ("HugePages_Surp", "mem.util.hugepagesSurp", U::Count),
        ("HugePages_Total", "mem.util.hugepagesTotal", U::Count),
        ("Hugepagesize", "hinv.hugepagesize", U::Bytes),
        ("Inactive", "mem.util.inactive", U::Kb),
        ("Inactive_anon", "mem.util.inactive_anon", U::Kb),
        ("Inactive_file", "mem.util.inactive_file", U::Kb),
        ("KernelStack", "mem.util.kernelStack", U::Kb),
        ("LowFree", "mem.util.lowFree", U::Kb),
        ("LowTotal", "mem.util.lowTotal", U::Kb),
        ("Mapped", "mem.util.mapped", U::Kb),
        ("MemAvailable", "mem.util.available", U::Kb),
        ("MemFree", "mem.util.free", U::Kb),
        ("MemTotal", "mem.physmem", U::Kb),
        ("Mlocked", "mem.util.mlocked", U::Kb),
        ("MmapCopy", "mem.util.mmap_copy", U::Kb),
        ("NFS_Unstable", "mem.util.NFS_Unstable", U::Kb),
        ("PageTables", "mem.util.pageTables", U::Kb),
        ("Quicklists", "mem.util.quicklists", U::Kb),
        ("SReclaimable", "mem.util.slabReclaimable", U::Kb),
        ("SUnreclaim", "mem.util.slabUnreclaimable", U::Kb),
        ("Shmem", "mem.util.shmem", U::Kb),
        ("Slab", "mem.util.slab", U::Kb),
        ("SwapCached", "mem.util.swapCached", U::Kb),
        ("SwapFree", "mem.util.swapFree", U::Kb),
        ("SwapTotal", "mem.util.swapTotal", U::Kb),
        ("Unevictable", "mem.util.unevictable", U::Kb),
        ("VmallocChunk", "mem.util.vmallocChunk", U::Kb),
        ("VmallocTotal", "mem.util.vmallocTotal", U::Kb),
        ("VmallocUsed", "mem.util.vmallocUsed", U::Kb),
        ("Writeback", "mem.util.writeback", U::Kb),
    ] {
        let (suffix, scale) = match unit {
            U::Kb => ("_bytes", KB),
            U::Bytes => ("_bytes", 1.0),
            U::Count => ("", 1.0),
        };
        r.push(row(
            &format!("node_memory_{field}{suffix}"),
            Gauge,
            pcp,
            scale,
            L::None,
            &format!("The {field} line of /proc/meminfo."),
        ));
    }

    // loadavg
    for (n, inst) in [("1", "1 minute"), ("5", "5 minute"), ("15", "15 minute")] {
        r.push(row(
            &format!("node_load{n}"),
            Gauge,
            "kernel.all.load",
            1.0,
            L::Instance(inst),
            &format!("Load average over {n} minute(s): runnable and uninterruptible tasks."),
        ));
    }

    // stat
    for (family, kind, pcp, help) in [
        (
            "node_context_switches_total",
            Counter,
            "kernel.all.pswitch",
            "Context switches since boot.",
        ),
        (
            "node_forks_total",
            Counter,
            "kernel.all.sysfork",
            "Processes and threads created since boot.",
        ),
        (
            "node_intr_total",
            Counter,
            "kernel.all.intr",
            "Interrupts serviced since boot.",
        ),
        (
            "node_boot_time_seconds",
            Gauge,
            "kernel.all.boottime",
            "When the host booted, in seconds since the epoch.",
        ),
        (
            "node_procs_running",
            Gauge,
            "kernel.all.running",
            "Tasks runnable now.",
        ),
        (
            "node_procs_blocked",
            Gauge,
            "kernel.all.blocked",
            "Tasks blocked on I/O now.",
        ),
        (
            "node_filefd_allocated",
            Gauge,
            "vfs.files.count",
            "File handles allocated (first field of /proc/sys/fs/file-nr).",
        ),
        (
            "node_filefd_maximum",
            Gauge,
            "vfs.files.max",
            "Most file handles the kernel allocates (fs.file-max).",
        ),
        (
            "node_entropy_available_bits",
            Gauge,
            "kernel.all.entropy.avail",
            "Bits of entropy the kernel's pool holds.",
        ),
        (
            "node_entropy_pool_size_bits",
            Gauge,
            "kernel.all.entropy.poolsize",
            "Size of the kernel's entropy pool, in bits.",
        ),
    ] {
        r.push(row(family, kind, pcp, 1.0, L::None, help));
    }

    // vmstat: node_exporter's default fields.
    for (f, pcp) in [
        ("oom_kill", "mem.vmstat.oom_kill"),
        ("pgfault", "mem.vmstat.pgfault"),
        ("pgmajfault", "mem.vmstat.pgmajfault"),
        ("pgpgin", "mem.vmstat.pgpgin"),
        ("pgpgout", "mem.vmstat.pgpgout"),
        ("pswpin", "mem.vmstat.pswpin"),
        ("pswpout", "mem.vmstat.pswpout"),
    ] {
        r.push(row(
            &format!("node_vmstat_{f}"),
            Untyped,
            pcp,
            1.0,
            L::None,
            &format!("The {f} line of /proc/vmstat."),
        ));
    }

    // pressure stall information: PCP in microseconds.
    for (what, pcp, help) in [
        (
            "cpu_waiting",
            "kernel.all.pressure.cpu.some.total",
            "Seconds some task waited for a CPU.",
        ),
        (
            "io_waiting",
            "kernel.all.pressure.io.some.total",
            "Seconds some task waited for I/O.",
        ),
        (
            "io_stalled",
            "kernel.all.pressure.io.full.total",
            "Seconds every non-idle task waited for I/O at once.",
        ),
        (
            "memory_waiting",
            "kernel.all.pressure.memory.some.total",
            "Seconds some task waited for memory.",
        ),
        (
            "memory_stalled",
            "kernel.all.pressure.memory.full.total",
            "Seconds every non-idle task waited for memory at once.",
        ),
    ] {
        r.push(row(
            &format!("node_pressure_{what}_seconds_total"),
            Counter,
            pcp,
            US,
            L::None,
            help,
        ));
    }

    // diskstats, per disk (the PCP names are the fields after the prefix).
    for (family, kind, pcp, scale, help) in [
        (
            "reads_completed_total",
            Counter,
            "read",
            1.0,
            "Reads completed.",
        ),
        (
            "reads_merged_total",
            Counter,
            "read_merge",
            1.0,
            "Adjacent reads merged into one.",
        ),
        (
            "read_bytes_total",
            Counter,
            "blkread",
            SECTOR,
            "Bytes read.",
        ),
        (
            "read_time_seconds_total",
            Counter,
            "read_rawactive",
            MS,
            "Seconds reads took, summed over reads.",
        ),
        (
            "writes_completed_total",
            Counter,
            "write",
            1.0,
            "Writes completed.",
        ),
        (
            "writes_merged_total",
            Counter,
            "write_merge",
            1.0,
            "Adjacent writes merged into one.",
        ),
        (
            "written_bytes_total",
            Counter,
            "blkwrite",
            SECTOR,
            "Bytes written.",
        ),
        (
            "write_time_seconds_total",
            Counter,
            "write_rawactive",
            MS,
            "Seconds writes took, summed over writes.",
        ),
        ("io_now", Gauge, "inflight", 1.0, "Requests in flight now."),
        (
            "io_time_seconds_total",
            Counter,
            "avactive",
            MS,
            "Seconds the disk had a request in flight.",
        ),
        (
            "io_time_weighted_seconds_total",
            Counter,
            "aveq",
            MS,
            "Seconds of requests in flight, weighted by how many were.",
        ),
        (
            "discards_completed_total",
            Counter,
            "discard",
            1.0,
            "Discards completed.",
        ),
        (
            "discards_merged_total",
            Counter,
            "discard_merge",
            1.0,
            "Adjacent discards merged into one.",
        ),
        (
            "discarded_sectors_total",
            Counter,
            "blkdiscard",
            1.0,
            "512-byte sectors discarded.",
        ),
        (
            "discard_time_seconds_total",
            Counter,
            "discard_rawactive",
            MS,
            "Seconds discards took, summed over discards.",
        ),
        (
            "flush_requests_total",
            Counter,
            "flush",
            1.0,
            "Cache flushes completed.",
        ),
        (
            "flush_requests_time_seconds_total",
            Counter,
            "flush_rawactive",
            MS,
            "Seconds cache flushes took, summed over flushes.",
        ),
    ] {
        // PCP files disks, md arrays and zram devices under three names with the same
        // fields; node_exporter has them all in node_disk_*.
        for prefix in DISK_PREFIXES {
            r.push(row(
                &format!("node_disk_{family}"),
                kind,
                &format!("{prefix}{pcp}"),
                scale,
                L::Device,
                &format!("Per disk (/proc/diskstats): {help}"),
            ));
        }
    }

    // filesystems, per mount (statfs).
    for (family, pcp, scale, help) in [
        (
            "size_bytes",
            "filesys.capacity",
            KB,
            "Size of the filesystem in bytes.",
        ),
        (
            "free_bytes",
            "filesys.free",
            KB,
            "Bytes free, root's reserve included.",
        ),
        (
            "avail_bytes",
            "filesys.avail",
            KB,
            "Bytes free to unprivileged users.",
        ),
        ("files", "filesys.maxfiles", 1.0, "Inodes in all."),
        ("files_free", "filesys.freefiles", 1.0, "Inodes free."),
        (
            "readonly",
            "filesys.readonly",
            1.0,
            "1 when mounted read-only.",
        ),
    ] {
        r.push(row(
            &format!("node_filesystem_{family}"),
            Gauge,
            pcp,
            scale,
            L::Filesystem,
            help,
        ));
    }

    // netdev, per interface.
    for (family, pcp) in [
        ("receive_bytes_total", "network.interface.in.bytes"),
        ("receive_packets_total", "network.interface.in.packets"),
        ("receive_errs_total", "network.interface.in.errors"),
        ("receive_drop_total", "network.interface.in.drops"),
        ("receive_fifo_total", "network.interface.in.fifo"),
        ("receive_frame_total", "network.interface.in.frame"),
        (
            "receive_compressed_total",
            "network.interface.in.compressed",
        ),
        ("receive_multicast_total", "network.interface.in.mcasts"),
        ("transmit_bytes_total", "network.interface.out.bytes"),
        ("transmit_packets_total", "network.interface.out.packets"),
        ("transmit_errs_total", "network.interface.out.errors"),
        ("transmit_drop_total", "network.interface.out.drops"),
        ("transmit_fifo_total", "network.interface.out.fifo"),
        ("transmit_colls_total", "network.interface.collisions"),
        ("transmit_carrier_total", "network.interface.out.carrier"),
        (
            "transmit_compressed_total",
            "network.interface.out.compressed",
        ),
    ] {
        let field = family.trim_end_matches("_total").replace('_', " ");
        r.push(row(
            &format!("node_network_{family}"),
            Counter,
            pcp,
            1.0,
            L::Device,
            &format!("Per interface (/proc/net/dev): {field}."),
        ));
    }
    r.push(row(
        "node_network_mtu_bytes",
        Gauge,
        "network.interface.mtu",
        1.0,
        L::Device,
        "Per interface: its MTU in bytes.",
    ));

    // netstat: node_exporter's default field set (errors, forwarding, octets, messages,
    // listen queue and syncookie counts, TCP and UDP totals).
    for (family, pcp) in [
        ("Icmp6_InErrors", "network.icmp6.inerrors"),
        ("Icmp6_InMsgs", "network.icmp6.inmsgs"),
        ("Icmp6_OutMsgs", "network.icmp6.outmsgs"),
        ("Icmp_InErrors", "network.icmp.inerrors"),
        ("Icmp_InMsgs", "network.icmp.inmsgs"),
        ("Icmp_OutMsgs", "network.icmp.outmsgs"),
        ("Ip6_InOctets", "network.ip6.inoctets"),
        ("Ip6_OutOctets", "network.ip6.outoctets"),
        ("IpExt_InOctets", "network.ip.inoctets"),
        ("IpExt_OutOctets", "network.ip.outoctets"),
        ("Ip_Forwarding", "network.ip.forwarding"),
        ("TcpExt_ListenDrops", "network.tcp.listendrops"),
        ("TcpExt_ListenOverflows", "network.tcp.listenoverflows"),
        ("TcpExt_SyncookiesFailed", "network.tcp.syncookiesfailed"),
        ("TcpExt_SyncookiesRecv", "network.tcp.syncookiesrecv"),
        ("TcpExt_SyncookiesSent", "network.tcp.syncookiessent"),
        ("TcpExt_TCPSynRetrans", "network.tcp.synretrans"),
        ("TcpExt_TCPTimeouts", "network.tcp.timeouts"),
        ("Tcp_ActiveOpens", "network.tcp.activeopens"),
        ("Tcp_CurrEstab", "network.tcp.currestab"),
        ("Tcp_InErrs", "network.tcp.inerrs"),
        ("Tcp_InSegs", "network.tcp.insegs"),
        ("Tcp_OutRsts", "network.tcp.outrsts"),
        ("Tcp_OutSegs", "network.tcp.outsegs"),
        ("Tcp_PassiveOpens", "network.tcp.passiveopens"),
        ("Tcp_RetransSegs", "network.tcp.retranssegs"),
        ("Udp6_InDatagrams", "network.udp6.indatagrams"),
        ("Udp6_InErrors", "network.udp6.inerrors"),
        ("Udp6_NoPorts", "network.udp6.noports"),
        ("Udp6_OutDatagrams", "network.udp6.outdatagrams"),
        ("Udp6_RcvbufErrors", "network.udp6.rcvbuferrors"),
        ("Udp6_SndbufErrors", "network.udp6.sndbuferrors"),
        ("UdpLite6_InErrors", "network.udplite6.inerrors"),
        ("UdpLite_InErrors", "network.udplite.inerrors"),
        ("Udp_InDatagrams", "network.udp.indatagrams"),
        ("Udp_InErrors", "network.udp.inerrors"),
        ("Udp_NoPorts", "network.udp.noports"),
        ("Udp_OutDatagrams", "network.udp.outdatagrams"),
        ("Udp_RcvbufErrors", "network.udp.recvbuferrors"),
        ("Udp_SndbufErrors", "network.udp.sndbuferrors"),
    ] {
        let (proto, field) = family.split_once('_').unwrap_or((family, ""));
        r.push(row(
            &format!("node_netstat_{family}"),
            Untyped,
            pcp,
            1.0,
            L::None,
            &format!("{proto} {field}, from /proc/net/snmp, snmp6 or netstat."),
        ));
    }

    // sockstat
    for (family, pcp) in [
        ("FRAG6_inuse", "network.sockstat.frag6.inuse"),
        ("FRAG6_memory", "network.sockstat.frag6.memory"),
        ("FRAG_inuse", "network.sockstat.frag.inuse"),
        ("FRAG_memory", "network.sockstat.frag.memory"),
        ("RAW6_inuse", "network.sockstat.raw6.inuse"),
        ("RAW_inuse", "network.sockstat.raw.inuse"),
        ("TCP6_inuse", "network.sockstat.tcp6.inuse"),
        ("TCP_alloc", "network.sockstat.tcp.alloc"),
        ("TCP_inuse", "network.sockstat.tcp.inuse"),
        ("TCP_mem", "network.sockstat.tcp.mem"),
        ("TCP_orphan", "network.sockstat.tcp.orphan"),
        ("TCP_tw", "network.sockstat.tcp.tw"),
        ("UDP6_inuse", "network.sockstat.udp6.inuse"),
        ("UDPLITE6_inuse", "network.sockstat.udplite6.inuse"),
        ("UDPLITE_inuse", "network.sockstat.udplite.inuse"),
        ("UDP_inuse", "network.sockstat.udp.inuse"),
        ("UDP_mem", "network.sockstat.udp.mem"),
        ("sockets_used", "network.sockstat.total"),
    ] {
        r.push(row(
            &format!("node_sockstat_{family}"),
            Gauge,
            pcp,
            1.0,
            L::None,
            &format!(
                "{} of /proc/net/sockstat or sockstat6.",
                family.replace('_', " ")
            ),
        ));
    }
    for (family, pcp) in [
        ("TCP_mem_bytes", "network.sockstat.tcp.mem"),
        ("UDP_mem_bytes", "network.sockstat.udp.mem"),
    ] {
        r.push(Row {
            family: format!("node_sockstat_{family}"),
            kind: Gauge,
            help: "Socket buffer memory in bytes (pages times the page size).".into(),
            pcp: pcp.to_string(),
            scale: Scale::PageSize,
            labels: L::None,
        });
    }

    // softnet, per CPU.
    for (family, pcp, help) in [
        (
            "processed_total",
            "network.softnet.percpu.processed",
            "Packets processed.",
        ),
        (
            "dropped_total",
            "network.softnet.percpu.dropped",
            "Packets dropped, the backlog full.",
        ),
        (
            "times_squeezed_total",
            "network.softnet.percpu.time_squeeze",
            "Times the receive loop stopped with work left.",
        ),
    ] {
        r.push(row(
            &format!("node_softnet_{family}"),
            Counter,
            pcp,
            1.0,
            L::Cpu(None),
            &format!("Per CPU (/proc/net/softnet_stat): {help}"),
        ));
    }
    r
}

/// Where PCP keeps the diskstats fields of whole disks, md arrays and zram devices.
/// Device-mapper devices (`disk.dm.*`) are named by their mapper name in PCP and `dm-N` in
/// node_exporter: left out rather than given under another device label.
pub(super) const DISK_PREFIXES: [&str; 3] = ["disk.dev.", "disk.md.", "zram."];

/// The uname fields `node_uname_info` carries, and their PCP names.
pub(super) const UNAME: [(&str, &str); 5] = [
    ("machine", "kernel.uname.machine"),
    ("nodename", "kernel.uname.nodename"),
    ("release", "kernel.uname.release"),
    ("sysname", "kernel.uname.sysname"),
    ("version", "kernel.uname.version"),
];
