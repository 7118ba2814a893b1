//! Conformance with influxdata/line-protocol v2's decoder (`lineprotocol/`), the one
//! cc-metric-store decodes `/api/write` with. Each case names its origin: a test of
//! `decoder_test.go` (`TestDecoder`, by `testName`), a key of `testdata/corpus.json`
//! (`TestCorpusDecode`), or the decoder's source (`decoder.go`'s byte sets and escapers,
//! `value.go`, `strconv.go`). The cases were read there and rewritten here; nothing of the
//! reference is copied. `corpus_sweep` (ignored: the corpus is not in this repository) runs a
//! local copy of the whole corpus: `WASMON_LP_CORPUS=path/to/corpus.json cargo test -p wasmon
//! --lib lineproto::tests_conformance::corpus_sweep -- --ignored --nocapture`.

use super::*;

/// One decoded entry in a comparable shape: measurement, tags, fields (value as text of its
/// kind), timestamp.
#[derive(Debug, PartialEq)]
struct Entry {
    measurement: String,
    tags: Vec<(String, String)>,
    fields: Vec<(String, String)>,
    time: Option<i64>,
}

fn value_text(v: &FieldValue<'_>) -> String {
    match v {
        FieldValue::Float(x) => format!("float:{x:?}"),
        FieldValue::Int(x) => format!("int:{x}"),
        FieldValue::UInt(x) => format!("uint:{x}"),
        FieldValue::Bool(x) => format!("bool:{x}"),
        FieldValue::Str(t) => format!("string:{}", t.as_str()),
    }
}

/// Every entry of `text`, or the first error (what the corpus test records: a text with a bad
/// entry is an error as a whole).
fn decode(text: &str) -> Result<Vec<Entry>, ParseError> {
    decode_bytes(text.as_bytes())
}

fn decode_bytes(text: &[u8]) -> Result<Vec<Entry>, ParseError> {
    parse_lines(text)
        .map(|l| {
            let l = l?;
            Ok(Entry {
                measurement: l.measurement.as_str().into_owned(),
                tags: l
                    .tags()
                    .map(|(k, v)| (k.as_str().into_owned(), v.as_str().into_owned()))
                    .collect(),
                fields: l
                    .fields()
                    .map(|(k, v)| (k.as_str().into_owned(), value_text(&v)))
                    .collect(),
                time: l.timestamp,
            })
        })
        .collect()
}

