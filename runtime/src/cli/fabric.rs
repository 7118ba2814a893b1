//! `wasmon fabric simulate|status|owner|histogram|clear`: a simulated fabric (with agents
//! in-process if asked), and the fabric hierarchy's status, owners and merged histograms —
//! from a daemon's HTTP API (`--url`), or straight from NATS (`--nats`: the buckets and the
//! master's command subject, no daemon needed).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::fabric::histogram::Histogram;
use crate::fabric::tree::{self, AgentStatus, DEFAULT_COMMAND_TIMEOUT};
use crate::fabric::wire::{Command, Reply};
use crate::fabric::{FabricConfig, FabricHandle, SimFabric, SimSpec, SourceKind};

/// `wasmon fabric ...`
#[derive(clap::Args, Debug, Clone)]
pub struct FabricArgs {
    /// A daemon's base URL (its `[fabric]` agent answers) [default: $WASMON_URL, else NATS].
    #[arg(long)]
    pub url: Option<String>,
    /// Ask NATS directly (buckets and the master agent) instead of a daemon.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// The fabric's name (`[fabric] name`).
    #[arg(long, default_value = "fabric")]
    pub name: String,
    #[command(subcommand)]
    pub cmd: FabricCmd,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum FabricCmd {
    /// Run a simulated fat-tree fabric (and, with --agents, that many agents on it).
    Simulate(SimulateArgs),
    /// Agents, owned nodes and ports, epoch time and lag, lease ages.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Which agent monitors a node.
    Owner { node: String },
    /// The merged rate histogram of a counter over the whole fabric, as text.
    Histogram {
        counter: String,
        #[arg(long)]
        epoch: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Clear every counter and start every rate afresh, everywhere.
    Clear,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    /// The fabric's file (agents read it: `[fabric] path`).
    #[arg(long, default_value = "wasmon-fabric.sim")]
    pub file: PathBuf,
    /// Ports per switch (even).
    #[arg(long, default_value_t = 24)]
    pub radix: u32,
    #[arg(long, default_value_t = 10)]
    pub pods: u32,
    #[arg(long, default_value_t = 12)]
    pub hosts_per_edge: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Epoch (simulated time per tick, real time between ticks).
    #[arg(long, value_parser = crate::duration::parse, default_value = "1s")]
    pub epoch: Duration,
    /// Busy ports, parts per million.
    #[arg(long, default_value_t = 10_000)]
    pub busy_ppm: u32,
    /// Agents to run in this process (`agent-1` is the master, the others report to it),
    /// attached to host adapters spread over the pods.
    #[arg(long, default_value_t = 0)]
    pub agents: u32,
    /// Their lease.
    #[arg(long, value_parser = crate::duration::parse, default_value = "3s")]
    pub lease: Duration,
}

fn print_status(me: Option<&str>, agents: &[AgentStatus]) {
    println!(
        "{:<12} {:<12} {:>8} {:>7} {:>7} {:>8} {:>9} {:>9} {:>9}",
        "AGENT", "PARENT", "EPOCH", "NODES", "PORTS", "MISSING", "EPOCH-MS", "LAG-MS", "LEASE-AGE"
    );
    let (mut nodes, mut ports) = (0, 0);
    for a in agents {
        let l = &a.lease;
        let star = if Some(l.agent.as_str()) == me {
            "*"
        } else {
            ""
        };
        println!(
            "{:<12} {:<12} {:>8} {:>7} {:>7} {:>8} {:>9.1} {:>9.1} {:>8.1}s",
            format!("{}{star}", l.agent),
            l.parent.as_deref().unwrap_or("-"),
            l.epoch,
            l.nodes,
            l.ports,
            l.ports_missing,
            l.epoch_ms,
            l.lag_ms,
            a.lease_age_ms / 1e3
        );
        nodes += l.nodes;
        ports += l.ports;
        if !l.missing_nodes.is_empty() {
            println!("    missing nodes: {}", l.missing_nodes.join(" "));
        }
    }
    println!("{} agents, {nodes} nodes, {ports} ports", agents.len());
}

fn print_histogram(counter: &str, r: &Reply) -> anyhow::Result<()> {
    let Some(w) = &r.histogram else {
        anyhow::bail!(
            "no histogram for {counter} yet (answered: {:?}, missing: {:?}, errors: {:?})",
            r.agents,
            r.missing,
            r.errors
        );
    };
    let h = Histogram::from_wire(w).map_err(anyhow::Error::msg)?;
    let unit = if counter.ends_with("_data") || counter.ends_with("bytes") {
        "B"
    } else {
        ""
    };
    println!(
        "{counter}, epoch {}, merged from {} agents{}",
        r.epoch.unwrap_or(0),
        r.agents.len(),
        r.missing_note()
    );
    print!("{}", h.render(unit));
    Ok(())
}

async fn http_json(url: &str, post: bool) -> anyhow::Result<serde_json::Value> {
    let c = reqwest::Client::new();
    let resp = if post {
        c.post(url).send().await?
    } else {
        c.get(url).send().await?
    };
    let status = resp.status();
    let v: serde_json::Value = resp
        .json()
        .await
        .with_context(|| format!("{url}: not JSON"))?;
    if !status.is_success() {
        anyhow::bail!(
            "{status}: {}",
            v["error"].as_str().unwrap_or(&v.to_string())
        );
    }
    Ok(v)
}

/// Run `wasmon fabric ...`.
pub async fn fabric_cli(args: FabricArgs) -> anyhow::Result<()> {
    if let FabricCmd::Simulate(s) = args.cmd {
        return simulate(s, &args.nats, &args.name).await;
    }
    if let Some(base) = args
        .url
        .clone()
        .or_else(|| std::env::var("WASMON_URL").ok())
    {
        let base = base.trim_end_matches('/');
        return match args.cmd {
            FabricCmd::Status { json } => {
                let v = http_json(&format!("{base}/api/fabric/status"), false).await?;
                if json {
                    println!("{v:#}");
                } else {
                    let agents: Vec<AgentStatus> = serde_json::from_value(v["agents"].clone())?;
                    print_status(v["agent"].as_str(), &agents);
                }
                Ok(())
            }
            FabricCmd::Owner { node } => {
                let v = http_json(&format!("{base}/api/fabric/owner/{node}"), false).await?;
                println!(
                    "{node}: {} ({} hops, revision {}, lease {})",
                    v["agent"].as_str().unwrap_or("?"),
                    v["hops"],
                    v["revision"],
                    if v["alive"].as_bool() == Some(true) {
                        "alive"
                    } else {
                        "lapsed"
                    }
                );
                Ok(())
            }
            FabricCmd::Histogram {
                counter,
                epoch,
                json,
            } => {
                let q = epoch.map(|e| format!("?epoch={e}")).unwrap_or_default();
                let v =
                    http_json(&format!("{base}/api/fabric/histogram/{counter}{q}"), false).await?;
                if json {
                    println!("{v:#}");
                    return Ok(());
                }
                print_histogram(&counter, &serde_json::from_value(v)?)
            }
            FabricCmd::Clear => {
                let v = http_json(&format!("{base}/api/fabric/clear"), true).await?;
                println!("{v}");
                Ok(())
            }
            FabricCmd::Simulate(_) => unreachable!(),
        };
    }
    let client = crate::nats::Connection {
        url_field: "--nats",
        servers: &args.nats,
        ..Default::default()
    }
    .connect(std::path::Path::new(""))
    .await?;
    let js = async_nats::jetstream::new(client.clone());
    let b = crate::fabric::ownership::Buckets {
        leases: js
            .get_key_value(crate::fabric::wire::leases_bucket(&args.name))
            .await
            .with_context(|| format!("no fabric {:?} on {}", args.name, args.nats))?,
        owners: js
            .get_key_value(crate::fabric::wire::owners_bucket(&args.name))
            .await
            .with_context(|| format!("no fabric {:?} on {}", args.name, args.nats))?,
    };
    match args.cmd {
        FabricCmd::Status { json } => {
            let agents = tree::status(&b).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&agents)?);
            } else {
                print_status(None, &agents);
            }
        }
        FabricCmd::Owner { node } => match tree::owner(&b, &node).await? {
            Some((o, rev)) => {
                let alive = matches!(b.leases.get(&o.agent).await, Ok(Some(_)));
                println!(
                    "{node}: {} ({} hops, revision {rev}, lease {})",
                    o.agent,
                    o.hops,
                    if alive { "alive" } else { "lapsed" }
                );
            }
            None => anyhow::bail!("nobody owns node {node:?}"),
        },
        FabricCmd::Histogram {
            counter,
            epoch,
            json,
        } => {
            let master = tree::master(&b).await?;
            let r = tree::command(
                &client,
                &args.name,
                &master,
                Command::Histogram {
                    counter: counter.clone(),
                    epoch,
                },
                DEFAULT_COMMAND_TIMEOUT,
            )
            .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print_histogram(&counter, &r)?;
            }
        }
        FabricCmd::Clear => {
            let master = tree::master(&b).await?;
            let r = tree::command(
                &client,
                &args.name,
                &master,
                Command::Clear,
                DEFAULT_COMMAND_TIMEOUT,
            )
            .await?;
            println!("{}", serde_json::to_string(&r)?);
        }
        FabricCmd::Simulate(_) => unreachable!(),
    }
    Ok(())
}

