//! The fleet on a 3-server JetStream cluster (issue 31), its buckets with replicas 3: with the
//! server one daemon is connected to SIGKILLed, a canary release reaches the canary only, a
//! release for all reaches every daemon (the one whose server died through another), and a
//! version that traps is rolled back everywhere, samples flowing all along, none lost or
//! doubled. Then two of the three servers die (no quorum): `wasmon fleet publish` fails,
//! naming what it could not write, and once the servers are back no release names what it
//! tried to publish and every daemon still runs the last good version.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::rollout::{printed, produce};
use super::*;
use crate::cluster::{Cluster, current_server, debian_server};
use crate::common::DaemonProcess;

/// Replicas of the fleet's buckets: every server holds them.
const REPLICAS: &str = "3";

/// A release of `bytes` as guest `xform` through `wasmon fleet --replicas 3 publish`: the
/// hash, or what the CLI printed when it failed.
fn try_publish(
    nats: &str,
    dir: &std::path::Path,
    bytes: &[u8],
    extra: &[&str],
) -> Result<String, String> {
    let file = dir.join(format!("{}.wasm", &sha(bytes)[..12]));
    std::fs::write(&file, bytes).unwrap();
    let mut args = vec![
        "--replicas",
        REPLICAS,
        "publish",
        file.to_str().unwrap(),
        "--guest",
        "xform",
    ];
    args.extend_from_slice(extra);
    try_fleet_cli(nats, &args).map(|_| sha(bytes))
}

/// The number of replicas of each of the fleet's three streams.
fn bucket_replicas(urls: &str) -> Vec<usize> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let js = async_nats::jetstream::new(
            async_nats::connect(urls.split(',').collect::<Vec<_>>())
                .await
                .unwrap(),
        );
        let mut out = Vec::new();
        for stream in [
            format!("OBJ_{}", wasmon::fleet::buckets::components_bucket(FLEET)),
            format!("KV_{}", wasmon::fleet::buckets::releases_bucket(FLEET)),
            format!("KV_{}", wasmon::fleet::buckets::health_bucket(FLEET)),
        ] {
            let mut s = js.get_stream(&stream).await.unwrap();
            out.push(s.info().await.unwrap().config.num_replicas);
        }
        out
    })
}

