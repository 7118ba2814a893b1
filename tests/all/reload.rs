//! Hot reload while samples flow: guests swapped between batches lose and duplicate nothing,
//! and a broken replacement leaves the running version alone.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use wasmon::host::{GuestConfig, Image, TransformerWorld};
use wasmon::pipeline::{ChannelSink, Flush, Pipeline, Sink, Swap};
use wasmon::sample::Sample;

use crate::common::*;

#[test]
fn swapping_guests_twenty_times_under_load_accounts_for_every_sample_exactly_once() {
    // Stage 0 holds samples until flush (so a swap must flush it or lose them); stage 1 alternates
    // between two components (testing, template) and versions of its configuration. Deadlines
    // are generous: this test is about swaps, and a starved CI machine must not turn a slow
    // flush into lost samples.
    let load = |name: &str, params: serde_json::Value| {
        let mut cfg = GuestConfig::new(name, &params.to_string());
        cfg.deadline = Duration::from_secs(10);
        load_with(name, cfg)
    };
    let hold = |tag: &str| load("testing", json!({"mode": "hold", "tag": tag})).unwrap();
    let (sink, rx) = ChannelSink::new("test");
    let sinks: Vec<Arc<dyn Sink>> = vec![Arc::new(sink)];
    let pipeline = Arc::new(Pipeline::start(
        "reload",
        vec![hold("v0"), load("template", json!({})).unwrap()],
        Some(Duration::from_millis(50)),
        sinks,
    ));

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = {
        let (pipeline, stop, sent) = (pipeline.clone(), stop.clone(), sent.clone());
        std::thread::spawn(move || {
            // 200-sample batches every 5 ms: 40k samples/s offered.
            let mut next = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let batch: Vec<Sample> = (0..200)
                    .map(|i| sample("seq", &format!("r{}", i % 7), (next + i) as f64, 1.0))
                    .collect();
                next += 200;
                pipeline.send(batch).unwrap();
                sent.store(next, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let start = Instant::now();
    let mut replaced = 0;
    for i in 1..=20 {
        std::thread::sleep(Duration::from_millis(60));
        let second = if i % 2 == 0 {
            load("template", json!({"factor": 1.0}))
        } else {
            load("testing", json!({"tag": format!("v{i}")}))
        };
        let outcome = pipeline
            .swap(Swap {
                chain: vec![hold(&format!("v{i}")), second.unwrap()],
                sinks: None,
                flush: Some(Duration::from_millis(50)).into(),
                fallback: None,
            })
            .unwrap();
        replaced += outcome.replaced.len();
        if i == 10 {
            // A broken replacement is refused before it reaches the pipeline.
            let rt = runtime();
            assert!(rt.compile(b"\0asm broken", "broken.wasm").is_err());
            let bad = Image::<TransformerWorld>::load(
                &rt,
                &rt.compile(&guest_bytes("testing"), "testing").unwrap(),
                GuestConfig::new("bad", r#"{"fail": "no"}"#),
            );
            assert!(bad.is_err());
        }
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let elapsed = start.elapsed();
    pipeline.flush().unwrap();
    let total = sent.load(Ordering::Relaxed);
    assert_eq!(replaced, 40, "both stages replaced at every swap");
    assert!(
        total as f64 / elapsed.as_secs_f64() >= 10_000.0,
        "the producer offered {total} samples in {elapsed:?}: under 10k/s"
    );

    let mut seen = HashSet::new();
    let mut received = 0u64;
    while let Ok(batch) = rx.try_recv() {
        for s in batch {
            received += 1;
            assert!(
                seen.insert(s.value as u64),
                "sample {} delivered twice",
                s.value
            );
        }
    }
    assert_eq!(received, total, "every sample delivered exactly once");
    assert_eq!(pipeline.stats().samples_lost.get(), 0);
    assert_eq!(pipeline.stats().swaps.get(), 40);
}

#[test]
fn a_swap_that_changes_nothing_keeps_state() {
    let (sink, rx) = ChannelSink::new("test");
    let pipeline = Pipeline::start(
        "keep",
        vec![load("testing", json!({"mode": "hold"})).unwrap()],
        None,
        vec![Arc::new(sink) as Arc<dyn Sink>],
    );
    pipeline.send(vec![sample("m", "r", 1.0, 1.0)]).unwrap();
    let outcome = pipeline
        .swap(Swap {
            chain: vec![load("testing", json!({"mode": "hold"})).unwrap()],
            sinks: None,
            flush: None.into(),
            fallback: None,
        })
        .unwrap();
    assert_eq!((outcome.replaced.len(), outcome.kept.len()), (0, 1));
    assert!(rx.try_recv().is_err(), "an unchanged stage is not flushed");
    pipeline.flush().unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap().len(), 1);
}

/// `flush-after-batch`: a holding stage's output leaves with the batch that brought it (no
/// manual flush, no interval), and an idle pipeline calls its guests no more (nothing wakes
/// it between batches); a swap to an interval flushes on the clock again.
#[test]
fn a_pipeline_flushed_after_each_batch_emits_with_the_batch_and_sleeps_between() {
    let (sink, rx) = ChannelSink::new("test");
    let flush = Flush {
        interval: None,
        after_batch: true,
    };
    // A name of its own: a guest's call counter is the process-wide registry's series for
    // its name, which other tests' `testing` guests add to while they run in parallel.
    let hold = || {
        let cfg = GuestConfig::new("testing-after-batch", &json!({"mode": "hold"}).to_string());
        load_with("testing", cfg).unwrap()
    };
    let pipeline = Pipeline::start(
        "after",
        vec![hold()],
        flush,
        vec![Arc::new(sink) as Arc<dyn Sink>],
    );
    for round in 1..=3 {
        pipeline
            .send(vec![sample("m", "r", f64::from(round), 1.0)])
            .unwrap();
        let out = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            out.iter().map(|s| s.value).collect::<Vec<_>>(),
            vec![f64::from(round)]
        );
    }
    let calls = pipeline.stages()[0].calls;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        pipeline.stages()[0].calls,
        calls,
        "an idle pipeline calls nothing"
    );
    assert!(rx.try_recv().is_err());
    // Back to a clock: a batch waits in the stage for the next tick.
    pipeline
        .swap(Swap {
            chain: vec![hold()],
            sinks: None,
            flush: Some(Duration::from_millis(50)).into(),
            fallback: None,
        })
        .unwrap();
    pipeline.send(vec![sample("m", "r", 9.0, 2.0)]).unwrap();
    let out = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out[0].value, 9.0);
}

/// Records on which thread each batch arrived.
struct ThreadSink(std::sync::Mutex<Vec<(String, usize)>>);

impl Sink for ThreadSink {
    fn name(&self) -> &str {
        "threads"
    }
    fn accept(&self, _pipeline: &str, samples: &[Sample]) {
        let t = std::thread::current().name().unwrap_or("?").to_string();
        self.0.lock().unwrap().push((t, samples.len()));
    }
}

/// A pipeline without stages hands acknowledged batches to its sinks on the sender's thread
/// (senders in parallel, nothing lost); once a swap adds a stage they go through the
/// pipeline's thread and the stage again, and a swap back makes them direct again; a
/// stopped pipeline refuses both ways.
#[test]
fn a_pipeline_without_stages_stores_on_the_senders_thread_until_a_stage_is_swapped_in() {
    let sink = Arc::new(ThreadSink(Default::default()));
    let pipeline = Arc::new(Pipeline::start(
        "direct",
        Vec::new(),
        None,
        vec![sink.clone() as Arc<dyn Sink>],
    ));
    let senders: Vec<_> = (0..4)
        .map(|t| {
            let p = pipeline.clone();
            std::thread::Builder::new()
                .name(format!("sender-{t}"))
                .spawn(move || {
                    for i in 0..50 {
                        p.send_acked(vec![sample("m", "r", i as f64, 1.0); 3])
                            .unwrap();
                    }
                })
                .unwrap()
        })
        .collect();
    senders.into_iter().for_each(|s| s.join().unwrap());
    let taken = std::mem::take(&mut *sink.0.lock().unwrap());
    assert_eq!(taken.iter().map(|(_, n)| n).sum::<usize>(), 600);
    assert!(
        taken.iter().all(|(t, _)| t.starts_with("sender-")),
        "{taken:?}"
    );
    assert_eq!(pipeline.stats().samples_in.get(), 600);
    assert_eq!(pipeline.stats().samples_out.get(), 600);

    let swap = |chain| Swap {
        chain,
        sinks: None,
        flush: None.into(),
        fallback: None,
    };
    let hold = load("testing", json!({"mode": "hold"})).unwrap();
    pipeline.swap(swap(vec![hold])).unwrap();
    pipeline
        .send_acked(vec![sample("m", "r", 1.0, 1.0)])
        .unwrap();
    assert!(
        sink.0.lock().unwrap().is_empty(),
        "the holding stage has the sample until its flush"
    );
    pipeline.flush().unwrap();
    assert_eq!(
        std::mem::take(&mut *sink.0.lock().unwrap()),
        [("pipeline-direct".to_string(), 1)]
    );
    pipeline.swap(swap(Vec::new())).unwrap();
    pipeline
        .send_acked(vec![sample("m", "r", 2.0, 1.0)])
        .unwrap();
    let t = std::thread::current().name().unwrap().to_string();
    assert_eq!(std::mem::take(&mut *sink.0.lock().unwrap()), [(t, 1)]);
    pipeline.stop();
    assert!(
        pipeline
            .send_acked(vec![sample("m", "r", 3.0, 1.0)])
            .is_err()
    );
    assert!(pipeline.send(vec![sample("m", "r", 3.0, 1.0)]).is_err());
}
