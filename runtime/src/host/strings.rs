//! The host's half of the string table it shares with one guest instance (the protocol is in
//! `wit/types.wit`): strings cross the boundary once per instance, then travel as ids. It
//! lives in the instance's `Store`, so an instance thrown away after a failure takes its
//! table with it and the fresh one starts empty on both sides.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::{MAX_OUTPUT_STRING_BYTES, MAX_STRING_TABLE};

/// Strings known to both sides, by id and by text.
pub struct StringTable {
    by_id: Vec<Arc<str>>,
    by_text: HashMap<Arc<str>, u32, foldhash::fast::FixedState>,
    /// Samples of a source share their strings' allocations batch after batch, so most
    /// look-ups are answered by address, without hashing the text: a direct-mapped cache of
    /// (address, id), small enough to stay in L1...
    by_ptr: Box<[(usize, u32)]>,
    /// ...and beside it, out of the hot lines, a clone of each cached `Arc`, so that an
    /// address in the cache cannot be freed and reused for other text while its slot lives.
    pinned: Box<[Option<Arc<str>>]>,
}

/// Slots of the address cache: a source's names, units and a few hundred resources stay
/// cached; more collide and fall back to hashing.
const PTR_CACHE: usize = 1024;

#[inline]
fn slot(p: usize) -> usize {
    ((p >> 4) ^ (p >> 14)) & (PTR_CACHE - 1)
}

impl Default for StringTable {
    fn default() -> Self {
        StringTable {
            by_id: Vec::new(),
            by_text: HashMap::default(),
            by_ptr: vec![(0, 0); PTR_CACHE].into_boxed_slice(),
            pinned: vec![None; PTR_CACHE].into_boxed_slice(),
        }
    }
}

impl StringTable {
    /// Call before encoding a batch for the guest: clears a table grown past its cap (a
    /// source whose resources keep changing, such as pids) and says so, for the batch's
    /// `reset` flag.
    pub fn begin_send(&mut self) -> bool {
        if self.by_id.len() < MAX_STRING_TABLE {
            return false;
        }
        *self = StringTable::default();
        true
    }

    /// The id of `s`, appending it (and to `new`, the batch's `new-strings`) when unknown.
    #[inline]
    pub fn id(&mut self, s: &Arc<str>, new: &mut Vec<String>) -> u32 {
        let addr = s.as_ptr() as usize;
        let (cached, i) = self.by_ptr[slot(addr)];
        if cached == addr {
            return i;
        }
        self.id_by_text(s, new)
    }

    /// The slow path of [`Self::id`], kept out of line so that the fast one inlines.
    #[cold]
    #[inline(never)]
    fn id_by_text(&mut self, s: &Arc<str>, new: &mut Vec<String>) -> u32 {
        let i = match self.by_text.get(&**s) {
            Some(&i) => i,
            None => {
                let i = self.by_id.len() as u32;
                self.by_id.push(s.clone());
                self.by_text.insert(s.clone(), i);
                new.push(s.to_string());
                i
            }
        };
        let k = slot(s.as_ptr() as usize);
        self.by_ptr[k] = (s.as_ptr() as usize, i);
        self.pinned[k] = Some(s.clone());
        i
    }

    /// Appends the strings a guest sent, refusing a flood.
    pub fn receive(&mut self, new: Vec<String>) -> Result<(), String> {
        let bytes: usize = new.iter().map(String::len).sum();
        if bytes > MAX_OUTPUT_STRING_BYTES {
            return Err(format!(
                "{bytes} bytes of new strings returned, the cap is {MAX_OUTPUT_STRING_BYTES}"
            ));
        }
        if self.by_id.len() + new.len() > 4 * MAX_STRING_TABLE {
            return Err(format!(
                "the string table would grow past {} entries",
                4 * MAX_STRING_TABLE
            ));
        }
        for s in new {
            let s: Arc<str> = s.into();
            let i = self.by_id.len() as u32;
            self.by_text.entry(s.clone()).or_insert(i);
            self.by_id.push(s);
        }
        Ok(())
    }

    /// Every string, by id.
    pub fn all(&self) -> &[Arc<str>] {
        &self.by_id
    }

    pub fn get(&self, id: u32) -> Result<&Arc<str>, String> {
        self.by_id.get(id as usize).ok_or_else(|| {
            format!(
                "string id {id} is past the table's {} entries",
                self.by_id.len()
            )
        })
    }
}
