//! The encoding read back by a minimal protobuf reader written here, and one request checked
//! byte for byte against a hand-computed encoding.

use super::*;
use wasmon_guest::{Kind, Sample};

/// A field's value as the wire has it.
#[derive(Clone, Debug, PartialEq)]
enum V {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
}

/// Every field of a message, in order; panics on anything malformed (a test failure).
fn fields(mut b: &[u8]) -> Vec<(u64, V)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let tag = varint(&mut b);
        let v = match tag & 7 {
            0 => V::Varint(varint(&mut b)),
            1 => {
                let v = u64::from_le_bytes(b[..8].try_into().unwrap());
                b = &b[8..];
                V::Fixed64(v)
            }
            2 => {
                let n = varint(&mut b) as usize;
                let v = b[..n].to_vec();
                b = &b[n..];
                V::Bytes(v)
            }
            w => panic!("wire type {w}"),
        };
        out.push((tag >> 3, v));
    }
    out
}

/// The submessages or strings of field `f`.
fn all(b: &[u8], f: u64) -> Vec<Vec<u8>> {
    fields(b)
        .into_iter()
        .filter(|(n, _)| *n == f)
        .map(|(_, v)| match v {
            V::Bytes(b) => b,
            other => panic!("field {f} is {other:?}"),
        })
        .collect()
}

fn one(b: &[u8], f: u64) -> Vec<u8> {
    let v = all(b, f);
    assert_eq!(v.len(), 1, "field {f} in {:?}", fields(b));
    v.into_iter().next().unwrap()
}

fn text(b: &[u8], f: u64) -> String {
    String::from_utf8(one(b, f)).unwrap()
}

fn scalar(b: &[u8], f: u64) -> Option<V> {
    fields(b).into_iter().find(|(n, _)| *n == f).map(|(_, v)| v)
}

/// KeyValue list (string values) of field `f`.
fn attrs(b: &[u8], f: u64) -> Vec<(String, String)> {
    all(b, f)
        .iter()
        .map(|kv| (text(kv, 1), text(&one(kv, 2), 1)))
        .collect()
}

/// A decoded point: (timestamp, value, attributes).
type Point = (u64, f64, Vec<(String, String)>);

/// A decoded metric: (name, unit, data field, temporality, monotonic, points).
type Metric = (String, String, u64, Option<V>, Option<V>, Vec<Point>);

