//! Guests that misbehave in ways epochs alone do not stop: sleeping in WASI, recursing without
//! end, printing floods, hoarding descriptors, and failures that drop cached samples. Each
//! costs the daemon that one call and is counted truthfully.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmon::host::limits::{EPOCH_TICK, MAX_HANDLES, MAX_LOG_LINES_PER_CALL};
use wasmon::host::{CallError, GuestConfig};
use wasmon::pipeline::{ChannelSink, Pipeline, Sink, Swap};

use crate::common::*;
use crate::sandbox::ok_batch as fine;

#[test]
fn a_guest_sleeping_in_wasi_is_abandoned_at_its_deadline() {
    let mut cfg = GuestConfig::new("wasi-sleeper", "{}");
    cfg.deadline = Duration::from_millis(100);
    let mut g = load_with("testing", cfg).unwrap();
    let start = Instant::now();
    let err = g
        .handle(&[sample("test.sleep", "r", 4.0, 1.0)])
        .unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, CallError::Deadline(_)), "{err}");
    assert!(
        took < Duration::from_millis(500),
        "a 4 s sleep held the call for {took:?}"
    );
    assert!(
        took >= Duration::from_millis(100),
        "abandoned early: {took:?}"
    );
    // A short sleep within the deadline is fine, and the next call has a fresh instance.
    let out = g.handle(&[sample("test.sleep", "r", 0.01, 1.0)]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(g.image().stats().deadline_hits.get(), 1);
}

#[test]
fn infinite_recursion_traps_that_call_and_the_next_call_runs() {
    let mut g = load_with("testing", GuestConfig::new("recurser", "{}")).unwrap();
    let err = g
        .handle(&[sample("test.recurse", "r", 0.0, 1.0)])
        .unwrap_err();
    match &err {
        CallError::Trap(m) => assert!(m.contains("call stack exhausted"), "{m}"),
        other => panic!("expected a trap, got {other}"),
    }
    assert_eq!(g.handle(&fine()).unwrap().len(), 2);
}

#[test]
fn what_a_guest_prints_is_capped_per_call_and_counted() {
    // Writing is slow in a debug build; the deadline is not what this test is about.
    let mut cfg = GuestConfig::new("printer", "{}");
    cfg.deadline = Duration::from_secs(10);
    let mut g = load_with("testing", cfg).unwrap();
    for stream in ["test.stderr", "test.stdout"] {
        let before = g.image().stats().log_lines_dropped.get();
        let out = g.handle(&[sample(stream, "r", 5000.0, 1.0)]).unwrap();
        assert_eq!(out.len(), 1, "the call itself succeeds");
        let dropped = g.image().stats().log_lines_dropped.get() - before;
        assert_eq!(
            dropped,
            5000 - u64::from(MAX_LOG_LINES_PER_CALL),
            "{stream}: lines past the per-call cap are dropped and counted"
        );
    }
}

#[test]
fn a_guest_hoarding_descriptors_is_stopped_at_the_handle_cap() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x"), "x").unwrap();
    let mut cfg = GuestConfig::new("hoarder", "{}");
    cfg.deadline = Duration::from_secs(10);
    cfg.grants = read_only_grants(&[(dir.path(), "/data")]);
    let mut g = load_with("testing", cfg).unwrap();
    let ask = |n: f64| with_meta(sample("test.fds", "r", n, 1.0), &[("path", "/data/x")]);
    assert_eq!(
        g.handle(&[ask(10.0)]).unwrap()[0].value,
        10.0,
        "the grant works"
    );
    // Past the cap, WASI's open traps that call (the handle table is full).
    let err = g.handle(&[ask(MAX_HANDLES as f64 + 10.0)]).unwrap_err();
    match &err {
        CallError::Trap(m) => assert!(m.contains("resource table"), "{m}"),
        other => panic!("expected a trap, got {other}"),
    }
    assert_eq!(g.handle(&fine()).unwrap().len(), 2);
}

/// A pipeline `name` of one `testing` stage, with its sink. Counters are registered by
/// pipeline and guest name, so each test names its own.
fn pipeline(
    name: &str,
    params: &str,
) -> (
    Pipeline,
    crossbeam_channel::Receiver<Vec<wasmon::sample::Sample>>,
) {
    pipeline_with(name, GuestConfig::new(name, params))
}

fn pipeline_with(
    name: &str,
    cfg: GuestConfig,
) -> (
    Pipeline,
    crossbeam_channel::Receiver<Vec<wasmon::sample::Sample>>,
) {
    let (sink, rx) = ChannelSink::new(name);
    let stage = load_with("testing", cfg).unwrap();
    let sinks: Vec<Arc<dyn Sink>> = vec![Arc::new(sink)];
    (Pipeline::start(name, vec![stage], None, sinks), rx)
}

#[test]
fn samples_cached_by_a_thrown_away_instance_count_as_lost() {
    let (p, _rx) = pipeline("lost-held", r#"{"mode":"hold"}"#);
    let held: Vec<_> = (0..10).map(|i| sample("m", "r", i as f64, 1.0)).collect();
    p.send(held).unwrap();
    p.send(vec![sample("test.trap", "r", 0.0, 1.0)]).unwrap();
    p.flush().unwrap();
    assert_eq!(
        p.stats().samples_lost.get(),
        11,
        "the trapping batch (1) and the 10 samples the instance held"
    );
    assert_eq!(p.stats().samples_out.get(), 0);
}

#[test]
fn a_flush_that_fails_at_swap_or_stop_counts_what_was_held() {
    let (p, _rx) = pipeline("lost-at-swap", r#"{"mode":"hold"}"#);
    p.send((0..7).map(|i| sample("m", "r", i as f64, 1.0)).collect())
        .unwrap();
    // A held sample that makes the flush trap: the swap's flush of the old version fails.
    p.send(vec![sample("test.trap-on-flush", "r", 0.0, 1.0)])
        .unwrap();
    // A swap goes before queued batches: wait until the old version has taken them.
    let start = std::time::Instant::now();
    while p.stats().samples_in.get() < 8 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "batches not taken"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let next = load_with(
        "testing",
        GuestConfig::new("lost-at-swap", r#"{"tag":"v2"}"#),
    )
    .unwrap();
    p.swap(Swap {
        chain: vec![next],
        sinks: None,
        flush: None.into(),
        fallback: None,
    })
    .unwrap();
    assert_eq!(
        p.stats().samples_lost.get(),
        8,
        "7 held + the one that broke the flush"
    );

    let (p, _rx) = pipeline("lost-at-stop", r#"{"mode":"hold"}"#);
    p.send((0..3).map(|i| sample("m", "r", i as f64, 1.0)).collect())
        .unwrap();
    p.send(vec![sample("test.trap-on-flush", "r", 0.0, 1.0)])
        .unwrap();
    let stats = p.stats().clone();
    p.stop();
    assert_eq!(stats.samples_lost.get(), 4, "lost at the final flush");
}

#[test]
fn quarantine_shows_in_the_stages_only_while_it_lasts() {
    let mut cfg = GuestConfig::new("quarantine-ends", "{}");
    cfg.quarantine_after = 1;
    let (p, _rx) = pipeline_with("quarantine-ends", cfg);
    p.send(vec![sample("test.trap", "r", 0.0, 1.0)]).unwrap();
    p.flush().unwrap();
    assert!(p.stages()[0].quarantined, "quarantined after one failure");
    // The first quarantine lasts 1 s.
    std::thread::sleep(Duration::from_millis(1100) + EPOCH_TICK);
    assert!(
        !p.stages()[0].quarantined,
        "the status page must not report a quarantine that is over"
    );
}
