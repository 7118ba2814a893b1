use std::sync::Arc;

use super::*;
use crate::sample::{Metadata, Pair};
use crate::store::{Store, StoreConfig, selector};

fn sample(name: &str, resource: &str, value: f64, ts_s: i64, meta: &[(&str, &str)]) -> Sample {
    let mut s = Sample::new(name, resource, value, ts_s * 1_000_000_000);
    s.metadata = Metadata::new(
        meta.iter()
            .map(|(k, v)| -> Pair { ((*k).into(), (*v).into()) })
            .collect(),
    );
    s
}

const CX: Context = Context {
    default_cluster: "local",
    hostname: "node7",
    meta_as_tags: &[],
};

/// What the line-protocol sink sends lands, through wasmon's own `/api/write` ingest, at the
/// level the node's store sink would have used; values round-trip exactly.
#[test]
fn line_protocol_lands_at_the_store_sinks_level() {
    let batch = vec![
        sample("load", "", 1.5, 1_700_000_000, &[]),
        sample("cpu_util", "cpu3", 0.1 + 0.2, 1_700_000_000, &[]),
        sample("net.bytes", "lo", 1e300, 1_700_000_000, &[]),
        sample("odd name,x=y", "a/b", -2.0, 1_700_000_000, &[]),
        sample(
            "flops",
            "",
            7.0,
            1_700_000_000,
            &[
                ("cluster", "fritz"),
                ("hostname", "f0101"),
                ("type", "socket"),
                ("type-id", "1"),
                ("stype", "core"),
                ("stype-id", "12"),
            ],
        ),
        // Backslashes stand for themselves where the decoder reads them back so.
        sample("two", "", 4.0, 1_700_000_000, &[("hostname", "a\\\\b")]),
        sample(
            "back\\slash",
            "",
            5.0,
            1_700_000_000,
            &[("hostname", "x\\\\,y")],
        ),
        // What line protocol cannot carry: left out and counted, the batch goes on.
        sample("nan", "", f64::NAN, 1_700_000_000, &[]),
        sample(
            "tail",
            "gpu0",
            3.0,
            1_700_000_000,
            &[("hostname", "tail\\")],
        ),
        sample("end\\", "", 3.0, 1_700_000_000, &[]),
        sample("tab\there", "", 3.0, 1_700_000_000, &[]),
        sample("pair", "", 3.0, 1_700_000_000, &[("hostname", "x\\,y")]),
    ];
    let enc = line_protocol(&batch, &CX);
    assert_eq!(enc.samples, 7);
    assert_eq!(enc.unencodable, 5);
    assert_eq!(enc.oldest_ns, 1_700_000_000 * 1_000_000_000);
    let store = Arc::new(Store::new(StoreConfig::default()));
    let out = crate::ingest::ingest(&store, &enc.bytes, None, 1_700_000_000);
    assert!(
        out.errors.is_empty(),
        "{:?}\n{}",
        out.errors,
        String::from_utf8_lossy(&enc.bytes)
    );
    assert_eq!(out.stored, 7);
    let read = |path: &[&str], m: &str| {
        store
            .read(&selector(path), m, 1_700_000_000, 1_700_000_001, 0)
            .unwrap_or_else(|e| panic!("{path:?} {m}: {e}"))
            .data[0]
    };
    for s in &batch[..7] {
        let level = crate::sample::Level::of(s, "local", "node7");
        let (p, d) = level.path();
        let path: Vec<&str> = p[..d].iter().map(|x| &**x).collect();
        assert_eq!(
            read(&path, &s.name).to_bits(),
            s.value.to_bits(),
            "{}",
            s.name
        );
    }
}

#[test]
fn gzip_round_trips() {
    use std::io::Read;
    let body = line_protocol(&[sample("m", "", 1.0, 1, &[])], &CX).bytes;
    let z = gzip(&body);
    let mut back = Vec::new();
    flate2::read::GzDecoder::new(&z[..])
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, body);
}

