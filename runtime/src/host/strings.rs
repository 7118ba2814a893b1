//! The host's half of the string table it shares with one guest instance (the protocol is in
//! `wit/types.wit`): strings cross the boundary once per instance, then travel as ids. It
//! lives in the instance's `Store`, so an instance thrown away after a failure takes its
//! table with it and the fresh one starts empty on both sides.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::{MAX_OUTPUT_STRING_BYTES, MAX_STRING_TABLE};

/// Strings known to both sides, by id and by text.
#[derive(Default)]
pub struct StringTable {
    by_id: Vec<Arc<str>>,
    by_text: HashMap<Arc<str>, u32, foldhash::fast::FixedState>,
}

impl StringTable {
    /// Call before encoding a batch for the guest: clears a table grown past its cap (a
    /// source whose resources keep changing, such as pids) and says so, for the batch's
    /// `reset` flag.
    pub fn begin_send(&mut self) -> bool {
        if self.by_id.len() < MAX_STRING_TABLE {
            return false;
        }
        self.by_id.clear();
        self.by_text.clear();
        true
    }

    /// The id of `s`, appending it (and to `new`, the batch's `new-strings`) when unknown.
    pub fn id(&mut self, s: &Arc<str>, new: &mut Vec<String>) -> u32 {
        if let Some(&i) = self.by_text.get(&**s) {
            return i;
        }
        let i = self.by_id.len() as u32;
        self.by_id.push(s.clone());
        self.by_text.insert(s.clone(), i);
        new.push(s.to_string());
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

    pub fn get(&self, id: u32) -> Result<&Arc<str>, String> {
        self.by_id.get(id as usize).ok_or_else(|| {
            format!(
                "string id {id} is past the table's {} entries",
                self.by_id.len()
            )
        })
    }
}
