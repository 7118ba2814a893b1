//! The numeric fast path: an expression that only does arithmetic on numbers (`100 *
//! $(memory.usage) / $(memory)`, `volume * 1e-9`) is also compiled to a postfix program run
//! over a small stack of `f64`s. The tree walk returns a tagged [`Val`] through every level of
//! recursion; in WebAssembly each of those returns goes through the shadow stack in linear
//! memory, which made evaluation twice as slow as natively. The program is a flat loop.
//!
//! Operations run in the tree walk's order (post-order), so the first error is the same one.
//! A variable that is not a number (an incomplete resource, for instance) makes the program
//! give up, and the tree walk produces the exact error.

use super::eval::{BinOp, Func, Node, binary};
use super::{Env, Field};

/// Deepest stack a program may need; deeper expressions keep the tree walk.
const STACK: usize = 16;

#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    Num(f64),
    /// `Field::Volume` or `Field::Timestamp` of a slot.
    Var(u16, bool),
    Neg,
    Bin(BinOp),
    Abs,
    /// Python's `min`/`max` over the top `n` values.
    Min(u32),
    Max(u32),
}

/// A postfix program for the expression rooted at `root`, if it is purely numeric.
pub(super) fn compile(nodes: &[Node], args: &[u32], root: u32) -> Option<Box<[Op]>> {
    let mut ops = Vec::new();
    let depth = emit(nodes, args, root, &mut ops)?;
    (depth <= STACK).then(|| ops.into_boxed_slice())
}

/// Appends the ops of node `i`; returns the stack depth they need.
fn emit(nodes: &[Node], args: &[u32], i: u32, ops: &mut Vec<Op>) -> Option<usize> {
    Some(match &nodes[i as usize] {
        Node::Num(x) => {
            ops.push(Op::Num(*x));
            1
        }
        Node::Var(slot, Field::Volume) => {
            ops.push(Op::Var(*slot, false));
            1
        }
        Node::Var(slot, Field::Timestamp) => {
            ops.push(Op::Var(*slot, true));
            1
        }
        Node::Pos(a) => emit(nodes, args, *a, ops)?,
        Node::Neg(a) => {
            let d = emit(nodes, args, *a, ops)?;
            ops.push(Op::Neg);
            d
        }
        Node::Bin(op, a, b) => {
            let da = emit(nodes, args, *a, ops)?;
            let db = emit(nodes, args, *b, ops)?;
            ops.push(Op::Bin(*op));
            da.max(db + 1)
        }
        Node::Call(func @ (Func::Abs | Func::Min | Func::Max | Func::Pow), start, len) => {
            let list = &args[*start as usize..(*start + *len) as usize];
            let arity_ok = match func {
                Func::Abs => list.len() == 1,
                Func::Pow => list.len() == 2,
                _ => !list.is_empty(),
            };
            if !arity_ok {
                return None;
            }
            let mut depth = 0;
            for (k, &a) in list.iter().enumerate() {
                depth = depth.max(k + emit(nodes, args, a, ops)?);
            }
            ops.push(match func {
                Func::Abs => Op::Abs,
                Func::Pow => Op::Bin(BinOp::Pow),
                Func::Min => Op::Min(list.len() as u32),
                _ => Op::Max(list.len() as u32),
            });
            depth
        }
        _ => return None,
    })
}

/// Runs `ops`; `None` when a variable is not a number.
pub(super) fn run<E: Env + ?Sized>(ops: &[Op], env: &E) -> Option<Result<f64, super::EvalError>> {
    let mut stack = [0.0f64; STACK];
    let mut top = 0usize;
    for op in ops {
        match *op {
            Op::Num(x) => {
                stack[top] = x;
                top += 1;
            }
            Op::Var(slot, ts) => {
                stack[top] = env.num(slot, ts)?;
                top += 1;
            }
            Op::Neg => stack[top - 1] = -stack[top - 1],
            Op::Abs => stack[top - 1] = stack[top - 1].abs(),
            Op::Bin(op) => {
                top -= 1;
                let (x, y) = (stack[top - 1], stack[top]);
                // The common operators inline; the rest (and every error) go to `binary`.
                stack[top - 1] = match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div if y != 0.0 => x / y,
                    _ => match binary(op, x, y) {
                        Ok(v) => v,
                        Err(e) => return Some(Err(e)),
                    },
                };
            }
            Op::Min(n) | Op::Max(n) => {
                let first = top - n as usize;
                let min = matches!(op, Op::Min(_));
                // Python keeps the first of equals and replaces only on a strict comparison,
                // which also decides how NaN propagates.
                let mut best = stack[first];
                for &x in &stack[first + 1..top] {
                    if (min && x < best) || (!min && x > best) {
                        best = x;
                    }
                }
                stack[first] = best;
                top = first + 1;
            }
        }
    }
    Some(Ok(stack[0]))
}
