//! The sandbox: deadlines, memory caps, traps, output caps, quarantine and capability grants.
//! Each failure fails one call only; the next call gets a fresh instance.

use std::time::{Duration, Instant};

use serde_json::json;
use wasmon::host::{CallError, GuestConfig, limits::EPOCH_TICK};

use crate::common::*;

/// Two plain samples a healthy guest passes through.
pub(crate) fn ok_batch() -> Vec<wasmon::sample::Sample> {
    vec![
        sample("fine", "r1", 1.0, 1.0),
        sample("fine", "r2", 2.0, 1.0),
    ]
}

#[test]
fn a_spinning_guest_is_stopped_at_its_deadline_and_the_next_call_gets_a_fresh_instance() {
    let mut cfg = GuestConfig::new("spinner", "{}");
    cfg.deadline = Duration::from_millis(50);
    let mut g = load_with("testing", cfg).unwrap();
    let instances = g.image().stats().instances.get();
    let start = Instant::now();
    let err = g.handle(&[sample("test.loop", "r", 0.0, 1.0)]).unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, CallError::Deadline(_)), "{err}");
    // Deadline plus one epoch tick, with room for a loaded CI machine to schedule the ticker.
    assert!(took >= Duration::from_millis(50), "stopped early: {took:?}");
    assert!(
        took < Duration::from_millis(50) + EPOCH_TICK + Duration::from_millis(150),
        "took {took:?}"
    );
    assert_eq!(g.handle(&ok_batch()).unwrap().len(), 2);
    assert_eq!(
        g.image().stats().instances.get(),
        instances + 1,
        "a fresh instance served the next batch"
    );
    assert_eq!(g.image().stats().deadline_hits.get(), 1);
}

#[test]
fn a_guest_that_allocates_past_its_cap_fails_that_call_only() {
    let mut cfg = GuestConfig::new("hog", "{}");
    cfg.memory = 16 << 20;
    let mut g = load_with("testing", cfg).unwrap();
    let err = g
        .handle(&[sample("test.alloc", "r", 0.0, 1.0)])
        .unwrap_err();
    assert!(
        matches!(err, CallError::Memory(m) if m == 16 << 20),
        "{err}"
    );
    assert_eq!(g.handle(&ok_batch()).unwrap().len(), 2);
    assert_eq!(g.image().stats().memory_refusals.get(), 1);
}

#[test]
fn a_trapping_guest_fails_that_call_and_other_guests_are_undisturbed() {
    let mut bad = load("testing", json!({})).unwrap();
    let mut good = load("template", json!({"factor": 2.0})).unwrap();
    let err = bad
        .handle(&[sample("test.trap", "r", 0.0, 1.0)])
        .unwrap_err();
    assert!(matches!(err, CallError::Trap(_)), "{err}");
    let out = good.handle(&ok_batch()).unwrap();
    assert_eq!(
        out.iter().map(|s| s.value).collect::<Vec<_>>(),
        vec![2.0, 4.0]
    );
    assert_eq!(bad.handle(&ok_batch()).unwrap().len(), 2);
}

#[test]
fn output_past_the_cap_is_refused() {
    let mut cfg = GuestConfig::new("flood", "{}");
    cfg.max_output_samples = 1000;
    let mut g = load_with("testing", cfg).unwrap();
    assert_eq!(
        g.handle(&[sample("test.flood", "r", 1000.0, 1.0)])
            .unwrap()
            .len(),
        1000
    );
    let err = g
        .handle(&[sample("test.flood", "r", 1001.0, 1.0)])
        .unwrap_err();
    assert!(matches!(err, CallError::Output(_)), "{err}");
    assert_eq!(g.image().stats().output_refusals.get(), 1);
}

#[test]
fn repeated_failures_quarantine_the_guest_without_calling_it() {
    let mut cfg = GuestConfig::new("flaky", "{}");
    cfg.quarantine_after = 3;
    let mut g = load_with("testing", cfg).unwrap();
    for _ in 0..3 {
        assert!(matches!(
            g.handle(&[sample("test.trap", "r", 0.0, 1.0)]),
            Err(CallError::Trap(_))
        ));
    }
    let calls = g.image().stats().calls.get();
    let err = g.handle(&ok_batch()).unwrap_err();
    assert!(matches!(err, CallError::Quarantined(_)), "{err}");
    assert!(g.quarantined());
    assert_eq!(
        g.image().stats().calls.get(),
        calls,
        "a quarantined guest is not called"
    );
    assert_eq!(g.image().stats().quarantines.get(), 1);
}

