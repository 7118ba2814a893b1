//! A chain's closed buffers: encoded by `codec`, or (after a late write landed in one) a raw
//! page until the chain encodes it again; reading a range of one. Owns the closed forms; may
//! not touch the open buffer or the chain's grid.

use super::pool::Pool;
use super::{BUFFER_CAP, CAP, Page, codec};

/// A closed buffer: encoded, or (after a late write landed in it) a raw page until the chain
/// encodes it again.
pub(crate) struct Closed {
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
    pub(super) form: Form,
}

pub(super) enum Form {
    Packed(Box<[u8]>),
    /// Slot offset `o` at index `o`.
    Raw(Page),
}

impl Closed {
    pub(super) fn first_slot(&self) -> i64 {
        self.block as i64 * CAP + self.lo as i64
    }
    pub(super) fn end_slot(&self) -> i64 {
        self.block as i64 * CAP + self.hi as i64
    }

    /// A closed buffer of one late-written value in a raw page.
    pub(super) fn raw(block: i32, off: usize, value: f64, mut page: Page) -> Closed {
        page[off] = value;
        Closed {
            block,
            lo: off as u16,
            hi: off as u16 + 1,
            form: Form::Raw(page),
        }
    }

    /// A closed buffer of the encoded slots `lo..hi`.
    pub(super) fn packed(block: i32, lo: u16, hi: u16, bytes: Box<[u8]>) -> Closed {
        Closed {
            block,
            lo,
            hi,
            form: Form::Packed(bytes),
        }
    }

    /// A closed buffer from its encoded values (a restored snapshot); `None` if they do not
    /// decode to `hi - lo` slots.
    pub(crate) fn from_encoded(block: i32, lo: u16, hi: u16, bytes: &[u8]) -> Option<Closed> {
        if lo >= hi || hi as usize > BUFFER_CAP {
            return None;
        }
        let mut tmp = [0f64; BUFFER_CAP];
        codec::decode(bytes, &mut tmp[..(hi - lo) as usize]).ok()?;
        Some(Closed {
            block,
            lo,
            hi,
            form: Form::Packed(bytes.into()),
        })
    }

    /// The encoded values (encoding a raw one now).
    pub(crate) fn encoded(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.form {
            Form::Packed(b) => std::borrow::Cow::Borrowed(b),
            Form::Raw(p) => {
                let mut out = Vec::new();
                codec::encode(&p[self.lo as usize..self.hi as usize], &mut out);
                std::borrow::Cow::Owned(out)
            }
        }
    }

    /// Decodes into a raw page so a late write can land in it.
    fn open(&mut self, pool: &Pool) -> &mut Page {
        if let Form::Packed(b) = &self.form {
            let mut page = pool.get();
            let (lo, hi) = (self.lo as usize, self.hi as usize);
            // Bytes this chain encoded itself; a failure would be a codec bug, and the
            // slots then read as gaps rather than as wrong values.
            if codec::decode(b, &mut page[lo..hi]).is_err() {
                page[lo..hi].fill(f64::NAN);
            }
            self.form = Form::Raw(page);
        }
        match &mut self.form {
            Form::Raw(p) => p,
            Form::Packed(_) => unreachable!("opened above"),
        }
    }

    pub(super) fn set(&mut self, off: usize, value: f64, pool: &Pool) {
        self.open(pool)[off] = value;
        let o = off as u16;
        self.lo = self.lo.min(o);
        self.hi = self.hi.max(o + 1);
    }

    /// Encodes a raw (late-written) buffer again.
    pub(super) fn seal(&mut self, digits: u32, pool: &Pool) {
        if let Form::Raw(p) = &self.form {
            let mut out = Vec::new();
            let v = &p[self.lo as usize..self.hi as usize];
            if digits == 0 {
                codec::encode(v, &mut out);
            } else {
                let r: Vec<f64> = v
                    .iter()
                    .map(|x| codec::round_to_digits(*x, digits))
                    .collect();
                codec::encode(&r, &mut out);
            }
            if let Form::Raw(p) = std::mem::replace(&mut self.form, Form::Packed(out.into())) {
                pool.put(p);
            }
        }
    }

    pub(super) fn release(self, pool: &Pool) {
        if let Form::Raw(p) = self.form {
            pool.put(p);
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        match &self.form {
            Form::Packed(b) => b.len(),
            Form::Raw(_) => BUFFER_CAP * 8,
        }
    }

    /// Hands the slots `k - bstart .. end - bstart` (inside `lo..hi`) to `data`, or the
    /// constant to `fill` when the buffer is one value without gaps.
    #[inline]
    pub(super) fn visit_range(
        &self,
        a: usize,
        b: usize,
        out: &mut [f64],
        data: &mut impl FnMut(&mut [f64], &[f64]),
        fill: &mut impl FnMut(&mut [f64], f64),
        copy: bool,
    ) {
        match &self.form {
            Form::Raw(p) => data(out, &p[a..b]),
            Form::Packed(bytes) => {
                if let Some(v) = codec::constant(bytes) {
                    return fill(out, v);
                }
                let (lo, hi) = (self.lo as usize, self.hi as usize);
                if copy && (a, b) == (lo, hi) {
                    // The whole buffer into the answer: no copy through a scratch array.
                    if codec::decode(bytes, out).is_err() {
                        out.fill(f64::NAN);
                    }
                    return;
                }
                let mut tmp = [0f64; BUFFER_CAP];
                // The chain's own bytes; see `open`.
                if codec::decode(bytes, &mut tmp[..hi - lo]).is_err() {
                    return fill(out, f64::NAN);
                }
                data(out, &tmp[a - lo..b - lo]);
            }
        }
    }
}
