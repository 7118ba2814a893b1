//! Parser and evaluator tests: Python's precedence and float semantics, field access, errors.

use super::*;
use wasmon_guest::{Kind, Sample};

fn sample() -> Sample {
    Sample::new(
        "cpu",
        "r1",
        Kind::Cumulative,
        120e9,
        1_500_000_000_000_000_000,
    )
    .with_unit("ns")
    .with_metadata(&[
        ("cpu_number", "4"),
        ("zero", "0"),
        ("flavor", "m1.small"),
        ("user_metadata.autoscaling_weight", "1.1"),
        ("odd-key", "2"),
    ])
}

fn eval(src: &str) -> Result<f64, EvalError> {
    Expr::parse(src, Mode::Sample)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .eval_f64(&sample())
}

fn val(src: &str) -> f64 {
    eval(src).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn parse_err(src: &str, mode: Mode) -> ParseError {
    match Expr::parse(src, mode) {
        Ok(_) => panic!("{src:?} parsed"),
        Err(e) => e,
    }
}

#[test]
fn precedence_follows_python() {
    assert_eq!(val("-2**2"), -4.0);
    assert_eq!(val("(-2)**2"), 4.0);
    assert_eq!(val("2**3**2"), 512.0);
    assert_eq!(val("2**-1"), 0.5);
    assert_eq!(val("-2**-2"), -0.25);
    assert_eq!(val("1 + 2 * 3"), 7.0);
    assert_eq!(val("(1 + 2) * 3"), 9.0);
    assert_eq!(val("10 - 4 - 3"), 3.0);
    assert_eq!(val("100 / 10 / 5"), 2.0);
    assert_eq!(val("2 * 3 % 4"), 2.0);
    assert_eq!(val("--3"), 3.0);
    assert_eq!(val("+-3"), -3.0);
}

#[test]
fn floor_division_and_modulo_are_pythons() {
    assert_eq!(val("7 // 2"), 3.0);
    assert_eq!(val("-7 // 2"), -4.0);
    assert_eq!(val("7 // -2"), -4.0);
    assert_eq!(val("-7 % 3"), 2.0);
    assert_eq!(val("7 % -3"), -2.0);
    assert_eq!(val("7.5 % 2"), 1.5);
    assert_eq!(val("7 / 2"), 3.5);
}

#[test]
fn literals() {
    assert_eq!(val("1e9"), 1e9);
    assert_eq!(val("10**9"), 1e9);
    assert_eq!(val("1_000"), 1000.0);
    assert_eq!(val(".5 + 5."), 5.5);
    assert_eq!(val("2.5E-1"), 0.25);
    assert_eq!(val("0x10 + 0b11 + 0o10"), 27.0);
    assert_eq!(val("True + True"), 2.0);
    assert!(val("float('nan')").is_nan());
    assert_eq!(val("float('inf')"), f64::INFINITY);
    assert_eq!(val("float(\"-inf\")"), f64::NEG_INFINITY);
    assert_eq!(val("float('1_0')"), 10.0);
}

#[test]
fn constants_fold_at_parse_time() {
    let e = Expr::parse("100.0 / (10**9 * 4)", Mode::Sample).unwrap();
    assert_eq!(e.as_const(), Some(100.0 / 4e9));
    let e = Expr::parse("float('nan')", Mode::Sample).unwrap();
    assert!(e.as_const().unwrap().is_nan());
    // Errors are left for evaluation, like Python's runtime ZeroDivisionError.
    let e = Expr::parse("1 / 0", Mode::Sample).unwrap();
    assert_eq!(e.as_const(), None);
    assert_eq!(e.eval_f64(&sample()), Err(EvalError::DivisionByZero));
}

#[test]
fn builtins() {
    assert_eq!(val("abs(-3)"), 3.0);
    assert_eq!(val("min(3, 1, 2)"), 1.0);
    assert_eq!(val("max(3, 1, 2,)"), 3.0);
    assert_eq!(val("round(2.5)"), 2.0);
    assert_eq!(val("round(3.5)"), 4.0);
    assert_eq!(val("round(2.675, 1)"), 2.7);
    assert_eq!(val("round(1234, -2)"), 1200.0);
    assert_eq!(val("int(-3.9)"), -3.0);
    assert_eq!(val("int('42')"), 42.0);
    assert_eq!(val("pow(2, 10)"), 1024.0);
    assert_eq!(val("bool(0) + bool('x')"), 1.0);
    assert_eq!(val("float(resource_metadata.cpu_number)"), 4.0);
}

#[test]
fn comparisons_and_logic() {
    assert_eq!(val("1 < 2 < 3"), 1.0);
    assert_eq!(val("1 < 3 < 2"), 0.0);
    assert_eq!(val("2 == 2.0"), 1.0);
    assert_eq!(val("unit == 'ns'"), 1.0);
    assert_eq!(val("unit != 'ns'"), 0.0);
    assert_eq!(val("type == 'cumulative'"), 1.0);
    assert_eq!(val("not 0"), 1.0);
    assert_eq!(val("0 and 5"), 0.0);
    assert_eq!(val("3 and 5"), 5.0);
    assert_eq!(val("0 or 5"), 5.0);
    assert_eq!(val("3 or 5"), 3.0);
    assert_eq!(val("10 if volume > 0 else 20"), 10.0);
    assert_eq!(val("10 if volume < 0 else 20 if 0 else 30"), 30.0);
    assert_eq!(val("None == None"), 1.0);
    assert_eq!(val("unit == 1"), 0.0);
    assert!(matches!(eval("unit < 1"), Err(EvalError::Invalid(_))));
}

#[test]
fn sample_fields() {
    assert_eq!(val("volume"), 120e9);
    assert_eq!(val("timestamp"), 1.5e9);
    assert_eq!(val("resource_metadata.cpu_number"), 4.0);
    assert_eq!(val("resource_metadata['odd-key']"), 2.0);
    assert_eq!(
        val("resource_metadata.user_metadata.autoscaling_weight"),
        1.1
    );
    assert_eq!(val("resource_metadata.missing or 7"), 7.0);
    assert_eq!(val("resource_metadata.non.existent or 1.0"), 1.0);
    // Numeric metadata is a number, so a zero is falsy as it would be in Python.
    assert_eq!(val("resource_metadata.zero or 3"), 3.0);
    assert_eq!(val("user_id or 5"), 5.0);
    assert_eq!(
        val("100.0 / (10**9 * (resource_metadata.cpu_number or 1))"),
        100.0 / 4e9
    );
}

#[test]
fn evaluation_errors() {
    assert_eq!(eval("volume / 0"), Err(EvalError::DivisionByZero));
    assert_eq!(eval("volume // 0"), Err(EvalError::DivisionByZero));
    assert_eq!(eval("volume % 0"), Err(EvalError::DivisionByZero));
    assert_eq!(eval("0 ** -1"), Err(EvalError::DivisionByZero));
    assert_eq!(
        eval("resource_metadata.missing * 2"),
        Err(EvalError::Missing)
    );
    assert_eq!(
        eval("resource_metadata.flavor * 2"),
        Err(EvalError::NotNumeric)
    );
    assert_eq!(eval("unit"), Err(EvalError::NotNumeric));
    assert_eq!(eval("resource_metadata.missing"), Err(EvalError::Missing));
    assert!(matches!(eval("(-8) ** 0.5"), Err(EvalError::Invalid(_))));
    assert!(matches!(eval("float(unit)"), Err(EvalError::Invalid(_))));
}

#[test]
fn meter_references_get_one_slot_per_distinct_name() {
    let e = Expr::parse(
        "$(a.b) + $(a_b) + $(a-b) + $(class) + $(a.b).volume + $(cpu).resource_metadata.x",
        Mode::Meters,
    )
    .unwrap();
    let names: Vec<&str> = e.meters().iter().map(|m| &**m).collect();
    assert_eq!(names, ["a.b", "a_b", "a-b", "class", "cpu"]);
}

#[test]
fn parse_errors_name_position_and_expectation() {
    let e = parse_err("1 +", Mode::Sample);
    assert_eq!(e.offset, 3);
    assert!(e.expected.contains("operand"), "{e}");
    assert!(e.found.contains("end"), "{e}");

    let e = parse_err("$(memory) * (2 + ", Mode::Meters);
    assert_eq!(e.offset, 17);

    let e = parse_err("$(memory) $(cpu)", Mode::Meters);
    assert_eq!(e.offset, 10);
    assert!(e.to_string().contains("at character 10"), "{e}");

    let e = parse_err("(1 + 2", Mode::Sample);
    assert_eq!((e.offset, e.expected.as_str()), (6, "')'"));

    let e = parse_err("$(memory", Mode::Meters);
    assert_eq!(e.offset, 8);
    assert!(e.expected.contains("')'"), "{e}");

    let e = parse_err("$()", Mode::Meters);
    assert_eq!(e.offset, 2);

    let e = parse_err("2 = 3", Mode::Sample);
    assert_eq!(e.offset, 2);

    // Offsets count characters, not bytes.
    let e = parse_err("'é' + ", Mode::Sample);
    assert_eq!(e.offset, 6);

    let e = parse_err("sqrt(4)", Mode::Sample);
    assert_eq!(e.offset, 0);
    assert!(e.expected.contains("function"), "{e}");

    let e = parse_err("round()", Mode::Sample);
    assert!(e.expected.contains("round()"), "{e}");

    let e = parse_err("volume + bogus", Mode::Sample);
    assert_eq!(e.offset, 9);
    assert!(e.expected.contains("sample field"), "{e}");

    let e = parse_err("resource_metadata + 1", Mode::Sample);
    assert!(e.expected.contains("resource_metadata"), "{e}");

    let e = parse_err("memory * 2", Mode::Meters);
    assert_eq!(e.offset, 0);

    let e = parse_err("$(cpu) * 2", Mode::Sample);
    assert_eq!(e.offset, 0);

    let e = parse_err("$(cpu).bogus", Mode::Meters);
    assert_eq!(e.offset, 7);

    let e = parse_err("$(cpu).", Mode::Meters);
    assert_eq!(e.offset, 7);
    assert!(e.found.contains("end"), "{e}");

    let e = parse_err("resource_metadata.", Mode::Sample);
    assert_eq!(
        (e.offset, e.expected.as_str()),
        (18, "a metadata key after '.'")
    );

    let e = parse_err("resource_metadata[1]", Mode::Sample);
    assert_eq!(
        (e.offset, e.expected.as_str()),
        (18, "a quoted metadata key")
    );

    let e = parse_err("1 if 2", Mode::Sample);
    assert_eq!((e.offset, e.expected.as_str()), (6, "'else'"));

    let e = parse_err("3j", Mode::Sample);
    assert_eq!(e.offset, 1);

    let e = parse_err("'abc", Mode::Sample);
    assert_eq!(e.offset, 4);

    let e = parse_err("", Mode::Sample);
    assert_eq!(e.offset, 0);
}

/// Variables of a `$(meter)` expression: slot i's volume is `vols[i]`, its timestamp 10 s.
struct Vars(Vec<Option<f64>>);

impl Env for Vars {
    fn get(&self, slot: u16, field: &Field) -> Val<'_> {
        match (self.0[slot as usize], field) {
            (None, _) => Val::Missing,
            (Some(_), Field::Timestamp) => Val::Num(10.0),
            (Some(x), _) => Val::Num(x),
        }
    }
}

