//! Tests of the linux agent: against this machine's real /proc (compared with what the files
//! say), against a fake /proc with known contents, and its pmns text against its table.
//! Test-only.

use super::*;
use crate::namespace::tree::Namespace;

/// One metric's values as numbers (their PCP types are checked apart).
fn fetch1(a: &mut LinuxAgent, name: &str) -> Vec<(String, f64)> {
    let id = a.lookup_name(name).unwrap();
    let mut r = a.fetch(&[id]);
    let values = r.pop().unwrap().1.unwrap_or_else(|e| panic!("{name}: {e}"));
    values
        .into_iter()
        .map(|(n, v)| (n, v.as_f64().unwrap()))
        .collect()
}

fn proc_file(rel: &str) -> String {
    std::fs::read_to_string(format!("/proc/{rel}")).unwrap()
}

#[test]
fn pmns_text_matches_the_table() {
    let ns = Namespace::from_pmns(&[("linux", LINUX_PMNS)]).unwrap();
    let mut listed = ns.traverse("", None).unwrap().names;
    let mut table: Vec<String> = DEFS.iter().map(|d| d.name.to_string()).collect();
    listed.sort();
    table.sort();
    assert_eq!(listed, table);
    for def in DEFS {
        assert_eq!(ns.lookup(def.name, None), Ok(pmid_of(def)), "{}", def.name);
    }
    assert_eq!(
        ns.lookup("kernel.all.load", None).unwrap().to_string(),
        "60.2.0"
    );
    assert_eq!(
        ns.lookup("mem.util.available", None).unwrap().to_string(),
        "60.1.58"
    );
    assert_eq!(
        ns.lookup("kernel.percpu.cpu.user", None)
            .unwrap()
            .to_string(),
        "60.0.0"
    );
    assert_eq!(
        ns.lookup("network.interface.in.bytes", None)
            .unwrap()
            .to_string(),
        "60.3.0"
    );
}

#[test]
fn every_meminfo_key_used_is_parsed() {
    for def in DEFS {
        if let Src::Mem(key, _) = def.src {
            assert!(
                MEM_KEYS.contains(&key),
                "{}: {key} missing from MEM_KEYS",
                def.name
            );
        }
    }
}

#[test]
fn namespace_callbacks_agree_with_the_pmns() {
    let mut a = LinuxAgent::new();
    assert_eq!(a.lookup_name("kernel.all"), Err(NsError::NonLeaf));
    assert_eq!(
        a.lookup_name("kernel.all.nosuch"),
        Err(NsError::UnknownName)
    );
    let id = a.lookup_name("mem.physmem").unwrap();
    assert_eq!(a.names_of(id), Ok(vec!["mem.physmem".to_string()]));
    assert_eq!(
        a.names_of(Pmid {
            domain: 60,
            cluster: 99,
            item: 0
        }),
        Err(NsError::UnknownPmid)
    );
    let kids = a.children("kernel.percpu.cpu").unwrap();
    assert!(kids.contains(&Child {
        name: "user".into(),
        leaf: true
    }));
    assert!(kids.contains(&Child {
        name: "wait".into(),
        leaf: false
    }));
    let top: Vec<String> = a
        .children("")
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(top, ["hinv", "kernel", "mem", "network"]);
    let idle = a.lookup_name("kernel.percpu.cpu.idle").unwrap();
    let desc = a.describe(idle).unwrap();
    assert_eq!(
        (desc.semantics, desc.units.as_str(), desc.indom),
        (Semantics::Counter, "millisec", Some(CPU_INDOM))
    );
    let r = a.fetch(&[Pmid {
        domain: 60,
        cluster: 99,
        item: 0,
    }]);
    assert_eq!(r[0].1, Err(NsError::UnknownPmid));
}

#[test]
fn load_average_matches_proc_loadavg() {
    let mut a = LinuxAgent::new();
    // /proc/loadavg changes every 5 s: accept what it said just before or just after.
    let before = parse_loadavg(&proc_file("loadavg")).unwrap();
    let v = fetch1(&mut a, "kernel.all.load");
    let after = parse_loadavg(&proc_file("loadavg")).unwrap();
    let names: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["1 minute", "5 minute", "15 minute"]);
    for (i, (_, x)) in v.iter().enumerate() {
        assert!(
            *x == before[i] || *x == after[i],
            "{x} vs {} / {}",
            before[i],
            after[i]
        );
    }
}

