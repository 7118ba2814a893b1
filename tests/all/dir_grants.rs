//! Read-only directory grants (`grants.dirs`) as a guest sees them, on real files: procfs and
//! sysfs of this machine, and trees built here with FIFOs, device nodes, symlink loops, links
//! out of the grant and a 100 MB file. The `fsprobe` agent tries each operation inside the
//! sandbox and reports what happened.

use std::path::Path;
use std::time::Duration;

use wasmon::host::agent_types::{Atom, Pmid};
use wasmon::host::{AgentInstance, AgentWorld, CallError, GuestConfig, Image};

use crate::common::*;

const DOMAIN: u32 = 250;
const RESULT: Pmid = Pmid {
    domain: DOMAIN,
    cluster: 0,
    item: 0,
};
const SPIN: Pmid = Pmid {
    domain: DOMAIN,
    cluster: 0,
    item: 1,
};

/// `fsprobe` with `ops`, granted each (host, guest) directory read-only.
fn probe(grants: &[(&Path, &str)], ops: &[String], deadline: Duration) -> AgentInstance {
    let rt = runtime();
    let compiled = rt.compile(&guest_bytes("fsprobe"), "fsprobe").unwrap();
    let params = serde_json::json!({"domain": DOMAIN, "ops": ops});
    let mut cfg = GuestConfig::new("fsprobe", &params.to_string());
    cfg.deadline = deadline;
    cfg.grants = read_only_grants(grants);
    Image::<AgentWorld>::load(&rt, &compiled, cfg).unwrap()
}

/// Each op's outcome, in order.
fn outcomes(p: &mut AgentInstance) -> Vec<String> {
    let sets = p.fetch(&[RESULT]).unwrap();
    sets[0]
        .values
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| match &v.value {
            Atom::Text(t) => t.clone(),
            other => panic!("a text outcome, got {other:?}"),
        })
        .collect()
}

fn ops(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Long enough that an open or read that blocks shows up as a deadline error, not as slowness.
const PATIENT: Duration = Duration::from_secs(10);

#[test]
fn procfs_files_of_size_zero_read_in_full_and_proc_self_is_followed() {
    let proc = Path::new("/proc");
    assert_eq!(std::fs::metadata("/proc/version").unwrap().len(), 0);
    let mut p = probe(
        &[(proc, "/proc")],
        &ops(&["head:/proc/version", "read:/proc/self/cmdline"]),
        PATIENT,
    );
    let got = outcomes(&mut p);
    // /proc/self -> PID is a relative link inside the grant.
    assert_version_and_cmdline(&got);
}

/// `got[0]`: `/proc/version` read whole (its size is 0); `got[1]`: `/proc/self/cmdline`, the
/// daemon's process, here the test binary, whose command line is stable.
fn assert_version_and_cmdline(got: &[String]) {
    let version = std::fs::read_to_string("/proc/version").unwrap();
    assert_eq!(got[0], format!("ok {} {version}", version.len()));
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap();
    assert_eq!(got[1], format!("ok {}", cmdline.len()));
}

#[test]
fn sysfs_class_links_inside_the_grant_are_followed() {
    let sys = Path::new("/sys");
    let link = std::fs::read_link("/sys/class/net/lo").unwrap();
    assert!(link.starts_with("../../devices"), "{link:?}");
    let mut p = probe(
        &[(sys, "/sys")],
        &ops(&[
            "head:/sys/class/net/lo/address",
            "link:/sys/class/net/lo",
            "list:/sys/class/net/lo/statistics",
        ]),
        PATIENT,
    );
    let got = outcomes(&mut p);
    let address = std::fs::read_to_string("/sys/class/net/lo/address").unwrap();
    assert_eq!(got[0], format!("ok {} {address}", address.len()));
    assert_eq!(got[1], format!("ok {}", link.display()));
    assert!(
        got[2].contains("rx_bytes") && got[2].contains("tx_packets"),
        "{}",
        got[2]
    );
}

/// A sysfs-like tree with a class link inside it (`class/infiniband/mlx5_0`, whose `fw_ver`
/// reads `16.35.2000`) and links out of it: an absolute one (`absolute`), one up past the root
/// (`class/past_root`; `class/up` stays inside, where its target does not exist), one to a
/// directory outside (`class/infiniband/evil`), and a loop (`loop_a`). The temporary directories (kept alive with the tree) and the tree.
fn hostile_tree() -> ((tempfile::TempDir, tempfile::TempDir), std::path::PathBuf) {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "secret").unwrap();
    let root = tempfile::tempdir().unwrap();
    let tree = root.path().join("tree");
    std::fs::create_dir_all(tree.join("class/infiniband")).unwrap();
    std::fs::create_dir_all(tree.join("devices/mlx5_0")).unwrap();
    std::fs::write(tree.join("devices/mlx5_0/fw_ver"), "16.35.2000\n").unwrap();
    let ln = |target: &Path, at: &str| std::os::unix::fs::symlink(target, tree.join(at)).unwrap();
    ln(Path::new("../../devices/mlx5_0"), "class/infiniband/mlx5_0");
    ln(&outside.path().join("secret"), "absolute");
    ln(Path::new("../outside-sibling"), "class/up");
    ln(Path::new("../../outside-sibling"), "class/past_root");
    std::fs::write(root.path().join("outside-sibling"), "sibling").unwrap();
    ln(outside.path(), "class/infiniband/evil");
    ln(Path::new("loop_b"), "loop_a");
    ln(Path::new("loop_a"), "loop_b");
    ((outside, root), tree)
}

