//! Tests of the notifier's semantics (edges, ownership, handles) and delivery (queues, drops).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::*;

fn quiet() -> Notifier {
    Notifier::quiet(1024)
}

/// Drain everything queued for `sub` (notifications only).
fn drain(n: &Notifier, sub: &str) -> Vec<Notification> {
    let s = n.subscriber(sub);
    let mut out = Vec::new();
    while let Some(ev) = s.try_recv() {
        if let Event::Notification(x) = ev {
            out.push(x);
        }
    }
    out
}

fn feed(n: &Notifier, metric: &str, inst: &str, values: &[f64]) {
    for (i, v) in values.iter().enumerate() {
        n.observe(metric, inst, *v, i as i64);
    }
}

/// Subscriber `who`'s threshold rising above `at` on `metric` instance `inst`: its handle.
fn rising(n: &Notifier, who: &str, metric: &str, inst: &str, at: f64) -> Handle {
    n.add(
        who,
        ThresholdSpec::rising(Selector::instance(metric, inst), at),
    )
    .unwrap()
}

#[test]
fn rising_fires_on_each_upward_crossing_only() {
    let n = quiet();
    let h = rising(&n, "a", "m", "1", 40.0);
    feed(&n, "m", "1", &[38.0, 41.0, 45.0, 39.0, 40.0, 42.0]);
    let got = drain(&n, "a");
    let values: Vec<f64> = got.iter().map(|x| x.value).collect();
    assert_eq!(values, vec![41.0, 40.0]);
    assert!(
        got.iter()
            .all(|x| x.handle == h && &*x.instance == "1" && &*x.metric == "m")
    );
    assert_eq!(got[0].ts_ns, 1);
    assert_eq!(got[1].ts_ns, 4);
}

#[test]
fn falling_fires_on_each_downward_crossing_only() {
    let n = quiet();
    n.add(
        "a",
        ThresholdSpec::falling(Selector::instance("m", "1"), 40.0),
    )
    .unwrap();
    feed(&n, "m", "1", &[42.0, 39.0, 35.0, 41.0, 40.0, 38.0, 37.0]);
    let values: Vec<f64> = drain(&n, "a").iter().map(|x| x.value).collect();
    assert_eq!(values, vec![39.0, 38.0]);
}

#[test]
fn hysteresis_delays_rearming() {
    let n = quiet();
    let spec = ThresholdSpec::rising(Selector::instance("m", "1"), 40.0).with_hysteresis(5.0);
    n.add("a", spec).unwrap();
    // 39 and 36 are below 40 but not below 35: no re-arm, so 41 and 40 do not fire again.
    feed(
        &n,
        "m",
        "1",
        &[30.0, 41.0, 39.0, 41.0, 36.0, 40.0, 34.0, 40.0],
    );
    let values: Vec<f64> = drain(&n, "a").iter().map(|x| x.value).collect();
    assert_eq!(values, vec![41.0, 40.0]);
}

#[test]
fn subscribers_get_only_their_own_thresholds() {
    let n = quiet();
    let ha = rising(&n, "alice", "m", "1", 10.0);
    let hb1 = rising(&n, "bob", "m", "1", 20.0);
    let hb2 = rising(&n, "bob", "m", "1", 30.0);
    feed(&n, "m", "1", &[0.0, 15.0, 25.0, 35.0]);
    let a = drain(&n, "alice");
    let b = drain(&n, "bob");
    assert_eq!(
        a.iter().map(|x| (x.handle, x.value)).collect::<Vec<_>>(),
        vec![(ha, 15.0)]
    );
    assert_eq!(
        b.iter().map(|x| (x.handle, x.value)).collect::<Vec<_>>(),
        vec![(hb1, 25.0), (hb2, 35.0)]
    );
    assert!(a.iter().all(|x| &*x.owner == "alice"));
}

#[test]
fn delete_by_handle_stops_notifications_and_checks_owner() {
    let n = quiet();
    let h = rising(&n, "a", "m", "1", 10.0);
    feed(&n, "m", "1", &[0.0, 11.0, 0.0]);
    assert_eq!(drain(&n, "a").len(), 1);
    assert!(matches!(
        n.remove(h, Some("b")),
        Err(NotifyError::NotOwner { .. })
    ));
    let info = n.remove(h, Some("a")).unwrap();
    assert_eq!(
        (info.handle, info.value, info.direction),
        (h, 10.0, Direction::Rising)
    );
    feed(&n, "m", "1", &[0.0, 11.0, 0.0, 12.0]);
    assert!(drain(&n, "a").is_empty());
    assert_eq!(n.remove(h, None), Err(NotifyError::UnknownHandle(h)));
    assert_eq!(n.threshold_count(), 0);
}

