//! The Python, JavaScript and C guests of `guests/`, built from source and run through
//! `wasmon transform` and the sandbox.

use serde_json::{Value, json};
use wasmon::host::agent_types::{Atom, NsError, Pmid, Semantics, ValueType};

use super::{built, transform};
use crate::common::{NO_PROCFS, config_file};

/// The shared sample file: 1200 samples (three batches of `wasmon transform`'s 512, so the
/// string table carries over between calls), names in and out of the `disk.` prefix, units,
/// kinds, metadata sets, and some lines without a timestamp.
pub fn sample_file() -> String {
    let mut s = String::new();
    for i in 0..1200u64 {
        let name = ["disk.read", "disk.write", "cpu.busy", "net.rx"][(i % 4) as usize];
        let unit = ["B", "", "%"][(i % 3) as usize];
        let kind = ["gauge", "delta", "cumulative"][(i % 3) as usize];
        let mut line = json!({
            "name": name,
            "resource": format!("dev{}", i % 13),
            "value": (i as f64) * 1.5 - 300.0,
            "unit": unit,
            "type": kind,
        });
        if i % 5 != 0 {
            line["timestamp"] = json!(1_700_000_000.0 + i as f64);
        }
        if i % 7 == 0 {
            line["metadata"] = json!({"rack": format!("r{}", i % 3), "zone": "a"});
        }
        s.push_str(&line.to_string());
        s.push('\n');
        if i == 700 {
            s.push_str("{\"flush\": true}\n");
        }
    }
    s
}

fn without_timestamps(lines: Vec<Value>) -> Vec<Value> {
    lines
        .into_iter()
        .map(|mut v| {
            v.as_object_mut().unwrap().remove("timestamp");
            v
        })
        .collect()
}

#[test]
fn the_template_in_python_js_and_c_matches_the_rust_one_on_the_shared_sample_file() {
    let input = sample_file();
    let params = json!({"factor": 0.001, "prefix": "disk.", "unit": "KB"});
    let rust = without_timestamps(transform(
        &crate::common::guest_path("template"),
        &params,
        &input,
    ));
    assert_eq!(rust.len(), 1200);
    assert_eq!(rust[0]["unit"], "KB");
    assert_eq!(rust[0]["value"], -0.3);
    for lang in ["python", "js", "c"] {
        let out = without_timestamps(transform(&built(lang, "template"), &params, &input));
        assert_eq!(out.len(), rust.len(), "{lang}: sample count");
        for (i, (a, b)) in rust.iter().zip(&out).enumerate() {
            assert_eq!(a, b, "{lang}: sample {i} differs from the Rust template's");
        }
    }
}

