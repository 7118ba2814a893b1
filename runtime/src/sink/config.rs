//! `[[sink]]`: a named forwarding sink, its transport, its credentials and its queue's budget.
//! Checks that serde cannot express (URLs, files, NATS names) are in [`SinkConfig::check`],
//! run at start and at every reload, so a bad sink is refused before anything is replaced.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a sink reaches its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SinkType {
    /// InfluxDB line protocol POSTed to `url` (cc-metric-store's and wasmon's `/api/write`,
    /// InfluxDB, VictoriaMetrics): acknowledged by a 2xx answer.
    Http,
    /// Core NATS publish of line protocol on `subject`: best effort (no acknowledgement beyond
    /// the server having read the bytes), what cc-metric-store's `nats-subscriptions` read.
    Nats,
    /// JetStream publish on `subject` into `stream`, one message per record with a stable
    /// `Nats-Msg-Id`: acknowledged by the PubAck.
    Jetstream,
    /// Prometheus remote write 1.0 (snappy-compressed protobuf `WriteRequest`).
    RemoteWrite,
    /// An exporter guest (`guest`) encodes each batch when it is sent; the sink sends its
    /// requests over HTTP (`http://`, `https://` url) or NATS (`nats://`, `tls://` url with a
    /// `subject`; JetStream when a `stream` is named). The queue holds the samples themselves.
    Guest,
}

impl SinkType {
    pub fn as_str(self) -> &'static str {
        match self {
            SinkType::Http => "http",
            SinkType::Nats => "nats",
            SinkType::Jetstream => "jetstream",
            SinkType::RemoteWrite => "remote-write",
            SinkType::Guest => "guest",
        }
    }

    /// What the queue's records hold: a sink whose type changes to another format cannot
    /// send the records queued before (line protocol is not a remote-write request).
    pub fn record_format(self) -> &'static str {
        match self {
            SinkType::Http | SinkType::Nats | SinkType::Jetstream => "line-protocol",
            SinkType::RemoteWrite => "remote-write",
            SinkType::Guest => "samples",
        }
    }

    fn uses_nats(self) -> bool {
        matches!(self, SinkType::Nats | SinkType::Jetstream)
    }
}

