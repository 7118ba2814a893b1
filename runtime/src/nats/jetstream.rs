//! The JetStream side of NATS for every part that keeps state there: the streams wasmon
//! creates (forwarding, ingest, fleet, fabric) with their replicas, its key-value buckets, and
//! reading a bucket from its stream's leader without a consumer (listing, one key, the changes
//! since a sequence), plus which server versions keep compare-and-set on a cluster. Owns no
//! connection (`nats`'s) and no part's keys or values.

use std::time::Duration;

/// How long looking a stream up may take before it is retried: a stream whose leader is being
/// elected does not answer, and the default request timeout (5 s) would stall delivery that
/// long after the cluster can take writes again.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);

/// What a stream created by wasmon keeps: long enough for a replica that was down for days to
/// catch up, bounded so that a stream nobody consumes does not fill the server's disk.
pub const STREAM_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The stream `name`, created with `subjects`, the de-duplication window `window` and
/// `replicas` (1 when not set) when it does not exist. An existing stream is used as it is,
/// unless `replicas` was set and the stream has another number: that is an error naming both
/// (the stream is not silently used with fewer copies than asked for). The forwarding sink and
/// the receiving ingest both call it, so either may start first.
pub async fn stream_for(
    js: &async_nats::jetstream::Context,
    name: &str,
    subjects: &[String],
    window: Duration,
    replicas: Option<usize>,
) -> Result<async_nats::jetstream::stream::Stream, String> {
    use async_nats::jetstream::stream;
    let mut quick = js.clone();
    quick.set_timeout(LOOKUP_TIMEOUT);
    let found = match quick.get_stream(name).await {
        Ok(s) => s,
        Err(_) => {
            let subject = subjects.join(", ");
            let n = replicas.unwrap_or(1);
            // Finds a stream the quick look-up missed (a leader being elected) as well.
            js.get_or_create_stream(stream::Config {
                name: name.to_string(),
                subjects: subjects.to_vec(),
                duplicate_window: window,
                max_age: STREAM_MAX_AGE,
                storage: stream::StorageType::File,
                num_replicas: n,
                ..Default::default()
            })
            .await
            .map_err(|e| {
                format!("creating stream {name:?} on {subject:?} with {n} replica(s): {e}")
            })?
        }
    };
    let have = found.cached_info().config.num_replicas.max(1);
    if let Some(want) = replicas
        && have != want
    {
        return Err(format!(
            "stream {name:?} has {have} replica(s) and replicas = {want} asks for {want}: \
             change the stream (`nats stream edit {name} --replicas {want}`) or the setting"
        ));
    }
    Ok(found)
}

/// Checks the replicas of an existing stream (a key-value bucket's is `KV_BUCKET`, an object
/// store's `OBJ_BUCKET`) against a setting; `None` checks nothing.
pub async fn check_stream_replicas(
    js: &async_nats::jetstream::Context,
    stream: &str,
    want: Option<usize>,
) -> Result<(), String> {
    let Some(want) = want else { return Ok(()) };
    let mut s = js
        .get_stream(stream)
        .await
        .map_err(|e| format!("looking up stream {stream:?}: {e}"))?;
    let have = s
        .info()
        .await
        .map_err(|e| format!("looking up stream {stream:?}: {e}"))?
        .config
        .num_replicas
        .max(1);
    if have != want {
        return Err(format!(
            "stream {stream:?} has {have} replica(s) and replicas = {want} asks for {want}: \
             change the stream (`nats stream edit {stream} --replicas {want}`) or the setting"
        ));
    }
    Ok(())
}

