//! A chain's closed buffers: encoded by `codec`, or (after a late write landed in one) a raw
//! page until the chain encodes it again; also the frozen part of the open block (`pieces`);
//! reading a range of one. Owns the closed forms; may not touch the open buffer or the
//! chain's grid.

use super::pool::Pool;
use super::{BUFFER_CAP, CAP, Page, codec, pieces};

thread_local! {
    /// Where a read that adds (rather than copies) decodes a buffer first: one per thread, so
    /// a read of many series does not clear a 4 KiB array on the stack for each buffer.
    static SCRATCH: std::cell::RefCell<[f64; BUFFER_CAP]> =
        const { std::cell::RefCell::new([0.0; BUFFER_CAP]) };
}

/// A closed buffer: encoded, or (after a late write landed in it) a raw page until the chain
/// encodes it again. The one whose block is the head's is the frozen part of the open block.
pub(crate) struct Closed {
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
    pub(super) form: Form,
}

pub(super) enum Form {
    Packed(Box<[u8]>),
    /// The frozen slots `lo..hi` of the head's block, in pieces (`pieces`).
    Pieces(Box<[u8]>),
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

    /// A closed buffer of the slots `lo..hi` of `page` (a block just closed, encoded later).
    pub(super) fn from_page(block: i32, lo: u16, hi: u16, page: Page) -> Closed {
        Closed {
            block,
            lo,
            hi,
            form: Form::Raw(page),
        }
    }

    /// A closed buffer of the encoded slots `lo..hi`.
    #[cfg(test)]
    pub(super) fn packed(block: i32, lo: u16, hi: u16, bytes: Box<[u8]>) -> Closed {
        Closed {
            block,
            lo,
            hi,
            form: Form::Packed(bytes),
        }
    }

    /// The frozen part of the head's block: `values` from slot offset `lo` (rounded to
    /// `digits` significant digits if set).
    pub(super) fn frozen(block: i32, lo: u16, values: &[f64], digits: u32) -> Closed {
        Closed {
            block,
            lo,
            hi: lo + values.len() as u16,
            form: Form::Pieces(pieces::new(values, digits)),
        }
    }

    /// Appends `values` from slot offset `hi` on (the head's slots being frozen; `merge`: as
    /// `pieces::append`).
    pub(super) fn append(&mut self, values: &[f64], merge: bool, digits: u32, pool: &Pool) {
        let (at, n) = (self.hi as usize, values.len());
        match &mut self.form {
            Form::Pieces(b) => pieces::append(b, values, merge, digits),
            _ => self.open(pool)[at..at + n].copy_from_slice(values),
        }
        self.hi += n as u16;
    }

    /// Slots `lo..hi` into `page` at their offsets.
    pub(super) fn values_into(&self, page: &mut [f64; BUFFER_CAP]) {
        let (lo, hi) = (self.lo as usize, self.hi as usize);
        match &self.form {
            Form::Raw(p) => page[lo..hi].copy_from_slice(&p[lo..hi]),
            Form::Pieces(b) => pieces::decode(b, &mut page[lo..hi]),
            Form::Packed(b) => {
                if codec::decode(b, &mut page[lo..hi]).is_err() {
                    page[lo..hi].fill(f64::NAN);
                }
            }
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
            Form::Pieces(_) => {
                let mut page = [0f64; BUFFER_CAP];
                self.values_into(&mut page);
                let mut out = Vec::new();
                codec::encode(&page[self.lo as usize..self.hi as usize], &mut out);
                std::borrow::Cow::Owned(out)
            }
        }
    }

    /// Decodes into a raw page so a late write can land in it.
    fn open(&mut self, pool: &Pool) -> &mut Page {
        if !matches!(self.form, Form::Raw(_)) {
            let mut page = pool.get();
            // Bytes this chain encoded itself; a failure would be a codec bug, and the
            // slots then read as gaps rather than as wrong values.
            self.values_into(&mut page);
            self.form = Form::Raw(page);
        }
        match &mut self.form {
            Form::Raw(p) => p,
            _ => unreachable!("opened above"),
        }
    }

    pub(super) fn set(&mut self, off: usize, value: f64, pool: &Pool) {
        self.open(pool)[off] = value;
        let o = off as u16;
        self.lo = self.lo.min(o);
        self.hi = self.hi.max(o + 1);
    }

