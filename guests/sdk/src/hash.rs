//! Hashing and comparing strings fast in WASM: FxHash (rustc's hasher) for the SDK's interning
//! and for guests' per-sample maps (short names and pointers need speed, not SipHash's flood
//! resistance: the keys come from the host's own samples), and [`Key`] / [`same`], which
//! compare [`Str`]s by address first.

use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::rc::Rc;

use crate::Str;

#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let r = chunks.remainder();
        // The tail is read as overlapping words, not copied into a buffer: a copy of variable
        // length is a `memory.copy` call in WASM, dearer than all the hashing.
        let tail = match r.len() {
            0 => return,
            1..=3 => {
                u64::from(r[0]) | u64::from(r[r.len() / 2]) << 8 | u64::from(r[r.len() - 1]) << 16
            }
            n => {
                let lo = u32::from_le_bytes(r[..4].try_into().unwrap());
                let hi = u32::from_le_bytes(r[n - 4..].try_into().unwrap());
                u64::from(lo) | u64::from(hi) << 32
            }
        };
        self.add(tail);
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    /// The last multiply leaves the low bits depending on the input's low bits only, and hash
    /// tables take buckets from the low bits (on wasm32 the 7-bit tags too): without this
    /// rotation `host0`..`host255` fall into a few dozen buckets (rustc-hash 2 does the same).
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

/// A [`Str`] map key compared by address first. The samples of a batch share one allocation
/// per distinct string, so a hit is a pointer comparison; `Rc<str>`'s own `==` has no such
/// shortcut (std's needs a sized `T`).
#[derive(Clone, Debug)]
pub struct Key(pub Str);

impl PartialEq for Key {
    #[inline]
    fn eq(&self, other: &Key) -> bool {
        same(&self.0, &other.0)
    }
}

impl Eq for Key {}

impl Hash for Key {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.hash(h)
    }
}

/// `a == b`, by address first, then by content without a call to `memcmp` (a byte loop
/// behind a call in WASM).
#[inline]
pub fn same(a: &Str, b: &Str) -> bool {
    Rc::ptr_eq(a, b) || bytes_eq(a.as_bytes(), b.as_bytes())
}

#[inline]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap());
    for (x, y) in (&mut wa).zip(&mut wb) {
        if word(x) != word(y) {
            return false;
        }
    }
    let (x, y) = (wa.remainder(), wb.remainder());
    // Overlapping words, as in `write`.
    match x.len() {
        0 => true,
        1..=3 => {
            x[0] == y[0] && x[x.len() / 2] == y[x.len() / 2] && x[x.len() - 1] == y[x.len() - 1]
        }
        n => {
            let half = |c: &[u8]| u32::from_le_bytes(c.try_into().unwrap());
            half(&x[..4]) == half(&y[..4]) && half(&x[n - 4..]) == half(&y[n - 4..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_content_when_addresses_differ() {
        let words = [
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "abcde",
            "abcdefgh",
            "abcdefghi",
            "memory.usage",
        ];
        for x in words {
            for y in words {
                assert_eq!(same(&Str::from(x), &Str::from(y)), x == y, "{x:?} vs {y:?}");
            }
        }
        // One differing byte anywhere is seen, at every length.
        for n in 1..20 {
            let a: String = (0..n).map(|i| (b'a' + i as u8) as char).collect();
            for i in 0..n {
                let mut b = a.clone().into_bytes();
                b[i] = b'#';
                let b = String::from_utf8(b).unwrap();
                assert!(
                    !same(&Str::from(a.as_str()), &Str::from(b.as_str())),
                    "{a} vs {b}"
                );
            }
        }
    }
}