crate::nats::section! {
    /// One `[[sink]]` entry. Its `auth`: `nats`/`jetstream` (and `guest` over NATS): the NATS
    /// credentials; `token-file` of an `http`/`remote-write` sink: a bearer token (a JWT for
    /// cc-metric-store or wasmon), read at start and at every reload; the TLS files for HTTPS and
    /// NATS alike.
    #[derive(Debug, Clone, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    pub struct SinkConfig as SinkToml (servers: url, "url") {
        /// Unique name, used by pipelines' `sinks`, in the API, the logs and the counters; also the
        /// name of its queue's directory under `data-dir/sinks/`.
        pub name: String,
        #[serde(rename = "type")]
        pub kind: SinkType,
        /// `http`/`remote-write`: the endpoint (`http://` or `https://`); `nats`/`jetstream`: the
        /// server (`nats://` or `tls://`), or a cluster's seeds (a list, or URLs separated by
        /// commas); `guest`: either.
        #[serde(deserialize_with = "crate::nats::servers")]
        pub url: String,
        /// `guest`: the exporter: a bundled guest's name (`otlp`, `jsonl`), NAME in guests-dir, a
        /// `.wasm` path, or a guest published to the fleet.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub guest: Option<String>,
        /// `guest`: handed to the exporter's `configure` as a JSON object.
        #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
        pub params: toml::Table,
        /// `guest`: wall time one `encode` call may take.
        #[serde(
            default = "default_encode_deadline",
            with = "crate::duration::serde",
            skip_serializing_if = "is_default_encode_deadline"
        )]
        pub deadline: Duration,
        /// `guest`: the exporter instance's memory cap.
        #[serde(default = "default_encode_memory", with = "crate::util::size")]
        pub memory: u64,
        /// `guest`: failed calls (trap, deadline, memory, malformed requests) on one batch before
        /// it is dead-lettered. Each failure throws the instance away: the batch is tried again on
        /// a fresh one.
        #[serde(default = "default_max_encode_failures")]
        pub max_encode_failures: u32,
        /// `nats`/`jetstream` (and `guest` over NATS): the subject records are published on.
        #[serde(default)]
        pub subject: Option<String>,
        /// `jetstream` (and `guest` over NATS, which then publishes to JetStream): the stream
        /// (created with `subject` when missing).
        #[serde(default)]
        pub stream: Option<String>,
        /// `jetstream`: the stream's de-duplication window when this sink creates it. Re-sends
        /// after a crash or a lost PubAck within it are stored once.
        #[serde(
            default = "default_duplicate_window",
            with = "crate::duration::serde",
            skip_serializing_if = "is_default_window"
        )]
        pub duplicate_window: Duration,
        /// `jetstream` (and `guest` to JetStream): the stream's replicas when this sink creates it
        /// (1 to 5, 1 when not set; 3 on a 3-server cluster). When set, an existing stream with
        /// another number is reported and not used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub replicas: Option<usize>,
        /// `jetstream`: a second stream (created with `hedge-subject`, `replicas` and the window)
        /// every record is published to as well; a record is delivered when either stream's
        /// PubAck comes. Off when not set: it doubles the NATS traffic, and is worth it on a
        /// cluster, where a stream whose leader crashed takes nothing for 4-9 s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hedge_stream: Option<String>,
        /// `jetstream` with `hedge-stream`: the subject of the second stream (not `subject`:
        /// two streams cannot share one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hedge_subject: Option<String>,
        /// `http`: gzip bodies (`Content-Encoding: gzip`). wasmon, InfluxDB and VictoriaMetrics take
        /// them; cc-metric-store does not: set `false` for it.
        #[serde(default = "yes")]
        pub gzip: bool,
        /// Line protocol (`http`, `nats`, `jetstream`): these metadata keys of a sample go as tags
        /// too, beside the level's (cc-metric-collector's `meta_as_tags`; its `device` and `unit`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub meta_as_tags: Vec<String>,
        /// Retries back off from 100 ms up to this, with full jitter, without end.
        #[serde(
            default = "default_max_backoff",
            with = "crate::duration::serde",
            skip_serializing_if = "is_default_backoff"
        )]
        pub max_backoff: Duration,
        /// A request that has not been answered after this is abandoned and retried.
        #[serde(
            default = "default_timeout",
            with = "crate::duration::serde",
            skip_serializing_if = "is_default_timeout"
        )]
        pub timeout: Duration,
        /// Samples per queued record (and so per request or message at most); a pipeline's larger
        /// batches are split.
        #[serde(default = "default_batch_size")]
        pub batch_size: usize,
        /// The queue's budget on disk; past it the oldest records are dropped and counted.
        #[serde(default = "default_queue_max_size", with = "crate::util::size")]
        pub queue_max_size: u64,
        /// Records queued longer than this are dropped and counted.
        #[serde(default = "default_queue_max_age", with = "crate::duration::serde")]
        pub queue_max_age: Duration,
        /// Samples per second this sink sends while it drains a backlog (after an outage), so that
        /// a thousand nodes coming back at once do not stampede the central store. Live traffic
        /// (a queue of a record or two) is never held back. 0: no limit.
        #[serde(default = "default_catch_up_rate")]
        pub catch_up_rate: u64,
    }
}