    /// Encodes a raw (late-written or just closed) buffer, or a closed block's pieces, as one
    /// buffer (values rounded to `digits` significant digits if set).
    pub(super) fn seal(&mut self, digits: u32, pool: &Pool) {
        let (lo, hi) = (self.lo as usize, self.hi as usize);
        let mut out = Vec::new();
        match &self.form {
            Form::Packed(_) => return,
            Form::Raw(p) => codec::encode_rounded(&p[lo..hi], digits, &mut out),
            Form::Pieces(_) => {
                let mut page = [0f64; BUFFER_CAP];
                self.values_into(&mut page);
                codec::encode_rounded(&page[lo..hi], digits, &mut out);
            }
        }
        if let Form::Raw(p) = std::mem::replace(&mut self.form, Form::Packed(out.into())) {
            pool.put(p);
        }
    }

    /// Appends `values` from slot offset `hi` on and encodes the whole frozen part again as
    /// one piece: a series no longer written keeps one header, not several.
    pub(super) fn append_as_one(&mut self, values: &[f64], digits: u32, pool: &Pool) {
        if values.is_empty() && pieces::count(self.pieces()) == 1 {
            return;
        }
        let (lo, hi, n) = (self.lo as usize, self.hi as usize, values.len());
        let mut page = [0f64; BUFFER_CAP];
        self.values_into(&mut page);
        page[hi..hi + n].copy_from_slice(values);
        let old = std::mem::replace(
            &mut self.form,
            Form::Pieces(pieces::new(&page[lo..hi + n], digits)),
        );
        if let Form::Raw(p) = old {
            pool.put(p);
        }
        self.hi += n as u16;
    }

    fn pieces(&self) -> &[u8] {
        match &self.form {
            Form::Pieces(b) => b,
            _ => &[],
        }
    }

    pub(super) fn release(self, pool: &Pool) {
        if let Form::Raw(p) = self.form {
            pool.put(p);
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        match &self.form {
            Form::Packed(b) | Form::Pieces(b) => b.len(),
            Form::Raw(_) => BUFFER_CAP * 8,
        }
    }

    /// Hands the slots `k - bstart .. end - bstart` (inside `lo..hi`) to `data`, or the
    /// constant to `fill` when the buffer is one value without gaps. `copy` false: `data`
    /// and `fill` add to `out` (`Chain::add_into`), so encoded slots are added in place.
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
            Form::Pieces(bytes) => {
                let a = a - self.lo as usize;
                if copy {
                    pieces::decode_range(bytes, a, out);
                } else {
                    pieces::each_in(bytes, a, out, |body, n, at, dst| {
                        add_encoded(body, n, at, dst, data)
                    });
                }
            }
            Form::Packed(bytes) => {
                if let Some(v) = codec::constant(bytes) {
                    return fill(out, v);
                }
                // Only the slots asked for are unpacked, straight into the answer. The
                // chain's own bytes; see `open`.
                let (lo, hi) = (self.lo as usize, self.hi as usize);
                if !copy {
                    return add_encoded(bytes, hi - lo, a - lo, out, data);
                }
                if codec::decode_range(bytes, hi - lo, a - lo, out).is_err() {
                    out.fill(f64::NAN);
                }
            }
        }
    }
}

/// Adds slots `a..a + out.len()` of the encoded buffer `bytes` of `n` slots to `out`: in
/// place when the codec can (no gaps, no exceptions), else decoded into the thread's scratch
/// array and added by `add`; a buffer that does not decode adds NaN.
fn add_encoded(
    bytes: &[u8],
    n: usize,
    a: usize,
    out: &mut [f64],
    add: &mut impl FnMut(&mut [f64], &[f64]),
) {
    let ok = match codec::add_range(bytes, n, a, out) {
        Ok(true) => true,
        Ok(false) => SCRATCH.with_borrow_mut(|tmp| {
            let part = &mut tmp[..out.len()];
            let ok = codec::decode_range(bytes, n, a, part).is_ok();
            if ok {
                add(out, part);
            }
            ok
        }),
        Err(_) => false,
    };
    if !ok {
        out.iter_mut().for_each(|x| *x += f64::NAN);
    }
}