#[test]
fn memory_matches_proc_meminfo() {
    let mut a = LinuxAgent::new();
    let meminfo = proc_file("meminfo");
    let line = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .unwrap();
    let total: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(total > 0.0);
    assert_eq!(fetch1(&mut a, "mem.physmem"), vec![(String::new(), total)]);
    assert_eq!(
        fetch1(&mut a, "hinv.physmem"),
        vec![(String::new(), (total / 1024.0).trunc())]
    );
    for name in [
        "mem.util.free",
        "mem.util.available",
        "mem.util.cached",
        "mem.util.used",
    ] {
        let v = fetch1(&mut a, name)[0].1;
        assert!(v >= 0.0 && v <= total, "{name} = {v}, total {total}");
    }
}

#[test]
fn cpu_times_per_cpu_and_all() {
    let mut a = LinuxAgent::new();
    let stat = proc_file("stat");
    let ncpu = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    assert!(ncpu >= 1);
    assert_eq!(
        fetch1(&mut a, "hinv.ncpu"),
        vec![(String::new(), ncpu as f64)]
    );
    let first = fetch1(&mut a, "kernel.percpu.cpu.idle");
    let names: Vec<String> = first.iter().map(|(n, _)| n.clone()).collect();
    let expect: Vec<String> = stat
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|k| k.starts_with("cpu") && *k != "cpu")
        .map(String::from)
        .collect();
    assert_eq!(names, expect);
    // Counters: never go backwards; ms = ticks * 10.
    let user0 = fetch1(&mut a, "kernel.all.cpu.user")[0].1;
    let spin = std::time::Instant::now();
    while spin.elapsed() < std::time::Duration::from_millis(50) {
        std::hint::black_box(0u64);
    }
    let user1 = fetch1(&mut a, "kernel.all.cpu.user")[0].1;
    assert!(
        user1 >= user0 && user0 > 0.0 && user0 % 10.0 == 0.0,
        "{user0} {user1}"
    );
    let second = fetch1(&mut a, "kernel.percpu.cpu.idle");
    for ((_, x0), (_, x1)) in first.iter().zip(&second) {
        assert!(x1 >= x0);
    }
}

#[test]
fn network_interfaces_match_proc_net_dev() {
    let mut a = LinuxAgent::new();
    let dev = parse_netdev(&proc_file("net/dev"));
    let got = fetch1(&mut a, "network.interface.in.bytes");
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    let expect: Vec<&str> = dev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, expect);
    for ((_, v), (_, before)) in got.iter().zip(&dev) {
        assert!(*v >= before[0]);
    }
}

