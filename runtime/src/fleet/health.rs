//! What each daemon reports into the health bucket, and the fleet at a glance built from it
//! (`wasmon fleet status`, `GET /api/fleet`): which version runs on how many daemons, which
//! refused it and why, which rolled it back. Pure data: reading the bucket is `buckets`'.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::manifest::{Manifest, Reason};

/// A daemon's own entry (`NODE`): who it is and what it follows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DaemonInfo {
    pub node: String,
    pub groups: Vec<String>,
    /// Whether trusted-keys is set (false: unsigned components are accepted).
    pub signed_only: bool,
    pub version: String,
    /// Seconds since the Unix epoch of the last report.
    pub updated: i64,
}

/// A version a daemon refused (or rolled back), and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Refused {
    pub hash: String,
    /// The refused release's sequence (format 2), to tell a release from the same bytes
    /// published again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    pub reason: Reason,
    pub detail: String,
    pub at: i64,
}

/// A rollback: from the version that failed to the one it ran before (`None`: the guest's
/// local version, from guests-dir or bundled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Rollback {
    pub from: String,
    pub to: Option<String>,
    pub reason: Reason,
    pub at: i64,
    /// What the failed version saw between its swap and the rollback.
    #[serde(default)]
    pub calls: u64,
    #[serde(default)]
    pub failures: u64,
    #[serde(default)]
    pub quarantines: u64,
}

/// `NODE.GUEST`: one guest on one daemon.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct GuestHealth {
    pub node: String,
    pub guest: String,
    /// The fleet version it runs (`None`: its local version).
    pub running: Option<String>,
    /// When that version was swapped in.
    pub since: i64,
    /// Whether the running config uses the guest at all (a release for a guest no stage or
    /// agent names is verified and kept, not run).
    pub used: bool,
    /// Since the swap: calls into the guest, failed calls, quarantines.
    pub calls: u64,
    pub failures: u64,
    pub quarantines: u64,
    /// Refused versions, newest last (bounded).
    #[serde(default)]
    pub refused: Vec<Refused>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<Rollback>,
    pub updated: i64,
}

/// Refusals remembered per guest: enough to show the last ones, bounded for a hostile
/// publisher that writes a new bad version every second.
pub const REFUSALS_KEPT: usize = 8;

/// One version of a guest across the fleet.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct VersionView {
    pub hash: String,
    /// Releases naming it (group -> publisher, time, signer).
    pub releases: Vec<Manifest>,
    pub running: Vec<String>,
    pub refused: Vec<NodeRefusal>,
    pub rolled_back: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeRefusal {
    pub node: String,
    pub reason: Reason,
    pub detail: String,
}

/// The fleet at a glance.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Status {
    pub fleet: String,
    pub daemons: Vec<DaemonView>,
    /// Guest -> its versions.
    pub guests: BTreeMap<String, Vec<VersionView>>,
    /// Release entries that are not manifests (key -> why).
    pub malformed: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct DaemonView {
    #[serde(flatten)]
    pub info: DaemonInfo,
    pub guests: Vec<GuestHealth>,
}

fn version<'a>(
    versions: &'a mut BTreeMap<(String, String), VersionView>,
    guest: &str,
    hash: &str,
) -> &'a mut VersionView {
    versions
        .entry((guest.to_string(), hash.to_string()))
        .or_insert_with(|| VersionView {
            hash: hash.to_string(),
            ..Default::default()
        })
}

