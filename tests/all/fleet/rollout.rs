//! Three daemons (one canary) follow a fleet with trusted keys: a signed release runs
//! everywhere, a canary release on the canary only; unsigned, unknown-key, tampered,
//! oversized and malformed releases are refused everywhere; a wrong-world, a failing-configure
//! and a trap-every-batch version are refused or rolled back, the previous version running on
//! — all while samples flow, none lost or doubled. Then one daemon at ≥ 20,000 samples/s
//! through a fleet-wide swap.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmon::fleet::{Manifest, buckets};

use super::*;
use crate::common::{DaemonProcess, NatsServer, free_port, guest_bytes, post_seq};

/// Numbered samples into pipeline `p` of each daemon until stopped: (stop, sent per daemon).
pub(super) fn produce(
    daemons: &[Arc<DaemonProcess>],
    per_batch: u64,
    pause: Duration,
) -> (
    Arc<AtomicBool>,
    Vec<Arc<AtomicU64>>,
    std::thread::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let sent: Vec<Arc<AtomicU64>> = daemons
        .iter()
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect();
    let (ds, st, se) = (daemons.to_vec(), stop.clone(), sent.clone());
    let h = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        while !st.load(Ordering::Relaxed) {
            for (d, n) in ds.iter().zip(&se) {
                let first = n.load(Ordering::Relaxed);
                let r = post_seq(&client, d, first..first + per_batch, 5);
                assert!(r.status().is_success(), "{}", r.text().unwrap());
                n.fetch_add(per_batch, Ordering::Relaxed);
            }
            std::thread::sleep(pause);
        }
    });
    (stop, sent, h)
}

/// Every sample value the daemon printed (its stdout sink), checked for doubles.
pub(super) fn printed(d: &DaemonProcess, expect: u64) -> HashSet<u64> {
    let mut seen = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while (seen.len() as u64) < expect && Instant::now() < deadline {
        if let Ok(line) = d.stdout.recv_timeout(Duration::from_millis(200)) {
            let v: Value = serde_json::from_str(&line).unwrap();
            let n = v["value"].as_f64().unwrap() as u64;
            assert!(seen.insert(n), "sample {n} came out twice");
        }
    }
    seen
}

#[test]
fn fleet_signed_canary_rollout_refusals_and_rollback_lose_no_sample() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(free_port(), &dir.path().join("nats"));
    let url = nats.url();
    let (key, public) = keygen(&url, dir.path(), "signing.key");
    let (stranger, _) = keygen(&url, dir.path(), "stranger.key");
    let key_s = key.to_str().unwrap();
    let daemons = start_printing(
        dir.path(),
        &url,
        &public,
        &[("a", &["canary"]), ("b", &["rack7"]), ("c", &[])],
        "",
    );
    let (stop, sent, producer) = produce(&daemons, 10, Duration::from_millis(20));
    let testing = guest_bytes("testing");
    let all_three = vec!["a".to_string(), "b".into(), "c".into()];

    // Signed, to all: every daemon runs it within 10 s.
    let v1 = publish(
        &url,
        dir.path(),
        &variant(&testing, "v1"),
        &["--key", key_s],
    );
    let took = wait_until("v1 on every daemon", Duration::from_secs(10), || {
        daemons.iter().all(|d| running(d) == v1)
    });
    eprintln!("v1 ran on 3 daemons {took:?} after publish");
    wait_until("v1 in fleet status", Duration::from_secs(5), || {
        nodes(version(&status(&url), &v1), "running") == all_three
    });

    // To the canary group: the canary only; then to all: everywhere.
    let v2 = variant(&testing, "v2");
    let v2h = publish(
        &url,
        dir.path(),
        &v2,
        &["--key", key_s, "--group", "canary"],
    );
    wait_until("v2 on the canary", Duration::from_secs(10), || {
        running(&daemons[0]) == v2h
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(running(&daemons[1]), v1);
    assert_eq!(running(&daemons[2]), v1);
    publish(&url, dir.path(), &v2, &["--key", key_s]);
    wait_until("v2 everywhere", Duration::from_secs(10), || {
        daemons.iter().all(|d| running(d) == v2h)
    });

    // Refused everywhere, v2 kept: unsigned, an unknown key, tampered bytes, too large, a
    // release entry that is not a manifest.
    let unsigned = publish(&url, dir.path(), &variant(&testing, "v3"), &[]);
    let unknown = publish(
        &url,
        dir.path(),
        &variant(&testing, "v4"),
        &["--key", stranger.to_str().unwrap()],
    );
    let (tampered, huge) = hostile_releases(&url, &key, &testing);
    let expect = [
        (&unsigned, "signature"),
        (&unknown, "signature"),
        (&tampered, "tampered"),
        (&huge, "too-large"),
    ];
    wait_until(
        "every hostile release refused by all three",
        Duration::from_secs(15),
        || {
            let s = status(&url);
            expect.iter().all(|(h, why)| {
                nodes(version(&s, h), "refused")
                    == all_three
                        .iter()
                        .map(|n| format!("{n}:{why}"))
                        .collect::<Vec<_>>()
            }) && s["malformed"]
                .as_object()
                .is_some_and(|m| m.contains_key("xform.rack9"))
        },
    );
    assert!(daemons.iter().all(|d| running(d) == v2h));
    let s = status_now(&url);
    let refusals = s["daemons"][0]["guests"][0]["refused"].as_array().unwrap();
    assert!(
        refusals
            .iter()
            .any(|r| r["reason"] == "malformed" && r["hash"] == "release xform.rack9"),
        "{refusals:?}"
    );

    // Broken versions: another world, a configure that fails (arithmetic without its
    // expression), one that traps on every batch (rolled back after its quarantine).
    let wrong = publish(
        &url,
        dir.path(),
        &guest_bytes("testing_agent"),
        &["--key", key_s],
    );
    let bad_cfg = publish(
        &url,
        dir.path(),
        &guest_bytes("arithmetic"),
        &["--key", key_s],
    );
    wait_until(
        "wrong world and bad configure refused",
        Duration::from_secs(20),
        || {
            let s = status(&url);
            nodes(version(&s, &wrong), "refused")
                .iter()
                .filter(|n| n.ends_with(":wrong-world"))
                .count()
                == 3
                && nodes(version(&s, &bad_cfg), "refused")
                    .iter()
                    .filter(|n| n.ends_with(":configure"))
                    .count()
                    == 3
        },
    );
    assert!(daemons.iter().all(|d| running(d) == v2h));
    let trap = publish(
        &url,
        dir.path(),
        &guest_bytes("trap_always"),
        &["--key", key_s],
    );
    wait_until(
        "trap_always rolled back everywhere",
        Duration::from_secs(20),
        || {
            let s = status(&url);
            nodes(version(&s, &trap), "rolled-back") == all_three
                && nodes(version(&s, &v2h), "running") == all_three
        },
    );
    assert!(daemons.iter().all(|d| running(d) == v2h));
    let s = status_now(&url);
    let health = &s["daemons"][1]["guests"][0];
    assert_eq!(health["rolled-back"]["from"], trap.as_str(), "{health}");
    assert_eq!(health["rolled-back"]["to"], v2h.as_str(), "{health}");

    // Samples went on through every swap and failure: each came out once, none was lost.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    for (d, n) in daemons.iter().zip(&sent) {
        let n = n.load(Ordering::Relaxed);
        let seen = printed(d, n);
        assert_eq!(seen.len() as u64, n, "samples out != in");
        assert!(seen.iter().all(|v| *v < n));
        let (inn, out, lost) = pipeline_counts(d);
        assert_eq!((inn, out, lost), (n, n, 0));
    }
}

