//! The lease view against a real nats-server: an agent restarted within a lease under another
//! parent keeps its key in the bucket the whole time (it is renewed, never expires), so the
//! only way the others see the new parent is by reading the value again. Every view must
//! show every such change within a bounded number of refreshes once its value is two leases
//! old, however many agents, and read no value again sooner.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmon::fabric::ownership::{self, View};
use wasmon::fabric::wire::Lease;

use super::rig::Nats;
use crate::common::*;

/// More agents than one refresh re-reads, so the rotation is what is tested.
const AGENTS: usize = 40;

#[test]
fn a_parent_changed_under_a_renewed_lease_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start(free_port(), &dir.path().join("js"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = async_nats::connect(nats.url()).await.unwrap();
        let js = async_nats::jetstream::new(c);
        let b = ownership::open_buckets(&js, "reparent", Duration::from_secs(60), None)
            .await
            .unwrap();
        let put = |agent: String, parent: &str| {
            let lease = Lease {
                agent: agent.clone(),
                parent: Some(parent.to_string()),
                ..Lease::default()
            };
            let b = b.clone();
            async move {
                let v = serde_json::to_vec(&lease).unwrap();
                b.leases.put(&agent, v.into()).await.unwrap();
            }
        };
        let agents: Vec<String> = (0..AGENTS).map(|i| format!("x{i:02}")).collect();
        for a in &agents {
            put(a.clone(), "old").await;
        }
        let view = Arc::new(Mutex::new(View::default()));
        let t = Duration::from_secs(10);
        // The agents' lease as the views pace their re-reads by (the bucket keeps the keys
        // for a minute: this test renews nothing).
        let lease = Duration::from_millis(200);
        let stale = lease * ownership::REREAD_AFTER_LEASES;
        ownership::refresh(&b, &view, t, lease).await.unwrap();
        let parents = |want: &str| {
            let v = view.lock().unwrap();
            agents
                .iter()
                .filter(|a| v.leases[*a].lease.parent.as_deref() == Some(want))
                .count()
        };
        assert_eq!(parents("old"), AGENTS, "every new agent's lease is read");
        // Each agent renews under its new parent: the key is rewritten, never gone.
        for a in &agents {
            put(a.clone(), "new").await;
        }
        // A value read less than the re-read period ago is not read again: what re-reading
        // costs stays paced by the lease.
        ownership::refresh(&b, &view, t, lease).await.unwrap();
        assert_eq!(parents("new"), 0, "re-read before {stale:?}");
        tokio::time::sleep(stale).await;
        let mut refreshes = 0;
        while parents("new") < AGENTS {
            refreshes += 1;
            assert!(
                refreshes <= AGENTS,
                "after {refreshes} refreshes {} of {AGENTS} views show the new parent",
                parents("new")
            );
            ownership::refresh(&b, &view, t, lease).await.unwrap();
            // Each refresh moves some on: none is left behind while others are read twice.
            assert!(parents("new") > 0, "a refresh re-read no lease");
        }
        eprintln!("{AGENTS} parent changes seen after {refreshes} refreshes");
        assert!(
            refreshes <= AGENTS.div_ceil(ownership::REREADS_PER_REFRESH),
            "{refreshes} refreshes for {AGENTS} agents: the longest unread were not read first"
        );
    });
}
