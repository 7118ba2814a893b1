//! Units between the namespace's text (`pmUnitsStr`'s words: `Kbyte`, `millisec`,
//! `count / sec`, `count x 10^6`) and PCP's packed `pmUnits` word, and an agent's `f64`
//! values in their PCP type.
//!
//! Owns only these conversions.

use super::pdu::Value;
use crate::namespace::{Semantics, Value as AgentValue, ValueType};

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
    // A pure rate has an empty numerator: `/ microsec`.
    let (num, den) = match text.strip_prefix("/ ") {
        Some(d) => ("", Some(d)),
        None => match text.split_once(" / ") {
            Some((n, d)) => (n, Some(d)),
            None => (text, None),
        },
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

/// An agent's value in its PCP type ([`AgentValue::conform`]: reals round to the nearest
/// integer and saturate); 32-bit types saturate at their bounds. `None` for text given for a
/// number or a number for text.
pub fn to_value(t: ValueType, v: AgentValue) -> Option<Value> {
    let v = v.conform(t)?;
    Some(match (t, v) {
        (ValueType::I32, AgentValue::Int(i)) => {
            Value::I32(i.clamp(i32::MIN.into(), i32::MAX.into()) as i32)
        }
        (ValueType::U32, AgentValue::Uint(u)) => Value::U32(u.min(u32::MAX.into()) as u32),
        (ValueType::I64, AgentValue::Int(i)) => Value::I64(i),
        (ValueType::U64, AgentValue::Uint(u)) => Value::U64(u),
        (ValueType::Float, AgentValue::Real(f)) => Value::Float(f as f32),
        (ValueType::Double, AgentValue::Real(f)) => Value::Double(f),
        (ValueType::String, AgentValue::Text(s)) => Value::String(s),
        // `conform` gives the case the type names.
        _ => return None,
    })
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
        let t = |ty, v| to_value(ty, v);
        assert_eq!(
            t(ValueType::U64, AgentValue::Real(5.4)),
            Some(Value::U64(5))
        );
        assert_eq!(
            t(ValueType::U32, AgentValue::Real(-3.0)),
            Some(Value::U32(0))
        );
        assert_eq!(
            t(ValueType::I32, AgentValue::Real(f64::NAN)),
            Some(Value::I32(0))
        );
        assert_eq!(
            t(ValueType::Float, AgentValue::Real(0.5)),
            Some(Value::Float(0.5))
        );
        // Integers keep every digit past 2^53, and saturate into 32 bits.
        let big = (1u64 << 60) + 1;
        assert_eq!(
            t(ValueType::U64, AgentValue::Uint(big)),
            Some(Value::U64(big))
        );
        assert_eq!(
            t(ValueType::U32, AgentValue::Uint(big)),
            Some(Value::U32(u32::MAX))
        );
        assert_eq!(
            t(ValueType::I32, AgentValue::Int(-(big as i64))),
            Some(Value::I32(i32::MIN))
        );
        assert_eq!(
            t(ValueType::I64, AgentValue::Uint(u64::MAX)),
            Some(Value::I64(i64::MAX))
        );
        assert_eq!(t(ValueType::U64, AgentValue::Int(-1)), Some(Value::U64(0)));
        assert_eq!(
            t(ValueType::Double, AgentValue::Uint(7)),
            Some(Value::Double(7.0))
        );
        // Text only for text.
        let text = || AgentValue::Text("idle".into());
        assert_eq!(
            t(ValueType::String, text()),
            Some(Value::String("idle".into()))
        );
        assert_eq!(t(ValueType::Double, text()), None);
        assert_eq!(t(ValueType::String, AgentValue::Real(1.0)), None);
    }
}