/// A fake /proc with known contents: exact values, units conversions, one read per file.
#[test]
fn fake_proc_exact_values() {
    let root = std::env::temp_dir().join(format!("wasmon-linux-{}", std::process::id()));
    let proc = root.join("proc");
    std::fs::create_dir_all(proc.join("net")).unwrap();
    let w = |rel: &str, s: &str| std::fs::write(proc.join(rel), s).unwrap();
    w(
        "stat",
        "cpu  100 2 30 4000 5 0 0 0 0 0\ncpu0 60 1 20 2000 3 0 0 0 0 0\ncpu1 40 1 10 2000 2 0 0 0 0 0\nintr 12345 1 2\nctxt 777\nbtime 1\nprocesses 42\n",
    );
    w("loadavg", "0.50 1.25 2.00 3/456 789\n");
    w(
        "meminfo",
        "MemTotal:       2048000 kB\nMemFree:         512000 kB\nMemAvailable:   1024000 kB\nCached:          100 kB\n",
    );
    w(
        "net/dev",
        "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\n  eth0: 5000 50 1 2 0 0 0 0 7000 70 3 4 0 0 0 0\n",
    );
    w("uptime", "12345.67 999.00\n");
    let mut a = LinuxAgent::with_root(&root);
    let s = |v: f64| vec![(String::new(), v)];
    assert_eq!(fetch1(&mut a, "kernel.all.cpu.user"), s(1000.0));
    assert_eq!(fetch1(&mut a, "kernel.all.cpu.wait.total"), s(50.0));
    assert_eq!(
        fetch1(&mut a, "kernel.percpu.cpu.sys"),
        vec![("cpu0".into(), 200.0), ("cpu1".into(), 100.0)]
    );
    assert_eq!(fetch1(&mut a, "kernel.all.intr"), s(12345.0));
    assert_eq!(fetch1(&mut a, "kernel.all.pswitch"), s(777.0));
    assert_eq!(fetch1(&mut a, "kernel.all.sysfork"), s(42.0));
    assert_eq!(fetch1(&mut a, "hinv.ncpu"), s(2.0));
    assert_eq!(
        fetch1(&mut a, "kernel.all.load")[1],
        ("5 minute".into(), 1.25)
    );
    assert_eq!(fetch1(&mut a, "kernel.all.runnable"), s(3.0));
    assert_eq!(fetch1(&mut a, "kernel.all.nprocs"), s(456.0));
    assert_eq!(fetch1(&mut a, "kernel.all.uptime"), s(12345.0));
    assert_eq!(fetch1(&mut a, "mem.util.used"), s(1536000.0));
    assert_eq!(fetch1(&mut a, "mem.util.available"), s(1024000.0));
    assert_eq!(fetch1(&mut a, "hinv.physmem"), s(2000.0));
    assert_eq!(
        fetch1(&mut a, "network.interface.out.errors")[1],
        ("eth0".into(), 3.0)
    );
    assert_eq!(
        fetch1(&mut a, "network.interface.total.bytes"),
        vec![("lo".into(), 2000.0), ("eth0".into(), 12000.0)]
    );
    // A key the file lacks is an error for that metric only.
    let ids = [
        a.lookup_name("mem.util.slab").unwrap(),
        a.lookup_name("mem.util.cached").unwrap(),
    ];
    let r = a.fetch(&ids);
    assert!(matches!(&r[0].1, Err(NsError::Other(m)) if m.contains("Slab")));
    // Values take their metric's type: a 64-bit counter is an integer, a load a real.
    assert_eq!(r[1].1, Ok(vec![(String::new(), Value::Uint(100))]));
    let id = a.lookup_name("kernel.all.load").unwrap();
    assert_eq!(a.describe(id).unwrap().value_type, ValueType::Float);
    assert_eq!(a.fetch(&[id])[0].1.as_ref().unwrap()[0].1, Value::Real(0.5));
    std::fs::remove_dir_all(&root).unwrap();
    // A missing /proc is an error per metric, not a panic.
    let mut gone = LinuxAgent::with_root(&root);
    let id = gone.lookup_name("kernel.all.load").unwrap();
    assert!(matches!(&gone.fetch(&[id])[0].1, Err(NsError::Other(_))));
}

/// The linux pmns merged with another agent's file: static linux names resolve without any
/// agent, the dynamic subtree goes to its agent, and the linux agent fetches what the
/// namespace resolved.
#[test]
fn merged_with_other_pmns_files() {
    let foo = "root { foo }\nfoo { version 44:0:1 count 44:*:* }\n";
    let ns = Namespace::from_pmns(&[("linux", LINUX_PMNS), ("foo", foo)]).unwrap();
    let top: Vec<String> = ns
        .children("", None)
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(top, ["hinv", "kernel", "mem", "network", "foo"]);
    let mut none: std::collections::HashMap<u32, Box<dyn Agent>> = std::collections::HashMap::new();
    let id = ns.lookup("kernel.all.load", Some(&mut none)).unwrap();
    assert_eq!(
        ns.lookup("foo.count.x", Some(&mut none)),
        Err(NsError::NoAgent)
    );
    let mut a = LinuxAgent::new();
    let r = a.fetch(&[id]);
    assert_eq!(r[0].1.as_ref().unwrap().len(), 3);
    assert_eq!(
        ns.names_of(id, None),
        Ok(vec!["kernel.all.load".to_string()])
    );
}
