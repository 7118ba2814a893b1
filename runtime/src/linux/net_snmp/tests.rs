//! Tests of the group on synthesized trees and this host's files. Test-only.

use super::super::LinuxAgent;
use super::super::testing::{agent, fetch_f64, one};

/// A 2.6-era kernel: no InCsumErrors, no IcmpMsg, no UdpLite, Udp without the buffer
/// errors; TcpExt with only a few columns.
const OLD_SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates
Ip: 2 64 1000 0 3 0 0 0 990 800 0 7 0 0 0 0 0 0 0
Icmp: InMsgs InErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs InRedirects InEchos InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps OutMsgs OutErrors OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects OutEchos OutEchoReps OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps
Icmp: 5 0 5 0 0 0 0 0 0 0 0 0 0 9 0 9 0 0 0 0 0 0 0 0 0 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts
Tcp: 1 200 120000 -1 42 17 1 2 4 5000 4800 12 0 3
Udp: InDatagrams NoPorts InErrors OutDatagrams
Udp: 70 1 0 71
";

/// A new kernel: InCsumErrors, IcmpMsg, UdpLite, a column no table knows, and Ip
/// before Tcp as usual.
const NEW_SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 1 64 123456789012 0 0 0 0 0 123456 65432 0 12 0 0 0 0 0 0 0 65440
IcmpMsg: InType0 InType3 OutType3 OutType8 InType300
IcmpMsg: 4 21 19 4 9
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors FutureColumn
Tcp: 1 200 120000 -1 442 217 11 22 14 95000 94800 112 0 33 5 77
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 700 10 0 710 0 0 0 3 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

const NETSTAT: &str = "\
TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts TCPHPHits TCPTimeouts TCPFastOpenActiveFail TCPNewColumnFromTheFuture
TcpExt: 0 0 1 2 123 45 6 9
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InOctets OutOctets
IpExt: 0 0 10 20 300000 400000
MPTcpExt: MPCapableSYNRX MPCapableSYNTX
MPTcpExt: 3 4
";

const SNMP6: &str = "\
Ip6InReceives                   	812
Ip6InHdrErrors                  	0
Ip6OutRequests                  	799
Icmp6InMsgs                     	31
Icmp6InType133                  	2
Udp6InDatagrams                 	44
UdpLite6InDatagrams             	0
";

#[test]
fn an_old_kernels_snmp_has_values_for_its_columns_only() {
    let (_dir, mut a) = agent(&[("proc/net/snmp", OLD_SNMP)]);
    a.expect(
        "network.ip.inreceives 1000
        network.ip.outnoroutes 7
        network.tcp.activeopens 42
        network.udp.outdatagrams 71
        network.icmp.outmsgs 9
        # Columns this kernel lacks have no value; nothing else is lost.
        network.tcp.incsumerrors -
        network.udp.recvbuferrors -
        network.udplite.indatagrams -",
    );
    assert!(fetch_f64(&mut a, "network.icmpmsg.intype").is_empty());
    // The kernel's "no limit" -1, as C's strtoull reads it.
    assert_eq!(one(&mut a, "network.tcp.maxconn"), Some(u64::MAX as f64));
    a.expect(
        "# No netstat, no snmp6: no values, no error.
        network.tcp.timeouts -
        network.ip6.inreceives -",
    );
}

#[test]
fn a_new_kernels_snmp_netstat_and_snmp6_by_section_and_key() {
    let (_dir, mut a) = agent(&[
        ("proc/net/snmp", NEW_SNMP),
        ("proc/net/netstat", NETSTAT),
        ("proc/net/snmp6", SNMP6),
    ]);
    a.expect(
        "network.ip.inreceives 123456789012
        network.tcp.incsumerrors 5
        network.udp.ignoredmulti 3
        network.udplite.indatagrams 0
        # Netstat's TcpExt is network.tcp too; IpExt is network.ip; MPTcpExt network.mptcp.
        network.tcp.hphits 123
        network.tcp.timeouts 45
        network.tcp.syncookiesfailed 1
        network.ip.inoctets 300000
        network.mptcp.mpcapablesynrx 3
        network.tcp.tcpdelivered -
        # One counter, two names.
        network.tcp.fastopenactivefail 6
        network.tcp.tcpfastopenactivefail 6",
    );
    // Type numbers are instances; past the 256 pmdalinux keeps is dropped.
    let mut t = fetch_f64(&mut a, "network.icmpmsg.intype");
    t.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(t, vec![("Type0".into(), 4.0), ("Type3".into(), 21.0)]);
    let t = fetch_f64(&mut a, "network.icmpmsg.outtype");
    assert_eq!(t, vec![("Type3".into(), 19.0), ("Type8".into(), 4.0)]);
    use crate::namespace::Agent;
    assert_eq!(a.instance_id(super::indom::ICMPMSG, "Type8"), Some(8));
    a.expect(
        "network.ip6.inreceives 812
        network.icmp6.inmsgs 31
        network.udp6.indatagrams 44
        network.udplite6.indatagrams 0
        # Not in this snmp6: 0, as pmdalinux answers a counter its kernel lacks.
        network.ip6.outforwdatagrams 0",
    );
}

#[test]
fn a_file_that_changes_shape_mid_read_costs_only_the_torn_pair() {
    let torn = "\
Ip: Forwarding DefaultTTL InReceives
Tcp: 1 64 99
Udp: InDatagrams NoPorts
Udp: 5 6
Tcp: RtoAlgorithm garbage
";
    let (_dir, mut a) = agent(&[("proc/net/snmp", torn)]);
    a.expect(
        "network.ip.inreceives -
        network.udp.noports 6
        network.tcp.rtoalgorithm -",
    );
}

#[test]
fn this_hosts_files_parse() {
    let mut a = LinuxAgent::new();
    if std::path::Path::new("/proc/net/snmp").exists() {
        assert!(one(&mut a, "network.ip.inreceives").is_some());
        assert!(one(&mut a, "network.tcp.activeopens").is_some());
    }
    if std::path::Path::new("/proc/net/netstat").exists() {
        assert!(one(&mut a, "network.tcp.delayedacks").is_some());
    }
    if std::path::Path::new("/proc/net/snmp6").exists() {
        assert!(one(&mut a, "network.ip6.inreceives").is_some());
    }
}