/// Writes, as a hostile peer with write access to the buckets would: a signed manifest whose
/// object holds other bytes of the same size, a signed manifest of 1 GiB, and a release
/// entry that is not a manifest. Returns the first two hashes.
fn hostile_releases(url: &str, key: &std::path::Path, testing: &[u8]) -> (String, String) {
    let seed = std::fs::read_to_string(key).unwrap();
    let seed: [u8; 32] =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, seed.trim())
            .unwrap()
            .try_into()
            .unwrap();
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let b = buckets::open(&async_nats::jetstream::new(client), FLEET, None)
            .await
            .unwrap();
        let real = variant(testing, "v5");
        let mut evil = real.clone();
        let at = evil.len() / 2;
        evil[at] ^= 0xff;
        // A fresh sequence: an old one would be refused as replayed before the bytes are read.
        let seq = chrono::Utc::now().timestamp_millis() as u64;
        let mut m = Manifest::new("xform", "all", &real, "mallory@nowhere", seq);
        m.sign(FLEET, &key);
        buckets::publish(&b, &m, &evil).await.unwrap();
        let tampered = m.sha256.clone();
        // Let the daemons see (and refuse) one release at a time: `xform.all` holds one.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut big = m.clone();
        big.sha256 = sha(b"a gigabyte that is never fetched");
        big.size = 1 << 30;
        big.sequence = Some(seq + 1);
        big.sign(FLEET, &key);
        buckets::publish(&b, &big, b"\0asm tiny").await.unwrap();
        b.releases
            .put(
                "xform.rack9",
                bytes::Bytes::from_static(b"{\"guest\": 42, \"not\": \"a manifest\""),
            )
            .await
            .unwrap();
        (tampered, big.sha256)
    })
}

#[test]
fn fleet_swap_at_20k_samples_per_second_loses_none() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(free_port(), &dir.path().join("nats"));
    let url = nats.url();
    // No trusted keys: unsigned releases run (the daemon warns at start).
    let loaded = Arc::new(DaemonProcess::start(&daemon_config(
        dir.path(),
        &url,
        "busy",
        &[],
        &[],
        "store",
    )));
    let idle = DaemonProcess::start(&daemon_config(dir.path(), &url, "idle", &[], &[], "store"));
    assert!(
        loaded
            .stderr
            .lock()
            .unwrap()
            .contains("trusted-keys is empty")
    );
    let testing = guest_bytes("testing");
    let v1 = publish(&url, dir.path(), &variant(&testing, "v1"), &[]);
    wait_until("v1 on both", Duration::from_secs(10), || {
        running(&loaded) == v1 && running(&idle) == v1
    });

    let (stop, sent, producer) = produce(std::slice::from_ref(&loaded), 5000, Duration::ZERO);
    std::thread::sleep(Duration::from_secs(1));
    let t = Instant::now();
    let before = sent[0].load(Ordering::Relaxed);
    let v2 = publish(&url, dir.path(), &variant(&testing, "v2"), &[]);
    wait_until("v2 on both", Duration::from_secs(10), || {
        running(&loaded) == v2 && running(&idle) == v2
    });
    std::thread::sleep(Duration::from_millis(500));
    let rate = (sent[0].load(Ordering::Relaxed) - before) as f64 / t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let n = sent[0].load(Ordering::Relaxed);
    eprintln!("{rate:.0} samples/s through the swap, {n} in all");
    assert!(rate >= 20_000.0, "only {rate:.0} samples/s");
    let (inn, out, lost) = pipeline_counts(&loaded);
    assert_eq!((inn, out, lost), (n, n, 0));
}
