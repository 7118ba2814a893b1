//! HTTPS for the daemon's API (`[api] tls-cert`/`tls-key`, optionally `tls-client-ca` to
//! require client certificates): rustls with ring, no OpenSSL. Handshakes run beside the
//! accept loop, each bounded in time, so a client that opens a connection and sends nothing
//! holds one task for [`HANDSHAKE_TIMEOUT`] and never the listener.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

/// A handshake not finished by then is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; more connections wait in the kernel's backlog.
pub const MAX_HANDSHAKES: usize = 1024;
/// Handshaken connections waiting for the server to take them.
const READY: usize = 256;

/// Why the TLS settings were refused; names the field.
#[derive(Debug, thiserror::Error)]
#[error("[api] {field}: {problem}")]
pub struct TlsError {
    pub field: &'static str,
    pub problem: String,
}

fn err(field: &'static str, problem: impl Into<String>) -> TlsError {
    TlsError {
        field,
        problem: problem.into(),
    }
}

fn certs(
    field: &'static str,
    path: &Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, TlsError> {
    let pem = std::fs::read(path).map_err(|e| err(field, format!("{}: {e}", path.display())))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| err(field, format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(err(
            field,
            format!("{}: no PEM certificate in it", path.display()),
        ));
    }
    Ok(certs)
}

/// The server's TLS configuration from PEM files.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certs("tls-cert", cert)?;
    let pem = std::fs::read(key).map_err(|e| err("tls-key", format!("{}: {e}", key.display())))?;
    let key_der = rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| err("tls-key", format!("{}: {e}", key.display())))?
        .ok_or_else(|| {
            err(
                "tls-key",
                format!("{}: no PEM private key in it", key.display()),
            )
        })?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| err("tls-cert", e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs("tls-client-ca", ca)? {
                roots
                    .add(c)
                    .map_err(|e| err("tls-client-ca", format!("{}: {e}", ca.display())))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| err("tls-client-ca", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut cfg = builder.with_single_cert(chain, key_der).map_err(|e| {
        err(
            "tls-key",
            format!("does not match tls-cert or is unusable: {e}"),
        )
    })?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A TCP listener whose connections come out TLS-handshaken, for `axum::serve`.
pub struct TlsListener {
    ready: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = tokio::sync::mpsc::channel(READY);
        let acceptor = TlsAcceptor::from(config);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (stream, addr) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, do not spin.
                        tracing::warn!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, addr)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task ended (its runtime is shutting down): no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A client that connects and never starts its handshake holds nothing up: the next
    /// client's handshaken connection is taken at once, and the silent one never is.
    #[tokio::test]
    async fn a_silent_client_does_not_hold_up_the_next() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert_pem, key_pem) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert_pem, cert.cert.pem()).unwrap();
        std::fs::write(&key_pem, cert.key_pair.serialize_pem()).unwrap();
        let config = server_config(&cert_pem, &key_pem, None).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut listener = TlsListener::new(tcp, config).unwrap();

        let _silent = TcpStream::connect(addr).await.unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.cert.der().clone()).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let talk = tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let mut tls = connector.connect(name, tcp).await.unwrap();
            tls.write_all(b"ping").await.unwrap();
            tls.flush().await.unwrap();
        });
        let (mut conn, _) = tokio::time::timeout(
            Duration::from_secs(5),
            axum::serve::Listener::accept(&mut listener),
        )
        .await
        .expect("the handshaken client waited behind the silent one");
        let mut got = [0u8; 4];
        conn.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        talk.await.unwrap();
        // The silent one is never handed over (until its handshake times out and it is dropped).
        assert!(
            tokio::time::timeout(
                Duration::from_millis(300),
                axum::serve::Listener::accept(&mut listener)
            )
            .await
            .is_err()
        );
    }
}
