//! The daemon's long-lived tasks (NATS ingest, the notifier's NATS sink, the fleet follower,
//! the fabric agent, the forwarding sinks) run under a supervisor: a task that returns an
//! error, ends before shutdown or panics (a library's `unwrap` on a timeout included) is
//! started again after a backoff, and counted. What is failing is kept in one process-wide
//! table that `/api/healthcheck`, `/api/fleet` and `/metrics` read, and logged once per
//! failure streak. Owns only that table and the restart loop; it knows no part.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// The first pause before a restart: short, since most failures are a server that went away
/// and a cluster answers again within a second or two.
pub const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause: a task that keeps failing is retried this often, not faster (it would
/// only load the server it cannot reach) and not slower (it must come back soon after).
pub const MAX_PAUSE: Duration = Duration::from_secs(10);
/// A run that lasted this long was healthy: the next failure starts from the first pause.
const HEALTHY_RUN: Duration = Duration::from_secs(30);

/// One supervised task's state, as the API shows it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct TaskState {
    /// Times it was started again after a failure.
    pub restarts: u64,
    /// Of those, after a panic.
    pub panics: u64,
    /// What is wrong now (`None`: it runs, or has not failed).
    pub failing: Option<String>,
    /// Since when it is failing (Unix seconds).
    pub failing_since: Option<i64>,
    /// The last failure, kept after it recovered.
    pub last_error: Option<String>,
}

type Table = Mutex<BTreeMap<String, TaskState>>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::default)
}

/// Every supervised task's state, by name.
pub fn states() -> BTreeMap<String, TaskState> {
    crate::util::lock(table()).clone()
}

/// One task's state.
pub fn state(name: &str) -> Option<TaskState> {
    crate::util::lock(table()).get(name).cloned()
}

/// The tasks failing now, by name (what the healthcheck reports).
pub fn failing() -> BTreeMap<String, TaskState> {
    states()
        .into_iter()
        .filter(|(_, s)| s.failing.is_some())
        .collect()
}

/// What a task tells its supervisor while it runs: it works, or it cannot do its work now
/// although it keeps trying by itself (a JetStream consumer waiting for its stream).
#[derive(Clone)]
pub struct Health {
    name: Arc<str>,
}

