//! The rate maths of one counter between two readings: wraps, saturation, clears, resets and
//! missed epochs. Pure functions, no state: the engine calls them on its slow path (anything
//! but "unchanged"). An increase that cannot be known is `Unknown`, never a negative or huge
//! number.

use super::counters::{NA, Width};

/// The increase of a counter between two readings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// Exactly this many units.
    Known(u64),
    /// Not knowable. `at_least` is a lower bound (a counter that saturated in the interval
    /// rose by at least `max - previous`), 0 when nothing is known.
    Unknown { at_least: u64 },
}

impl Delta {
    pub fn known(self) -> Option<u64> {
        match self {
            Delta::Known(d) => Some(d),
            Delta::Unknown { .. } => None,
        }
    }

    /// The smallest increase consistent with the readings.
    pub fn lower_bound(self) -> u64 {
        match self {
            Delta::Known(d) => d,
            Delta::Unknown { at_least } => at_least,
        }
    }
}

/// The increase from `prev` to `cur`.
///
/// - `cleared`: the counter was set to 0 right after `prev` was read (a clear the agent asked
///   for, acknowledged by the source), so the increase is `cur` itself.
/// - `reset`: the source knows the counter was reset at some unknown point since `prev`.
/// - `bound`: the most the counter can plausibly rise in the interval (`max_rate × seconds`,
///   so a missed epoch widens it). A 64-bit counter below its previous value wrapped if the
///   wrapped increase is within the bound; otherwise it was reset (cleared out of band,
///   rebooted). A known increase above the bound is not believed either.
pub fn delta(width: Width, prev: u64, cur: u64, cleared: bool, reset: bool, bound: u64) -> Delta {
    const NOTHING: Delta = Delta::Unknown { at_least: 0 };
    if cur == NA || (prev == NA && !cleared) || reset {
        return NOTHING;
    }
    let prev = if cleared { 0 } else { prev };
    let d = match width {
        Width::Wrap64 => {
            // Never confused with an increase: `cur < prev` is a wrap or a reset.
            cur.wrapping_sub(prev)
        }
        Width::Saturating(_) => {
            let max = width.max();
            if prev >= max {
                // Stuck since before: whatever happened is hidden.
                return NOTHING;
            }
            if cur < prev {
                // Cleared out of band (or the device restarted): the increase before the
                // clear is lost.
                return NOTHING;
            }
            if cur >= max {
                // Saturated during the interval.
                return Delta::Unknown {
                    at_least: max - prev,
                };
            }
            cur - prev
        }
    };
    if d > bound {
        // A reset that looks like a wrap, or a value from a confused source.
        return NOTHING;
    }
    Delta::Known(d)
}

/// The plausibility bound for an interval: `max_rate` units/s over `seconds`, at least 1.
#[inline]
pub fn bound(max_rate: f64, seconds: f64) -> u64 {
    let b = max_rate * seconds;
    if b >= u64::MAX as f64 {
        u64::MAX
    } else if b >= 1.0 {
        b as u64
    } else {
        1
    }
}

