use super::*;
use crate::ingest::pb::enc;
use crate::sample::{Kind, Sample};

const LIMITS: Limits = Limits {
    max_samples: 1000,
    max_body: 1 << 20,
};

fn meta(s: &Sample) -> Vec<(String, String)> {
    s.metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn find<'s>(d: &'s OtlpDecoded, name: &str, le: Option<&str>) -> &'s Sample {
    d.samples
        .iter()
        .find(|s| &*s.name == name && s.metadata.get("le") == le)
        .unwrap_or_else(|| panic!("no {name} le={le:?} in {:#?}", d.samples))
}

/// The shape of opentelemetry-proto's `examples/metrics.json` (v1.11.0): a delta counter, a
/// gauge, a histogram and an exponential histogram under one resource and scope.
const EXAMPLE: &str = r#"{"resourceMetrics":[{"resource":{"attributes":[
  {"key":"service.name","value":{"stringValue":"my.service"}},
  {"key":"host.name","value":{"stringValue":"n7"}}]},
 "scopeMetrics":[{"scope":{"name":"my.library","version":"1.0.0"},"metrics":[
  {"name":"my.counter","unit":"1","description":"I am a Counter","sum":{"aggregationTemporality":1,"isMonotonic":true,
    "dataPoints":[{"asDouble":5,"startTimeUnixNano":"1544712660300000000","timeUnixNano":"1544712660300000000",
      "attributes":[{"key":"my.counter.attr","value":{"stringValue":"some value"}}]}]}},
  {"name":"my.gauge","unit":"1","gauge":{"dataPoints":[{"asInt":"10","timeUnixNano":"1544712660300000000",
      "attributes":[{"key":"service.name","value":{"stringValue":"override"}},{"key":"n","value":{"intValue":"-3"}}]}]}},
  {"name":"my.histogram","unit":"ms","histogram":{"aggregationTemporality":1,"dataPoints":[
      {"startTimeUnixNano":"1544712660300000000","timeUnixNano":"1544712660300000000","count":"2","sum":2,
       "bucketCounts":["1","1"],"explicitBounds":[1],"min":0,"max":2}]}},
  {"name":"my.exponential.histogram","unit":"1","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[
      {"startTimeUnixNano":"1544712660300000000","timeUnixNano":"1544712660300000000","count":"3","sum":10,
       "scale":0,"zeroCount":"1","positive":{"offset":1,"bucketCounts":["0","2"]},"min":0,"max":5,"zeroThreshold":0}]}}
 ]}]}]}"#;

const T: i64 = 1_544_712_660_300_000_000;

