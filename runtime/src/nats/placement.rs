//! Keeps a hedged pair of streams led from different servers: the two streams' leaders, and
//! each stream's durable consumer's leader, so that no one server leads a part of both
//! streams' ways (stream and consumer). Losing any one server then leaves one stream storing
//! and its consumer delivering while the other's Raft groups elect new leaders (4-9 s in
//! nats-server, not configurable). Moves leaders only with JetStream's step-down requests
//! (nats-server 2.2 and later), which pick the new leader among the followers themselves: a
//! step that lands badly is taken again at the next look. Owns no stream or consumer.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the leaders are looked at when they are apart: after a server's loss a new
/// leader may land beside the other stream's, leaving one server able to stop both until this
/// moves it.
const LOOK_EVERY: Duration = Duration::from_secs(5);
/// How long after a step-down the leaders are looked at again: an election by step-down takes
/// milliseconds (the old leader names its successor).
const LOOK_AFTER_STEP: Duration = Duration::from_secs(1);
/// How long one info or step-down request may take: the leader answers within milliseconds;
/// one that does not is being elected or hung, and the next look asks again.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// What to move so that no server leads both ways, `leaders[i]` being stream `i`'s leader and
/// its consumer's.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Step {
    /// Stream `i`'s leader steps down.
    Stream(usize),
    /// Stream `i`'s consumer's leader steps down.
    Consumer(usize),
}

/// The next step, `None` when the two ways share no server. Only a consumer away from its own
/// stream's leader is moved: one beside it is where the step would aim, and moving it would
/// swing between two servers while the third is away (seen on 2.9.10 with a server frozen).
/// When both consumers are away and in the way, `turn` picks which moves: the caller
/// alternates it, as a consumer's step-down may have one place to go (a server that just came
/// back is not eligible yet) and that place may be the other's (seen on 2.9.10).
pub fn next_step(leaders: [[&str; 2]; 2], turn: bool) -> Option<Step> {
    let [[sa, ca], [sb, cb]] = leaders;
    let second = cb != sb && (cb == sa || cb == ca);
    let first = ca != sa && (ca == sb || ca == cb);
    if sa == sb {
        Some(Step::Stream(1))
    } else if second && !(first && turn) {
        Some(Step::Consumer(1))
    } else if first {
        Some(Step::Consumer(0))
    } else {
        None
    }
}

/// The leaders last seen by [`keep_apart`], `[stream, consumer]` of each of the two streams:
/// what the hedge's connections aim by ([`lane_aim`]).
pub type Seen = std::sync::Mutex<Option<[[String; 2]; 2]>>;

/// Where way `lane`'s connection should be, by the leaders `ways`: on the server that leads
/// its own consumer (the fetches and the deliveries go no further), else its own stream's,
/// and never on one that leads a part of the other way (one hung server would then stop
/// both). As `(prefer, shun)`.
pub fn lane_aim(ways: &[[String; 2]; 2], lane: usize) -> (Vec<String>, Vec<String>) {
    let own = &ways[lane.min(1)];
    let other = &ways[1 - lane.min(1)];
    let shun: Vec<String> = other.to_vec();
    let prefer = [&own[1], &own[0]]
        .into_iter()
        .filter(|s| !shun.contains(s))
        .cloned()
        .collect();
    (prefer, shun)
}

