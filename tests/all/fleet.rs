//! The fleet (issue 19): guests published once into JetStream reach every daemon of a fleet,
//! signed, canary first, refused or rolled back on failure — with a real nats-server, real
//! daemons (`wasmon run`) and the real `wasmon fleet` CLI. One NATS server per test.
//!
//! Versions of one guest are told apart by a custom section appended to a built component
//! (same code, another sha256), so every step is a real publish of real bytes.

mod agents;
mod cluster;
mod exporters;
mod real_agent;
mod restart;
mod rollout;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{DaemonProcess, guest_bytes};

/// The fleet's name in these tests.
const FLEET: &str = "t";

/// `bytes` with a custom section `wasmon-test-version` holding `tag` appended: a valid
/// component with its own hash.
pub fn variant(bytes: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { b } else { b | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let name = b"wasmon-test-version";
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0);
    leb(payload.len(), &mut out);
    out.extend_from_slice(&payload);
    out
}

pub fn sha(bytes: &[u8]) -> String {
    wasmon::fleet::manifest::sha256_hex(bytes)
}

/// `wasmon fleet --nats URL --name t ARGS`: its stdout, or its stderr when it failed.
pub fn try_fleet_cli(nats: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(crate::common::wasmon_bin())
        .args(["fleet", "--nats", nats, "--name", FLEET])
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// [`try_fleet_cli`] that must succeed.
pub fn fleet_cli(nats: &str, args: &[&str]) -> String {
    try_fleet_cli(nats, args).unwrap_or_else(|e| panic!("wasmon fleet {args:?}: {e}"))
}

/// A signing key made by `wasmon fleet keygen`: (key file, public key).
pub fn keygen(nats: &str, dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let public = fleet_cli(nats, &["keygen", "--out", path.to_str().unwrap()]);
    (path, public.trim().to_string())
}

/// Writes `bytes` to a file and publishes it as guest `xform`.
pub fn publish(nats: &str, dir: &Path, bytes: &[u8], extra: &[&str]) -> String {
    let file = dir.join(format!("{}.wasm", &sha(bytes)[..12]));
    std::fs::write(&file, bytes).unwrap();
    let mut args = vec!["publish", file.to_str().unwrap(), "--guest", "xform"];
    args.extend_from_slice(extra);
    fleet_cli(nats, &args);
    sha(bytes)
}

/// `wasmon fleet status --json`; `null` when it failed (named on stderr): callers poll it,
/// and on a loaded machine one read of the buckets may time out.
pub fn status(nats: &str) -> Value {
    match try_fleet_cli(nats, &["status", "--json"]) {
        Ok(out) => serde_json::from_str(&out).unwrap(),
        Err(e) => {
            eprintln!("wasmon fleet status: {e}");
            Value::Null
        }
    }
}

/// The health entry of daemon `solo` for `guest`, from `fleet status --json` (`null` while
/// there is none).
pub fn solo_health(url: &str, guest: &str) -> Value {
    status(url)["daemons"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["node"] == "solo"))
        .and_then(|d| d["guests"].as_array())
        .and_then(|g| g.iter().find(|g| g["guest"] == guest))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Checks that health `h` reports a rollback to `good` for quarantine, after at least `min`
/// calls and failures of the failed version.
pub fn assert_quarantine_rollback(h: &Value, good: &str, min: u64) {
    let rb = &h["rolled-back"];
    assert_eq!(rb["to"], good, "{h}");
    assert_eq!(rb["reason"], "quarantined", "{h}");
    let n = |k: &str| rb[k].as_u64().unwrap_or(0);
    assert!(n("calls") >= min && n("failures") >= min, "{h}");
}

/// The view of one version of `xform` in a status.
pub fn version<'a>(s: &'a Value, hash: &str) -> Option<&'a Value> {
    s["guests"]["xform"]
        .as_array()?
        .iter()
        .find(|v| v["hash"] == hash)
}

