//! The fleet's JetStream layout, and the only code that talks to it: the components object
//! store (objects named by their sha256), the releases bucket (`GUEST.GROUP` -> manifest) and
//! the health bucket (`NODE` -> daemon, `NODE.GUEST` -> health). Opening creates what is
//! absent (with `[fleet] replicas`); fetching refuses an object larger than asked before
//! reading its chunks; the publisher deletes components no release names any more.

use std::time::Duration;

use async_nats::jetstream::{self, kv, object_store};
use tokio::io::AsyncReadExt;

use super::manifest::{Manifest, Reason, Refusal};

pub fn components_bucket(fleet: &str) -> String {
    format!("wasmon-fleet-{fleet}")
}
pub fn releases_bucket(fleet: &str) -> String {
    format!("wasmon-fleet-{fleet}-releases")
}
pub fn health_bucket(fleet: &str) -> String {
    format!("wasmon-fleet-{fleet}-health")
}

/// Key of a release in the releases bucket.
pub fn release_key(guest: &str, group: &str) -> String {
    format!("{guest}.{group}")
}

/// Chunks of an object: JetStream's default max payload is 1 MiB; 256 KiB chunks keep an
/// 18 MB component at ~72 messages.
const CHUNK: usize = 256 << 10;
/// Deadline of one bucket operation (a NATS that went away must not hang a daemon's fleet
/// task forever).
pub const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline of fetching one component (18 MB at a few MB/s over a slow link).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// The fleet's three buckets.
#[derive(Clone)]
pub struct Buckets {
    pub components: object_store::ObjectStore,
    pub releases: kv::Store,
    pub health: kv::Store,
}

/// A transient failure (NATS unreachable, timeout): retried, never reported as a refusal.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Transient(pub String);

/// Whether fetching failed for good (a refusal) or for now.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Transient(#[from] Transient),
}

/// Opens the fleet's buckets, creating those that do not exist with `want` replicas
/// (`[fleet] replicas`, 1 when not set); when set, an existing bucket with another number is
/// an error naming both.
pub async fn open(
    js: &jetstream::Context,
    fleet: &str,
    want: Option<usize>,
) -> anyhow::Result<Buckets> {
    let name = components_bucket(fleet);
    let replicas = want.unwrap_or(1);
    let components = match js.get_object_store(&name).await {
        Ok(s) => {
            crate::nats::check_stream_replicas(js, &format!("OBJ_{name}"), want)
                .await
                .map_err(anyhow::Error::msg)?;
            s
        }
        Err(_) => match js
            .create_object_store(object_store::Config {
                bucket: name.clone(),
                description: Some(format!("wasmon fleet {fleet}: components by sha256")),
                num_replicas: replicas,
                ..Default::default()
            })
            .await
        {
            Ok(s) => s,
            Err(e) => js.get_object_store(&name).await.map_err(|_| {
                anyhow::anyhow!("creating object store {name} with {replicas} replica(s): {e}")
            })?,
        },
    };
    Ok(Buckets {
        components,
        releases: crate::nats::open_kv_bucket(js, &releases_bucket(fleet), Duration::ZERO, want)
            .await?,
        health: crate::nats::open_kv_bucket(js, &health_bucket(fleet), Duration::ZERO, want)
            .await?,
    })
}

/// Connects as `wasmon fleet` and the daemons do: the sinks' token, credentials and TLS.
pub async fn connect(
    cfg: &super::FleetConfig,
    base: &std::path::Path,
) -> anyhow::Result<async_nats::Client> {
    Ok(cfg.connection().connect(base).await?)
}

/// Stores `bytes` under their hash (kept if already there) and writes the release.
pub async fn publish(b: &Buckets, manifest: &Manifest, bytes: &[u8]) -> anyhow::Result<u64> {
    let have = b.components.info(&manifest.sha256).await.ok();
    if have.is_none_or(|i| i.size as u64 != manifest.size) {
        let meta = object_store::ObjectMetadata {
            name: manifest.sha256.clone(),
            description: Some(format!("{} ({} bytes)", manifest.guest, manifest.size)),
            chunk_size: Some(CHUNK),
            ..Default::default()
        };
        let mut reader = bytes;
        b.components
            .put(meta, &mut reader)
            .await
            .map_err(|e| anyhow::anyhow!("storing the component: {e}"))?;
    }
    let key = release_key(&manifest.guest, &manifest.group);
    let rev = b
        .releases
        .put(&key, serde_json::to_vec(manifest)?.into())
        .await
        .map_err(|e| anyhow::anyhow!("writing release {key}: {e}"))?;
    Ok(rev)
}

/// Deletes the release of `guest` for `group`: daemons that ran it go back to another
/// release of the guest for their groups, or to its local version. `Ok(false)`: there was
/// none.
pub async fn withdraw(b: &Buckets, guest: &str, group: &str) -> anyhow::Result<bool> {
    let key = release_key(guest, group);
    let there = b
        .releases
        .get(&key)
        .await
        .map_err(|e| anyhow::anyhow!("reading release {key}: {e}"))?
        .is_some();
    if there {
        b.releases
            .delete(&key)
            .await
            .map_err(|e| anyhow::anyhow!("deleting release {key}: {e}"))?;
    }
    Ok(there)
}