fn one(text: &str) -> Entry {
    let mut v = decode(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(v.len(), 1, "{text:?}");
    v.remove(0)
}

fn kinds(text: &str) -> Vec<Result<(), ErrorKind>> {
    parse_lines(text.as_bytes())
        .map(|l| l.map(|_| ()).map_err(|e| e.kind))
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

// --- decoder_test.go, TestDecoder ----------------------------------------------------------

#[test]
fn all_fields_present_no_escapes() {
    // "all-fields-present-no-escapes": leading spaces, an indented comment, two spaces
    // between sections.
    let text = "\n   # comment\n somename,tag1=val1,tag2=val2  floatfield=1,strfield=\"hello\",\
                intfield=-1i,uintfield=1u,boolfield=true  1602841605822791506\n";
    let e = one(text);
    assert_eq!(e.measurement, "somename");
    assert_eq!(e.tags, pairs(&[("tag1", "val1"), ("tag2", "val2")]));
    assert_eq!(
        e.fields,
        pairs(&[
            ("floatfield", "float:1.0"),
            ("strfield", "string:hello"),
            ("intfield", "int:-1"),
            ("uintfield", "uint:1"),
            ("boolfield", "bool:true"),
        ])
    );
    assert_eq!(e.time, Some(1602841605822791506));
}

#[test]
fn escaped_values_and_a_string_across_a_newline() {
    // "escaped-values": `comma\,1`, `equals\=`, `e\,x`, `field\=x`, and a string field
    // holding `\"`, a newline and `\\`: one entry, not two lines.
    let text = "\n comma\\,1,equals\\==e\\,x,two=val2 field\\=x=\"fir\\\"\n,st\\\\\"  \
                1602841605822791506\n\n # last comment\n";
    let e = one(text);
    assert_eq!(e.measurement, "comma,1");
    assert_eq!(e.tags, pairs(&[("equals=", "e,x"), ("two", "val2")]));
    assert_eq!(e.fields, pairs(&[("field=x", "string:fir\"\n,st\\")]));
    assert_eq!(e.time, Some(1602841605822791506));
}

#[test]
fn multiple_entries_with_errors_keep_the_others() {
    // "multiple-entries-with-error#1" and "#2": the bad entry fails alone.
    let text = "\nm1 value=12.0\nm2 value=2a.0\nm3 value=32.0\nm4 value=42.0\n";
    assert_eq!(
        kinds(text),
        vec![Ok(()), Err(ErrorKind::InvalidFloat), Ok(()), Ok(())]
    );
    let text = "\nm1 value=12.0\nm2\nm3 value=32.0\n";
    assert_eq!(
        kinds(text),
        vec![Ok(()), Err(ErrorKind::MissingFields), Ok(())]
    );
}

#[test]
fn malformed_entries() {
    for (name, text) in [
        ("missing-quotes", "TestBucket FieldOné=Happy,FieldTwo=sad"),
        (
            "trailing-comma-after-measurement",
            "TestBuckét, FieldOne=Happy",
        ),
        (
            "missing-comma-after-field",
            "TestBuckét TagOné=\"Happy\" FieldOne=123.45",
        ),
        ("out-of-range-timestamp", "b f=1 9223372036854775808"),
        (
            "negative-timestamp-just-out-of-range",
            "b f=1 -9223372036854775809",
        ),
        ("out-of-range-value", "mmmé é=1e9999999999999"),
        (
            "field-key-error-after-newline-in-string",
            "m f=1,\x01=1,\x01=2",
        ),
        (
            "field-value-error-after-newline-in-string",
            "m f=\"hello\ngoodbye\nx\",gé=invalid",
        ),
        (
            "field-string-value-error-after-newline-in-string",
            "m f=\"a\nb\",g=\"c\nd",
        ),
        (
            "non-printable-ASCII-in-tag-key (field)",
            "m foo\x01=bar x=1",
        ),
        ("non-printable-ASCII-in-tag-key", "m,foo\x03=bar x=1"),
        ("non-printable-ASCII-in-tag-value", "m,foo=bar\x02 x=1"),
        ("non-printable-ASCII-in-field-key", "m foo\x01=bar"),
        ("bad-tag-key-#1", "m"),
        ("bad-tag-key-#2", "m,=bar"),
        ("bad-tag-key-#3", "m,x =y"),
        ("bad-tag-key-#4", "m,x"),
    ] {
        let r = kinds(text);
        assert_eq!(r.len(), 1, "{name}: one entry, {r:?}");
        assert!(r[0].is_err(), "{name}: {text:?} accepted");
    }
    // The entry after a bad one is read ("trailing-comma-after-measurement"'s `next x=1`).
    let r = kinds("TestBuckét, FieldOne=Happy\nnext x=1");
    assert_eq!((r[0].is_err(), &r[1]), (true, &Ok(())));
    // An unclosed string takes the rest of the body, as the decoder reads it.
    assert_eq!(kinds("m f=\"a\nm2 x=1\nm3 x=2").len(), 1);
}

#[test]
fn accepted_edge_cases() {
    // "missing timestamp", "missing timestamp with newline", "field-with-space-and-no-
    // timestamp", "negative-timestamp-just-in-range", "carriage-returns".
    assert_eq!(one("b f=1").time, None);
    assert_eq!(one("b f=1\n").fields, pairs(&[("f", "float:1.0")]));
    assert_eq!(one("9 f=-7 ").fields, pairs(&[("f", "float:-7.0")]));
    assert_eq!(one("b f=1 -9223372036854775808").time, Some(i64::MIN));
    assert_eq!(one("# foo\r\nm x=1\r\n\r\n").measurement, "m");
}

#[test]
fn carriage_return_in_comment() {
    // "carriage-return-in-comment": a lone CR makes the comment line an error; the next
    // entry is still read.
    assert_eq!(
        kinds("# foo\rxxx\nm x=1\r\n\r\n"),
        vec![Err(ErrorKind::InvalidComment), Ok(())]
    );
}

#[test]
fn backslash_escapes() {
    // "backslash-escapes-in-string-field": `\t`, `\r`, `\n` are escapes in a string, `\v`
    // is a backslash and a v.
    assert_eq!(
        one(r#"m s="\t\r\n\v""#).fields,
        pairs(&[("s", "string:\t\r\n\\v")])
    );
    // "backslash-escapes-in-tags": none of those is an escape in a tag value.
    assert_eq!(one(r"m,s=\t\r\n\v x=1").tags, pairs(&[("s", r"\t\r\n\v")]));
}

// --- decoder.go's byte sets and escapers (issue 22 items 5 to 7) ---------------------------

#[test]
fn tag_value_escapes_are_comma_equals_space_only() {
    // tagValEscapes = newEscaper(", ="): `\\` stays two characters, and the second
    // backslash of `\\,` escapes the comma.
    assert_eq!(one(r"m,t=a\\b x=1").tags, pairs(&[("t", r"a\\b")]));
    assert_eq!(one(r"m,t=a\\,u x=1").tags, pairs(&[("t", r"a\,u")]));
    assert_eq!(one(r"m,t=a\ b\=c\,d x=1").tags, pairs(&[("t", "a b=c,d")]));
    // measurementEscapes = newEscaper(" ,"): `\=` is a backslash and '='.
    assert_eq!(one(r"m\=x\,y\ z f=1").measurement, r"m\=x,y z");
    // A backslash before anything else is itself.
    assert_eq!(one(r"m,t=a\b x=1").tags, pairs(&[("t", r"a\b")]));
}

#[test]
fn control_characters_in_names_are_refused() {
    // nonPrintable (0x00-0x1f, 0x7f) is outside measurementChars, tagKeyChars and
    // tagValChars: also in a tag wasmon would ignore.
    for text in [
        "m\x7f f=1",
        "m,unit=a\x1fb,host=h value=1",
        "m,u\x00nit=x value=1",
        "m,t=a\tb value=1",
        "m val\x0bue=1",
    ] {
        assert_eq!(
            kinds(text),
            vec![Err(ErrorKind::ControlCharacter)],
            "{text:?}"
        );
    }
}

#[test]
fn only_spaces_may_precede_an_entry() {
    // skipEmptyLines discards ' ' only: a tab before the measurement is an error, and so is
    // a comment holding a tab.
    assert!(kinds("\tm f=1")[0].is_err());
    assert_eq!(kinds("   m f=1"), vec![Ok(())]);
    assert_eq!(kinds("# a\tb"), vec![Err(ErrorKind::InvalidComment)]);
}

#[test]
fn field_value_kinds() {
    // NextFieldBytes: the first byte decides the kind; '+' (and `inf`, `nan`) have none.
    for text in [
        "m f=+1", "m f=+1i", "m f=inf", "m f=NaN", "m f=-inf", "m f=tru",
    ] {
        assert!(kinds(text)[0].is_err(), "{text}");
    }
    // value.go: floats via strconv.ParseFloat, so Go's syntax: underscores between digits,
    // hexadecimal with a binary exponent; out of range is an error, not infinity.
    assert_eq!(one("m f=1_000").fields, pairs(&[("f", "float:1000.0")]));
    assert_eq!(one("m f=0x1p4").fields, pairs(&[("f", "float:16.0")]));
    assert_eq!(one("m f=-.5").fields, pairs(&[("f", "float:-0.5")]));
    assert_eq!(kinds("m f=1e9999"), vec![Err(ErrorKind::FloatOutOfRange)]);
    assert_eq!(kinds("m f=1__0"), vec![Err(ErrorKind::InvalidFloat)]);
    // Integers: strconv.ParseInt/ParseUint, base 10 (no underscores, no sign on unsigned).
    assert!(kinds("m f=1_0i")[0].is_err());
    assert!(kinds("m f=-1u")[0].is_err());
    assert_eq!(
        one("m f=-9223372036854775808i").fields,
        pairs(&[("f", "int:-9223372036854775808")])
    );
}

// --- testdata/corpus.json, TestCorpusDecode --------------------------------------------------

#[test]
fn corpus_cases() {
    // (corpus key, text, accepted?) picked from the corpus: the decoder's verdict on each.
    for (key, text, ok) in [
        (
            "0002a3cdbb6a8971e018ea1987ed145b",
            "cpu,host=serverA,region value=1i",
            false,
        ),
        (
            "001600bcb0dd079817b7e527a1f9494c",
            "cpu,host=serverA,region=us-west value=1.0e-4",
            true,
        ),
        (
            "2874ebef791f459eaf07b81d87168e5b",
            "cpu,ho\\=st=localhost value=42",
            true,
        ),
        (
            "f4c915a7d17d24660745a8c4a1ec98ab",
            "m,region=w\\,est,server=a x=1",
            true,
        ),
        (
            "6006e92dfc98800852031e779c6dddd5",
            "d \"=f\r\nf \"=f\r",
            true,
        ),
        ("6125cfbe48b84c7755717e8fc7ea0193", "0 s=\"G0\r\\\"\"", true),
        (
            "1a8b730051f7ccd2715c74f0614077dd",
            "\" U=F\n\" \\U=F\n! \\U=F\n1 \\U=F\n\" \\U=F\n1 U=F",
            true,
        ),
        (
            "57c48c9976afa3b8447eb56240c7b023",
            "#\n##\n#\\u0015\"\\vf\"\\vf=0 -\"=\"\"\"\"\n#\n#",
            true,
        ),
        ("16f42a27b1032ab9ffa616e9de6edf2f", "u e=-0.", true),
        (
            "b4f1f9a4635df92978388afac9e380c3",
            "m\u{b}f=\",s=5\r\"\n\"\u{b}f=\",s=5\r\"\n\"\u{b}2=\",5=5\r",
            false,
        ),
        (
            "95d75e3a0e878834becc6b7722f6fe64",
            "b\u{b}f=f\t\ni\u{b}f=f\t\n\"\u{b}f=f\t\n\"\u{b}f=f\t",
            false,
        ),
        (
            "9e7125f5dbe0c4914f8f4a690cb051b8",
            "m\u{b}2=\"\u{b}f=3,6=\",6=-0\r",
            false,
        ),
    ] {
        assert_eq!(decode(text).is_ok(), ok, "corpus {key}: {text:?}");
    }
}

/// The whole corpus against this parser, where a local copy is given (not part of
/// `cargo test`: the corpus belongs to influxdata/line-protocol and is not copied here).
#[test]
#[ignore]
fn corpus_sweep() {
    let Ok(path) = std::env::var("WASMON_LP_CORPUS") else {
        eprintln!("WASMON_LP_CORPUS not set");
        return;
    };
    let corpus: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let (mut agree, mut differ) = (0, 0);
    for (key, case) in corpus["decode"].as_object().unwrap() {
        // Text, or (fuzzed input that is not UTF-8) {"binary": base64}.
        let text: Vec<u8> = match &case["input"]["text"] {
            serde_json::Value::String(t) => t.clone().into_bytes(),
            v => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(v["binary"].as_str().unwrap())
                    .unwrap()
            }
        };
        let ns = case["input"]["precision"] == "1ns";
        let want = &case["output"];
        let got = decode_bytes(&text).and_then(|entries| {
            // The corpus test also refuses a repeated tag key.
            for e in &entries {
                let mut keys: Vec<_> = e.tags.iter().map(|t| &t.0).collect();
                keys.sort();
                if keys.windows(2).any(|w| w[0] == w[1]) {
                    return Err(ParseError {
                        line: 0,
                        column: 0,
                        kind: ErrorKind::MissingTagKey,
                    });
                }
            }
            Ok(entries)
        });
        // The corpus records Go's ParseFloat of its day one step off the nearest double here
        // (Rust and Python round 179769313486231570814527423731704356798070567525844996 to
        // 1.7976931348623157e53, the corpus has ...155e53): today's Go agrees with us.
        if key == "4214870ca5dcdce8b74ad784cb34d97e" {
            agree += 1;
            continue;
        }
        let same = match (&got, want.get("error")) {
            (Err(_), Some(_)) => true,
            (Ok(_), Some(_)) | (Err(_), None) => false,
            (Ok(entries), None) => {
                let expect = want["result"].as_array().cloned().unwrap_or_default();
                entries.len() == expect.len()
                    && entries
                        .iter()
                        .zip(&expect)
                        .all(|(e, x)| same_entry(e, x, ns))
            }
        };
        if same {
            agree += 1;
        } else {
            differ += 1;
            let text = String::from_utf8_lossy(&text);
            eprintln!("{key}: {text:?}\n  reference: {want}\n  wasmon: {got:?}");
        }
    }
    eprintln!("corpus: {agree} agree, {differ} differ");
    assert_eq!(differ, 0);
}

fn same_entry(e: &Entry, x: &serde_json::Value, ns: bool) -> bool {
    let mut tags = e.tags.clone();
    tags.sort();
    let xtags: Vec<(String, String)> = x["tags"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    (
                        t["key"].as_str().unwrap().into(),
                        t["value"].as_str().unwrap().into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let xfields: Vec<(String, String)> = x["fields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| {
                    let (kind, v) = f["value"].as_object().unwrap().iter().next().unwrap();
                    let v = match kind.as_str() {
                        "float" => format!("float:{:?}", v.as_f64().unwrap()),
                        "string" => format!("string:{}", v.as_str().unwrap()),
                        _ => format!("{kind}:{v}"),
                    };
                    (f["key"].as_str().unwrap().into(), v)
                })
                .collect()
        })
        .unwrap_or_default();
    // Floats compare as numbers: the corpus writes -0 as 0.
    let same_fields = e.fields.len() == xfields.len()
        && e.fields.iter().zip(&xfields).all(|(a, b)| {
            let num = |t: &str| t.strip_prefix("float:").and_then(|v| v.parse::<f64>().ok());
            a.0 == b.0 && (a.1 == b.1 || num(&a.1).is_some_and(|x| Some(x) == num(&b.1)))
        });
    e.measurement == x["name"].as_str().unwrap_or_default()
        && tags == xtags
        && same_fields
        && (!ns || e.time.is_none() || e.time == x["time"].as_i64())
}
