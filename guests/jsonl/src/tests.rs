use super::*;
use serde_json::{Value, json};
use wasmon_guest::Kind;

fn ts(ns: i64) -> String {
    let mut out = Vec::new();
    rfc3339(&mut out, ns);
    String::from_utf8(out).unwrap()
}

fn lines(body: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(body).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn timestamps_keep_nanoseconds_across_the_whole_range() {
    assert_eq!(ts(0), "1970-01-01T00:00:00.000000000Z");
    assert_eq!(
        ts(1_704_067_200_000_000_001),
        "2024-01-01T00:00:00.000000001Z"
    );
    assert_eq!(ts(-1), "1969-12-31T23:59:59.999999999Z");
    assert_eq!(
        ts(951_782_400_000_000_000),
        "2000-02-29T00:00:00.000000000Z"
    );
    assert_eq!(
        ts(4_107_542_399_000_000_000),
        "2100-02-28T23:59:59.000000000Z"
    );
    assert_eq!(ts(i64::MIN), "1677-09-21T00:12:43.145224192Z");
    assert_eq!(ts(i64::MAX), "2262-04-11T23:47:16.854775807Z");
}

/// Days since the epoch of a date (Hinnant's `days_from_civil`), to check the inverse.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[test]
fn every_day_from_1677_to_2262_converts_and_back() {
    let mut prev = (1677, 9, 20);
    for day in -106_752..=106_751 {
        let (y, m, d) = civil_from_days(day);
        assert_eq!(days_from_civil(y, m, d), day);
        assert!((y, m, d) > prev, "{day}: {:?} after {prev:?}", (y, m, d));
        assert!((1..=12).contains(&m) && (1..=31).contains(&d));
        prev = (y, m, d);
    }
}

#[test]
fn a_line_is_wasmons_sample_json_with_strings_escaped() {
    let s = Sample::new(
        "cpu \"user\"",
        "h1\n",
        Kind::Cumulative,
        1.5,
        1_704_067_200_000_000_001,
    )
    .with_unit("ns")
    .with_metadata(&[("hostname", "n1"), ("é/\\", "\u{1}")]);
    let mut out = Vec::new();
    write_line(&mut out, &s);
    assert_eq!(
        lines(&out),
        [json!({
            "name": "cpu \"user\"", "resource": "h1\n", "value": 1.5, "unit": "ns",
            "type": "cumulative", "timestamp": "2024-01-01T00:00:00.000000001Z",
            "metadata": {"hostname": "n1", "é/\\": "\u{1}"},
        })]
    );
    // Values print as the shortest text that reads back to the same f64.
    for v in [0.1 + 0.2, -0.0, 1e300, 5e-324, 42.0] {
        let mut out = Vec::new();
        write_line(&mut out, &Sample::new("m", "", Kind::Delta, v, 0));
        assert_eq!(
            lines(&out)[0]["value"].as_f64().unwrap().to_bits(),
            v.to_bits()
        );
    }
}

#[test]
fn max_lines_splits_a_batch_into_requests_in_order() {
    let samples: Vec<Sample> = (0..5)
        .map(|i| Sample::new("m", "", Kind::Gauge, i as f64, i))
        .collect();
    let cfg = Config {
        suffix: "/in".into(),
        max_lines: Some(2),
        ..Config::default()
    };
    let mut out = Vec::new();
    assert_eq!(encode(samples.clone().into_iter(), &cfg, &mut out), 0);
    let values: Vec<Vec<f64>> = out
        .iter()
        .map(|r| {
            lines(&r.body)
                .iter()
                .map(|l| l["value"].as_f64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(values, [vec![0.0, 1.0], vec![2.0, 3.0], vec![4.0]]);
    assert!(
        out.iter()
            .all(|r| r.suffix == "/in" && r.content_type == CONTENT_TYPE)
    );
    // Default: the whole batch in one request; nothing at all for an empty one.
    let mut out = Vec::new();
    encode(samples.into_iter(), &Config::default(), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(lines(&out[0].body).len(), 5);
    let mut out = Vec::new();
    encode(std::iter::empty(), &Config::default(), &mut out);
    assert!(out.is_empty());
}

#[test]
fn non_finite_values_are_spelled_out_or_skipped() {
    let samples = || {
        [1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
            .map(|v| Sample::new("m", "", Kind::Gauge, v, 0))
            .into_iter()
    };
    let mut out = Vec::new();
    assert_eq!(encode(samples(), &Config::default(), &mut out), 0);
    let values: Vec<Value> = lines(&out[0].body)
        .iter()
        .map(|l| l["value"].clone())
        .collect();
    assert_eq!(
        values,
        [json!(1.0), json!("NaN"), json!("inf"), json!("-inf")]
    );
    let skip = Config {
        non_finite: NonFinite::Skip,
        ..Config::default()
    };
    let mut out = Vec::new();
    assert_eq!(encode(samples(), &skip, &mut out), 3);
    assert_eq!(lines(&out[0].body).len(), 1);
}

#[test]
fn params_are_checked_by_name() {
    let p = |j: &str| Config::from_params(&wasmon_guest::parse_params(j).unwrap());
    assert_eq!(
        p(r#"{"suffix": "/x", "max-lines": 100, "non-finite": "skip"}"#).unwrap(),
        Config {
            suffix: "/x".into(),
            max_lines: Some(100),
            non_finite: NonFinite::Skip,
        }
    );
    for (params, field) in [
        (r#"{"max_lines": 1}"#, "`max_lines`"),
        (r#"{"max-lines": 0}"#, "`max-lines`"),
        (r#"{"max-lines": "10"}"#, "`max-lines`"),
        (r#"{"non-finite": "null"}"#, "`non-finite`"),
        (r#"{"suffix": []}"#, "`suffix`"),
    ] {
        let e = p(params).unwrap_err().to_string();
        assert!(e.contains(field), "{params}: {e}");
    }
}
