//! The bundled `lustre` agent on synthesized trees in the shapes Lustre 2.10 (procfs) and 2.15
//! (debugfs) write: pmdalustre's names and PMIDs, the directory it picks, the 0 of a counter
//! not listed yet, and hostile trees (a counter that is not a number, a 100 MB stats file, a
//! stats file that is a symlink loop, 10,000 mounts). Its values against pmdalustre's own on
//! the same tree are in `pcp::lustre`.

use std::collections::BTreeMap;
use std::path::Path;

use wasmon::host::AgentInstance;
use wasmon::host::agent_types::{Atom, Pmid};

use super::{agent_with, one, trees, values};

fn lustre(root: &Path) -> AgentInstance {
    agent_with("lustre", root, &["sys", "proc"])
}

fn u(v: u64) -> Option<Atom> {
    Some(Atom::Uint(v))
}

/// Every PMID of the agent's two clusters (55 llite items, 11 LNet ones).
fn all_ids() -> Vec<Pmid> {
    (1..=55)
        .map(|item| (0, item))
        .chain((1..=11).map(|item| (1, item)))
        .map(|(cluster, item)| Pmid {
            domain: 134,
            cluster,
            item,
        })
        .collect()
}

#[test]
fn lustre_reads_llite_stats_per_file_system_and_prefers_debugfs() {
    let tree = tempfile::tempdir().unwrap();
    trees::lustre_procfs(tree.path());
    let mut l = lustre(tree.path());
    assert_eq!(
        l.lookup_name("lustre.llite.read_bytes.count").unwrap(),
        Ok(Pmid {
            domain: 134,
            cluster: 0,
            item: 3
        }),
        "pmdalustre's PMID"
    );
    assert_eq!(
        values(&mut l, "lustre.llite.volume"),
        BTreeMap::from([
            ("home".to_string(), Atom::Text("home".into())),
            ("scratch".to_string(), Atom::Text("scratch".into())),
        ])
    );
    assert_eq!(
        one(&mut l, "lustre.llite.superblock", "scratch"),
        Some(Atom::Text("ffff9a1bc3e4d000".into()))
    );
    let s = |l: &mut AgentInstance, n: &str| one(l, &format!("lustre.llite.{n}"), "scratch");
    assert_eq!(s(&mut l, "read_bytes.count"), u(1207));
    assert_eq!(s(&mut l, "read_bytes.min"), u(0));
    assert_eq!(s(&mut l, "read_bytes.max"), u(1_048_576));
    assert_eq!(s(&mut l, "read_bytes.total"), u(614_400_000));
    assert_eq!(s(&mut l, "write_bytes.min"), u(7));
    assert_eq!(s(&mut l, "osc_write.total"), u(97_320_960));
    assert_eq!(s(&mut l, "getattr.count"), u(5190));
    assert_eq!(s(&mut l, "inode_permission.count"), u(12003));
    // Not listed (never moved): 0, as pmdalustre reports.
    assert_eq!(s(&mut l, "brw_read.count"), u(0));
    assert_eq!(s(&mut l, "symlink.count"), u(0));
    assert_eq!(
        one(&mut l, "lustre.llite.read_bytes.total", "home"),
        u(9216)
    );
    assert_eq!(one(&mut l, "lustre.llite.getattr.count", "home"), u(0));
    assert_eq!(one(&mut l, "lustre.lnet.send_count", ""), u(98_765_432));
    assert_eq!(one(&mut l, "lustre.lnet.msgs_max", ""), u(512));
    assert_eq!(one(&mut l, "lustre.lnet.drop_length", ""), u(70_000));
    let sets = l.fetch(&all_ids()).unwrap();
    assert!(
        sets.iter()
            .all(|s| s.values.as_ref().is_ok_and(|v| !v.is_empty())),
        "every metric has values: {sets:?}"
    );

    // A debugfs llite directory without its lnet one: still procfs (pmdalustre's rule).
    trees::write(
        tree.path(),
        &[(
            "sys/kernel/debug/lustre/llite/work-ffff8f0e12345000/stats",
            trees::LLITE_2_15,
        )],
    );
    let mut l = lustre(tree.path());
    assert_eq!(values(&mut l, "lustre.llite.volume").len(), 2);
    // Both: debugfs, Lustre 2.15's file (sums of squares, operations in usecs).
    trees::lustre_debugfs(tree.path());
    let mut l = lustre(tree.path());
    let vols = values(&mut l, "lustre.llite.volume");
    assert_eq!(vols.keys().collect::<Vec<_>>(), ["work"]);
    let w = |l: &mut AgentInstance, n: &str| one(l, &format!("lustre.llite.{n}"), "work");
    assert_eq!(w(&mut l, "read_bytes.count"), u(64));
    assert_eq!(w(&mut l, "read_bytes.total"), u(134_217_728));
    assert_eq!(w(&mut l, "write_bytes.max"), u(1_048_576));
    assert_eq!(w(&mut l, "open.count"), u(12), "a timed operation's count");
    assert_eq!(w(&mut l, "inode_permission.count"), u(77));
    assert_eq!(one(&mut l, "lustre.lnet.msgs_alloc", ""), u(1));
    assert_eq!(one(&mut l, "lustre.lnet.recv_length", ""), u(4000));
}

