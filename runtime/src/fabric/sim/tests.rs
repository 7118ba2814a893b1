use super::*;
use crate::fabric::counters::find;
use crate::fabric::engine::{Engine, Output, Thresholds};

fn small() -> SimSpec {
    SimSpec {
        radix: 8,
        pods: 4,
        hosts_per_edge: 4,
        seed: 7,
        epoch: Duration::from_millis(100),
        busy_ppm: 250_000,
        error_ppm: 1000,
        flap_ppm: 500,
        wrap_ppm: 500_000,
    }
}

fn read_all(src: &mut SimSource) -> Reading {
    let ports: Vec<u32> = (0..src.fabric().port_count() as u32).collect();
    let mut r = Reading::default();
    r.resize(&IB_EXTENDED, ports.len());
    src.read(&ports, &mut r).unwrap();
    r
}

#[test]
fn a_fat_tree_of_the_requested_size() {
    let spec = small();
    let f = SimFabric::create(None, &spec).unwrap();
    // k=8: 4 pods x (4 edge + 4 agg) + 16 core = 48 switches; 4 x 4 x 4 = 64 hosts.
    assert_eq!(spec.size(), (48, 64, 48 * 8 + 64));
    assert_eq!(f.node_count(), 112);
    let mut names: Vec<_> = (0..f.node_count()).map(|n| f.name(n).to_string()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 112);
    let src = SimSource::new(Arc::new(f));
    // Links are symmetric; every host hangs off an edge switch.
    for p in 0..src.fabric().port_count() {
        if let Some(q) = src.fabric().peer(p) {
            assert_eq!(src.fabric().peer(q), Some(p));
        }
    }
    let hca = src.find_node("hca-p1-5").unwrap();
    let mut nb = Vec::new();
    src.neighbors(hca, &mut nb);
    assert_eq!(nb.len(), 1);
    assert_eq!(src.node_name(nb[0]), "sw-p1-e1");
    // An edge switch: 4 hosts and 4 aggregation switches.
    nb.clear();
    src.neighbors(nb_of(&src, "sw-p1-e1"), &mut nb);
    assert_eq!(nb.len(), 8);
    // The 1M-port configuration of the bench stays within 48k nodes.
    let big = SimSpec {
        radix: 128,
        pods: 32,
        hosts_per_edge: 8,
        ..SimSpec::default()
    };
    let (s, h, p) = big.size();
    assert!(s + h <= 48_000 && p >= 1_000_000, "{s} {h} {p}");
}

fn nb_of(src: &SimSource, name: &str) -> usize {
    src.find_node(name).unwrap()
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let a = SimFabric::create(None, &small()).unwrap();
    let b = SimFabric::create(None, &small()).unwrap();
    for e in 1..=20 {
        a.tick(e);
        b.tick(e);
    }
    let mut differs = 0;
    for p in 0..a.port_count() {
        for c in 0..IB_COUNTERS {
            assert_eq!(a.counter(p, c), b.counter(p, c));
            differs += usize::from(a.counter(p, c) != 0);
        }
    }
    assert!(differs > 100, "the fabric did something");
    let other = SimFabric::create(None, &SimSpec { seed: 8, ..small() }).unwrap();
    for e in 1..=20 {
        other.tick(e);
    }
    assert!((0..a.port_count()).any(|p| a.counter(p, 0) != other.counter(p, 0)));
}

#[test]
fn counters_wrap_and_saturate() {
    let f = SimFabric::create(None, &small()).unwrap();
    let wait = find(&IB_EXTENDED, "port_xmit_wait").unwrap();
    let mut wrapped = false;
    let start: Vec<u64> = (0..f.port_count()).map(|p| f.counter(p, 0)).collect();
    for e in 1..=400 {
        f.tick(e);
        wrapped |= (0..f.port_count()).any(|p| start[p] > 1 << 63 && f.counter(p, 0) < 1 << 40);
    }
    assert!(wrapped, "a 64-bit counter wrapped");
    let max = u32::MAX as u64;
    assert!((0..f.port_count()).any(|p| f.counter(p, wait) == max));
    assert!((0..f.port_count()).all(|p| f.counter(p, wait) <= max));
}

