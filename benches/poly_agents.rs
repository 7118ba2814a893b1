//! The bundled agents written in C (`nfsclient`) and Python (`slurm`): one poll (a fetch of
//! every metric they serve, as a polling `[[agent]]` asks) through the sandbox, against a
//! native Rust read and parse of the same files in the same run (issue 30: C ≤ 2× native, the
//! Python agent's figure stated). `cargo bench -p wasmon-benches --bench poly_agents`; the
//! components are built from `guests/` by the kit, toolchains in `target/guest-toolchains`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wasmon::host::agent_types::Pmid;
use wasmon::host::{AgentInstance, AgentWorld, DirGrant, GuestConfig, Image, Runtime};
use wasmon::namespace::Agent as _;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn load(
    rt: &std::sync::Arc<Runtime>,
    lang: &str,
    name: &str,
    host: &Path,
    guest: &str,
) -> AgentInstance {
    let target = repo().join("target");
    let built = wasmon::kit::build(
        &repo().join("guests").join(lang).join(name),
        Some(&target.join("polyglot/built").join(lang)),
        &target.join("guest-toolchains"),
    )
    .unwrap_or_else(|e| panic!("building {lang}/{name}: {e:#}"));
    sandboxed(rt, &std::fs::read(&built.path).unwrap(), name, host, guest)
}

/// The component `bytes` as agent `name`, granted `host` read-only at `guest`.
fn sandboxed(
    rt: &std::sync::Arc<Runtime>,
    bytes: &[u8],
    name: &str,
    host: &Path,
    guest: &str,
) -> AgentInstance {
    let compiled = rt.compile(bytes, name).unwrap();
    let mut cfg = GuestConfig::new(name, "{}");
    cfg.grants.dirs = vec![DirGrant {
        host: host.to_path_buf(),
        guest: guest.into(),
        read_only: true,
    }];
    cfg.memory = 256 << 20;
    cfg.deadline = Duration::from_secs(5);
    Image::<AgentWorld>::load(rt, &compiled, cfg).unwrap()
}

fn pmids(domain: u32, clusters: &[(u32, u32, u32)]) -> Vec<Pmid> {
    clusters
        .iter()
        .flat_map(|&(cluster, first, last)| {
            (first..=last).map(move |item| Pmid {
                domain,
                cluster,
                item,
            })
        })
        .collect()
}

/// A mountstats of `n` NFS mounts (the mixed fixture's three, renamed) among its other mounts.
fn mountstats(n: usize, dir: &Path) {
    let mixed =
        std::fs::read_to_string(repo().join("tests/fixtures/nfsclient/mixed/mountstats")).unwrap();
    let mut text = String::new();
    for i in 0..n.div_ceil(3) {
        text.push_str(&mixed.replace(" mounted on /", &format!(" mounted on /n{i}/")));
    }
    std::fs::write(dir.join("mountstats"), text).unwrap();
}

/// The native baseline: read the file and parse every number of every NFS mount's lines into
/// a vector per mount, keyed by mount point (what the agent does, without the metric table).
fn native_mountstats(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    nfs_mounts(&text).iter().map(|(_, v)| v.len()).sum()
}

/// Each NFS mount's point and the numbers of its record, in file order (both native
/// baselines that parse the whole file per mount).
fn nfs_mounts(text: &str) -> Vec<(&str, Vec<u64>)> {
    let mut mounts: Vec<(&str, Vec<u64>)> = Vec::new();
    let mut nfs = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("device ") {
            nfs = rest.contains("nfs statvers=") || rest.contains("nfs4 statvers=");
            if nfs {
                mounts.push((
                    rest.split(' ').nth(3).unwrap_or(""),
                    Vec::with_capacity(720),
                ));
            }
            continue;
        }
        if let (true, Some((_, v))) = (nfs, mounts.last_mut()) {
            let body = line.split_once(':').map_or(line, |(_, b)| b);
            v.extend(
                body.split([' ', '\t'])
                    .filter_map(|w| w.parse::<u64>().ok()),
            );
        }
    }
    mounts
}

/// The native baseline that also answers: [`native_mountstats`]'s numbers as the values the
/// daemon's fetch answers (the namespace's `Values`), each with its instance name (the mount
/// point) as its own string.
fn native_mountstats_values(path: &Path) -> wasmon::namespace::Values {
    let text = std::fs::read_to_string(path).unwrap();
    let mut values = Vec::new();
    let mut point: Option<&str> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("device ") {
            let nfs = rest.contains("nfs statvers=") || rest.contains("nfs4 statvers=");
            point = nfs.then(|| rest.split(' ').nth(3).unwrap_or(""));
            continue;
        }
        if let Some(point) = point {
            let body = line.split_once(':').map_or(line, |(_, b)| b);
            values.extend(
                body.split([' ', '\t'])
                    .filter_map(|w| w.parse::<u64>().ok())
                    .map(|v| (point.to_string(), wasmon::namespace::Value::Uint(v))),
            );
        }
    }
    values
}

/// The native baseline that answers as the daemon's fetch does: one `Values` per metric (a
/// metric being one position of a mount's numbers), each value with its mount point as its
/// own string: what a native agent of these metrics would hand the daemon.
fn native_mountstats_per_metric(path: &Path) -> Vec<wasmon::namespace::Values> {
    let text = std::fs::read_to_string(path).unwrap();
    let mounts = nfs_mounts(&text);
    let metrics = mounts.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    (0..metrics)
        .map(|k| {
            mounts
                .iter()
                .filter_map(|(point, v)| {
                    let x = *v.get(k)?;
                    Some((point.to_string(), wasmon::namespace::Value::Uint(x)))
                })
                .collect()
        })
        .collect()
}

