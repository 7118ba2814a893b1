//! The Python, JavaScript and C guests of `guests/`, built from source and run through
//! `wasmon transform` and the sandbox.

use serde_json::{Value, json};
use wasmon::host::agent_types::{NsError, Pmid};
use wasmon::host::{AgentWorld, GuestConfig, Image};

use super::{built, cached_runtime, transform};

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

#[test]
fn python_agent_serves_a_dynamic_subtree_that_grows() {
    let rt = cached_runtime();
    let bytes = std::fs::read(built("python", "dyn_agent")).unwrap();
    let compiled = rt.compile(&bytes, "dyn_agent").unwrap();
    let params = json!({"domain": 45, "root": "py.dyn", "count": 2, "grow_every": 2});
    let mut cfg = GuestConfig::new("dyn_agent", &params.to_string());
    cfg.memory = 256 << 20;
    cfg.deadline = std::time::Duration::from_secs(2);
    let mut a = Image::<AgentWorld>::load(&rt, &compiled, cfg).unwrap();

    assert_eq!(
        a.lookup_name("py.dyn.slot.1.hits").unwrap(),
        Ok(pmid(45, 1, 1))
    );
    assert_eq!(a.lookup_name("py.dyn.slot").unwrap(), Err(NsError::NonLeaf));
    assert_eq!(
        a.lookup_name("py.dyn.slot.2.hits").unwrap(),
        Err(NsError::UnknownName)
    );
    assert_eq!(
        a.names_of(pmid(45, 0, 0)).unwrap(),
        Ok(vec!["py.dyn.slots".to_string()])
    );
    let kids = a.children("py.dyn").unwrap().unwrap();
    let kids: Vec<(String, bool)> = kids.into_iter().map(|c| (c.name, c.leaf)).collect();
    assert_eq!(
        kids,
        [("slots".to_string(), true), ("slot".to_string(), false)]
    );
    let desc = a.describe(pmid(45, 1, 0)).unwrap().unwrap();
    assert_eq!(desc.units, "count");

    let ids = [pmid(45, 1, 1), pmid(45, 0, 0), pmid(45, 9, 9)];
    let first = a.fetch(&ids).unwrap();
    assert_eq!(first[0].values.as_ref().unwrap()[0].value, 2.0);
    assert_eq!(first[1].values.as_ref().unwrap()[0].value, 2.0);
    assert_eq!(first[2].values, Err(NsError::UnknownPmid));
    // The second fetch grows the subtree by one slot.
    let second = a.fetch(&ids).unwrap();
    assert_eq!(
        second[0].values.as_ref().unwrap()[0].value,
        4.0,
        "values change"
    );
    assert_eq!(
        a.lookup_name("py.dyn.slot.2.hits").unwrap(),
        Ok(pmid(45, 1, 2))
    );
    let third = a.fetch(&ids).unwrap();
    assert_eq!(third[1].values.as_ref().unwrap()[0].value, 3.0);
}
