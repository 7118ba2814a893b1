//! Tests of the linux agent as a whole: the namespace callbacks against the table, values
//! against this machine's /proc, exact values from a synthesized tree, and a missing or
//! hostile root costing only values. Each group's parser is tested in its own module.

use super::testing::{agent, fetch, fetch_f64, one};
use super::*;
use crate::namespace::{Namespace, Semantics, Value, ValueType};

fn proc_file(rel: &str) -> String {
    std::fs::read_to_string(format!("/proc/{rel}")).unwrap()
}

#[test]
fn namespace_callbacks_agree_with_the_table() {
    let mut a = LinuxAgent::new();
    assert_eq!(a.lookup_name("kernel.all"), Err(NsError::NonLeaf));
    assert_eq!(
        a.lookup_name("kernel.all.nosuch"),
        Err(NsError::UnknownName)
    );
    let id = a.lookup_name("mem.physmem").unwrap();
    assert_eq!(id.to_string(), "60.1.0");
    assert_eq!(a.names_of(id), Ok(vec!["mem.physmem".to_string()]));
    let bogus = Pmid {
        domain: 60,
        cluster: 99,
        item: 0,
    };
    assert_eq!(a.names_of(bogus), Err(NsError::UnknownPmid));
    assert_eq!(a.fetch(&[bogus])[0].1, Err(NsError::UnknownPmid));
    let kids = a.children("kernel.percpu.cpu").unwrap();
    assert!(kids.contains(&Child {
        name: "user".into(),
        leaf: true
    }));
    assert!(kids.contains(&Child {
        name: "wait".into(),
        leaf: false
    }));
    assert_eq!(a.children("mem.physmem"), Ok(vec![]));
    assert_eq!(a.children("nosuch"), Err(NsError::UnknownName));
    let idle = a.lookup_name("kernel.percpu.cpu.idle").unwrap();
    let desc = a.describe(idle).unwrap();
    assert_eq!(
        (desc.semantics, desc.units.as_str(), desc.indom),
        (Semantics::Counter, "millisec", Some(indom::CPU))
    );
}

#[test]
fn load_average_matches_proc_loadavg() {
    let mut a = LinuxAgent::new();
    let parse = |t: String| -> Vec<f64> {
        t.split_whitespace()
            .take(3)
            .map(|x| x.parse().unwrap())
            .collect()
    };
    // /proc/loadavg changes every 5 s: accept what it said just before or just after.
    let before = parse(proc_file("loadavg"));
    let v = fetch_f64(&mut a, "kernel.all.load");
    let after = parse(proc_file("loadavg"));
    let names: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["1 minute", "5 minute", "15 minute"]);
    for (i, (_, x)) in v.iter().enumerate() {
        let near = |y: f64| (x - y).abs() < 1e-3;
        assert!(
            near(before[i]) || near(after[i]),
            "{x} vs {before:?} / {after:?}"
        );
    }
}

#[test]
fn memory_matches_proc_meminfo() {
    let mut a = LinuxAgent::new();
    let meminfo = proc_file("meminfo");
    let total: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(one(&mut a, "mem.physmem"), Some(total));
    assert_eq!(one(&mut a, "hinv.physmem"), Some((total / 1024.0).trunc()));
    for name in [
        "mem.util.free",
        "mem.util.available",
        "mem.util.cached",
        "mem.util.used",
    ] {
        let v = one(&mut a, name).unwrap();
        assert!(v >= 0.0 && v <= total, "{name} = {v}, total {total}");
    }
}

#[test]
fn cpu_times_per_cpu_and_all_match_proc_stat() {
    let mut a = LinuxAgent::new();
    let stat = proc_file("stat");
    let expect: Vec<String> = stat
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|k| k.starts_with("cpu") && *k != "cpu")
        .map(String::from)
        .collect();
    assert_eq!(one(&mut a, "hinv.ncpu"), Some(expect.len() as f64));
    let first = fetch_f64(&mut a, "kernel.percpu.cpu.idle");
    let names: Vec<String> = first.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(names, expect);
    // Counters never go backwards; ms = ticks * 10.
    let user0 = one(&mut a, "kernel.all.cpu.user").unwrap();
    let user1 = one(&mut a, "kernel.all.cpu.user").unwrap();
    assert!(
        user1 >= user0 && user0 > 0.0 && user0 % 10.0 == 0.0,
        "{user0} {user1}"
    );
    // Per-node sums cover every CPU.
    let nodes = fetch_f64(&mut a, "kernel.pernode.cpu.user");
    assert!(!nodes.is_empty() && nodes[0].0 == "node0", "{nodes:?}");
}

