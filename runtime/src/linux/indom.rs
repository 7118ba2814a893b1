//! The linux agent's instance domains (serials as pmdalinux numbers them) and the labels
//! pmdalinux states for them, for cluster-0 CPU items, and for instances whose label is
//! their name or number. Groups state the labels that need their parsed state (zones,
//! buddies, interrupt lines) through [`super::Group::labels`].
//!
//! Owns only these numbers and labels.

use crate::namespace::{LabelsOf, Pmid};

pub const CPU: u32 = 0;
pub const DISK: u32 = 1;
pub const LOADAVG: u32 = 2;
pub const NET_DEV: u32 = 3;
pub const INTERRUPT: u32 = 4;
pub const FILESYS: u32 = 5;
pub const SWAPDEV: u32 = 6;
pub const NFS: u32 = 7;
pub const NFS3: u32 = 8;
pub const PARTITIONS: u32 = 10;
pub const SCSI: u32 = 11;
pub const SLAB: u32 = 12;
pub const NFS4_CLI: u32 = 14;
pub const NFS4_SVR: u32 = 15;
pub const NET_ADDR: u32 = 17;
pub const TMPFS: u32 = 18;
pub const NODE: u32 = 19;
pub const ICMPMSG: u32 = 23;
pub const DM: u32 = 24;
pub const MD: u32 = 25;
pub const IPC_STAT: u32 = 28;
pub const IPC_MSG: u32 = 29;
pub const IPC_SEM: u32 = 30;
pub const BUDDYINFO: u32 = 31;
pub const ZONEINFO: u32 = 32;
pub const ZONEINFO_PROTECTION: u32 = 33;
pub const TAPEDEV: u32 = 34;
pub const TTY: u32 = 35;
pub const SOFTIRQ: u32 = 36;
pub const PRESSUREAVG: u32 = 37;
pub const ZRAM: u32 = 38;
pub const FCHOST: u32 = 39;
pub const INTERRUPT_CPU: u32 = 40;
pub const SOFTIRQ_CPU: u32 = 41;
pub const WWID: u32 = 42;
pub const HUGEPAGES: u32 = 43;
pub const NUMA_HUGEPAGES: u32 = 44;
pub const NFS4_SVR_CLIENT: u32 = 45;
pub const NFS4_SVR_CLIENT_OPENS: u32 = 46;

type Labels = Vec<(String, serde_json::Value)>;

fn pair(k: &str, v: serde_json::Value) -> (String, serde_json::Value) {
    (k.to_string(), v)
}

/// pmdalinux's labels for an indom (`device_type`, `indom_name`).
fn indom_labels(indom: u32) -> Labels {
    use serde_json::json;
    let (device, name): (Option<serde_json::Value>, &str) = match indom {
        CPU => (Some(json!("cpu")), "per cpu"),
        MD => (Some(json!("block")), "per md device"),
        DM => (Some(json!("block")), "per dm device"),
        DISK | SCSI => (Some(json!("block")), "per disk"),
        PARTITIONS => (Some(json!("block")), "per partition"),
        NODE => (Some(json!("numa_node")), "per numa_node"),
        NET_DEV | NET_ADDR => (Some(json!("interface")), "per interface"),
        SWAPDEV => (Some(json!(["block", "memory"])), "per swap device"),
        SLAB => (Some(json!("memory")), "per slab"),
        ZONEINFO => (
            Some(json!(["memory", "numa_node"])),
            "per zone per numa_node",
        ),
        BUDDYINFO => (
            Some(json!(["memory", "numa_node"])),
            "per buddy per numa_node",
        ),
        INTERRUPT => (Some(json!("irq")), "per irq"),
        INTERRUPT_CPU => (Some(json!(["irq", "cpu"])), "per cpu, per irq"),
        SOFTIRQ => (None, "per softirq"),
        SOFTIRQ_CPU => (Some(json!("cpu")), "per cpu, per softirq"),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    if let Some(d) = device {
        out.push(pair("device_type", d));
    }
    out.push(pair("indom_name", name.into()));
    out
}

/// pmdalinux's labels for a metric: cluster 0's whole-host and per-node CPU times.
fn item_labels(id: Pmid) -> Labels {
    use serde_json::json;
    if id.cluster != 0 {
        return Vec::new();
    }
    match id.item {
        62..=71 | 77 | 85 | 86 => vec![pair("device_type", json!(["numa_node", "cpu"]))],
        20..=23 | 53..=55 | 34 | 35 | 60 | 78 | 81 | 82 => {
            vec![pair("device_type", json!("cpu"))]
        }
        _ => Vec::new(),
    }
}

/// pmdalinux's labels for an instance whose label is its number or its name.
fn instance_labels(indom: u32, name: &str) -> Labels {
    match indom {
        CPU => number_after(name, "cpu")
            .map(|n| vec![pair("cpu", n.into())])
            .unwrap_or_default(),
        NODE => number_after(name, "node")
            .map(|n| vec![pair("numa_node", n.into())])
            .unwrap_or_default(),
        DISK | DM | MD | PARTITIONS => vec![pair("device_name", name.into())],
        NET_DEV => vec![pair("interface", name.into())],
        _ => Vec::new(),
    }
}

fn number_after(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// The labels pmdalinux states for `of`, where they need no group's state.
pub fn labels(of: LabelsOf) -> Labels {
    match of {
        LabelsOf::Item(id) => item_labels(id),
        LabelsOf::Indom(indom) => indom_labels(indom),
        LabelsOf::Instance(indom, name) => instance_labels(indom, name),
    }
}
