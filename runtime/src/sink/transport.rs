//! Sending one queued record and classifying the answer: delivered (the destination
//! acknowledged it: remove it), retry (the destination or the way there failed: keep it and
//! try again), or refused (the destination said the record itself is bad: dead-letter it).
//!
//! | transport | delivered | retried | refused |
//! |---|---|---|---|
//! | http (line protocol) | 2xx | transport errors, timeouts, 5xx, 408, 425, 429, and 401/403/404 (wrong credentials or URL: the config's fault, not the batch's) | other 4xx (400: a malformed batch) |
//! | remote-write | 2xx | as http | other 4xx, as the spec says |
//! | nats | the server read it (flush) | not connected, flush failed | never |
//! | jetstream | PubAck (a duplicate too; with `hedge-stream`, either stream's) | no PubAck within `timeout` or 10 s (the message is published again every 250 ms meanwhile, same `Nats-Msg-Id`), not connected, no stream | a message over the server's size limit |
//! | guest | each request as http, nats or jetstream above | as those | as those, and a request the host cannot send (a header it owns, a suffix that makes no URL or subject) |

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderValue};

use super::config::{SinkConfig, SinkType, check_subject};
use super::exporter::Request;
use super::tls;

/// What became of one attempt.
#[derive(Debug)]
pub enum Outcome {
    Delivered,
    Retry(String),
    Refused(String),
    /// Not tried: wait this long first (a guest sink's exporter is quarantined).
    Wait(Duration),
}

/// The header that carries a record's id from one wasmon to another (and `Nats-Msg-Id` on
/// JetStream): the receiver drops a batch it already stored.
pub const BATCH_ID_HEADER: &str = "x-wasmon-batch";

/// A sink's way to its destination, built from its config (at start and at each reload that
/// changes it). Building reads the token and TLS files: a missing or bad one is a config error.
pub enum Transport {
    Http(Http),
    /// Boxed: a NATS sink's state is large and read once per record.
    Nats(Box<Nats>),
}

pub struct Http {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    /// Line protocol (not remote write), and whether the receiver takes gzip (`gzip`).
    line_protocol: bool,
    gzip: bool,
}

pub struct Nats {
    cfg: SinkConfig,
    base: std::path::PathBuf,
    jetstream: bool,
    /// One way per stream of the sink (`stream`, then `hedge-stream`), each with a connection
    /// of its own: the hedge's connects to another server than the first's when it can, so
    /// that one hung server holds up one way only.
    lanes: Vec<Lane>,
}

/// One way to one stream (or core NATS).
#[derive(Default)]
struct Lane {
    /// Connected on first use (and kept: the client reconnects by itself), so a daemon starts
    /// while the NATS server is down.
    conn: tokio::sync::Mutex<Option<Conn>>,
    /// The server the last connection was dropped for not answering: the next one tries it
    /// last.
    hung: std::sync::Mutex<Option<crate::nats::Hung>>,
    /// A hedge's lane: where its connection should go (off the other stream's leader), and
    /// when it last looked ([`HEDGE_LOOK_EVERY`]).
    aim: std::sync::Mutex<crate::nats::Aim>,
    looked: std::sync::Mutex<Option<std::time::Instant>>,
    /// The connection being made, when one is.
    connecting:
        tokio::sync::Mutex<Option<tokio::task::JoinHandle<Result<async_nats::Client, String>>>>,
}

/// How often a hedged sink's lane asks who leads the other stream (one stream info request)
/// and moves off that server: a lane on the other stream's leader is stopped, with the other
/// lane, by that one server hanging. A leader moves after a fault and when the central keeps
/// the leaders apart; a lane that sits beside it for up to this long is exposed meanwhile.
const HEDGE_LOOK_EVERY: Duration = Duration::from_secs(5);
/// How long that request may take: a leader answers within milliseconds.
const HEDGE_LOOK_TIMEOUT: Duration = Duration::from_millis(500);

struct Conn {
    client: async_nats::Client,
    js: Option<async_nats::jetstream::Context>,
    /// The lane's stream was found or created since this connection was made.
    stream_ready: bool,
    /// Since when publishes have been answered "no responders" only.
    no_stream_since: Option<std::time::Instant>,
}

