//! Clients that send too much, too little, or never read: refused or closed, others served.

use super::*;

/// A raw client: connects, reads the handshake, sends CREDS.
fn raw_client(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut hello = [0u8; 20];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(&hello[..8], &[0, 0, 0, 20, 0, 0, 0x70, 0]);
    s.write_all(&pdu(0x700c, &[1, 0x0102_0000])).unwrap();
    s
}

fn pdu(ty: u32, body: &[u32]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&((12 + 4 * body.len()) as u32).to_be_bytes());
    b.extend_from_slice(&ty.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    for w in body {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b
}

/// Reads until the server closes; what it sent before closing.
fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn hostile_clients_are_refused_and_others_served() {
    let w = wasmon(&no_mmv());
    let port = w.pcp;
    let served = || ok("pminfo", port, &["-f", "hinv.ncpu"]).contains("value");
    assert!(served());
    let rss_before = rss_kb(w.daemon.child.id());

    // A 1 GB length field: ERROR PM_ERR_TOOBIG (-12444), then closed.
    let mut s = raw_client(port);
    s.write_all(&[0x40, 0, 0, 0, 0, 0, 0x70, 0x03, 0, 0, 0, 0])
        .unwrap();
    let got = until_closed(&mut s);
    assert_eq!(got, pdu(0x7000, &[(-12444i32) as u32]));

    // A million names claimed in a small PDU: PM_ERR_IPC (-12366), closed.
    let mut s = raw_client(port);
    s.write_all(&pdu(0x700e, &[0, 0, 1_000_000, 3, 0x6162_6300]))
        .unwrap();
    assert_eq!(until_closed(&mut s), pdu(0x7000, &[(-12366i32) as u32]));

    // A PDU shorter than its fields (FETCH of 2 PMIDs carrying 1): PM_ERR_IPC, closed.
    let mut s = raw_client(port);
    s.write_all(&pdu(0x7003, &[0, 0, 0, 2, 1])).unwrap();
    assert_eq!(until_closed(&mut s), pdu(0x7000, &[(-12366i32) as u32]));

    // A length below the header: closed.
    let mut s = raw_client(port);
    s.write_all(&[0, 0, 0, 4, 0, 0, 0x70, 0x03, 0, 0, 0, 0])
        .unwrap();
    assert_eq!(until_closed(&mut s), pdu(0x7000, &[(-12366i32) as u32]));

    // No CREDS first: closed without an answer.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&pdu(0x7004, &[1])).unwrap();
    assert_eq!(until_closed(&mut s).len(), 20, "only the handshake");

    // A length past the data (the rest never comes), a truncated PDU left hanging, and a
    // client that sends requests and never reads its replies: all held open while others
    // are served.
    let mut stalled = raw_client(port);
    stalled
        .write_all(&[0, 0, 0x10, 0, 0, 0, 0x70, 0x03, 0, 0, 0, 0, 1, 2])
        .unwrap();
    let mut half = raw_client(port);
    half.write_all(&[0, 0, 0]).unwrap();
    let mut deaf = raw_client(port);
    let every: Vec<u32> = [0u32, 0, 0, 1, (60 << 22) | (3 << 10)].to_vec();
    let fetch = pdu(0x7003, &every);
    deaf.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut sent = 0;
    for _ in 0..200_000 {
        if deaf.write_all(&fetch).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent > 0);
    assert!(served(), "another client is served beside the hostile ones");
    assert!(served());

    // Memory stays flat: the hostile clients held at most a PDU each.
    let grown = rss_kb(w.daemon.child.id()).saturating_sub(rss_before);
    assert!(grown < 64 * 1024, "RSS grew by {grown} kB");
    drop((stalled, half, deaf));
}
