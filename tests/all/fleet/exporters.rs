//! An exporter guest under the fleet: a guest sink (`type = "guest"`, `guest = "exp"`) sends
//! pipeline `p` to a receiving daemon's samples route. The fleet's signed `jsonl` version
//! runs in place of the local one; a next version that is a transformer is refused as the
//! wrong world while `jsonl` keeps delivering; a next version that traps on every call is
//! quarantined by the batches that reach it and rolled back to `jsonl` within the window —
//! and every sample posted arrives exactly once (the batches it failed on stay queued and are
//! encoded again by the version rolled back to).

use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::common::{DaemonProcess, NatsServer, free_port, guest_bytes};
use crate::export::{assert_same, body, receive, samples, sender, sink};

/// The exporter's guest name (a local version in guests-dir, replaced by the fleet's).
const EXP: &str = "exp";

fn exporter_health(url: &str) -> Value {
    solo_health(url, EXP)
}

/// Posts `n` samples tagged `tag` to `d`'s pipeline and adds them to `sent`.
fn post(d: &DaemonProcess, tag: &str, n: usize, sent: &mut Vec<Value>) -> Vec<Value> {
    let batch = samples(tag, n);
    let r = d.post("/api/pipelines/p/samples", &body(&batch));
    assert!(r.status().is_success(), "{}", r.text().unwrap());
    sent.extend(batch.iter().cloned());
    batch
}

#[test]
fn fleet_exporter_wrong_world_refused_and_trapping_version_rolled_back_losing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(free_port(), &dir.path().join("nats"));
    let url = nats.url();
    let (key, public) = keygen(&url, dir.path(), "signing.key");
    let key_s = key.to_str().unwrap();

    let receiver = DaemonProcess::start(&crate::export::config(
        &dir.path().join("r"),
        "\"stdout\"",
        "",
    ));
    let s_dir = dir.path().join("s");
    std::fs::create_dir_all(s_dir.join("guests")).unwrap();
    let jsonl = guest_bytes("jsonl");
    std::fs::write(
        s_dir.join(format!("guests/{EXP}.wasm")),
        variant(&jsonl, "local"),
    )
    .unwrap();
    // Failed batches are retried, never dead-lettered, in this test: a lost sample would be
    // the rollback's fault.
    let fleet = format!(
        "max-encode-failures = 1000\n[fleet]\nnats = \"{url}\"\nname = \"{FLEET}\"\n\
         node = \"solo\"\ngroups = []\ntrusted-keys = [\"{public}\"]\n\
         rollback-window = \"60s\"\nstart-wait = \"3s\"\n"
    );
    let cfg = sender(
        &s_dir,
        EXP,
        &receiver.url("/api/pipelines/p/samples"),
        &fleet,
    );
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("[daemon]\n", "[daemon]\nguests-dir = \"guests\"\n"),
    )
    .unwrap();
    let d = DaemonProcess::start(&cfg);
    let mut all = Vec::new();
    let batch = post(&d, "local", 10, &mut all);
    assert_same(&batch, &receive(&receiver, batch.len()));

    let publish = |bytes: &[u8]| {
        let file = dir.path().join(format!("{}.wasm", &sha(bytes)[..12]));
        std::fs::write(&file, bytes).unwrap();
        let f = file.to_str().unwrap();
        fleet_cli(&url, &["publish", f, "--guest", EXP, "--key", key_s]);
        sha(bytes)
    };

    // The fleet's jsonl runs in place of the local one, and delivers.
    let good = publish(&variant(&jsonl, "v1"));
    wait_until("the fleet's jsonl running", Duration::from_secs(20), || {
        exporter_health(&url)["running"] == good.as_str()
    });
    let batch = post(&d, "v1", 10, &mut all);
    assert_same(&batch, &receive(&receiver, batch.len()));

    // A transformer is no exporter: refused on this daemon, jsonl keeps delivering.
    let wrong = publish(&guest_bytes("arithmetic"));
    wait_until(
        "the transformer refused as the wrong world",
        Duration::from_secs(20),
        || {
            exporter_health(&url)["refused"]
                .as_array()
                .is_some_and(|r| {
                    r.iter()
                        .any(|r| r["hash"] == wrong.as_str() && r["reason"] == "wrong-world")
                })
        },
    );
    assert_eq!(exporter_health(&url)["running"], good.as_str());
    let batch = post(&d, "ww", 10, &mut all);
    assert_same(&batch, &receive(&receiver, batch.len()));

    // A version that traps on every call: the batches posted meanwhile fail on it until it
    // is quarantined (5 failures in a row), and it is rolled back to jsonl.
    let mut during = Vec::new();
    let trap = publish(&guest_bytes("trap_export"));
    let mut n = 0;
    let took = wait_until(
        "the trapping exporter rolled back",
        Duration::from_secs(30),
        || {
            n += 1;
            if n % 5 == 1 {
                post(&d, &format!("t{n}"), 3, &mut during);
            }
            let h = exporter_health(&url);
            h["rolled-back"]["from"] == trap.as_str() && h["running"] == good.as_str()
        },
    );
    eprintln!("trap_export rolled back {took:?} after its publish");
    let h = exporter_health(&url);
    assert_quarantine_rollback(&h, &good, 5);
    assert!(h["rolled-back"]["quarantines"].as_u64() >= Some(1), "{h}");
    assert_eq!(h["used"], true, "{h}");
    // Nothing lost: what was posted while the trapping version ran arrives, encoded by jsonl,
    // and so does what is posted after.
    post(&d, "after", 10, &mut during);
    assert_same(&during, &receive(&receiver, during.len()));
    all.extend(during);
    d.wait_for("the queue drained", || sink(&d)["queued-records"] == 0);
    let s = sink(&d);
    assert_eq!(s["sent-samples"].as_u64(), Some(all.len() as u64), "{s}");
    assert_eq!(s["dead-lettered-samples"], 0, "{s}");
    assert!(s["encode-failures"].as_u64().unwrap() >= 5, "{s}");
}