fn yes() -> bool {
    true
}
fn default_duplicate_window() -> Duration {
    DEFAULT_DUPLICATE_WINDOW
}
fn is_default_window(d: &Duration) -> bool {
    *d == DEFAULT_DUPLICATE_WINDOW
}
fn default_max_backoff() -> Duration {
    Duration::from_secs(30)
}
fn is_default_backoff(d: &Duration) -> bool {
    *d == default_max_backoff()
}
fn default_timeout() -> Duration {
    Duration::from_secs(30)
}
fn is_default_timeout(d: &Duration) -> bool {
    *d == default_timeout()
}
fn default_encode_deadline() -> Duration {
    DEFAULT_ENCODE_DEADLINE
}
fn is_default_encode_deadline(d: &Duration) -> bool {
    *d == DEFAULT_ENCODE_DEADLINE
}
fn default_encode_memory() -> u64 {
    DEFAULT_ENCODE_MEMORY
}
fn default_max_encode_failures() -> u32 {
    DEFAULT_MAX_ENCODE_FAILURES
}
fn default_batch_size() -> usize {
    DEFAULT_BATCH_SIZE
}
fn default_queue_max_size() -> u64 {
    1 << 30
}
fn default_queue_max_age() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}
fn default_catch_up_rate() -> u64 {
    DEFAULT_CATCH_UP_RATE
}

/// A day: longer than any retry horizon a node's queue covers in practice is impossible to
/// promise (the queue holds 7 days), but re-sends happen within seconds of an outage's end or a
/// restart; a day of message ids costs the server ~100 bytes per message of the window.
pub const DEFAULT_DUPLICATE_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// 5,000 samples of ~60 bytes of line protocol: ~300 KB, under NATS's default 1 MB message
/// limit with room for long names, and large enough that a request's overhead is noise.
pub const DEFAULT_BATCH_SIZE: usize = 5_000;
/// Fifty times a busy node's live rate (10,000 samples/s); a thousand nodes draining at once
/// still send at most what one central daemon ingests per core in a second or so per node.
pub const DEFAULT_CATCH_UP_RATE: u64 = 500_000;
/// An exporter encodes a whole record (up to `batch-size` samples, 5,000 by default) in one
/// call: a Python exporter takes tens of ms for that; seconds mean it is stuck.
pub const DEFAULT_ENCODE_DEADLINE: Duration = Duration::from_secs(2);
/// An exporter holds one batch and its encoding: 64 MiB, as for any guest.
pub const DEFAULT_ENCODE_MEMORY: u64 = 64 << 20;
/// Failures of one batch before it is dead-lettered: enough that a crash now and then (a
/// bug on every Nth batch, a deadline hit on a busy node) never costs a batch, few enough
/// that one batch the exporter always crashes on does not hold the queue up for long.
pub const DEFAULT_MAX_ENCODE_FAILURES: u32 = 5;
/// Encoded records larger than this are split further (NATS's default message limit is 1 MiB).
pub const MAX_RECORD_BYTES: usize = 768 << 10;

/// Names pipelines give the built-in sinks; a `[[sink]]` may not take one of them.
pub const BUILT_IN: &[&str] = &["log", "stdout", "store", "notify"];

/// Why a sink's configuration was refused; each names the sink and the field.
#[derive(Debug, thiserror::Error)]
#[error("sink {sink:?}: {field}: {problem}")]
pub struct SinkConfigError {
    pub sink: String,
    pub field: &'static str,
    pub problem: String,
}

