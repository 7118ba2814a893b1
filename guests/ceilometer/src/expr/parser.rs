//! Recursive-descent parser following Python's expression grammar, from the loosest binding:
//!
//! ```text
//! expr       := or_test ['if' or_test 'else' expr]
//! or_test    := and_test ('or' and_test)*
//! and_test   := not_test ('and' not_test)*
//! not_test   := 'not' not_test | comparison
//! comparison := arith (('<'|'<='|'>'|'>='|'=='|'!=') arith)*
//! arith      := term (('+'|'-') term)*
//! term       := factor (('*'|'/'|'//'|'%') factor)*
//! factor     := ('+'|'-') factor | power
//! power      := atom ['**' factor]          -- so -2**2 == -(2**2) and 2**-1 == 0.5
//! atom       := number | string | True | False | None | '(' expr ')' | name '(' args ')'
//!             | $(meter) ['.' field]          (Mode::Meters)
//!             | field                         (Mode::Sample)
//! field      := volume | timestamp | unit | name | type | resource_id | user_id | project_id
//!             | source | resource_metadata ('.' key | '[' string ']')+
//! ```
//!
//! Nodes whose operands are all constants are folded as they are built.

use super::eval::{BinOp, CmpOp, Func, Node};
use super::lexer::{Tok, Token, error, lex};
use super::{Expr, Field, Mode, ParseError, Val};

/// Words that are Python syntax, never operands.
const KEYWORDS: [&str; 9] = [
    "and", "or", "not", "if", "else", "is", "in", "lambda", "for",
];

const FIELDS: &str = "a sample field (volume, timestamp, unit, name, type, resource_id, \
                      resource_metadata.<key>)";

struct Parser<'s> {
    src: &'s str,
    toks: Vec<Token>,
    at: usize,
    mode: Mode,
    expr: Expr,
}