/// A minimal protobuf reader: (field, wire type, payload or varint) in order.
fn fields(mut b: &[u8]) -> Vec<(u64, u8, Vec<u8>, u64)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for i in 0.. {
            let x = b[0];
            *b = &b[1..];
            v |= u64::from(x & 0x7f) << (7 * i);
            if x < 0x80 {
                break;
            }
        }
        v
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let (field, wire) = (key >> 3, (key & 7) as u8);
        match wire {
            0 => {
                let v = varint(&mut b);
                out.push((field, 0, Vec::new(), v));
            }
            1 => {
                out.push((field, 1, b[..8].to_vec(), 0));
                b = &b[8..];
            }
            2 => {
                let n = varint(&mut b) as usize;
                out.push((field, 2, b[..n].to_vec(), 0));
                b = &b[n..];
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// Remote write: one series per label set, labels sorted with `__name__` and `instance`,
/// samples of a series in time order, timestamps in ms, snappy block format.
#[test]
fn remote_write_request_shape() {
    let batch = vec![
        sample("cpu.util", "cpu0", 2.0, 20, &[("job", "x"), ("empty", "")]),
        sample("cpu.util", "cpu0", 1.0, 10, &[("job", "x"), ("empty", "")]),
        sample("mem", "", 3.0, 10, &[("rack:slot", "3")]),
        sample("inf", "", f64::INFINITY, 10, &[]),
    ];
    let enc = remote_write(&batch);
    assert_eq!((enc.samples, enc.unencodable), (3, 1));
    let raw = snap::raw::Decoder::new()
        .decompress_vec(&enc.bytes)
        .unwrap();
    let series: Vec<_> = fields(&raw);
    assert_eq!(series.len(), 2);
    let mut got = Vec::new();
    for (f, _, ts, _) in &series {
        assert_eq!(*f, 1);
        let mut labels = Vec::new();
        let mut points = Vec::new();
        for (f, _, body, _) in fields(ts) {
            let inner = fields(&body);
            if f == 1 {
                let s = |i: usize| String::from_utf8(inner[i].2.clone()).unwrap();
                labels.push((s(0), s(1)));
            } else {
                let v = f64::from_le_bytes(inner[0].2.clone().try_into().unwrap());
                points.push((v, inner[1].3));
            }
        }
        got.push((labels, points));
    }
    let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        got[0],
        (
            l(&[("__name__", "cpu_util"), ("instance", "cpu0"), ("job", "x")]),
            vec![(1.0, 10_000), (2.0, 20_000)]
        )
    );
    // A colon is valid in a metric name, not in a label name.
    assert_eq!(
        got[1],
        (
            l(&[("__name__", "mem"), ("rack_slot", "3")]),
            vec![(3.0, 10_000)]
        )
    );
}

/// cc-metric-collector's shapes: `stype` (cc-metric-store reads no `subtype`) and the
/// `meta-as-tags` keys, each written once (the level's own tags come from the level).
#[test]
fn meta_as_tags_and_stype_as_cc_metric_store_reads_them() {
    let tags: Vec<String> = ["type", "type-id", "stype", "stype-id", "device", "unit"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cx = Context {
        default_cluster: "c",
        hostname: "n1",
        meta_as_tags: &tags,
    };
    let net = [
        ("type", "node"),
        ("stype", "network"),
        ("stype-id", "eth0"),
        ("unit", "bytes"),
    ];
    let flops = [
        ("type", "socket"),
        ("type-id", "1"),
        ("stype", "core"),
        ("stype-id", "3"),
        ("unit", "F/s"),
    ];
    let batch = vec![
        sample("net_bytes_in", "eth0", 5.0, 100, &net),
        sample("flops", "", 1.5, 100, &flops),
        sample(
            "io_reads",
            "sda",
            2.0,
            100,
            &[("type", "node"), ("device", "sda")],
        ),
    ];
    let text = String::from_utf8(line_protocol(&batch, &cx).bytes).unwrap();
    assert_eq!(
        text,
        "net_bytes_in,cluster=c,hostname=n1,type=node,stype=network,stype-id=eth0,unit=bytes value=5.0 100\n\
         flops,cluster=c,hostname=n1,type=socket,type-id=1,stype=core,stype-id=3,unit=F/s value=1.5 100\n\
         io_reads,cluster=c,hostname=n1,type=node,device=sda value=2.0 100\n"
    );
}
