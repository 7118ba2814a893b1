//! `wasmon notify add|ls|rm|value|watch`: the notifier's HTTP API from the command line.

use anyhow::Context;
use futures_util::StreamExt;

use crate::api::notify::*;
use crate::notify::{Direction, ThresholdInfo};

/// Default daemon address (the daemon's default `listen`); `--url` or `WASMON_URL` override it.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8082";

/// `wasmon notify [--url URL] <command>`
#[derive(clap::Args, Debug, Clone)]
pub struct NotifyArgs {
    /// Daemon base URL [default: $WASMON_URL or http://127.0.0.1:8082].
    #[arg(long)]
    pub url: Option<String>,
    #[command(subcommand)]
    pub cmd: NotifyCmd,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum NotifyCmd {
    /// Add a threshold: `add --subscriber me proc.thread.count --instance 4768 --above 40`.
    Add {
        /// Owner of the threshold (a name you choose; watch it to get the notifications).
        #[arg(long)]
        subscriber: String,
        /// Metric name, e.g. `proc.fd.count`.
        metric: String,
        /// One instance (e.g. a pid); absent or `*`: every instance.
        #[arg(long)]
        instance: Option<String>,
        /// Rising threshold: fire when the value goes from below N to at least N.
        #[arg(long, conflicts_with = "below", required_unless_present = "below")]
        above: Option<f64>,
        /// Falling threshold: fire when the value drops below N.
        #[arg(long)]
        below: Option<f64>,
        /// Re-arm only after moving this far back past the threshold.
        #[arg(long, default_value_t = 0.0)]
        hysteresis: f64,
    },
    /// List thresholds on a resource (`--metric`, `--instance`), a subscriber's, or (nothing
    /// named) every threshold.
    Ls {
        /// Thresholds on this metric (everyone's).
        #[arg(long)]
        metric: Option<String>,
        /// With `--metric`: only those that apply to this instance.
        #[arg(long)]
        instance: Option<String>,
        /// Without `--metric`: the thresholds this subscriber owns.
        #[arg(long)]
        subscriber: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete a threshold by handle, or with `--all` every threshold of `--subscriber`.
    Rm {
        /// The handle `add` printed.
        #[arg(required_unless_present = "all")]
        handle: Option<u32>,
        /// Act as this subscriber: the daemon refuses to delete others' thresholds.
        #[arg(long)]
        subscriber: Option<String>,
        /// Delete every threshold of `--subscriber`.
        #[arg(long, requires = "subscriber")]
        all: bool,
    },
    /// Print the current value of a resource.
    Value { metric: String, instance: String },
    /// Stream a subscriber's notifications (one JSON object per line with `--json`).
    Watch {
        /// Whose notifications to stream.
        #[arg(long)]
        subscriber: String,
        /// One JSON object per event instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Run `wasmon notify ...` against a daemon.
pub async fn notify_cli(args: NotifyArgs) -> anyhow::Result<()> {
    let base = args
        .url
        .or_else(|| std::env::var("WASMON_URL").ok())
        .unwrap_or_else(|| DEFAULT_URL.into());
    let base = base.trim_end_matches('/').to_string();
    let client = reqwest::Client::new();
    let mut out = std::io::stdout().lock();
    run_cli(&client, &base, args.cmd, &mut out).await
}

async fn check(resp: reqwest::Response) -> anyhow::Result<reqwest::Response> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    let msg = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or(body);
    anyhow::bail!("{status}: {msg}")
}

fn print_table(out: &mut impl std::io::Write, ts: &[ThresholdInfo]) -> std::io::Result<()> {
    let header = [
        "HANDLE", "OWNER", "METRIC", "INSTANCE", "DIR", "VALUE", "HYST",
    ];
    let rows: Vec<[String; 7]> = ts
        .iter()
        .map(|t| {
            [
                t.handle.to_string(),
                t.owner.clone(),
                t.metric.clone(),
                t.instance.clone().unwrap_or_else(|| "*".into()),
                t.direction.to_string(),
                t.value.to_string(),
                t.hysteresis.to_string(),
            ]
        })
        .collect();
    // Each column as wide as its widest cell, so long owners or metrics never shift the rest.
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Numbers right-aligned, text left-aligned, header aligned as its column.
    let right = [true, false, false, false, false, true, true];
    let line = |cells: &[&str]| -> String {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = width[i].saturating_sub(c.chars().count());
            if right[i] {
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            } else {
                l.push_str(c);
                if i + 1 < cells.len() {
                    l.push_str(&" ".repeat(pad));
                }
            }
        }
        l
    };
    writeln!(out, "{}", line(&header))?;
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    Ok(())
}

/// The CLI against `base` with output to `out` (separate from `notify_cli` for tests).
pub async fn run_cli(
    client: &reqwest::Client,
    base: &str,
    cmd: NotifyCmd,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    let url = |p: &str| format!("{base}/api/notify/{p}");
    match cmd {
        NotifyCmd::Add {
            subscriber,
            metric,
            instance,
            above,
            below,
            hysteresis,
        } => {
            let (value, direction) = match (above, below) {
                (Some(v), _) => (v, Direction::Rising),
                (None, Some(v)) => (v, Direction::Falling),
                (None, None) => anyhow::bail!("give --above N or --below N"),
            };
            let req = AddRequest {
                subscriber,
                metric,
                instance,
                value,
                direction,
                hysteresis,
            };
            let r = check(client.post(url("thresholds")).json(&req).send().await?).await?;
            let info: ThresholdInfo = r.json().await?;
            writeln!(out, "{}", info.handle)?;
        }
        NotifyCmd::Ls {
            metric,
            instance,
            subscriber,
            json,
        } => {
            let mut q: Vec<(&str, String)> = Vec::new();
            q.extend(metric.map(|m| ("metric", m)));
            q.extend(instance.map(|i| ("instance", i)));
            q.extend(subscriber.map(|s| ("subscriber", s)));
            let r = check(client.get(url("thresholds")).query(&q).send().await?).await?;
            let ts: Vec<ThresholdInfo> = r.json().await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&ts)?)?;
            } else {
                print_table(out, &ts)?;
            }
        }
        NotifyCmd::Rm {
            handle,
            subscriber,
            all,
        } => {
            let q: Vec<(&str, String)> =
                subscriber.map(|s| ("subscriber", s)).into_iter().collect();
            if all {
                let r = check(client.delete(url("thresholds")).query(&q).send().await?).await?;
                let d: Deleted = r.json().await?;
                writeln!(out, "deleted {}", d.deleted.len())?;
            } else {
                let h = handle.context("give a handle or --all")?;
                check(
                    client
                        .delete(url(&format!("thresholds/{h}")))
                        .query(&q)
                        .send()
                        .await?,
                )
                .await?;
                writeln!(out, "deleted {h}")?;
            }
        }
        NotifyCmd::Value { metric, instance } => {
            let q = [("metric", metric), ("instance", instance)];
            let r = check(client.get(url("value")).query(&q).send().await?).await?;
            let v: ValueResponse = r.json().await?;
            writeln!(out, "{}", v.value)?;
        }
        NotifyCmd::Watch { subscriber, json } => {
            let r = check(
                client
                    .get(url("watch"))
                    .query(&[("subscriber", subscriber)])
                    .send()
                    .await?,
            )
            .await?;
            watch_stream(r, json, out).await?;
        }
    }
    Ok(())
}

/// Print a server-sent-event stream until it ends.
async fn watch_stream(
    r: reqwest::Response,
    json: bool,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    let mut body = r.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let (mut event, mut data) = (String::new(), String::new());
    while let Some(chunk) = body.next().await {
        buf.extend_from_slice(&chunk?);
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            } else if line.is_empty() && !data.is_empty() {
                print_event(out, &event, &data, json)?;
                out.flush()?;
                event.clear();
                data.clear();
            }
        }
    }
    Ok(())
}

pub(crate) fn print_event(
    out: &mut impl std::io::Write,
    event: &str,
    data: &str,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        writeln!(
            out,
            "{{\"event\":{},\"data\":{data}}}",
            serde_json::to_string(event)?
        )?;
        return Ok(());
    }
    match event {
        "notification" => {
            let n: crate::notify::Notification = serde_json::from_str(data)?;
            let at = chrono::DateTime::from_timestamp_nanos(n.ts_ns)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            writeln!(
                out,
                "{at} handle={} {}/{} value={} {} {}",
                n.handle, n.metric, n.instance, n.value, n.direction, n.threshold
            )?;
        }
        "dropped" => writeln!(out, "dropped {data}")?,
        other => writeln!(out, "{other} {data}")?,
    }
    Ok(())
}
