//! Shapes several groups share: instance lists kept under the instance limit
//! ([`MAX_INSTANCES`]), and rows of counters by instance name (fibre channel hosts, tapes,
//! serial ports) with the "how many" metric of their class (`hinv.nfchost`, `hinv.ntape`).
//!
//! A leaf: uses nothing of the agent but the namespace's value types and the indom numbers.

use crate::namespace::{Value, Values};

/// The most instances one indom holds (but see [`MAX_CELLS`]). PCP numbers instances with 32 bits, but a client
/// asking for a whole indom gets every name in one PDU, and no real host comes near this
/// (a 1,152-CPU machine has 1,152 CPUs, a large SAN a few thousand disks): more means a
/// runaway or hostile tree, which must not grow the daemon without bound. Groups stop
/// adding instances here; the agent cuts any metric's values here too (and says so once).
pub const MAX_INSTANCES: usize = 65_536;

/// The bound of the two indoms whose instances are cells of a table, a line on a CPU
/// (interrupts and softirqs per CPU): a real 1,152-CPU host's 90 interrupt lines are
/// 103,680 cells, so [`MAX_INSTANCES`] would cut a real host; a million still bounds a
/// hostile file.
pub const MAX_CELLS: usize = 1 << 20;

/// The most instances the values of a metric in `indom` may have.
pub fn limit(indom: Option<u32>) -> usize {
    use super::indom::{INTERRUPT_CPU, SOFTIRQ_CPU};
    match indom {
        Some(INTERRUPT_CPU | SOFTIRQ_CPU) => MAX_CELLS,
        _ => MAX_INSTANCES,
    }
}

/// The entry named `name` in `list`, made by `make` and appended when new; `None` when it
/// is new and `list` already holds [`MAX_INSTANCES`] entries.
pub fn instance<'a, T>(
    list: &'a mut Vec<T>,
    name: &str,
    name_of: impl Fn(&T) -> &str,
    make: impl FnOnce() -> T,
) -> Option<&'a mut T> {
    match list.iter().position(|e| name_of(e) == name) {
        Some(i) => Some(&mut list[i]),
        None if list.len() < MAX_INSTANCES => {
            list.push(make());
            list.last_mut()
        }
        None => None,
    }
}

/// Rows of `N` counters by instance name, in discovery order, and whether the class's
/// directory exists at all (a host with sysfs and no tapes has 0 tapes; without sysfs,
/// no value).
#[derive(Debug)]
pub struct Rows<const N: usize> {
    rows: Vec<(String, [u64; N])>,
    present: bool,
}

impl<const N: usize> Default for Rows<N> {
    fn default() -> Self {
        Rows {
            rows: Vec::new(),
            present: false,
        }
    }
}

impl<const N: usize> Rows<N> {
    /// Empties the rows for a new refresh; `present`: the class exists on this host.
    pub fn reset(&mut self, present: bool) {
        self.rows.clear();
        self.present = present;
    }

    /// Adds a row; past [`MAX_INSTANCES`] rows it is dropped.
    pub fn push(&mut self, name: String, row: [u64; N]) {
        if self.rows.len() < MAX_INSTANCES {
            self.rows.push((name, row));
        }
    }

    /// Each instance's counter `col` (nothing for a column past `N`).
    pub fn column(&self, col: usize, out: &mut Values) {
        if col < N {
            out.extend(
                self.rows
                    .iter()
                    .map(|(n, r)| (n.clone(), Value::Uint(r[col]))),
            );
        }
    }

    /// The number of rows as a singular value; no value when the class is absent.
    pub fn count(&self, out: &mut Values) {
        if self.present {
            out.push((String::new(), Value::Uint(self.rows.len() as u64)));
        }
    }

    /// A class's metric: `count_item` (its "how many", `hinv.nfchost`) the row count, any
    /// other item that column of each instance.
    pub fn values(&self, item: u32, count_item: u32, out: &mut Values) {
        if item == count_item {
            self.count(out);
        } else {
            self.column(item as usize, out);
        }
    }

    /// The sum of counter `col` over the rows (wrapping, as C's unsigned sums).
    pub fn total(&self, col: usize) -> u64 {
        self.rows.iter().fold(0u64, |a, (_, r)| {
            a.wrapping_add(r.get(col).copied().unwrap_or(0))
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_stop_at_the_limit_and_are_found_again() {
        let mut list: Vec<(String, u32)> = Vec::new();
        for i in 0..MAX_INSTANCES + 10 {
            let name = format!("i{i}");
            let got = instance(&mut list, &name, |e| &e.0, || (name.clone(), 0));
            assert_eq!(got.is_some(), i < MAX_INSTANCES, "{i}");
        }
        assert_eq!(list.len(), MAX_INSTANCES);
        // An existing name is still found when the list is full.
        instance(&mut list, "i7", |e| &e.0, || unreachable!())
            .unwrap()
            .1 = 9;
        assert_eq!(list[7].1, 9);
    }

    #[test]
    fn rows_count_columns_and_totals() {
        let mut r = Rows::<2>::default();
        let mut out = Values::new();
        r.count(&mut out);
        assert!(out.is_empty(), "absent class: no count");
        r.reset(true);
        r.count(&mut out);
        assert_eq!(out, [(String::new(), Value::Uint(0))]);
        r.push("a".into(), [1, u64::MAX]);
        r.push("b".into(), [2, 3]);
        let mut out = Values::new();
        r.column(1, &mut out);
        r.column(2, &mut out);
        assert_eq!(
            out,
            [
                ("a".to_string(), Value::Uint(u64::MAX)),
                ("b".to_string(), Value::Uint(3))
            ]
        );
        assert_eq!((r.total(0), r.total(1)), (3, 2));
    }
}
