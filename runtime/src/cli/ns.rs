//! `wasmon ns lookup|name|children|traverse` and `wasmon fetch`, in the habits of PCP's
//! pminfo and pmval: against a running daemon (HTTP), or offline with `--pmns FILE` and
//! `--agent DOMAIN=PATH.wasm` (`DOMAIN=linux` for the built-in linux agent). Errors go to
//! stderr with PCP's message, and the exit status is 1 when any item failed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::slice;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::api::ns::answers;
use crate::daemon::agents::{AgentSet, GuestAgent};
use crate::host::{AgentWorld, Grants, GuestConfig, Image, MappedDir, Runtime};
use crate::namespace::{Agent, Namespace};

/// Where the answers come from.
#[derive(Args, Debug, Clone)]
pub struct Source {
    /// The daemon's HTTP API.
    #[arg(long, env = "WASMON_URL", default_value = "http://127.0.0.1:8082")]
    pub url: String,
    /// Offline: a PMNS file in PCP's ASCII format (repeatable).
    #[arg(long)]
    pub pmns: Vec<PathBuf>,
    /// Offline: the agent for a domain, `DOMAIN=PATH.wasm` or a native agent's name,
    /// `60=linux` (repeatable).
    #[arg(long)]
    pub agent: Vec<String>,
    /// Offline: the directory native agents read `proc/` and `sys/` under (a captured tree;
    /// default `/`).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Offline: a directory the agents may map read-only, `NAME=DIR` (repeatable).
    #[arg(long)]
    pub mapped: Vec<String>,
    /// Offline: a guest agent's parameters, `DOMAIN=JSON` or `DOMAIN=@FILE` (repeatable;
    /// default `{}`).
    #[arg(long)]
    pub params: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum NsCommand {
    /// The PMID of each name (pmLookupName).
    Lookup {
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        source: Source,
    },
    /// Every name of each PMID, e.g. 44.1.0 (pmNameAll).
    Name {
        #[arg(required = true)]
        pmids: Vec<String>,
        #[command(flatten)]
        source: Source,
    },
    /// The children of a name, leaf or not (pmGetChildrenStatus); no name: the root.
    Children {
        #[arg(default_value = "")]
        name: String,
        #[command(flatten)]
        source: Source,
    },
    /// Every leaf name below a prefix (pmTraversePMNS); no prefix: everything.
    Traverse {
        #[arg(default_value = "")]
        prefix: String,
        #[command(flatten)]
        source: Source,
    },
}

enum Backend {
    Http(String),
    Local(AgentSet),
}

/// A namespace and the agents behind it, by domain.
pub type Parts = (Namespace, BTreeMap<u32, Box<dyn Agent>>);

/// The namespace and agents `--pmns`/`--agent`/`--mapped`/`--params` describe, loaded in
/// this process (`wasmon pmda` serves them to pmcd). `None` when neither `--pmns` nor
/// `--agent` is given.
pub fn offline_parts(s: &Source) -> Result<Option<Parts>> {
    if s.pmns.is_empty() && s.agent.is_empty() {
        return Ok(None);
    }
    Backend::load(s).map(Some)
}

impl Backend {
    fn new(s: &Source) -> Result<Backend> {
        let Some((ns, agents)) = offline_parts(s)? else {
            return Ok(Backend::Http(s.url.trim_end_matches('/').to_string()));
        };
        // No agent at all: PCP's local mode, where names under a dynamic root give its PMID.
        Ok(Backend::Local(if agents.is_empty() {
            AgentSet::local(ns)
        } else {
            AgentSet::new(ns, agents)
        }))
    }