#[test]
fn handles_are_unique_nonzero_and_32_bit() {
    let n = quiet();
    let mut seen = HashSet::new();
    for i in 0..5000 {
        let h = n
            .add(
                "a",
                ThresholdSpec::rising(Selector::instance("m", i.to_string()), 1.0),
            )
            .unwrap();
        assert_ne!(h.0, 0);
        assert!(seen.insert(h), "duplicate handle {h}");
        if i % 3 == 0 {
            n.remove(h, None).unwrap();
        }
    }
    // Deleted handles are not handed out again soon.
    let h = n
        .add("a", ThresholdSpec::rising(Selector::any("m"), 1.0))
        .unwrap();
    assert!(!seen.contains(&h));
    let size_is_32_bits: [u8; 4] = h.0.to_ne_bytes();
    assert_eq!(size_is_32_bits.len(), 4);
}

#[test]
fn handle_counter_wraps_skipping_zero_and_live_handles() {
    let mut reg = Registry {
        last: u32::MAX - 1,
        ..Registry::default()
    };
    let n = quiet();
    let t = {
        let h = n
            .add("a", ThresholdSpec::rising(Selector::any("m"), 1.0))
            .unwrap();
        n.registry().by_handle.get(&h.0).cloned().unwrap()
    };
    reg.by_handle.insert(1, t);
    assert_eq!(Notifier::next_handle(&mut reg).unwrap(), Handle(u32::MAX));
    // wraps past 0 and past live handle 1
    assert_eq!(Notifier::next_handle(&mut reg).unwrap(), Handle(2));
}

#[test]
fn global_threshold_fires_per_instance_independently() {
    let n = quiet();
    let h = n
        .add(
            "ops",
            ThresholdSpec::rising(Selector::any("proc.fd.count"), 40.0),
        )
        .unwrap();
    assert_eq!(n.threshold_count(), 1);
    for pid in 0..100 {
        n.observe("proc.fd.count", &pid.to_string(), 10.0, 0);
    }
    n.observe("proc.fd.count", "4768", 50.0, 1);
    n.observe("proc.fd.count", "17", 41.0, 1);
    n.observe("proc.fd.count", "4768", 51.0, 2); // still above: no second notification
    let got = drain(&n, "ops");
    let mut insts: Vec<&str> = got.iter().map(|x| &*x.instance).collect();
    insts.sort();
    assert_eq!(insts, vec!["17", "4768"]);
    assert!(got.iter().all(|x| x.handle == h));
    // One threshold, not one per instance; values of all instances are tracked.
    assert_eq!(n.list("proc.fd.count", Some("4768")).len(), 1);
    assert_eq!(n.value("proc.fd.count", "4768").unwrap().value, 51.0);
    assert_eq!(n.value("proc.fd.count", "3").unwrap().value, 10.0);
}

#[test]
fn local_and_global_thresholds_both_apply() {
    let n = quiet();
    let g = n
        .add("a", ThresholdSpec::rising(Selector::any("m"), 40.0))
        .unwrap();
    let l = rising(&n, "b", "m", "7", 15.0);
    feed(&n, "m", "7", &[0.0, 20.0, 50.0]);
    assert_eq!(
        drain(&n, "a").iter().map(|x| x.handle).collect::<Vec<_>>(),
        vec![g]
    );
    assert_eq!(
        drain(&n, "b").iter().map(|x| x.handle).collect::<Vec<_>>(),
        vec![l]
    );
    let on_7: Vec<Handle> = n.list("m", Some("7")).iter().map(|i| i.handle).collect();
    assert_eq!(on_7, vec![g, l]);
    let on_8: Vec<Handle> = n.list("m", Some("8")).iter().map(|i| i.handle).collect();
    assert_eq!(on_8, vec![g]);
    assert_eq!(n.list("other", None), vec![]);
}

#[test]
fn remove_all_removes_only_mine_and_forgets_untracked_metrics() {
    let n = quiet();
    n.add("a", ThresholdSpec::rising(Selector::any("m"), 1.0))
        .unwrap();
    rising(&n, "a", "m", "x", 2.0);
    let hb = rising(&n, "b", "k", "y", 2.0);
    n.observe("m", "z", 0.0, 0);
    assert_eq!(n.remove_all("a").len(), 2);
    assert_eq!(n.list_owner("a"), vec![]);
    assert_eq!(
        n.list_owner("b")
            .iter()
            .map(|i| i.handle)
            .collect::<Vec<_>>(),
        vec![hb]
    );
    // No threshold left on `m`: its values are no longer tracked.
    assert_eq!(n.value("m", "z"), None);
    n.observe("m", "z", 5.0, 1);
    assert_eq!(n.value("m", "z"), None);
    assert!(drain(&n, "a").is_empty());
    // Other metrics still fire after the index forgot `m`.
    n.observe("k", "y", 3.0, 2);
    assert_eq!(
        drain(&n, "b").iter().map(|x| x.handle).collect::<Vec<_>>(),
        vec![hb]
    );
}

