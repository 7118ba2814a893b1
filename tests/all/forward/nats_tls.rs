//! NATS over TLS: nats-server with a certificate from a self-signed CA; a `nats` sink with
//! `tls://` and `tls-ca` delivers, one without `tls-ca` (the system's roots do not know the CA)
//! fails with the TLS reason and keeps its samples queued.

use std::time::Duration;

use futures_util::StreamExt;
use rcgen::ExtendedKeyUsagePurpose;

use super::rig::*;
use super::tls::Ca;
use super::write_node;
use crate::common::*;

#[test]
fn a_nats_sink_verifies_the_server_over_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ca = Ca::new(dir, "nats-ca");
    let (cert, key) = ca.issue(
        "nats-server",
        &["127.0.0.1", "localhost"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let port = free_port();
    let tls_args = [
        "--tls".to_string(),
        format!("--tlscert={}", cert.display()),
        format!("--tlskey={}", key.display()),
    ];
    let _nats = NatsServer::start_with(port, &dir.join("nats"), &tls_args);
    let url = format!("tls://127.0.0.1:{port}");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_rt = rt.enter();
    let (_client, mut sub) = rt.block_on(async {
        let c = async_nats::ConnectOptions::new()
            .add_root_certificates(ca.pem())
            .require_tls(true)
            .connect(url.as_str())
            .await
            .unwrap();
        let sub = c.subscribe("fwd.tls").await.unwrap();
        c.flush().await.unwrap();
        (c, sub)
    });
    let sink_def = |name: &str, ca_line: &str| {
        format!(
            "[[sink]]\nname = \"{name}\"\ntype = \"nats\"\nurl = \"{url}\"\nsubject = \"fwd.tls\"\nmax-backoff = \"200ms\"\n{ca_line}\n"
        )
    };
    let node_toml = write_node(
        dir,
        "\"trusting\", \"untrusting\"",
        &[
            sink_def("trusting", &format!("tls-ca = \"{}\"", ca.pem().display())),
            sink_def("untrusting", ""),
        ]
        .concat(),
    );
    let node = DaemonProcess::start(&node_toml);
    let base = chrono::Utc::now().timestamp() - 600;
    let total = 2 * HOSTS;
    post_hosts(&node, 0..total, base);

    let mut lines = 0u64;
    rt.block_on(async {
        while lines < total {
            let msg = tokio::time::timeout(Duration::from_secs(30), sub.next())
                .await
                .expect("no message for 30 s")
                .unwrap();
            lines += std::str::from_utf8(&msg.payload).unwrap().lines().count() as u64;
        }
    });
    assert_eq!(lines, total, "only the trusting sink delivers");
    wait_until("the untrusting sink tried", Duration::from_secs(30), || {
        sink(&node, "untrusting")["retries"].as_u64() >= Some(2)
    });
    let s = sink(&node, "untrusting");
    assert_eq!(
        (s["failing"].as_bool(), s["queued-samples"].as_u64()),
        (Some(true), Some(total)),
        "{s}"
    );
    let error = s["last-error"][1].as_str().unwrap().to_lowercase();
    assert!(
        error.contains("unknownissuer") || error.contains("certificate"),
        "{error}"
    );
    assert_eq!(sink(&node, "trusting")["sent-samples"], total);
}