impl Status {
    /// Builds the view from the releases and health buckets' entries.
    pub fn build(
        fleet: &str,
        releases: &[(String, Vec<u8>)],
        health: &[(String, Vec<u8>)],
    ) -> Status {
        let mut s = Status {
            fleet: fleet.to_string(),
            ..Default::default()
        };
        let mut daemons: BTreeMap<String, DaemonView> = BTreeMap::new();
        for (key, v) in health {
            match key.split_once('.') {
                None => {
                    if let Ok(info) = serde_json::from_slice::<DaemonInfo>(v) {
                        daemons.entry(key.clone()).or_default().info = info;
                    }
                }
                Some((node, _)) => {
                    if let Ok(h) = serde_json::from_slice::<GuestHealth>(v) {
                        let d = daemons.entry(node.to_string()).or_default();
                        d.info.node = node.to_string();
                        d.guests.push(h);
                    }
                }
            }
        }
        let mut versions: BTreeMap<(String, String), VersionView> = BTreeMap::new();
        for (key, v) in releases {
            match Manifest::parse(v) {
                Ok(m) => version(&mut versions, &m.guest.clone(), &m.sha256.clone())
                    .releases
                    .push(m),
                Err(e) => {
                    s.malformed.insert(key.clone(), e.to_string());
                }
            }
        }
        for d in daemons.values() {
            for h in &d.guests {
                if let Some(r) = &h.running {
                    version(&mut versions, &h.guest, r)
                        .running
                        .push(h.node.clone());
                }
                for r in &h.refused {
                    version(&mut versions, &h.guest, &r.hash)
                        .refused
                        .push(NodeRefusal {
                            node: h.node.clone(),
                            reason: r.reason,
                            detail: r.detail.clone(),
                        });
                }
                if let Some(rb) = &h.rolled_back {
                    version(&mut versions, &h.guest, &rb.from)
                        .rolled_back
                        .push(h.node.clone());
                }
            }
        }
        for ((guest, _), v) in versions {
            s.guests.entry(guest).or_default().push(v);
        }
        for v in s.guests.values_mut() {
            // Newest release first; versions nobody published (local) last.
            v.sort_by_key(|x| {
                std::cmp::Reverse(x.releases.iter().map(|m| m.published_at).max().unwrap_or(0))
            });
        }
        s.daemons = daemons.into_values().collect();
        s
    }

    /// The status as `wasmon fleet status` prints it.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let n = self.daemons.len();
        let _ = writeln!(out, "fleet {}: {n} daemon(s)", self.fleet);
        for (guest, versions) in &self.guests {
            let _ = writeln!(out, "\n{guest}");
            for v in versions {
                let groups: Vec<&str> = v.releases.iter().map(|m| m.group.as_str()).collect();
                let signed = v.releases.iter().any(|m| m.signature.is_some());
                let _ = writeln!(
                    out,
                    "  {}  {:<12} {}  running {}/{n}  refused {}  rolled back {}",
                    &v.hash[..v.hash.len().min(12)],
                    if groups.is_empty() {
                        "(not published)".to_string()
                    } else {
                        groups.join(",")
                    },
                    if signed { "signed  " } else { "unsigned" },
                    v.running.len(),
                    v.refused.len(),
                    v.rolled_back.len()
                );
                for r in &v.refused {
                    let _ = writeln!(
                        out,
                        "      refused on {}: {}: {}",
                        r.node,
                        r.reason.as_str(),
                        r.detail
                    );
                }
                for node in &v.rolled_back {
                    let _ = writeln!(out, "      rolled back on {node}");
                }
            }
        }
        let _ = writeln!(out, "\ndaemons");
        for d in &self.daemons {
            let _ = writeln!(
                out,
                "  {}  groups [{}]{}",
                d.info.node,
                d.info.groups.join(", "),
                if d.info.signed_only {
                    ""
                } else {
                    "  (accepts unsigned)"
                }
            );
            for h in &d.guests {
                let _ = writeln!(
                    out,
                    "    {:<16} {}  calls {} failures {} quarantines {}",
                    h.guest,
                    h.running
                        .as_deref()
                        .map(|r| &r[..r.len().min(12)])
                        .unwrap_or("local"),
                    h.calls,
                    h.failures,
                    h.quarantines
                );
                if let Some(rb) = &h.rolled_back {
                    let _ = writeln!(
                        out,
                        "      rolled back {} -> {} ({}: {} calls, {} failed, {} quarantines)",
                        &rb.from[..rb.from.len().min(12)],
                        rb.to
                            .as_deref()
                            .map(|r| &r[..r.len().min(12)])
                            .unwrap_or("local"),
                        rb.reason.as_str(),
                        rb.calls,
                        rb.failures,
                        rb.quarantines
                    );
                }
            }
        }
        for (k, why) in &self.malformed {
            let _ = writeln!(out, "malformed release {k}: {why}");
        }
        out
    }
}
