//! `infiniband`: host channel adapters and their ports from `/sys/class/infiniband`, under the
//! names and PMIDs of PCP's pmdainfiniband (domain 91), which asks the same figures of the
//! fabric with MADs where this agent reads the kernel's sysfs copy of them.
//!
//! Instances: HCAs by device name (`mlx5_0`, indom 0) and ports as `DEVICE:PORT` (`mlx5_0:1`,
//! indom 1). Counters come from `ports/N/counters_ext` (the 64-bit counters older kernels keep
//! apart) when the file is there, else from `ports/N/counters` (64-bit on current kernels
//! where the HCA has extended counters); `hw_counters` give `infiniband.port.diag.*`. The data
//! counters count 4-octet words: [`data_bytes`] is the one place they become bytes.
//!
//! Connection-manager counters (`infiniband.port.cm.*`) come from `ports/N/cm_*` or, where the
//! ib_cm module keeps them, `/sys/class/infiniband_cm/DEVICE/N/cm_*`; the port's GUID and GID
//! prefix from its GID 0 (`ports/N/gids/0`), its capabilities from `cap_mask`, its network
//! interface from the device's `net/*/dev_port`.
//!
//! pmdainfiniband's names that only a MAD, the verbs library or a command can answer are
//! listed with its PMIDs and types and have no value here: `hca.vendor_id` (verbs' IEEE vendor
//! id; sysfs has the PCI vendor, another number), `hca.res.*` (`rdma res show`, netlink),
//! `port.max_mtu`/`active_mtu` (PortInfo MTU fields), `port.select`/`counter_select`,
//! `port.switch.*` (the neighbour switch port's counters) and `control.*` (the PMDA's own MAD
//! timeout and counter high-water marks).
//!
//! A file that is absent, unreadable or not a number (`N/A (no PMA)`) gives that instance no
//! value for that metric, nothing else; no HCA at all gives no instances.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use wasmon_guest::agent::{Atom, Pmid, Semantics, Value, ValueSet, ValueType};
use wasmon_guest::names::{Catalog, Metric};
use wasmon_guest::sysfs;

pub const DOMAIN: u32 = 91;
const HCA: Option<u32> = Some(0);
const PORT: Option<u32> = Some(1);
/// pmdainfiniband's instance domain of its MAD counters (`control.hiwat`): none here.
const CNT: Option<u32> = Some(2);

/// ib_cm's class directory, where its counters live on kernels that keep them out of the port.
const CM_CLASS: &str = "/sys/class/infiniband_cm";
/// pmdainfiniband's cluster-4 items 1-44: (group directory, counter file) by item.
const CM_GROUPS: [&str; 4] = [
    "cm_rx_duplicates",
    "cm_rx_msgs",
    "cm_tx_msgs",
    "cm_tx_retries",
];
const CM_FILES: [&str; 11] = [
    "apr", "drep", "dreq", "lap", "mra", "rej", "rep", "req", "rtu", "sidr_rep", "sidr_req",
];

/// PortInfo CapabilityMask bits as pmdainfiniband names them (its spelling), in bit order.
const CAPABILITIES: &[(u32, &str)] = &[
    (1, "SM"),
    (2, "Notice"),
    (3, "Trap"),
    (5, "AutomaticMigration"),
    (6, "SLMapping"),
    (7, "MKeyNVRAM"),
    (8, "PKeyNVRAM"),
    (9, "LedInfo"),
    (10, "SMdisabled"),
    (11, "SystemImageGUID"),
    (12, "PkeySwitchExternalPortTrap"),
    (16, "CommunicatonManagement"),
    (17, "SNMPTunneling"),
    (18, "Reinit"),
    (19, "DeviceManagement"),
    (20, "VendorClass"),
    (21, "DRNotice"),
    (22, "CapabilityMaskNotice"),
    (23, "BootManagement"),
    (24, "IsLinkRoundTripLatency"),
    (25, "ClientRegistration"),
];

/// The names of the capability bits set in `mask`, comma-separated.
pub fn capabilities(mask: u64) -> String {
    CAPABILITIES
        .iter()
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join(",")
}