/// Asks `subject` (a JetStream API request) and reads the answer's JSON; the server's error
/// (`{"error": ...}`) is returned as one.
async fn ask(client: &async_nats::Client, subject: String) -> Result<serde_json::Value, String> {
    let m = tokio::time::timeout(REQUEST_TIMEOUT, client.request(subject.clone(), "".into()))
        .await
        .map_err(|_| format!("{subject}: no answer within {REQUEST_TIMEOUT:?}"))?
        .map_err(|e| format!("{subject}: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&m.payload).map_err(|e| format!("{subject}: {e}"))?;
    if let Some(e) = v.get("error") {
        return Err(format!("{subject}: {e}"));
    }
    Ok(v)
}

/// The server that leads the stream or consumer whose info `subject` asks for.
async fn leader(client: &async_nats::Client, subject: String) -> Result<String, String> {
    let v = ask(client, subject.clone()).await?;
    v["cluster"]["leader"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| format!("{subject}: no leader"))
}

/// The leaders of `streams` and of their consumer `durable`, `[stream, consumer]` each.
async fn leaders(
    client: &async_nats::Client,
    streams: &[String; 2],
    durable: &str,
) -> Result<[[String; 2]; 2], String> {
    let one = |s: &str| {
        let s = s.to_string();
        async move {
            let st = leader(client, format!("$JS.API.STREAM.INFO.{s}")).await?;
            let co = leader(client, format!("$JS.API.CONSUMER.INFO.{s}.{durable}")).await?;
            Ok::<_, String>([st, co])
        }
    };
    let (a, b) = tokio::join!(one(&streams[0]), one(&streams[1]));
    Ok([a?, b?])
}

/// Until `stop`: looks at the leaders of `streams` and their consumer `durable` every
/// [`LOOK_EVERY`], and steps one down when one server leads a part of both streams' ways.
/// Nothing is moved while a leader is missing or unknown (an election runs: moving another
/// would leave both ways without one).
pub async fn keep_apart(
    client: &async_nats::Client,
    streams: &[String; 2],
    durable: &str,
    stop: &CancellationToken,
    seen: Option<&Seen>,
) {
    let steps = crate::telemetry::registry().counter(
        "wasmon_nats_hedge_stepdowns_total",
        "Leaders of a hedged pair of streams (or of their consumers) asked to step down so that \
         no one server leads both.",
        &[],
    );
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = LOOK_EVERY;
        let now = match leaders(client, streams, durable).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "hedged streams' leaders not known");
                continue;
            }
        };
        if let Some(seen) = seen {
            *crate::util::lock(seen) = Some(now.clone());
        }
        let [[sa, ca], [sb, cb]] = &now;
        let Some(step) = next_step([[sa, ca], [sb, cb]], steps.get() % 2 == 1) else {
            continue;
        };
        let (subject, what) = match step {
            Step::Stream(i) => (
                format!("$JS.API.STREAM.LEADER.STEPDOWN.{}", streams[i]),
                format!("stream {}", streams[i]),
            ),
            Step::Consumer(i) => (
                format!("$JS.API.CONSUMER.LEADER.STEPDOWN.{}.{durable}", streams[i]),
                format!("consumer {}/{durable}", streams[i]),
            ),
        };
        match ask(client, subject).await {
            Ok(_) => {
                steps.inc();
                tracing::info!(leaders = ?now, "moving the leader of {what}: one server led both hedged streams' ways");
            }
            Err(e) => tracing::warn!(error = %e, "moving the leader of {what}"),
        }
        wait = LOOK_AFTER_STEP;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_aims_at_its_own_way_and_shuns_the_other() {
        let w = |a: [&str; 2], b: [&str; 2]| [a.map(String::from), b.map(String::from)];
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let ways = w(["s0", "s2"], ["s1", "s1"]);
        assert_eq!(lane_aim(&ways, 0), (s(&["s2", "s0"]), s(&["s1", "s1"])));
        assert_eq!(lane_aim(&ways, 1), (s(&["s1", "s1"]), s(&["s0", "s2"])));
        // Not apart yet: what the other way leads is never preferred.
        let ways = w(["s0", "s1"], ["s1", "s2"]);
        assert_eq!(lane_aim(&ways, 0), (s(&["s0"]), s(&["s1", "s2"])));
        assert_eq!(lane_aim(&ways, 1), (s(&["s2"]), s(&["s0", "s1"])));
    }

    #[test]
    fn no_server_leads_both_ways_after_the_steps() {
        for (leaders, step) in [
            // Streams on one server: the second moves.
            ([["s0", "s0"], ["s0", "s1"]], Some(Step::Stream(1))),
            ([["s0", "s1"], ["s0", "s2"]], Some(Step::Stream(1))),
            // A consumer beside the other stream's leader or consumer.
            ([["s0", "s1"], ["s1", "s1"]], Some(Step::Consumer(0))),
            ([["s0", "s2"], ["s1", "s2"]], Some(Step::Consumer(1))),
            ([["s2", "s2"], ["s0", "s2"]], Some(Step::Consumer(1))),
            ([["s0", "s2"], ["s1", "s0"]], Some(Step::Consumer(1))),
            // Apart, with each consumer beside its stream or elsewhere.
            ([["s0", "s0"], ["s1", "s1"]], None),
            ([["s0", "s2"], ["s1", "s1"]], None),
            ([["s0", "s0"], ["s1", "s2"]], None),
        ] {
            assert_eq!(next_step(leaders, false), step, "{leaders:?}");
        }
        // Both consumers away and in the way: the turn picks.
        let both = [["s0", "s1"], ["s2", "s1"]];
        assert_eq!(next_step(both, false), Some(Step::Consumer(1)));
        assert_eq!(next_step(both, true), Some(Step::Consumer(0)));
        // Every state of three servers: where a step is taken, no server led both ways.
        let s = ["s0", "s1", "s2"];
        for a in s {
            for b in s {
                for c in s {
                    for d in s {
                        let apart = ![a, b].iter().any(|x| *x == c || *x == d);
                        assert_eq!(
                            next_step([[a, b], [c, d]], false).is_none(),
                            apart,
                            "{a}{b}{c}{d}"
                        );
                    }
                }
            }
        }
        // With one server of three away, a step-down has one place to go: from every state
        // the leaders are apart within three steps.
        let other = |x: &mut &str| *x = if *x == "s0" { "s1" } else { "s0" };
        for bits in 0..16u8 {
            let at = |k: u8| if bits >> k & 1 == 1 { "s1" } else { "s0" };
            let l0 = [[at(0), at(1)], [at(2), at(3)]];
            for turns in [0u8, 1, 2] {
                let mut l = l0;
                let mut steps = 0u8;
                // Turns: always false, always true, alternating.
                while let Some(step) = next_step(l, turns == 1 || (turns == 2 && steps % 2 == 1)) {
                    match step {
                        Step::Stream(i) => other(&mut l[i][0]),
                        Step::Consumer(i) => other(&mut l[i][1]),
                    }
                    steps += 1;
                    assert!(steps <= 3, "from {bits:04b}: {l:?}");
                }
            }
        }
    }
}
