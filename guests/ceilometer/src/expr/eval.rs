//! The compiled form of an expression and its evaluator.
//!
//! Nodes live in one `Vec` and refer to each other by index; evaluation is a recursive walk
//! that returns [`Val`]s borrowing from the expression or the environment, so it never
//! allocates. Arithmetic follows Python's float semantics where they differ from Rust's
//! (floor division and modulo, errors on division by zero).

use std::fmt;

use super::{Env, Expr, Field, Val};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Func {
    Float,
    Int,
    Abs,
    Min,
    Max,
    Round,
    Pow,
    Bool,
}

#[derive(Clone, Debug)]
pub(crate) enum Node {
    Num(f64),
    Str(Box<str>),
    Missing,
    Var(u16, Field),
    Neg(u32),
    Pos(u32),
    Not(u32),
    Bin(BinOp, u32, u32),
    Cmp(CmpOp, u32, u32),
    And(u32, u32),
    Or(u32, u32),
    /// `then if cond else otherwise`
    Cond {
        cond: u32,
        then: u32,
        otherwise: u32,
    },
    /// `func(args[start..start + len])`
    Call(Func, u32, u32),
}

/// Why an evaluation produced no value. Kept allocation-free: the caller formats it only when
/// it logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EvalError {
    DivisionByZero,
    /// A missing value (an absent metadata key, `None`) where a number was needed.
    Missing,
    /// A string (non-numeric metadata, `unit`, ...) where a number was needed.
    NotNumeric,
    /// Values that Python would refuse to compare or convert.
    Invalid(&'static str),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::DivisionByZero => f.write_str("division by zero"),
            EvalError::Missing => f.write_str(
                "a missing value (absent metadata key?) used as a number; `x or default` supplies one",
            ),
            EvalError::NotNumeric => f.write_str("a non-numeric value used as a number"),
            EvalError::Invalid(what) => f.write_str(what),
        }
    }
}

/// A value as a number, Python-style: strings and `None` are errors.
pub(crate) fn num(v: Val<'_>) -> Result<f64, EvalError> {
    match v {
        Val::Num(x) => Ok(x),
        Val::Missing => Err(EvalError::Missing),
        Val::Str(_) => Err(EvalError::NotNumeric),
    }
}

fn truthy(v: Val<'_>) -> bool {
    match v {
        // NaN is truthy in Python, and `NaN != 0.0` agrees.
        Val::Num(x) => x != 0.0,
        Val::Str(s) => !s.is_empty(),
        Val::Missing => false,
    }
}

fn boolean(b: bool) -> Val<'static> {
    Val::Num(if b { 1.0 } else { 0.0 })
}

impl Expr {
    pub(super) fn eval_node<'a, E: Env + ?Sized>(
        &'a self,
        i: u32,
        env: &'a E,
    ) -> Result<Val<'a>, EvalError> {
        Ok(match &self.nodes[i as usize] {
            Node::Num(x) => Val::Num(*x),
            Node::Str(s) => Val::Str(s),
            Node::Missing => Val::Missing,
            Node::Var(slot, field) => env.get(*slot, field),
            Node::Neg(a) => Val::Num(-num(self.eval_node(*a, env)?)?),
            Node::Pos(a) => Val::Num(num(self.eval_node(*a, env)?)?),
            Node::Not(a) => boolean(!truthy(self.eval_node(*a, env)?)),
            Node::Bin(op, a, b) => {
                let x = num(self.eval_node(*a, env)?)?;
                let y = num(self.eval_node(*b, env)?)?;
                Val::Num(binary(*op, x, y)?)
            }
            Node::Cmp(op, a, b) => {
                let x = self.eval_node(*a, env)?;
                let y = self.eval_node(*b, env)?;
                boolean(compare(*op, x, y)?)
            }
            Node::And(a, b) => {
                let x = self.eval_node(*a, env)?;
                if truthy(x) {
                    self.eval_node(*b, env)?
                } else {
                    x
                }
            }
            Node::Or(a, b) => {
                let x = self.eval_node(*a, env)?;
                if truthy(x) {
                    x
                } else {
                    self.eval_node(*b, env)?
                }
            }
            Node::Cond {
                cond,
                then,
                otherwise,
            } => {
                if truthy(self.eval_node(*cond, env)?) {
                    self.eval_node(*then, env)?
                } else {
                    self.eval_node(*otherwise, env)?
                }
            }
            Node::Call(func, start, len) => {
                let args = &self.args[*start as usize..(*start + *len) as usize];
                self.call(*func, args, env)?
            }
        })
    }

    fn call<'a, E: Env + ?Sized>(
        &'a self,
        func: Func,
        args: &[u32],
        env: &'a E,
    ) -> Result<Val<'a>, EvalError> {
        let arg = |k: usize| self.eval_node(args[k], env);
        let x = match func {
            Func::Float => match args.first() {
                None => 0.0,
                Some(_) => match arg(0)? {
                    Val::Num(x) => x,
                    Val::Str(s) => parse_float(s)?,
                    Val::Missing => return Err(EvalError::Missing),
                },
            },
            Func::Int => match args.first() {
                None => 0.0,
                Some(_) => match arg(0)? {
                    Val::Num(x) if x.is_finite() => x.trunc(),
                    Val::Num(_) => {
                        return Err(EvalError::Invalid("int() of an infinite or NaN value"));
                    }
                    Val::Str(s) => parse_int(s)?,
                    Val::Missing => return Err(EvalError::Missing),
                },
            },
            Func::Bool => match args.first() {
                None => 0.0,
                Some(_) => f64::from(u8::from(truthy(arg(0)?))),
            },
            Func::Abs => num(arg(0)?)?.abs(),
            Func::Min | Func::Max => {
                let mut best = num(arg(0)?)?;
                for k in 1..args.len() {
                    let x = num(arg(k)?)?;
                    // Python's min/max keep the first of equals and only replace on a strict
                    // comparison, which also decides how NaN propagates.
                    let better = if func == Func::Min {
                        x < best
                    } else {
                        x > best
                    };
                    if better {
                        best = x;
                    }
                }
                best
            }
            Func::Round => {
                let x = num(arg(0)?)?;
                match args.get(1) {
                    None => {
                        if !x.is_finite() {
                            return Err(EvalError::Invalid("round() of an infinite or NaN value"));
                        }
                        x.round_ties_even()
                    }
                    Some(_) => round_digits(x, num(arg(1)?)?),
                }
            }
            Func::Pow => binary(BinOp::Pow, num(arg(0)?)?, num(arg(1)?)?)?,
        };
        Ok(Val::Num(x))
    }
}

