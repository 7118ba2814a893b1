//! An agent guest under the fleet: a signed good version runs and answers fetches; a signed
//! next version that traps on every call is quarantined by the fetches that reach it and
//! rolled back, within the window, to the good version — reported with what it saw (calls,
//! failures, quarantines), while the good version answers again. Then an older signed
//! release put back into the bucket is refused as replayed; a canary release withdrawn goes
//! back to the release for all, that one withdrawn to the local version, and put back it is
//! refused as replayed. Along the way: components no release names are deleted from the
//! object store, and `--replicas` reaches the server.

use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::common::{DaemonProcess, NatsServer, free_port, guest_bytes};

/// The agent's guest name (a local version in guests-dir, replaced by the fleet's).
const AGENT: &str = "agentx";

/// `ag.good` through the daemon's namespace: its value, or the error.
fn fetch_good(d: &DaemonProcess) -> Result<f64, String> {
    let v: Value = d
        .get("/api/fetch?name=ag.good")
        .map_err(|e| e.to_string())?
        .json()
        .map_err(|e| e.to_string())?;
    let f = &v[0];
    match f["values"][0][1].as_f64() {
        Some(x) => Ok(x),
        None => Err(format!("{f}")),
    }
}

fn agent_health(url: &str) -> Value {
    solo_health(url, AGENT)
}

#[test]
fn fleet_agent_rollback_replay_and_withdraw() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(free_port(), &dir.path().join("nats"));
    let url = nats.url();
    let (key, public) = keygen(&url, dir.path(), "signing.key");
    let key_s = key.to_str().unwrap();
    // Replicas reach the server: a single nats-server refuses a bucket of 2, and says so.
    let e = try_fleet_cli(&url, &["--replicas", "2", "status"]).unwrap_err();
    assert!(e.contains("2 replica(s)"), "{e}");
    let cfg = daemon_config(dir.path(), &url, "solo", &["canary"], &[&public], "store");
    let testing_agent = guest_bytes("testing_agent");
    std::fs::write(
        dir.path().join(format!("guests/{AGENT}.wasm")),
        variant(&testing_agent, "local"),
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        r#"[[agent]]
name = "ag"
guest = "{AGENT}"
domain = 77
pmns = "root {{ ag }}\nag {{ good 77:0:0 }}"
params = {{ domain = 77, root = "ag" }}
"#
    ));
    std::fs::write(&cfg, text).unwrap();
    let d = DaemonProcess::start(&cfg);
    assert_eq!(fetch_good(&d), Ok(42.0));

    let publish_to = |bytes: &[u8], group: &str| {
        let file = dir.path().join(format!("{}.wasm", &sha(bytes)[..12]));
        std::fs::write(&file, bytes).unwrap();
        let f = file.to_str().unwrap();
        fleet_cli(
            &url,
            &[
                "publish",
                f,
                "--guest",
                AGENT,
                "--key",
                key_s,
                "--group",
                group,
                "--gc-grace",
                "0s",
            ],
        );
        sha(bytes)
    };
    let publish_agent = |bytes: &[u8]| publish_to(bytes, "all");
    let good = publish_agent(&variant(&testing_agent, "v1"));
    wait_until(
        "the good agent version running",
        Duration::from_secs(10),
        || agent_health(&url)["running"] == good.as_str(),
    );
    assert_eq!(fetch_good(&d), Ok(42.0));
    let good_release = release_entry(&url, &format!("{AGENT}.all"));

    // The next version traps on every call: the fetches that reach it quarantine it, and
    // the daemon goes back to the good version.
    let trap = publish_agent(&guest_bytes("trap_agent"));
    let took = wait_until(
        "the trapping agent rolled back",
        Duration::from_secs(20),
        || {
            let _ = fetch_good(&d);
            let h = agent_health(&url);
            h["rolled-back"]["from"] == trap.as_str() && h["running"] == good.as_str()
        },
    );
    eprintln!("trap_agent rolled back {took:?} after its publish");
    let h = agent_health(&url);
    assert_quarantine_rollback(&h, &good, 2);
    assert!(h["rolled-back"]["quarantines"].as_u64() >= Some(1), "{h}");
    assert!(
        h["refused"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["hash"] == trap.as_str() && r["reason"] == "quarantined"),
        "{h}"
    );
    assert_eq!(h["used"], true, "{h}");
    // The good version answers again, and the trapping one is not taken up again.
    wait_until("the good agent answering", Duration::from_secs(5), || {
        fetch_good(&d) == Ok(42.0)
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(agent_health(&url)["running"], good.as_str());
    assert_eq!(fetch_good(&d), Ok(42.0));

    // A newer good version, then the first one's signed release put back by someone
    // without the key: refused as replayed, the newer one kept.
    let newer = publish_agent(&variant(&testing_agent, "v3"));
    wait_until(
        "the newer agent version running",
        Duration::from_secs(10),
        || agent_health(&url)["running"] == newer.as_str(),
    );
    replay(&url, &good_release, &variant(&testing_agent, "v1"));
    wait_until(
        "the replayed release refused",
        Duration::from_secs(10),
        || {
            agent_health(&url)["refused"].as_array().is_some_and(|r| {
                r.iter()
                    .any(|r| r["hash"] == good.as_str() && r["reason"] == "replayed")
            })
        },
    );
    assert_eq!(agent_health(&url)["running"], newer.as_str());
    assert_eq!(fetch_good(&d), Ok(42.0));

    // The remedy: publish again, which raises the sequence (the same bytes: nothing swaps).
    assert_eq!(publish_agent(&variant(&testing_agent, "v3")), newer);

    // Withdrawn: a canary release goes back to the release for all; that one, withdrawn,
    // to the guest's local version (guests-dir); put back, it is a replay.
    let canary = publish_to(&variant(&testing_agent, "v4"), "canary");
    wait_until(
        "the canary release running",
        Duration::from_secs(10),
        || agent_health(&url)["running"] == canary.as_str(),
    );
    // Superseded components (the first good one, the trapping one) are gone from the object
    // store; the two that releases name are there.
    let mut named = vec![newer.clone(), canary.clone()];
    named.sort();
    assert_eq!(objects(&url), named);
    fleet_cli(&url, &["withdraw", "--guest", AGENT, "--group", "canary"]);
    wait_until(
        "back to the release for all",
        Duration::from_secs(10),
        || agent_health(&url)["running"] == newer.as_str(),
    );
    let newer_release = release_entry(&url, &format!("{AGENT}.all"));
    fleet_cli(&url, &["withdraw", "--guest", AGENT, "--gc-grace", "0s"]);
    assert_eq!(objects(&url), Vec::<String>::new());
    wait_until("back to the local version", Duration::from_secs(10), || {
        let h = agent_health(&url);
        h.is_object() && h["running"].is_null()
    });
    assert_eq!(fetch_good(&d), Ok(42.0));
    let e = try_fleet_cli(&url, &["withdraw", "--guest", AGENT]).unwrap_err();
    assert!(e.contains("no release of agentx"), "{e}");
    replay(&url, &newer_release, &variant(&testing_agent, "v3"));
    wait_until(
        "the withdrawn release put back refused",
        Duration::from_secs(10),
        || {
            agent_health(&url)["refused"].as_array().is_some_and(|r| {
                r.iter().any(|r| {
                    r["hash"] == newer.as_str()
                        && r["reason"] == "replayed"
                        && r["detail"].as_str().unwrap_or("").contains("withdrawn")
                })
            })
        },
    );
    assert!(agent_health(&url)["running"].is_null());
}
