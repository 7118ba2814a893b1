//! NATS ingest as cc-metric-store does it: subscribe to the configured subjects, each message
//! a line-protocol body, the cluster for lines without a `cluster` tag taken from the
//! subscription. Core NATS is at-most-once, so messages are not held back for WAL durability;
//! the WAL is still appended (durable at the next group commit).
//!
//! A subscription that names a `stream` is a durable JetStream pull consumer instead (what a
//! node's `jetstream` sink publishes into): messages are acknowledged only after their samples
//! are in the WAL, so nothing acknowledged is lost when the daemon dies, and a message that was
//! not acknowledged is delivered again. A second daemon with its own `durable` is a replica that
//! catches up from the stream. NATS going away (a restart) is waited out, not fatal.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::ingest;
use crate::store::Store;

mod config;
mod hedge;

pub use config::{NatsConfig, NatsSubscription};

#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error(transparent)]
    Connect(#[from] crate::nats::ConnectError),
    #[error("a subscription's task panicked: {0}")]
    Panicked(String),
    #[error("subscribing to {subject}: {source}")]
    Subscribe {
        subject: String,
        source: async_nats::SubscribeError,
    },
}

/// Connects, subscribes and stores messages until `shutdown` is cancelled. A consumer that
/// panics stops the others and fails the run (its supervisor starts it again); each JetStream
/// consumer reports whether it works under `health`'s name and its stream's. A server that
/// stops answering (hung: stopped, its sockets open) is left: the subscriptions and consumers
/// start again on a new connection that tries that server last, and each consumer resumes
/// from its durable position. The consumers of hedged subscriptions' second streams run on a
/// connection of their own (a second lane), to another server than the first lane's when it
/// can, so that one hung server holds up one of a hedge's two streams only.
pub async fn run_nats_ingest(
    store: Arc<Store>,
    cfg: NatsConfig,
    shutdown: CancellationToken,
    health: crate::supervise::Health,
) -> Result<(), NatsError> {
    let run = Run {
        store: &store,
        cfg: &cfg,
        shutdown: &shutdown,
        health: &health,
        kept: cfg
            .subscriptions
            .iter()
            .map(|_| Default::default())
            .collect(),
        // A hedged subscription's records seen, across connections and lanes.
        seen: cfg
            .subscriptions
            .iter()
            .map(|sc| sc.hedge().map(|_| hedge::Seen::shared()))
            .collect(),
        first: Default::default(),
        ways: Default::default(),
    };
    if cfg.subscriptions.iter().any(|sc| sc.hedge().is_some()) {
        futures_util::future::try_join(run.lane(0), run.lane(1))
            .await
            .map(|_| ())
    } else {
        run.lane(0).await
    }
}

/// What the lanes of one ingest share.
struct Run<'a> {
    store: &'a Arc<Store>,
    cfg: &'a NatsConfig,
    shutdown: &'a CancellationToken,
    health: &'a crate::supervise::Health,
    /// Per subscription and lane, what its consumer's leader has not confirmed.
    kept: Vec<[Arc<std::sync::Mutex<Unconfirmed>>; 2]>,
    seen: Vec<Option<hedge::Shared>>,
    /// The first lane's connection: the second tries its server last, and leaves it when the
    /// client library's own reconnection put both on one server.
    first: std::sync::Mutex<Option<async_nats::Client>>,
    /// The first hedged subscription's leaders, as its placement last saw them: each lane
    /// connects to a server of its own way and leaves one that leads part of the other's.
    ways: Arc<crate::nats::placement::Seen>,
}

/// How often a hedge's lane looks whether it is where it should be: off the servers that
/// lead a part of the other way (a leader moved there, or the client library's own
/// reconnection did), and the second lane off the first's server. A look asks nothing of
/// the servers.
const LANE_LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// How long a lane stays on a server before it may move: the leaders it aims by are seen
/// every few seconds, so a move on a stale sight is not taken again at once.
const LANE_STAYS: std::time::Duration = std::time::Duration::from_secs(3);

/// Why a lane's session ended.
enum Ended {
    Shutdown,
    /// Its server stopped answering.
    Hung(crate::nats::Hung),
    /// The lane was on a server it should not be on (this one).
    Moved(String),
}

