//! Fuzz target: the line-protocol parser must never panic, every rejection must carry a
//! position inside the input, every accepted line must be fully iterable, and the fast path
//! must agree with the general parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../runtime/src/lineproto/mod.rs"]
mod lineproto;

use lineproto::{parse_line, parse_lines, parse_slow};

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|b| *b == b'\n').count();
    for res in parse_lines(data) {
        match res {
            Ok(line) => {
                assert!(line.line >= 1 && line.line <= lines);
                let _ = line.measurement.as_str();
                for (k, v) in line.tags() {
                    assert!(!k.raw().is_empty() && !v.raw().is_empty());
                    let _ = (k.as_str(), v.as_str());
                }
                assert!(line.fields().count() >= 1);
            }
            Err(e) => {
                assert!(e.line >= 1 && e.line <= lines);
                assert!(e.column >= 1 && e.column <= data.len() + 1);
                let _ = e.to_string();
            }
        }
    }
    for piece in data.split(|b| *b == b'\n') {
        let Ok(s) = std::str::from_utf8(piece) else {
            continue;
        };
        match (parse_line(s, 1), parse_slow(s, 1)) {
            (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
            (Err(a), Err(b)) => assert_eq!(a, b),
            (a, b) => panic!("fast {a:?} vs general {b:?}"),
        }
    }
});
