//! The bundled agents written in C (`nfsclient`) and Python (`slurm`), named by their bare
//! names in a daemon's config and built from the sources embedded in the binary on first use:
//! slurm on a Slurm node's cgroup v2 tree, both on hostile trees (the agent answers what it
//! can, the daemon and its other agents are untouched), and the error a missing toolchain
//! gives. nfsclient against PCP's own pmdanfsclient is in `pcp::nfsclient`.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{DaemonProcess, NO_PROCFS, config_file};

fn fixtures() -> std::path::PathBuf {
    super::repo().join("tests/fixtures")
}

/// `/api/fetch?name=NAME`: its values as instance -> value.
fn fetch(d: &DaemonProcess, name: &str) -> serde_json::Map<String, Value> {
    let v: Value = d
        .get(&format!("/api/fetch?name={name}"))
        .unwrap()
        .json()
        .unwrap();
    let mut out = serde_json::Map::new();
    for pair in v[0]["values"].as_array().unwrap_or(&vec![]) {
        out.insert(pair[0].as_str().unwrap().to_string(), pair[1].clone());
    }
    out
}

/// Builds the bundled slurm agent into the tests' cache with `wasmon guest prepare` (which
/// installs componentize-py there when missing), once per run.
pub(crate) fn prepare_slurm() {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        super::ensure_system_toolchain("python");
        let mut cmd = super::wasmon();
        super::cache_env(&mut cmd);
        let out = super::run(cmd.args(["guest", "prepare", "slurm"]));
        assert!(
            out.status.success(),
            "wasmon guest prepare slurm: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// A daemon running the bundled `slurm` agent on `host` granted as /sys/fs/cgroup and a
/// directory whose `online` holds `online` as /sys/devices/system/cpu (its domain and PMNS its
/// own), with foo beside it.
fn slurm_daemon(dir: &Path, host: &Path, online: &str) -> DaemonProcess {
    prepare_slurm();
    let cpu = dir.join("cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(cpu.join("online"), online).unwrap();
    let config = config_file(
        dir,
        &format!(
            r#"{NO_PROCFS}
[[agent]]
name = "slurm"
guest = "slurm"
deadline = "2s"
memory = "256MiB"
grants = {{ dirs = [{{ host = "{}", guest = "/sys/fs/cgroup" }}, {{ host = "{}", guest = "/sys/devices/system/cpu" }}] }}

[[agent]]
name = "foo"
guest = "foo"
"#,
            host.display(),
            cpu.display()
        ),
    );
    DaemonProcess::start_with(&config, super::cache_env)
}

/// The value cc-metric-collector's `slurm_cgroup` computes from the same cpu.stat: user or
/// system µs * 100 / usage µs, 0 while usage is 0.
fn percent(part: f64, usage: f64) -> f64 {
    if usage > 0.0 {
        part * 100.0 / usage
    } else {
        0.0
    }
}

#[test]
fn slurm_reports_each_job_of_a_slurm_nodes_cgroup_tree_as_cc_metric_collector_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = slurm_daemon(dir.path(), &fixtures().join("slurm/node"), "0-23\n");

    // job_<id> and SLUID directories are jobs; job_notanumber, step_batch and system are not.
    assert_eq!(fetch(&d, "slurm.jobs")[""], json!(4));
    let used = fetch(&d, "slurm.job.memory.used");
    assert_eq!(
        used.keys().collect::<Vec<_>>(),
        ["4201", "4202", "4203", "s0F3KQ8VZ2M4NX"]
    );
    assert_eq!(used["4201"], json!(8589934592u64));
    assert_eq!(used["s0F3KQ8VZ2M4NX"], json!(536870912));
    let peak = fetch(&d, "slurm.job.memory.peak");
    assert_eq!(peak["4201"], json!(12884901888u64));
    assert!(
        !peak.contains_key("4203"),
        "no memory.peak (Linux < 5.19): no value"
    );
    let limit = fetch(&d, "slurm.job.memory.limit");
    assert_eq!(limit["4201"], json!(17179869184u64));
    assert_eq!(
        limit["4202"],
        json!(0),
        "memory.max `max` is 0, as cc-metric-collector says"
    );

    let usage = fetch(&d, "slurm.job.cpu.usage");
    let user = fetch(&d, "slurm.job.cpu.user");
    let system = fetch(&d, "slurm.job.cpu.system");
    assert_eq!(
        (&usage["4201"], &user["4201"], &system["4201"]),
        (
            &json!(7321599142u64),
            &json!(6904311870u64),
            &json!(417287272)
        )
    );
    let user_pct = fetch(&d, "slurm.job.cpu.user_percent");
    let sys_pct = fetch(&d, "slurm.job.cpu.system_percent");
    for job in ["4201", "4202", "4203", "s0F3KQ8VZ2M4NX"] {
        let u = usage[job].as_f64().unwrap();
        let want_user = percent(user[job].as_f64().unwrap(), u);
        let want_sys = percent(system[job].as_f64().unwrap(), u);
        assert!(
            (user_pct[job].as_f64().unwrap() - want_user).abs() < 1e-9,
            "{job}"
        );
        assert!(
            (sys_pct[job].as_f64().unwrap() - want_sys).abs() < 1e-9,
            "{job}"
        );
    }
    assert_eq!(user_pct["4203"], json!(0.0), "usage_usec 0: 0 %");

    let cpus = fetch(&d, "slurm.job.cpus");
    let cpuset = fetch(&d, "slurm.job.cpuset");
    assert_eq!((&cpus["4201"], &cpuset["4201"]), (&json!(8), &json!("0-7")));
    assert_eq!(
        (&cpus["4202"], &cpuset["4202"]),
        (&json!(6), &json!("8-11,16,18"))
    );
    assert_eq!(cpus["4203"], json!(1));
    // Each job's hardware threads (JOB:cpuN), and how many jobs hold each online thread:
    // what the ClusterCockpit profile splits job figures over (slurm_cgroup).
    let threads = fetch(&d, "slurm.job.hwthread");
    assert_eq!(threads.len(), 8 + 6 + 1 + 4, "{threads:?}");
    assert_eq!(threads["4202:cpu16"], json!(16));
    assert_eq!(threads["s0F3KQ8VZ2M4NX:cpu23"], json!(23));
    assert!(!threads.contains_key("4202:cpu17"));
    let held = fetch(&d, "slurm.hwthread.jobs");
    assert_eq!(held.len(), 24, "{held:?}");
    assert_eq!(
        (
            &held["cpu0"],
            &held["cpu12"],
            &held["cpu17"],
            &held["cpu19"]
        ),
        (&json!(1), &json!(1), &json!(0), &json!(0))
    );

    // io.stat summed over its devices.
    assert_eq!(
        fetch(&d, "slurm.job.io.read_bytes")["4201"],
        json!(1207959552u64 + 4096)
    );
    assert_eq!(
        fetch(&d, "slurm.job.io.write_ops")["4201"],
        json!(8704000 + 2)
    );
    assert_eq!(fetch(&d, "slurm.job.io.read_ops")["4203"], json!(0));

    // The descriptors the daemon serves are the agent's own.
    let desc: Value = d
        .get("/api/ns/lookup?name=slurm.job.cpu.usage")
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(desc[0]["pmid"], "490.1.4", "{desc}");
}

#[test]
fn slurm_on_a_hostile_cgroup_tree_answers_what_it_can_and_the_daemon_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("cg/system.slice/slurmstepd.scope");
    let job = |n: u32| {
        let d = base.join(format!("job_{n}"));
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    // A sound job beside the hostile ones.
    let good = job(1);
    std::fs::write(good.join("memory.current"), "4096\n").unwrap();
    std::fs::write(
        good.join("cpu.stat"),
        "usage_usec 100\nuser_usec 75\nsystem_usec 25\n",
    )
    .unwrap();
    // Words where numbers belong.
    let words = job(2);
    std::fs::write(words.join("memory.current"), "lots\n").unwrap();
    std::fs::write(words.join("cpu.stat"), "usage_usec many\nuser_usec -5\n").unwrap();
    std::fs::write(words.join("cpuset.cpus"), "0-999999999\n").unwrap();
    std::fs::write(
        words.join("io.stat"),
        "8:0 rbytes=x wbytes=7 rios= wios=1\n",
    )
    .unwrap();
    // A 100 MB memory.current (sparse) and a symlink loop for cpu.stat.
    let big = job(3);
    std::fs::File::create(big.join("memory.current"))
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    std::os::unix::fs::symlink("cpu.stat", big.join("cpu.stat")).unwrap();
    // A job directory that is a link out of the grant.
    std::os::unix::fs::symlink("/etc", base.join("job_4")).unwrap();
    // Hundreds of empty jobs.
    for n in 100..400 {
        job(n);
    }

    // An online list with a word in it.
    let d = slurm_daemon(dir.path(), &dir.path().join("cg"), "0-3,four\n");
    assert_eq!(
        fetch(&d, "slurm.jobs")[""],
        json!(303),
        "jobs 1-3 and 300 empty ones; job_4 (a link out of the grant) is no job"
    );
    let used = fetch(&d, "slurm.job.memory.used");
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used["1"], json!(4096));
    assert_eq!(fetch(&d, "slurm.job.cpu.user_percent")["1"], json!(75.0));
    assert!(!fetch(&d, "slurm.job.cpu.usage").contains_key("2"));
    assert!(
        !fetch(&d, "slurm.job.cpus").contains_key("2"),
        "a range no machine has"
    );
    assert_eq!(
        fetch(&d, "slurm.job.io.write_bytes")["2"],
        json!(7),
        "the numbers of a bad io.stat line that are numbers"
    );
    assert!(
        fetch(&d, "slurm.hwthread.jobs").is_empty(),
        "an online list that does not parse: no threads"
    );
    assert!(
        fetch(&d, "slurm.job.hwthread")
            .keys()
            .all(|k| !k.starts_with("2:")),
        "no threads for a cpuset no machine has"
    );
    // The other agent and the daemon answer as ever.
    assert!(fetch(&d, "foo.count.ops").contains_key(""));
    assert_eq!(d.get("/api/healthcheck").unwrap().status(), 200);
}

/// The mixed fixture's /home block as mount `i` (`/m/i`).
fn nfs_mount(block: &str, i: usize) -> String {
    block.replacen(" mounted on /home ", &format!(" mounted on /m/{i:05} "), 1)
}

/// A daemon running the bundled nfsclient on `dir` granted as /proc/self, with foo beside it.
fn nfsclient_daemon(dir: &Path, mountstats_dir: &Path) -> DaemonProcess {
    let more = "[[agent]]\nname = \"foo\"\nguest = \"foo\"\n";
    crate::pcp::nfsclient::wasmon_nfsclient(dir, mountstats_dir, "/proc/self", more).0
}

#[test]
fn nfsclient_on_hostile_mountstats_answers_what_it_can_within_its_limits() {
    let mixed = std::fs::read_to_string(fixtures().join("nfsclient/mixed/mountstats")).unwrap();
    let start = mixed.find("device home.hpc.example").unwrap();
    let end = mixed[start..].find("\n\n").unwrap() + start + 2;
    let home = &mixed[start..end];
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("proc");
    std::fs::create_dir(&stats).unwrap();
    let file = stats.join("mountstats");

    // No file: no instances, and no error.
    let d = nfsclient_daemon(dir.path(), &stats);
    assert!(fetch(&d, "nfsclient.age").is_empty());

    // 10,000 NFS mounts (26 MB): the first 512 within the default deadline (100 ms) and
    // memory (64 MiB), and a log line.
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&nfs_mount(home, i));
    }
    std::fs::write(&file, &text).unwrap();
    let age = fetch(&d, "nfsclient.age");
    assert_eq!(age.len(), 512);
    assert_eq!(age["/m/00511"], json!(864211));
    let reads = fetch(&d, "nfsclient.ops.read.ops");
    assert_eq!(reads.len(), 512);
    d.wait_for("the log line", || {
        d.stderr
            .lock()
            .unwrap()
            .contains("more than 512 NFS mounts")
    });

    // Malformed lines: a short events line, a word among the bytes, a cut xprt line, a word in
    // a per-op row, a 20,000-byte line, binary bytes, and a file cut in the middle of a row.
    let mut bad = String::new();
    for (i, mutate) in [
        ("\tevents:\t", "\tevents:\t1 2 3\n\tignored:\t"),
        ("\tbytes:\t", "\tbytes:\t12x "),
        ("\txprt:\trdma 0 0 1 0", "\txprt:\trdma 0 0\n\tignored:\t"),
        ("READ: ", "READ: 1 2 three "),
    ]
    .iter()
    .enumerate()
    {
        bad.push_str(&nfs_mount(home, i).replace(mutate.0, mutate.1));
    }
    bad.push_str(&format!("\topts:\t{}\n", "x".repeat(20_000)));
    bad.push_str("\u{1}\u{2}\u{7f}garbage\n");
    bad.push_str(&nfs_mount(home, 4));
    let cut = bad.rfind("GETATTR: ").unwrap() + 12;
    std::fs::write(&file, &bad.as_bytes()[..cut]).unwrap();

    let mounts = ["/m/00000", "/m/00001", "/m/00002", "/m/00003", "/m/00004"];
    assert_eq!(
        fetch(&d, "nfsclient.export").keys().collect::<Vec<_>>(),
        mounts,
        "every mount is still an instance"
    );
    let has = |name: &str| fetch(&d, name).keys().cloned().collect::<Vec<_>>();
    let but = |skip: &str| {
        mounts
            .iter()
            .filter(|m| **m != skip)
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        has("nfsclient.events.vfsopen"),
        but("/m/00000"),
        "short events line"
    );
    assert_eq!(
        has("nfsclient.bytes.read.normal"),
        but("/m/00001"),
        "a word among the bytes"
    );
    assert_eq!(
        has("nfsclient.xprt.sends"),
        but("/m/00002"),
        "a cut xprt line"
    );
    assert_eq!(
        has("nfsclient.ops.read.ops"),
        but("/m/00003"),
        "a word in the READ row"
    );
    assert_eq!(
        has("nfsclient.ops.write.ops"),
        mounts,
        "the rows after it are read"
    );
    assert_eq!(
        has("nfsclient.ops.getattr.ops"),
        but("/m/00004"),
        "the row the file ends in"
    );
    assert_eq!(fetch(&d, "nfsclient.age")["/m/00004"], json!(864211));
    d.wait_for("the log line", || {
        d.stderr.lock().unwrap().contains("malformed line(s)")
    });
    // The other agent and the daemon answer as ever.
    assert!(fetch(&d, "foo.count.ops").contains_key(""));
    assert_eq!(d.get("/api/healthcheck").unwrap().status(), 200);
}