#[test]
fn no_symlink_leads_out_of_the_grant_and_a_loop_ends() {
    let (_dirs, tree) = hostile_tree();
    let mut p = probe(
        &[(&tree, "/sys"), (Path::new("/proc"), "/proc")],
        &ops(&[
            "head:/sys/class/infiniband/mlx5_0/fw_ver",
            "read:/sys/absolute",
            "read:/sys/class/up",
            "read:/sys/class/infiniband/evil/secret",
            "read:/sys/loop_a",
            "read:/sys/../outside-sibling",
            "list:/proc/self/root",
            "read:/proc/self/root/etc/passwd",
            "read:/proc/self/exe",
        ]),
        PATIENT,
    );
    let got = outcomes(&mut p);
    assert_eq!(got[0], "ok 11 16.35.2000\n");
    for (i, o) in got.iter().enumerate().skip(1) {
        assert!(o.starts_with("err "), "op {i} must fail: {o}");
        assert!(!o.contains("secret") && !o.contains("root:"), "{o}");
    }
    assert!(
        got[4].contains("FilesystemLoop") || got[4].contains("symbolic links"),
        "{}",
        got[4]
    );
}

#[test]
fn nothing_under_a_read_only_grant_can_be_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("counter"), "42\n").unwrap();
    let mut p = probe(
        &[(dir.path(), "/data")],
        &ops(&[
            "write:/data/counter",
            "append:/data/counter",
            "create:/data/counter",
            "create:/data/new",
            "mkdir:/data/sub",
            "remove:/data/counter",
            "head:/data/counter",
        ]),
        PATIENT,
    );
    let got = outcomes(&mut p);
    for o in &got[..6] {
        assert!(o.starts_with("err "), "{o}");
    }
    assert_eq!(got[6], "ok 3 42\n", "reading still works");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("counter")).unwrap(),
        "42\n"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "nothing was created");
}

/// `dir/fifo`, and `dir/zero`, a character device like /dev/zero (1:5) whose reads never end,
/// if this process may make one (root): whether it could.
fn fifo_and_device(dir: &Path) -> bool {
    let c = |name: &str| std::ffi::CString::new(dir.join(name).to_str().unwrap()).unwrap();
    // SAFETY: plain libc calls on NUL-terminated paths of our own temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c("fifo").as_ptr(), 0o600) }, 0);
    let dev = unsafe {
        libc::mknod(
            c("zero").as_ptr(),
            libc::S_IFCHR | 0o600,
            libc::makedev(1, 5),
        )
    };
    dev == 0
}