/// Whether a saturating counter should be cleared: at or above 75 % of its range (OpenSM's
/// PerfMgr rule), so it never reaches the top between two epochs at realistic rates.
pub const fn clear_level(width: Width) -> u64 {
    match width {
        Width::Wrap64 => u64::MAX,
        Width::Saturating(_) => {
            let max = width.max();
            // 75 % of the range, rounded up; at least 1 so an empty counter is never cleared.
            let l = max - max / 4;
            if l == 0 { 1 } else { l }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = u64::MAX;
    const S32: Width = Width::Saturating(32);
    const S16: Width = Width::Saturating(16);
    const S8: Width = Width::Saturating(8);
    const S4: Width = Width::Saturating(4);
    const W64: Width = Width::Wrap64;

    fn d(w: Width, prev: u64, cur: u64) -> Delta {
        delta(w, prev, cur, false, false, B)
    }

    #[test]
    fn plain_increase() {
        assert_eq!(d(W64, 100, 250), Delta::Known(150));
        assert_eq!(d(S32, 100, 250), Delta::Known(150));
        assert_eq!(d(S4, 3, 5), Delta::Known(2));
        assert_eq!(d(W64, 7, 7), Delta::Known(0));
    }

    #[test]
    fn a_64_bit_wrap_is_an_increase() {
        assert_eq!(
            delta(W64, u64::MAX - 10, 5, false, false, 1 << 40),
            Delta::Known(16)
        );
        assert_eq!(
            delta(W64, u64::MAX - 1, 0, false, false, 100),
            Delta::Known(2)
        );
    }

    #[test]
    fn a_drop_too_large_for_a_wrap_is_a_reset() {
        // 10^12 -> 3: wrapping would mean 2^64 - 10^12 units in one epoch.
        let bound = bound(4.0e10, 1.0);
        assert_eq!(
            delta(W64, 1_000_000_000_000, 3, false, false, bound),
            Delta::Unknown { at_least: 0 }
        );
    }

    #[test]
    fn an_implausible_increase_is_invalid_not_huge() {
        assert_eq!(
            delta(W64, 0, 1 << 62, false, false, bound(4.0e10, 1.0)),
            Delta::Unknown { at_least: 0 }
        );
    }

    #[test]
    fn a_missed_epoch_widens_the_bound() {
        // 6e10 units: impossible in one second at 4e10/s, possible in two.
        let prev = u64::MAX - 1_000;
        let cur = 60_000_000_000 - 1_001;
        assert_eq!(
            delta(W64, prev, cur, false, false, bound(4.0e10, 1.0)),
            Delta::Unknown { at_least: 0 }
        );
        assert_eq!(
            delta(W64, prev, cur, false, false, bound(4.0e10, 2.0)),
            Delta::Known(60_000_000_000)
        );
    }

    #[test]
    fn saturation_is_sticky_and_unknowable() {
        let max = u32::MAX as u64;
        // Saturated during the interval: at least the headroom, not more is known.
        assert_eq!(d(S32, max - 100, max), Delta::Unknown { at_least: 100 });
        // Stuck at the top: nothing known, even if unchanged.
        assert_eq!(d(S32, max, max), Delta::Unknown { at_least: 0 });
        for (w, max) in [(S4, 15), (S8, 255), (S16, 65535)] {
            assert_eq!(d(w, max - 1, max), Delta::Unknown { at_least: 1 });
            assert_eq!(d(w, max, max), Delta::Unknown { at_least: 0 });
            assert_eq!(d(w, 0, max - 1), Delta::Known(max - 1));
        }
    }

    #[test]
    fn a_clear_the_agent_asked_for_is_exact() {
        // Read 3e9, cleared right after, now 500: 500 units in the interval.
        assert_eq!(
            delta(S32, 3_000_000_000, 500, true, false, B),
            Delta::Known(500)
        );
        // Even from saturation.
        assert_eq!(
            delta(S32, u32::MAX as u64, 7, true, false, B),
            Delta::Known(7)
        );
        assert_eq!(delta(S4, 15, 0, true, false, B), Delta::Known(0));
    }

    #[test]
    fn out_of_band_clears_and_resets_are_invalid() {
        // A saturating counter below its previous value was cleared by someone else.
        assert_eq!(d(S32, 1000, 10), Delta::Unknown { at_least: 0 });
        assert_eq!(d(S16, 9, 0), Delta::Unknown { at_least: 0 });
        // A reset the source reports.
        assert_eq!(
            delta(S32, 10, 20, false, true, B),
            Delta::Unknown { at_least: 0 }
        );
    }

    #[test]
    fn unavailable_values_are_unknown() {
        assert_eq!(d(S32, NA, 5), Delta::Unknown { at_least: 0 });
        assert_eq!(d(S32, 5, NA), Delta::Unknown { at_least: 0 });
        // After a clear the previous value does not matter.
        assert_eq!(delta(S32, NA, 5, true, false, B), Delta::Known(5));
    }

    #[test]
    fn clear_at_three_quarters() {
        assert_eq!(clear_level(S32), 3_221_225_472);
        assert_eq!(clear_level(S4), 12);
        assert_eq!(clear_level(S8), 192);
        assert_eq!(clear_level(W64), u64::MAX);
    }

    #[test]
    fn bounds() {
        assert_eq!(bound(10.0, 0.5), 5);
        assert_eq!(bound(1e30, 10.0), u64::MAX);
        assert_eq!(bound(0.1, 1.0), 1);
    }
}
