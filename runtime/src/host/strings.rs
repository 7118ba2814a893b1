//! The host's half of the string table it shares with one guest instance (the protocol is in
//! `wit/types.wit`): strings cross the boundary once per instance, then travel as ids. It
//! lives in the instance's `Store`, so an instance thrown away after a failure takes its
//! table with it and the fresh one starts empty on both sides.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::{MAX_OUTPUT_STRING_BYTES, MAX_STRING_TABLE};
use crate::sample::Name;

/// Strings known to both sides, by id and by text.
#[derive(Clone)]
pub struct StringTable {
    by_id: Vec<Arc<str>>,
    /// The interned [`Name`] of each id that has been a sample's name or unit (lazily).
    names: Vec<Option<Name>>,
    /// Id + 1 of each [`Name`] the table holds, by the name's index (0: not yet).
    by_name: Vec<u32>,
    by_text: HashMap<Arc<str>, u32, foldhash::fast::FixedState>,
    /// Samples of a source share their resources' allocations batch after batch, so most
    /// look-ups are answered by address, without hashing the text: a 4-way set-associative
    /// cache of (address, id), a cache line per set. (Direct-mapped, and then 2-way, a few of
    /// 256 resources scattered over the heap kept evicting each other every batch.)...
    by_ptr: Box<[Set]>,
    /// ...and beside it, out of the hot lines, a clone of each cached `Arc`, so that an
    /// address in the cache cannot be freed and reused for other text while its slot lives.
    pinned: Box<[[Option<Arc<str>>; WAYS]]>,
}

/// Sets of the address cache: a source's few hundred resources stay cached (2,048 slots,
/// 32 KiB); more collide and fall back to hashing.
const SETS: usize = 512;
const WAYS: usize = 4;

#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Set([(usize, u32); WAYS]);

/// The set of address `p`: a multiplicative hash, as heap addresses are anything but uniform.
#[inline]
fn set(p: usize) -> usize {
    ((p as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SETS.trailing_zeros())) as usize
}

impl Default for StringTable {
    fn default() -> Self {
        StringTable {
            by_id: Vec::new(),
            names: Vec::new(),
            by_name: Vec::new(),
            by_text: HashMap::default(),
            by_ptr: vec![Set::default(); SETS].into_boxed_slice(),
            pinned: vec![Default::default(); SETS].into_boxed_slice(),
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
        let ways = &self.by_ptr[set(addr)].0;
        for &(a, i) in ways {
            if a == addr {
                return i;
            }
        }
        self.id_by_text(s, new)
    }

    /// The slow path of [`Self::id`], kept out of line so that the fast one inlines.
    #[cold]
    #[inline(never)]
    fn id_by_text(&mut self, s: &Arc<str>, new: &mut Vec<String>) -> u32 {
        let i = match self.by_text.get(&**s) {
            Some(&i) => i,
            None => self.push(s.clone(), None, new),
        };
        // The set's entries move over by one; the oldest is evicted.
        let k = set(s.as_ptr() as usize);
        self.by_ptr[k].0.rotate_right(1);
        self.pinned[k].rotate_right(1);
        self.by_ptr[k].0[0] = (s.as_ptr() as usize, i);
        self.pinned[k][0] = Some(s.clone());
        i
    }

    fn push(&mut self, s: Arc<str>, name: Option<Name>, new: &mut Vec<String>) -> u32 {
        let i = self.by_id.len() as u32;
        new.push(s.to_string());
        self.by_text.insert(s.clone(), i);
        self.by_id.push(s);
        self.names.push(name);
        i
    }

    /// The id of a name or unit, by the name's index.
    #[inline]
    pub fn name_id(&mut self, n: Name, new: &mut Vec<String>) -> u32 {
        match self.by_name.get(n.index()) {
            Some(&i) if i != 0 => i - 1,
            _ => self.name_id_by_text(n, new),
        }
    }

    #[cold]
    #[inline(never)]
    fn name_id_by_text(&mut self, n: Name, new: &mut Vec<String>) -> u32 {
        let i = match self.by_text.get(n.as_str()) {
            Some(&i) => {
                self.names[i as usize] = Some(n);
                i
            }
            None => self.push(n.as_str().into(), Some(n), new),
        };
        if self.by_name.len() <= n.index() {
            self.by_name.resize(n.index() + 1, 0);
        }
        self.by_name[n.index()] = i + 1;
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
            self.names.push(None);
        }
        Ok(())
    }

    /// Checks that `ids` are strings of the table and interns those not yet used as names,
    /// so that [`Self::names`] has each of them.
    pub fn intern_names(&mut self, ids: impl Iterator<Item = u32>) -> Result<(), String> {
        for (i, id) in ids.enumerate() {
            match self.names.get(id as usize) {
                Some(Some(_)) => {}
                Some(None) => {
                    let n = Name::try_new(&self.by_id[id as usize]).map_err(|e| e.to_string())?;
                    self.names[id as usize] = Some(n);
                }
                None => return Err(self.unknown(i, id)),
            }
        }
        Ok(())
    }

    /// Checks that `ids` are strings of the table.
    pub fn check(&self, ids: impl Iterator<Item = u32>) -> Result<(), String> {
        let len = self.by_id.len();
        match ids.enumerate().find(|&(_, id)| id as usize >= len) {
            Some((i, id)) => Err(self.unknown(i, id)),
            None => Ok(()),
        }
    }

    fn unknown(&self, i: usize, id: u32) -> String {
        format!("sample {i} refers to string {id} of {}", self.by_id.len())
    }

    /// Every string, by id.
    pub fn all(&self) -> &[Arc<str>] {
        &self.by_id
    }

    /// The interned name of each id that [`Self::intern_names`] has seen.
    pub fn names(&self) -> &[Option<Name>] {
        &self.names
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