/// Metrics of the request's only resource and scope.
fn metrics(body: &[u8]) -> Vec<Metric> {
    let rm = one(body, 1);
    let sm = one(&rm, 2);
    let scope = one(&sm, 1);
    assert_eq!(text(&scope, 1), "wasmon");
    assert_eq!(text(&scope, 2), env!("CARGO_PKG_VERSION"));
    all(&sm, 2)
        .iter()
        .map(|m| {
            let unit = all(m, 3)
                .first()
                .map(|u| String::from_utf8(u.clone()).unwrap());
            let (field, data) = [5, 7]
                .into_iter()
                .find_map(|f| all(m, f).first().map(|d| (f, d.clone())))
                .expect("gauge or sum");
            let points = all(&data, 1)
                .iter()
                .map(|p| {
                    let (Some(V::Fixed64(t)), Some(V::Fixed64(v))) = (scalar(p, 3), scalar(p, 4))
                    else {
                        panic!("point {:?}", fields(p))
                    };
                    (t, f64::from_bits(v), attrs(p, 7))
                })
                .collect();
            (
                text(m, 1),
                unit.unwrap_or_default(),
                field,
                scalar(&data, 2),
                scalar(&data, 3),
                points,
            )
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn one_gauge_point_byte_for_byte() {
    let s = Sample::new("m", "", Kind::Gauge, 1.0, 1);
    let body = encode_request(&[s], &Config::default());
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    // NumberDataPoint: time_unix_nano (field 3, fixed64) = 1, as_double (4, fixed64) = 1.0.
    let mut point = vec![0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x21];
    point.extend_from_slice(&1.0f64.to_le_bytes());
    let gauge = [&[0x0a, point.len() as u8][..], &point].concat();
    let metric = [&[0x0a, 1, b'm', 0x2a, gauge.len() as u8][..], &gauge].concat();
    let scope = [
        &[0x0a, 6][..],
        b"wasmon",
        &[0x12, version.len() as u8],
        version,
    ]
    .concat();
    let sm = [
        &[0x0a, scope.len() as u8][..],
        &scope,
        &[0x12, metric.len() as u8],
        &metric,
    ]
    .concat();
    let rm = [&[0x12, sm.len() as u8][..], &sm].concat();
    let request = [&[0x0a, rm.len() as u8][..], &rm].concat();
    assert_eq!(body, request);
}

#[test]
fn metrics_by_name_unit_and_kind_in_first_appearance_order() {
    let t = 1_700_000_000_123_456_789;
    let samples = [
        Sample::new("cpu", "h1", Kind::Cumulative, 5.0, t).with_unit("ns"),
        Sample::new("mem", "h1", Kind::Gauge, 0.5, t).with_metadata(&[("hostname", "n1")]),
        Sample::new("cpu", "h2", Kind::Cumulative, 7.0, t + 1).with_unit("ns"),
        // Same name, another kind and another unit: metrics of their own.
        Sample::new("cpu", "", Kind::Delta, -2.0, t + 2).with_unit("ns"),
        Sample::new("cpu", "h1", Kind::Cumulative, 1.0, t + 3).with_unit("s"),
        Sample::new("mem", "", Kind::Gauge, f64::NAN, t + 4).with_metadata(&[
            ("a", "1"),
            ("a", "2"),
            ("b", ""),
        ]),
    ];
    let cfg = Config {
        resource: pairs(&[("service.name", "wasmon-test")]),
        suffix: String::new(),
    };
    let body = encode_request(&samples, &cfg);
    let rm = one(&body, 1);
    assert_eq!(
        attrs(&one(&rm, 1), 1),
        pairs(&[("service.name", "wasmon-test")])
    );
    let m = metrics(&body);
    let heads: Vec<_> = m
        .iter()
        .map(|(n, u, f, t, mono, p)| (n.as_str(), u.as_str(), *f, t.clone(), mono.clone(), p.len()))
        .collect();
    let (sum, gauge) = (7, 5);
    let cumulative = (Some(V::Varint(2)), Some(V::Varint(1)));
    assert_eq!(
        heads,
        [
            (
                "cpu",
                "ns",
                sum,
                cumulative.0.clone(),
                cumulative.1.clone(),
                2
            ),
            ("mem", "", gauge, None, None, 2),
            // Delta: not monotonic (proto3 leaves a false out).
            ("cpu", "ns", sum, Some(V::Varint(1)), None, 1),
            ("cpu", "s", sum, cumulative.0, cumulative.1, 1),
        ]
    );
    let res = |r: &str| pairs(&[("wasmon.resource", r)]);
    assert_eq!(
        m[0].5,
        [(t as u64, 5.0, res("h1")), (t as u64 + 1, 7.0, res("h2"))]
    );
    assert_eq!(
        m[1].5[0],
        (
            t as u64,
            0.5,
            pairs(&[("host.name", "n1"), ("wasmon.resource", "h1")])
        )
    );
    assert!(m[1].5[1].1.is_nan());
    assert_eq!(m[1].5[1].2, pairs(&[("a", "1"), ("a", "2"), ("b", "")]));
    assert_eq!(m[2].5, [(t as u64 + 2, -2.0, vec![])]);
}

#[test]
fn long_strings_take_multi_byte_lengths() {
    // Lengths past 127 and 16383 bytes: two- and three-byte varints at every level.
    let long = "x".repeat(20_000);
    let samples: Vec<Sample> = (0..3)
        .map(|i| {
            Sample::new("m", &long[..200 * (i + 1)], Kind::Gauge, i as f64, 1)
                .with_metadata(&[("k", &long)])
        })
        .collect();
    let body = encode_request(&samples, &Config::default());
    let m = metrics(&body);
    assert_eq!(m.len(), 1);
    for (i, p) in m[0].5.iter().enumerate() {
        assert_eq!(p.2[0].1.len(), 20_000);
        assert_eq!(p.2[1].1.len(), 200 * (i + 1));
    }
}

#[test]
fn params_are_checked_by_name() {
    let p = |j: &str| wasmon_guest::parse_params(j).unwrap();
    let cfg = Config::from_params(&p(
        r#"{"resource": {"service.name": "a", "host.name": "b"}, "suffix": "/v1/metrics"}"#,
    ))
    .unwrap();
    // In key order (JSON objects have none of their own).
    assert_eq!(
        cfg.resource,
        pairs(&[("host.name", "b"), ("service.name", "a")])
    );
    assert_eq!(cfg.suffix, "/v1/metrics");
    assert_eq!(Config::from_params(&p("null")).unwrap(), Config::default());
    let e = Config::from_params(&p(r#"{"resources": {}}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`resources`"), "{e}");
    let e = Config::from_params(&p(r#"{"resource": {"a": 1}}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`resource.a`"), "{e}");
    let e = Config::from_params(&p(r#"{"suffix": 1}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`suffix`"), "{e}");
}

#[test]
fn the_exporter_sends_one_request_per_batch_and_none_for_an_empty_one() {
    let p = wasmon_guest::parse_params(r#"{"suffix": "/v1/metrics"}"#).unwrap();
    let mut ex = Otlp::configure(&p).unwrap();
    let mut out = Vec::new();
    ex.encode(Vec::<Sample>::new().into_iter(), &mut out)
        .unwrap();
    assert!(out.is_empty());
    let samples = vec![Sample::new("m", "r", Kind::Gauge, 1.0, 1)];
    ex.encode(samples.clone().into_iter(), &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].suffix, "/v1/metrics");
    assert_eq!(out[0].content_type, "application/x-protobuf");
    assert_eq!(out[0].body, encode_request(&samples, &ex.cfg));
}

#[test]
fn samples_sharing_strings_and_metadata_read_back_alike() {
    // Clones share every allocation (as the SDK's decoded samples do): the address lookups
    // must find the same metric and attribute bytes as fresh strings of the same text.
    let a = Sample::new("m", "h1", Kind::Gauge, 1.0, 1).with_metadata(&[("hostname", "n1")]);
    let mut b = a.clone();
    b.value = 2.0;
    let c = Sample::new("m", "h1", Kind::Gauge, 3.0, 3).with_metadata(&[("hostname", "n1")]);
    let m = metrics(&encode_request(&[a, b, c], &Config::default()));
    assert_eq!(m.len(), 1);
    let attrs = pairs(&[("host.name", "n1"), ("wasmon.resource", "h1")]);
    assert_eq!(
        m[0].5,
        [
            (1, 1.0, attrs.clone()),
            (1, 2.0, attrs.clone()),
            (3, 3.0, attrs)
        ]
    );
}

#[test]
fn samples_consumed_one_by_one_encode_as_borrowed_ones() {
    // Owned samples of fresh strings, dropped as they are consumed: an address freed by one
    // must not be taken for another's by the lookups.
    let samples: Vec<Sample> = (0..300)
        .map(|i| {
            Sample::new(
                &format!("m{}", i % 7),
                &format!("r{}", i % 5),
                Kind::Gauge,
                i as f64,
                i,
            )
            .with_metadata(&[("k", &format!("{}", i % 3))])
        })
        .collect();
    let borrowed = encode_request(&samples, &Config::default());
    assert_eq!(encode_request(samples, &Config::default()), borrowed);
    assert_eq!(metrics(&borrowed).len(), 7);
}
