//! Tests of the line-protocol parser: the spec's escaping, typed errors, and a million random
//! and mutated lines without a panic.

use super::*;
use crate::util::eq_bytes;

fn one(s: &str) -> Line<'_> {
    parse_line(s, 1).unwrap()
}

fn err(s: &str) -> ParseError {
    match parse_line(s, 1) {
        Ok(l) => panic!("{s:?} parsed: {l:?}"),
        Err(e) => e,
    }
}

#[test]
fn full_line() {
    let l = one("cpu_load,cluster=alex,hostname=a903,type=hwthread,type-id=1 value=1.5 1700000000");
    assert_eq!(l.measurement, "cpu_load");
    let tags: Vec<(String, String)> = l
        .tags()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(tags[0], ("cluster".into(), "alex".into()));
    assert_eq!(tags[3], ("type-id".into(), "1".into()));
    assert_eq!(tags.len(), 4);
    assert_eq!(l.field("value"), Some(FieldValue::Float(1.5)));
    assert_eq!(l.timestamp, Some(1_700_000_000));
}

#[test]
fn many_tags_fall_back_to_rescanning() {
    let tags: String = (0..12).map(|i| format!(",k{i}=v\\ {i}")).collect();
    let line = format!("m{tags} v=1");
    let l = one(&line);
    let got: Vec<String> = l.tags().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(got.len(), 12);
    assert_eq!(got[11], "k11=v 11");
    // Within the recorded spans the same answers come back.
    let l = one("m,a=1,b\\,=2 v=1");
    let got: Vec<String> = l.tags().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(got, vec!["a=1", "b,=2"]);
}

