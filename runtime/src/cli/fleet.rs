//! `wasmon fleet --nats URL --name FLEET keygen|publish|withdraw|status`: make a signing key,
//! publish a component to every daemon of a fleet (or a group), withdraw a release, and see
//! which version runs where.
//! A thin shell over `fleet`: the buckets, manifests and status are its.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use base64::Engine as _;

use crate::fleet::{FleetConfig, Manifest, buckets, config::ALL};

/// `wasmon fleet ...`
#[derive(clap::Args, Debug, Clone)]
pub struct FleetArgs {
    /// The fleet's NATS server (with JetStream), or a cluster's seeds separated by commas.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// The fleet's name (`[fleet] name`).
    #[arg(long)]
    pub name: String,
    /// Credentials and TLS (`[fleet]`'s fields as flags: `--tls-ca FILE` ...).
    #[command(flatten)]
    pub auth: crate::nats::Auth,
    /// Replicas of the fleet's buckets, should this command create them (`[fleet] replicas`;
    /// 1 when not given). When given, existing buckets with another number are an error.
    #[arg(long)]
    pub replicas: Option<usize>,
    #[command(subcommand)]
    pub cmd: FleetCmd,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum FleetCmd {
    /// Make an Ed25519 signing key; prints its public key (for `trusted-keys`).
    Keygen {
        /// Where the private key goes (created with mode 0600; an existing file is kept).
        #[arg(long)]
        out: PathBuf,
    },
    /// Publish a component as guest NAME to the fleet (or one group of it).
    Publish {
        /// The component (.wasm).
        file: PathBuf,
        /// The guest name stages and agents use.
        #[arg(long)]
        guest: String,
        /// The signing key (from `keygen`); without it the release is unsigned.
        #[arg(long)]
        key: Option<PathBuf>,
        /// Only daemons of this group run it (default: every daemon).
        #[arg(long)]
        group: Option<String>,
        /// Components no release names any more are deleted afterwards, once this old.
        #[arg(long, default_value = "60s", value_parser = crate::duration::parse)]
        gc_grace: std::time::Duration,
    },
    /// Delete the release of guest NAME (for every daemon, or one group): daemons that ran
    /// it go back to the guest's release for `all` (a group's release withdrawn), else to its
    /// local version (guests-dir or bundled).
    Withdraw {
        #[arg(long)]
        guest: String,
        /// The group whose release goes (default: the release for every daemon).
        #[arg(long)]
        group: Option<String>,
        /// Components no release names any more are deleted afterwards, once this old.
        #[arg(long, default_value = "60s", value_parser = crate::duration::parse)]
        gc_grace: std::time::Duration,
    },
    /// Per daemon: guests, versions, health, refusals; per version: where it runs.
    Status {
        #[arg(long)]
        json: bool,
    },
}

fn read_key(path: &std::path::Path) -> Result<ed25519_dalek::SigningKey> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .with_context(|| format!("{}: not base64", path.display()))?;
    let seed: [u8; 32] = raw.try_into().map_err(|v: Vec<u8>| {
        anyhow::anyhow!(
            "{}: {} bytes, a signing key from `wasmon fleet keygen` has 32",
            path.display(),
            v.len()
        )
    })?;
    Ok(ed25519_dalek::SigningKey::from_bytes(&seed))
}

fn keygen(out: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut seed = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut seed);
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(out)
        .with_context(|| {
            format!(
                "creating {} (an existing key is never overwritten)",
                out.display()
            )
        })?;
    writeln!(f, "{}", b64.encode(seed))?;
    f.sync_all()?;
    println!("{}", b64.encode(key.verifying_key().as_bytes()));
    Ok(())
}

fn config_of(a: &FleetArgs) -> FleetConfig {
    FleetConfig {
        nats: a.nats.clone(),
        name: a.name.clone(),
        groups: Vec::new(),
        trusted_keys: Vec::new(),
        node: String::new(),
        rollback_window: crate::fleet::config::DEFAULT_ROLLBACK_WINDOW,
        max_component_size: crate::fleet::config::DEFAULT_MAX_COMPONENT_SIZE,
        start_wait: crate::fleet::config::DEFAULT_START_WAIT,
        replicas: a.replicas,
        auth: a.auth.clone(),
    }
}