impl Health {
    /// A handle for `name` (its row is made on first report).
    pub fn new(name: &str) -> Health {
        crate::util::lock(table())
            .entry(name.to_string())
            .or_default();
        Health { name: name.into() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// It works (again): logged once when it was failing.
    pub fn working(&self) {
        let mut t = crate::util::lock(table());
        let s = t.entry(self.name.to_string()).or_default();
        if s.failing.take().is_some() {
            s.failing_since = None;
            tracing::info!(task = %self.name, "works again");
        }
    }

    /// It cannot work now: logged once per streak (at WARN; the supervisor logs restarts).
    pub fn failing(&self, why: &str) {
        let mut t = crate::util::lock(table());
        let s = t.entry(self.name.to_string()).or_default();
        if s.failing.is_none() {
            tracing::warn!(task = %self.name, error = %why, "failing; retrying (logged again when it works)");
            s.failing_since = Some(chrono::Utc::now().timestamp());
        }
        s.failing = Some(why.to_string());
        s.last_error = Some(why.to_string());
    }

    fn restarted(&self, why: &str, panicked: bool, pause: Duration) {
        let mut t = crate::util::lock(table());
        let s = t.entry(self.name.to_string()).or_default();
        s.restarts += 1;
        if panicked {
            s.panics += 1;
        }
        let first = s.failing.is_none();
        if first {
            s.failing_since = Some(chrono::Utc::now().timestamp());
        }
        s.failing = Some(why.to_string());
        s.last_error = Some(why.to_string());
        let restarts = s.restarts;
        drop(t);
        let labels = [("task", self.name())];
        let reg = crate::telemetry::registry();
        reg.counter(
            "wasmon_task_restarts_total",
            "Times a daemon task was started again after it failed, ended or panicked.",
            &labels,
        )
        .inc();
        if panicked {
            reg.counter(
                "wasmon_task_panics_total",
                "Times a daemon task panicked (and was started again).",
                &labels,
            )
            .inc();
        }
        // One line per streak at ERROR; the restarts of a streak at DEBUG (counted above).
        if first || panicked {
            tracing::error!(task = %self.name, error = %why, restarts, pause = ?pause, "task stopped; restarting (logged again when it works)");
        } else {
            tracing::debug!(task = %self.name, error = %why, restarts, "task stopped again; restarting");
        }
    }
}

/// Runs the task `make` builds, under `name`, until `shutdown`: each run is its own tokio
/// task (so a panic is caught as a `JoinError`), and a run that fails, panics or ends before
/// shutdown is started again after a pause growing from [`FIRST_PAUSE`] to [`MAX_PAUSE`].
pub fn spawn<F, Fut>(
    name: &str,
    shutdown: CancellationToken,
    mut make: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut(Health) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let health = Health::new(name);
    tokio::spawn(async move {
        let mut pause = FIRST_PAUSE;
        loop {
            let started = Instant::now();
            let mut run = tokio::spawn(make(health.clone()));
            let result = tokio::select! {
                r = &mut run => r,
                // A run that does not watch the token is stopped with the daemon.
                _ = shutdown.cancelled() => {
                    if tokio::time::timeout(Duration::from_secs(10), &mut run).await.is_err() {
                        run.abort();
                    }
                    return;
                }
            };
            if shutdown.is_cancelled() {
                return;
            }
            let (why, panicked) = match result {
                Ok(Ok(())) => ("ended before shutdown".to_string(), false),
                Ok(Err(e)) => (e, false),
                Err(j) if j.is_panic() => (format!("panicked: {}", panic_text(j)), true),
                Err(j) => (format!("cancelled: {j}"), false),
            };
            if started.elapsed() >= HEALTHY_RUN {
                pause = FIRST_PAUSE;
            }
            health.restarted(&why, panicked, pause);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
    })
}

fn panic_text(j: tokio::task::JoinError) -> String {
    let p = j.into_panic();
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// `wasmon_task_failing{task}` (1 while a task is failing) for `/metrics`; the restart and
/// panic counters are in the telemetry registry.
pub fn render_prometheus(out: &mut String) {
    use std::fmt::Write;
    let states = states();
    if states.is_empty() {
        return;
    }
    out.push_str("# HELP wasmon_task_failing 1 while a daemon task cannot do its work.\n");
    out.push_str("# TYPE wasmon_task_failing gauge\n");
    for (name, s) in states {
        let name = name.replace('\\', "\\\\").replace('"', "\\\"");
        let _ = writeln!(
            out,
            "wasmon_task_failing{{task=\"{name}\"}} {}",
            u8::from(s.failing.is_some())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_task_that_panics_or_fails_is_restarted_and_counted() {
        let runs = Arc::new(AtomicU32::new(0));
        let token = CancellationToken::new();
        let r = runs.clone();
        let task = spawn("test-panics", token.clone(), move |h| {
            let n = r.fetch_add(1, Ordering::SeqCst);
            async move {
                match n {
                    0 => panic!("a library unwrapped a timeout"),
                    1 => Err("the server went away".to_string()),
                    2 => Ok(()),
                    _ => {
                        h.working();
                        std::future::pending::<()>().await;
                        Ok(())
                    }
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while runs.load(Ordering::SeqCst) < 4 {
            assert!(Instant::now() < deadline, "not restarted in time");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let s = state("test-panics").unwrap();
        assert_eq!((s.restarts, s.panics), (3, 1));
        assert_eq!(s.failing, None, "it works again");
        assert_eq!(s.last_error.as_deref(), Some("ended before shutdown"));
        let mut out = String::new();
        render_prometheus(&mut out);
        assert!(
            out.contains("wasmon_task_failing{task=\"test-panics\"} 0"),
            "{out}"
        );
        let mut reg = String::new();
        crate::telemetry::registry().render(&mut reg);
        assert!(
            reg.contains("wasmon_task_panics_total{task=\"test-panics\"} 1"),
            "{reg}"
        );
        token.cancel();
        tokio::time::timeout(Duration::from_secs(11), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn failing_shows_until_working() {
        let h = Health::new("test-failing");
        h.failing("no stream found");
        assert!(failing().contains_key("test-failing"));
        h.working();
        assert!(!failing().contains_key("test-failing"));
        assert_eq!(
            state("test-failing").unwrap().last_error.as_deref(),
            Some("no stream found")
        );
    }
}