/// [`wait_until`], printing the daemons' logs when it times out.
fn wait_or_dump(
    what: &str,
    within: Duration,
    daemons: &[Arc<DaemonProcess>],
    mut check: impl FnMut() -> bool,
) -> Duration {
    let t = Instant::now();
    while !check() {
        if t.elapsed() > within {
            for d in daemons {
                eprintln!("daemon log:\n{}", d.stderr.lock().unwrap());
            }
            panic!("timed out after {within:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    t.elapsed()
}

fn fleet_on_a_cluster_survives_the_loss_of_a_server(bin: PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let server = crate::cluster::version(&bin);
    let mut cluster = Cluster::start(&bin, &dir.path().join("nats"), 3);
    let url = cluster.urls();
    let (key, public) = keygen(&url, dir.path(), "signing.key");
    let key_s = key.to_str().unwrap();
    let daemons = start_printing(
        dir.path(),
        &url,
        &public,
        &[("a", &["canary"]), ("b", &[]), ("c", &[])],
        &format!("replicas = {REPLICAS}\n"),
    );
    let (stop, sent, producer) = produce(&daemons, 10, Duration::from_millis(20));
    let testing = guest_bytes("testing");
    let all_three = vec!["a".to_string(), "b".into(), "c".into()];

    let v1 = try_publish(
        &url,
        dir.path(),
        &variant(&testing, "v1"),
        &["--key", key_s],
    )
    .unwrap();
    wait_until("v1 on every daemon", Duration::from_secs(30), || {
        daemons.iter().all(|d| running(d) == v1)
    });
    assert_eq!(bucket_replicas(&url), [3, 3, 3], "the fleet's buckets");

    // The server daemon c is connected to dies (and stays down through the releases).
    let down = cluster
        .connected_from(daemons[2].child.id())
        .expect("daemon c is connected to a server");
    let t = Instant::now();
    cluster.kill(down);
    eprintln!("nats-server {server}: s{down} (daemon c's) SIGKILLed");

    // Canary first: the canary only. The CLI's seeds still begin with the dead server's.
    let v2 = variant(&testing, "v2");
    let publish_retrying = |bytes: &[u8], extra: &[&str]| {
        // A publish may fail while the cluster elects leaders for the buckets (a failure
        // reported, nothing half-written): it is run again, as an operator would.
        let mut last = String::new();
        for _ in 0..6 {
            match try_publish(&url, dir.path(), bytes, extra) {
                Ok(h) => return h,
                Err(e) => {
                    eprintln!("publish failed (retried): {e}");
                    last = e;
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
        }
        panic!("nats-server {server}: publish with one server down failed: {last}");
    };
    let v2h = publish_retrying(&v2, &["--key", key_s, "--group", "canary"]);
    eprintln!(
        "nats-server {server}: canary release published {:.1} s after the server died",
        t.elapsed().as_secs_f64()
    );
    wait_until("v2 on the canary", Duration::from_secs(30), || {
        running(&daemons[0]) == v2h
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(running(&daemons[1]), v1);
    assert_eq!(running(&daemons[2]), v1);
    // Then for all: daemon c converges through another server.
    let t = Instant::now();
    publish_retrying(&v2, &["--key", key_s]);
    let took = wait_or_dump("v2 everywhere", Duration::from_secs(30), &daemons, || {
        daemons.iter().all(|d| running(d) == v2h)
    });
    let now_on = cluster.connected_from(daemons[2].child.id());
    assert!(
        now_on.is_some_and(|s| s != down),
        "daemon c is connected to s{now_on:?}, its server s{down} being down"
    );
    eprintln!(
        "nats-server {server}: v2 on all three {took:?} after its publish returned ({:.1} s with it); daemon c through s{}",
        t.elapsed().as_secs_f64(),
        now_on.unwrap()
    );
    // A version that traps on every batch: rolled back everywhere, v2 running on.
    let trap = publish_retrying(&guest_bytes("trap_always"), &["--key", key_s]);
    wait_or_dump(
        "trap_always rolled back everywhere",
        Duration::from_secs(40),
        &daemons,
        || {
            let s = status(&url);
            nodes(version(&s, &trap), "rolled-back") == all_three
                && nodes(version(&s, &v2h), "running") == all_three
        },
    );
    assert!(daemons.iter().all(|d| running(d) == v2h));
    cluster.restart(down);
    cluster.wait_ready(Duration::from_secs(60));

    // No quorum: two of three down. The publish fails (no half-written release), in bounded
    // time.
    let (x, y) = ((down + 1) % 3, (down + 2) % 3);
    cluster.kill(x);
    cluster.kill(y);
    let t = Instant::now();
    let v3 = variant(&testing, "v3");
    let failed = try_publish(&url, dir.path(), &v3, &["--key", key_s]);
    let took = t.elapsed();
    let err = failed.expect_err("a publish without quorum succeeded");
    eprintln!(
        "nats-server {server}: publish without quorum failed after {:.1} s: {}",
        took.as_secs_f64(),
        err.trim()
    );
    assert!(
        took < Duration::from_secs(60),
        "the failing publish took {took:?}"
    );
    assert!(
        !err.contains("panicked")
            && [
                "no release was written",
                "nothing was published",
                "the release was not written"
            ]
            .iter()
            .any(|w| err.contains(w)),
        "a failure that says nothing was published: {err}"
    );
    cluster.restart(x);
    cluster.restart(y);
    cluster.wait_ready(Duration::from_secs(60));
    // Nothing half-published: the release for all still names v2, no daemon took v3.
    let mut release = Vec::new();
    wait_until("the release readable", Duration::from_secs(60), || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        release = rt
            .block_on(async {
                let c = async_nats::connect(url.split(',').collect::<Vec<_>>())
                    .await
                    .ok()?;
                let b = wasmon::fleet::buckets::open(&async_nats::jetstream::new(c), FLEET, None)
                    .await
                    .ok()?;
                let all = wasmon::fleet::buckets::all_entries(&b.releases)
                    .await
                    .ok()?;
                all.into_iter()
                    .find(|(k, _)| k == "xform.all")
                    .map(|(_, v)| v)
            })
            .unwrap_or_default();
        !release.is_empty()
    });
    let m = wasmon::fleet::Manifest::parse(&release).unwrap();
    assert_eq!(m.sha256, trap, "the last release written is trap_always's");
    std::thread::sleep(Duration::from_secs(2));
    let v3h = sha(&v3);
    for d in &daemons {
        assert_eq!(running(d), v2h, "{}", d.stderr.lock().unwrap());
    }
    assert!(version(&status_now(&url), &v3h).is_none());

    // Samples went on through the server's loss, the swaps and the rollback: each once.
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    for (d, n) in daemons.iter().zip(&sent) {
        let n = n.load(Ordering::Relaxed);
        let seen = printed(d, n);
        assert_eq!(seen.len() as u64, n, "samples out != in");
        let (inn, out, lost) = pipeline_counts(d);
        assert_eq!((inn, out, lost), (n, n, 0));
    }
}

#[test]
fn fleet_on_a_cluster_survives_the_loss_of_a_server_nats_2_9() {
    fleet_on_a_cluster_survives_the_loss_of_a_server(debian_server());
}

#[test]
fn fleet_on_a_cluster_survives_the_loss_of_a_server_current_nats() {
    fleet_on_a_cluster_survives_the_loss_of_a_server(current_server());
}