pub(super) fn parse(src: &str, mode: Mode) -> Result<Expr, ParseError> {
    let mut p = Parser {
        src,
        toks: lex(src)?,
        at: 0,
        mode,
        expr: Expr {
            nodes: Vec::new(),
            args: Vec::new(),
            root: 0,
            meters: Vec::new(),
            program: None,
        },
    };
    if p.peek() == &Tok::End {
        return Err(p.unexpected("an expression"));
    }
    let root = p.expr()?;
    if p.peek() != &Tok::End {
        return Err(p.unexpected("an operator or the end of the expression"));
    }
    p.expr.root = root;
    Ok(p.expr)
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].tok
    }

    fn pos(&self) -> usize {
        self.toks[self.at].pos
    }

    /// Consumes an identifier, if that is what comes next.
    fn eat_ident(&mut self) -> Option<String> {
        let Tok::Ident(word) = self.peek() else {
            return None;
        };
        let word = word.clone();
        self.at += 1;
        Some(word)
    }

    fn unexpected(&self, expected: &str) -> ParseError {
        error(self.src, self.pos(), expected, self.peek().describe())
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Tok::Op(o) if *o == op) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Tok::Ident(w) if w == word) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str, expected: &str) -> Result<(), ParseError> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    /// Adds a node, folding it to a constant when all its operands are constants.
    fn push(&mut self, node: Node) -> u32 {
        let is_const = |i: &u32| {
            matches!(
                self.expr.nodes[*i as usize],
                Node::Num(_) | Node::Str(_) | Node::Missing
            )
        };
        let foldable = match &node {
            Node::Neg(a) | Node::Pos(a) | Node::Not(a) => is_const(a),
            Node::Bin(_, a, b) | Node::Cmp(_, a, b) | Node::And(a, b) | Node::Or(a, b) => {
                is_const(a) && is_const(b)
            }
            Node::Cond {
                cond,
                then,
                otherwise,
            } => is_const(cond) && is_const(then) && is_const(otherwise),
            Node::Call(_, start, len) => self.expr.args[*start as usize..(*start + *len) as usize]
                .iter()
                .all(is_const),
            Node::Num(_) | Node::Str(_) | Node::Missing | Node::Var(..) => false,
        };
        let i = self.expr.nodes.len() as u32;
        self.expr.nodes.push(node);
        if foldable {
            // An error (say `1/0`) is left for evaluation to report, as Python would.
            let folded = match self.expr.eval_node(i, &NoVars) {
                Ok(Val::Num(x)) => Some(Node::Num(x)),
                Ok(Val::Missing) => Some(Node::Missing),
                _ => None,
            };
            if let Some(n) = folded {
                self.expr.nodes[i as usize] = n;
            }
        }
        i
    }

    fn expr(&mut self) -> Result<u32, ParseError> {
        let then = self.or_test()?;
        if !self.eat_word("if") {
            return Ok(then);
        }
        let cond = self.or_test()?;
        if !self.eat_word("else") {
            return Err(self.unexpected("'else'"));
        }
        let otherwise = self.expr()?;
        Ok(self.push(Node::Cond {
            cond,
            then,
            otherwise,
        }))
    }

    fn or_test(&mut self) -> Result<u32, ParseError> {
        let mut a = self.and_test()?;
        while self.eat_word("or") {
            let b = self.and_test()?;
            a = self.push(Node::Or(a, b));
        }
        Ok(a)
    }

    fn and_test(&mut self) -> Result<u32, ParseError> {
        let mut a = self.not_test()?;
        while self.eat_word("and") {
            let b = self.not_test()?;
            a = self.push(Node::And(a, b));
        }
        Ok(a)
    }

    fn not_test(&mut self) -> Result<u32, ParseError> {
        if self.eat_word("not") {
            let a = self.not_test()?;
            return Ok(self.push(Node::Not(a)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<u32, ParseError> {
        let mut left = self.arith()?;
        let mut result: Option<u32> = None;
        loop {
            let op = match self.peek() {
                Tok::Op("<") => CmpOp::Lt,
                Tok::Op("<=") => CmpOp::Le,
                Tok::Op(">") => CmpOp::Gt,
                Tok::Op(">=") => CmpOp::Ge,
                Tok::Op("==") => CmpOp::Eq,
                Tok::Op("!=") => CmpOp::Ne,
                Tok::Ident(w) if w == "is" || w == "in" => {
                    return Err(
                        self.unexpected("a comparison operator ('is' and 'in' are not supported)")
                    );
                }
                _ => break,
            };
            self.at += 1;
            let right = self.arith()?;
            let cmp = self.push(Node::Cmp(op, left, right));
            // `a < b < c` is `a < b and b < c`; the shared operand is pure, so evaluating it
            // twice is harmless.
            result = Some(match result {
                None => cmp,
                Some(prev) => self.push(Node::And(prev, cmp)),
            });
            left = right;
        }
        Ok(result.unwrap_or(left))
    }

    fn arith(&mut self) -> Result<u32, ParseError> {
        let mut a = self.term()?;
        loop {
            let op = if self.eat_op("+") {
                BinOp::Add
            } else if self.eat_op("-") {
                BinOp::Sub
            } else {
                return Ok(a);
            };
            let b = self.term()?;
            a = self.push(Node::Bin(op, a, b));
        }
    }

    fn term(&mut self) -> Result<u32, ParseError> {
        let mut a = self.factor()?;
        loop {
            let op = if self.eat_op("*") {
                BinOp::Mul
            } else if self.eat_op("//") {
                BinOp::FloorDiv
            } else if self.eat_op("/") {
                BinOp::Div
            } else if self.eat_op("%") {
                BinOp::Mod
            } else {
                return Ok(a);
            };
            let b = self.factor()?;
            a = self.push(Node::Bin(op, a, b));
        }
    }

    fn factor(&mut self) -> Result<u32, ParseError> {
        if self.eat_op("-") {
            let a = self.factor()?;
            return Ok(self.push(Node::Neg(a)));
        }
        if self.eat_op("+") {
            let a = self.factor()?;
            return Ok(self.push(Node::Pos(a)));
        }
        self.power()
    }

    fn power(&mut self) -> Result<u32, ParseError> {
        let base = self.atom()?;
        if self.eat_op("**") {
            // The exponent is a `factor`: right-associative, and may carry its own sign.
            let exp = self.factor()?;
            return Ok(self.push(Node::Bin(BinOp::Pow, base, exp)));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<u32, ParseError> {
        const OPERAND: &str = "an operand (a number, $(meter), a function call or '(')";
        let start = self.pos();
        match self.peek().clone() {
            Tok::Num(x) => {
                self.at += 1;
                Ok(self.push(Node::Num(x)))
            }
            Tok::Str(s) => {
                self.at += 1;
                Ok(self.push(Node::Str(s.into())))
            }
            Tok::Op("(") => {
                self.at += 1;
                let inner = self.expr()?;
                self.expect_op(")", "')'")?;
                Ok(inner)
            }
            Tok::Meter(name) => {
                if self.mode != Mode::Meters {
                    return Err(self.unexpected(&format!(
                        "{FIELDS}; $(meter) references belong in arithmetic expressions"
                    )));
                }
                self.at += 1;
                let slot = self.slot_of(&name);
                // As in Ceilometer, a bare `$(m)` means its volume.
                let field = if self.eat_op(".") {
                    let pos = self.pos();
                    let Some(word) = self.eat_ident() else {
                        return Err(self.unexpected(FIELDS));
                    };
                    self.field(&word, pos)?
                } else {
                    Field::Volume
                };
                Ok(self.push(Node::Var(slot, field)))
            }
            Tok::Ident(word) => {
                self.at += 1;
                match word.as_str() {
                    "True" => return Ok(self.push(Node::Num(1.0))),
                    "False" => return Ok(self.push(Node::Num(0.0))),
                    "None" => return Ok(self.push(Node::Missing)),
                    _ => {}
                }
                if KEYWORDS.contains(&word.as_str()) {
                    self.at -= 1;
                    return Err(self.unexpected(OPERAND));
                }
                if matches!(self.peek(), Tok::Op("(")) {
                    return self.call(&word, start);
                }
                match self.mode {
                    Mode::Sample => {
                        let field = self.field(&word, start)?;
                        Ok(self.push(Node::Var(0, field)))
                    }
                    Mode::Meters => {
                        self.at -= 1;
                        Err(self.unexpected(
                            "an operand (a number, $(meter), a function call or '('); bare names are not variables, meters are written $(name)",
                        ))
                    }
                }
            }
            _ => Err(self.unexpected(OPERAND)),
        }
    }

    fn slot_of(&mut self, name: &str) -> u16 {
        let meters = &mut self.expr.meters;
        match meters.iter().position(|m| &**m == name) {
            Some(i) => i as u16,
            None => {
                meters.push(wasmon_guest::intern(name));
                (meters.len() - 1) as u16
            }
        }
    }

    /// A field name already consumed (at byte `pos`), plus the metadata key path if any.
    fn field(&mut self, word: &str, pos: usize) -> Result<Field, ParseError> {
        Ok(match word {
            "volume" => Field::Volume,
            "timestamp" => Field::Timestamp,
            "unit" => Field::Unit,
            "name" => Field::Name,
            "type" => Field::Kind,
            "resource_id" => Field::Resource,
            "user_id" | "project_id" | "source" => Field::Absent,
            "resource_metadata" => {
                let mut key = String::new();
                loop {
                    let part = if self.eat_op(".") {
                        self.eat_ident()
                            .ok_or_else(|| self.unexpected("a metadata key after '.'"))?
                    } else if self.eat_op("[") {
                        let Tok::Str(k) = self.peek().clone() else {
                            return Err(self.unexpected("a quoted metadata key"));
                        };
                        self.at += 1;
                        self.expect_op("]", "']'")?;
                        k
                    } else {
                        break;
                    };
                    if !key.is_empty() {
                        key.push('.');
                    }
                    key.push_str(&part);
                }
                if key.is_empty() {
                    return Err(self.unexpected("'.key' or ['key'] after resource_metadata"));
                }
                Field::Meta(key.into())
            }
            other => {
                return Err(error(self.src, pos, FIELDS, format!("'{other}'")));
            }
        })
    }

    fn call(&mut self, name: &str, pos: usize) -> Result<u32, ParseError> {
        let (func, min, max) = match name {
            "float" => (Func::Float, 0, 1),
            "int" => (Func::Int, 0, 1),
            "bool" => (Func::Bool, 0, 1),
            "abs" => (Func::Abs, 1, 1),
            "min" => (Func::Min, 2, usize::MAX),
            "max" => (Func::Max, 2, usize::MAX),
            "round" => (Func::Round, 1, 2),
            "pow" => (Func::Pow, 2, 2),
            other => {
                return Err(error(
                    self.src,
                    pos,
                    "a function among float, int, bool, abs, min, max, round, pow",
                    format!("'{other}'"),
                ));
            }
        };
        self.expect_op("(", "'('")?;
        let mut args = Vec::new();
        while !self.eat_op(")") {
            args.push(self.expr()?);
            if !self.eat_op(",") {
                self.expect_op(")", "',' or ')'")?;
                break;
            }
        }
        if args.len() < min || args.len() > max {
            let wanted = match (min, max) {
                (a, b) if a == b => format!("{a} argument(s) to {name}()"),
                (a, usize::MAX) => format!("at least {a} arguments to {name}()"),
                (a, b) => format!("{a} to {b} arguments to {name}()"),
            };
            return Err(error(
                self.src,
                pos,
                &wanted,
                format!("{} argument(s)", args.len()),
            ));
        }
        let start = self.expr.args.len() as u32;
        self.expr.args.extend_from_slice(&args);
        Ok(self.push(Node::Call(func, start, args.len() as u32)))
    }
}

/// The environment used for constant folding: folding only happens without variables.
struct NoVars;

impl super::Env for NoVars {
    fn get(&self, _slot: u16, _field: &Field) -> Val<'_> {
        Val::Missing
    }
}