#[test]
fn network_interfaces_match_proc_net_dev() {
    let mut a = LinuxAgent::new();
    let dev = proc_file("net/dev");
    let expect: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| Some(l.split_once(':')?.0.trim()))
        .collect();
    let got = fetch_f64(&mut a, "network.interface.in.bytes");
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, expect);
}

/// A synthesized tree: exact values, unit conversions, types, and what a missing file or
/// key costs.
#[test]
fn synthesized_tree_exact_values() {
    let (_root, mut a) = agent(&[
        (
            "proc/stat",
            "cpu  100 2 30 4000 5 6 7 8 9 1\ncpu0 60 1 20 2000 3 3 3 4 4 0\n\
             cpu1 40 1 10 2000 2 3 4 4 5 1\nintr 12345 1 2\nctxt 777\nbtime 1700000000\n\
             processes 42\nprocs_running 3\nprocs_blocked 1\n",
        ),
        ("proc/loadavg", "0.50 1.25 2.00 3/456 789\n"),
        (
            "proc/meminfo",
            "MemTotal:       2048000 kB\nMemFree:         512000 kB\nMemAvailable:   1024000 kB\n\
             Buffers: 1000 kB\nCached:          100000 kB\nDirty: 10 kB\nWriteback: 5 kB\n\
             SwapTotal: 1024 kB\nSwapFree: 512 kB\nHugePages_Total: 4\nHugepagesize: 2048 kB\n",
        ),
        (
            "proc/net/dev",
            "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n\
             \x20   lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\n\
             \x20 eth0: 5000 50 1 2 0 0 0 9 7000 70 3 4 0 0 0 0\n\
             \x20bond0: 5000 50 1 2 0 0 0 9 7000 70 3 4 0 0 0 0\n",
        ),
        ("proc/uptime", "12345.67 999.00\n"),
        ("sys/devices/system/node/node0/cpulist", "0\n"),
        ("sys/devices/system/node/node1/cpulist", "1\n"),
    ]);
    let s = |v: f64| Some(v);
    a.expect(
        "kernel.all.cpu.user 1000
        kernel.all.cpu.vuser 910
        kernel.all.cpu.intr 130
        kernel.all.cpu.steal 80
        kernel.all.cpu.wait.total 50
        kernel.percpu.cpu.sys cpu0=200 cpu1=100
        kernel.pernode.cpu.guest node0=40 node1=50
        hinv.nnode 2
        kernel.all.intr 12345
        kernel.all.pswitch 777
        kernel.all.sysfork 42
        kernel.all.running 3
        kernel.all.blocked 1
        kernel.all.boottime 1700000000
        hinv.ncpu 2",
    );
    assert_eq!(
        fetch_f64(&mut a, "kernel.all.load")[1],
        ("5 minute".into(), 1.25)
    );
    a.expect(
        "kernel.all.runnable 3
        kernel.all.nprocs 456
        kernel.all.uptime 12345.67
        kernel.all.idletime 999
        mem.util.used 1536000",
    );
    assert_eq!(one(&mut a, "mem.util.other"), s(1536000.0 - 101000.0));
    a.expect(
        "mem.util.cache_clean 99985
        mem.util.available 1024000
        hinv.physmem 2000",
    );
    assert_eq!(one(&mut a, "swap.used"), s(512.0 * 1024.0));
    assert_eq!(
        one(&mut a, "mem.util.hugepagesTotalBytes"),
        s(4.0 * 2048.0 * 1024.0)
    );
    assert_eq!(one(&mut a, "hinv.hugepagesize"), s(2048.0 * 1024.0));
    assert_eq!(
        fetch_f64(&mut a, "network.interface.out.errors")[1],
        ("eth0".into(), 3.0)
    );
    a.expect(
        "network.interface.total.bytes lo=2000 eth0=12000 bond0=12000
        # Loopback and bonds are not counted twice in the host's totals.
        network.all.in.bytes 5000
        network.all.total.drops 6",
    );
    assert_eq!(
        fetch_f64(&mut a, "network.interface.in.mcasts")[1],
        ("eth0".into(), 9.0)
    );
    assert_eq!(one(&mut a, "hinv.ninterface"), s(3.0));
    // A key the file lacks is no value for that metric only.
    let ids = [
        a.lookup_name("mem.util.slab").unwrap(),
        a.lookup_name("mem.util.cached").unwrap(),
    ];
    let r = a.fetch(&ids);
    assert_eq!(r[0].1, Ok(vec![]));
    // Values take their metric's type: a 64-bit counter is an integer, a load a real.
    assert_eq!(r[1].1, Ok(vec![(String::new(), Value::Uint(100000))]));
    let id = a.lookup_name("kernel.all.load").unwrap();
    assert_eq!(a.describe(id).unwrap().value_type, ValueType::Float);
    assert_eq!(fetch(&mut a, "kernel.all.load")[0].1, Value::Real(0.5));
}