/// Why a transport could not be built; names the field at fault.
#[derive(Debug, thiserror::Error)]
#[error("sink {sink:?}: {field}: {problem}")]
pub struct BuildError {
    pub sink: String,
    pub field: &'static str,
    pub problem: String,
}

impl Transport {
    pub fn build(cfg: &SinkConfig, base: &std::path::Path) -> Result<Transport, BuildError> {
        let err = |field: &'static str, problem: String| BuildError {
            sink: cfg.name.clone(),
            field,
            problem,
        };
        if cfg.nats() {
            // Read the files now, so that a missing one is refused at (re)load, not at the
            // first send.
            tls::check_nats_files(cfg, base).map_err(|(f, p)| err(f, p))?;
            return Ok(Transport::Nats(Box::new(Nats {
                cfg: cfg.clone(),
                base: base.to_path_buf(),
                jetstream: cfg.jetstream(),
                lanes: (0..cfg.streams().len().max(1))
                    .map(|_| Lane::default())
                    .collect(),
            })));
        }
        match cfg.kind {
            SinkType::Http | SinkType::RemoteWrite | SinkType::Guest => {
                let mut headers = HeaderMap::new();
                if let Some(f) = &cfg.auth.token_file {
                    let path = base.join(f);
                    let token = std::fs::read_to_string(&path)
                        .map_err(|e| err("token-file", format!("{}: {e}", path.display())))?;
                    let value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                        .map_err(|_| {
                            err(
                                "token-file",
                                format!("{}: not a valid header value", path.display()),
                            )
                        })?;
                    headers.insert(AUTHORIZATION, value);
                }
                if cfg.kind == SinkType::RemoteWrite {
                    headers.insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static("application/x-protobuf"),
                    );
                    headers.insert(CONTENT_ENCODING, HeaderValue::from_static("snappy"));
                    headers.insert(
                        "x-prometheus-remote-write-version",
                        HeaderValue::from_static("0.1.0"),
                    );
                } else if cfg.kind == SinkType::Http {
                    // Content-Encoding goes with each record (see `Http::send`).
                    headers.insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static("text/plain; charset=utf-8"),
                    );
                }
                let client = tls::http_client(cfg, base).map_err(|(f, p)| err(f, p))?;
                let url = reqwest::Url::parse(&cfg.url).map_err(|e| err("url", e.to_string()))?;
                Ok(Transport::Http(Http {
                    client,
                    url,
                    headers,
                    line_protocol: cfg.kind == SinkType::Http,
                    gzip: cfg.gzip,
                }))
            }
            SinkType::Nats | SinkType::Jetstream => unreachable!("cfg.nats() is true for them"),
        }
    }

    /// One attempt at delivering an exporter's request `k` of the record `id` (sent as
    /// `ID.K`, so that receivers that drop repeats tell a record's requests apart).
    pub async fn send_request(&self, req: &Request, id: &str) -> Outcome {
        if let Some((k, _)) = req
            .headers
            .iter()
            .find(|(k, _)| OWNED.iter().any(|o| k.eq_ignore_ascii_case(o)))
        {
            return Outcome::Refused(format!("header {k:?} is the host's to set"));
        }
        match self {
            Transport::Http(h) => h.send_request(req, id).await,
            Transport::Nats(n) => {
                let subject = format!(
                    "{}{}",
                    n.cfg.subject.as_deref().unwrap_or_default(),
                    req.suffix
                );
                if let Err(e) = check_subject(&subject) {
                    return Outcome::Refused(format!("suffix {:?}: {e}", req.suffix));
                }
                let mut headers = async_nats::HeaderMap::new();
                if !req.content_type.is_empty() {
                    headers.insert("Content-Type", req.content_type.as_str());
                }
                for (k, v) in &req.headers {
                    headers.append(k.as_str(), v.as_str());
                }
                n.publish(subject, headers, &req.body, id).await
            }
        }
    }

    /// One attempt at delivering `payload` under the record id `id`.
    pub async fn send(&self, payload: &bytes::Bytes, id: &str) -> Outcome {
        match self {
            Transport::Http(h) => h.send(payload, id).await,
            Transport::Nats(n) => n.send(payload, id).await,
        }
    }
}

/// Headers an exporter may not set: the transport's own, and what would change the request's
/// framing or its credentials (the sink's `token-file` is the one source of those).
const OWNED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "authorization",
    BATCH_ID_HEADER,
    "nats-msg-id",
];