/// Opens key-value bucket `bucket`, creating it when absent (file storage, one value per key,
/// values expiring after `max_age`, none when zero) with `want` replicas (1 when not set); an
/// existing bucket with another number than `want` is an error naming both.
pub async fn open_kv_bucket(
    js: &async_nats::jetstream::Context,
    bucket: &str,
    max_age: Duration,
    want: Option<usize>,
) -> anyhow::Result<async_nats::jetstream::kv::Store> {
    let stream = format!("KV_{bucket}");
    if let Ok(s) = js.get_key_value(bucket).await {
        check_stream_replicas(js, &stream, want)
            .await
            .map_err(anyhow::Error::msg)?;
        return Ok(s);
    }
    let replicas = want.unwrap_or(1);
    // Laid out as JetStream's key-value convention has it; not `create_key_value`, which in
    // async-nats 0.42 first asks for the account info and cannot parse nats-server 2.9's
    // answer.
    use async_nats::jetstream::stream::{Config, DiscardPolicy, StorageType};
    let created = js
        .create_stream(Config {
            name: stream.clone(),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age,
            max_messages: -1,
            max_bytes: -1,
            max_consumers: -1,
            max_message_size: -1,
            discard: DiscardPolicy::New,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            storage: StorageType::File,
            num_replicas: replicas,
            // Must not exceed max_age; 2 minutes is the server's default otherwise.
            duplicate_window: if max_age.is_zero() {
                KV_DUPLICATE_WINDOW
            } else {
                max_age.min(KV_DUPLICATE_WINDOW)
            },
            ..Default::default()
        })
        .await;
    // Another daemon may have created it meanwhile: the creation's error counts only when
    // the bucket is not there after all.
    let s = js.get_key_value(bucket).await.map_err(|e| match created {
        Err(c) => anyhow::anyhow!("creating bucket {bucket} with {replicas} replica(s): {c}"),
        Ok(_) => anyhow::anyhow!("opening bucket {bucket}: {e}"),
    })?;
    // Another daemon may have created it with another number meanwhile.
    check_stream_replicas(js, &stream, want)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(s)
}

/// The server's default duplicate window, which a bucket's may not exceed its max age.
const KV_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// Keys (or objects) one listing returns at most: a fleet has a few guests times a few
/// groups and a health entry per daemon and guest, a fabric an owner per node (48,000 for the
/// OpenFabrics RFC's) and a lease per agent; more is a bucket filled by someone else.
const MAX_LISTED: usize = 1_000_000;

/// Reads of one listing in flight at once (each a request to the stream's leader).
const READS_IN_FLIGHT: usize = 64;

/// The subjects under `filter` that hold a message, read from the stream's info. No consumer
/// is created: nats-server 2.9.10, with one server of a cluster down, places some ephemeral
/// consumers on that server and never answers their creation (a `wasmon fleet status` then
/// timed out on every try for as long as the server was away).
pub async fn subjects(
    stream: &async_nats::jetstream::stream::Stream,
    filter: &str,
) -> anyhow::Result<Vec<String>> {
    use futures_util::TryStreamExt;
    let mut info = stream
        .info_with_subjects(filter)
        .await
        .map_err(|e| anyhow::anyhow!("listing {filter}: {e}"))?;
    let mut out = Vec::new();
    while let Some((subject, _)) = info
        .try_next()
        .await
        .map_err(|e| anyhow::anyhow!("listing {filter}: {e}"))?
    {
        if out.len() == MAX_LISTED {
            anyhow::bail!("listing {filter}: more than {MAX_LISTED} subjects");
        }
        out.push(subject);
    }
    out.sort();
    Ok(out)
}

/// One key's latest entry, as the stream's leader has it.
#[derive(Clone, Debug)]
pub struct Latest {
    pub key: String,
    pub revision: u64,
    pub operation: async_nats::jetstream::kv::Operation,
    pub value: Vec<u8>,
}

fn latest_of(prefix: &str, m: async_nats::jetstream::message::StreamMessage) -> Option<Latest> {
    use async_nats::jetstream::kv::Operation;
    let key = m.subject.as_str().strip_prefix(prefix)?.to_string();
    let operation = match m.headers.get("KV-Operation").map(|v| v.as_str()) {
        Some("DEL") => Operation::Delete,
        Some("PURGE") => Operation::Purge,
        _ => Operation::Put,
    };
    Some(Latest {
        key,
        revision: m.sequence,
        operation,
        value: m.payload.to_vec(),
    })
}