#[test]
fn many_metrics_and_removing_one_of_several_levels() {
    let n = quiet();
    let hs: Vec<Handle> = (0..500)
        .map(|i| {
            n.add(
                "a",
                ThresholdSpec::rising(Selector::any(format!("metric.{i}")), 1.0),
            )
            .unwrap()
        })
        .collect();
    for h in hs.iter().step_by(2) {
        n.remove(*h, None).unwrap();
    }
    for i in 0..500 {
        n.observe(&format!("metric.{i}"), "x", 2.0, i);
    }
    let fired: Vec<Handle> = drain(&n, "a").iter().map(|x| x.handle).collect();
    assert_eq!(
        fired,
        hs.iter().skip(1).step_by(2).copied().collect::<Vec<_>>()
    );
    // Minor and major level on one instance; deleting the first keeps the second working.
    let minor = rising(&n, "b", "lvl", "1", 10.0);
    let major = rising(&n, "b", "lvl", "1", 20.0);
    n.remove(minor, None).unwrap();
    feed(&n, "lvl", "1", &[0.0, 15.0, 25.0]);
    assert_eq!(
        drain(&n, "b")
            .iter()
            .map(|x| (x.handle, x.value))
            .collect::<Vec<_>>(),
        vec![(major, 25.0)]
    );
}

#[test]
fn already_beyond_fires_once_and_nan_is_ignored() {
    let n = quiet();
    rising(&n, "a", "m", "1", 40.0);
    feed(&n, "m", "1", &[50.0, f64::NAN, 60.0, 10.0, f64::NAN, 45.0]);
    let values: Vec<f64> = drain(&n, "a").iter().map(|x| x.value).collect();
    assert_eq!(values, vec![50.0, 45.0]);
}

#[test]
fn forgotten_instance_starts_armed_again() {
    let n = quiet();
    n.add("a", ThresholdSpec::rising(Selector::any("m"), 10.0))
        .unwrap();
    n.observe("m", "1", 20.0, 0);
    assert!(n.forget_instance("m", "1"));
    assert_eq!(n.value("m", "1"), None);
    n.observe("m", "1", 20.0, 1); // a new process with the same pid
    assert_eq!(drain(&n, "a").len(), 2);
    n.observe("m", "2", 0.0, 5);
    assert_eq!(n.expire_older_than(3), 1); // "1" last seen at 1
    assert!(n.value("m", "2").is_some());
}

#[test]
fn invalid_specs_are_rejected() {
    let n = quiet();
    let e = n.add("a", ThresholdSpec::rising(Selector::any(""), 1.0));
    assert!(matches!(e, Err(NotifyError::Invalid(_))));
    let e = n.add("a", ThresholdSpec::rising(Selector::any("m"), f64::NAN));
    assert!(matches!(e, Err(NotifyError::Invalid(_))));
    let e = n.add(
        "a",
        ThresholdSpec::rising(Selector::any("m"), 1.0).with_hysteresis(-1.0),
    );
    assert!(matches!(e, Err(NotifyError::Invalid(_))));
    assert_eq!(Selector::instance("m", "*"), Selector::any("m"));
}

#[test]
fn stalled_subscriber_drops_are_counted_exactly_and_reported_in_order() {
    let n = Notifier::quiet(8);
    rising(&n, "slow", "m", "1", 1.0);
    rising(&n, "fast", "m", "1", 1.0);
    let sent = 1000u64;
    for i in 0..sent {
        n.observe("m", "1", 0.0, 2 * i as i64);
        n.observe("m", "1", 2.0, 2 * i as i64 + 1);
        // "fast" keeps up; "slow" never reads until the end.
        while n.subscriber("fast").try_recv().is_some() {}
    }
    let slow = n.subscriber("slow");
    let st = slow.stats();
    assert_eq!((st.sent, st.queued, st.dropped), (sent, 8, sent - 8));
    let mut events = Vec::new();
    while let Some(ev) = slow.try_recv() {
        events.push(match ev {
            Event::Notification(_) => 0,
            Event::Dropped { count } => count,
        });
    }
    // The first 8 were queued; everything after was dropped and is reported after them.
    let mut expected = vec![0u64; 8];
    expected.push(sent - 8);
    assert_eq!(events, expected);
    let st = slow.stats();
    assert_eq!(st.sent, st.delivered + st.dropped);
    assert_eq!(n.subscriber("fast").stats().dropped, 0);
}