impl Http {
    async fn send_request(&self, r: &Request, id: &str) -> Outcome {
        let url = if r.suffix.is_empty() {
            self.url.clone()
        } else {
            let base = self.url.as_str();
            let base = if r.suffix.starts_with('/') {
                base.trim_end_matches('/')
            } else {
                base
            };
            match reqwest::Url::parse(&format!("{base}{}", r.suffix)) {
                Ok(u) => u,
                Err(e) => {
                    return Outcome::Refused(format!("suffix {:?} makes no URL: {e}", r.suffix));
                }
            }
        };
        let mut req = self
            .client
            .post(url)
            .headers(self.headers.clone())
            .header(BATCH_ID_HEADER, id);
        if !r.content_type.is_empty() {
            req = req.header(CONTENT_TYPE, r.content_type.as_str());
        }
        for (k, v) in &r.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        answer(req.body(r.body.clone()).send().await).await
    }

    async fn send(&self, payload: &bytes::Bytes, id: &str) -> Outcome {
        let mut req = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(BATCH_ID_HEADER, id);
        // A record is compressed as `gzip` was when it was queued, which a reload may have
        // changed since: the body says which (line protocol is UTF-8, never gzip's magic).
        let mut body = payload.clone();
        if self.line_protocol && payload.starts_with(&GZIP_MAGIC) {
            if self.gzip {
                req = req.header(CONTENT_ENCODING, "gzip");
            } else {
                match gunzip(payload) {
                    Ok(plain) => body = plain.into(),
                    Err(e) => return Outcome::Refused(format!("inflating the queued record: {e}")),
                }
            }
        }
        answer(req.body(body).send().await).await
    }
}

