//! The fleet's JetStream layout, and the only code that talks to it: the components object
//! store (objects named by their sha256), the releases bucket (`GUEST.GROUP` -> manifest) and
//! the health bucket (`NODE` -> daemon, `NODE.GUEST` -> health). Opening creates what is
//! absent (with `[fleet] replicas`); fetching refuses an object larger than asked before
//! reading its chunks; the publisher deletes components no release names any more.

use std::time::Duration;

use async_nats::jetstream::{self, kv, object_store};

use super::manifest::{Manifest, Reason, Refusal};
use crate::nats::jetstream::open_kv_bucket;

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
    /// The components' stream and bucket name, for listing without a consumer.
    components_stream: jetstream::stream::Stream,
    components_name: String,
    js: jetstream::Context,
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
            crate::nats::jetstream::check_stream_replicas(js, &format!("OBJ_{name}"), want)
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
    let components_stream = js
        .get_stream(format!("OBJ_{name}"))
        .await
        .map_err(|e| anyhow::anyhow!("opening object store {name}: {e}"))?;
    Ok(Buckets {
        components,
        components_stream,
        components_name: name,
        js: js.clone(),
        releases: open_kv_bucket(js, &releases_bucket(fleet), Duration::ZERO, want).await?,
        health: open_kv_bucket(js, &health_bucket(fleet), Duration::ZERO, want).await?,
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
            .map_err(|e| anyhow::anyhow!("storing the component: {e}; no release was written"))?;
    }
    let key = release_key(&manifest.guest, &manifest.group);
    let value = serde_json::to_vec(manifest)?;
    let failed = match b.releases.put(&key, value.clone().into()).await {
        Ok(rev) => return Ok(rev),
        Err(e) => e,
    };
    // A write whose acknowledgement was lost may be stored all the same (a leader that wrote
    // it and died before answering): read back, so that the publisher is told what is true.
    match b.releases.entry(&key).await {
        Ok(Some(e)) if e.value.as_ref() == value.as_slice() => Ok(e.revision),
        Ok(_) => anyhow::bail!("writing release {key}: {failed}; the release was not written"),
        Err(e) => anyhow::bail!(
            "writing release {key}: {failed}; whether it was written is unknown (reading it \
             back: {e}): `wasmon fleet status` shows it once the cluster answers"
        ),
    }
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
    let referenced: std::collections::HashSet<String> = all_entries(&b.releases)
        .await?
        .into_iter()
        .filter_map(|(_, v)| Some(Manifest::parse(&v).ok()?.sha256))
        .collect();
    let cutoff = chrono::Utc::now().timestamp() - grace.as_secs() as i64;
    let mut stale = Vec::new();
    for info in objects(b).await? {
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
        // Never more than the manifest's size: a longer object is refused.
        let bytes = read_chunks(b, &info, m.size).await?;
        m.check_bytes(&bytes)?;
        Ok(bytes)
    };
    match tokio::time::timeout(FETCH_TIMEOUT, work).await {
        Ok(r) => r,
        Err(_) => Err(Transient(format!("fetching {} timed out", m.sha256)).into()),
    }
}

/// The chunks of an object, one message get after another (`next_by_subj` from the sequence
/// after the last chunk read), without a consumer (see [`crate::nats::jetstream::subjects`]); more than `limit` bytes
/// or chunks other than the metadata says are tampering.
async fn read_chunks(
    b: &Buckets,
    info: &object_store::ObjectInfo,
    limit: u64,
) -> Result<Vec<u8>, FetchError> {
    use base64::Engine as _;
    let subject = format!("$O.{}.C.{}", b.components_name, info.nuid);
    let api = format!("STREAM.MSG.GET.OBJ_{}", b.components_name);
    let transient =
        |e: String| FetchError::Transient(Transient(format!("object {}: {e}", info.name)));
    let tampered = |e: String| FetchError::Refused(Refusal::new(Reason::Tampered, e));
    let mut out = Vec::with_capacity(limit as usize);
    let mut seq = 1u64;
    for chunk in 0..info.chunks {
        let v: serde_json::Value =
            b.js.request(
                api.clone(),
                &serde_json::json!({ "seq": seq, "next_by_subj": subject }),
            )
            .await
            .map_err(|e| transient(format!("chunk {chunk}: {e}")))?;
        if let Some(e) = v.get("error") {
            // A chunk the metadata counts and the stream lacks: not readable now (a replica
            // catching up) or never (purged); retried either way, as a timeout is.
            return Err(transient(format!("chunk {chunk}: {e}")));
        }
        let msg = &v["message"];
        let at = msg["seq"]
            .as_u64()
            .ok_or_else(|| transient(format!("chunk {chunk}: no sequence in {v}")))?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(msg["data"].as_str().unwrap_or(""))
            .map_err(|e| tampered(format!("chunk {chunk}: {e}")))?;
        if (out.len() + data.len()) as u64 > limit {
            return Err(tampered(format!(
                "the object's chunks hold more than the {limit} bytes the manifest says"
            )));
        }
        out.extend_from_slice(&data);
        seq = at + 1;
    }
    Ok(out)
}

/// The objects of the components store (deleted ones included, flagged), from their
/// metadata messages, without a consumer (see [`crate::nats::jetstream::subjects`]).
pub async fn objects(b: &Buckets) -> anyhow::Result<Vec<object_store::ObjectInfo>> {
    let filter = format!("$O.{}.M.>", b.components_name);
    let mut out = Vec::new();
    for subject in crate::nats::jetstream::subjects(&b.components_stream, &filter).await? {
        let m = b
            .components_stream
            .get_last_raw_message_by_subject(&subject)
            .await
            .map_err(|e| anyhow::anyhow!("reading {subject}: {e}"))?;
        // An entry that is not object metadata is skipped (it names nothing to delete).
        if let Ok(info) = serde_json::from_slice::<object_store::ObjectInfo>(&m.payload) {
            out.push(info);
        }
    }
    Ok(out)
}

pub use crate::nats::jetstream::{Latest, latest};

/// Every value of a bucket (key, bytes), as [`latest`] reads them; deleted keys are skipped.
pub async fn all_entries(store: &kv::Store) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    Ok(latest(store)
        .await?
        .into_iter()
        .filter(|e| e.operation == kv::Operation::Put)
        .map(|e| (e.key, e.value))
        .collect())
}