/// Every key's latest entry (deletions included), without a consumer (see [`subjects`]),
/// read from the stream's leader, not with a direct get: with `allow_direct` any replica
/// answers, and one that was down answered an old value after it came back (2.9.10). A key
/// that cannot be read fails the whole listing; one gone meanwhile (expired) is left out.
pub async fn latest(store: &async_nats::jetstream::kv::Store) -> anyhow::Result<Vec<Latest>> {
    use async_nats::jetstream::stream::LastRawMessageErrorKind;
    let prefix = format!("$KV.{}.", store.name);
    let keys = subjects(&store.stream, &format!("{prefix}>"))
        .await
        .map_err(|e| anyhow::anyhow!("listing keys: {e}"))?;
    read_in_flight(keys, |subject| {
        let prefix = &prefix;
        async move {
            match store.stream.get_last_raw_message_by_subject(&subject).await {
                Ok(m) => Ok(latest_of(prefix, m)),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
                Err(e) => Err(anyhow::anyhow!("reading {subject}: {e}")),
            }
        }
    })
    .await
}

/// Runs `read` over `items`, [`READS_IN_FLIGHT`] at a time, and keeps the entries found, in
/// the items' order; the first failed read fails the whole.
async fn read_in_flight<T, F, Fut>(
    items: impl IntoIterator<Item = T>,
    read: F,
) -> anyhow::Result<Vec<Latest>>
where
    F: FnMut(T) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<Latest>>>,
{
    use futures_util::StreamExt;
    let reads: Vec<anyhow::Result<Option<Latest>>> = futures_util::stream::iter(items)
        .map(read)
        .buffered(READS_IN_FLIGHT)
        .collect()
        .await;
    let mut out = Vec::new();
    for r in reads {
        out.extend(r?);
    }
    Ok(out)
}

/// The latest entry of one key, read from the stream's leader (see [`latest`]); `None` when
/// the bucket holds nothing under it (never written, or expired).
pub async fn latest_entry(
    store: &async_nats::jetstream::kv::Store,
    key: &str,
) -> anyhow::Result<Option<Latest>> {
    use async_nats::jetstream::stream::LastRawMessageErrorKind;
    let prefix = format!("$KV.{}.", store.name);
    match store
        .stream
        .get_last_raw_message_by_subject(&format!("{prefix}{key}"))
        .await
    {
        Ok(m) => Ok(latest_of(&prefix, m)),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("reading {key}: {e}")),
    }
}

/// The entries written to a bucket after sequence `after` up to `last`, oldest first, from the
/// stream's leader (each sequence asked for, [`READS_IN_FLIGHT`] at a time); entries another
/// write replaced since are not there any more (their key's newer entry is).
pub async fn changes_since(
    store: &async_nats::jetstream::kv::Store,
    after: u64,
    last: u64,
) -> anyhow::Result<Vec<Latest>> {
    use async_nats::jetstream::stream::RawMessageErrorKind;
    let prefix = format!("$KV.{}.", store.name);
    read_in_flight(after.saturating_add(1)..=last, |seq| {
        let prefix = &prefix;
        async move {
            match store.stream.get_raw_message(seq).await {
                Ok(m) => Ok(latest_of(prefix, m)),
                Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => Ok(None),
                Err(e) => Err(anyhow::anyhow!("reading sequence {seq}: {e}")),
            }
        }
    })
    .await
}

/// The first nats-server release whose key-value compare-and-set holds on a cluster: before
/// it, a clustered stream checked an update's expected revision only when the update arrived
/// at the leader, not when it was applied, so two updates naming the same revision that
/// arrived before either was applied both succeeded (nats-server commit 244dda8, "Fix bug that
/// would race around check for last sequence per subject", released in 2.9.21).
pub const CAS_SAFE_SINCE: (u64, u64, u64) = (2, 9, 21);

/// Whether a server's version (`2.9.10`, `v2.15.1`, `2.11.0-RC.1`) has compare-and-set that
/// holds on a cluster; `None` when it does not parse.
pub fn cas_safe(version: &str) -> Option<bool> {
    let v = version.trim().trim_start_matches('v');
    let core = v.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    Some((major, minor, patch) >= CAS_SAFE_SINCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_and_set_holds_from_2_9_21() {
        for (v, safe) in [
            ("2.9.10", Some(false)),
            ("v2.9.20", Some(false)),
            ("2.9.21", Some(true)),
            ("2.10.0", Some(true)),
            ("v2.15.1", Some(true)),
            ("2.11.0-RC.1", Some(true)),
            ("3.0.0", Some(true)),
            ("1.4.1", Some(false)),
            ("", None),
            ("two", None),
            ("2.9", None),
        ] {
            assert_eq!(cas_safe(v), safe, "{v:?}");
        }
    }
}