#[test]
fn clears_are_acknowledged_to_the_reader_that_can_use_them() {
    let f = Arc::new(SimFabric::create(None, &small()).unwrap());
    let mut src = SimSource::new(f.clone());
    let wait = find(&IB_EXTENDED, "port_xmit_wait").unwrap();
    f.tick(1);
    read_all(&mut src);
    src.clear(3, 1 << wait);
    f.tick(2);
    let r = read_all(&mut src);
    assert_eq!(r.cleared[3], 1 << wait);
    assert_eq!(r.reset[3], 0);
    assert!(r.get(wait, 3) <= (2.5e9 * 0.1) as u64);
    // A reader that skipped an epoch cannot know what was lost before the clear.
    let mut late = SimSource::new(f.clone());
    read_all(&mut late);
    src.clear(4, 1);
    f.tick(3);
    f.tick(4);
    let r = read_all(&mut late);
    assert_eq!(
        r.cleared[4], 1,
        "cleared right after its reading at 2: exact"
    );
    assert_eq!(r.reset[4], 0);
    src.clear(5, 1);
    f.tick(5);
    let r = read_all(&mut src);
    assert_eq!(r.reset[5], u32::MAX, "last read at 2, cleared at 5");
}

#[test]
fn removed_nodes_stop_answering_and_return_reset() {
    let f = Arc::new(SimFabric::create(None, &small()).unwrap());
    let mut src = SimSource::new(f.clone());
    let sw = f.find("sw-p0-e0").unwrap();
    let port = f.ports_of(sw).start;
    f.tick(1);
    read_all(&mut src);
    f.set_present(sw, false);
    f.tick(2);
    let r = read_all(&mut src);
    assert!(!r.ok[port]);
    let mut nb = Vec::new();
    src.neighbors(f.find("hca-p0-0").unwrap(), &mut nb);
    assert!(nb.is_empty(), "its hosts lost their link");
    f.set_present(sw, true);
    f.tick(3);
    let r = read_all(&mut src);
    assert!(r.ok[port]);
    assert_eq!(r.reset[port], u32::MAX);
}

#[test]
fn injected_errors_trap_through_the_engine() {
    let f = Arc::new(
        SimFabric::create(
            None,
            &SimSpec {
                error_ppm: 0,
                flap_ppm: 0,
                ..small()
            },
        )
        .unwrap(),
    );
    let mut src = SimSource::new(f.clone());
    let ports: Vec<u32> = (0..f.port_count() as u32).collect();
    let schema = src.schema().to_vec();
    let t = Thresholds {
        trap: schema.iter().map(|_| 5).collect(),
        change: schema.iter().map(|_| 1 << 30).collect(),
    };
    let mut e = Engine::new(&schema, t, true);
    e.set_ports(ports.clone());
    let mut out = Output::default();
    for epoch in 1..=3 {
        f.tick(epoch * 100_000_000);
        src.read(&ports, e.reading_mut()).unwrap();
        e.process(&mut out);
        assert!(out.traps.is_empty());
    }
    f.inject_errors(17, 40);
    f.tick(400_000_000);
    src.read(&ports, e.reading_mut()).unwrap();
    e.process(&mut out);
    let sym = find(&schema, "symbol_error").unwrap() as u8;
    assert!(
        out.traps
            .iter()
            .any(|t| t.slot == 17 && t.counter == sym && t.increase == 40)
    );
    assert!(out.traps.iter().all(|t| t.slot == 17));
}

#[test]
fn a_file_is_shared_between_a_writer_and_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fabric.sim");
    let w = SimFabric::create(Some(&path), &small()).unwrap();
    let r = Arc::new(SimFabric::open(&path).unwrap());
    assert_eq!(r.spec(), small());
    assert_eq!(r.name(100), w.name(100));
    w.tick(5);
    w.tick(6);
    assert_eq!(r.epoch(), 2);
    assert_eq!(r.epoch_ts(), 6);
    let mut src = SimSource::new(r.clone());
    let reading = read_all(&mut src);
    assert_eq!(reading.epoch, 2);
    assert_eq!(reading.get(0, 9), w.counter(9, 0));
    src.clear(9, 1);
    w.tick(7);
    assert!(w.counter(9, 0) <= 3_200_000_000u64 / 10);
    std::fs::write(dir.path().join("junk"), b"not a fabric").unwrap();
    assert!(SimFabric::open(&dir.path().join("junk")).is_err());
}