#[test]
fn value_kinds() {
    let l = one(r#"m a=1,b=-3i,c=7u,d=t,e=FALSE,f="hi \"you\"",g=-1.5e3,h=2 -5"#);
    let v: Vec<FieldValue> = l.fields().map(|(_, v)| v).collect();
    assert_eq!(v[0], FieldValue::Float(1.0));
    assert_eq!(v[1], FieldValue::Int(-3));
    assert_eq!(v[2], FieldValue::UInt(7));
    assert_eq!(v[3], FieldValue::Bool(true));
    assert_eq!(v[4], FieldValue::Bool(false));
    match v[5] {
        FieldValue::Str(t) => assert_eq!(t.as_str(), r#"hi "you""#),
        other => panic!("{other:?}"),
    }
    assert_eq!(v[6], FieldValue::Float(-1500.0));
    assert_eq!(v[7], FieldValue::Float(2.0));
    assert_eq!(v.len(), 8);
    assert_eq!(l.timestamp, Some(-5));
    assert_eq!(v[2].as_f64(), Some(7.0));
    assert_eq!(v[3].as_f64(), None);
}

#[test]
fn escaping_per_spec() {
    // Measurement: comma and space escaped; '=' literal.
    let l = one(r"my\ meas\,ure=x,t\ k\=y=v\,1\ 2 f\=k=1");
    assert_eq!(l.measurement.as_str(), "my meas,ure=x");
    let (k, v) = l.tags().next().unwrap();
    assert_eq!(
        (k.as_str().as_ref(), v.as_str().as_ref()),
        ("t k=y", "v,1 2")
    );
    assert_eq!(l.fields().next().unwrap().0.as_str(), "f=k");
    // Backslash before another character is literal, a double backslash too (in names
    // only `\,`, `\=` and `\ ` are escapes, as in influxdata/line-protocol v2).
    let l = one(r"m,p=C:\dir\\x v=1");
    assert_eq!(l.tags().next().unwrap().1.as_str(), r"C:\dir\\x");
    // Strings may contain commas, spaces and '='.
    let l = one(r#"m s="a, b=c d" 10"#);
    assert_eq!(l.timestamp, Some(10));
    // Unicode passes through.
    assert_eq!(
        one("temp\\ °C,ort=Zürich v=1").measurement.as_str(),
        "temp °C"
    );
}

#[test]
fn typed_errors_with_columns() {
    let cases: &[(&str, ErrorKind, usize)] = &[
        (",t=1 v=1", ErrorKind::MissingMeasurement, 1),
        ("m,=1 v=1", ErrorKind::MissingTagKey, 3),
        ("m,t v=1", ErrorKind::MissingTagValue, 4),
        ("m,t= v=1", ErrorKind::MissingTagValue, 5),
        ("m,t=a=b v=1", ErrorKind::UnescapedEquals, 6),
        ("m", ErrorKind::MissingFields, 2),
        ("m ", ErrorKind::MissingFields, 3),
        ("m,t=1", ErrorKind::MissingFields, 6),
        ("m =1", ErrorKind::MissingFieldKey, 3),
        ("m v", ErrorKind::MissingFieldValue, 4),
        ("m v=", ErrorKind::MissingFieldValue, 5),
        ("m v=1,", ErrorKind::MissingFieldKey, 7),
        ("m v=1.2.3", ErrorKind::InvalidFloat, 5),
        ("m v=nan", ErrorKind::InvalidFieldValue, 5),
        ("m v=1x", ErrorKind::InvalidFloat, 5),
        ("m v=1.5i", ErrorKind::InvalidInteger, 5),
        ("m v=99999999999999999999i", ErrorKind::IntegerOverflow, 5),
        ("m v=-1u", ErrorKind::InvalidUnsigned, 5),
        ("m v=\"abc", ErrorKind::UnterminatedString, 5),
        ("m v=\"abc\"x", ErrorKind::UnexpectedCharacter, 10),
        ("m v=1 12a", ErrorKind::InvalidTimestamp, 7),
        ("m v=1 1 2", ErrorKind::UnexpectedCharacter, 9),
        ("m v=1 99999999999999999999", ErrorKind::InvalidTimestamp, 7),
        ("m\\", ErrorKind::MissingFields, 3),
    ];
    for (line, kind, col) in cases {
        let e = err(line);
        assert_eq!((e.kind, e.column), (*kind, *col), "{line:?}");
    }
}

#[test]
fn lines_iterator_continues_after_errors() {
    let body = b"# comment\n\nm v=1 1\r\nbad\n  m,t=x v=2i\n\xff v=1\nm v=3";
    let r: Vec<_> = parse_lines(body).collect();
    assert_eq!(r.len(), 5);
    assert_eq!(r[0].as_ref().unwrap().line, 3);
    assert_eq!(r[0].as_ref().unwrap().timestamp, Some(1));
    let e = r[1].as_ref().unwrap_err();
    assert_eq!((e.line, e.kind), (4, ErrorKind::MissingFields));
    assert_eq!(r[2].as_ref().unwrap().field("v"), Some(FieldValue::Int(2)));
    let e = r[3].as_ref().unwrap_err();
    assert_eq!((e.line, e.column, e.kind), (6, 1, ErrorKind::InvalidUtf8));
    assert_eq!(r[4].as_ref().unwrap().timestamp, None);
    assert_eq!(e.to_string(), "line 6, column 1: invalid UTF-8");
}

use crate::util::TestRng as Rng;

const ALPHABET: &[u8] = b"abcXYZ019_-.,= \\\"#itu\te+\xc3\xa9\xff\n\r";

fn random_line(r: &mut Rng, out: &mut Vec<u8>) -> (f64, i64) {
    let names = ["cpu", "mem used", "a,b", "x=y", "flops_any", "q\"z"];
    let esc = |s: &str, out: &mut Vec<u8>, set: &[u8]| {
        for c in s.bytes() {
            if set.contains(&c) {
                out.push(b'\\');
            }
            out.push(c);
        }
    };
    esc(names[r.below(names.len())], out, b", ");
    for _ in 0..r.below(4) {
        out.push(b',');
        esc(names[r.below(names.len())], out, b",= ");
        out.push(b'=');
        esc(names[r.below(names.len())], out, b",= ");
    }
    out.push(b' ');
    let value = (r.next() % 100_000) as f64 / 8.0 - 5000.0;
    out.extend_from_slice(format!("value={value}").as_bytes());
    if r.below(2) == 0 {
        out.extend_from_slice(b",s=\"he said \\\"hi\\\", ok\",n=42i,u=7u,b=true");
    }
    let ts = (r.next() % 2_000_000_000) as i64;
    out.extend_from_slice(format!(" {ts}").as_bytes());
    (value, ts)
}

/// Replaces, removes or inserts a random byte of `line`, `times` times.
fn mutate(r: &mut Rng, line: &mut Vec<u8>, times: usize) {
    for _ in 0..times {
        let pos = r.below(line.len() + 1);
        let c = ALPHABET[r.below(ALPHABET.len())];
        match r.below(3) {
            0 if pos < line.len() => line[pos] = c,
            1 if pos < line.len() => {
                line.remove(pos);
            }
            _ => line.insert(pos, c),
        }
    }
}

#[test]
fn million_random_and_mutated_lines() {
    let mut r = Rng(0x1234_5678_9abc_def1);
    let (mut ok, mut rejected) = (0usize, 0usize);
    let mut line = Vec::new();
    for i in 0..1_000_000 {
        line.clear();
        let (value, ts) = random_line(&mut r, &mut line);
        let mutated = i % 4 != 0;
        if mutated {
            let times = 1 + r.below(3);
            mutate(&mut r, &mut line, times);
        }
        let mut n_lines = 0;
        for res in parse_lines(&line) {
            n_lines += 1;
            match res {
                Ok(l) => {
                    ok += 1;
                    // Every accessor works on whatever was accepted.
                    let _ = l.measurement.as_str();
                    for (k, v) in l.tags() {
                        assert!(!k.raw().is_empty() && !v.raw().is_empty());
                    }
                    assert!(l.fields().count() >= 1);
                    if !mutated {
                        assert_eq!(l.field("value"), Some(FieldValue::Float(value)));
                        assert_eq!(l.timestamp, Some(ts));
                    }
                }
                Err(e) => {
                    rejected += 1;
                    assert!(
                        mutated,
                        "valid line rejected: {e} in {:?}",
                        String::from_utf8_lossy(&line)
                    );
                    assert!(e.column >= 1 && e.column <= line.len() + 1, "{e}");
                    assert!(e.line >= 1);
                }
            }
        }
        if !mutated {
            assert_eq!(n_lines, 1);
        }
    }
    assert!(
        ok > 250_000 && rejected > 100_000,
        "ok {ok}, rejected {rejected}"
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut r = Rng(42);
    let mut buf = Vec::new();
    let mut errors = 0;
    for _ in 0..200_000 {
        buf.clear();
        for _ in 0..r.below(40) {
            buf.push(ALPHABET[r.below(ALPHABET.len())]);
        }
        errors += parse_lines(&buf).filter(|l| l.is_err()).count();
    }
    assert!(errors > 0);
}

/// Everything a line exposes, for comparing two parses of it.
fn render(l: &Line<'_>) -> String {
    let tags: Vec<String> = l
        .tags()
        .map(|(k, v)| format!("{}={}|{}={}", k.raw(), v.raw(), k, v))
        .collect();
    let fields: Vec<String> = l
        .fields()
        .map(|(k, v)| format!("{}|{k}={v:?}", k.raw()))
        .collect();
    format!("{}|{l:?}|{tags:?}|{fields:?}", l.measurement.raw())
}

/// A line in cc-metric-collector's shape with numbers in many notations, so that both the
/// fast path and its fallbacks are exercised.
fn numeric_line(r: &mut Rng, out: &mut Vec<u8>) {
    let values = [
        "1",
        "-0",
        "0.25",
        "-12.5",
        "33.125",
        "1e5",
        "1.",
        ".5",
        "-",
        "3i",
        "-7i",
        "7u",
        "+2",
        "t",
        "FALSE",
        "12345678901234567890",
        "9007199254740993",
        "0.1234567890123456789",
        "1234567890.123456789",
        "99999999999999999999i",
        "18446744073709551615u",
        "nan",
        "\"s\"",
        "0x10",
        "1_0",
        "١",
    ];
    let ts = [
        "",
        " ",
        "  ",
        " 1700000000",
        " -5",
        " 1700000000000000000",
        " 17000000000000000000",
        " 1x",
        " 12 ",
        " 12  3",
        " +4",
    ];
    out.extend_from_slice(["cpu_load", "m", "a=b", "mem used"][r.below(4)].as_bytes());
    // Up to 9 tags: one more than the fast path records.
    for _ in 0..r.below(10) {
        let k = ["cluster", "hostname", "type", "type-id", "k"][r.below(5)];
        let v = ["alex", "a903", "hwthread", "17", "x=y", "\u{e9}"][r.below(6)];
        out.extend_from_slice(format!(",{k}={v}").as_bytes());
    }
    out.extend_from_slice(b" value=");
    // Half the values in the plain notations the fast path handles.
    let n = if r.below(2) == 0 { 5 } else { values.len() };
    out.extend_from_slice(values[r.below(n)].as_bytes());
    for _ in 0..r.below(3) {
        out.extend_from_slice(format!(",f={}", values[r.below(values.len())]).as_bytes());
    }
    out.extend_from_slice(ts[r.below(ts.len())].as_bytes());
}

#[test]
fn fast_path_agrees_with_the_general_parser() {
    let mut r = Rng(0x0dd_ba11);
    let mut line = Vec::new();
    let (mut fast, mut total) = (0usize, 0usize);
    for i in 0..400_000 {
        line.clear();
        if i % 2 == 0 {
            numeric_line(&mut r, &mut line);
        } else {
            // The general generator's escapes, quotes and strings must all go the slow way.
            random_line(&mut r, &mut line);
        }
        let times = r.below(3).saturating_sub(1);
        mutate(&mut r, &mut line, times);
        let Ok(s) = std::str::from_utf8(&line) else {
            continue;
        };
        total += 1;
        let taken = fast::parse(s, 3);
        match (parse_line(s, 3), parse_slow(s, 3)) {
            (Ok(a), Ok(b)) => assert_eq!(render(&a), render(&b), "{s:?}"),
            (Err(a), Err(b)) => {
                assert!(taken.is_none(), "fast path accepted {s:?}");
                assert_eq!(a, b, "{s:?}");
            }
            (a, b) => panic!("{s:?}: {a:?} vs {b:?}"),
        }
        if taken.is_some() {
            fast += 1;
            assert!(!s.contains(['\\', '"']), "{s:?}");
        }
    }
    // Both paths must actually have been compared.
    assert!(fast > total / 50 && fast < total / 2, "{fast} of {total}");
}

#[test]
fn for_each_line_matches_the_iterator() {
    let mut r = Rng(77);
    let mut body = Vec::new();
    for i in 0..20_000 {
        if i % 3 == 0 {
            random_line(&mut r, &mut body);
        } else {
            numeric_line(&mut r, &mut body);
        }
        if r.below(5) == 0 {
            body.insert(r.below(body.len()), ALPHABET[r.below(ALPHABET.len())]);
        }
        body.extend_from_slice(["\n", "\r\n", "\n  # c\n\n"][r.below(3)].as_bytes());
    }
    let (got, expected) = both_parsers(&body);
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    assert!(got.iter().any(|l| l.starts_with("line ")), "no errors seen");
}

#[test]
fn repeated_tag_sections_parse_as_in_full() {
    // Runs of lines sharing a tag section (the shortcut) with measurements of every length
    // and kind, fields and timestamps in all notations, and mutations anywhere.
    let mut r = Rng(4242);
    let measurements = [
        "m",
        "cpu_load",
        "flops_any",
        "a_much_longer_measurement_name",
        "a=b",
        "q\"z",
        "x\\,y",
        "mem used",
        "",
    ];
    let tags = [
        ",cluster=alex,hostname=a903,type=hwthread,type-id=7",
        ",cluster=alex,hostname=a903",
        ",a\\ b=c\\,d,e=f",
        ",k=v,k=v,k=v,k=v,k=v,k=v,k=v,k=v,k=v",
        ",x=y=z",
        "",
    ];
    let mut body = Vec::new();
    let mut t = tags[0];
    for _ in 0..60_000 {
        if r.below(4) == 0 {
            t = tags[r.below(tags.len())];
        }
        let start = body.len();
        body.extend_from_slice(measurements[r.below(measurements.len())].as_bytes());
        body.extend_from_slice(t.as_bytes());
        let mut rest = Vec::new();
        numeric_line(&mut r, &mut rest);
        let fields = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
        body.extend_from_slice(&rest[fields..]);
        if r.below(8) == 0 {
            let pos = start + r.below(body.len() - start + 1);
            body.insert(pos, ALPHABET[r.below(ALPHABET.len())]);
        }
        body.push(b'\n');
    }
    let (got, expected) = both_parsers(&body);
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, e);
    }
    let ok = got.iter().filter(|l| !l.starts_with("line ")).count();
    assert!(ok > 10_000 && ok < 55_000, "{ok} accepted");
}

/// Every line of `body` rendered by `for_each_line` (the fast path) and by `parse_lines` (the
/// general parser), in that order.
fn both_parsers(body: &[u8]) -> (Vec<String>, Vec<String>) {
    let expected = parse_lines(body)
        .map(|l| match l {
            Ok(l) => render(&l),
            Err(e) => e.to_string(),
        })
        .collect();
    let mut got = Vec::new();
    for_each_line(body, |l| {
        got.push(match l {
            Ok(l) => render(l),
            Err(e) => e.to_string(),
        })
    });
    (got, expected)
}

#[test]
fn word_compare_matches_slice_compare() {
    let base: Vec<u8> = (0..40u8).collect();
    for n in 0..40 {
        for flip in 0..n {
            let a = &base[..n];
            let mut b = a.to_vec();
            assert!(eq_bytes(a, &b));
            b[flip] ^= 1;
            assert!(!eq_bytes(a, &b), "{n} {flip}");
        }
        assert!(!eq_bytes(&base[..n], &base[..n + 1]));
    }
}