/// What [`collect_garbage`] deleted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub objects: usize,
    pub bytes: u64,
}

/// Deletes the components no release references any more (superseded or withdrawn), except
/// those written in the last `grace`: another publisher may have stored its object and not
/// yet written the release that names it. Daemons keep what they run on disk, so a daemon
/// rolling back to a deleted version does not need its object.
pub async fn collect_garbage(b: &Buckets, grace: Duration) -> anyhow::Result<Collected> {
    use futures_util::StreamExt;
    let referenced: std::collections::HashSet<String> = all_entries(&b.releases)
        .await?
        .into_iter()
        .filter_map(|(_, v)| Some(Manifest::parse(&v).ok()?.sha256))
        .collect();
    let mut list = b
        .components
        .list()
        .await
        .map_err(|e| anyhow::anyhow!("listing the components: {e}"))?;
    let cutoff = chrono::Utc::now().timestamp() - grace.as_secs() as i64;
    let mut stale = Vec::new();
    while let Some(info) = list.next().await {
        let info = info.map_err(|e| anyhow::anyhow!("listing the components: {e}"))?;
        let old_enough = info.modified.is_none_or(|t| t.unix_timestamp() <= cutoff);
        if !info.deleted && old_enough && !referenced.contains(&info.name) {
            stale.push((info.name, info.size as u64));
        }
    }
    let mut done = Collected::default();
    for (name, size) in stale {
        b.components
            .delete(&name)
            .await
            .map_err(|e| anyhow::anyhow!("deleting component {name}: {e}"))?;
        done.objects += 1;
        done.bytes += size;
    }
    Ok(done)
}

/// The sequence of a new release of `guest`: the larger of the time in milliseconds and one
/// more than the highest sequence of its releases in the bucket (a publisher whose clock is
/// behind still publishes something newer; two publishers a millisecond apart still differ
/// by the bucket's order in the common case).
pub async fn next_sequence(b: &Buckets, guest: &str) -> anyhow::Result<u64> {
    let highest = all_entries(&b.releases)
        .await?
        .into_iter()
        .filter(|(k, _)| k.split_once('.').is_some_and(|(g, _)| g == guest))
        .filter_map(|(_, v)| Manifest::parse(&v).ok()?.sequence)
        .max()
        .unwrap_or(0);
    let now = chrono::Utc::now().timestamp_millis().max(0) as u64;
    Ok(now.max(highest + 1))
}

/// Fetches the component a manifest names: refused without reading when its object is
/// larger than `max` (or than the manifest says); the bytes are checked against the hash.
pub async fn fetch(b: &Buckets, m: &Manifest, max: u64) -> Result<Vec<u8>, FetchError> {
    if m.size > max {
        return Err(Refusal::new(
            Reason::TooLarge,
            format!("{} bytes, max-component-size is {max}", m.size),
        )
        .into());
    }
    let work = async {
        let info =
            b.components.info(&m.sha256).await.map_err(|e| {
                FetchError::Transient(Transient(format!("object {}: {e}", m.sha256)))
            })?;
        if info.size as u64 > max || info.size as u64 != m.size {
            return Err(Refusal::new(
                Reason::Tampered,
                format!(
                    "the stored object has {} bytes, the manifest says {}",
                    info.size, m.size
                ),
            )
            .into());
        }
        let obj = b
            .components
            .get(&m.sha256)
            .await
            .map_err(|e| Transient(format!("object {}: {e}", m.sha256)))?;
        let mut bytes = Vec::with_capacity(m.size as usize);
        // Never more than the manifest's size plus one byte: a longer object is refused.
        obj.take(m.size + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| {
                // The client checks the object's digest at its end: a mismatch is tampering.
                let s = e.to_string();
                if s.contains("digest") {
                    FetchError::Refused(Refusal::new(Reason::Tampered, s))
                } else {
                    FetchError::Transient(Transient(format!("reading object {}: {s}", m.sha256)))
                }
            })?;
        m.check_bytes(&bytes)?;
        Ok(bytes)
    };
    match tokio::time::timeout(FETCH_TIMEOUT, work).await {
        Ok(r) => r,
        Err(_) => Err(Transient(format!("fetching {} timed out", m.sha256)).into()),
    }
}

/// Every value of a bucket (key, bytes); keys whose value cannot be read are skipped.
pub async fn all_entries(store: &kv::Store) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    use futures_util::StreamExt;
    let mut keys: Vec<String> = match store.keys().await {
        Ok(k) => k.filter_map(|k| async move { k.ok() }).collect().await,
        Err(e) => anyhow::bail!("listing keys: {e}"),
    };
    keys.sort();
    let mut out = Vec::new();
    for k in keys {
        if let Ok(Some(v)) = store.get(&k).await {
            out.push((k, v.to_vec()));
        }
    }
    Ok(out)
}
