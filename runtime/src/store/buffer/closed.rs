//! A chain's closed buffers: encoded by `codec`, or (after a late write landed in one) a raw
//! page until the chain encodes it again, or the open buffer's raw slots of a block that just
//! closed; also the frozen part of the open block (`pieces`); reading a range of one. Owns the closed forms; may not touch the open buffer or the
//! chain's grid.

use super::form::{Form, Owned, Repr};
use super::open::Buf;
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
/// 16 bytes (see `form`); `repr(C)` with the contents' pointer first, which `older` tells
/// from its heap slice's pointer.
#[repr(C)]
pub(crate) struct Closed {
    repr: Repr,
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
}

impl Owned {
    /// Gives a raw page or tail back to the pool.
    fn release(self, pool: &Pool) {
        match self {
            Owned::Raw(p) => pool.put(p),
            Owned::Tail(t) => t.release(Some(pool)),
            Owned::Packed(_) | Owned::Pieces(_) => {}
        }
    }
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
            repr: Repr::new(Owned::Raw(page)),
        }
    }

    /// A closed buffer of the open buffer's raw slots (its block just closed; encoded by the
    /// next pass).
    pub(super) fn from_head(head: Buf) -> Closed {
        Closed {
            block: head.block,
            lo: head.lo(),
            hi: head.hi,
            repr: Repr::new(Owned::Tail(head)),
        }
    }

    /// A closed buffer of the encoded slots `lo..hi`.
    #[cfg(test)]
    pub(super) fn packed(block: i32, lo: u16, hi: u16, bytes: Box<[u8]>) -> Closed {
        Closed {
            block,
            lo,
            hi,
            repr: Repr::new(Owned::Packed(bytes)),
        }
    }

    /// The frozen part of the head's block: `values` from slot offset `lo` (rounded to
    /// `digits` significant digits if set).
    pub(super) fn frozen(block: i32, lo: u16, values: &[f64], digits: u32) -> Closed {
        Closed {
            block,
            lo,
            hi: lo + values.len() as u16,
            repr: Repr::new(Owned::Pieces(pieces::new(values, digits))),
        }
    }

    /// Appends `values` from slot offset `hi` on (the head's slots being frozen; `merge`: as
    /// `pieces::append`).
    pub(super) fn append(&mut self, values: &[f64], merge: bool, digits: u32, pool: &Pool) {
        let (at, n) = (self.hi as usize, values.len());
        match self.repr.get() {
            Form::Pieces(b) => {
                let mut b: Box<[u8]> = b.into();
                pieces::append(&mut b, values, merge, digits);
                self.repr = Repr::new(Owned::Pieces(b));
            }
            _ => self.open(pool)[at..at + n].copy_from_slice(values),
        }
        self.hi += n as u16;
    }

    /// Slots `lo..hi` into `page` at their offsets.
    pub(super) fn values_into(&self, page: &mut [f64; BUFFER_CAP]) {
        let (lo, hi) = (self.lo as usize, self.hi as usize);
        match self.repr.get() {
            Form::Raw(p) => page[lo..hi].copy_from_slice(&p[lo..hi]),
            Form::Tail(t) => page[lo..hi].copy_from_slice(t.values()),
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
            repr: Repr::new(Owned::Packed(bytes.into())),
        })
    }

    /// The encoded values (encoding a raw one now).
    pub(crate) fn encoded(&self) -> std::borrow::Cow<'_, [u8]> {
        match self.repr.get() {
            Form::Packed(b) => std::borrow::Cow::Borrowed(b),
            Form::Raw(p) => {
                let mut out = Vec::new();
                codec::encode(&p[self.lo as usize..self.hi as usize], &mut out);
                std::borrow::Cow::Owned(out)
            }
            Form::Tail(t) => {
                let mut out = Vec::new();
                codec::encode(t.values(), &mut out);
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
    fn open(&mut self, pool: &Pool) -> &mut [f64; BUFFER_CAP] {
        if !matches!(self.repr.get(), Form::Raw(_)) {
            let mut page = pool.get();
            // Bytes this chain encoded itself; a failure would be a codec bug, and the
            // slots then read as gaps rather than as wrong values.
            self.values_into(&mut page);
            self.replace(Owned::Raw(page), pool);
        }
        self.repr.raw_mut().expect("opened above")
    }

    /// Puts `new` in place of the contents, giving a raw page or tail back to the pool.
    fn replace(&mut self, new: Owned, pool: &Pool) {
        std::mem::replace(&mut self.repr, Repr::new(new))
            .take()
            .release(pool);
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
        match self.repr.get() {
            Form::Packed(_) => return,
            Form::Raw(p) => codec::encode_rounded(&p[lo..hi], digits, &mut out),
            Form::Tail(t) => codec::encode_rounded(t.values(), digits, &mut out),
            Form::Pieces(_) => {
                let mut page = [0f64; BUFFER_CAP];
                self.values_into(&mut page);
                codec::encode_rounded(&page[lo..hi], digits, &mut out);
            }
        }
        self.replace(Owned::Packed(out.into()), pool);
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
        self.replace(Owned::Pieces(pieces::new(&page[lo..hi + n], digits)), pool);
        self.hi += n as u16;
    }

    fn pieces(&self) -> &[u8] {
        match self.repr.get() {
            Form::Pieces(b) => b,
            _ => &[],
        }
    }

    pub(super) fn release(self, pool: &Pool) {
        self.repr.take().release(pool);
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.repr.heap_bytes()
    }

    /// The contents, borrowed.
    #[cfg(test)]
    pub(super) fn form(&self) -> Form<'_> {
        self.repr.get()
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
        match self.repr.get() {
            Form::Raw(p) => data(out, &p[a..b]),
            Form::Tail(t) => {
                let lo = self.lo as usize;
                data(out, &t.values()[a - lo..b - lo])
            }
            Form::Pieces(bytes) => {
                let a = a - self.lo as usize;
                if copy {
                    pieces::decode_range(bytes, a, out);
                } else {
                    pieces::each_in(bytes, a, out, |body, n, at, dst| {
                        match codec::constant(body) {
                            Some(v) => fill(dst, v),
                            None => add_encoded(body, n, at, dst, data),
                        }
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