/// `float(str)`: Python accepts surrounding blanks, `nan`, `inf`, `infinity` and underscores
/// between digits; Rust's parser accepts the same words.
fn parse_float(s: &str) -> Result<f64, EvalError> {
    let t = s.trim();
    t.parse::<f64>()
        .or_else(|_| t.replace('_', "").parse::<f64>())
        .map_err(|_| EvalError::Invalid("float() of a non-numeric string"))
}

/// `int(str)`: an integer literal, blanks and `_` separators allowed (no allocation unless
/// there are separators).
fn parse_int(s: &str) -> Result<f64, EvalError> {
    let t = s.trim();
    t.parse::<i64>()
        .or_else(|_| t.replace('_', "").parse::<i64>())
        .map(|i| i as f64)
        .map_err(|_| EvalError::Invalid("int() of a non-integer string"))
}

/// `round(x, n)`: half-to-even at `n` decimal places (Python rounds the exact binary value,
/// which this approximates closely enough for metrics).
fn round_digits(x: f64, n: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let n = n.trunc().clamp(-308.0, 308.0) as i32;
    if n >= 0 {
        let p = 10f64.powi(n);
        let y = (x * p).round_ties_even() / p;
        if y.is_finite() { y } else { x }
    } else {
        let p = 10f64.powi(-n);
        (x / p).round_ties_even() * p
    }
}

pub(crate) fn binary(op: BinOp, x: f64, y: f64) -> Result<f64, EvalError> {
    Ok(match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => {
            if y == 0.0 {
                return Err(EvalError::DivisionByZero);
            }
            x / y
        }
        BinOp::FloorDiv => floor_divmod(x, y)?.0,
        BinOp::Mod => floor_divmod(x, y)?.1,
        BinOp::Pow => {
            if x == 0.0 && y < 0.0 {
                return Err(EvalError::DivisionByZero);
            }
            if x < 0.0 && y.is_finite() && y.fract() != 0.0 {
                // Python 3 would produce a complex number here.
                return Err(EvalError::Invalid(
                    "negative number raised to a fractional power",
                ));
            }
            x.powf(y)
        }
    })
}

/// Python's float `divmod`: the remainder takes the divisor's sign and the quotient is floored.
fn floor_divmod(x: f64, y: f64) -> Result<(f64, f64), EvalError> {
    if y == 0.0 {
        return Err(EvalError::DivisionByZero);
    }
    let mut m = x % y;
    let mut div = (x - m) / y;
    if m != 0.0 {
        if (y < 0.0) != (m < 0.0) {
            m += y;
            div -= 1.0;
        }
    } else {
        m = 0f64.copysign(y);
    }
    let q = if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 { f + 1.0 } else { f }
    } else {
        0f64.copysign(x / y)
    };
    Ok((q, m))
}

fn compare(op: CmpOp, a: Val<'_>, b: Val<'_>) -> Result<bool, EvalError> {
    let ordering = match (a, b) {
        (Val::Num(x), Val::Num(y)) => {
            // IEEE comparisons, NaN included, are exactly Python's for floats.
            return Ok(match op {
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                CmpOp::Ge => x >= y,
                CmpOp::Eq => x == y,
                CmpOp::Ne => x != y,
            });
        }
        // UTF-8 byte order is code point order, which is how Python orders strings.
        (Val::Str(x), Val::Str(y)) => x.cmp(y),
        // Mixed types: Python answers == and != (never equal, except None == None) but
        // refuses to order them.
        _ => {
            let same = a == Val::Missing && b == Val::Missing;
            return match op {
                CmpOp::Eq => Ok(same),
                CmpOp::Ne => Ok(!same),
                _ => Err(EvalError::Invalid(
                    "ordering comparison between incompatible values",
                )),
            };
        }
    };
    Ok(match op {
        CmpOp::Lt => ordering.is_lt(),
        CmpOp::Le => ordering.is_le(),
        CmpOp::Gt => ordering.is_gt(),
        CmpOp::Ge => ordering.is_ge(),
        CmpOp::Eq => ordering.is_eq(),
        CmpOp::Ne => ordering.is_ne(),
    })
}