pub fn nodes(v: Option<&Value>, field: &str) -> Vec<String> {
    let mut n: Vec<String> = v
        .and_then(|v| v[field].as_array())
        .map(|a| {
            a.iter()
                .map(|x| {
                    x.as_str().map(str::to_string).unwrap_or_else(|| {
                        format!(
                            "{}:{}",
                            x["node"].as_str().unwrap(),
                            x["reason"].as_str().unwrap()
                        )
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    n.sort();
    n
}

/// Polls `check` until it holds or `within` passed; returns how long it took.
pub fn wait_until(what: &str, within: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    while !check() {
        assert!(
            t.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.elapsed()
}

/// The hash the daemon's pipeline `p` runs at its first stage.
pub fn running(d: &DaemonProcess) -> String {
    let v: Value = d.get("/api/pipelines").unwrap().json().unwrap();
    v.as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "p"))
        .map(|p| p["stages"][0]["hash"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

pub fn pipeline_counts(d: &DaemonProcess) -> (u64, u64, u64) {
    let v: Value = d.get("/api/pipelines").unwrap().json().unwrap();
    let p = v
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "p")
        .unwrap();
    let n = |k: &str| p[k].as_u64().unwrap();
    (n("samples-in"), n("samples-out"), n("samples-lost"))
}

/// A daemon's config: pipeline `p` through guest `xform` (a local version in guests-dir)
/// into `sink`, following fleet `t` as `node` in `groups`.
pub fn daemon_config(
    dir: &Path,
    nats: &str,
    node: &str,
    groups: &[&str],
    keys: &[&str],
    sink: &str,
) -> PathBuf {
    let guests = dir.join("guests");
    std::fs::create_dir_all(&guests).unwrap();
    let local = guests.join("xform.wasm");
    if !local.exists() {
        std::fs::write(&local, variant(&guest_bytes("testing"), "local")).unwrap();
    }
    let quote = |v: &[&str]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        r#"[daemon]
data-dir = "data-{node}"
guests-dir = "guests"
[procfs]
enabled = false
[guest-defaults]
quarantine-after = 2
[[pipeline]]
name = "p"
sinks = ["{sink}"]
[[pipeline.transformer]]
guest = "xform"
memory = "256MiB"
deadline = "2s"
params = {{ tag = "x", mode = "passthrough" }}
[fleet]
nats = "{nats}"
name = "{FLEET}"
node = "{node}"
groups = [{}]
trusted-keys = [{}]
rollback-window = "60s"
start-wait = "3s"
"#,
        quote(groups),
        quote(keys)
    );
    let path = dir.join(format!("{node}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Daemons `(node, groups)` following the fleet on `nats` and trusting `public`, each printing
/// its samples (stdout sink); `fleet_extra` is appended to their `[fleet]`.
pub fn start_printing(
    dir: &Path,
    nats: &str,
    public: &str,
    nodes: &[(&str, &[&str])],
    fleet_extra: &str,
) -> Vec<std::sync::Arc<DaemonProcess>> {
    nodes
        .iter()
        .map(|(node, groups)| {
            let cfg = daemon_config(dir, nats, node, groups, &[public], "stdout");
            // `[fleet]` is the config's last section.
            let mut text = std::fs::read_to_string(&cfg).unwrap();
            text.push_str(fleet_extra);
            std::fs::write(&cfg, text).unwrap();
            std::sync::Arc::new(DaemonProcess::start(&cfg))
        })
        .collect()
}

/// The release entry under `key` in the releases bucket, as a peer with bucket access reads it.
pub fn release_entry(url: &str, key: &str) -> Vec<u8> {
    with_buckets(url, async |b| {
        b.releases.get(key).await.unwrap().unwrap().to_vec()
    })
}

/// What an attacker with write access to the buckets but no key does: puts an old signed
/// manifest (as read before) and its object back.
pub fn replay(url: &str, manifest: &[u8], bytes: &[u8]) {
    let m = wasmon::fleet::Manifest::parse(manifest).unwrap();
    with_buckets(url, async |b| {
        wasmon::fleet::buckets::publish(b, &m, bytes).await.unwrap();
    })
}

/// The names of the components in the fleet's object store, sorted.
pub fn objects(url: &str) -> Vec<String> {
    with_buckets(url, async |b| {
        use futures_util::StreamExt;
        let mut names: Vec<String> = b
            .components
            .list()
            .await
            .unwrap()
            .map(|i| i.unwrap())
            .filter(|i| std::future::ready(!i.deleted))
            .map(|i| i.name)
            .collect()
            .await;
        names.sort();
        names
    })
}

/// Runs `f` on the fleet's buckets.
pub fn with_buckets<R>(url: &str, f: impl AsyncFnOnce(&wasmon::fleet::buckets::Buckets) -> R) -> R {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let b = wasmon::fleet::buckets::open(&async_nats::jetstream::new(client), FLEET, None)
            .await
            .unwrap();
        f(&b).await
    })
}

/// A status that must be read (retried while the machine is too loaded to answer in time).
pub fn status_now(nats: &str) -> Value {
    let mut s = Value::Null;
    wait_until("a fleet status", Duration::from_secs(60), || {
        s = status(nats);
        !s.is_null()
    });
    s
}
