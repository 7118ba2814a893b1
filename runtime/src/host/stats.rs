//! Per-guest counters, registered in the process-wide registry under the label `guest`.

use std::sync::Arc;

use crate::telemetry::{Counter, registry};

/// What happened to one guest (all its instances, across reloads).
pub struct GuestStats {
    pub calls: Arc<Counter>,
    pub traps: Arc<Counter>,
    pub deadline_hits: Arc<Counter>,
    pub memory_refusals: Arc<Counter>,
    pub output_refusals: Arc<Counter>,
    pub instances: Arc<Counter>,
    pub quarantines: Arc<Counter>,
    pub skipped_quarantined: Arc<Counter>,
    pub log_lines_dropped: Arc<Counter>,
}

impl GuestStats {
    pub fn new(guest: &str) -> Arc<GuestStats> {
        let r = registry();
        let l = [("guest", guest)];
        Arc::new(GuestStats {
            calls: r.counter("wasmon_guest_calls_total", "Calls into the guest.", &l),
            traps: r.counter(
                "wasmon_guest_traps_total",
                "Calls that trapped (panic, unreachable, bad output).",
                &l,
            ),
            deadline_hits: r.counter(
                "wasmon_guest_deadline_hits_total",
                "Calls stopped at their CPU deadline.",
                &l,
            ),
            memory_refusals: r.counter(
                "wasmon_guest_memory_refusals_total",
                "Memory growths refused by the guest's memory cap.",
                &l,
            ),
            output_refusals: r.counter(
                "wasmon_guest_output_refusals_total",
                "Calls whose output exceeded the output cap.",
                &l,
            ),
            instances: r.counter(
                "wasmon_guest_instances_total",
                "Instances created (first one and every replacement).",
                &l,
            ),
            quarantines: r.counter(
                "wasmon_guest_quarantines_total",
                "Times the guest was quarantined.",
                &l,
            ),
            skipped_quarantined: r.counter(
                "wasmon_guest_calls_skipped_total",
                "Calls not made because the guest was quarantined.",
                &l,
            ),
            log_lines_dropped: r.counter(
                "wasmon_guest_log_lines_dropped_total",
                "Guest log lines dropped by the per-call cap.",
                &l,
            ),
        })
    }
}
