//! HTTPS between two daemons with a self-signed CA: the central serves HTTPS and requires a
//! client certificate from that CA; a node's `http` sink with `tls-ca`, `tls-cert` and
//! `tls-key` delivers, and sinks without a client certificate, with one from another CA, or
//! without `tls-ca` (the system's roots do not know the CA) deliver nothing, say why, and keep
//! every sample queued.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

use super::rig::*;
use super::write_node;
use crate::common::*;

/// A CA that signs server and client certificates, written as PEM files under `dir`.
pub(super) struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    dir: PathBuf,
}

impl Ca {
    pub(super) fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.self_signed(&key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        Ca {
            cert,
            key,
            dir: dir.to_path_buf(),
        }
    }

    pub(super) fn pem(&self) -> PathBuf {
        let name = self
            .cert
            .params()
            .distinguished_name
            .get(&DnType::CommonName);
        let Some(rcgen::DnValue::Utf8String(name)) = name else {
            unreachable!("set in new")
        };
        self.dir.join(format!("{name}.pem"))
    }

    /// A certificate for `names` with `usage`: (cert file, key file).
    pub(super) fn issue(
        &self,
        file: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, file);
        p.extended_key_usages = vec![usage];
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let (c, k) = (
            self.dir.join(format!("{file}.crt")),
            self.dir.join(format!("{file}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }
}

/// A blocking HTTPS client that trusts only `ca` and presents `identity` when given.
fn https_client(ca: &Path, identity: Option<&(PathBuf, PathBuf)>) -> reqwest::blocking::Client {
    let mut b = reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(10))
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap());
    if let Some((cert, key)) = identity {
        let mut pem = std::fs::read(cert).unwrap();
        pem.extend(std::fs::read(key).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

fn http_sink(name: &str, port: u16, tls: &[(&str, &Path)]) -> String {
    let mut s = format!(
        "[[sink]]\nname = \"{name}\"\ntype = \"http\"\nurl = \"https://127.0.0.1:{port}/api/write\"\nmax-backoff = \"200ms\"\n"
    );
    for (field, file) in tls {
        s.push_str(&format!("{field} = \"{}\"\n", file.display()));
    }
    s
}

#[test]
fn https_with_a_client_certificate_required_and_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ca = Ca::new(dir, "test-ca");
    let other = Ca::new(dir, "other-ca");
    let server = ca.issue(
        "server",
        &["127.0.0.1", "localhost"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let client = ca.issue("client", &["node"], ExtendedKeyUsagePurpose::ClientAuth);
    let stranger = other.issue("stranger", &["node"], ExtendedKeyUsagePurpose::ClientAuth);

    let port = free_port();
    let central_toml = dir.join("central.toml");
    std::fs::write(
        &central_toml,
        format!(
            "{}\n[api]\ntls-cert = \"{}\"\ntls-key = \"{}\"\ntls-client-ca = \"{}\"\n",
            central_config(&dir.join("c"), None),
            server.0.display(),
            server.1.display(),
            ca.pem().display()
        ),
    )
    .unwrap();
    let https = https_client(&ca.pem(), Some(&client));
    let base = format!("https://127.0.0.1:{port}");
    let central = DaemonProcess::start_probing(
        &central_toml,
        port,
        |_| {},
        |_| {
            https
                .get(format!("{base}/api/healthcheck"))
                .send()
                .is_ok_and(|r| r.status().is_success())
        },
    );
    // The API itself refuses a client without a certificate, and plain HTTP.
    assert!(
        https_client(&ca.pem(), None)
            .get(format!("{base}/api/healthcheck"))
            .send()
            .is_err()
    );
    assert!(central.get("/api/healthcheck").is_err());

    // One node, four sinks to the same central: only the first has everything it needs.
    let (cert, key) = (client.0.as_path(), client.1.as_path());
    let sinks = [
        http_sink(
            "good",
            port,
            &[("tls-ca", &ca.pem()), ("tls-cert", cert), ("tls-key", key)],
        ),
        http_sink("no-cert", port, &[("tls-ca", &ca.pem())]),
        http_sink(
            "untrusted-cert",
            port,
            &[
                ("tls-ca", &ca.pem()),
                ("tls-cert", &stranger.0),
                ("tls-key", &stranger.1),
            ],
        ),
        http_sink("no-ca", port, &[("tls-cert", cert), ("tls-key", key)]),
    ];
    let node_toml = write_node(
        dir,
        "\"good\", \"no-cert\", \"untrusted-cert\", \"no-ca\"",
        &sinks.concat(),
    );
    let node = DaemonProcess::start(&node_toml);
    let t0 = chrono::Utc::now().timestamp() - 600;
    let total = 5 * HOSTS;
    post_hosts(&node, 0..total, t0);

    wait_until("the good sink delivered", Duration::from_secs(60), || {
        sink(&node, "good")["sent-samples"] == total
    });
    let to = t0 + (total / HOSTS) as i64;
    assert_all_there(
        "central over https",
        &[(0, total)],
        &central_values_at(&https, &base, t0, to),
        t0,
    );
    // Each refused for its own reason, named in the sink's last error: the server wants a
    // certificate; it does not know the client's CA; the client does not know the server's.
    for (name, why) in [
        ("no-cert", "certificaterequired"),
        ("untrusted-cert", "unknownca"),
        ("no-ca", "unknownissuer"),
    ] {
        wait_until(
            &format!("{name} tried a few times"),
            Duration::from_secs(30),
            || sink(&node, name)["retries"].as_u64() >= Some(3),
        );
        let s = sink(&node, name);
        assert_eq!(s["failing"], true, "{s}");
        assert_eq!(s["sent-samples"], 0, "{s}");
        assert_eq!(s["queued-samples"], total, "kept, not dropped: {s}");
        assert_eq!(s["dead-lettered-samples"], 0, "{s}");
        let error = s["last-error"][1].as_str().unwrap().to_lowercase();
        assert!(error.contains(why), "{name}: {error}");
    }
    // Still exactly what the good sink sent: nothing slipped through the refused ones.
    assert_eq!(central_values_at(&https, &base, t0, to).len() as u64, total);
}