/// What an HTTP answer means for the record (the table above).
async fn answer(sent: reqwest::Result<reqwest::Response>) -> Outcome {
    {
        let resp = match sent {
            Ok(r) => r,
            Err(e) => return Outcome::Retry(error_chain(&e)),
        };
        let status = resp.status();
        if status.is_success() {
            return Outcome::Delivered;
        }
        let body = resp.text().await.unwrap_or_default();
        let what = format!(
            "{status}: {}",
            body.trim().chars().take(300).collect::<String>()
        );
        match status.as_u16() {
            408 | 425 | 429 | 401 | 403 | 404 => Outcome::Retry(what),
            400..=499 => Outcome::Refused(what),
            _ => Outcome::Retry(what),
        }
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::with_capacity(bytes.len() * 8);
    flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

/// reqwest's error and its sources in one line ("error sending request: connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

/// How long a publish may go on being answered "no responders" before the stream is looked
/// up (and created) again: a stream whose leader is being elected has no responders until the
/// new leader runs (nats-server's followers wait 4-9 s for a lost leader, then campaign); a
/// deleted stream has none for good.
const NO_STREAM_BEFORE_LOOKUP: Duration = Duration::from_secs(10);

/// How long one attempt re-publishes a message at most (the sink's `timeout` when shorter):
/// long enough to span a leader election (4-9 s), short enough that a sink whose cluster has
/// no quorum says so (the forwarder's one warning) within seconds and backs off.
const PUBLISH_ATTEMPT: Duration = Duration::from_secs(10);

/// How long looking the stream up or creating it may take: the cluster's meta leader answers,
/// and it may be the server that just died.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a JetStream publish waits for its PubAck before the same message (same
/// `Nats-Msg-Id`) is published again, while the earlier copies' PubAcks are still awaited.
/// A stream whose leader died or hangs answers nothing, or "no responders", until the
/// survivors have elected another; the first copy published after that is acknowledged, so
/// delivery resumes within this of the election rather than after the sink's `timeout` and a
/// backoff. A PubAck takes milliseconds otherwise (benches/README.md: p99 24 ms with 3
/// replicas), and a copy published early is dropped by the stream's de-duplication.
const REPUBLISH_EVERY: Duration = Duration::from_millis(250);

/// How long a publish waits for its PubAck before the connection's server is asked whether it
/// answers at all: PubAcks take milliseconds (p99 24 ms with 3 replicas), an election 4-9 s.
const PROBE_AFTER: Duration = Duration::from_secs(1);

impl Nats {
    /// Lane `i`'s connection, made when there is none: a hedge's lane tries the server the
    /// first lane is connected to last (as it does the server its own last connection hung on).
    async fn connection(
        &self,
        i: usize,
    ) -> Result<tokio::sync::MappedMutexGuard<'_, Conn>, String> {
        let lane = &self.lanes[i];
        let mut conn = lane.conn.lock().await;
        // A connection being made runs on its own: a hedged publish that the other lane
        // delivered drops this lane's part, and the connection would never be made while the
        // other lane answers first (seen: a lane off for 6 s while a server was frozen, as
        // reading the servers' names waited for the frozen one).
        let mut connecting = lane.connecting.lock().await;
        if conn.is_none() && connecting.is_none() {
            let opts = tls::nats_options(&self.cfg, &self.base).await?;
            let hung = crate::util::lock(&lane.hung).clone();
            let mut aim = crate::util::lock(&lane.aim).clone();
            if i > 0 {
                // Off the first lane's server. Not waited for: the first lane may be looking
                // its stream up.
                let first = self.lanes[0].conn.try_lock().ok().and_then(|c| {
                    c.as_ref().map(|c| {
                        (
                            c.client.server_info().server_name,
                            crate::nats::said(&c.client),
                        )
                    })
                });
                if let Some((name, said)) = first {
                    aim.shun.push(name);
                    aim.known = said.known;
                }
            }
            let cfg = self.cfg.clone();
            *connecting = Some(tokio::spawn(async move {
                cfg.connection()
                    .connect_aiming(opts, hung.as_ref(), &aim)
                    .await
                    .map_err(|e| e.to_string())
            }));
        }
        if let Some(task) = connecting.as_mut() {
            let made = task.await;
            *connecting = None;
            let client = made.map_err(|e| format!("connecting: {e}"))??;
            let js = self.jetstream.then(|| {
                let mut js = async_nats::jetstream::new(client.clone());
                js.set_timeout(self.cfg.timeout.min(LOOKUP_TIMEOUT));
                js
            });
            *conn = Some(Conn {
                client,
                js,
                stream_ready: false,
                no_stream_since: None,
            });
        }
        drop(connecting);
        Ok(tokio::sync::MutexGuard::map(conn, |c| {
            c.as_mut().expect("connected above")
        }))
    }

    async fn send(&self, payload: &bytes::Bytes, id: &str) -> Outcome {
        let subject = self.cfg.subject.clone().unwrap_or_default();
        // Queued by this sink when it was an `http` one with gzip: subscribers read plain
        // line protocol.
        let inflated;
        let payload = if payload.starts_with(&GZIP_MAGIC) {
            match gunzip(payload) {
                Ok(plain) => {
                    inflated = bytes::Bytes::from(plain);
                    &inflated
                }
                Err(e) => return Outcome::Refused(format!("inflating the queued record: {e}")),
            }
        } else {
            payload
        };
        let headers = async_nats::HeaderMap::new();
        self.publish(subject, headers, payload, id).await
    }

    /// Publishes one message: core NATS, or JetStream with `Nats-Msg-Id` = `id`; a hedged
    /// sink's to both streams at once, each through its lane, delivered when either is.
    async fn publish(
        &self,
        subject: String,
        headers: async_nats::HeaderMap,
        payload: &bytes::Bytes,
        id: &str,
    ) -> Outcome {
        use futures_util::future::{Either, select};
        let Some((_, hedge)) = self.cfg.streams().into_iter().nth(1) else {
            return self.publish_on(0, subject, headers, payload, id).await;
        };
        let first = Box::pin(self.publish_on(0, subject, headers.clone(), payload, id));
        let second = Box::pin(self.publish_on(1, hedge, headers, payload, id));
        let (one, other) = match select(first, second).await {
            Either::Left((one, other)) => (one, other),
            Either::Right((one, other)) => (one, other),
        };
        if matches!(one, Outcome::Delivered) {
            return one;
        }
        match (one, other.await) {
            (_, Outcome::Delivered) => Outcome::Delivered,
            (Outcome::Refused(e), _) | (_, Outcome::Refused(e)) => Outcome::Refused(e),
            (Outcome::Retry(a), Outcome::Retry(b)) => Outcome::Retry(format!("{a}; {b}")),
            (one, _) => one,
        }
    }

    /// A hedge's lane `i` (its connection `client`), every [`HEDGE_LOOK_EVERY`]: asks who
    /// leads the other stream and drops the connection when it is to that server (or, the
    /// second lane, to the first lane's), so that the next one goes elsewhere.
    async fn look(&self, i: usize, client: &async_nats::Client) {
        let lane = &self.lanes[i];
        {
            let mut looked = crate::util::lock(&lane.looked);
            if looked.is_some_and(|t| t.elapsed() < HEDGE_LOOK_EVERY) {
                return;
            }
            *looked = Some(std::time::Instant::now());
        }
        let streams = self.cfg.streams();
        let Some((other, _)) = streams.get(1 - i.min(1)) else {
            return;
        };
        let asked = tokio::time::timeout(
            HEDGE_LOOK_TIMEOUT,
            client.request(format!("$JS.API.STREAM.INFO.{other}"), bytes::Bytes::new()),
        )
        .await;
        let leader = asked
            .ok()
            .and_then(Result::ok)
            .and_then(|m| serde_json::from_slice::<serde_json::Value>(&m.payload).ok())
            .and_then(|v| v["cluster"]["leader"].as_str().map(String::from));
        let mut aim = crate::nats::Aim {
            shun: leader.into_iter().collect(),
            known: crate::nats::said(client).known,
            ..Default::default()
        };
        if i > 0
            && let Ok(first) = self.lanes[0].conn.try_lock()
            && let Some(c) = first.as_ref()
        {
            aim.shun.push(c.client.server_info().server_name);
        }
        let here = client.server_info().server_name;
        let moves = aim.moves_from(&here);
        *crate::util::lock(&lane.aim) = aim;
        if moves {
            tracing::info!(sink = %self.cfg.name, server = %here, lane = i, "a hedge's lane on the other stream's leader (or beside the first lane): connecting to another");
            *lane.conn.lock().await = None;
        }
    }

    /// Publishes one message through lane `i` (its stream on `subject`).
    async fn publish_on(
        &self,
        i: usize,
        subject: String,
        mut headers: async_nats::HeaderMap,
        payload: &bytes::Bytes,
        id: &str,
    ) -> Outcome {
        if self.jetstream && self.lanes.len() > 1 {
            let client = self.connection(i).await.ok().map(|c| c.client.clone());
            if let Some(client) = client
                && client.connection_state() == async_nats::connection::State::Connected
            {
                self.look(i, &client).await;
            }
        }
        let mut conn = match self.connection(i).await {
            Ok(c) => c,
            Err(e) => return Outcome::Retry(e),
        };
        if conn.client.connection_state() != async_nats::connection::State::Connected {
            return Outcome::Retry(format!("not connected to {}", self.cfg.url));
        }
        let Some(js) = conn.js.clone() else {
            // Core NATS: best effort. A flush that returns means the server has read the bytes;
            // nothing says a subscriber got them.
            let published = if headers.is_empty() {
                conn.client.publish(subject, payload.clone()).await
            } else {
                conn.client
                    .publish_with_headers(subject, headers, payload.clone())
                    .await
            };
            if let Err(e) = published {
                return Outcome::Retry(e.to_string());
            }
            return match conn.client.flush().await {
                Ok(()) => Outcome::Delivered,
                Err(e) => Outcome::Retry(e.to_string()),
            };
        };
        if !conn.stream_ready {
            match ensure_stream(&js, &self.cfg, i).await {
                Ok(()) => conn.stream_ready = true,
                Err(e) => return Outcome::Retry(e),
            }
        }
        let limit = conn.client.server_info().max_payload;
        let client = conn.client.clone();
        drop(conn);
        if limit > 0 && payload.len() > limit {
            return Outcome::Refused(format!(
                "{} bytes is over the server's message limit",
                payload.len()
            ));
        }
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
        self.publish_until_acked(i, &client, js, subject, headers, payload)
            .await
    }

    /// Publishes the message through lane `i`, and again every [`REPUBLISH_EVERY`] with the
    /// same headers (its `Nats-Msg-Id`), until one copy's PubAck comes or [`PUBLISH_ATTEMPT`]
    /// (the sink's `timeout` when shorter) has passed.
    async fn publish_until_acked(
        &self,
        i: usize,
        client: &async_nats::Client,
        mut js: async_nats::jetstream::Context,
        subject: String,
        headers: async_nats::HeaderMap,
        payload: &bytes::Bytes,
    ) -> Outcome {
        use async_nats::jetstream::context::PublishErrorKind;
        use futures_util::stream::{FuturesUnordered, StreamExt};
        use std::future::IntoFuture;
        use tokio::time::Instant;
        let lane = &self.lanes[i];
        // Every copy's PubAck is awaited until the attempt ends.
        let attempt = self.cfg.timeout.min(PUBLISH_ATTEMPT);
        js.set_timeout(attempt);
        let deadline = Instant::now() + attempt;
        // A PubAck that is late may be an election, or a hung server (async-nats pings only
        // an idle connection, and re-publishing keeps it busy): the server is asked once; one
        // that does not answer is left, and the next attempt connects through another.
        let probe = async {
            tokio::time::sleep(PROBE_AFTER).await;
            crate::nats::answers(client).await
        };
        tokio::pin!(probe);
        let mut probed = false;
        let mut acks = FuturesUnordered::new();
        let (mut copies, mut last) = (0u32, String::from("no answer"));
        while Instant::now() < deadline {
            if client.connection_state() == async_nats::connection::State::Connected {
                match js
                    .publish_with_headers(subject.clone(), headers.clone(), payload.clone())
                    .await
                {
                    Ok(f) => {
                        acks.push(f.into_future());
                        copies += 1;
                    }
                    Err(e) => last = e.to_string(),
                }
            } else {
                last = format!("not connected to {}", self.cfg.url);
            }
            let tick = tokio::time::sleep_until((Instant::now() + REPUBLISH_EVERY).min(deadline));
            tokio::pin!(tick);
            loop {
                tokio::select! {
                    _ = &mut tick => break,
                    answered = &mut probe, if !probed => {
                        probed = true;
                        if !answered {
                            *crate::util::lock(&lane.hung) = Some(crate::nats::said(client));
                            *lane.conn.lock().await = None;
                            return Outcome::Retry(format!(
                                "{}: the server stopped answering; connecting through another",
                                self.cfg.url
                            ));
                        }
                    }
                    Some(r) = acks.next(), if !acks.is_empty() => match r {
                        Ok(_) => {
                            if let Some(c) = lane.conn.lock().await.as_mut() {
                                c.no_stream_since = None;
                            }
                            return Outcome::Delivered;
                        }
                        Err(e) => {
                            last = e.to_string();
                            // "No responders" for longer than an election takes: the stream
                            // may be gone; the next attempt looks it up (creates it) again.
                            // A PubAck that did not come says nothing about the stream.
                            if e.kind() == PublishErrorKind::StreamNotFound
                                && let Some(c) = lane.conn.lock().await.as_mut()
                            {
                                let since = *c.no_stream_since.get_or_insert_with(std::time::Instant::now);
                                if since.elapsed() >= NO_STREAM_BEFORE_LOOKUP {
                                    c.stream_ready = false;
                                    c.no_stream_since = None;
                                    return Outcome::Retry(last);
                                }
                            }
                        }
                    },
                }
            }
        }
        Outcome::Retry(format!(
            "no PubAck within {attempt:?} ({copies} copies published): {last}"
        ))
    }
}

/// Finds the sink's stream `which` (0: `stream`, 1: `hedge-stream`), or creates it on its
/// subject with the sink's de-duplication window and replicas (a guest sink's also on the
/// subjects below it, where its exporter's suffixes put messages); a stream that exists is
/// used as it is.
async fn ensure_stream(
    js: &async_nats::jetstream::Context,
    cfg: &SinkConfig,
    which: usize,
) -> Result<(), String> {
    let streams = cfg.streams();
    let (name, subject) = match streams.get(which) {
        Some((name, subject)) => (name.as_str(), subject.clone()),
        None => (
            cfg.stream.as_deref().unwrap_or_default(),
            cfg.subject.clone().unwrap_or_default(),
        ),
    };
    let subjects = match cfg.kind {
        SinkType::Guest => vec![format!("{subject}.>"), subject],
        _ => vec![subject],
    };
    crate::nats::jetstream::stream_for(js, name, &subjects, cfg.duplicate_window, cfg.replicas)
        .await
        .map(|_| ())
}
