//! A daemon that starts while NATS is down runs the last versions it verified (kept on disk,
//! here an 18 MB Python component) and converges to the fleet's current version once NATS is
//! back; one started after its release was withdrawn starts on its local version.

use std::time::Duration;

use super::*;
use crate::common::{DaemonProcess, NatsServer, free_port, guest_bytes};
use crate::polyglot::built;

#[test]
fn fleet_daemon_started_without_nats_runs_kept_versions_then_converges() {
    let python = std::fs::read(built("python", "template")).unwrap();
    assert!(
        python.len() > 10 << 20,
        "the Python guest is {} bytes",
        python.len()
    );
    let dir = tempfile::tempdir().unwrap();
    let (port, store) = (free_port(), dir.path().join("nats"));
    let nats = NatsServer::start(port, &store);
    let url = nats.url();
    let (key, public) = keygen(&url, dir.path(), "signing.key");
    let key_s = key.to_str().unwrap();
    let cfg = daemon_config(dir.path(), &url, "solo", &[], &[&public], "store");
    let mut d = DaemonProcess::start(&cfg);

    // 18 MB through the object store; its compile (~20 s in a debug build) is off the
    // pipeline's thread.
    let py = publish(&url, dir.path(), &python, &["--key", key_s]);
    wait_until(
        "the Python version running",
        Duration::from_secs(90),
        || running(&d) == py,
    );

    // The daemon dies; the fleet moves on; NATS goes away.
    let _ = d.child.kill();
    let _ = d.child.wait();
    let v2 = publish(
        &url,
        dir.path(),
        &variant(&guest_bytes("testing"), "v2"),
        &["--key", key_s],
    );
    drop(nats);

    // Started without NATS: the kept Python version, verified again from disk, runs from
    // the first sample on (its compiled code is in the daemon's cache).
    d = DaemonProcess::start(&cfg);
    assert_eq!(running(&d), py, "{}", d.stderr.lock().unwrap());
    let r = d.post(
        "/api/pipelines/p/samples",
        "{\"name\":\"seq\",\"resource\":\"r\",\"value\":1}\n",
    );
    assert!(r.status().is_success());

    // NATS is back: the daemon converges to the fleet's version.
    let nats = NatsServer::start(port, &store);
    let took = wait_until("converged to v2", Duration::from_secs(15), || {
        running(&d) == v2
    });
    eprintln!("converged {took:?} after NATS returned");
    wait_until(
        "fleet status shows v2 on solo",
        Duration::from_secs(10),
        || nodes(version(&status(&nats.url()), &v2), "running") == ["solo"],
    );

    // Withdrawn while the daemon is down: it starts on its local version (guests-dir), not
    // on the withdrawn one it kept.
    let _ = d.child.kill();
    let _ = d.child.wait();
    fleet_cli(&nats.url(), &["withdraw", "--guest", "xform"]);
    let d = DaemonProcess::start(&cfg);
    let local = sha(&variant(&guest_bytes("testing"), "local"));
    assert_eq!(running(&d), local, "{}", d.stderr.lock().unwrap());
}