#[test]
fn a_missing_root_has_no_values_and_no_errors() {
    let mut a = LinuxAgent::with_root("/nonexistent/wasmon-root");
    let t = table();
    let ids: Vec<Pmid> = t.metrics.iter().map(|m| m.pmid()).collect();
    // Facts that need no file, as pmdalinux states them: the agent's version, the
    // distribution's "?" when no release file names it, no login records without utmp, and
    // the kernel's default largest PID.
    let without_files = [
        "pmda.version",
        "kernel.uname.distro",
        "kernel.all.nusers",
        "kernel.all.nroots",
        "kernel.all.nsessions",
        "kernel.all.pid_max",
    ];
    for (id, r) in a.fetch(&ids) {
        let name = t.by_pmid(id).unwrap().name;
        if without_files.contains(&name) {
            assert_eq!(r.map(|v| v.len()), Ok(1), "{name}");
        } else {
            assert_eq!(r, Ok(vec![]), "{name}");
        }
    }
}

/// Lines that are not what the parser expects cost only their own values.
#[test]
fn garbage_lines_cost_only_themselves() {
    let (_root, mut a) = agent(&[
        (
            "proc/stat",
            "cpu  1 2 3\ncpuX 1 2\ncpu0 x y z\nintr\nctxt notanumber\nprocesses 5\n\0\0\n",
        ),
        ("proc/loadavg", "garbage\n"),
        ("proc/meminfo", "MemTotal: lots kB\nMemFree: 10 kB\n:::\n"),
        ("proc/net/dev", "x\ny\nnocolon\n eth0: 1 2\n"),
    ]);
    a.expect(
        "kernel.all.cpu.user 10
        kernel.all.pswitch -
        kernel.all.sysfork 5",
    );
    assert_eq!(fetch(&mut a, "kernel.all.load"), vec![]);
    a.expect(
        "mem.physmem -
        mem.util.free 10
        network.interface.in.packets eth0=2",
    );
}

#[test]
fn pmns_merges_with_other_agents_files() {
    let foo = "root { foo }\nfoo { version 44:0:1 count 44:*:* }\n";
    let pmns = LinuxAgent::pmns();
    let ns = Namespace::from_pmns(&[("linux", &pmns), ("foo", foo)]).unwrap();
    let top: Vec<String> = ns
        .children("", None)
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert!(top.contains(&"foo".to_string()) && top.contains(&"kernel".to_string()));
    assert_eq!(
        ns.lookup("kernel.all.load", None).unwrap().to_string(),
        "60.2.0"
    );
}

/// A tree listing more instances than an indom may hold (70,000 semaphore sets): the
/// metric answers the first 65,536, in order, and the cut is reported once however often
/// it is fetched.
#[test]
fn an_indom_never_exceeds_the_instance_limit() {
    let sets = 70_000;
    let mut text = String::from("key semid perms nsems uid gid cuid cgid otime ctime\n");
    for id in 0..sets {
        text.push_str(&format!("0 {id} 600 {} 0 0 0 0 0 0\n", id % 250));
    }
    let (_dir, mut a) = agent(&[("proc/sysvipc/sem", &text)]);
    let limit = crate::linux::rows::MAX_INSTANCES;
    assert!(sets > limit);
    for _ in 0..2 {
        let nsems = fetch_f64(&mut a, "ipc.sem.nsems");
        assert_eq!(nsems.len(), limit);
        assert_eq!(nsems[251], ("251".into(), 1.0));
        assert_eq!(nsems.last().unwrap().0, (limit - 1).to_string());
    }
    assert_eq!(a.cut_indoms(), [30]);
}
