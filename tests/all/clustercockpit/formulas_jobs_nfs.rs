//! The `clustercockpit` transformer's rows for nfs3stat/nfs4stat (outputs named by instance,
//! `nonzero-input` differences) and slurm_cgroup (`split-cpus`), through the bundled
//! component, with the profile's own rows: samples as the linux and slurm agents' polls send
//! them, cc-metric-collector's samples out.

use serde_json::{Value, json};
use wasmon::sample::Sample;

use super::formulas::one;
use crate::common::*;

/// The profile's rows whose `to` starts with `prefix`.
fn profile_rows(prefix: &str) -> Value {
    let text = wasmon::config::profile("clustercockpit").unwrap();
    let config: Value = toml::from_str(text).unwrap();
    let rows: Vec<Value> = config["pipeline"][0]["transformer"][0]["params"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["to"].as_str().unwrap().starts_with(prefix))
        .cloned()
        .collect();
    assert!(!rows.is_empty(), "the profile has {prefix} rows");
    Value::Array(rows)
}

/// `formulas::seen`, sorted by name and tags (the outputs' order is the samples').
fn seen(out: &[Sample]) -> Vec<(String, String, f64)> {
    let mut v = super::formulas::seen(out);
    v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    v
}

/// nfs3stat/nfs4stat: each operation is a node metric named by nfsstat's name for its column;
/// the difference is sent once two polls in a row counted the operation (nfsstat lists only
/// operations with calls), including a 0 for an unchanged count; PCP's `readdir+` and the
/// NFSv4.1 columns PCP names one off are renamed.
#[test]
fn nfs_operations_are_named_as_nfsstat_names_them_and_sent_once_two_polls_counted_them() {
    let mut rows = profile_rows("nfs3_").as_array().unwrap().clone();
    rows.extend(profile_rows("nfs4_").as_array().unwrap().iter().cloned());
    let mut g = load("clustercockpit", json!({ "metrics": rows })).unwrap();
    let poll = |ts: f64, getattr: f64, plus: f64, mknod: f64, v4: [f64; 3]| {
        vec![
            sample("nfs3.client.calls", "", getattr + plus + mknod, ts),
            sample("nfs3.client.reqs", "getattr", getattr, ts),
            sample("nfs3.client.reqs", "readdir+", plus, ts),
            sample("nfs3.client.reqs", "mknod", mknod, ts),
            sample("nfs3.client.reqs", "null", 0.0, ts),
            sample("nfs4.client.reqs", "secinfononam", v4[0], ts),
            sample("nfs4.client.reqs", "deallocate", v4[1], ts),
            sample("nfs4.client.reqs", "create_ses", v4[2], ts),
        ]
    };
    // The first poll is the baseline.
    assert!(
        g.handle(&poll(10.0, 100.0, 0.0, 7.0, [1.0, 0.0, 2.0]))
            .unwrap()
            .is_empty()
    );
    let out = g
        .handle(&poll(20.0, 150.0, 4.0, 7.0, [3.0, 9.0, 2.0]))
        .unwrap();
    assert_eq!(
        seen(&out),
        vec![
            one("nfs3_getattr", "type=node", 50.0),
            one("nfs3_mknod", "type=node", 0.0),
            one("nfs3_total", "type=node", 54.0),
            one("nfs4_create_session", "type=node", 0.0),
            one("nfs4_layoutreturn", "type=node", 2.0),
        ],
        "readdir+ and deallocate were not counted at the previous poll; null never"
    );
    let out = g
        .handle(&poll(30.0, 151.0, 6.0, 7.0, [3.0, 10.0, 2.0]))
        .unwrap();
    let names: Vec<String> = seen(&out).into_iter().map(|(n, ..)| n).collect();
    assert_eq!(
        names,
        [
            "nfs3_getattr",
            "nfs3_mknod",
            "nfs3_readdirplus",
            "nfs3_total",
            "nfs4_allocate",
            "nfs4_create_session",
            "nfs4_layoutreturn"
        ]
    );
    assert_eq!(
        seen(&out)
            .iter()
            .find(|(n, ..)| n == "nfs3_readdirplus")
            .unwrap()
            .2,
        2.0
    );
}