#[test]
fn no_lustre_answers_no_instances_and_no_lnet_value() {
    let empty = tempfile::tempdir().unwrap();
    let mut l = lustre(empty.path());
    for name in [
        "lustre.llite.volume",
        "lustre.llite.open.count",
        "lustre.lnet.send_count",
    ] {
        assert!(values(&mut l, name).is_empty(), "{name}");
    }
}

#[test]
fn hostile_lustre_trees_cost_only_what_they_break() {
    let tree = tempfile::tempdir().unwrap();
    trees::lustre_procfs(tree.path());
    let llite = tree.path().join("proc/fs/lustre/llite");
    // scratch: a count that is not a number, and a sized line with a size that is not.
    let text = trees::LLITE_2_10
        .replace(
            "getattr                   5190",
            "getattr                   lots",
        )
        .replace("[bytes] 7 1048576 97320960", "[bytes] 7 x 97320960");
    std::fs::write(llite.join("scratch-ffff9a1bc3e4d000/stats"), text).unwrap();
    // A 100 MB stats file, a stats file that is a symlink loop, a directory whose name is not
    // VOLUME-SUPERBLOCK, and a stats file that is a FIFO.
    let big = llite.join("huge-ffff000000000001");
    std::fs::create_dir(&big).unwrap();
    std::fs::File::create(big.join("stats"))
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let looped = llite.join("loop-ffff000000000002");
    std::fs::create_dir(&looped).unwrap();
    std::os::unix::fs::symlink("stats", looped.join("stats")).unwrap();
    trees::write(&llite, &[("not-a-mount/stats", "open 1 samples [regs]")]);
    let fifo = llite.join("fifo-ffff000000000003");
    std::fs::create_dir(&fifo).unwrap();
    let c = std::ffi::CString::new(fifo.join("stats").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path of our temporary tree.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // LNet's line cut short.
    std::fs::write(tree.path().join("proc/sys/lnet/stats"), "0 512 3\n").unwrap();

    let mut l = lustre(tree.path());
    assert_eq!(
        values(&mut l, "lustre.llite.volume")
            .keys()
            .collect::<Vec<_>>(),
        ["home", "scratch"],
        "the broken mounts are left out, the others read"
    );
    let s = |l: &mut AgentInstance, n: &str| one(l, &format!("lustre.llite.{n}"), "scratch");
    assert_eq!(s(&mut l, "getattr.count"), None, "not a number: no value");
    for part in ["count", "min", "max", "total"] {
        assert_eq!(s(&mut l, &format!("write_bytes.{part}")), None, "{part}");
    }
    assert_eq!(s(&mut l, "read_bytes.count"), u(1207), "the rest is read");
    assert_eq!(s(&mut l, "open.count"), u(842));
    assert!(values(&mut l, "lustre.lnet.send_count").is_empty());

    // 10,000 mounts: the agent reads 4096 of them (the SDK's bound on a directory listing,
    // in the order the directory gives them) and answers within its deadline, each mount
    // with its own values.
    let many = tempfile::tempdir().unwrap();
    let dir = many.path().join("proc/fs/lustre/llite");
    for i in 0..10_000 {
        let m = dir.join(format!("fs{i:05}-{i:016x}"));
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(m.join("stats"), format!("open {i} samples [regs]\n")).unwrap();
    }
    let mut l = lustre(many.path());
    let t = std::time::Instant::now();
    let sets = l.fetch(&all_ids()).unwrap();
    eprintln!(
        "a fetch of every metric over 10,000 mounts: {:?}",
        t.elapsed()
    );
    let opens = sets[29].values.as_ref().unwrap();
    assert_eq!(opens.len(), 4096);
    for v in opens {
        let n: u64 = v.instance["fs".len()..].parse().unwrap();
        assert_eq!(v.value, Atom::Uint(n), "{}", v.instance);
    }
}
