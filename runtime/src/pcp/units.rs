//! Units between the namespace's text (`pmUnitsStr`'s words: `Kbyte`, `millisec`,
//! `count / sec`, `count x 10^6`) and PCP's packed `pmUnits` word, and an agent's `f64`
//! values in their PCP type.
//!
//! Owns only these conversions.

use super::pdu::Value;
use crate::namespace::{Semantics, ValueType};

/// Space scales (`PM_SPACE_*`), by the word `pmUnitsStr` writes.
const SPACE: [&str; 9] = [
    "byte", "Kbyte", "Mbyte", "Gbyte", "Tbyte", "Pbyte", "Ebyte", "Zbyte", "Ybyte",
];
/// Time scales (`PM_TIME_*`).
const TIME: [&str; 6] = ["nanosec", "microsec", "millisec", "sec", "min", "hour"];

/// Dimensions and scales as `pmUnits` holds them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Units {
    dim: [i32; 3],
    scale: [i32; 3],
}

/// The packed `pmUnits` word of a units text, or `None` when the text is not one
/// `pmUnitsStr` writes (the caller then serves the metric as dimensionless).
pub fn parse_units(text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() || text == "none" {
        return Some(0);
    }
    let mut u = Units::default();
    let (num, den) = match text.split_once(" / ") {
        Some((n, d)) => (n, Some(d)),
        None => (text, None),
    };
    side(num, 1, &mut u)?;
    if let Some(d) = den {
        side(d, -1, &mut u)?;
    }
    if u.dim.iter().any(|d| !(-8..=7).contains(d)) || u.scale.iter().any(|s| !(-8..=15).contains(s))
    {
        return None;
    }
    let nib = |v: i32| (v as u32) & 0xf;
    Some(
        (nib(u.dim[0]) << 28)
            | (nib(u.dim[1]) << 24)
            | (nib(u.dim[2]) << 20)
            | (nib(u.scale[0]) << 16)
            | (nib(u.scale[1]) << 12)
            | (nib(u.scale[2]) << 8),
    )
}

/// One side of `a / b`: words such as `Kbyte`, `sec^2`, `count x 10^3`.
fn side(text: &str, sign: i32, u: &mut Units) -> Option<()> {
    let mut words = text.split_ascii_whitespace().peekable();
    while let Some(w) = words.next() {
        let (base, pow) = match w.split_once('^') {
            Some((b, p)) => (b, p.parse::<i32>().ok()?),
            None => (w, 1),
        };
        let dim = if let Some(s) = SPACE.iter().position(|x| *x == base) {
            u.scale[0] = s as i32;
            0
        } else if let Some(s) = TIME.iter().position(|x| *x == base) {
            u.scale[1] = s as i32;
            1
        } else if base == "count" {
            if words.peek() == Some(&"x") {
                words.next();
                let e = words.next()?.strip_prefix("10^")?.parse::<i32>().ok()?;
                u.scale[2] = e;
            }
            2
        } else {
            return None;
        };
        u.dim[dim] += sign * pow;
    }
    Some(())
}

/// `PM_SEM_*`.
pub fn sem_code(s: Semantics) -> u32 {
    match s {
        Semantics::Counter => 1,
        Semantics::Instant => 3,
        Semantics::Discrete => 4,
    }
}

/// `PM_TYPE_*`.
pub fn type_code(t: ValueType) -> u32 {
    match t {
        ValueType::I32 => 0,
        ValueType::U32 => 1,
        ValueType::I64 => 2,
        ValueType::U64 => 3,
        ValueType::Float => 4,
        ValueType::Double => 5,
        ValueType::String => 6,
    }
}

/// An agent's value in its PCP type: integers round to the nearest and saturate at the
/// type's bounds (`as` casts saturate; NaN becomes 0).
pub fn to_value(t: ValueType, v: f64) -> Value {
    match t {
        ValueType::I32 => Value::I32(v.round() as i32),
        ValueType::U32 => Value::U32(v.round() as u32),
        ValueType::I64 => Value::I64(v.round() as i64),
        ValueType::U64 => Value::U64(v.round() as u64),
        ValueType::Float => Value::Float(v as f32),
        ValueType::Double => Value::Double(v),
        ValueType::String => Value::String(v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_as_pcp_packs_them() {
        assert_eq!(parse_units(""), Some(0));
        assert_eq!(parse_units("none"), Some(0));
        // Kbyte: dimSpace 1, scaleSpace 1 (PM_SPACE_KBYTE).
        assert_eq!(parse_units("Kbyte"), Some((1 << 28) | (1 << 16)));
        // millisec: dimTime 1, scaleTime 2 (PM_TIME_MSEC).
        assert_eq!(parse_units("millisec"), Some((1 << 24) | (2 << 12)));
        assert_eq!(parse_units("count"), Some(1 << 20));
        assert_eq!(parse_units("count x 10^6"), Some((1 << 20) | (6 << 8)));
        // byte / sec: dimTime -1 (0xf), scaleTime sec (3).
        assert_eq!(
            parse_units("byte / sec"),
            Some((1 << 28) | (0xf << 24) | (3 << 12))
        );
        assert_eq!(parse_units("Mbyte^2"), Some((2 << 28) | (2 << 16)));
        assert_eq!(parse_units("furlong"), None);
        assert_eq!(parse_units("count x"), None);
    }

    #[test]
    fn values_take_their_type() {
        assert_eq!(to_value(ValueType::U64, 5.4), Value::U64(5));
        assert_eq!(to_value(ValueType::U32, -3.0), Value::U32(0));
        assert_eq!(to_value(ValueType::I32, f64::NAN), Value::I32(0));
        assert_eq!(to_value(ValueType::Float, 0.5), Value::Float(0.5));
    }
}