/// slurm_cgroup: each job's figure over the threads of its cpuset, one output per hardware
/// thread; 0 on every online thread no job holds; a job whose figure the agent could not read
/// sends 0 (cc-metric-collector's zeroed job data); a thread without a number in its instance
/// is left out.
#[test]
fn job_figures_are_split_over_their_hardware_threads_and_idle_threads_send_0() {
    let mut g = load("clustercockpit", json!({ "metrics": profile_rows("job_") })).unwrap();
    let ts = 10.0;
    let mut poll = vec![
        sample("slurm.job.memory.used", "4201", 3_000.0, ts),
        sample("slurm.job.memory.used", "s0F3KQ8VZ2M4NX", 512.0, ts),
        sample("slurm.job.memory.peak", "4201", 4_000.0, ts),
        sample("slurm.job.memory.limit", "4201", 0.0, ts),
        sample("slurm.job.memory.limit", "s0F3KQ8VZ2M4NX", 1_024.0, ts),
        sample("slurm.job.cpu.user_percent", "4201", 90.0, ts),
        sample("slurm.job.cpu.system_percent", "4201", 10.0, ts),
    ];
    for (m, t) in [
        ("4201:cpu0", 0.0),
        ("4201:cpu1", 1.0),
        ("4201:cpu2", 2.0),
        ("s0F3KQ8VZ2M4NX:cpu5", 5.0),
        ("4201:cpux", 0.0),
    ] {
        poll.push(sample("slurm.job.hwthread", m, t, ts));
    }
    for t in 0..7 {
        poll.push(sample("slurm.hwthread.jobs", &format!("cpu{t}"), 0.0, ts));
    }
    let out = g.handle(&poll).unwrap();
    let got = seen(&out);
    let at = |name: &str, tid: &str| -> Vec<f64> {
        let tags = format!(
            "type=hwthread,type-id={tid},unit={}",
            if name.ends_with("_cpu") { "%" } else { "Bytes" }
        );
        got.iter()
            .filter(|(n, t, _)| n == name && *t == tags)
            .map(|(.., v)| *v)
            .collect()
    };
    // 4201 holds 4 threads by its instances (cpux among them, which has no thread id).
    assert_eq!(at("job_mem_used", "1"), [750.0]);
    assert_eq!(at("job_mem_used", "5"), [512.0]);
    assert_eq!(at("job_max_mem_used", "2"), [1_000.0]);
    assert_eq!(at("job_max_mem_used", "5"), [0.0], "no memory.peak: 0");
    assert_eq!(at("job_mem_limit", "5"), [1_024.0]);
    assert_eq!(at("job_user_cpu", "0"), [22.5]);
    assert_eq!(at("job_sys_cpu", "2"), [2.5]);
    assert_eq!(at("job_user_cpu", "5"), [0.0]);
    for idle in ["3", "4", "6"] {
        for name in [
            "job_mem_used",
            "job_max_mem_used",
            "job_mem_limit",
            "job_user_cpu",
            "job_sys_cpu",
        ] {
            assert_eq!(at(name, idle), [0.0], "{name} on idle thread {idle}");
        }
    }
    // 5 metrics × (3 + 1 placed threads of the jobs + 3 idle threads).
    assert_eq!(got.len(), 5 * 7, "{got:?}");
}

/// The new fields are refused where they mean nothing, naming the row and field.
#[test]
fn instance_names_nonzero_input_and_split_cpus_are_checked() {
    for (row, says) in [
        (
            json!({"from": "a", "to": "b", "rename": {"x": "y"}}),
            "metrics[0].rename",
        ),
        (
            json!({"from": "a", "to": "b_{instance}", "rename": {"x": 3}}),
            "metrics[0].rename.x",
        ),
        (
            json!({"from": "a", "to": "b", "nonzero-input": true}),
            "metrics[0].nonzero-input",
        ),
        (
            json!({"from": ["a", "b"], "to": "c", "formula": "split-cpus"}),
            "metrics[0].from",
        ),
    ] {
        let Err(e) = load("clustercockpit", json!({ "metrics": [row.clone()] })) else {
            panic!("{row} accepted");
        };
        let e = format!("{e:#}");
        assert!(e.contains(says), "{row}: {e}");
    }
}