#[test]
fn a_python_agent_not_built_yet_names_the_command_that_builds_it() {
    let empty = tempfile::tempdir().unwrap();
    let out = super::run(
        super::wasmon()
            .env("WASMON_TOOLCHAINS", empty.path().join("toolchains"))
            .env("XDG_CACHE_HOME", empty.path().join("cache"))
            .args([
                "ns",
                "lookup",
                "slurm.jobs",
                "--pmns",
                "/dev/null",
                "--agent",
                "490=slurm",
            ]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bundled guest `slurm` is written in python")
            && err.contains("wasmon guest prepare slurm")
            && err.contains("componentize-py 0.25.1"),
        "{err}"
    );
}

/// The default config lists slurm (and nfsclient) behind `when-present`: on a node where the
/// path exists but `wasmon guest prepare slurm` has not been run, that agent is not run, the
/// log says so with the command that builds it, and the daemon and its other agents run; once
/// the component is there (here: built, in guests-dir), a reload runs it. (Without
/// `when-present` the same agent is an error: the entry asked for it.)
#[test]
fn a_gated_python_agent_not_built_yet_is_logged_and_the_daemon_runs_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    let job = dir.path().join("cg/system.slice/slurmstepd.scope/job_7");
    std::fs::create_dir_all(&job).unwrap();
    std::fs::write(job.join("memory.current"), "4096\n").unwrap();
    let guests = dir.path().join("guests");
    std::fs::create_dir_all(&guests).unwrap();
    let config = config_file(
        dir.path(),
        &format!(
            r#"guests-dir = "{}"
{NO_PROCFS}
[[agent]]
name = "slurm"
guest = "slurm"
deadline = "2s"
memory = "256MiB"
when-present = "/sys/fs/cgroup/system.slice/slurmstepd.scope"
grants = {{ dirs = [{{ host = "{}", guest = "/sys/fs/cgroup" }}] }}

[[agent]]
name = "foo"
guest = "foo"
"#,
            guests.display(),
            dir.path().join("cg").display()
        ),
    );
    let no_toolchain = |c: &mut std::process::Command| {
        c.env("WASMON_TOOLCHAINS", empty.join("toolchains"))
            .env("XDG_CACHE_HOME", empty.join("cache"));
    };
    let d = DaemonProcess::start_with(&config, no_toolchain);
    let log = d.stderr.lock().unwrap().clone();
    assert!(
        log.contains("agent \"slurm\" not run")
            && log.contains("wasmon guest prepare slurm")
            && log.contains("ERROR"),
        "{log}"
    );
    assert!(fetch(&d, "foo.count.ops").contains_key(""));
    assert!(
        fetch(&d, "slurm.jobs").is_empty(),
        "no slurm agent, no value"
    );
    assert_eq!(d.get("/api/healthcheck").unwrap().status(), 200);

    // The component appears (built elsewhere: `wasmon guest build`, or the tests' prepare):
    // a reload runs the agent.
    prepare_slurm();
    std::fs::copy(
        super::work().join("cache/wasmon/bundled/slurm.wasm"),
        guests.join("slurm.wasm"),
    )
    .unwrap();
    d.reload();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while fetch(&d, "slurm.jobs").get("").is_none() {
        assert!(
            std::time::Instant::now() < end,
            "slurm not run after the reload:\n{}",
            d.stderr.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert_eq!(fetch(&d, "slurm.jobs")[""], json!(1));
    assert_eq!(fetch(&d, "slurm.job.memory.used")["7"], json!(4096));
    drop(d);
    std::fs::remove_file(guests.join("slurm.wasm")).unwrap();

    // Ungated, the daemon refuses to start, naming the agent and the command.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "when-present = \"/sys/fs/cgroup/system.slice/slurmstepd.scope\"\n",
            "",
        ),
    )
    .unwrap();
    // (`timeout`: a daemon that started anyway would never return.)
    let mut cmd = std::process::Command::new("timeout");
    cmd.arg("60").arg(crate::common::wasmon_bin());
    no_toolchain(&mut cmd);
    let out = super::run(cmd.args(["run", "--config"]).arg(&config));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    // The start's outcome, as JSON: the agents' error names the agent and the command.
    assert!(
        err.contains(r#""agents_error": "agent \"slurm\""#)
            && err.contains("wasmon guest prepare slurm"),
        "{err}"
    );
}