#[test]
fn python_zscore_flags_the_outlier_of_a_series_and_names_a_bad_parameter() {
    let guest = built("python", "zscore");
    let mut input = String::new();
    for i in 0..40 {
        // Two series; b has a spike at i = 30.
        let b = if i == 30 {
            100.0
        } else {
            10.0 + (i % 3) as f64
        };
        input.push_str(&format!(
            "{{\"name\":\"lat\",\"resource\":\"a\",\"value\":{},\"timestamp\":{i}}}\n{{\"name\":\"lat\",\"resource\":\"b\",\"value\":{b},\"timestamp\":{i}}}\n",
            5.0 + (i % 2) as f64
        ));
    }
    let out = transform(&guest, &json!({"window": 10, "threshold": 3}), &input);
    assert_eq!(out.len(), 80, "every sample passes");
    let flagged: Vec<&Value> = out
        .iter()
        .filter(|v| v["metadata"]["anomaly"] == "true")
        .collect();
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    assert_eq!(flagged[0]["resource"], "b");
    assert_eq!(flagged[0]["value"], 100.0);
    let z: f64 = flagged[0]["metadata"]["zscore"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(z > 3.0, "{z}");

    let only = transform(
        &guest,
        &json!({"window": 10, "only_anomalies": true}),
        &input,
    );
    assert_eq!(only.len(), 1);

    // A bad window is refused by configure, naming the parameter.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.json");
    std::fs::write(&p, r#"{"window": 1}"#).unwrap();
    let out = super::run(
        super::wasmon()
            .args(["transform", "--guest"])
            .arg(&guest)
            .arg("--params")
            .arg(&p)
            .stdin(std::process::Stdio::null()),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("`window` must be at least 2, got 1"), "{err}");
}

#[test]
fn js_rate_turns_cumulative_counters_into_per_second_deltas() {
    let input = [
        r#"{"name":"bytes","resource":"eth0","value":100,"type":"cumulative","timestamp":10}"#,
        r#"{"name":"temp","resource":"cpu0","value":50,"timestamp":10}"#,
        r#"{"name":"bytes","resource":"eth0","value":300,"type":"cumulative","timestamp":12}"#,
        r#"{"name":"bytes","resource":"eth1","value":7,"type":"cumulative","timestamp":12}"#,
        r#"{"name":"bytes","resource":"eth0","value":5,"type":"cumulative","timestamp":13}"#,
        r#"{"name":"bytes","resource":"eth0","value":25,"type":"cumulative","timestamp":17}"#,
    ]
    .join("\n");
    let out = transform(&built("js", "rate"), &json!({"unit": "B/s"}), &input);
    let got: Vec<(String, String, f64, String)> = out
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["resource"].as_str().unwrap().to_string(),
                v["value"].as_f64().unwrap(),
                v["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("temp", "cpu0", 50.0, "gauge"),
        ("bytes.rate", "eth0", 100.0, "delta"),
        ("bytes.rate", "eth0", 5.0, "delta"),
    ];
    assert_eq!(got.len(), want.len(), "{out:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0.as_str(), g.1.as_str(), g.2, g.3.as_str()), w);
    }
    assert_eq!(out[1]["unit"], "B/s");
}

#[test]
fn c_clamp_clamps_tags_and_drops() {
    let guest = built("c", "clamp");
    let input = [
        r#"{"name":"pct","resource":"a","value":-5,"metadata":{"host":"h1"}}"#,
        r#"{"name":"pct","resource":"b","value":50}"#,
        r#"{"name":"pct","resource":"c","value":130}"#,
    ]
    .join("\n");
    let out = transform(&guest, &json!({"min": 0, "max": 100}), &input);
    assert_eq!(out.len(), 3);
    assert_eq!(out[0]["value"], 0.0);
    assert_eq!(out[0]["metadata"], json!({"host": "h1", "clamped": "-5"}));
    assert_eq!(out[1]["value"], 50.0);
    assert!(out[1].get("metadata").is_none_or(|m| m == &json!({})));
    assert_eq!(out[2]["value"], 100.0);
    assert_eq!(out[2]["metadata"], json!({"clamped": "130"}));
    let out = transform(&guest, &json!({"min": 0, "max": 100, "drop": true}), &input);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["resource"], "b");
}

fn pmid(domain: u32, cluster: u32, item: u32) -> Pmid {
    Pmid {
        domain,
        cluster,
        item,
    }
}

/// Loads `guests/LANG/NAME` (a `dyn_agent`) in the sandbox with `params`.
fn load_agent(
    lang: &str,
    name: &str,
    params: &Value,
) -> anyhow::Result<wasmon::host::AgentInstance> {
    super::load_agent(&built(lang, name), name, &params.to_string())
}

/// What every language's `dyn_agent` (guests/LANG/dyn_agent: `ROOT.slots` and `count` slots
/// `ROOT.slot.sN.hits`, one more every `grow_every` fetches) answers, asked in the sandbox.
fn dyn_agent_serves_a_dynamic_subtree_that_grows(lang: &str, name: &str, root: &str, domain: u32) {
    let params = json!({"domain": domain, "root": root, "count": 2, "grow_every": 2});
    let mut a = load_agent(lang, name, &params).unwrap();
    let n = |rest: &str| format!("{root}.{rest}");

    assert_eq!(
        a.lookup_name(&n("slot.s1.hits")).unwrap(),
        Ok(pmid(domain, 1, 1)),
        "{lang}"
    );
    assert_eq!(
        a.lookup_name(&n("slot")).unwrap(),
        Err(NsError::NonLeaf),
        "{lang}"
    );
    assert_eq!(
        a.lookup_name(root).unwrap(),
        Err(NsError::NonLeaf),
        "{lang}"
    );
    assert_eq!(
        a.lookup_name(&n("slot.s2.hits")).unwrap(),
        Err(NsError::UnknownName),
        "{lang}"
    );
    assert_eq!(
        a.names_of(pmid(domain, 0, 0)).unwrap(),
        Ok(vec![n("slots")]),
        "{lang}"
    );
    assert_eq!(
        a.names_of(pmid(domain, 1, 2)).unwrap(),
        Err(NsError::UnknownPmid),
        "{lang}"
    );
    let kids = |a: &mut wasmon::host::AgentInstance, name: &str| -> Vec<(String, bool)> {
        a.children(name)
            .unwrap()
            .unwrap_or_else(|e| panic!("{lang}: children({name}): {e:?}"))
            .into_iter()
            .map(|c| (c.name, c.leaf))
            .collect()
    };
    assert_eq!(
        kids(&mut a, root),
        [("slots".to_string(), true), ("slot".to_string(), false)],
        "{lang}"
    );
    assert_eq!(
        kids(&mut a, &n("slot")),
        [("s0".to_string(), false), ("s1".to_string(), false)],
        "{lang}"
    );
    assert_eq!(
        kids(&mut a, &n("slot.s0")),
        [("hits".to_string(), true)],
        "{lang}"
    );
    assert_eq!(
        kids(&mut a, &n("slots")),
        [],
        "{lang}: a leaf has no children"
    );
    assert_eq!(
        a.children(&n("nothing")).unwrap(),
        Err(NsError::UnknownName),
        "{lang}"
    );
    let desc = a.describe(pmid(domain, 1, 0)).unwrap().unwrap();
    assert_eq!(desc.id, pmid(domain, 1, 0), "{lang}");
    assert_eq!(desc.units, "count", "{lang}");
    assert_eq!(desc.help, "hits of slot 0", "{lang}");
    assert_eq!(desc.semantics, Semantics::Counter, "{lang}");
    assert_eq!(desc.indom, None, "{lang}");
    let desc = a.describe(pmid(domain, 0, 0)).unwrap().unwrap();
    assert_eq!(
        (desc.semantics, desc.units.as_str(), desc.help.as_str()),
        (Semantics::Discrete, "", "number of slots"),
        "{lang}"
    );
    assert_eq!(
        a.describe(pmid(domain, 9, 9)).unwrap(),
        Err(NsError::UnknownPmid),
        "{lang}"
    );

    let ids = [pmid(domain, 1, 1), pmid(domain, 0, 0), pmid(domain, 9, 9)];
    let first = a.fetch(&ids).unwrap();
    assert_eq!(first.len(), 3, "{lang}");
    assert_eq!(first[0].id, ids[0], "{lang}");
    let values = first[0].values.as_ref().unwrap();
    assert_eq!(values.len(), 1, "{lang}");
    assert_eq!(
        (values[0].instance.as_str(), &values[0].value),
        ("", &Atom::Uint(2)),
        "{lang}: a singular value, a 64-bit count"
    );
    assert_eq!(desc.value_type, ValueType::Uint32, "{lang}: slots");
    assert_eq!(
        first[1].values.as_ref().unwrap()[0].value,
        Atom::Uint(2),
        "{lang}"
    );
    assert_eq!(first[2].values, Err(NsError::UnknownPmid), "{lang}");
    // The second fetch grows the subtree by one slot.
    let second = a.fetch(&ids).unwrap();
    assert_eq!(
        second[0].values.as_ref().unwrap()[0].value,
        Atom::Uint(4),
        "{lang}: values change"
    );
    assert_eq!(
        a.lookup_name(&n("slot.s2.hits")).unwrap(),
        Ok(pmid(domain, 1, 2)),
        "{lang}"
    );
    assert_eq!(
        kids(&mut a, &n("slot")),
        [
            ("s0".to_string(), false),
            ("s1".to_string(), false),
            ("s2".to_string(), false)
        ],
        "{lang}"
    );
    assert_eq!(
        a.describe(pmid(domain, 1, 2)).unwrap().unwrap().help,
        "hits of slot 2",
        "{lang}"
    );
    let third = a.fetch(&ids).unwrap();
    assert_eq!(
        third[1].values.as_ref().unwrap()[0].value,
        Atom::Uint(3),
        "{lang}"
    );
    let slot2 = a.fetch(&[pmid(domain, 1, 2)]).unwrap();
    assert_eq!(
        slot2[0].values.as_ref().unwrap()[0].value,
        Atom::Uint(3),
        "{lang}"
    );

    // A bad parameter is refused by configure, naming it.
    for (params, want) in [
        (json!({"count": -1}), "`count` must be at least 0, got -1"),
        (
            json!({"count": 4, "max": 3}),
            "`max` must be at least 4, got 3",
        ),
        (
            json!({"domain": 1.5}),
            "`domain` must be an integer, got 1.5",
        ),
        (json!({"root": 7}), "`root` must be a string, got 7"),
    ] {
        let err = load_agent(lang, name, &params).err().expect("refused");
        let err = format!("{err:#}");
        assert!(err.contains(want), "{lang}: {params}: {err}");
    }
}

#[test]
fn python_agent_serves_a_dynamic_subtree_that_grows() {
    dyn_agent_serves_a_dynamic_subtree_that_grows("python", "dyn_agent", "py.dyn", 45);
}

#[test]
fn c_agent_serves_a_dynamic_subtree_that_grows() {
    dyn_agent_serves_a_dynamic_subtree_that_grows("c", "dyn_agent", "c.dyn", 46);
    // Its defaults.
    let mut a = load_agent("c", "dyn_agent", &json!({})).unwrap();
    assert_eq!(
        a.lookup_name("cagent.dyn.slot.s2.hits").unwrap(),
        Ok(pmid(46, 1, 2))
    );
    assert_eq!(
        a.lookup_name("cagent.dyn.slot.s3.hits").unwrap(),
        Err(NsError::UnknownName)
    );
}

#[test]
fn js_agent_serves_a_dynamic_subtree_that_grows() {
    dyn_agent_serves_a_dynamic_subtree_that_grows("js", "dyn_agent", "js.dyn", 47);
}

/// `guests/LANG/dyn_agent` in a running daemon, owning the dynamic subtree `ROOT.dyn` of its
/// PMNS: looked up, listed and fetched over HTTP while it grows.
fn dyn_agent_in_a_running_daemon(lang: &str, root: &str, domain: u32) {
    let guest = built(lang, "dyn_agent");
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        dir.path(),
        &format!(
            r#"{NO_PROCFS}
[[agent]]
name = "dyn"
guest = "{}"
domain = {domain}
pmns = "root {{ {root} }}\n{root} {{ dyn {domain}:*:* }}"
params = {{ domain = {domain}, root = "{root}.dyn", count = 2, grow_every = 1, max = 3 }}
"#,
            guest.display()
        ),
    );
    let d = crate::common::DaemonProcess::start(&config);
    let get = |path: &str| -> Value {
        let r = d.get(path).unwrap();
        assert_eq!(r.status(), 200, "{lang}: {path}");
        r.json().unwrap()
    };
    let p = |rest: &str| format!("{root}.dyn{rest}");

    let v = get(&format!(
        "/api/ns/lookup?name={}&name={}&name={}&name={}&name={}",
        p(".slots"),
        p(".slot.s1.hits"),
        p(".slot"),
        p(""),
        p(".nope")
    ));
    assert_eq!(v[0]["pmid"], format!("{domain}.0.0"), "{lang}: {v}");
    assert_eq!(v[1]["pmid"], format!("{domain}.1.1"), "{lang}: {v}");
    assert_eq!(
        v[2]["error"], "Metric name is not a leaf in PMNS",
        "{lang}: {v}"
    );
    assert_eq!(
        v[3]["error"], "Metric name is not a leaf in PMNS",
        "{lang}: {v}"
    );
    assert_eq!(v[4]["error"], "Unknown metric name", "{lang}: {v}");
    let v = get(&format!(
        "/api/ns/name?pmid={domain}.0.0&pmid={domain}.1.0&pmid={domain}.9.9"
    ));
    assert_eq!(v[0]["names"], json!([p(".slots")]), "{lang}: {v}");
    assert_eq!(v[1]["names"], json!([p(".slot.s0.hits")]), "{lang}: {v}");
    assert_eq!(
        v[2]["error"], "Unknown or illegal metric identifier",
        "{lang}: {v}"
    );
    let v = get(&format!("/api/ns/children?name={}", p("")));
    assert_eq!(
        v["children"],
        json!([{"name": "slots", "leaf": true}, {"name": "slot", "leaf": false}]),
        "{lang}: {v}"
    );
    let v = get(&format!("/api/ns/children?name={}", p(".slot")));
    assert_eq!(
        v["children"],
        json!([{"name": "s0", "leaf": false}, {"name": "s1", "leaf": false}]),
        "{lang}: {v}"
    );

    // Every fetch grows the subtree by one slot, up to `max`; a slot's hits grow by N + 1.
    let fetch = |name: String| -> (Value, Value) {
        let v = get(&format!("/api/fetch?name={name}"));
        (v[0]["semantics"].clone(), v[0]["values"].clone())
    };
    assert_eq!(
        fetch(p(".slots")),
        (json!("discrete"), json!([["", 2]])),
        "{lang}"
    );
    assert_eq!(
        fetch(p(".slots")),
        (json!("discrete"), json!([["", 3]])),
        "{lang}"
    );
    assert_eq!(
        fetch(p(".slots")),
        (json!("discrete"), json!([["", 3]])),
        "{lang}: at most `max`"
    );
    assert_eq!(
        fetch(p(".slot.s2.hits")),
        (json!("counter"), json!([["", 3]])),
        "{lang}"
    );
    assert_eq!(
        fetch(p(".slot.s2.hits")),
        (json!("counter"), json!([["", 6]])),
        "{lang}"
    );
}

