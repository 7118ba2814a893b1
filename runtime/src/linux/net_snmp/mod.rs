//! The keyed counter files: `/proc/net/snmp` (cluster 14: `network.ip`, `icmp`, `icmpmsg`,
//! `tcp`, `udp`, `udplite`), `/proc/net/netstat` (cluster 53: `TcpExt`, `IpExt`, `MPTcpExt`
//! as `network.tcp`, `network.ip`, `network.mptcp`) and `/proc/net/snmp6` (cluster 58:
//! `network.ip6`, `icmp6`, `udp6`, `udplite6`).
//!
//! The first two are pairs of lines, a header of column names and a line of values, both
//! prefixed by their section (`Tcp: RtoAlgorithm ...` / `Tcp: 1 ...`); snmp6 is one
//! `Key value` per line. Both are parsed generically into (section, key) -> value, and each
//! metric names its (section, key) in [`KEYS`] (the facts of pmdalinux's field tables), so a
//! kernel that adds a column costs nothing and one that drops a column costs that metric's
//! value only. `IcmpMsg` columns (`InType3`, `OutType0`) are instances `Type0`..`Type255`
//! of `network.icmpmsg.{intype,outtype}`, numbered by their type, as pmdalinux numbers them.
//!
//! Owns these three files only.

use std::collections::HashMap;

use super::{Ctx, Group, Metric, indom};
use crate::namespace::{Value, Values};

/// ICMP message types pmdalinux keeps (half the kernel's `__ICMPMSG_MIB_MAX`).
const ICMPMSG_TYPES: usize = 256;

/// The snmp cluster's `network.icmpmsg.intype` and `outtype` items.
const ICMPMSG_IN: u32 = 88;
const ICMPMSG_OUT: u32 = 89;

/// `network.tcp.maxconn`: pmdalinux answers it even when the column is absent (as -1).
const TCP_MAXCONN: u32 = 53;

pub struct NetSnmp {
    buf: String,
    /// (cluster, item) -> slot in `vals`.
    slot_of: HashMap<(u32, u32), usize>,
    /// (section, key) -> slots in `vals` (section "" for snmp6); pmdalinux names one
    /// counter twice (`TCPFastOpenActiveFail` is items 106 and 136).
    by_key: HashMap<(&'static str, &'static str), Vec<usize>>,
    /// One per row of [`KEYS`]: the last refresh's value, `None` when its file or column
    /// was not there.
    vals: Vec<Option<u64>>,
    /// `IcmpMsg` counters by type: [in, out].
    icmpmsg: [Box<[Option<u64>; ICMPMSG_TYPES]>; 2],
    /// Which of snmp (14) and netstat (53) were read (snmp6 needs no flag: its keys are
    /// `None` when unread).
    snmp_ok: bool,
}

impl Default for NetSnmp {
    fn default() -> Self {
        let mut slot_of = HashMap::new();
        let mut by_key = HashMap::new();
        for (i, &(c, it, s, k)) in KEYS.iter().enumerate() {
            slot_of.insert((c, it), i);
            by_key.entry((s, k)).or_insert_with(Vec::new).push(i);
        }
        NetSnmp {
            buf: String::new(),
            slot_of,
            by_key,
            vals: vec![None; KEYS.len()],
            icmpmsg: [
                Box::new([None; ICMPMSG_TYPES]),
                Box::new([None; ICMPMSG_TYPES]),
            ],
            snmp_ok: false,
        }
    }
}

/// A counter as C's `strtoull` reads it: `-1` (the kernel's "no limit") wraps to u64::MAX.
fn counter(s: &str) -> Option<u64> {
    match s.strip_prefix('-') {
        Some(neg) => neg.parse::<u64>().ok().map(|n| n.wrapping_neg()),
        None => s.parse().ok(),
    }
}

/// `InType3` -> (0, 3), `OutType11` -> (1, 11).
fn icmpmsg_column(key: &str) -> Option<(usize, usize)> {
    let (dir, n) = if let Some(n) = key.strip_prefix("InType") {
        (0, n)
    } else {
        (1, key.strip_prefix("OutType")?)
    };
    let n: usize = n.parse().ok()?;
    (n < ICMPMSG_TYPES).then_some((dir, n))
}