/// How long the second lane waits for the first to be connected before it connects anyway
/// (to any server).
const SECOND_LANE_WAITS: std::time::Duration = std::time::Duration::from_secs(2);

impl Run<'_> {
    /// Lane `lane`'s sessions, one after another, until `shutdown`.
    async fn lane(&self, lane: usize) -> Result<(), NatsError> {
        let mut avoid = None;
        if lane > 0 {
            let t = std::time::Instant::now();
            while crate::util::lock(&self.first).is_none() && t.elapsed() < SECOND_LANE_WAITS {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        loop {
            match self.session(lane, avoid.as_ref()).await? {
                Ended::Shutdown => return Ok(()),
                Ended::Hung(hung) => {
                    tracing::warn!(server = %hung.server, "NATS server stopped answering: connecting through another");
                    avoid = Some(hung);
                }
                Ended::Moved(here) => {
                    tracing::info!(server = %here, lane, "a hedge's way on a server that leads part of the other way (or beside the first way): connecting to another");
                    avoid = None;
                }
            }
        }
    }

    /// Where lane `lane`'s connection should go (nowhere in particular without a hedge): off
    /// the other way's leaders and, for the second lane, off the first's server.
    fn aim(&self, lane: usize) -> crate::nats::Aim {
        let mut aim = crate::nats::Aim::default();
        if self.cfg.subscriptions.iter().all(|sc| sc.hedge().is_none()) {
            return aim;
        }
        if let Some(ways) = crate::util::lock(&self.ways).as_ref() {
            (aim.prefer, aim.shun) = crate::nats::placement::lane_aim(ways, lane);
        }
        if let Some(first) = crate::util::lock(&self.first).as_ref() {
            aim.known = crate::nats::said(first).known;
            let name = first.server_info().server_name;
            if lane > 0 && !aim.shun.contains(&name) {
                aim.shun.push(name);
            }
        }
        aim
    }

    /// One connection's subscriptions and consumers (lane 0: all but the hedges' second
    /// streams; lane 1: those), until `shutdown` (`None`) or until its server stops answering
    /// (`Some`: for [`crate::nats::Connection::connect_avoiding`]).
    async fn session(
        &self,
        lane: usize,
        avoid: Option<&crate::nats::Hung>,
    ) -> Result<Ended, NatsError> {
        let Run {
            store,
            cfg,
            shutdown,
            health,
            ..
        } = *self;
        let conn = cfg.connection();
        let mut opts = conn.options(std::path::Path::new("")).await?;
        // A JetStream consumer waits out a NATS server that is down at start; core NATS
        // subscriptions fail the start as before (nothing would be kept for them anyway).
        if !cfg.subscriptions.is_empty() && cfg.subscriptions.iter().all(|s| s.stream.is_some()) {
            opts = opts.retry_on_initial_connect();
        }
        let client = conn.connect_aiming(opts, avoid, &self.aim(lane)).await?;
        let since = std::time::Instant::now();
        if lane == 0 {
            *crate::util::lock(&self.first) = Some(client.clone());
        }
        health.working();
        let stop = shutdown.child_token();
        let mut tasks = tokio::task::JoinSet::new();
        let first_hedged = cfg.subscriptions.iter().position(|s| s.hedge().is_some());
        for (i, ((sc, kept), seen)) in cfg
            .subscriptions
            .iter()
            .cloned()
            .zip(&self.kept)
            .zip(&self.seen)
            .enumerate()
        {
            if sc.stream.is_some() {
                let durable = sc.durable.as_deref().unwrap_or(DEFAULT_DURABLE);
                let hedge = sc.hedge();
                if let Some(h) = &hedge
                    && lane == 0
                {
                    let streams =
                        [sc.stream.clone(), h.stream.clone()].map(Option::unwrap_or_default);
                    let (client, stop) = (client.clone(), stop.clone());
                    let durable = durable.to_string();
                    // The first hedged subscription's leaders aim the lanes.
                    let ways = (Some(i) == first_hedged).then(|| self.ways.clone());
                    tasks.spawn(async move {
                        let ways = ways.as_deref();
                        crate::nats::placement::keep_apart(&client, &streams, &durable, &stop, ways)
                            .await
                    });
                }
                let mine = if lane == 0 { Some(sc.clone()) } else { hedge };
                if let Some(sc) = mine {
                    let kept = &kept[lane];
                    let stream = sc.stream.as_deref().unwrap_or_default();
                    let h = crate::supervise::Health::new(&format!(
                        "{} {stream}/{durable}",
                        health.name(),
                    ));
                    let (store, stop, client) = (store.clone(), stop.clone(), client.clone());
                    let seen = seen.clone();
                    tasks.spawn(run_consumer(store, client, sc, stop, h, kept.clone(), seen));
                }
                continue;
            }
            if lane > 0 {
                continue;
            }
            let mut sub = client
                .subscribe(sc.subscribe_to.clone())
                .await
                .map_err(|source| NatsError::Subscribe {
                    subject: sc.subscribe_to.clone(),
                    source,
                })?;
            tracing::info!(subject = %sc.subscribe_to, address = %cfg.address, "NATS subscription established");
            let store = store.clone();
            let shutdown = stop.clone();
            tasks.spawn(async move {
                loop {
                    let msg = tokio::select! {
                        _ = shutdown.cancelled() => break,
                        m = sub.next() => match m { Some(m) => m, None => break },
                    };
                    let now = chrono::Utc::now().timestamp();
                    let out = ingest(&store, &msg.payload, sc.cluster_tag.as_deref(), now);
                    for e in out.errors.iter().take(5) {
                        tracing::warn!(subject = %msg.subject, error = %e, "NATS line rejected");
                    }
                }
                let _ = sub.unsubscribe().await;
            });
        }
        let mut panicked = None;
        let mut hung = None;
        let mut moved = None;
        let watchdog = crate::nats::hung(&client);
        tokio::pin!(watchdog);
        let hedged = cfg.subscriptions.iter().any(|sc| sc.hedge().is_some());
        let mut look = tokio::time::interval(LANE_LOOK_EVERY);
        loop {
            tokio::select! {
                _ = look.tick(), if hedged && !stop.is_cancelled() => {
                    // Not at once: with one server up both lanes are on it.
                    let here = client.server_info().server_name;
                    if since.elapsed() >= LANE_STAYS && self.aim(lane).moves_from(&here) {
                        stop.cancel();
                        moved = Some(here);
                    }
                }
                r = tasks.join_next() => match r {
                    None => break,
                    Some(Err(e)) if e.is_panic() && panicked.is_none() => {
                        stop.cancel();
                        panicked = Some(e.to_string());
                    }
                    Some(_) => {}
                },
                server = &mut watchdog, if hung.is_none() && !stop.is_cancelled() => {
                    stop.cancel();
                    hung = Some(server);
                }
            }
        }
        if hung.is_none() {
            // A hung server would hold the flush as long as it hangs.
            let _ = client.flush().await;
        }
        if let Some(e) = panicked {
            return Err(NatsError::Panicked(e));
        }
        Ok(match (hung, moved) {
            (Some(h), _) => Ended::Hung(h),
            (None, Some(here)) => Ended::Moved(here),
            (None, None) => {
                tracing::info!("NATS ingest stopped");
                Ended::Shutdown
            }
        })
    }
}

/// Messages fetched (and acknowledged after one WAL commit) at a time.
const FETCH: usize = 256;
/// How long the server holds a fetch open when there is nothing to deliver.
const FETCH_EXPIRES: std::time::Duration = std::time::Duration::from_secs(1);
/// How much longer than that a fetch may go unanswered before the consumer's leader is taken
/// for hung: its heartbeat or its last messages arrive within milliseconds otherwise.
const FETCH_GRACE: std::time::Duration = std::time::Duration::from_millis(500);
/// How long one request of setting the consumer up (stream and consumer look-up) may take.
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// A subscription's consumer name when it names none.
const DEFAULT_DURABLE: &str = "wasmon";
/// Pauses between attempts to set the consumer up again, or to fetch again after a fetch
/// failed: short at first (a consumer whose leader is being elected answers again as soon as
/// the survivors have elected one), growing while it stays away.
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(100);
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(1);
/// How long fetches may fail before the consumer is set up again (looked up, created when it
/// was deleted): longer than a leader election takes (nats-server's followers wait 4-9 s for
/// a lost leader), so an election is waited out by fetching again, which reaches the new
/// leader at once, rather than by the look-ups' round trips.
const SETUP_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(10);
/// How long the last acknowledgement of a batch waits for the consumer leader's answer, and
/// how long unconfirmed acknowledgements are sent again (after each fetch): acknowledgements
/// sent while the consumer's leader is being elected are lost, and the server would deliver
/// those messages again only after its ack wait (30 s); the new leader takes them at once.
const ACK_CONFIRM_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);
const ACK_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(30);
/// Unconfirmed messages kept for acknowledging again at most (a few batches): past it the
/// oldest are left to the server's redelivery.
const ACK_RETRY_MAX: usize = 4 * FETCH;