#[test]
fn the_numeric_program_agrees_with_the_tree_walk() {
    let exprs = [
        "100.0 * $(a) / $(b)",
        "$(a) + 2",
        "-$(a) ** 2 - +$(b)",
        "$(a) // $(b) + $(a) % $(b)",
        "abs($(a) - $(b)) * 2 ** -1",
        "min($(a), $(b), 3) + max($(b), $(a)) + pow($(a), 2)",
        "($(a) - $(b)) / ($(a).timestamp - $(b).timestamp)",
        "$(a) ** $(b)",
        "float('nan') * $(a) / $(b)",
    ];
    let values = [0.0, -0.0, 1.0, -2.5, 3.0, 1e308, f64::NAN, f64::INFINITY];
    for src in exprs {
        let e = Expr::parse(src, Mode::Meters).unwrap();
        assert!(e.program.is_some(), "{src} has no program");
        for a in values {
            for b in values {
                let vars = Vars(vec![Some(a), Some(b)]);
                let (fast, walk) = (e.eval_f64(&vars), e.walk(&vars));
                let same = match (fast, walk) {
                    (Ok(x), Ok(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                    (x, y) => x == y,
                };
                assert!(same, "{src} with a={a} b={b}: {fast:?} vs {walk:?}");
            }
        }
        // A missing variable leaves the error to the tree walk.
        let vars = Vars(vec![None, None]);
        assert_eq!(e.eval_f64(&vars), e.walk(&vars), "{src}");
        assert_eq!(e.eval_f64(&vars), Err(EvalError::Missing), "{src}");
    }
    for src in [
        "$(a) or 1",
        "$(a).resource_metadata.n * 2",
        "1 if $(a) else 2",
    ] {
        assert!(
            Expr::parse(src, Mode::Meters).unwrap().program.is_none(),
            "{src}"
        );
    }
}