/// A GID as sysfs writes it (`fe80:0000:0000:0000:0002:c903:00a1:b2c1`): its subnet prefix
/// (high 64 bits) and interface id (low 64 bits, the port GUID).
pub fn gid_halves(text: &str) -> Option<(u64, u64)> {
    let groups: Vec<u64> = text
        .trim()
        .split(':')
        .map(|g| {
            (g.len() <= 4)
                .then(|| u64::from_str_radix(g, 16).ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    if groups.len() != 8 {
        return None;
    }
    let half = |g: &[u64]| g.iter().fold(0u64, |acc, x| acc << 16 | x);
    Some((half(&groups[..4]), half(&groups[4..])))
}

/// A GUID as pmdainfiniband writes it: four groups of four hex digits.
pub fn guid_text(guid: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        guid >> 48,
        (guid >> 32) & 0xffff,
        (guid >> 16) & 0xffff,
        guid & 0xffff
    )
}

/// The class directory, as the sandbox sees it.
const CLASS: &str = "/sys/class/infiniband";

/// Octets in one unit of `port_rcv_data` / `port_xmit_data` (IBA's PortRcvData counts
/// 32-bit words).
const DATA_WORD_OCTETS: u64 = 4;

/// The one place data words become bytes.
pub fn data_bytes(words: u64) -> u64 {
    words.wrapping_mul(DATA_WORD_OCTETS)
}

use Semantics::{Counter, Discrete};
use ValueType::{Int32, Int64, Text, Uint32, Uint64};

/// Every metric: pmdainfiniband's names, PMIDs, types and units; help in our words.
#[rustfmt::skip]
pub static METRICS: &[Metric] = &[
    Metric::new("infiniband.hca.type", 0, 0, Text, Discrete, "", HCA, "Kind of node the adapter is (CA, Switch, Router, iWARP RNIC), from node_type"),
    Metric::new("infiniband.hca.ca_type", 0, 1, Text, Discrete, "", HCA, "Adapter model as the driver names it (hca_type)"),
    Metric::new("infiniband.hca.numports", 0, 2, Int32, Discrete, "", HCA, "How many ports the adapter has"),
    Metric::new("infiniband.hca.fw_ver", 0, 3, Text, Discrete, "", HCA, "Firmware version of the adapter"),
    Metric::new("infiniband.hca.hw_ver", 0, 4, Text, Discrete, "", HCA, "Hardware revision of the adapter (hw_rev)"),
    Metric::new("infiniband.hca.node_guid", 0, 5, Text, Discrete, "", HCA, "Globally unique identifier of the adapter's node"),
    Metric::new("infiniband.hca.system_guid", 0, 6, Text, Discrete, "", HCA, "Globally unique identifier of the system image (sys_image_guid)"),
    Metric::new("infiniband.hca.board_id", 0, 17, Text, Discrete, "", HCA, "Board identifier the vendor gave the adapter"),
    Metric::new("infiniband.hca.transport", 0, 16, Text, Discrete, "", HCA, "Transport of the adapter: Infinband (pmdainfiniband's spelling) for a CA, switch or router, iWARP for an RNIC"),
    Metric::new("infiniband.hca.vendor_id", 0, 18, Text, Discrete, "", HCA, "IEEE vendor id the verbs library reports; no value from sysfs"),
    Metric::new("infiniband.hca.res.pd", 0, 19, Uint64, Discrete, "", HCA, "Protection domains in use (rdma res); no value from sysfs"),
    Metric::new("infiniband.hca.res.cq", 0, 20, Uint64, Discrete, "", HCA, "Completion queues in use (rdma res); no value from sysfs"),
    Metric::new("infiniband.hca.res.qp", 0, 21, Uint64, Discrete, "", HCA, "Queue pairs in use (rdma res); no value from sysfs"),
    Metric::new("infiniband.hca.res.cm_id", 0, 22, Uint64, Discrete, "", HCA, "Connection manager ids in use (rdma res); no value from sysfs"),
    Metric::new("infiniband.hca.res.mr", 0, 23, Uint64, Discrete, "", HCA, "Memory regions in use (rdma res); no value from sysfs"),
    Metric::new("infiniband.hca.res.ctx", 0, 24, Uint64, Discrete, "", HCA, "User contexts in use (rdma res); no value from sysfs"),
    Metric::new("infiniband.hca.res.srq", 0, 25, Uint64, Discrete, "", HCA, "Shared receive queues in use (rdma res); no value from sysfs"),
    Metric::new("infiniband.port.guid", 0, 7, Text, Discrete, "", PORT, "GUID of the port: the interface half of its GID 0"),
    Metric::new("infiniband.port.gid_prefix", 0, 8, Uint64, Discrete, "", PORT, "Subnet prefix of the port: the high half of its GID 0"),
    Metric::new("infiniband.port.capabilities", 0, 13, Text, Discrete, "", PORT, "Capabilities the port advertises, by name, from its capability mask"),
    Metric::new("infiniband.port.max_mtu", 0, 28, Uint64, Discrete, "", PORT, "Largest MTU the port supports (PortInfo); no value from sysfs"),
    Metric::new("infiniband.port.active_mtu", 0, 29, Uint64, Discrete, "", PORT, "MTU in use on the link (PortInfo); no value from sysfs"),
    Metric::new("infiniband.port.netdev_name", 0, 31, Text, Discrete, "", PORT, "Network interface on the port (IPoIB or RoCE), from the adapter's net devices"),
    Metric::new("infiniband.port.select", 1, 20, Int64, Discrete, "", PORT, "PortSelect of the performance counters (a MAD field); no value from sysfs"),
    Metric::new("infiniband.port.counter_select", 1, 21, Int64, Discrete, "", PORT, "CounterSelect of the performance counters (a MAD field); no value from sysfs"),
    Metric::new("infiniband.control.query_timeout", 2, 0, Int32, Discrete, "", PORT, "pmdainfiniband's MAD timeout; this agent sends no MADs, so no value"),
    Metric::new("infiniband.control.hiwat", 2, 1, Uint32, Discrete, "", CNT, "pmdainfiniband's counter high-water marks; no value here"),
    Metric::new("infiniband.port.switch.in.bytes", 3, 0, Uint64, Counter, "byte", PORT, "Octets the neighbour switch port received (its MAD counters); no value from sysfs"),
    Metric::new("infiniband.port.switch.in.packets", 3, 1, Uint64, Counter, "count", PORT, "Packets the neighbour switch port received; no value from sysfs"),
    Metric::new("infiniband.port.switch.out.bytes", 3, 2, Uint64, Counter, "byte", PORT, "Octets the neighbour switch port sent; no value from sysfs"),
    Metric::new("infiniband.port.switch.out.packets", 3, 3, Uint64, Counter, "count", PORT, "Packets the neighbour switch port sent; no value from sysfs"),
    Metric::new("infiniband.port.switch.total.bytes", 3, 4, Uint64, Counter, "byte", PORT, "Octets the neighbour switch port moved both ways; no value from sysfs"),
    Metric::new("infiniband.port.switch.total.packets", 3, 5, Uint64, Counter, "count", PORT, "Packets the neighbour switch port moved both ways; no value from sysfs"),
    Metric::new("infiniband.port.lid", 0, 9, Int32, Discrete, "", PORT, "Local identifier the subnet manager assigned to the port"),
    Metric::new("infiniband.port.state", 0, 10, Text, Discrete, "", PORT, "Logical state of the port (Down, Initializing, Armed, Active)"),
    Metric::new("infiniband.port.phystate", 0, 11, Text, Discrete, "", PORT, "Physical state of the port's link (Polling, Link Up, ...)"),
    Metric::new("infiniband.port.rate", 0, 12, Int32, Discrete, "", PORT, "Data rate of the port in Gbit/s, all lanes together"),
    Metric::new("infiniband.port.linkspeed", 0, 14, Text, Discrete, "", PORT, "Signalling rate of one lane of the link"),
    Metric::new("infiniband.port.linkwidth", 0, 15, Int32, Discrete, "", PORT, "Lanes in the link (1, 4, 8 or 12)"),
    Metric::new("infiniband.port.sm_lid", 0, 26, Uint64, Discrete, "", PORT, "Local identifier of the port's subnet manager"),
    Metric::new("infiniband.port.lmc", 0, 27, Uint64, Discrete, "", PORT, "LID mask count: how many low bits of the LID select a path"),
    Metric::new("infiniband.port.link_layer", 0, 30, Text, Discrete, "", PORT, "Link layer of the port (InfiniBand or Ethernet)"),
    Metric::new("infiniband.port.capmask", 0, 32, Uint64, Discrete, "", PORT, "Capability mask the port advertises"),
    Metric::new("infiniband.port.node_desc", 0, 33, Text, Discrete, "", PORT, "Description of the node the port belongs to"),
    Metric::new("infiniband.port.in.bytes", 1, 0, Int64, Counter, "byte", PORT, "Octets received in data packets on every virtual lane, link packets excluded"),
    Metric::new("infiniband.port.in.packets", 1, 1, Int64, Counter, "count", PORT, "Data packets received on every virtual lane, erroneous ones included"),
    Metric::new("infiniband.port.out.bytes", 1, 2, Int64, Counter, "byte", PORT, "Octets sent in data packets on every virtual lane, link packets excluded"),
    Metric::new("infiniband.port.out.packets", 1, 3, Int64, Counter, "count", PORT, "Data packets sent on every virtual lane"),
    Metric::new("infiniband.port.in.errors.drop", 1, 4, Int32, Counter, "count", PORT, "Received packets the switch relay could not forward and discarded"),
    Metric::new("infiniband.port.out.errors.drop", 1, 5, Int32, Counter, "count", PORT, "Outbound packets discarded because the port was down or congested"),
    Metric::new("infiniband.port.total.bytes", 1, 6, Int64, Counter, "byte", PORT, "infiniband.port.in.bytes plus infiniband.port.out.bytes"),
    Metric::new("infiniband.port.total.packets", 1, 7, Int64, Counter, "count", PORT, "infiniband.port.in.packets plus infiniband.port.out.packets"),
    Metric::new("infiniband.port.total.errors.drop", 1, 8, Int32, Counter, "count", PORT, "Inbound and outbound packets dropped, together"),
    Metric::new("infiniband.port.in.errors.filter", 1, 9, Int32, Counter, "count", PORT, "Received packets discarded by raw-packet filtering or partition key checks"),
    Metric::new("infiniband.port.in.errors.local", 1, 10, Int32, Counter, "count", PORT, "Received packets with local physical errors, malformed, or lost to buffer overrun"),
    Metric::new("infiniband.port.in.errors.remote", 1, 11, Int32, Counter, "count", PORT, "Received packets marked bad by a remote end (EBP delimiter)"),
    Metric::new("infiniband.port.out.errors.filter", 1, 12, Int32, Counter, "count", PORT, "Packets not sent because of raw-packet filtering or partition key checks"),
    Metric::new("infiniband.port.total.errors.filter", 1, 13, Int32, Counter, "count", PORT, "Inbound and outbound packets filtered, together"),
    Metric::new("infiniband.port.total.errors.link", 1, 14, Int32, Counter, "count", PORT, "Times the link went down after its recovery failed"),
    Metric::new("infiniband.port.total.errors.recover", 1, 15, Int32, Counter, "count", PORT, "Times the link recovered from errors"),
    Metric::new("infiniband.port.total.errors.integrity", 1, 16, Int32, Counter, "count", PORT, "Times local physical errors passed their threshold"),
    Metric::new("infiniband.port.total.errors.vl15", 1, 17, Int32, Counter, "count", PORT, "Management (VL15) packets dropped for want of resources"),
    Metric::new("infiniband.port.total.errors.overrun", 1, 18, Int32, Counter, "count", PORT, "Times buffer overruns persisted across flow control updates"),
    Metric::new("infiniband.port.total.errors.symbol", 1, 19, Int32, Counter, "count", PORT, "Minor errors detected on the link's physical lanes"),
    Metric::new("infiniband.port.in.ucast_packets", 1, 22, Int64, Counter, "count", PORT, "Unicast packets received"),
    Metric::new("infiniband.port.in.mcast_packets", 1, 23, Int64, Counter, "count", PORT, "Multicast packets received"),
    Metric::new("infiniband.port.out.ucast_packets", 1, 24, Int64, Counter, "count", PORT, "Unicast packets sent"),
    Metric::new("infiniband.port.out.mcast_packets", 1, 25, Int64, Counter, "count", PORT, "Multicast packets sent"),
    Metric::new("infiniband.port.out.data", 1, 26, Int64, Counter, "byte", PORT, "The raw transmit data counter, in the 4-octet words it counts"),
    Metric::new("infiniband.port.in.data", 1, 27, Int64, Counter, "byte", PORT, "The raw receive data counter, in the 4-octet words it counts"),
    Metric::new("infiniband.port.cm.rx_duplicates.apr", 4, 1, Uint64, Counter, "count", PORT, "Duplicate APR (alternate path response) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.drep", 4, 2, Uint64, Counter, "count", PORT, "Duplicate DREP (disconnect reply) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.dreq", 4, 3, Uint64, Counter, "count", PORT, "Duplicate DREQ (disconnect request) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.lap", 4, 4, Uint64, Counter, "count", PORT, "Duplicate LAP (load alternate path) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.mra", 4, 5, Uint64, Counter, "count", PORT, "Duplicate MRA (message receipt acknowledgement) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.rej", 4, 6, Uint64, Counter, "count", PORT, "Duplicate REJ (reject) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.rep", 4, 7, Uint64, Counter, "count", PORT, "Duplicate REP (connect reply) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.req", 4, 8, Uint64, Counter, "count", PORT, "Duplicate REQ (connect request) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.rtu", 4, 9, Uint64, Counter, "count", PORT, "Duplicate RTU (ready to use) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.sidr_rep", 4, 10, Uint64, Counter, "count", PORT, "Duplicate SIDR REP (service id resolution reply) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_duplicates.sidr_req", 4, 11, Uint64, Counter, "count", PORT, "Duplicate SIDR REQ (service id resolution request) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.apr", 4, 12, Uint64, Counter, "count", PORT, "APR (alternate path response) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.drep", 4, 13, Uint64, Counter, "count", PORT, "DREP (disconnect reply) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.dreq", 4, 14, Uint64, Counter, "count", PORT, "DREQ (disconnect request) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.lap", 4, 15, Uint64, Counter, "count", PORT, "LAP (load alternate path) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.mra", 4, 16, Uint64, Counter, "count", PORT, "MRA (message receipt acknowledgement) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.rej", 4, 17, Uint64, Counter, "count", PORT, "REJ (reject) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.rep", 4, 18, Uint64, Counter, "count", PORT, "REP (connect reply) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.req", 4, 19, Uint64, Counter, "count", PORT, "REQ (connect request) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.rtu", 4, 20, Uint64, Counter, "count", PORT, "RTU (ready to use) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.sidr_rep", 4, 21, Uint64, Counter, "count", PORT, "SIDR REP (service id resolution reply) messages the connection manager received"),
    Metric::new("infiniband.port.cm.rx_msgs.sidr_req", 4, 22, Uint64, Counter, "count", PORT, "SIDR REQ (service id resolution request) messages the connection manager received"),
    Metric::new("infiniband.port.cm.tx_msgs.apr", 4, 23, Uint64, Counter, "count", PORT, "APR (alternate path response) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.drep", 4, 24, Uint64, Counter, "count", PORT, "DREP (disconnect reply) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.dreq", 4, 25, Uint64, Counter, "count", PORT, "DREQ (disconnect request) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.lap", 4, 26, Uint64, Counter, "count", PORT, "LAP (load alternate path) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.mra", 4, 27, Uint64, Counter, "count", PORT, "MRA (message receipt acknowledgement) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.rej", 4, 28, Uint64, Counter, "count", PORT, "REJ (reject) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.rep", 4, 29, Uint64, Counter, "count", PORT, "REP (connect reply) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.req", 4, 30, Uint64, Counter, "count", PORT, "REQ (connect request) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.rtu", 4, 31, Uint64, Counter, "count", PORT, "RTU (ready to use) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.sidr_rep", 4, 32, Uint64, Counter, "count", PORT, "SIDR REP (service id resolution reply) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_msgs.sidr_req", 4, 33, Uint64, Counter, "count", PORT, "SIDR REQ (service id resolution request) messages the connection manager sent"),
    Metric::new("infiniband.port.cm.tx_retries.apr", 4, 34, Uint64, Counter, "count", PORT, "APR (alternate path response) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.drep", 4, 35, Uint64, Counter, "count", PORT, "DREP (disconnect reply) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.dreq", 4, 36, Uint64, Counter, "count", PORT, "DREQ (disconnect request) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.lap", 4, 37, Uint64, Counter, "count", PORT, "LAP (load alternate path) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.mra", 4, 38, Uint64, Counter, "count", PORT, "MRA (message receipt acknowledgement) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.rej", 4, 39, Uint64, Counter, "count", PORT, "REJ (reject) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.rep", 4, 40, Uint64, Counter, "count", PORT, "REP (connect reply) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.req", 4, 41, Uint64, Counter, "count", PORT, "REQ (connect request) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.rtu", 4, 42, Uint64, Counter, "count", PORT, "RTU (ready to use) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.sidr_rep", 4, 43, Uint64, Counter, "count", PORT, "SIDR REP (service id resolution reply) messages the connection manager sent again"),
    Metric::new("infiniband.port.cm.tx_retries.sidr_req", 4, 44, Uint64, Counter, "count", PORT, "SIDR REQ (service id resolution request) messages the connection manager sent again"),
    Metric::new("infiniband.port.diag.rq.dup", 4, 45, Uint64, Counter, "count", PORT, "Duplicate requests the receive queues saw (hw_counters rq_num_dup)"),
    Metric::new("infiniband.port.diag.rq.lle", 4, 46, Uint64, Counter, "count", PORT, "Receive-queue local length errors"),
    Metric::new("infiniband.port.diag.rq.lpe", 4, 47, Uint64, Counter, "count", PORT, "Receive-queue local protection errors"),
    Metric::new("infiniband.port.diag.rq.lqpoe", 4, 48, Uint64, Counter, "count", PORT, "Receive-queue local QP operation errors"),
    Metric::new("infiniband.port.diag.rq.oos", 4, 49, Uint64, Counter, "count", PORT, "Receive-queue out-of-sequence requests"),
    Metric::new("infiniband.port.diag.rq.rae", 4, 50, Uint64, Counter, "count", PORT, "Receive-queue remote access errors"),
    Metric::new("infiniband.port.diag.rq.rire", 4, 51, Uint64, Counter, "count", PORT, "Receive-queue remote invalid request errors"),
    Metric::new("infiniband.port.diag.rq.rnr", 4, 52, Uint64, Counter, "count", PORT, "Receive-queue receiver-not-ready events"),
    Metric::new("infiniband.port.diag.rq.wrfe", 4, 53, Uint64, Counter, "count", PORT, "Receive-queue work requests flushed in error"),
    Metric::new("infiniband.port.diag.sq.bre", 4, 54, Uint64, Counter, "count", PORT, "Send-queue bad response errors"),
    Metric::new("infiniband.port.diag.sq.lle", 4, 55, Uint64, Counter, "count", PORT, "Send-queue local length errors"),
    Metric::new("infiniband.port.diag.sq.lpe", 4, 56, Uint64, Counter, "count", PORT, "Send-queue local protection errors"),
    Metric::new("infiniband.port.diag.sq.lqpoe", 4, 57, Uint64, Counter, "count", PORT, "Send-queue local QP operation errors"),
    Metric::new("infiniband.port.diag.sq.mwbe", 4, 58, Uint64, Counter, "count", PORT, "Send-queue memory window bind errors"),
    Metric::new("infiniband.port.diag.sq.oos", 4, 59, Uint64, Counter, "count", PORT, "Send-queue out-of-sequence responses"),
    Metric::new("infiniband.port.diag.sq.rae", 4, 60, Uint64, Counter, "count", PORT, "Send-queue remote access errors"),
    Metric::new("infiniband.port.diag.sq.rire", 4, 61, Uint64, Counter, "count", PORT, "Send-queue remote invalid request errors"),
    Metric::new("infiniband.port.diag.sq.rnr", 4, 62, Uint64, Counter, "count", PORT, "Send-queue receiver-not-ready retries exhausted"),
    Metric::new("infiniband.port.diag.sq.roe", 4, 63, Uint64, Counter, "count", PORT, "Send-queue remote operation errors"),
    Metric::new("infiniband.port.diag.sq.rree", 4, 64, Uint64, Counter, "count", PORT, "Send-queue RNR retries exceeded"),
    Metric::new("infiniband.port.diag.sq.to", 4, 65, Uint64, Counter, "count", PORT, "Send-queue transport timeouts"),
    Metric::new("infiniband.port.diag.sq.tree", 4, 66, Uint64, Counter, "count", PORT, "Send-queue transport retries exceeded"),
    Metric::new("infiniband.port.diag.sq.wrfe", 4, 67, Uint64, Counter, "count", PORT, "Send-queue work requests flushed in error"),
];

/// A counter file and, where older kernels keep a 64-bit copy apart, its `counters_ext` name.
fn ext_name(counter: &str) -> Option<&'static str> {
    Some(match counter {
        "port_rcv_data" => "port_rcv_data_64",
        "port_xmit_data" => "port_xmit_data_64",
        "port_rcv_packets" => "port_rcv_packets_64",
        "port_xmit_packets" => "port_xmit_packets_64",
        "unicast_rcv_packets" => "port_unicast_rcv_packets",
        "unicast_xmit_packets" => "port_unicast_xmit_packets",
        "multicast_rcv_packets" => "port_multicast_rcv_packets",
        "multicast_xmit_packets" => "port_multicast_xmit_packets",
        _ => return None,
    })
}

/// How a cluster-1 item is made from counter files.
enum Source {
    Counter(&'static str),
    DataBytes(&'static str),
    Sum(&'static str, &'static str),
    SumDataBytes,
}

fn counter_source(item: u32) -> Option<Source> {
    use Source::*;
    Some(match item {
        0 => DataBytes("port_rcv_data"),
        1 => Counter("port_rcv_packets"),
        2 => DataBytes("port_xmit_data"),
        3 => Counter("port_xmit_packets"),
        4 => Counter("port_rcv_switch_relay_errors"),
        5 => Counter("port_xmit_discards"),
        6 => SumDataBytes,
        7 => Sum("port_rcv_packets", "port_xmit_packets"),
        8 => Sum("port_rcv_switch_relay_errors", "port_xmit_discards"),
        9 => Counter("port_rcv_constraint_errors"),
        10 => Counter("port_rcv_errors"),
        11 => Counter("port_rcv_remote_physical_errors"),
        12 => Counter("port_xmit_constraint_errors"),
        13 => Sum("port_rcv_constraint_errors", "port_xmit_constraint_errors"),
        14 => Counter("link_downed"),
        15 => Counter("link_error_recovery"),
        16 => Counter("local_link_integrity_errors"),
        17 => Counter("VL15_dropped"),
        18 => Counter("excessive_buffer_overrun_errors"),
        19 => Counter("symbol_error"),
        22 => Counter("unicast_rcv_packets"),
        23 => Counter("multicast_rcv_packets"),
        24 => Counter("unicast_xmit_packets"),
        25 => Counter("multicast_xmit_packets"),
        26 => Counter("port_xmit_data"),
        27 => Counter("port_rcv_data"),
        _ => return None,
    })
}

/// One port of one HCA.
struct Port {
    instance: String,
    dir: PathBuf,
    /// ib_cm's directory of this port (`/sys/class/infiniband_cm/DEVICE/N`).
    cm_dir: PathBuf,
    /// The adapter's net devices (`device/net`), for the port's interface name.
    net_dir: PathBuf,
    number: u64,
    /// Counter files read in this fetch (a total reads each of its halves once).
    counters: HashMap<&'static str, Option<u64>>,
}

impl Port {
    fn counter(&mut self, name: &'static str) -> Option<u64> {
        let dir = &self.dir;
        *self.counters.entry(name).or_insert_with(|| {
            let ext = ext_name(name)
                .and_then(|e| sysfs::read_u64(&dir.join("counters_ext").join(e)).ok());
            ext.or_else(|| sysfs::read_u64(&dir.join("counters").join(name)).ok())
        })
    }

    fn attr(&self, name: &str) -> Option<String> {
        sysfs::read_line(&self.dir.join(name)).ok()
    }

    /// `4: ACTIVE` -> 4.
    fn coded(&self, name: &str) -> Option<u64> {
        self.attr(name)?.split(':').next()?.trim().parse().ok()
    }

    /// `40 Gb/sec (4X QDR)`: the rate in Gbit/s, and the lane count.
    fn rate(&self) -> Option<(f64, u32)> {
        let text = self.attr("rate")?;
        let gbps: f64 = text.split_whitespace().next()?.parse().ok()?;
        let width = text
            .split('(')
            .nth(1)
            .and_then(|w| w.split('X').next())
            .and_then(|w| w.trim().parse().ok())
            .unwrap_or(1);
        Some((gbps, width))
    }

    fn value(&mut self, metric: &Metric, node_desc: &Option<String>) -> Option<Atom> {
        const STATES: &[&str] = &["Unknown", "Down", "Initializing", "Armed", "Active"];
        const PHYS: &[&str] = &[
            "No change",
            "Sleep",
            "Polling",
            "Disabled",
            "Port Configuration Training",
            "Link Up",
            "Error Recovery",
            "PHY Test",
        ];
        let int = |v: u64| Some(Atom::Int(v as i64));
        match (metric.cluster, metric.item) {
            (0, 9) => int(sysfs::parse_u64(&self.attr("lid")?)?),
            (0, 10) => Some(Atom::Text(
                STATES
                    .get(self.coded("state")? as usize)
                    .unwrap_or(&"Unknown")
                    .to_string(),
            )),
            (0, 11) => Some(Atom::Text(
                PHYS.get(self.coded("phys_state")? as usize)
                    .unwrap_or(&"Unknown")
                    .to_string(),
            )),
            (0, 12) => int(self.rate()?.0 as u64),
            (0, 14) => {
                let (gbps, width) = self.rate()?;
                Some(Atom::Text(format!(
                    "{:.1} Gbps",
                    gbps / f64::from(width.max(1))
                )))
            }
            (0, 15) => int(u64::from(self.rate()?.1)),
            (0, 26) => Some(Atom::Uint(sysfs::parse_u64(&self.attr("sm_lid")?)?)),
            (0, 27) => Some(Atom::Uint(sysfs::parse_u64(&self.attr("lid_mask_count")?)?)),
            (0, 30) => Some(Atom::Text(self.attr("link_layer")?)),
            (0, 32) => Some(Atom::Uint(sysfs::parse_u64(&self.attr("cap_mask")?)?)),
            (0, 33) => Some(Atom::Text(node_desc.clone()?)),
            (1, item) => {
                let v = match counter_source(item)? {
                    Source::Counter(c) => self.counter(c)?,
                    Source::DataBytes(c) => data_bytes(self.counter(c)?),
                    Source::Sum(a, b) => self.counter(a)?.wrapping_add(self.counter(b)?),
                    Source::SumDataBytes => data_bytes(
                        self.counter("port_rcv_data")?
                            .wrapping_add(self.counter("port_xmit_data")?),
                    ),
                };
                int(v)
            }
            (0, 7) => Some(Atom::Text(guid_text(gid_halves(&self.attr("gids/0")?)?.1))),
            (0, 8) => Some(Atom::Uint(gid_halves(&self.attr("gids/0")?)?.0)),
            (0, 13) => Some(Atom::Text(capabilities(sysfs::parse_u64(
                &self.attr("cap_mask")?,
            )?))),
            (0, 31) => self.netdev().map(Atom::Text),
            (4, item @ 1..=44) => {
                let i = (item - 1) as usize;
                let rel =
                    Path::new(CM_GROUPS[i / CM_FILES.len()]).join(CM_FILES[i % CM_FILES.len()]);
                let v = sysfs::read_u64(&self.dir.join(&rel))
                    .or_else(|_| sysfs::read_u64(&self.cm_dir.join(&rel)))
                    .ok()?;
                Some(Atom::Uint(v))
            }
            (4, _) => {
                let file = metric.name.rsplit('.').next()?;
                let queue = metric.name.split('.').nth(3)?;
                let path = self
                    .dir
                    .join("hw_counters")
                    .join(format!("{queue}_num_{file}"));
                Some(Atom::Uint(sysfs::read_u64(&path).ok()?))
            }
            _ => None,
        }
    }
}

impl Port {
    /// The net device on this port: the adapter's `device/net/*` whose `dev_port` (else
    /// `dev_id`) is the port number less one, as `ibdev2netdev` pairs them.
    fn netdev(&self) -> Option<String> {
        sysfs::list(&self.net_dir).into_iter().find(|n| {
            let dev = self.net_dir.join(n);
            let index = sysfs::read_line(&dev.join("dev_port"))
                .or_else(|_| sysfs::read_line(&dev.join("dev_id")))
                .ok()
                .and_then(|t| sysfs::parse_u64(&t));
            index.is_some_and(|i| i.checked_add(1) == Some(self.number))
        })
    }
}

pub struct Infiniband {
    catalog: Catalog,
    /// What the sandbox's `/` is: `/` in the sandbox, a captured tree natively.
    root: PathBuf,
}

impl Infiniband {
    /// The agent reading `root`'s `sys/class/infiniband`.
    pub fn at(root: &Path) -> Infiniband {
        Infiniband {
            catalog: Catalog::new(DOMAIN, METRICS),
            root: root.to_path_buf(),
        }
    }

    fn class(&self) -> PathBuf {
        sysfs::under(&self.root, CLASS)
    }

    /// HCAs by name, sorted.
    fn hcas(&self) -> Vec<(String, PathBuf)> {
        let class = self.class();
        sysfs::list(&class)
            .into_iter()
            .map(|name| {
                let dir = class.join(&name);
                (name, dir)
            })
            .collect()
    }

    fn hca_value(dir: &Path, metric: &Metric) -> Option<Atom> {
        const NODE_TYPES: &[&str] = &["Unknown", "CA", "Switch", "Router", "iWARP RNIC"];
        let attr = |name: &str| sysfs::read_line(&dir.join(name)).ok();
        let text = |name: &str| attr(name).map(Atom::Text);
        match metric.item {
            0 => {
                let code: usize = attr("node_type")?.split(':').next()?.trim().parse().ok()?;
                Some(Atom::Text(
                    NODE_TYPES.get(code).unwrap_or(&"Unknown").to_string(),
                ))
            }
            1 => text("hca_type"),
            2 => {
                let ports = sysfs::list(&dir.join("ports"));
                (!ports.is_empty()).then_some(Atom::Int(ports.len() as i64))
            }
            3 => text("fw_ver"),
            4 => text("hw_rev"),
            5 => text("node_guid"),
            6 => text("sys_image_guid"),
            17 => text("board_id"),
            16 => {
                let code: u32 = attr("node_type")?.split(':').next()?.trim().parse().ok()?;
                Some(Atom::Text(
                    match code {
                        1..=3 => "Infinband",
                        4 => "iWARP",
                        _ => "unknown",
                    }
                    .into(),
                ))
            }
            _ => None,
        }
    }

    /// The values of one metric: one per HCA or port that has it.
    fn values(&self, metric: &Metric, ports: &mut [(Port, Option<String>)]) -> Vec<Value> {
        if metric.indom == HCA {
            return self
                .hcas()
                .into_iter()
                .filter_map(|(name, dir)| Some(Value::new(name, Self::hca_value(&dir, metric)?)))
                .collect();
        }
        ports
            .iter_mut()
            .filter_map(|(p, desc)| {
                let v = p.value(metric, desc)?;
                Some(Value::new(p.instance.clone(), v))
            })
            .collect()
    }

    fn ports(&self) -> Vec<(Port, Option<String>)> {
        let mut out = Vec::new();
        let cm_class = sysfs::under(&self.root, CM_CLASS);
        for (hca, dir) in self.hcas() {
            let desc = sysfs::read_line(&dir.join("node_desc")).ok();
            for port in sysfs::list(&dir.join("ports")) {
                out.push((
                    Port {
                        instance: format!("{hca}:{port}"),
                        dir: dir.join("ports").join(&port),
                        cm_dir: cm_class.join(&hca).join(&port),
                        net_dir: dir.join("device/net"),
                        number: port.parse().unwrap_or(0),
                        counters: HashMap::new(),
                    },
                    desc.clone(),
                ));
            }
        }
        out
    }

    /// One fetch: each port's files are read at most once whatever is asked.
    pub fn fetch_ids(&self, ids: &[Pmid]) -> Vec<ValueSet> {
        let mut ports = None;
        self.catalog.value_sets(ids, |metric| {
            let ports = ports.get_or_insert_with(|| self.ports());
            self.values(metric, ports)
        })
    }
}

wasmon_guest::tree_agent!(Infiniband);

#[cfg(test)]
mod tests;