/// `wasmon fabric simulate`: tick the fabric on a thread; run `--agents` agents here.
async fn simulate(s: SimulateArgs, nats: &str, name: &str) -> anyhow::Result<()> {
    let spec = SimSpec {
        radix: s.radix,
        pods: s.pods,
        hosts_per_edge: s.hosts_per_edge,
        seed: s.seed,
        epoch: s.epoch,
        busy_ppm: s.busy_ppm,
        ..SimSpec::default()
    };
    let fabric = Arc::new(
        SimFabric::create(Some(&s.file), &spec)
            .with_context(|| format!("creating {}", s.file.display()))?,
    );
    let (sw, hosts, ports) = spec.size();
    eprintln!(
        "simulated fabric {}: {sw} switches, {hosts} host adapters, {ports} ports, epoch {:?}",
        s.file.display(),
        spec.epoch
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = {
        let (f, stop) = (fabric.clone(), stop.clone());
        std::thread::spawn(move || f.run(&stop))
    };
    let shutdown = CancellationToken::new();
    let hcas: Vec<String> = (0..fabric.node_count())
        .filter(|&n| fabric.kind(n) == crate::fabric::sim::HCA)
        .map(|n| fabric.name(n).to_string())
        .collect();
    for i in 0..s.agents as usize {
        let attach = hcas[(i * hcas.len()) / s.agents as usize].clone();
        let cfg = FabricConfig {
            enabled: true,
            nats: nats.to_string(),
            name: name.to_string(),
            agent: format!("agent-{}", i + 1),
            parent: if i == 0 {
                String::new()
            } else {
                "agent-1".into()
            },
            source: SourceKind::Simulated,
            path: Some(s.file.clone()),
            attach: vec![attach],
            epoch: s.epoch,
            lease: s.lease,
            ..FabricConfig::default()
        };
        let handle = FabricHandle::new(cfg);
        let notifier = Arc::new(crate::notify::Notifier::new(
            crate::notify::NotifierConfig {
                log: false,
                ..Default::default()
            },
        ));
        let token = shutdown.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::fabric::run_agent(
                handle,
                notifier,
                Box::new(|_| {}),
                token,
                crate::supervise::Health::new("fabric"),
            )
            .await
            {
                eprintln!("agent stopped: {e:#}");
            }
        });
    }
    tokio::signal::ctrl_c().await?;
    shutdown.cancel();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = ticker.join();
    Ok(())
}