/// A durable pull consumer on `sc.stream`, until `shutdown`: fetch, store, wait for the WAL,
/// acknowledge. Errors (NATS restarting, the stream missing) are logged once and retried.
async fn run_consumer(
    store: Arc<Store>,
    client: async_nats::Client,
    sc: NatsSubscription,
    shutdown: CancellationToken,
    health: crate::supervise::Health,
    kept: Arc<std::sync::Mutex<Unconfirmed>>,
    seen: Option<hedge::Shared>,
) {
    use async_nats::jetstream::consumer::pull;
    let mut kept = Kept::new(kept);
    let mut js = async_nats::jetstream::new(client.clone());
    // Setting the consumer up again after a fault must not wait out the default 5 s per
    // request: a stream or consumer whose leader is being elected is asked again sooner.
    js.set_timeout(SETUP_TIMEOUT);
    let stream = sc.stream.clone().unwrap_or_default();
    let durable = sc.durable.clone().unwrap_or_else(|| DEFAULT_DURABLE.into());
    let mut failing = false;
    let mut pause = RETRY_FIRST;
    let fail = |what: String, failing: &mut bool| {
        *failing = true;
        health.failing(&what);
    };
    let config = pull::Config {
        durable_name: Some(durable.clone()),
        filter_subject: sc.subscribe_to.clone(),
        ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
        ..Default::default()
    };
    // The consumer as set up through an earlier connection: fetched through at once, without
    // looking the stream and the consumer up, which only their leaders answer (after a hung
    // server they may be being elected, 4-9 s, while the fetches reach them the moment they
    // are). A consumer that is gone is set up again after the fetches failed a while.
    let mut known = kept.now.info.take();
    'setup: loop {
        if shutdown.is_cancelled() {
            return;
        }
        let consumer = if let Some(info) = known.take() {
            async_nats::jetstream::consumer::Consumer::new(config.clone(), info, js.clone())
        } else {
            match set_up(&js, &sc, &stream, &durable, &config).await {
                Ok(c) => {
                    tracing::info!(stream = %stream, durable = %durable, subject = %sc.subscribe_to, "JetStream consumer established");
                    if std::mem::replace(&mut failing, false) {
                        health.working();
                    }
                    c
                }
                Err(e) => {
                    fail(e, &mut failing);
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(pause) => {
                            pause = (pause * 2).min(RETRY_MAX);
                            continue 'setup
                        }
                    }
                }
            }
        };
        kept.now.info = Some(consumer.cached_info().clone());
        // Since when fetches have failed (no consumer leader, a hung one).
        let mut failing_since: Option<std::time::Instant> = None;
        loop {
            if let Some(since) = failing_since {
                if since.elapsed() >= SETUP_AGAIN_AFTER {
                    continue 'setup;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(RETRY_MAX);
            }
            let batch = tokio::select! {
                _ = shutdown.cancelled() => return,
                b = consumer.fetch().max_messages(FETCH).expires(FETCH_EXPIRES).messages() => b,
            };
            let mut messages = match batch {
                Ok(m) => m,
                Err(e) => {
                    fail(e.to_string(), &mut failing);
                    failing_since.get_or_insert_with(std::time::Instant::now);
                    continue;
                }
            };
            let mut got = Vec::new();
            let mut wal_seq = 0;
            let mut error = None;
            // A hung consumer leader (stopped, its socket open) never ends the batch: past
            // its expiry and a grace the fetch is abandoned (and the stall said).
            let drained = tokio::time::timeout(FETCH_EXPIRES + FETCH_GRACE, async {
                while let Some(m) = messages.next().await {
                    let m = match m {
                        Ok(m) => m,
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    };
                    // Stored through the hedge's other stream already: acknowledged, not stored
                    // again.
                    if let Some(seen) = &seen
                        && !hedge::first(seen, &m)
                    {
                        got.push(m);
                        continue;
                    }
                    let now = chrono::Utc::now().timestamp();
                    let out = ingest(&store, &m.payload, sc.cluster_tag.as_deref(), now);
                    for e in out.errors.iter().take(5) {
                        tracing::warn!(stream = %stream, error = %e, "JetStream line rejected");
                    }
                    wal_seq = wal_seq.max(out.wal_seq);
                    got.push(m);
                }
            })
            .await
            .is_ok();
            if !drained {
                error = Some(format!(
                    "no answer to a fetch within {:?}",
                    FETCH_EXPIRES + FETCH_GRACE
                ));
            }
            if let Some(e) = &error {
                fail(e.clone(), &mut failing);
                failing_since.get_or_insert_with(std::time::Instant::now);
            }
            let un = &mut kept.now;
            if !un.replies.is_empty() && got.is_empty() && error.is_none() {
                // The leader answers again: acknowledge what it did not confirm.
                if acknowledge(&client, &un.replies).await.is_ok() || un.expired() {
                    un.replies.clear();
                }
            }
            if got.is_empty() {
                continue;
            }
            // Acknowledge only what the WAL holds: a crash before this re-delivers them.
            if let Err(e) = store.wait_durable(wal_seq).await {
                tracing::error!(error = %e, "WAL commit failed: messages left unacknowledged");
                continue;
            }
            if un.replies.is_empty() {
                un.since = Some(std::time::Instant::now());
            }
            un.replies
                .extend(got.into_iter().filter_map(|m| m.reply.clone()));
            match acknowledge(&client, &un.replies).await {
                Ok(()) => un.replies.clear(),
                Err(e) => {
                    fail(e, &mut failing);
                    if un.expired() {
                        un.replies.clear();
                    }
                    let over = un.replies.len().saturating_sub(ACK_RETRY_MAX);
                    un.replies.drain(..over);
                }
            }
            if error.is_some() {
                continue;
            }
            failing_since = None;
            if std::mem::replace(&mut failing, false) {
                health.working();
            }
            pause = RETRY_FIRST;
        }
    }
}