impl NetSnmp {
    /// Pairs of `Section: names...` / `Section: values...` lines; a pair whose sections
    /// differ is skipped (a file that changed shape mid-read).
    fn parse_pairs(&mut self, which: usize) {
        let text = std::mem::take(&mut self.buf);
        let mut lines = text.lines();
        while let (Some(head), Some(vals)) = (lines.next(), lines.next()) {
            let (Some((sec, names)), Some((sec2, nums))) =
                (head.split_once(':'), vals.split_once(':'))
            else {
                continue;
            };
            if sec != sec2 {
                continue;
            }
            let icmpmsg = which == 0 && sec == "IcmpMsg";
            for (name, num) in names
                .split_ascii_whitespace()
                .zip(nums.split_ascii_whitespace())
            {
                if icmpmsg {
                    if let Some((dir, n)) = icmpmsg_column(name) {
                        self.icmpmsg[dir][n] = counter(num);
                    }
                } else if let Some(slots) = self.by_key.get(&(sec, name)) {
                    for &slot in slots {
                        self.vals[slot] = counter(num);
                    }
                }
            }
        }
        self.buf = text;
    }

    fn parse_lines(&mut self) {
        let text = std::mem::take(&mut self.buf);
        for line in text.lines() {
            let mut f = line.split_ascii_whitespace();
            if let (Some(k), Some(v)) = (f.next(), f.next())
                && let Some(slots) = self.by_key.get(&("", k))
            {
                for &slot in slots {
                    self.vals[slot] = counter(v);
                }
            }
        }
        self.buf = text;
    }
}

