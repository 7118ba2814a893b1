//! Python, JavaScript and C guests in a running daemon: a Python guest hot-replaces a Rust one
//! under load (its ~20 s compile off the pipeline's thread, the Rust one serving meanwhile), a
//! pipeline chains guests of three languages, and compiled components survive a restart.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use super::{built, cached_runtime, work};
use crate::common::{DaemonProcess, NO_PROCFS, config_file, guest_bytes, post_seq, replace_file};

fn config(dir: &Path, stages: &[(&str, &str)]) -> std::path::PathBuf {
    let mut text = format!(
        "guests-dir = \"guests\"\nwatch-interval = \"100ms\"\n{NO_PROCFS}\n[[pipeline]]\nname = \"p\"\nsinks = [\"stdout\"]\n",
    );
    for (guest, params) in stages {
        text.push_str(&format!(
            "\n[[pipeline.transformer]]\nguest = \"{guest}\"\nmemory = \"256MiB\"\ndeadline = \"2s\"\nparams = {params}\n"
        ));
    }
    config_file(dir, &text)
}

#[test]
fn a_python_guest_hot_replaces_a_rust_one_under_load_losing_and_doubling_nothing() {
    let python = built("python", "template");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("guests")).unwrap();
    let probe = dir.path().join("guests/probe.wasm");
    std::fs::write(&probe, guest_bytes("testing")).unwrap();
    let cfg = config(
        dir.path(),
        &[("probe", r#"{ tag = "rust", mode = "passthrough" }"#)],
    );
    let d = Arc::new(DaemonProcess::start(&cfg));

    // Load: 20 samples every 5 ms, numbered, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = {
        let (d, stop, sent) = (d.clone(), stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            let mut next = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let r = post_seq(&client, &d, next..next + 20, 7);
                assert_eq!(r.status(), 200);
                next += 20;
                sent.store(next, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let mut t = Tally::default();
    let recv = |d: &DaemonProcess| d.stdout.recv_timeout(Duration::from_secs(60));

    // The Rust guest serves.
    let warm = Instant::now() + Duration::from_millis(500);
    while Instant::now() < warm {
        t.receive(&recv(&d).expect("no output from the Rust guest"), false);
    }

    // Deploy the Python component: compiling its 18 MB takes seconds to tens of seconds
    // (unless this run's cache has it); samples keep flowing through the Rust guest meanwhile.
    replace_file(&probe, &std::fs::read(&python).unwrap());
    let deadline = Instant::now() + Duration::from_secs(300);
    while t.first_python.is_none() {
        assert!(
            Instant::now() < deadline,
            "the Python guest never took over; stderr:\n{}",
            d.stderr.lock().unwrap()
        );
        t.receive(&recv(&d).expect("output stopped during the swap"), true);
    }
    let after = Instant::now() + Duration::from_millis(500);
    while Instant::now() < after {
        t.receive(&recv(&d).expect("no output from the Python guest"), false);
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let total = sent.load(Ordering::Relaxed);
    while (t.seen.len() as u64) < total {
        let line = recv(&d).unwrap_or_else(|_| {
            panic!(
                "{} of {total} samples delivered; stderr:\n{}",
                t.seen.len(),
                d.stderr.lock().unwrap()
            )
        });
        t.receive(&line, false);
    }
    assert_eq!(
        t.seen.len() as u64,
        total,
        "every sample delivered exactly once"
    );
    assert!((0..total).all(|i| t.seen.contains(&i)), "no sample lost");
    assert!(
        t.rust > 0 && t.python > 0,
        "rust {} python {}",
        t.rust,
        t.python
    );
    assert!(
        t.rust_while_compiling > 0,
        "the Rust guest kept serving while the Python one was compiled"
    );
    let p: Value = d.get("/api/pipelines").unwrap().json().unwrap();
    assert_eq!(p[0]["samples-lost"], 0, "{p}");
    assert_eq!(p[0]["guest-swaps"], 1, "{p}");
}

/// What came out of the daemon, by guest.
#[derive(Default)]
struct Tally {
    seen: HashSet<u64>,
    rust: u64,
    python: u64,
    first_python: Option<u64>,
    rust_while_compiling: u64,
}

impl Tally {
    fn receive(&mut self, line: &str, swapping: bool) {
        let v: Value = serde_json::from_str(line).unwrap();
        let value = v["value"].as_f64().unwrap() as u64;
        assert!(self.seen.insert(value), "sample {value} delivered twice");
        let rust = v["metadata"]["version"] == "rust";
        if rust {
            self.rust += 1;
            if let Some(p) = self.first_python {
                panic!("sample {value} went through the Rust guest after {p} went through Python");
            }
            if swapping {
                self.rust_while_compiling += 1;
            }
        } else {
            self.python += 1;
            self.first_python.get_or_insert(value);
        }
    }
}

/// Modification times of the compiled-component cache's files.
fn cache_files(data: &Path) -> BTreeMap<String, SystemTime> {
    std::fs::read_dir(data.join("components"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.metadata().unwrap().modified().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn guests_of_three_languages_chain_in_a_daemon_and_their_compiled_code_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let guests = dir.path().join("guests");
    std::fs::create_dir(&guests).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("components")).unwrap();
    for (lang, name) in [("c", "clamp"), ("python", "zscore"), ("js", "rate")] {
        let path = built(lang, name);
        std::fs::copy(&path, guests.join(format!("{name}.wasm"))).unwrap();
        if lang == "c" {
            continue; // the daemon compiles and caches this one itself
        }
        // The big ones' compiled code, from the tests' own cache (same engine configuration,
        // same file name): this test is about the cache, not about waiting for compiles.
        let hash = cached_runtime()
            .compile(&std::fs::read(&path).unwrap(), name)
            .unwrap()
            .hash;
        for e in std::fs::read_dir(work().join("components")).unwrap() {
            let e = e.unwrap();
            if e.file_name().to_string_lossy().starts_with(&hash) {
                std::fs::copy(e.path(), data.join("components").join(e.file_name())).unwrap();
            }
        }
    }
    let seeded = cache_files(&data);
    let cfg = config(
        dir.path(),
        &[
            ("clamp", r#"{ min = 0, max = 1000 }"#),
            ("zscore", r#"{ window = 10 }"#),
            ("rate", r#"{ suffix = "_per_s" }"#),
        ],
    );
    let post = |d: &DaemonProcess, t: u64, v: f64| {
        let line = format!(
            "{{\"name\":\"ops\",\"resource\":\"x\",\"value\":{v},\"type\":\"cumulative\",\"timestamp\":{t}}}"
        );
        assert_eq!(d.post("/api/pipelines/p/samples", &line).status(), 200);
    };
    let check = |d: &DaemonProcess| {
        // -50 is clamped to 0 (C), primes the rate (JS); 2000 is clamped to 1000: 1000/s.
        post(d, 100, -50.0);
        post(d, 101, 2000.0);
        let out = d.next_sample();
        assert_eq!(out["name"], "ops_per_s", "{out}");
        assert_eq!(out["value"], 1000.0);
        assert_eq!(out["type"], "delta");
        assert_eq!(out["metadata"]["clamped"], "2000", "{out}");
    };
    let d = DaemonProcess::start(&cfg);
    check(&d);
    drop(d);
    let written = cache_files(&data);
    assert!(
        written.len() > seeded.len() && written.len() >= 3,
        "the daemon cached what it compiled: {written:?} (seeded {seeded:?})"
    );

    let d = DaemonProcess::start(&cfg);
    check(&d);
    drop(d);
    assert_eq!(
        cache_files(&data),
        written,
        "the restart compiled nothing: every component came from the disk cache"
    );
}