/// Finds the subscription's stream (creates it when missing) and its durable consumer
/// (creates it with `config` when missing).
async fn set_up(
    js: &async_nats::jetstream::Context,
    sc: &NatsSubscription,
    stream: &str,
    durable: &str,
    config: &async_nats::jetstream::consumer::pull::Config,
) -> Result<async_nats::jetstream::consumer::PullConsumer, String> {
    let st = crate::nats::jetstream::stream_for(
        js,
        stream,
        std::slice::from_ref(&sc.subscribe_to),
        sc.duplicate_window,
        sc.replicas,
    )
    .await?;
    st.get_or_create_consumer(durable, config.clone())
        .await
        .map_err(|e| format!("consumer {durable:?}: {e}"))
}

/// Reply subjects of stored messages whose acknowledgement the consumer's leader has not
/// confirmed, and since when: kept across connections, so that a consumer that left a hung
/// server acknowledges them through the next (the server would deliver them again only after
/// its ack wait, 30 s).
#[derive(Default)]
pub(crate) struct Unconfirmed {
    replies: Vec<async_nats::Subject>,
    since: Option<std::time::Instant>,
    /// The consumer as last set up (its info), for the next connection to fetch through.
    info: Option<async_nats::jetstream::consumer::Info>,
}

impl Unconfirmed {
    /// Past [`ACK_RETRY_FOR`]: the server delivers them again anyway.
    fn expired(&self) -> bool {
        self.since.is_some_and(|t| t.elapsed() >= ACK_RETRY_FOR)
    }
}