#[test]
fn a_fifo_or_device_node_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let dev = fifo_and_device(dir.path());
    let mut list = vec!["read:/data/fifo", "head:/data/fifo"];
    if dev {
        list.push("read:/data/zero");
    }
    list.push("read:/dev/null");
    let mut p = probe(
        &[(dir.path(), "/data"), (Path::new("/dev"), "/dev")],
        &ops(&list),
        PATIENT,
    );
    // Without O_NONBLOCK the FIFO's open waits for a writer until the deadline.
    let got = p
        .fetch(&[RESULT])
        .expect("answered, not stuck at the deadline");
    for v in got[0].values.as_ref().unwrap() {
        match &v.value {
            Atom::Text(t) => assert!(t.contains("PermissionDenied"), "{}: {t}", v.instance),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_guest_reading_a_file_in_a_loop_is_stopped_by_its_deadline() {
    stopped_by_the_deadline(&["read:/proc/self/status", "head:/proc/version"]);
}

/// `fsprobe` reading the first of `spin_then_read`'s files in a loop meets its 200 ms
/// deadline, and its next call (the second op) is served.
fn stopped_by_the_deadline(spin_then_read: &[&str]) {
    let mut p = probe(
        &[(Path::new("/proc"), "/proc")],
        &ops(spin_then_read),
        Duration::from_millis(200),
    );
    let err = p.fetch(&[SPIN]).unwrap_err();
    assert!(matches!(err, CallError::Deadline(_)), "{err}");
    let got = outcomes(&mut p);
    assert!(
        got[1].starts_with("ok "),
        "the next call is served: {}",
        got[1]
    );
}

#[test]
fn a_100_mb_file_costs_the_guest_its_memory_cap_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let big = std::fs::File::create(dir.path().join("big")).unwrap();
    big.set_len(100 << 20).unwrap();
    std::fs::write(dir.path().join("small"), "7\n").unwrap();
    let mut p = probe(&[(dir.path(), "/data")], &ops(&["read:/data/big"]), PATIENT);
    // The 64 MiB cap stops a whole read: std's `fs::read` reserves the file's size first and
    // reports the refusal as an error; a guest that grows its buffer as it goes traps.
    match p.fetch(&[RESULT]) {
        Ok(sets) => {
            let v = &sets[0].values.as_ref().unwrap()[0].value;
            assert_eq!(*v, Atom::Text("err OutOfMemory: out of memory".into()));
        }
        Err(e) => assert!(
            matches!(e, CallError::Memory(_) | CallError::Trap(_)),
            "{e}"
        ),
    }
    // A bounded read of the same file is fine.
    let mut p = probe(
        &[(dir.path(), "/data")],
        &ops(&["head:/data/big", "head:/data/small"]),
        PATIENT,
    );
    let got = outcomes(&mut p);
    assert!(got[0].starts_with("ok 4096 "), "{}", &got[0][..20]);
    assert_eq!(got[1], "ok 2 7\n");
}

// The `files` interface (a whole file or a directory's names in one host call, what the SDKs'
// sysfs helpers read through): the same grants, the same rules.

#[test]
fn files_reads_procfs_and_sysfs_as_wasi_does() {
    let mut p = probe(
        &[(Path::new("/proc"), "/proc"), (Path::new("/sys"), "/sys")],
        &ops(&[
            "fsmall:/proc/version",
            "fread:/proc/self/cmdline",
            "fsmall:/sys/class/net/lo/address",
            "flist:/sys/class/net/lo/statistics",
            "flist:/sys/class/net",
        ]),
        PATIENT,
    );
    let got = outcomes(&mut p);
    assert_version_and_cmdline(&got);
    let address = std::fs::read_to_string("/sys/class/net/lo/address").unwrap();
    assert_eq!(got[2], format!("ok {} {address}", address.len()));
    let mut stats: Vec<String> = std::fs::read_dir("/sys/class/net/lo/statistics")
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    stats.sort();
    assert_eq!(got[3], format!("ok {}", stats.join(",")));
    assert!(got[4].split(',').any(|n| n.ends_with("lo")), "{}", got[4]);
}

#[test]
fn files_follows_no_link_out_of_the_grant_and_refuses_what_it_may_not_read() {
    let (_dirs, tree) = hostile_tree();
    let writable = tempfile::tempdir().unwrap();
    std::fs::write(writable.path().join("x"), "x").unwrap();
    let mut grants = read_only_grants(&[(&tree, "/sys"), (Path::new("/proc"), "/proc")]);
    grants.dirs.push(wasmon::host::DirGrant {
        host: writable.path().to_path_buf(),
        guest: "/rw".into(),
        read_only: false,
    });
    let list = ops(&[
        "fsmall:/sys/class/infiniband/mlx5_0/fw_ver",
        "flist:/sys/class/infiniband",
        "fread:/sys/absolute",
        "fread:/sys/class/up",
        "fread:/sys/class/past_root",
        "fread:/sys/class/infiniband/evil/secret",
        "flist:/sys/class/infiniband/evil",
        "fread:/sys/loop_a",
        "fread:/sys/../outside-sibling",
        "flist:/proc/self/root",
        "fread:/proc/self/root/etc/passwd",
        "fread:/proc/self/exe",
        "fread:/sys/devices",
        "flist:/sys/devices/mlx5_0/fw_ver",
        "fread:/sys/nothing",
        "fread:/etc/passwd",
        "fread:/rw/x",
        "fread:sys/class/up",
    ]);
    let rt = runtime();
    let compiled = rt.compile(&guest_bytes("fsprobe"), "fsprobe").unwrap();
    let params = serde_json::json!({"domain": DOMAIN, "ops": list});
    let mut cfg = GuestConfig::new("fsprobe", &params.to_string());
    cfg.deadline = PATIENT;
    cfg.grants = grants;
    let mut p = Image::<AgentWorld>::load(&rt, &compiled, cfg).unwrap();
    let got = outcomes(&mut p);
    assert_eq!(got[0], "ok 11 16.35.2000\n");
    assert_eq!(got[1], "ok evil,mlx5_0");
    assert_eq!(got.len(), list.len());
    let want = [
        "access",
        "no-entry",
        "access",
        "access",
        "access",
        "access",
        "access",
        "access",
        "access",
        "access",
        "wrong-kind",
        "wrong-kind",
        "no-entry",
        // Not under a read-only grant: the guest reads it through WASI, under WASI's rules.
        "elsewhere",
        "elsewhere",
        "elsewhere",
    ];
    for (i, (o, kind)) in got[2..].iter().zip(want).enumerate() {
        assert!(
            *o == format!("err {kind}"),
            "{}: want {kind}, got {o}",
            list[i + 2]
        );
        assert!(!o.contains("secret") && !o.contains("root:"), "{o}");
    }
}

#[test]
fn files_refuses_a_fifo_or_device_node_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let dev = fifo_and_device(dir.path());
    let mut list = vec!["fread:/data/fifo", "flist:/data/fifo", "fsmall:/data/fifo"];
    if dev {
        list.push("fread:/data/zero");
    }
    list.extend(["fread:/dev/null", "fread:/dev/zero"]);
    let mut p = probe(
        &[(dir.path(), "/data"), (Path::new("/dev"), "/dev")],
        &ops(&list),
        PATIENT,
    );
    // Without O_NONBLOCK the FIFO's open waits for a writer until the deadline.
    let got = outcomes(&mut p);
    assert_eq!(got.len(), list.len());
    for (op, o) in list.iter().zip(&got) {
        assert_eq!(o, "err wrong-kind", "{op}");
    }
}

#[test]
fn files_bounds_a_read_and_a_guest_looping_on_it_meets_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let big = std::fs::File::create(dir.path().join("big")).unwrap();
    big.set_len(100 << 20).unwrap();
    std::fs::write(dir.path().join("page"), vec![b'7'; 5000]).unwrap();
    let mut p = probe(
        &[(dir.path(), "/data")],
        &ops(&["fread:/data/big", "fsmall:/data/page", "fread:/data/page"]),
        PATIENT,
    );
    // The host reads at most its cap (16 MiB) plus one byte of the 100 MB file, and the guest
    // gets an error, not 100 MB against its 64 MiB memory cap.
    let got = outcomes(&mut p);
    assert_eq!(got[0], "err too-large");
    assert_eq!(got[1], "err too-large", "max 4096 of a 5000-byte file");
    assert_eq!(got[2], "ok 5000");
    stopped_by_the_deadline(&["fread:/proc/self/status", "fsmall:/proc/version"]);
}