#[test]
fn a_guest_cannot_open_a_file_it_was_not_granted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("granted.txt"), "hello").unwrap();
    let open = |path: &str| with_meta(sample("test.open", "r", -1.0, 1.0), &[("path", path)]);

    let mut cfg = GuestConfig::new("fs", "{}");
    cfg.grants = read_only_grants(&[(dir.path(), "/data")]);
    let mut granted = load_with("testing", cfg).unwrap();
    assert_eq!(
        granted.handle(&[open("/data/granted.txt")]).unwrap()[0].value,
        1.0,
        "the granted file is readable"
    );
    assert_eq!(
        granted.handle(&[open("/etc/passwd")]).unwrap()[0].value,
        0.0,
        "outside the grant"
    );
    assert_eq!(
        granted.handle(&[open("/data/../../etc/passwd")]).unwrap()[0].value,
        0.0,
        "no escape by .."
    );

    let mut none = load("testing", json!({})).unwrap();
    assert_eq!(none.handle(&[open("/etc/passwd")]).unwrap()[0].value, 0.0);
    let host_path = dir.path().join("granted.txt");
    assert_eq!(
        none.handle(&[open(host_path.to_str().unwrap())]).unwrap()[0].value,
        0.0,
        "no grant, no file"
    );
}

#[test]
fn broken_components_are_refused_with_a_clear_error() {
    let rt = runtime();
    let e = rt
        .compile(b"not wasm at all", "junk.wasm")
        .err()
        .expect("bad bytes refused");
    assert!(
        format!("{e:#}").contains("junk.wasm is not a valid WebAssembly component"),
        "{e:#}"
    );

    // A valid component of another shape (no `transform` export): the world check refuses it.
    let empty = wat::parse_str("(component)").unwrap();
    let compiled = rt.compile(&empty, "empty").unwrap();
    let e = wasmon::host::Image::<wasmon::host::TransformerWorld>::load(
        &rt,
        &compiled,
        GuestConfig::new("empty", "{}"),
    )
    .err()
    .expect("wrong world refused");
    assert!(
        format!("{e:#}").contains("does not fit the `transformer` world"),
        "{e:#}"
    );

    let e = load("testing", json!({"fail": "bad params"}))
        .err()
        .expect("configure refusal");
    assert!(format!("{e:#}").contains("refused as asked"), "{e:#}");
}

#[test]
fn a_component_of_another_package_version_is_refused() {
    // Exports `transform@0.2.0` where wasmon speaks 0.1.0.
    let wat = r#"(component
        (core module $m (func (export "f")))
        (core instance $i (instantiate $m))
        (func $f (canon lift (core func $i "f")))
        (instance $t (export "flush" (func $f)))
        (export "wasmon:collector/transform@0.2.0" (instance $t)))"#;
    let rt = runtime();
    let compiled = rt.compile(&wat::parse_str(wat).unwrap(), "v2").unwrap();
    let e = wasmon::host::Image::<wasmon::host::TransformerWorld>::load(
        &rt,
        &compiled,
        GuestConfig::new("v2", "{}"),
    )
    .err()
    .expect("other version refused");
    let e = format!("{e:#}");
    assert!(
        e.contains("wasmon:collector@0.1.0") && e.contains("transform@0.1.0"),
        "{e}"
    );
}

#[test]
fn strings_stay_right_across_batches_a_table_reset_and_a_fresh_instance() {
    // One batch below is 65k samples: more than the default deadline allows.
    let mut cfg = GuestConfig::new("template", r#"{"factor": 1.0}"#);
    cfg.deadline = Duration::from_secs(10);
    let mut g = load_with("template", cfg).unwrap();
    let names = |v: &[wasmon::sample::Sample]| {
        v.iter()
            .map(|s| format!("{}@{}", s.name, s.resource))
            .collect::<Vec<_>>()
    };
    // Many batches reusing and adding strings.
    for round in 0..5 {
        let batch: Vec<_> = (0..100)
            .map(|i| {
                sample(
                    &format!("m{}", i % 3),
                    &format!("r{}", i + round * 50),
                    1.0,
                    1.0,
                )
            })
            .collect();
        assert_eq!(
            names(&g.handle(&batch).unwrap()),
            names(&batch),
            "round {round}"
        );
    }
    // Past the table's cap: the next batch resets it on both sides.
    let n = wasmon::host::limits::MAX_STRING_TABLE + 10;
    let big: Vec<_> = (0..n)
        .map(|i| sample("m", &format!("res{i}"), i as f64, 1.0))
        .collect();
    assert_eq!(names(&g.handle(&big).unwrap()), names(&big));
    let after: Vec<_> = (0..10)
        .map(|i| sample("after", &format!("x{i}"), 1.0, 1.0))
        .collect();
    assert_eq!(
        names(&g.handle(&after).unwrap()),
        names(&after),
        "after a reset"
    );
    // A trap discards the instance and its table; the fresh one starts empty on both sides.
    let mut t = load("testing", json!({})).unwrap();
    assert_eq!(names(&t.handle(&after).unwrap()), names(&after));
    assert!(t.handle(&[sample("test.trap", "r", 0.0, 1.0)]).is_err());
    assert_eq!(
        names(&t.handle(&after).unwrap()),
        names(&after),
        "after a fresh instance"
    );
}