async fn open(a: &FleetArgs) -> Result<buckets::Buckets> {
    let cfg = config_of(a);
    cfg.check().map_err(anyhow::Error::msg)?;
    let client = tokio::time::timeout(
        buckets::OP_TIMEOUT,
        buckets::connect(&cfg, std::path::Path::new("")),
    )
    .await
    .map_err(|_| anyhow::anyhow!("connecting to {} timed out", a.nats))??;
    let js = async_nats::jetstream::new(client);
    buckets::open(&js, &a.name, a.replicas).await
}

/// Deletes the components no release names any more (after a publish or a withdraw); a
/// failure is reported, not fatal: the release itself is written.
async fn collect(b: &buckets::Buckets, grace: std::time::Duration) {
    match buckets::collect_garbage(b, grace).await {
        Ok(c) if c.objects > 0 => println!(
            "deleted {} component(s) no release names any more ({} bytes)",
            c.objects, c.bytes
        ),
        Ok(_) => {}
        Err(e) => eprintln!("warning: collecting unused components: {e:#}"),
    }
}

fn publisher() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("{user}@{}", crate::util::hostname())
}

/// The group a release is for (`all` unless `--group`), with both names checked.
fn target(guest: &str, group: &Option<String>) -> Result<String> {
    let group = group.clone().unwrap_or_else(|| ALL.to_string());
    for (what, v) in [("--guest", guest), ("--group", group.as_str())] {
        if !crate::fleet::config::name_ok(v) {
            bail!("{what} {v:?}: letters, digits, '-' and '_' only");
        }
    }
    Ok(group)
}

/// Runs `wasmon fleet ...`.
pub async fn fleet_cli(a: FleetArgs) -> Result<()> {
    match &a.cmd {
        FleetCmd::Keygen { out } => keygen(out),
        FleetCmd::Publish {
            file,
            guest,
            key,
            group,
            gc_grace,
        } => {
            let group = target(guest, group)?;
            let bytes =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            if !bytes.starts_with(b"\0asm") {
                bail!("{}: not a WebAssembly component", file.display());
            }
            let key = key.as_deref().map(read_key).transpose()?;
            // Until the release is written nothing reaches a daemon: a stored component that
            // no release names is deleted by a later publish's collection.
            let nothing = || format!("nothing was published to fleet {}", a.name);
            let b = open(&a).await.with_context(nothing)?;
            let sequence = buckets::next_sequence(&b, guest)
                .await
                .with_context(|| format!("reading the releases of {guest}"))
                .with_context(nothing)?;
            let mut m = Manifest::new(guest, &group, &bytes, &publisher(), sequence);
            if let Some(k) = &key {
                m.sign(&a.name, k);
            }
            let rev = buckets::publish(&b, &m, &bytes).await?;
            println!(
                "published {guest} {} ({} bytes) to {} of fleet {}{} (revision {rev})",
                m.sha256,
                m.size,
                if group == ALL {
                    "every daemon".to_string()
                } else {
                    format!("group {group}")
                },
                a.name,
                if key.is_some() {
                    ", signed"
                } else {
                    ", unsigned"
                },
            );
            collect(&b, *gc_grace).await;
            Ok(())
        }
        FleetCmd::Withdraw {
            guest,
            group,
            gc_grace,
        } => {
            let group = target(guest, group)?;
            let b = open(&a).await?;
            if !buckets::withdraw(&b, guest, &group).await? {
                bail!(
                    "fleet {} has no release of {guest} for {}",
                    a.name,
                    if group == ALL {
                        "every daemon (`all`)".to_string()
                    } else {
                        format!("group {group}")
                    }
                );
            }
            println!(
                "withdrew the release of {guest} for {group} in fleet {}",
                a.name
            );
            collect(&b, *gc_grace).await;
            Ok(())
        }
        FleetCmd::Status { json } => {
            let b = open(&a).await?;
            let status = crate::fleet::status_of(&b, &a.name).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", status.render());
            }
            Ok(())
        }
    }
}