impl Group for NetSnmp {
    fn answers(&self, m: &Metric) -> bool {
        matches!(m.cluster, 14 | 53 | 58)
            && (self.slot_of.contains_key(&(m.cluster, m.item))
                || (m.cluster == 14 && matches!(m.item, ICMPMSG_IN | ICMPMSG_OUT)))
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.vals.iter_mut().for_each(|v| *v = None);
        self.icmpmsg.iter_mut().for_each(|a| a.fill(None));
        self.snmp_ok = ctx.root.read("proc/net/snmp", &mut self.buf).is_ok();
        if self.snmp_ok {
            self.parse_pairs(0);
        }
        if ctx.root.read("proc/net/netstat", &mut self.buf).is_ok() {
            self.parse_pairs(1);
        }
        if ctx.root.read("proc/net/snmp6", &mut self.buf).is_ok() {
            self.parse_lines();
            // A counter an older kernel's snmp6 lacks (2.6.32 has no Ip6InNoECTPkts,
            // Icmp6InCsumErrors, Udp6IgnoredMulti, ...) is 0, as pmdalinux answers it (its
            // snmp6 table starts at zero); without the file at all there is no value.
            for (v, &(_, _, section, _)) in self.vals.iter_mut().zip(KEYS) {
                if section.is_empty() && v.is_none() {
                    *v = Some(0);
                }
            }
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if m.cluster == 14 && matches!(m.item, ICMPMSG_IN | ICMPMSG_OUT) {
            let dir = (m.item == ICMPMSG_OUT) as usize;
            out.extend(
                self.icmpmsg[dir]
                    .iter()
                    .enumerate()
                    .filter_map(|(n, v)| Some((format!("Type{n}"), Value::Uint((*v)?)))),
            );
            return;
        }
        let Some(&slot) = self.slot_of.get(&(m.cluster, m.item)) else {
            return;
        };
        match self.vals[slot] {
            Some(v) => out.push((String::new(), Value::Uint(v))),
            None if m.cluster == 14 && m.item == TCP_MAXCONN && self.snmp_ok => {
                out.push((String::new(), Value::Uint(u64::MAX)))
            }
            None => {}
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        if indom != indom::ICMPMSG {
            return None;
        }
        let n: u32 = name.strip_prefix("Type")?.parse().ok()?;
        ((n as usize) < ICMPMSG_TYPES).then_some(n)
    }
}

/// (cluster, item, section, key) of every keyed metric: pmdalinux's field tables (6.0.3).
/// Section "" is snmp6's one-key-per-line form.
#[rustfmt::skip]
const KEYS: &[(u32, u32, &str, &str)] = &[
    (14, 0, "Ip", "Forwarding"),
    (14, 1, "Ip", "DefaultTTL"),
    (14, 2, "Ip", "InReceives"),
    (14, 3, "Ip", "InHdrErrors"),
    (14, 4, "Ip", "InAddrErrors"),
    (14, 5, "Ip", "ForwDatagrams"),
    (14, 6, "Ip", "InUnknownProtos"),
    (14, 7, "Ip", "InDiscards"),
    (14, 8, "Ip", "InDelivers"),
    (14, 9, "Ip", "OutRequests"),
    (14, 10, "Ip", "OutDiscards"),
    (14, 11, "Ip", "OutNoRoutes"),
    (14, 12, "Ip", "ReasmTimeout"),
    (14, 13, "Ip", "ReasmReqds"),
    (14, 14, "Ip", "ReasmOKs"),
    (14, 15, "Ip", "ReasmFails"),
    (14, 16, "Ip", "FragOKs"),
    (14, 17, "Ip", "FragFails"),
    (14, 18, "Ip", "FragCreates"),
    (14, 20, "Icmp", "InMsgs"),
    (14, 21, "Icmp", "InErrors"),
    (14, 22, "Icmp", "InDestUnreachs"),
    (14, 23, "Icmp", "InTimeExcds"),
    (14, 24, "Icmp", "InParmProbs"),
    (14, 25, "Icmp", "InSrcQuenchs"),
    (14, 26, "Icmp", "InRedirects"),
    (14, 27, "Icmp", "InEchos"),
    (14, 28, "Icmp", "InEchoReps"),
    (14, 29, "Icmp", "InTimestamps"),
    (14, 30, "Icmp", "InTimestampReps"),
    (14, 31, "Icmp", "InAddrMasks"),
    (14, 32, "Icmp", "InAddrMaskReps"),
    (14, 33, "Icmp", "OutMsgs"),
    (14, 34, "Icmp", "OutErrors"),
    (14, 35, "Icmp", "OutDestUnreachs"),
    (14, 36, "Icmp", "OutTimeExcds"),
    (14, 37, "Icmp", "OutParmProbs"),
    (14, 38, "Icmp", "OutSrcQuenchs"),
    (14, 39, "Icmp", "OutRedirects"),
    (14, 40, "Icmp", "OutEchos"),
    (14, 41, "Icmp", "OutEchoReps"),
    (14, 42, "Icmp", "OutTimestamps"),
    (14, 43, "Icmp", "OutTimestampReps"),
    (14, 44, "Icmp", "OutAddrMasks"),
    (14, 45, "Icmp", "OutAddrMaskReps"),
    (14, 46, "Icmp", "InCsumErrors"),
    (14, 50, "Tcp", "RtoAlgorithm"),
    (14, 51, "Tcp", "RtoMin"),
    (14, 52, "Tcp", "RtoMax"),
    (14, 53, "Tcp", "MaxConn"),
    (14, 54, "Tcp", "ActiveOpens"),
    (14, 55, "Tcp", "PassiveOpens"),
    (14, 56, "Tcp", "AttemptFails"),
    (14, 57, "Tcp", "EstabResets"),
    (14, 58, "Tcp", "CurrEstab"),
    (14, 59, "Tcp", "InSegs"),
    (14, 60, "Tcp", "OutSegs"),
    (14, 61, "Tcp", "RetransSegs"),
    (14, 62, "Tcp", "InErrs"),
    (14, 63, "Tcp", "OutRsts"),
    (14, 64, "Tcp", "InCsumErrors"),
    (14, 70, "Udp", "InDatagrams"),
    (14, 71, "Udp", "NoPorts"),
    (14, 72, "Udp", "InErrors"),
    (14, 74, "Udp", "OutDatagrams"),
    (14, 75, "Udp", "RcvbufErrors"),
    (14, 76, "Udp", "SndbufErrors"),
    (14, 77, "UdpLite", "InDatagrams"),
    (14, 78, "UdpLite", "NoPorts"),
    (14, 79, "UdpLite", "InErrors"),
    (14, 80, "UdpLite", "OutDatagrams"),
    (14, 81, "UdpLite", "RcvbufErrors"),
    (14, 82, "UdpLite", "SndbufErrors"),
    (14, 83, "Udp", "InCsumErrors"),
    (14, 84, "UdpLite", "InCsumErrors"),
    (14, 90, "Udp", "IgnoredMulti"),
    (14, 91, "Udp", "MemErrors"),
    (14, 92, "UdpLite", "IgnoredMulti"),
    (14, 93, "UdpLite", "MemErrors"),
    (53, 0, "IpExt", "InNoRoutes"),
    (53, 1, "IpExt", "InTruncatedPkts"),
    (53, 2, "IpExt", "InMcastPkts"),
    (53, 3, "IpExt", "OutMcastPkts"),
    (53, 4, "IpExt", "InBcastPkts"),
    (53, 5, "IpExt", "OutBcastPkts"),
    (53, 6, "IpExt", "InOctets"),
    (53, 7, "IpExt", "OutOctets"),
    (53, 8, "IpExt", "InMcastOctets"),
    (53, 9, "IpExt", "OutMcastOctets"),
    (53, 10, "IpExt", "InBcastOctets"),
    (53, 11, "IpExt", "OutBcastOctets"),
    (53, 12, "IpExt", "InCsumErrors"),
    (53, 13, "IpExt", "InNoECTPkts"),
    (53, 14, "IpExt", "InECT1Pkts"),
    (53, 15, "IpExt", "InECT0Pkts"),
    (53, 16, "IpExt", "InCEPkts"),
    (53, 17, "TcpExt", "SyncookiesSent"),
    (53, 18, "TcpExt", "SyncookiesRecv"),
    (53, 19, "TcpExt", "SyncookiesFailed"),
    (53, 20, "TcpExt", "EmbryonicRsts"),
    (53, 21, "TcpExt", "PruneCalled"),
    (53, 22, "TcpExt", "RcvPruned"),
    (53, 23, "TcpExt", "OfoPruned"),
    (53, 24, "TcpExt", "OutOfWindowIcmps"),
    (53, 25, "TcpExt", "LockDroppedIcmps"),
    (53, 26, "TcpExt", "ArpFilter"),
    (53, 27, "TcpExt", "TW"),
    (53, 28, "TcpExt", "TWRecycled"),
    (53, 29, "TcpExt", "TWKilled"),
    (53, 30, "TcpExt", "PAWSPassive"),
    (53, 31, "TcpExt", "PAWSActive"),
    (53, 32, "TcpExt", "PAWSEstab"),
    (53, 33, "TcpExt", "DelayedACKs"),
    (53, 34, "TcpExt", "DelayedACKLocked"),
    (53, 35, "TcpExt", "DelayedACKLost"),
    (53, 36, "TcpExt", "ListenOverflows"),
    (53, 37, "TcpExt", "ListenDrops"),
    (53, 38, "TcpExt", "TCPPrequeued"),
    (53, 39, "TcpExt", "TCPDirectCopyFromBacklog"),
    (53, 40, "TcpExt", "TCPDirectCopyFromPrequeue"),
    (53, 41, "TcpExt", "TCPPrequeueDropped"),
    (53, 42, "TcpExt", "TCPHPHits"),
    (53, 43, "TcpExt", "TCPHPHitsToUser"),
    (53, 44, "TcpExt", "TCPPureAcks"),
    (53, 45, "TcpExt", "TCPHPAcks"),
    (53, 46, "TcpExt", "TCPRenoRecovery"),
    (53, 47, "TcpExt", "TCPSackRecovery"),
    (53, 48, "TcpExt", "TCPSACKReneging"),
    (53, 49, "TcpExt", "TCPFACKReorder"),
    (53, 50, "TcpExt", "TCPSACKReorder"),
    (53, 51, "TcpExt", "TCPRenoReorder"),
    (53, 52, "TcpExt", "TCPTSReorder"),
    (53, 53, "TcpExt", "TCPFullUndo"),
    (53, 54, "TcpExt", "TCPPartialUndo"),
    (53, 55, "TcpExt", "TCPDSACKUndo"),
    (53, 56, "TcpExt", "TCPLossUndo"),
    (53, 57, "TcpExt", "TCPLostRetransmit"),
    (53, 58, "TcpExt", "TCPRenoFailures"),
    (53, 59, "TcpExt", "TCPSackFailures"),
    (53, 60, "TcpExt", "TCPLossFailures"),
    (53, 61, "TcpExt", "TCPFastRetrans"),
    (53, 62, "TcpExt", "TCPForwardRetrans"),
    (53, 63, "TcpExt", "TCPSlowStartRetrans"),
    (53, 64, "TcpExt", "TCPTimeouts"),
    (53, 65, "TcpExt", "TCPLossProbes"),
    (53, 66, "TcpExt", "TCPLossProbeRecovery"),
    (53, 67, "TcpExt", "TCPRenoRecoveryFail"),
    (53, 68, "TcpExt", "TCPSackRecoveryFail"),
    (53, 69, "TcpExt", "TCPSchedulerFailed"),
    (53, 70, "TcpExt", "TCPRcvCollapsed"),
    (53, 71, "TcpExt", "TCPDSACKOldSent"),
    (53, 72, "TcpExt", "TCPDSACKOfoSent"),
    (53, 73, "TcpExt", "TCPDSACKRecv"),
    (53, 74, "TcpExt", "TCPDSACKOfoRecv"),
    (53, 75, "TcpExt", "TCPAbortOnData"),
    (53, 76, "TcpExt", "TCPAbortOnClose"),
    (53, 77, "TcpExt", "TCPAbortOnMemory"),
    (53, 78, "TcpExt", "TCPAbortOnTimeout"),
    (53, 79, "TcpExt", "TCPAbortOnLinger"),
    (53, 80, "TcpExt", "TCPAbortFailed"),
    (53, 81, "TcpExt", "TCPMemoryPressures"),
    (53, 82, "TcpExt", "TCPSACKDiscard"),
    (53, 83, "TcpExt", "TCPDSACKIgnoredOld"),
    (53, 84, "TcpExt", "TCPDSACKIgnoredNoUndo"),
    (53, 85, "TcpExt", "TCPSpuriousRTOs"),
    (53, 86, "TcpExt", "TCPMD5NotFound"),
    (53, 87, "TcpExt", "TCPMD5Unexpected"),
    (53, 88, "TcpExt", "TCPSackShifted"),
    (53, 89, "TcpExt", "TCPSackMerged"),
    (53, 90, "TcpExt", "TCPSackShiftFallback"),
    (53, 91, "TcpExt", "TCPBacklogDrop"),
    (53, 92, "TcpExt", "TCPMinTTLDrop"),
    (53, 93, "TcpExt", "TCPDeferAcceptDrop"),
    (53, 94, "TcpExt", "IPReversePathFilter"),
    (53, 95, "TcpExt", "TCPTimeWaitOverflow"),
    (53, 96, "TcpExt", "TCPReqQFullDoCookies"),
    (53, 97, "TcpExt", "TCPReqQFullDrop"),
    (53, 98, "TcpExt", "TCPRetransFail"),
    (53, 99, "TcpExt", "TCPRcvCoalesce"),
    (53, 100, "TcpExt", "TCPOFOQueue"),
    (53, 101, "TcpExt", "TCPOFODrop"),
    (53, 102, "TcpExt", "TCPOFOMerge"),
    (53, 103, "TcpExt", "TCPChallengeACK"),
    (53, 104, "TcpExt", "TCPSYNChallenge"),
    (53, 105, "TcpExt", "TCPFastOpenActive"),
    (53, 106, "TcpExt", "TCPFastOpenActiveFail"),
    (53, 107, "TcpExt", "TCPFastOpenPassive"),
    (53, 108, "TcpExt", "TCPFastOpenPassiveFail"),
    (53, 109, "TcpExt", "TCPFastOpenListenOverflow"),
    (53, 110, "TcpExt", "TCPFastOpenCookieReqd"),
    (53, 111, "TcpExt", "TCPSpuriousRtxHostQueues"),
    (53, 112, "TcpExt", "BusyPollRxPackets"),
    (53, 113, "TcpExt", "TCPAutoCorking"),
    (53, 114, "TcpExt", "TCPFromZeroWindowAdv"),
    (53, 115, "TcpExt", "TCPToZeroWindowAdv"),
    (53, 116, "TcpExt", "TCPWantZeroWindowAdv"),
    (53, 117, "TcpExt", "TCPSynRetrans"),
    (53, 118, "TcpExt", "TCPOrigDataSent"),
    (53, 119, "MPTcpExt", "MPCapableSYNRX"),
    (53, 120, "MPTcpExt", "MPCapableACKRX"),
    (53, 121, "MPTcpExt", "MPCapableFallbackACK"),
    (53, 122, "MPTcpExt", "MPCapableFallbackSYNACK"),
    (53, 123, "MPTcpExt", "MPTCPRetrans"),
    (53, 124, "MPTcpExt", "MPJoinNoTokenFound"),
    (53, 125, "MPTcpExt", "MPJoinSynRx"),
    (53, 126, "MPTcpExt", "MPJoinSynAckRx"),
    (53, 127, "MPTcpExt", "MPJoinSynAckHMacFailure"),
    (53, 128, "MPTcpExt", "MPJoinAckRx"),
    (53, 129, "MPTcpExt", "MPJoinAckHMacFailure"),
    (53, 130, "MPTcpExt", "DSSNotMatching"),
    (53, 131, "MPTcpExt", "InfiniteMapRx"),
    (53, 132, "TcpExt", "TCPBacklogCoalesce"),
    (53, 133, "TcpExt", "TCPMemoryPressuresChrono"),
    (53, 134, "TcpExt", "TCPMD5Failure"),
    (53, 135, "TcpExt", "PFMemallocDrop"),
    (53, 136, "TcpExt", "TCPFastOpenActiveFail"),
    (53, 137, "TcpExt", "TCPFastOpenBlackhole"),
    (53, 138, "MPTcpExt", "MPCapableSYNTX"),
    (53, 139, "MPTcpExt", "MPCapableSYNACKRX"),
    (53, 140, "MPTcpExt", "MPFallbackTokenInit"),
    (53, 141, "TcpExt", "TCPHystartTrainDetect"),
    (53, 142, "TcpExt", "TCPHystartTrainCwnd"),
    (53, 143, "TcpExt", "TCPHystartDelayDetect"),
    (53, 144, "TcpExt", "TCPHystartDelayCwnd"),
    (53, 145, "TcpExt", "TCPACKSkippedSynRecv"),
    (53, 146, "TcpExt", "TCPACKSkippedPAWS"),
    (53, 147, "TcpExt", "TCPACKSkippedSeq"),
    (53, 148, "TcpExt", "TCPACKSkippedFinWait2"),
    (53, 149, "TcpExt", "TCPACKSkippedTimeWait"),
    (53, 150, "TcpExt", "TCPACKSkippedChallenge"),
    (53, 151, "TcpExt", "TCPWinProbe"),
    (53, 152, "TcpExt", "TCPKeepAlive"),
    (53, 153, "TcpExt", "TCPMTUPFail"),
    (53, 154, "TcpExt", "TCPMTUPSuccess"),
    (53, 155, "TcpExt", "TCPDelivered"),
    (53, 156, "TcpExt", "TCPDeliveredCE"),
    (53, 157, "TcpExt", "TCPAckCompressed"),
    (53, 158, "TcpExt", "TCPZeroWindowDrop"),
    (53, 159, "TcpExt", "TCPRcvQDrop"),
    (53, 160, "TcpExt", "TCPWqueueTooBig"),
    (53, 161, "TcpExt", "TCPFastOpenPassiveAltKey"),
    (53, 162, "TcpExt", "TcpTimeoutRehash"),
    (53, 163, "TcpExt", "TcpDuplicateDataRehash"),
    (53, 164, "TcpExt", "TCPDSACKRecvSegs"),
    (53, 165, "TcpExt", "TCPDSACKIgnoredDubious"),
    (53, 166, "TcpExt", "TCPMigrateReqSuccess"),
    (53, 167, "TcpExt", "TCPMigrateReqFailure"),
    (53, 168, "IpExt", "ReasmOverlaps"),
    (53, 169, "MPTcpExt", "DSSNoMatchTCP"),
    (53, 170, "MPTcpExt", "DataCsumErr"),
    (53, 171, "MPTcpExt", "OFOQueueTail"),
    (53, 172, "MPTcpExt", "OFOQueue"),
    (53, 173, "MPTcpExt", "OFOMerge"),
    (53, 174, "MPTcpExt", "NoDSSInWindow"),
    (53, 175, "MPTcpExt", "DuplicateData"),
    (53, 176, "MPTcpExt", "AddAddr"),
    (53, 177, "MPTcpExt", "EchoAdd"),
    (53, 178, "MPTcpExt", "PortAdd"),
    (53, 179, "MPTcpExt", "MPJoinPortSynRx"),
    (53, 180, "MPTcpExt", "MPJoinPortSynAckRx"),
    (53, 181, "MPTcpExt", "MPJoinPortAckRx"),
    (53, 182, "MPTcpExt", "MismatchPortSynRx"),
    (53, 183, "MPTcpExt", "MismatchPortAckRx"),
    (53, 184, "MPTcpExt", "RmAddr"),
    (53, 185, "MPTcpExt", "RmSubflow"),
    (53, 186, "MPTcpExt", "MPPrioTx"),
    (53, 187, "MPTcpExt", "MPPrioRx"),
    (53, 188, "MPTcpExt", "RcvPruned"),
    (53, 189, "TcpExt", "TCPLoss"),
    (53, 190, "MPTcpExt", "MPFailTx"),
    (53, 191, "MPTcpExt", "MPFailRx"),
    (53, 192, "MPTcpExt", "SubflowStale"),
    (53, 193, "MPTcpExt", "SubflowRecover"),
    (53, 194, "MPTcpExt", "AddAddrDrop"),
    (53, 195, "MPTcpExt", "RmAddrDrop"),
    (53, 196, "MPTcpExt", "MPFastcloseTx"),
    (53, 197, "MPTcpExt", "MPFastcloseRx"),
    (53, 198, "MPTcpExt", "MPRstTx"),
    (53, 199, "MPTcpExt", "MPRstRx"),
    (53, 200, "MPTcpExt", "InfiniteMapTx"),
    (53, 201, "MPTcpExt", "SndWndShared"),
    (53, 202, "MPTcpExt", "RcvWndShared"),
    (53, 203, "MPTcpExt", "RcvWndConflictUpdate"),
    (53, 204, "MPTcpExt", "RcvWndConflict"),
    (58, 0, "", "Ip6InReceives"),
    (58, 1, "", "Ip6InHdrErrors"),
    (58, 2, "", "Ip6InTooBigErrors"),
    (58, 3, "", "Ip6InNoRoutes"),
    (58, 4, "", "Ip6InAddrErrors"),
    (58, 5, "", "Ip6InUnknownProtos"),
    (58, 6, "", "Ip6InTruncatedPkts"),
    (58, 7, "", "Ip6InDiscards"),
    (58, 8, "", "Ip6InDelivers"),
    (58, 9, "", "Ip6OutForwDatagrams"),
    (58, 10, "", "Ip6OutRequests"),
    (58, 11, "", "Ip6OutDiscards"),
    (58, 12, "", "Ip6OutNoRoutes"),
    (58, 13, "", "Ip6ReasmTimeout"),
    (58, 14, "", "Ip6ReasmReqds"),
    (58, 15, "", "Ip6ReasmOKs"),
    (58, 16, "", "Ip6ReasmFails"),
    (58, 17, "", "Ip6FragOKs"),
    (58, 18, "", "Ip6FragFails"),
    (58, 19, "", "Ip6FragCreates"),
    (58, 20, "", "Ip6InMcastPkts"),
    (58, 21, "", "Ip6OutMcastPkts"),
    (58, 22, "", "Ip6InOctets"),
    (58, 23, "", "Ip6OutOctets"),
    (58, 24, "", "Ip6InMcastOctets"),
    (58, 25, "", "Ip6OutMcastOctets"),
    (58, 26, "", "Ip6InBcastOctets"),
    (58, 27, "", "Ip6OutBcastOctets"),
    (58, 28, "", "Ip6InNoECTPkts"),
    (58, 29, "", "Ip6InECT1Pkts"),
    (58, 30, "", "Ip6InECT0Pkts"),
    (58, 31, "", "Ip6InCEPkts"),
    (58, 32, "", "Icmp6InMsgs"),
    (58, 33, "", "Icmp6InErrors"),
    (58, 34, "", "Icmp6OutMsgs"),
    (58, 35, "", "Icmp6OutErrors"),
    (58, 36, "", "Icmp6InCsumErrors"),
    (58, 37, "", "Icmp6InDestUnreachs"),
    (58, 38, "", "Icmp6InPktTooBigs"),
    (58, 39, "", "Icmp6InTimeExcds"),
    (58, 40, "", "Icmp6InParmProblems"),
    (58, 41, "", "Icmp6InEchos"),
    (58, 42, "", "Icmp6InEchoReplies"),
    (58, 43, "", "Icmp6InGroupMembQueries"),
    (58, 44, "", "Icmp6InGroupMembResponses"),
    (58, 45, "", "Icmp6InGroupMembReductions"),
    (58, 46, "", "Icmp6InRouterSolicits"),
    (58, 47, "", "Icmp6InRouterAdvertisements"),
    (58, 48, "", "Icmp6InNeighborSolicits"),
    (58, 49, "", "Icmp6InNeighborAdvertisements"),
    (58, 50, "", "Icmp6InRedirects"),
    (58, 51, "", "Icmp6InMLDv2Reports"),
    (58, 52, "", "Icmp6OutDestUnreachs"),
    (58, 53, "", "Icmp6OutPktTooBigs"),
    (58, 54, "", "Icmp6OutTimeExcds"),
    (58, 55, "", "Icmp6OutParmProblems"),
    (58, 56, "", "Icmp6OutEchos"),
    (58, 57, "", "Icmp6OutEchoReplies"),
    (58, 58, "", "Icmp6OutGroupMembQueries"),
    (58, 59, "", "Icmp6OutGroupMembResponses"),
    (58, 60, "", "Icmp6OutGroupMembReductions"),
    (58, 61, "", "Icmp6OutRouterSolicits"),
    (58, 62, "", "Icmp6OutRouterAdvertisements"),
    (58, 63, "", "Icmp6OutNeighborSolicits"),
    (58, 64, "", "Icmp6OutNeighborAdvertisements"),
    (58, 65, "", "Icmp6OutRedirects"),
    (58, 66, "", "Icmp6OutMLDv2Reports"),
    (58, 67, "", "Udp6InDatagrams"),
    (58, 68, "", "Udp6NoPorts"),
    (58, 69, "", "Udp6InErrors"),
    (58, 70, "", "Udp6OutDatagrams"),
    (58, 71, "", "Udp6RcvbufErrors"),
    (58, 72, "", "Udp6SndbufErrors"),
    (58, 73, "", "Udp6InCsumErrors"),
    (58, 74, "", "Udp6IgnoredMulti"),
    (58, 75, "", "UdpLite6InDatagrams"),
    (58, 76, "", "UdpLite6NoPorts"),
    (58, 77, "", "UdpLite6InErrors"),
    (58, 78, "", "UdpLite6OutDatagrams"),
    (58, 79, "", "UdpLite6RcvbufErrors"),
    (58, 80, "", "UdpLite6SndbufErrors"),
    (58, 81, "", "UdpLite6InCsumErrors"),
];

#[cfg(test)]
mod tests;