impl SinkConfig {
    /// An `http` sink's `?cluster=NAME`: the cluster its samples land in at the receiver. Its
    /// lines carry `cluster=NAME` where this node would write its own `[daemon] cluster`
    /// (samples tagged with a cluster of their own keep it), so wasmon and cc-metric-store
    /// put them under NAME alike (both read a line's tag before the URL's default).
    pub fn url_cluster(&self) -> Option<String> {
        if self.kind != SinkType::Http {
            return None;
        }
        let url = reqwest::Url::parse(&self.url).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == "cluster")
            .map(|(_, v)| v.into_owned())
    }

    /// Whether the sink sends over NATS (a `guest` sink does when its url says so).
    pub fn nats(&self) -> bool {
        self.kind.uses_nats() || (self.kind == SinkType::Guest && self.nats_url())
    }

    /// Whether its NATS messages go to JetStream.
    pub fn jetstream(&self) -> bool {
        self.kind == SinkType::Jetstream
            || (self.kind == SinkType::Guest && self.nats_url() && self.stream.is_some())
    }

    fn nats_url(&self) -> bool {
        self.url.starts_with("nats://") || self.url.starts_with("tls://")
    }

    fn err(&self, field: &'static str, problem: impl Into<String>) -> SinkConfigError {
        SinkConfigError {
            sink: self.name.clone(),
            field,
            problem: problem.into(),
        }
    }

    /// Checks what serde cannot; with `base` (the directory relative file names start from)
    /// also that the files it names exist.
    pub fn check(&self, base: Option<&Path>) -> Result<(), SinkConfigError> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(self.err(
                "name",
                "must be non-empty letters, digits, '-' or '_' (it names a directory)",
            ));
        }
        if BUILT_IN.contains(&self.name.as_str()) {
            return Err(self.err(
                "name",
                format!("{:?} is a built-in sink: choose another name", self.name),
            ));
        }
        if self.nats() {
            crate::nats::parse_servers(&self.url).map_err(|p| self.err("url", p))?;
        } else if self.url.contains(',') {
            return Err(self.err(
                "url",
                format!(
                    "{:?}: a {} sink takes one URL",
                    self.url,
                    self.kind.as_str()
                ),
            ));
        }
        let first = self.url.split(',').next().unwrap_or_default().trim();
        let url = reqwest::Url::parse(first)
            .map_err(|e| self.err("url", format!("{:?} does not parse: {e}", self.url)))?;
        let schemes: &[&str] = if self.nats() {
            &["nats", "tls"]
        } else {
            &["http", "https"]
        };
        if !schemes.contains(&url.scheme()) || url.host_str().is_none_or(str::is_empty) {
            return Err(self.err(
                "url",
                format!(
                    "{:?}: a {} sink needs a {}:// URL with a host",
                    self.url,
                    self.kind.as_str(),
                    schemes.join(":// or ")
                ),
            ));
        }
        if self.url_cluster().is_some_and(|c| c.is_empty()) {
            return Err(self.err(
                "url",
                format!(
                    "{:?}: ?cluster= is empty: name the cluster the samples go to, or leave \
                     it out (they go under [daemon] cluster)",
                    self.url
                ),
            ));
        }
        match (self.nats(), &self.subject) {
            (true, None) => return Err(self.err("subject", "a NATS sink needs a subject")),
            (true, Some(s)) => check_subject(s).map_err(|p| self.err("subject", p))?,
            (false, Some(_)) => {
                return Err(self.err("subject", "only sinks that send over NATS take one"));
            }
            (false, None) => {}
        }
        match (self.kind, &self.stream) {
            (SinkType::Jetstream, None) => {
                return Err(self.err("stream", "a jetstream sink needs a stream"));
            }
            (_, Some(s)) if self.jetstream() => {
                check_stream_name(s).map_err(|p| self.err("stream", p))?
            }
            (_, Some(_)) => {
                return Err(self.err("stream", "only sinks that send to JetStream take one"));
            }
            _ => {}
        }
        for (field, set) in [
            ("creds-file", self.auth.creds_file.is_some()),
            ("username", self.auth.username.is_some()),
            ("password", self.auth.password.is_some()),
        ] {
            if set && !self.nats() {
                return Err(self.err(field, "only sinks that send over NATS take one"));
            }
        }
        self.check_hedge()?;
        if let Some(r) = self.replicas {
            if !self.jetstream() {
                return Err(self.err("replicas", "only sinks that send to JetStream take one"));
            }
            crate::nats::check_replicas(r).map_err(|p| self.err("replicas", p))?;
        }
        self.check_guest()?;
        self.auth.check(base).map_err(|(f, p)| self.err(f, p))?;
        if self.batch_size == 0 {
            return Err(self.err("batch-size", "must be at least 1"));
        }
        if self.max_backoff < Duration::from_millis(100) {
            return Err(self.err("max-backoff", "must be at least 100ms"));
        }
        if self.timeout.is_zero() {
            return Err(self.err("timeout", "must be positive"));
        }
        if self.queue_max_size < MIN_QUEUE_SIZE {
            return Err(self.err(
                "queue-max-size",
                format!("must be at least {MIN_QUEUE_SIZE} bytes (a few records)"),
            ));
        }
        if self.queue_max_age.is_zero() {
            return Err(self.err("queue-max-age", "must be positive"));
        }
        Ok(())
    }

    /// `hedge-stream` and `hedge-subject` go together, on a `jetstream` sink, and name another
    /// stream and subject than `stream` and `subject`.
    fn check_hedge(&self) -> Result<(), SinkConfigError> {
        let hedge = hedge_pair(self.hedge_stream.as_deref(), self.hedge_subject.as_deref());
        let Some((stream, subject)) = hedge.map_err(|(f, p)| self.err(f, p))? else {
            return Ok(());
        };
        if self.kind != SinkType::Jetstream {
            return Err(self.err("hedge-stream", "only a jetstream sink takes one"));
        }
        check_subject(subject).map_err(|p| self.err("hedge-subject", p))?;
        let first = (self.stream.as_deref(), ("subject", self.subject.as_deref()));
        check_hedge_apart(first, (stream, subject)).map_err(|(f, p)| self.err(f, p))
    }

    /// The sink's streams and their subjects: `stream` on `subject`, then the hedge's.
    pub fn streams(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let (Some(st), Some(su)) = (&self.stream, &self.subject) {
            out.push((st.clone(), su.clone()));
        }
        if let (Some(st), Some(su)) = (&self.hedge_stream, &self.hedge_subject) {
            out.push((st.clone(), su.clone()));
        }
        out
    }

    fn check_guest(&self) -> Result<(), SinkConfigError> {
        if self.kind != SinkType::Guest {
            for (field, set) in [
                ("guest", self.guest.is_some()),
                ("params", !self.params.is_empty()),
            ] {
                if set {
                    return Err(self.err(field, "only guest sinks take one"));
                }
            }
            return Ok(());
        }
        match &self.guest {
            None => {
                return Err(self.err(
                    "guest",
                    "a guest sink names its exporter (`guest = \"otlp\"`)",
                ));
            }
            Some(g) if g.trim().is_empty() => return Err(self.err("guest", "is empty")),
            Some(_) => {}
        }
        if self.deadline < Duration::from_millis(1) {
            return Err(self.err("deadline", "must be at least 1ms"));
        }
        if self.memory < 1 << 20 {
            return Err(self.err("memory", "must be at least 1 MiB"));
        }
        if self.max_encode_failures == 0 {
            return Err(self.err("max-encode-failures", "must be at least 1"));
        }
        Ok(())
    }
}