#[tokio::test]
async fn concurrent_slow_consumer_sees_exact_drop_reports() {
    let n = Arc::new(Notifier::quiet(16));
    rising(&n, "s", "m", "1", 1.0);
    let sub = n.subscriber("s");
    let guard = sub.attach().unwrap();
    assert!(
        sub.attach().is_err(),
        "second stream on one subscriber must be refused"
    );
    let producer = {
        let n = Arc::clone(&n);
        std::thread::spawn(move || {
            for i in 0..20_000i64 {
                n.observe("m", "1", (i % 2) as f64 * 2.0, i);
            }
        })
    };
    let (mut delivered, mut reported) = (0u64, 0u64);
    let mut last_ts = -1;
    loop {
        match tokio::time::timeout(Duration::from_millis(300), guard.subscriber().recv()).await {
            Ok(Event::Notification(x)) => {
                assert!(x.ts_ns > last_ts, "delivery keeps order");
                last_ts = x.ts_ns;
                delivered += 1;
                tokio::time::sleep(Duration::from_micros(50)).await;
            }
            Ok(Event::Dropped { count }) => reported += count,
            Err(_) if producer.is_finished() => break,
            Err(_) => {}
        }
    }
    producer.join().unwrap();
    assert_eq!(
        delivered + reported,
        10_000,
        "every crossing is delivered or reported"
    );
    assert!(reported > 0, "the consumer was slow enough to overflow");
    let st = sub.stats();
    assert_eq!(
        (st.sent, st.delivered, st.dropped),
        (10_000, delivered, reported)
    );
    drop(guard);
    assert!(sub.attach().is_ok(), "released when the stream ends");
}

#[tokio::test]
async fn batch_window_groups_a_burst() {
    let n = quiet();
    n.add("b", ThresholdSpec::rising(Selector::any("m"), 1.0))
        .unwrap();
    let sub = n.subscriber("b");
    sub.set_batch_window(Some(Duration::from_millis(100)));
    n.observe("m", "1", 5.0, 0);
    let n2 = Arc::new(n);
    let n3 = Arc::clone(&n2);
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        n3.observe("m", "2", 5.0, 1);
        n3.observe("m", "3", 5.0, 2);
    });
    let batch = sub.recv_batch(100).await;
    late.await.unwrap();
    assert_eq!(batch.len(), 3, "{batch:?}");
}

#[test]
fn sinks_see_every_notification() {
    let n = quiet();
    let (sink, mut rx) = ChannelSink::new(2);
    n.add_sink(sink.clone());
    n.add("a", ThresholdSpec::rising(Selector::any("m"), 1.0))
        .unwrap();
    for i in 0..3 {
        n.observe("m", &i.to_string(), 2.0, 0);
    }
    assert_eq!(rx.try_recv().unwrap().instance.as_ref(), "0");
    assert_eq!(rx.try_recv().unwrap().instance.as_ref(), "1");
    assert!(rx.try_recv().is_err());
    assert_eq!(sink.dropped(), 1);
    let x = drain(&n, "a").pop().unwrap();
    assert_eq!(
        subject_for(
            "wasmon.notify",
            &Notification {
                owner: "a.b c".into(),
                ..x
            }
        ),
        "wasmon.notify.a_b_c"
    );
}

#[test]
fn notification_json_round_trips() {
    let x = Notification {
        handle: Handle(7),
        owner: "o".into(),
        metric: "proc.fd.count".into(),
        instance: "4768".into(),
        value: 41.0,
        threshold: 40.0,
        direction: Direction::Rising,
        ts_ns: 5,
    };
    let j = serde_json::to_string(&x).unwrap();
    assert!(
        j.contains("\"instance\":\"4768\"") && j.contains("\"direction\":\"rising\""),
        "{j}"
    );
    assert_eq!(serde_json::from_str::<Notification>(&j).unwrap(), x);
}

#[test]
fn many_threads_ingesting_fire_exactly_once_per_instance() {
    let n = Arc::new(Notifier::quiet(100_000));
    n.add("g", ThresholdSpec::rising(Selector::any("m"), 10.0))
        .unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (n, barrier) = (Arc::clone(&n), Arc::clone(&barrier));
            std::thread::spawn(move || {
                // Every thread reports every instance, racing on the same entries: first all
                // below the threshold, then (after the barrier) all above it twice.
                for i in 0..1000 {
                    n.observe("m", &i.to_string(), 5.0, t);
                }
                barrier.wait();
                for v in [15.0, 16.0] {
                    for i in 0..1000 {
                        n.observe("m", &i.to_string(), v, t);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut insts: Vec<String> = drain(&n, "g")
        .iter()
        .map(|x| x.instance.to_string())
        .collect();
    assert_eq!(
        insts.len(),
        1000,
        "one crossing per instance, whatever the interleaving"
    );
    insts.sort();
    insts.dedup();
    assert_eq!(insts.len(), 1000);
    assert_eq!(n.tracked_instances(), 1000);
}
