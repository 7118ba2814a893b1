//! The store's memory on real recorded metrics (issue #32): PCP QA archives, dumped to
//! `ts<TAB>archive<TAB>metric|instance<TAB>value` files (counters as per-second rates, as PCP's
//! clients show them; see benches/README.md for the commands), replayed into the store at
//! their recorded times, one store per archive with each metric's step its median interval.
//! The store's background pass (`Store::compact`, every 60 s in the daemon) runs every 60 s
//! of recorded time, with that time as "now", and is timed apart from the writes.
//! Prints bytes per sample (live heap counted by a counting allocator, and the store's own
//! `usage().bytes`) while the series are still written (right after the last value), and
//! once they are not (a pass an hour after the last value: every series idle), then a day of cc-metric-store's benchmark shape (64 hosts × 264 series at
//! 10 s) filled with the recorded values (RSS and heap), and read times on it.
//!
//! `cargo bench -p wasmon-benches --bench store_replay -- DIR [PRECISION]` (DIR holds the
//! `.tsv` files; PRECISION sets `precision` for every metric).
//! `WASMON_REPLAY_EXPORT=STOREDIR,OUT.tsv` instead writes a daemon's store snapshot as a
//! replay file (an instance's levels separated by U+001F).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::Instant;

use wasmon::store::{MetricConfig, Store, StoreConfig, WalBatch, selector};

mod store_common;
use store_common::{CPU_METRICS, Counting, LIVE, NODE_METRICS};

#[global_allocator]
static A: Counting = Counting;

/// Seconds of recorded time between two background passes: the daemon's `COMPACT_EVERY`.
const PASS: i64 = wasmon::store::COMPACT_EVERY.as_secs() as i64;

struct Row {
    ts: f64,
    series: String,
    value: f64,
}

fn load(path: &std::path::Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).expect("readable replay file");
    text.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let ts = f.next()?.parse().ok()?;
            let _archive = f.next()?;
            let series = f.next()?.to_string();
            let value = f.next()?.parse().ok()?;
            Some(Row { ts, series, value })
        })
        .collect()
}

fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0)
        * 4096
}

/// (metric, instance) of a series key `metric|instance`.
fn split(series: &str) -> (&str, &str) {
    series.split_once('|').unwrap_or((series, ""))
}

/// Separates the levels of an instance path in a replay file's instance field (a series
/// exported from a daemon's store sits levels deep; PCP instance names hold no control
/// characters).
const LEVEL_SEP: char = '\u{1f}';

/// Writes every series of the store snapshot in `dir` (a daemon's `<data-dir>/store`, copied:
/// opening it starts a WAL there) as a replay file `out`: one line per written slot, in time
/// order. How the hour of this host's own agents was recorded (benches/README.md).
fn export(dir: &str, out: &str) {
    let mut cfg = StoreConfig::default();
    cfg.wal = false;
    cfg.retention_in_memory = std::time::Duration::ZERO;
    let store = Store::open(cfg, dir).expect("a store snapshot");
    let tree = store.debug_dump(&[]).expect("the root");
    let mut rows: Vec<(i64, String, f64)> = Vec::new();
    fn walk(
        store: &Store,
        node: &serde_json::Value,
        path: &mut Vec<String>,
        rows: &mut Vec<(i64, String, f64)>,
    ) {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        for (metric, m) in node["metrics"].as_object().into_iter().flatten() {
            let (first, last) = (m["first"].as_i64().unwrap(), m["last"].as_i64().unwrap());
            let r = store
                .read(&selector(&p), metric, first, last + 1, 0)
                .expect("a stored series");
            for (i, v) in r.data.iter().enumerate() {
                if !v.is_nan() {
                    let ts = r.from + i as i64 * r.step;
                    let inst = p.join(&LEVEL_SEP.to_string());
                    rows.push((ts, format!("{metric}|{inst}"), *v));
                }
            }
        }
        for (name, child) in node["children"].as_object().into_iter().flatten() {
            path.push(name.clone());
            walk(store, child, path, rows);
            path.pop();
        }
    }
    walk(&store, &tree, &mut Vec::new(), &mut rows);
    rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut text = String::new();
    for (ts, series, v) in &rows {
        text.push_str(&format!("{ts}\thost\t{series}\t{v:?}\n"));
    }
    std::fs::write(out, text).expect("writable output");
    println!("exported {} values to {out}", rows.len());
}

