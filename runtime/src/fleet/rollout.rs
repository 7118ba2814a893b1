//! The rollout's decisions, as pure functions: which release a daemon runs for a guest (the
//! newest it follows), and whether a freshly swapped version is rolled back. No I/O, so the
//! rules are tested on their own.

use std::collections::BTreeMap;
use std::time::Duration;

use super::manifest::Manifest;

/// Releases as the daemon saw them: key (`GUEST.GROUP`) -> (bucket revision, manifest).
pub type Releases = BTreeMap<String, (u64, Manifest)>;

/// The release of `guest` this daemon runs: among those for a group it follows, the one
/// written last (the highest bucket revision: one server-assigned sequence, no clocks). So a
/// canary release overrides `all` on canary daemons until `all` is published again.
pub fn desired<'a>(
    releases: &'a Releases,
    guest: &str,
    follows: impl Fn(&str) -> bool,
) -> Option<&'a Manifest> {
    releases
        .values()
        .filter(|(_, m)| m.guest == guest && follows(&m.group))
        .max_by_key(|(rev, _)| *rev)
        .map(|(_, m)| m)
}

/// What the daemon saw of a version since it was swapped in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub calls: u64,
    pub failures: u64,
    pub quarantines: u64,
    /// A part running it is quarantined right now.
    pub quarantined_now: bool,
}

impl Usage {
    /// Counters since `baseline` (counters are cumulative per guest name across reloads).
    pub fn since(&self, baseline: &Usage) -> Usage {
        Usage {
            calls: self.calls.saturating_sub(baseline.calls),
            failures: self.failures.saturating_sub(baseline.failures),
            quarantines: self.quarantines.saturating_sub(baseline.quarantines),
            quarantined_now: self.quarantined_now,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Inside the window and healthy so far: keep watching.
    Watch,
    /// The window passed without a quarantine: the version stays.
    Settled,
    /// Quarantined inside the window: back to the version it replaced.
    RollBack,
}

/// A version quarantined within `window` of its swap is rolled back; once the window has
/// passed it is the daemon's version like any other (later quarantines are the guest's
/// ordinary quarantine, released on schedule, not a rollback).
pub fn judge(elapsed: Duration, window: Duration, since_swap: &Usage) -> Verdict {
    if elapsed > window {
        return Verdict::Settled;
    }
    if since_swap.quarantines > 0 || since_swap.quarantined_now {
        Verdict::RollBack
    } else {
        Verdict::Watch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(guest: &str, group: &str, hash: char) -> Manifest {
        Manifest {
            guest: guest.into(),
            group: group.into(),
            sha256: hash.to_string().repeat(64),
            size: 1,
            publisher: "p".into(),
            published_at: 0,
            format: 1,
            sequence: None,
            key: None,
            signature: None,
        }
    }

    #[test]
    fn the_newest_release_of_a_followed_group_wins() {
        let mut r = Releases::new();
        r.insert("x.all".into(), (3, m("x", "all", 'a')));
        r.insert("x.canary".into(), (7, m("x", "canary", 'b')));
        r.insert("y.all".into(), (9, m("y", "all", 'c')));
        let canary = |g: &str| g == "all" || g == "canary";
        let other = |g: &str| g == "all";
        assert_eq!(desired(&r, "x", canary).unwrap().sha256.as_bytes()[0], b'b');
        assert_eq!(desired(&r, "x", other).unwrap().sha256.as_bytes()[0], b'a');
        // Published to all again: everyone, canaries too.
        r.insert("x.all".into(), (11, m("x", "all", 'd')));
        assert_eq!(desired(&r, "x", canary).unwrap().sha256.as_bytes()[0], b'd');
        assert!(desired(&r, "z", canary).is_none());
        assert!(desired(&r, "x", |g| g == "rack7").is_none());
    }

    #[test]
    fn quarantine_inside_the_window_rolls_back() {
        let w = Duration::from_secs(60);
        let base = Usage {
            calls: 100,
            failures: 2,
            quarantines: 1,
            quarantined_now: false,
        };
        let now = Usage {
            calls: 150,
            failures: 2,
            quarantines: 1,
            quarantined_now: false,
        };
        assert_eq!(
            judge(Duration::from_secs(5), w, &now.since(&base)),
            Verdict::Watch
        );
        let bad = Usage {
            quarantines: 2,
            ..now
        };
        assert_eq!(
            judge(Duration::from_secs(5), w, &bad.since(&base)),
            Verdict::RollBack
        );
        let now_q = Usage {
            quarantined_now: true,
            ..now
        };
        assert_eq!(
            judge(Duration::from_secs(5), w, &now_q.since(&base)),
            Verdict::RollBack
        );
        // After the window a quarantine is the guest's own business.
        assert_eq!(
            judge(Duration::from_secs(61), w, &bad.since(&base)),
            Verdict::Settled
        );
        // Failures without a quarantine are not a rollback (a guest may fail a bad batch).
        let failing = Usage { failures: 5, ..now };
        assert_eq!(
            judge(Duration::from_secs(1), w, &failing.since(&base)),
            Verdict::Watch
        );
    }
}