#[test]
fn the_spec_example_in_json() {
    let d = decode_json(EXAMPLE.as_bytes(), LIMITS).unwrap();
    assert_eq!((d.rejected, d.no_value), (0, 0));
    let c = find(&d, "my.counter", None);
    assert_eq!(
        (c.value, c.kind, c.timestamp_ns, &*c.unit),
        (5.0, Kind::Delta, T, "1")
    );
    assert_eq!(
        meta(c),
        [
            ("service.name", "my.service"),
            ("hostname", "n7"),
            ("my.counter.attr", "some value")
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    let g = find(&d, "my.gauge", None);
    assert_eq!((g.value, g.kind), (10.0, Kind::Gauge));
    // The point's attribute wins over the resource's.
    assert_eq!(g.metadata.get("service.name"), Some("override"));
    assert_eq!(g.metadata.get("n"), Some("-3"));
    // Histogram: count, sum, buckets cumulative with le, +Inf = count; kind by temporality.
    assert_eq!(find(&d, "my.histogram_count", None).value, 2.0);
    assert_eq!(find(&d, "my.histogram_sum", None).value, 2.0);
    let b1 = find(&d, "my.histogram_bucket", Some("1"));
    assert_eq!((b1.value, b1.kind, &*b1.unit), (1.0, Kind::Delta, "ms"));
    assert_eq!(find(&d, "my.histogram_bucket", Some("+Inf")).value, 2.0);
    // Exponential, scale 0: zero bucket (le 0) 1; bucket index 1 is (2,4]: 0; index 2 is
    // (4,8]: 2; cumulative 1, 1, 3, then +Inf 3.
    let e = |le| find(&d, "my.exponential.histogram_bucket", Some(le)).value;
    assert_eq!([e("0"), e("4"), e("8"), e("+Inf")], [1.0, 1.0, 3.0, 3.0]);
    assert_eq!(
        find(&d, "my.exponential.histogram_count", None).kind,
        Kind::Cumulative
    );
}

fn kv(out: &mut Vec<u8>, field: u32, k: &str, v: &str) {
    let mut any = Vec::new();
    enc::bytes(&mut any, 1, v.as_bytes());
    let mut kv = Vec::new();
    enc::bytes(&mut kv, 1, k.as_bytes());
    enc::bytes(&mut kv, 2, &any);
    enc::bytes(out, field, &kv);
}

/// A request of one resource (`host.name` = h1) with the given metrics.
fn request(metrics: &[Vec<u8>]) -> Vec<u8> {
    let mut res = Vec::new();
    kv(&mut res, 1, "host.name", "h1");
    let mut sm = Vec::new();
    for m in metrics {
        enc::bytes(&mut sm, 2, m);
    }
    let mut rm = Vec::new();
    // Scopes before the resource: the decoder must not care.
    enc::bytes(&mut rm, 2, &sm);
    enc::bytes(&mut rm, 1, &res);
    let mut req = Vec::new();
    enc::bytes(&mut req, 1, &rm);
    req
}

fn metric(name: &str, unit: &str, field: u32, data: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    enc::bytes(&mut m, 1, name.as_bytes());
    enc::bytes(&mut m, 3, unit.as_bytes());
    enc::bytes(&mut m, field, data);
    m
}

fn sum(points: &[Vec<u8>], temporality: u64, monotonic: bool) -> Vec<u8> {
    let mut s = Vec::new();
    for p in points {
        enc::bytes(&mut s, 1, p);
    }
    enc::uint(&mut s, 2, temporality);
    enc::uint(&mut s, 3, monotonic as u64);
    s
}

fn number(value: Option<f64>, flags: u64, attr: (&str, &str)) -> Vec<u8> {
    let mut p = Vec::new();
    kv(&mut p, 7, attr.0, attr.1);
    enc::fixed(&mut p, 3, T as u64);
    if let Some(v) = value {
        enc::double(&mut p, 4, v);
    }
    enc::uint(&mut p, 8, flags);
    p
}

#[test]
fn sums_by_temporality_and_monotonicity_in_protobuf() {
    let req = request(&[
        metric(
            "c",
            "By",
            7,
            &sum(&[number(Some(1.0), 0, ("a", "x"))], CUMULATIVE, true),
        ),
        metric(
            "d",
            "By",
            7,
            &sum(&[number(Some(2.0), 0, ("a", "y"))], DELTA, true),
        ),
        metric(
            "u",
            "{item}",
            7,
            &sum(&[number(Some(-3.0), 0, ("a", "z"))], CUMULATIVE, false),
        ),
        // No recorded value: dropped; no value at all: rejected; unspecified: rejected.
        metric(
            "n",
            "",
            7,
            &sum(&[number(Some(9.0), 1, ("a", "q"))], DELTA, true),
        ),
        metric(
            "r",
            "",
            7,
            &sum(&[number(None, 0, ("a", "q"))], DELTA, true),
        ),
        metric(
            "t",
            "",
            7,
            &sum(&[number(Some(1.0), 0, ("a", "q"))], 0, true),
        ),
    ]);
    let d = decode_protobuf(&req, LIMITS).unwrap();
    let kinds: Vec<_> = d
        .samples
        .iter()
        .map(|s| (s.name.to_string(), s.kind, s.value, s.unit.to_string()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("c".into(), Kind::Cumulative, 1.0, "By".into()),
            ("d".into(), Kind::Delta, 2.0, "By".into()),
            ("u".into(), Kind::Gauge, -3.0, "{item}".into()),
        ]
    );
    assert_eq!(
        meta(&d.samples[0]),
        [("hostname".into(), "h1".into()), ("a".into(), "x".into())]
    );
    assert_eq!((d.no_value, d.rejected), (1, 2));
    assert_eq!(
        d.error_message,
        "metric \"r\": a number data point without a value; metric \"t\": aggregation temporality unspecified"
    );
    // The partial-success answer, both encodings.
    let pb = response_protobuf(d.rejected, &d.error_message);
    let mut r = Reader::new(&pb);
    let (f, v) = r.next_field().unwrap().unwrap();
    assert_eq!(f, 1);
    let mut ps = Reader::new(v.bytes("p").unwrap());
    assert_eq!(ps.next_field().unwrap(), Some((1, Wire::Varint(2))));
    let j = response_json(d.rejected, &d.error_message);
    assert_eq!(j["partialSuccess"]["rejectedDataPoints"], "2");
    assert!(response_protobuf(0, "").is_empty());
}

#[test]
fn the_resource_attribute_of_wasmon_s_exporter_becomes_the_sample_s_resource() {
    let req = request(&[metric(
        "g",
        "",
        5,
        &sum(
            &[number(Some(4.0), 0, (RESOURCE_ATTRIBUTE, "eth0"))],
            0,
            false,
        ),
    )]);
    let d = decode_protobuf(&req, LIMITS).unwrap();
    assert_eq!(&*d.samples[0].resource, "eth0");
    assert_eq!(meta(&d.samples[0]), [("hostname".into(), "h1".into())]);
}

#[test]
fn histograms_and_summaries_in_protobuf() {
    let mut p = Vec::new();
    enc::fixed(&mut p, 3, T as u64);
    enc::fixed(&mut p, 4, 6);
    enc::double(&mut p, 5, 12.5);
    let mut counts = Vec::new();
    for c in [1u64, 2, 3] {
        counts.extend_from_slice(&c.to_le_bytes());
    }
    enc::bytes(&mut p, 6, &counts);
    let mut bounds = Vec::new();
    for b in [0.5f64, 2.0] {
        bounds.extend_from_slice(&b.to_bits().to_le_bytes());
    }
    enc::bytes(&mut p, 7, &bounds);
    let mut h = Vec::new();
    enc::bytes(&mut h, 1, &p);
    enc::uint(&mut h, 2, CUMULATIVE);
    let mut q = Vec::new();
    enc::fixed(&mut q, 3, T as u64);
    enc::fixed(&mut q, 4, 10);
    enc::double(&mut q, 5, 99.0);
    let mut qv = Vec::new();
    enc::double(&mut qv, 1, 0.99);
    enc::double(&mut qv, 2, 7.0);
    enc::bytes(&mut q, 6, &qv);
    let mut s = Vec::new();
    enc::bytes(&mut s, 1, &q);
    let req = request(&[metric("lat", "s", 9, &h), metric("rt", "s", 11, &s)]);
    let d = decode_protobuf(&req, LIMITS).unwrap();
    let b = |le| find(&d, "lat_bucket", Some(le)).value;
    assert_eq!([b("0.5"), b("2"), b("+Inf")], [1.0, 3.0, 6.0]);
    assert_eq!(find(&d, "lat_sum", None).value, 12.5);
    assert_eq!(find(&d, "lat_count", None).kind, Kind::Cumulative);
    let q = d.samples.iter().find(|s| &*s.name == "rt").unwrap();
    assert_eq!(
        (q.value, q.metadata.get("quantile"), q.kind),
        (7.0, Some("0.99"), Kind::Gauge)
    );
    assert_eq!(find(&d, "rt_count", None).value, 10.0);
}

#[test]
fn malformed_bodies_are_refused_whole() {
    // Invalid UTF-8 in an attribute value, named by its path.
    let mut any = Vec::new();
    enc::bytes(&mut any, 1, &[0xc3]);
    let mut kvb = Vec::new();
    enc::bytes(&mut kvb, 1, b"k");
    enc::bytes(&mut kvb, 2, &any);
    let mut p = number(Some(1.0), 0, ("a", "b"));
    enc::bytes(&mut p, 7, &kvb);
    let req = request(&[metric("g", "", 5, &{
        let mut g = Vec::new();
        enc::bytes(&mut g, 1, &p);
        g
    })]);
    let e = decode_protobuf(&req, LIMITS).unwrap_err();
    assert_eq!(
        e.to_string(),
        "resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points[0].attributes[1].value.string_value: invalid UTF-8 at byte 0 of the string"
    );
    // A length past the body.
    let e = decode_protobuf(&[0x0a, 0xff, 0xff, 0xff, 0x03], LIMITS).unwrap_err();
    assert!(
        e.to_string().contains("declares 8388607 bytes, 0 are left"),
        "{e}"
    );
    // JSON of the wrong shape, and a number that is no integer.
    let e = decode_json(br#"{"resourceMetrics":{}}"#, LIMITS).unwrap_err();
    assert_eq!(
        e.to_string(),
        "resourceMetrics: expected an array, got an object"
    );
    let body = EXAMPLE.replace(r#""count":"2""#, r#""count":"two""#);
    let e = decode_json(body.as_bytes(), LIMITS).unwrap_err();
    assert_eq!(
        e.to_string(),
        "resourceMetrics[0].scopeMetrics[0].metrics[2].histogram.dataPoints[0].count: \"two\" is not an unsigned 64-bit integer"
    );
    // Past the request's bound: 413, whatever was decoded before.
    let small = Limits {
        max_samples: 5,
        ..LIMITS
    };
    assert!(matches!(
        decode_json(EXAMPLE.as_bytes(), small),
        Err(ReceiveError::TooLarge(_))
    ));
}

/// What a receiver remembers changes nothing it answers: a body decoded again (resources,
/// heads and attribute sets then remembered) gives the samples, rejections and strings a
/// fresh decode gives; a resource or attribute that changed by one byte is read anew.
#[test]
fn bodies_sent_again_decode_from_memory_to_the_same_answer() {
    let plain = |v: f64| {
        let mut p = Vec::new();
        enc::fixed(&mut p, 3, T as u64);
        enc::double(&mut p, 4, v);
        p
    };
    let metrics = |host: &str| {
        let mut req = request(&[
            metric("g", "By", 5, &sum(&[plain(1.0), plain(2.0)], 0, false)),
            metric(
                "c",
                "",
                7,
                &sum(
                    &[
                        number(Some(3.0), 0, ("a", "x")),
                        number(Some(4.0), 0, (RESOURCE_ATTRIBUTE, "eth0")),
                        number(Some(5.0), 1, ("a", "x")),
                    ],
                    CUMULATIVE,
                    true,
                ),
            ),
            metric(
                "t",
                "",
                7,
                &sum(&[number(Some(1.0), 0, ("a", "q"))], 0, true),
            ),
        ]);
        // A second resource, its host given.
        let mut res = Vec::new();
        kv(&mut res, 1, "host.name", host);
        let mut sm = Vec::new();
        let points = [plain(6.0), number(Some(7.0), 0, ("a", "x"))];
        enc::bytes(&mut sm, 2, &metric("g", "By", 5, &sum(&points, 0, false)));
        let mut rm = Vec::new();
        enc::bytes(&mut rm, 1, &res);
        enc::bytes(&mut rm, 2, &sm);
        enc::bytes(&mut req, 1, &rm);
        req
    };
    let answer = |d: &OtlpDecoded| {
        let s: Vec<_> = d
            .samples
            .iter()
            .map(|s| {
                (
                    s.name.to_string(),
                    s.resource.to_string(),
                    s.kind,
                    s.value,
                    meta(s),
                )
            })
            .collect();
        (s, d.rejected, d.no_value, d.error_message.clone())
    };
    let memory = Memory::default();
    let body = metrics("h2");
    let fresh = answer(&decode_protobuf(&body, LIMITS).unwrap());
    let first = decode_protobuf_with(&body, LIMITS, &memory).unwrap();
    let again = decode_protobuf_with(&body, LIMITS, &memory).unwrap();
    assert_eq!(answer(&first), fresh);
    assert_eq!(answer(&again), fresh);
    assert_eq!(fresh.0.len(), 6, "{fresh:?}");
    // The same attribute bytes under another resource carry that resource's host.
    assert_eq!(fresh.0[5].4[0], ("hostname".to_string(), "h2".to_string()));
    assert_eq!((fresh.1, fresh.2), (1, 1));
    assert_eq!(fresh.0[3].1, "eth0");
    // Remembered sets are shared across requests (the store sink resolves a level once).
    assert!(again.samples[0].metadata.same(&first.samples[0].metadata));
    let other = answer(&decode_protobuf_with(&metrics("h3"), LIMITS, &memory).unwrap());
    assert_eq!(
        other,
        answer(&decode_protobuf(&metrics("h3"), LIMITS).unwrap())
    );
    assert_eq!(other.0[4].4, [("hostname".to_string(), "h3".to_string())]);
}