fn main() {
    if let Some((dir, out)) = std::env::var("WASMON_REPLAY_EXPORT").ok().and_then(|v| {
        v.split_once(',')
            .map(|(a, b)| (a.to_string(), b.to_string()))
    }) {
        return export(&dir, &out);
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let dir = args
        .first()
        .cloned()
        .or_else(|| std::env::var("WASMON_REPLAY_DIR").ok())
        .expect("usage: store_replay DIR [PRECISION]");
    let precision: Option<u32> = args.get(1).and_then(|p| p.parse().ok());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("replay dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "tsv"))
        .collect();
    files.sort();
    // Only the day and its reads (what a change to the read path needs measured).
    let day_only = std::env::var_os("WASMON_REPLAY_DAY_ONLY").is_some();
    let mut all_series: Vec<Vec<f64>> = Vec::new();
    let (mut total_bytes, mut total_samples) = (0isize, 0u64);
    for f in &files {
        let rows = load(f);
        // Each metric's step: the median interval between its samples, in whole seconds.
        let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for r in &rows {
            times.entry(&r.series).or_default().push(r.ts);
        }
        let mut steps: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for (s, t) in &times {
            for w in t.windows(2) {
                steps.entry(split(s).0).or_default().push(w[1] - w[0]);
            }
        }
        let mut cfg = StoreConfig::default();
        cfg.retention_in_memory = std::time::Duration::ZERO;
        for (m, mut d) in steps {
            d.sort_by(f64::total_cmp);
            let step = d[d.len() / 2].round().clamp(1.0, 65_535.0) as u64;
            let mut mc: MetricConfig = toml::from_str(&format!("frequency = {step}")).unwrap();
            if let Some(p) = precision {
                mc = toml::from_str(&format!("frequency = {step}\nprecision = {p}"))
                    .expect("this build has `precision`");
            }
            cfg.metrics.insert(m.to_string(), mc);
        }
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        if day_only {
            all_series.extend(series_values(&rows));
            continue;
        }
        let before = LIVE.load(Ordering::Relaxed);
        let store = Store::new(cfg);
        let mut written = 0u64;
        let mut next_pass = rows.first().map_or(0, |r| r.ts as i64) + PASS;
        let mut pass_ns = 0u128;
        for r in &rows {
            if r.ts as i64 >= next_pass {
                let t = Instant::now();
                store.compact(r.ts as i64);
                pass_ns += t.elapsed().as_nanos();
                next_pass = r.ts as i64 + PASS;
            }
            let (metric, inst) = split(&r.series);
            let mut path: Vec<&str> = vec!["pcp", &name];
            path.extend(inst.split(LEVEL_SEP).filter(|l| !l.is_empty()));
            if store
                .write(&path, metric, r.ts.round() as i64, r.value)
                .is_ok()
            {
                written += 1;
            }
        }
        let last = rows.last().map_or(0, |r| r.ts as i64);
        let t = Instant::now();
        store.compact(last);
        pass_ns += t.elapsed().as_nanos();
        let bytes = LIVE.load(Ordering::Relaxed) - before;
        let u = store.usage();
        store.compact(last + 3600);
        let idle = store.usage();
        println!(
            "replay {name}: {} values, {} series, {written} stored: {:.3} bytes/sample (heap), usage {} ({:.3} B/sample); passes {:.1} ns/sample; an hour after the last value {:.3} B/sample",
            rows.len(),
            times.len(),
            bytes as f64 / written as f64,
            serde_json::to_string(&u).unwrap(),
            u.bytes as f64 / u.samples.max(1) as f64,
            pass_ns as f64 / written.max(1) as f64,
            idle.bytes as f64 / idle.samples.max(1) as f64,
        );
        total_bytes += bytes;
        total_samples += written;
        all_series.extend(series_values(&rows));
        drop(store);
    }
    if !day_only {
        println!(
            "replay all: {total_samples} samples: {:.3} bytes/sample (heap)",
            total_bytes as f64 / total_samples as f64
        );
        codec_cost(&all_series);
    }
    if std::env::var_os("WASMON_REPLAY_SKIP_DAY").is_none() {
        day(&all_series, precision);
    }
}

/// Each recorded series' values (those of at least 16), in series order.
fn series_values(rows: &[Row]) -> impl Iterator<Item = Vec<f64>> {
    let mut by_series: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rows {
        by_series.entry(&r.series).or_default().push(r.value);
    }
    by_series.into_values().filter(|v| v.len() >= 16)
}

/// Encode and decode time per 512-value buffer over the recorded series, and their size.
fn codec_cost(recorded: &[Vec<f64>]) {
    use wasmon::store::codec;
    let blocks: Vec<&[f64]> = recorded.iter().flat_map(|v| v.chunks(512)).collect();
    let values: usize = blocks.iter().map(|b| b.len()).sum();
    let mut enc = Vec::new();
    let mut encoded = Vec::with_capacity(blocks.len());
    let t = Instant::now();
    for b in &blocks {
        enc.clear();
        codec::encode(black_box(b), &mut enc);
        encoded.push(enc.clone());
    }
    let e = t.elapsed().as_nanos() as f64;
    let bytes: usize = encoded.iter().map(Vec::len).sum();
    let mut out = vec![0.0; 512];
    let t = Instant::now();
    for (b, x) in blocks.iter().zip(&encoded) {
        codec::decode(black_box(x), &mut out[..b.len()]).unwrap();
    }
    let d = t.elapsed().as_nanos() as f64;
    // Lossless on the recorded values: every block decodes bit for bit (NaN as NaN).
    for (b, x) in blocks.iter().zip(&encoded) {
        codec::decode(x, &mut out[..b.len()]).unwrap();
        for (i, (a, o)) in b.iter().zip(&out).enumerate() {
            assert!(
                a.to_bits() == o.to_bits() || (a.is_nan() && o.is_nan()),
                "recorded value {i} of a block: {a:e} came back {o:e}"
            );
        }
    }
    println!(
        "codec: {} buffers, {values} values: encode {:.2} µs/buffer ({:.1} ns/value), decode {:.2} µs/buffer ({:.1} ns/value), {:.3} bytes/value encoded",
        blocks.len(),
        e / blocks.len() as f64 / 1e3,
        e / values as f64,
        d / blocks.len() as f64 / 1e3,
        d / values as f64,
        bytes as f64 / values as f64
    );
}

/// A day of 64 hosts × (8 node metrics + 64 hwthreads × 4 metrics) at 10 s, each series
/// replaying one recorded series' values (cycled).
fn day(recorded: &[Vec<f64>], precision: Option<u32>) {
    const HOSTS: usize = 64;
    const THREADS: usize = 64;
    const STEP: i64 = 10;
    const STEPS: i64 = 8640;
    let t0: i64 = 1_700_000_000 / STEP * STEP;
    let mut cfg = StoreConfig::default();
    cfg.retention_in_memory = std::time::Duration::ZERO;
    let (node, cpu) = (NODE_METRICS, CPU_METRICS);
    for m in node.iter().chain(&cpu) {
        let agg = if node.contains(m) { "sum" } else { "avg" };
        let p = precision.map_or(String::new(), |p| format!("\nprecision = {p}"));
        cfg.metrics.insert(
            m.to_string(),
            toml::from_str(&format!("frequency = {STEP}\naggregation = \"{agg}\"{p}")).unwrap(),
        );
    }
    let rss0 = rss();
    let heap0 = LIVE.load(Ordering::Relaxed);
    let store = Store::new(cfg);
    let mut series = Vec::new();
    for h in 0..HOSTS {
        let hl = store.level(&["bench", &format!("host{h}")]).unwrap();
        for m in node {
            series.push((hl.clone(), m, store.metric(m).unwrap()));
        }
        for t in 0..THREADS {
            let tl = hl.child(&format!("hwthread{t}")).unwrap();
            for m in cpu {
                series.push((tl.clone(), m, store.metric(m).unwrap()));
            }
        }
    }
    let mut batch = WalBatch::default();
    let mut write_ns = 0u128;
    let mut pass_ns = 0u128;
    for step in 0..STEPS {
        if step > 0 && step % (PASS / STEP) == 0 {
            let t = Instant::now();
            store.compact(t0 + step * STEP);
            pass_ns += t.elapsed().as_nanos();
        }
        let start = Instant::now();
        for (i, (l, name, m)) in series.iter().enumerate() {
            let v = &recorded[(i * 7919) % recorded.len()];
            let value = v[step as usize % v.len()];
            store
                .write_to(&mut batch, l, name, *m, t0 + step * STEP, value)
                .unwrap();
        }
        write_ns += start.elapsed().as_nanos();
    }
    let t = Instant::now();
    store.compact(t0 + STEPS * STEP);
    pass_ns += t.elapsed().as_nanos();
    let samples = series.len() as u64 * STEPS as u64;
    let ns = write_ns as f64 / samples as f64;
    let pass = pass_ns as f64 / samples as f64;
    let heap = LIVE.load(Ordering::Relaxed) - heap0;
    let u = store.usage();
    println!(
        "day: {} series × {STEPS} steps: {:.1} ns/sample written (+ {pass:.1} ns/sample in the background passes), heap {:.1} MB ({:.3} bytes/sample), RSS +{:.1} MB, usage {}",
        series.len(),
        ns,
        heap as f64 / 1e6,
        heap as f64 / samples as f64,
        (rss() - rss0) as f64 / 1e6,
        serde_json::to_string(&u).unwrap()
    );
    let to = t0 + STEPS * STEP;
    let from = to - 1024 * STEP;
    let one = selector(&["bench", "host3", "hwthread7"]);
    let host = selector(&["bench", "host3"]);
    for (what, sel) in [
        ("one series × 1024", &one),
        ("avg 64 hwthreads × 1024", &host),
    ] {
        let mut times = Vec::new();
        // More rounds to profile the reads (`perf record -D` past the day's writes).
        let rounds = std::env::var("WASMON_REPLAY_READ_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(15);
        for _ in 0..rounds {
            let t = Instant::now();
            for _ in 0..200 {
                let r = store
                    .read(black_box(sel), "flops_any", from, to, 0)
                    .unwrap();
                assert_eq!(r.data.len(), 1024);
                black_box(r);
            }
            times.push(t.elapsed().as_nanos() as f64 / 200.0);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "day read {what}: median {:.2} µs",
            times[times.len() / 2] / 1e3
        );
    }
}