/// Below this a queue could not hold one full record.
pub const MIN_QUEUE_SIZE: u64 = 4 << 20;

/// NATS subjects: dot-separated tokens, no whitespace, no empty token; `*` and `>` are for
/// subscribing, not publishing.
/// A hedge's two fields, both or neither (a sink's and a NATS subscription's alike): the
/// second stream and its subject, `None` without a hedge, or the field missing and why.
pub fn hedge_pair<'a>(
    stream: Option<&'a str>,
    subject: Option<&'a str>,
) -> Result<Option<(&'a str, &'a str)>, (&'static str, &'static str)> {
    match (stream, subject) {
        (None, None) => Ok(None),
        (Some(st), Some(su)) => Ok(Some((st, su))),
        (Some(_), None) => Err(("hedge-subject", "goes with `hedge-stream`")),
        (None, Some(_)) => Err(("hedge-stream", "goes with `hedge-subject`")),
    }
}

/// A hedge's second stream is a valid name, another stream than the first, on another
/// subject: `first` is the first stream and its subject with the subject's field name.
pub fn check_hedge_apart(
    first: (Option<&str>, (&'static str, Option<&str>)),
    (stream, subject): (&str, &str),
) -> Result<(), (&'static str, String)> {
    let (first_stream, (subject_field, first_subject)) = first;
    check_stream_name(stream).map_err(|p| ("hedge-stream", p))?;
    if first_stream == Some(stream) {
        return Err(("hedge-stream", "is `stream`: name a second stream".into()));
    }
    if first_subject == Some(subject) {
        let why = format!("is `{subject_field}`: two streams cannot share one");
        return Err(("hedge-subject", why));
    }
    Ok(())
}

pub fn check_subject(s: &str) -> Result<(), String> {
    if s.is_empty() || s.split('.').any(str::is_empty) {
        return Err(format!("{s:?} is not a NATS subject (empty token)"));
    }
    if s.chars().any(|c| c.is_whitespace() || c == '*' || c == '>') {
        return Err(format!(
            "{s:?} is not a subject one can publish on (whitespace or a wildcard)"
        ));
    }
    Ok(())
}

/// The names JetStream accepts for streams and consumers (nats-server's `isValidName`, and
/// no path separators: the name becomes a directory on the server).
pub fn check_stream_name(s: &str) -> Result<(), String> {
    if s.is_empty()
        || s.len() > 255
        || s.chars()
            .any(|c| c.is_whitespace() || c.is_control() || ".*>/\\".contains(c))
    {
        return Err(format!(
            "{s:?} is not a name NATS accepts (no whitespace, '.', '*', '>', '/' or '\\', at most 255 bytes)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<SinkConfig, String> {
        let cfg: SinkConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.check(None).map_err(|e| e.to_string())?;
        Ok(cfg)
    }

    #[test]
    fn an_http_sinks_cluster_parameter_is_its_samples_cluster() {
        let c = check("name='c'\ntype='http'\nurl='http://c:8082/api/write?cluster=hpc'").unwrap();
        assert_eq!(c.url_cluster().as_deref(), Some("hpc"));
        let c = check("name='c'\ntype='http'\nurl='http://c:8082/api/write?x=1&cluster=a%20b'")
            .unwrap();
        assert_eq!(c.url_cluster().as_deref(), Some("a b"));
        let c = check("name='c'\ntype='http'\nurl='http://c:8082/api/write'").unwrap();
        assert_eq!(c.url_cluster(), None);
        // Remote write has no clusters: its URL is the receiver's business.
        let c =
            check("name='c'\ntype='remote-write'\nurl='http://c/api/v1/write?cluster=x'").unwrap();
        assert_eq!(c.url_cluster(), None);
        assert_eq!(
            check("name='c'\ntype='http'\nurl='http://c:8082/api/write?cluster='").unwrap_err(),
            "sink \"c\": url: \"http://c:8082/api/write?cluster=\": ?cluster= is empty: name \
             the cluster the samples go to, or leave it out (they go under [daemon] cluster)"
        );
    }

    #[test]
    fn guest_sinks_send_over_http_or_nats_and_name_their_exporter() {
        let http = check("name='o'\ntype='guest'\nguest='otlp'\nurl='http://c:4318/v1/metrics'\nparams={resource={\"service.name\"='x'}}").unwrap();
        assert!(!http.nats() && !http.jetstream());
        assert_eq!(
            (http.deadline, http.max_encode_failures),
            (DEFAULT_ENCODE_DEADLINE, 5)
        );
        let js = check(
            "name='o'\ntype='guest'\nguest='jsonl'\nurl='nats://c:4222'\nsubject='m'\nstream='M'",
        )
        .unwrap();
        assert!(js.nats() && js.jetstream());
        let refused = |text: &str| check(text).unwrap_err();
        assert_eq!(
            refused("name='o'\ntype='guest'\nurl='http://c'"),
            "sink \"o\": guest: a guest sink names its exporter (`guest = \"otlp\"`)"
        );
        assert_eq!(
            refused("name='o'\ntype='http'\nguest='otlp'\nurl='http://c'"),
            "sink \"o\": guest: only guest sinks take one"
        );
        assert_eq!(
            refused("name='o'\ntype='guest'\nguest='otlp'\nurl='nats://c'"),
            "sink \"o\": subject: a NATS sink needs a subject"
        );
        assert_eq!(
            refused("name='o'\ntype='guest'\nguest='otlp'\nurl='http://c'\nstream='S'"),
            "sink \"o\": stream: only sinks that send to JetStream take one"
        );
        assert_eq!(
            refused("name='o'\ntype='guest'\nguest='otlp'\nurl='http://c'\nmax-encode-failures=0"),
            "sink \"o\": max-encode-failures: must be at least 1"
        );
        assert!(
            refused("name='o'\ntype='guest'\nguest='otlp'\nurl='http://c'\nparms={}")
                .contains("unknown field `parms`")
        );
    }

    #[test]
    fn a_hedge_names_a_second_stream_and_subject() {
        let js = "name='f'\ntype='jetstream'\nurl='nats://a'\nsubject='m'\nstream='M'\n";
        let c = check(&format!("{js}hedge-stream='MB'\nhedge-subject='mb'")).unwrap();
        assert_eq!(
            c.streams(),
            vec![("M".into(), "m".into()), ("MB".into(), "mb".into())]
        );
        assert_eq!(check(js).unwrap().streams(), vec![("M".into(), "m".into())]);
        let refused = |text: &str| check(text).unwrap_err();
        for (extra, expect) in [
            (
                "hedge-stream='MB'",
                "sink \"f\": hedge-subject: goes with `hedge-stream`",
            ),
            (
                "hedge-subject='mb'",
                "sink \"f\": hedge-stream: goes with `hedge-subject`",
            ),
            (
                "hedge-stream='M'\nhedge-subject='mb'",
                "sink \"f\": hedge-stream: is `stream`: name a second stream",
            ),
            (
                "hedge-stream='MB'\nhedge-subject='m'",
                "sink \"f\": hedge-subject: is `subject`: two streams cannot share one",
            ),
        ] {
            assert_eq!(refused(&format!("{js}{extra}")), expect, "{extra}");
        }
        assert!(
            refused(&format!("{js}hedge-stream='M.B'\nhedge-subject='mb'"))
                .starts_with("sink \"f\": hedge-stream: ")
        );
        assert_eq!(
            refused(
                "name='n'\ntype='nats'\nurl='nats://a'\nsubject='m'\nhedge-stream='MB'\nhedge-subject='mb'"
            ),
            "sink \"n\": hedge-stream: only a jetstream sink takes one"
        );
    }

    #[test]
    fn nats_sinks_take_a_cluster_and_replicas() {
        let js = "name='f'\ntype='jetstream'\nsubject='m'\nstream='M'\n";
        let c = check(&format!(
            "{js}url=['nats://a:4222','nats://b:4222']\nreplicas=3"
        ))
        .unwrap();
        assert_eq!(c.connection().addresses().unwrap().len(), 2);
        assert_eq!(c.replicas, Some(3));
        let c = check(&format!(
            "{js}url='nats://a:4222, nats://b:4222, nats://c:4222'"
        ))
        .unwrap();
        assert_eq!(
            (c.connection().addresses().unwrap().len(), c.replicas),
            (3, None)
        );
        let refused = |text: &str| check(text).unwrap_err();
        let e = refused(&format!("{js}url='nats://a:4222,nats://b:42x'"));
        assert!(e.starts_with("sink \"f\": url: server 2 of 2"), "{e}");
        assert!(refused(&format!("{js}url=[]")).contains("empty list of servers"));
        assert_eq!(
            refused(&format!("{js}url='nats://a'\nreplicas=6")),
            "sink \"f\": replicas: 6: from 1 to 5 (JetStream's limit; 3 on a 3-server cluster)"
        );
        assert_eq!(
            refused("name='h'\ntype='http'\nurl='http://a,http://b'"),
            "sink \"h\": url: \"http://a,http://b\": a http sink takes one URL"
        );
        assert_eq!(
            refused("name='n'\ntype='nats'\nurl='nats://a'\nsubject='m'\nreplicas=3"),
            "sink \"n\": replicas: only sinks that send to JetStream take one"
        );
        assert_eq!(
            refused(&format!("{js}url='nats://a'\nusername='u'")),
            "sink \"f\": username: username and password go together"
        );
    }
}