/// The native baseline of slurm: the same five files of each job directory, parsed.
fn native_slurm(base: &Path) -> usize {
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(base).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with("job_") && !(name.len() == 14 && name.starts_with('s')) {
            continue;
        }
        for f in [
            "memory.current",
            "memory.peak",
            "memory.max",
            "cpu.stat",
            "cpuset.cpus",
            "io.stat",
        ] {
            if let Ok(t) = std::fs::read_to_string(e.path().join(f)) {
                n += t
                    .split(|c: char| c.is_whitespace() || c == '=')
                    .filter(|w| w.parse::<u64>().is_ok())
                    .count();
            }
        }
    }
    n
}

/// The daemon's view of an agent: what a poll asks through the namespace, values with their
/// instance names as the daemon's fetch answers them.
fn as_daemon(agent: AgentInstance) -> wasmon::daemon::agents::GuestAgent {
    wasmon::daemon::agents::GuestAgent(agent)
}

fn ns_ids(ids: &[Pmid]) -> Vec<wasmon::namespace::Pmid> {
    ids.iter()
        .map(|p| wasmon::namespace::Pmid::new(p.domain, p.cluster, p.item).unwrap())
        .collect()
}

/// Values in a daemon fetch's answer.
fn count(
    fetched: &[(
        wasmon::namespace::Pmid,
        Result<wasmon::namespace::Values, wasmon::namespace::NsError>,
    )],
) -> usize {
    fetched
        .iter()
        .map(|(_, v)| v.as_ref().map_or(0, |v| v.len()))
        .sum()
}

/// Components built elsewhere, as (label, agent): `POLY_AGENTS_BEFORE=LABEL=DIR,...`, each DIR
/// holding `NAME.wasm` (e.g. one built before the `metrics` export, which this host loads as a
/// `legacy-agent`).
fn load_others(
    rt: &std::sync::Arc<Runtime>,
    name: &str,
    host: &Path,
    guest: &str,
) -> Vec<(String, AgentInstance)> {
    let Ok(list) = std::env::var("POLY_AGENTS_BEFORE") else {
        return Vec::new();
    };
    list.split(',')
        .filter_map(|entry| {
            let (label, dir) = entry.split_once('=')?;
            let bytes = std::fs::read(Path::new(dir).join(format!("{name}.wasm"))).ok()?;
            Some((label.to_string(), sandboxed(rt, &bytes, name, host, guest)))
        })
        .collect()
}

fn nfsclient(c: &mut Criterion) {
    let rt = Runtime::new(None).unwrap();
    let ids = pmids(
        62,
        &[
            (0, 1, 2),
            (1, 1, 37),
            (2, 1, 1),
            (3, 1, 2),
            (4, 1, 1),
            (5, 1, 27),
            (6, 1, 8),
            (7, 1, 30),
            (8, 1, 612),
        ],
    );
    let ns = ns_ids(&ids);
    for mounts in [3usize, 30, 300] {
        let dir = tempfile::tempdir().unwrap();
        mountstats(mounts, dir.path());
        let agent = load(&rt, "c", "nfsclient", dir.path(), "/proc/self");
        let mut agent = as_daemon(agent);
        let values = count(&agent.fetch(&ns));
        assert!(
            values >= 700 * mounts,
            "{values} values for {mounts} mounts"
        );
        // The poll as the daemon takes it: through the sandbox into the namespace's values.
        c.bench_function(&format!("nfsclient_poll_{mounts}_mounts_c_guest"), |b| {
            b.iter(|| agent.fetch(&ns))
        });
        // The same without the namespace's per-value strings: the call and the lift only.
        c.bench_function(
            &format!("nfsclient_poll_{mounts}_mounts_c_guest_raw"),
            |b| b.iter(|| agent.0.fetch_raw(&ids).unwrap()),
        );
        for (label, other) in load_others(&rt, "nfsclient", dir.path(), "/proc/self") {
            let mut other = as_daemon(other);
            assert_eq!(count(&other.fetch(&ns)), values, "{label}");
            c.bench_function(
                &format!("nfsclient_poll_{mounts}_mounts_c_guest_{label}"),
                |b| b.iter(|| other.fetch(&ns)),
            );
        }
        let path = dir.path().join("mountstats");
        c.bench_function(&format!("nfsclient_poll_{mounts}_mounts_native"), |b| {
            b.iter(|| native_mountstats(&path))
        });
        c.bench_function(
            &format!("nfsclient_poll_{mounts}_mounts_native_values"),
            |b| b.iter(|| native_mountstats_values(&path)),
        );
        c.bench_function(
            &format!("nfsclient_poll_{mounts}_mounts_native_values_per_metric"),
            |b| b.iter(|| native_mountstats_per_metric(&path)),
        );
    }
}

fn slurm(c: &mut Criterion) {
    let rt = Runtime::new(Some(repo().join("target/polyglot/components"))).unwrap();
    let tree = repo().join("tests/fixtures/slurm/node");
    let base = tree.join("system.slice/slurmstepd.scope");
    let ids = pmids(490, &[(0, 0, 0), (1, 1, 14)]);
    let mut agent = load(&rt, "python", "slurm", &tree, "/sys/fs/cgroup");
    assert!(agent.fetch(&ids).unwrap().iter().all(|s| s.values.is_ok()));
    c.bench_function("slurm_poll_4_jobs_python_guest", |b| {
        b.iter(|| agent.fetch(&ids).unwrap())
    });
    c.bench_function("slurm_poll_4_jobs_native", |b| {
        b.iter(|| native_slurm(&base))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = nfsclient, slurm
}
criterion_main!(benches);
