//! A real bundled agent under the fleet, polled all along: `hwmon` reading a captured tree
//! (granted as its `/sys`) is swapped twice by `wasmon fleet publish` while an HTTP client
//! (`/api/fetch`) and a PCP client (`pminfo` through the daemon's PCP port) poll it without
//! pause; then a next version that traps on every call is published, quarantined by the
//! fetches that reach it and rolled back. Every answer of the whole run must be the tree's
//! values, all instances, no error: the swaps lose nothing, and while the trapping version
//! runs the previous one answers the calls it fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::common::{DaemonProcess, NatsServer, free_port, guest_bytes};

const GUEST: &str = "hwmon";

fn health(url: &str) -> Value {
    solo_health(url, GUEST)
}

/// `hwmon.temp` through `/api/fetch`: the whole answer for the one metric.
fn temps(d: &DaemonProcess) -> Result<Value, String> {
    let v: Value = d
        .get("/api/fetch?name=hwmon.temp")
        .map_err(|e| e.to_string())?
        .json()
        .map_err(|e| e.to_string())?;
    Ok(v[0].clone())
}

#[test]
fn a_real_agent_swapped_and_rolled_back_under_polling_answers_every_fetch() {
    let dir = tempfile::tempdir().unwrap();
    crate::guest_agents::trees::hwmon(dir.path());
    let nats = NatsServer::start(free_port(), &dir.path().join("nats"));
    let url = nats.url();
    let (key, public) = keygen(&url, dir.path(), "signing.key");
    let cfg = daemon_config(dir.path(), &url, "solo", &[], &[&public], "store");
    let hwmon = guest_bytes(GUEST);
    std::fs::write(
        dir.path().join(format!("guests/{GUEST}.wasm")),
        variant(&hwmon, "local"),
    )
    .unwrap();
    let pcp = free_port();
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    // The bundled agent's name is all it needs (domain, PMNS, help are its defaults); the
    // grant points it at the captured tree.
    text.push_str(&format!(
        "[[agent]]\nname = \"hwmon\"\nguest = \"{GUEST}\"\n\
         grants = {{ dirs = [{{ host = \"sys\", guest = \"/sys\" }}] }}\n\
         [pcp]\nlisten = \"127.0.0.1:{pcp}\"\n"
    ));
    std::fs::write(&cfg, text).unwrap();
    let d = Arc::new(DaemonProcess::start(&cfg));

    // What the tree says (node_exporter's node_hwmon_temp_celsius for it: 10 sensors).
    let want = temps(&d).unwrap();
    let list = want["values"]
        .as_array()
        .unwrap_or_else(|| panic!("{want}"));
    assert_eq!(list.len(), 10, "{want}");
    assert!(
        list.iter()
            .any(|v| v[0] == "coretemp-0:Core 0" && v[1] == 54.0),
        "{want}"
    );
    assert!(want.get("error").is_none(), "{want}");

    // Two pollers without pause until told to stop; each keeps every answer that was not
    // the tree's values.
    let stop = Arc::new(AtomicBool::new(false));
    let http = {
        let (d, stop, want) = (d.clone(), stop.clone(), want.clone());
        std::thread::spawn(move || {
            let (mut n, mut wrong) = (0u64, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                match temps(&d) {
                    Ok(v) if v == want => {}
                    other => wrong.push(format!("{other:?}")),
                }
            }
            (n, wrong)
        })
    };
    let pminfo = {
        let stop = stop.clone();
        let host = format!("localhost:{pcp}");
        std::thread::spawn(move || {
            let (mut n, mut wrong) = (0u64, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let out = std::process::Command::new("pminfo")
                    .args(["-h", &host, "-f", "hwmon.fan", "hwmon.voltage"])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let right = out.status.success()
                    && text.contains("inst [0 or \"nct6779:fan2\"] value 1098")
                    && text.contains("\"nct6779:in0\"] value 0.792")
                    && text.contains("\"nct6779:in1\"] value 1.024")
                    && !text.contains("Error")
                    && !text.contains("No value");
                if !right {
                    wrong.push(format!("{text}{}", String::from_utf8_lossy(&out.stderr)));
                }
            }
            (n, wrong)
        })
    };

    let key_s = key.to_str().unwrap();
    let publish_agent = |bytes: &[u8]| {
        let file = dir.path().join(format!("{}.wasm", &sha(bytes)[..12]));
        std::fs::write(&file, bytes).unwrap();
        fleet_cli(
            &url,
            &[
                "publish",
                file.to_str().unwrap(),
                "--guest",
                GUEST,
                "--key",
                key_s,
                "--gc-grace",
                "0s",
            ],
        );
        sha(bytes)
    };
    // Two swaps of the real agent under polling.
    let mut good = String::new();
    for tag in ["v1", "v2"] {
        good = publish_agent(&variant(&hwmon, tag));
        let took = wait_until(
            "the published hwmon version running",
            Duration::from_secs(20),
            || health(&url)["running"] == good.as_str(),
        );
        eprintln!("hwmon {tag} running {took:?} after its publish");
        std::thread::sleep(Duration::from_millis(500));
    }

    // The next version traps on every call: the polls quarantine it and it is rolled back
    // to the good one, while the good one answers what the trapping one cannot.
    let trap = publish_agent(&guest_bytes("trap_agent"));
    let took = wait_until(
        "the trapping hwmon version rolled back",
        Duration::from_secs(30),
        || {
            let h = health(&url);
            h["rolled-back"]["from"] == trap.as_str() && h["running"] == good.as_str()
        },
    );
    eprintln!("the trapping version rolled back {took:?} after its publish");
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let (http_n, http_wrong) = http.join().unwrap();
    let (pcp_n, pcp_wrong) = pminfo.join().unwrap();
    eprintln!("{http_n} /api/fetch answers, {pcp_n} pminfo answers");

    let log = d.stderr.lock().unwrap().clone();
    let stood_in = log.matches("the previous version answers").count();
    // The polls did reach the trapping version: its failures were real calls, answered
    // by the good version.
    assert_quarantine_rollback(&health(&url), &good, 2);
    assert!(
        http_wrong.is_empty(),
        "{} of {http_n} fetches answered wrongly, the first: {}",
        http_wrong.len(),
        http_wrong[0]
    );
    assert!(
        pcp_wrong.is_empty(),
        "{} of {pcp_n} pminfo runs answered wrongly, the first: {}",
        pcp_wrong.len(),
        pcp_wrong[0]
    );
    assert!(http_n >= 50 && pcp_n >= 5, "{http_n} {pcp_n}");
    // The good versions never needed a stand-in; the trapping one did, and it was said once.
    assert_eq!(stood_in, 1, "{log}");
    // The rollback restored the good version, which answers alone now.
    assert_eq!(health(&url)["running"], good.as_str());
    assert_eq!(temps(&d), Ok(want));
}