/// One consumer's [`Unconfirmed`] while it runs, handed back to the next connection's when it
/// ends however it ends.
struct Kept {
    shared: Arc<std::sync::Mutex<Unconfirmed>>,
    now: Unconfirmed,
}

impl Kept {
    fn new(shared: Arc<std::sync::Mutex<Unconfirmed>>) -> Kept {
        let now = std::mem::take(&mut *crate::util::lock(&shared));
        Kept { shared, now }
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        *crate::util::lock(&self.shared) = std::mem::take(&mut self.now);
    }
}

/// Acknowledges messages by their reply subjects, through `client` (whichever server it is
/// connected to): each, then the last one again as a request, which the consumer's
/// leader answers after it has taken the ones before (one connection, in order). An error
/// says the acknowledgements may be lost (a leader being elected): the caller sends them
/// again after its next fetch; past [`ACK_RETRY_FOR`] the server delivers them again (stored
/// once more, the same values at the same times).
async fn acknowledge(
    client: &async_nats::Client,
    replies: &[async_nats::Subject],
) -> Result<(), String> {
    let Some((last, before)) = replies.split_last() else {
        return Ok(());
    };
    for reply in before {
        if let Err(e) = client
            .publish(reply.clone(), bytes::Bytes::from_static(b"+ACK"))
            .await
        {
            return Err(format!("ack: {e}"));
        }
    }
    let reply = last.clone();
    match tokio::time::timeout(
        ACK_CONFIRM_TIMEOUT,
        client.request(reply, bytes::Bytes::from_static(b"+ACK")),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("ack not confirmed: {e}")),
        Err(_) => Err(format!("ack not confirmed within {ACK_CONFIRM_TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::config::default_window;
    use super::*;
    use crate::store::{StoreConfig, selector};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ingest_from_real_nats_server() {
        let server = crate::testutil::NatsServer::start();
        let publisher = server.client().await;
        let store = Arc::new(Store::new(StoreConfig::default()));
        let token = CancellationToken::new();
        let core = |subject: &str, cluster: Option<&str>| NatsSubscription {
            subscribe_to: subject.into(),
            cluster_tag: cluster.map(Into::into),
            stream: None,
            durable: None,
            duplicate_window: default_window(),
            replicas: None,
            hedge_stream: None,
            hedge_subject: None,
        };
        let cfg = NatsConfig {
            address: server.address.clone(),
            auth: Default::default(),
            subscriptions: vec![core("updates.>", Some("fritz")), core("other", None)],
        };
        let task = tokio::spawn(run_nats_ingest(
            store.clone(),
            cfg,
            token.clone(),
            crate::supervise::Health::new("test-nats-ingest"),
        ));
        // Subscriptions are live once a published message arrives; retry until it does.
        let mut got = false;
        for i in 0..100 {
            publisher
                .publish(
                    "updates.a",
                    format!("load,hostname=f1 value={i} 600\nbad\n").into(),
                )
                .await
                .unwrap();
            publisher
                .publish("other", "load,cluster=c2,hostname=h value=2 600".into())
                .await
                .unwrap();
            publisher.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let a = store.read(&selector(&["fritz", "f1"]), "load", 600, 601, 0);
            let b = store.read(&selector(&["c2", "h"]), "load", 600, 601, 0);
            if let (Ok(a), Ok(b)) = (a, b) {
                assert!(a.data[0] <= i as f64);
                assert_eq!(b.data, vec![2.0]);
                got = true;
                break;
            }
        }
        assert!(got, "no NATS message was stored");
        crate::testutil::stop(&token, task).await;
    }

    #[tokio::test]
    async fn connect_error_is_reported() {
        let cfg = NatsConfig {
            address: format!("nats://127.0.0.1:{}", crate::testutil::free_port()),
            auth: Default::default(),
            subscriptions: vec![],
        };
        let store = Arc::new(Store::new(StoreConfig::default()));
        let r = run_nats_ingest(
            store,
            cfg,
            CancellationToken::new(),
            crate::supervise::Health::new("test-nats-ingest-down"),
        )
        .await;
        assert!(matches!(r, Err(NatsError::Connect { .. })));
    }
}