#[test]
fn python_agent_serves_its_subtree_in_a_running_daemon() {
    dyn_agent_in_a_running_daemon("python", "py", 45);
}

#[test]
fn js_agent_serves_its_subtree_in_a_running_daemon() {
    dyn_agent_in_a_running_daemon("js", "js", 47);
}

#[test]
fn c_agent_serves_its_subtree_in_a_running_daemon() {
    dyn_agent_in_a_running_daemon("c", "c", 46);
}

/// The C SDK's `wg_read_file` (the C `dyn_agent`'s `count_file`): through the host's `files`
/// interface under a read-only grant, through WASI (fopen) under a read-write one, and an
/// errno a configure error names.
#[test]
fn a_c_agent_reads_a_granted_file_in_one_call_or_through_wasi() {
    use wasmon::host::{AgentWorld, DirGrant, GuestConfig, Image};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("count"), "5\n").unwrap();
    std::fs::write(dir.path().join("big"), "1".repeat(100)).unwrap();
    let wasm = built("c", "dyn_agent");
    let rt = super::cached_runtime();
    let compiled = rt
        .compile(&std::fs::read(&wasm).unwrap(), "dyn_agent")
        .unwrap();
    let load = |read_only: bool, file: &str| {
        let params = json!({"domain": 46, "count_file": format!("/data/{file}"), "max": 16});
        let mut cfg = GuestConfig::new("dyn_agent", &params.to_string());
        cfg.memory = 256 << 20;
        cfg.grants.dirs = vec![DirGrant {
            host: dir.path().to_path_buf(),
            guest: "/data".into(),
            read_only,
        }];
        Image::<AgentWorld>::load(&rt, &compiled, cfg)
    };
    for read_only in [true, false] {
        let mut a = load(read_only, "count").unwrap();
        assert_eq!(
            a.lookup_name("cagent.dyn.slot.s4.hits").unwrap(),
            Ok(pmid(46, 1, 4)),
            "read_only {read_only}"
        );
        assert_eq!(
            a.lookup_name("cagent.dyn.slot.s5.hits").unwrap(),
            Err(NsError::UnknownName)
        );
        let err = load(read_only, "absent")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("count_file: /data/absent: No such file"),
            "{err}"
        );
        let err = load(read_only, "big").err().expect("refused").to_string();
        assert!(
            err.contains("count_file: /data/big: File too large"),
            "{err}"
        );
    }
}