    fn load(s: &Source) -> Result<Parts> {
        let mut texts = Vec::new();
        for p in &s.pmns {
            texts.push((
                p.display().to_string(),
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
            ));
        }
        let mapped = s
            .mapped
            .iter()
            .map(|m| {
                let (name, dir) = m
                    .split_once('=')
                    .with_context(|| format!("--mapped {m:?}: expected NAME=DIR"))?;
                Ok(MappedDir {
                    name: name.into(),
                    host: dir.into(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut agents: BTreeMap<u32, Box<dyn Agent>> = BTreeMap::new();
        let mut runtime = None;
        for a in &s.agent {
            let (domain, what) = a
                .split_once('=')
                .with_context(|| format!("--agent {a:?}: expected DOMAIN=PATH.wasm"))?;
            let domain: u32 = domain
                .parse()
                .with_context(|| format!("--agent {a:?}: {domain:?} is not a domain number"))?;
            let native = crate::daemon::agents::native_agent(what, &s.root, &Default::default());
            let agent: Box<dyn Agent> = if let Some((pmns, agent)) = native {
                if !s.root.is_dir() {
                    bail!("--root {}: not a directory", s.root.display());
                }
                if s.pmns.is_empty() {
                    texts.push((what.to_string(), pmns));
                }
                agent
            } else {
                let rt = match &runtime {
                    Some(rt) => rt,
                    None => runtime.insert(Runtime::new(super::cli_cache_dir())?),
                };
                let source = crate::guests::resolve(what, None, std::path::Path::new(""))?;
                let compiled = rt.compile(&source.bytes, &source.origin.to_string())?;
                let params = match s
                    .params
                    .iter()
                    .find_map(|p| p.strip_prefix(&format!("{domain}=")))
                {
                    // From a file: pmcd.conf's parser eats the quotes of inline JSON.
                    Some(file) if file.starts_with('@') => std::fs::read_to_string(&file[1..])
                        .with_context(|| format!("--params {domain}={file}"))?,
                    Some(json) => json.to_string(),
                    None => "{}".to_string(),
                };
                let mut cfg = GuestConfig::new(what, &params);
                cfg.grants = Grants {
                    mapped: mapped.clone(),
                    ..Default::default()
                };
                Box::new(GuestAgent(Image::<AgentWorld>::load(rt, &compiled, cfg)?))
            };
            agents.insert(domain, agent);
        }
        let refs: Vec<(&str, &str)> = texts
            .iter()
            .map(|(f, t)| (f.as_str(), t.as_str()))
            .collect();
        let ns = Namespace::from_pmns(&refs)?;
        Ok((ns, agents))
    }

    fn get(
        &self,
        route: &str,
        key: &str,
        items: &[String],
        local: impl FnOnce(&AgentSet) -> Value,
    ) -> Result<Value> {
        match self {
            Backend::Local(set) => Ok(local(set)),
            Backend::Http(url) => {
                let query: String = form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(items.iter().map(|i| (key, i)))
                    .finish();
                let url = format!("{url}{route}?{query}");
                let r = reqwest::blocking::get(&url).with_context(|| format!("asking the daemon at {url} (is `wasmon run` up? --url, or offline: --pmns/--agent)"))?;
                if !r.status().is_success() {
                    bail!("{url}: HTTP {}", r.status());
                }
                Ok(r.json()?)
            }
        }
    }
}

/// Prints an item's error to stderr as PCP tools do; returns whether there was one.
fn report(item: &Value, key: &str) -> bool {
    match item.get("error").and_then(Value::as_str) {
        Some(e) => {
            eprintln!("{}: {e}", item[key].as_str().unwrap_or("?"));
            true
        }
        None => false,
    }
}

impl NsCommand {
    fn source(&self) -> &Source {
        match self {
            NsCommand::Lookup { source, .. }
            | NsCommand::Name { source, .. }
            | NsCommand::Children { source, .. }
            | NsCommand::Traverse { source, .. } => source,
        }
    }
}

/// Runs an `ns` subcommand; returns whether every item succeeded.
pub fn ns(cmd: NsCommand) -> Result<bool> {
    let source = cmd.source();
    let b = Backend::new(source)?;
    // The route, its query key and items, and how the answer is printed as text.
    type Printer = fn(&Value) -> bool;
    let (route, key, items, text): (&str, &str, &[String], Printer) = match &cmd {
        NsCommand::Lookup { names, .. } => ("/api/ns/lookup", "name", names, print_lookup),
        NsCommand::Name { pmids, .. } => ("/api/ns/name", "pmid", pmids, print_names),
        NsCommand::Children { name, .. } => (
            "/api/ns/children",
            "name",
            slice::from_ref(name),
            print_children,
        ),
        NsCommand::Traverse { prefix, .. } => (
            "/api/ns/traverse",
            "prefix",
            slice::from_ref(prefix),
            print_traverse,
        ),
    };
    let value = b.get(route, key, items, |s| match &cmd {
        NsCommand::Lookup { .. } => answers::lookup(s, items),
        NsCommand::Name { .. } => answers::name(s, items),
        NsCommand::Children { name, .. } => answers::children(s, name),
        NsCommand::Traverse { prefix, .. } => answers::traverse(s, prefix),
    })?;
    answer(&value, source.json, text)
}

/// Prints the answer as JSON (`--json`) or as `text` prints it; returns whether every item
/// succeeded.
fn answer(value: &Value, json: bool, text: fn(&Value) -> bool) -> Result<bool> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
        return Ok(value_ok(value));
    }
    Ok(text(value))
}

/// Prints each item of an array answer with `print`, or its error (named by `key`) to
/// stderr; returns whether none failed.
fn each_item(v: &Value, key: &str, print: impl Fn(&Value)) -> bool {
    let mut ok = true;
    for item in v.as_array().into_iter().flatten() {
        if report(item, key) {
            ok = false;
        } else {
            print(item);
        }
    }
    ok
}

/// `NAME PMID: ID` per name (pminfo -m).
fn print_lookup(v: &Value) -> bool {
    each_item(v, "name", |item| {
        println!(
            "{} PMID: {}",
            item["name"].as_str().unwrap_or(""),
            item["pmid"].as_str().unwrap_or("")
        )
    })
}

/// `ID NAME` per name of each PMID.
fn print_names(v: &Value) -> bool {
    each_item(v, "pmid", |item| {
        for n in item["names"].as_array().into_iter().flatten() {
            println!(
                "{} {}",
                item["pmid"].as_str().unwrap_or(""),
                n.as_str().unwrap_or("")
            );
        }
    })
}

/// `NAME\tleaf` or `NAME\tnon-leaf` per child.
fn print_children(v: &Value) -> bool {
    if report(v, "name") {
        return false;
    }
    for c in v["children"].as_array().into_iter().flatten() {
        let kind = if c["leaf"].as_bool() == Some(true) {
            "leaf"
        } else {
            "non-leaf"
        };
        println!("{}\t{kind}", c["name"].as_str().unwrap_or(""));
    }
    true
}

/// Each leaf name, then the errors of the subtrees that could not be walked.
fn print_traverse(v: &Value) -> bool {
    if report(v, "name") {
        return false;
    }
    for n in v["names"].as_array().into_iter().flatten() {
        println!("{}", n.as_str().unwrap_or(""));
    }
    let failed = v["failed"].as_array().cloned().unwrap_or_default();
    for f in &failed {
        report(f, "name");
    }
    failed.is_empty()
}

fn value_ok(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(|i| i.get("error").is_none()),
        other => {
            other.get("error").is_none()
                && other
                    .get("failed")
                    .and_then(Value::as_array)
                    .is_none_or(|f| f.is_empty())
        }
    }
}

/// `wasmon fetch NAME...`: values with instances (pminfo -f style).
pub fn fetch(names: Vec<String>, source: Source) -> Result<bool> {
    let b = Backend::new(&source)?;
    let v = b.get("/api/fetch", "name", &names, |s| answers::fetch(s, &names))?;
    answer(&v, source.json, print_values)
}

/// Each name, then `value V` or `inst [NAME] value V` per instance (pminfo -f).
fn print_values(v: &Value) -> bool {
    each_item(v, "name", |item| {
        println!("{}", item["name"].as_str().unwrap_or(""));
        for pair in item["values"].as_array().into_iter().flatten() {
            let (inst, value) = (pair[0].as_str().unwrap_or(""), &pair[1]);
            if inst.is_empty() {
                println!("    value {value}");
            } else {
                println!("    inst [{inst:?}] value {value}");
            }
        }
    })
}
