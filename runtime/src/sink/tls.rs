//! The clients a sink sends with: reqwest over rustls for HTTP(S), async-nats for NATS; both
//! verify the server against the system's roots, or against `tls-ca` alone when it is set, and
//! present `tls-cert`/`tls-key` when a server asks for a client certificate. Errors name the
//! config field whose file is missing or bad.

use std::path::Path;

use super::config::SinkConfig;

/// A field and what is wrong with it.
pub type FieldError = (&'static str, String);

fn read(base: &Path, field: &'static str, file: &Path) -> Result<Vec<u8>, FieldError> {
    let path = base.join(file);
    std::fs::read(&path).map_err(|e| (field, format!("{}: {e}", path.display())))
}

/// The HTTP client of an `http` or `remote-write` sink.
pub fn http_client(cfg: &SinkConfig, base: &Path) -> Result<reqwest::Client, FieldError> {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(cfg.timeout)
        .connect_timeout(cfg.timeout.min(crate::nats::CONNECT_TIMEOUT))
        .user_agent(concat!("wasmon/", env!("CARGO_PKG_VERSION")));
    if let Some(ca) = &cfg.auth.tls_ca {
        let pem = read(base, "tls-ca", ca)?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ("tls-ca", format!("{}: {e}", ca.display())))?;
        if certs.is_empty() {
            return Err(("tls-ca", format!("{}: no certificate in it", ca.display())));
        }
        b = b.tls_built_in_root_certs(false);
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    if let (Some(cert), Some(key)) = (&cfg.auth.tls_cert, &cfg.auth.tls_key) {
        let mut pem = read(base, "tls-cert", cert)?;
        pem.push(b'\n');
        pem.extend(read(base, "tls-key", key)?);
        let id = reqwest::Identity::from_pem(&pem).map_err(|e| {
            (
                "tls-cert",
                format!("{} with {}: {e}", cert.display(), key.display()),
            )
        })?;
        b = b.identity(id);
    }
    b.build()
        .map_err(|e| ("url", format!("building the HTTP client: {e}")))
}

/// Reads every file a NATS sink names, so that a missing one is a config error at (re)load.
pub fn check_nats_files(cfg: &SinkConfig, base: &Path) -> Result<(), FieldError> {
    for (field, file) in cfg.auth.files() {
        if let Some(f) = file {
            read(base, field, f)?;
        }
    }
    Ok(())
}

/// Connect options of a `nats` or `jetstream` sink.
pub async fn nats_options(
    cfg: &SinkConfig,
    base: &Path,
) -> Result<async_nats::ConnectOptions, String> {
    cfg.connection()
        .options(base)
        .await
        .map_err(|e| e.to_string())
}
