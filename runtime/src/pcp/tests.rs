//! The codec against PCP's byte layouts (golden PDUs as libpcp 6.0.3 builds them) and every
//! decoder against random and truncated bytes; the answers are in `tests_session.rs`.

use super::pdu::{self, Desc, Profile, Request, Value, ValueSet, decode};
use super::wire::{HEADER, Header, MAX_CLIENT_PDU, PduError, Writer, errors, types as t};
use crate::namespace::Pmid;

pub(super) fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A PDU as libpcp's senders build it.
fn build(ty: u32, body: &[u32], tail: &[u8]) -> Vec<u8> {
    let mut w = Writer::new(ty, 0);
    for x in body {
        w.u32(*x);
    }
    if !tail.is_empty() {
        w.padded(tail);
    }
    w.finish()
}

#[test]
fn result_matches_the_worked_example() {
    // U64 70.0.1 = 5, as research §2 spells it out word by word (56 bytes).
    let b = pdu::result(
        7,
        9,
        &[ValueSet {
            pmid: Pmid::new(70, 0, 1).unwrap().to_raw(),
            values: Ok(vec![(-1, Value::U64(5))]),
        }],
    );
    assert_eq!(
        words(&b),
        [
            0x38,
            0x7001,
            0,
            7,
            9,
            1,
            0x1180_0001,
            1,
            1,
            0xffff_ffff,
            0xb,
            0x0300_000c,
            0,
            5
        ]
    );
}

#[test]
fn result_blocks_follow_the_lists_back_to_back() {
    let b = pdu::result(
        0,
        0,
        &[
            ValueSet {
                pmid: 1,
                values: Ok(vec![
                    (0, Value::String("ab".into())),
                    (1, Value::Double(1.5)),
                ]),
            },
            ValueSet {
                pmid: 2,
                values: Err(errors::PMID),
            },
            ValueSet {
                pmid: 3,
                values: Ok(vec![(4, Value::U32(7))]),
            },
            ValueSet {
                pmid: 4,
                values: Ok(vec![]),
            },
        ],
    );
    let w = words(&b);
    assert_eq!(w[0] as usize, b.len());
    // Lists: header 3 + 3 words, set 1: 3 + 2*2, set 2: 2, set 3: 3 + 2, set 4: 2 = 22 words.
    let lists = 22;
    assert_eq!(&w[6..13], &[1, 2, 1, 0, lists, 1, lists + 2]);
    assert_eq!(&w[13..15], &[2, errors::PMID as u32]);
    // INSITU: the value in the list.
    assert_eq!(&w[15..20], &[3, 1, 0, 4, 7]);
    assert_eq!(&w[20..22], &[4, 0]);
    // "ab\0" in a block of 4 + 3 bytes, padded; then the double.
    assert_eq!(w[lists as usize], (6 << 24) | 7);
    assert_eq!(&b[lists as usize * 4 + 4..lists as usize * 4 + 7], b"ab\0");
    assert_eq!(w[lists as usize + 2], (5 << 24) | 12);
    assert_eq!(w.len(), lists as usize + 5);
}

#[test]
fn fixed_size_replies() {
    assert_eq!(
        words(&pdu::error(-12357)),
        [16, 0x7000, 0, (-12357i32) as u32]
    );
    assert_eq!(
        words(&pdu::xerror(0, 0x0201_0000)),
        [20, 0x7000, 0, 0, 0x0201_0000]
    );
    let d = Desc {
        pmid: 1,
        ty: 3,
        indom: 0xffff_ffff,
        sem: 1,
        units: 0x1000_0000,
    };
    assert_eq!(pdu::desc(&d).len(), 32);
    assert_eq!(
        words(&pdu::text(9, "hi")),
        [20 + 4, 0x7009, 0, 9, 2, u32::from_be_bytes(*b"hi~~")]
    );
}

#[test]
fn instance_replies_for_the_three_modes() {
    let all = pdu::instance(5, &[(0, Some("cpu0")), (1, Some("cpu10"))]);
    assert_eq!(
        words(&all),
        [
            48,
            0x7007,
            0,
            5,
            2,
            0,
            4,
            u32::from_be_bytes(*b"cpu0"),
            1,
            5,
            u32::from_be_bytes(*b"cpu1"),
            u32::from_be_bytes(*b"0~~~"),
        ]
    );
    assert_eq!(
        words(&pdu::instance(5, &[(3, None)])),
        [28, 0x7007, 0, 5, 1, 3, 0]
    );
}

#[test]
fn names_and_ids_round_trip() {
    let b = pdu::names(&["kernel.all.load", "a"], None);
    // nstrbytes counts each name's NUL.
    assert_eq!(words(&b)[3..6], [16 + 2, 0, 2]);
    assert_eq!(
        decode(&b),
        Ok(Request::Names(vec!["kernel.all.load".into(), "a".into()]))
    );
    let b = pdu::names(&["ops", "sub"], Some(&[true, false]));
    assert_eq!(words(&b)[3..7], [8, 2, 2, 0]);
    assert_eq!(
        decode(&b),
        Ok(Request::Names(vec!["ops".into(), "sub".into()]))
    );
    let b = pdu::ids(1, &[0x1180_0001, 0xffff_ffff]);
    assert_eq!(decode(&b), Ok(Request::Ids(vec![0x1180_0001, 0xffff_ffff])));
}

/// The requests a PCP 6.0.3 client sends, built as libpcp builds them.
fn client_pdus() -> Vec<(Vec<u8>, Request)> {
    vec![
        (
            build(t::CREDS, &[1, 0x0102_0000], b""),
            Request::Creds(vec![0x0102_0000]),
        ),
        // The root: namelen 0, so the PDU is 20 bytes.
        (
            build(t::PMNS_TRAVERSE, &[0, 0], b""),
            Request::Traverse(String::new()),
        ),
        (
            build(t::PMNS_CHILD, &[1, 3], b"foo"),
            Request::Child {
                name: "foo".into(),
                status: true,
            },
        ),
        (
            build(t::DESC_REQ, &[0x1180_0001], b""),
            Request::DescReq(0x1180_0001),
        ),
        (
            build(t::INSTANCE_REQ, &[5, 0, 0, 0xffff_ffff, 8], b"1 minute"),
            Request::InstanceReq {
                indom: 5,
                inst: -1,
                name: Some("1 minute".into()),
            },
        ),
        (
            build(t::INSTANCE_REQ, &[5, 0, 0, 3, 0], b""),
            Request::InstanceReq {
                indom: 5,
                inst: 3,
                name: None,
            },
        ),
        (
            build(
                t::PROFILE,
                &[7, 0, 2, 0, 5, 1, 2, 0, 6, 0, 0, 0, 10, 11],
                b"",
            ),
            Request::Profile(Profile {
                ctx: 7,
                state: 0,
                indoms: vec![
                    pdu::IndomProfile {
                        indom: 5,
                        state: 1,
                        instances: vec![10, 11],
                    },
                    pdu::IndomProfile {
                        indom: 6,
                        state: 0,
                        instances: vec![],
                    },
                ],
            }),
        ),
        (
            build(t::FETCH, &[7, 0, 0, 2, 1, 2], b""),
            Request::Fetch {
                ctx: 7,
                ids: vec![1, 2],
                highres: false,
            },
        ),
        (
            build(t::TEXT_REQ, &[1, 4 | 1], b""),
            Request::TextReq { ident: 1, kind: 5 },
        ),
        (build(t::PMNS_IDS, &[0, 1, 9], b""), Request::Ids(vec![9])),
        (
            pdu::names(&["pmcd.hostname"], None),
            Request::Names(vec!["pmcd.hostname".into()]),
        ),
        (build(t::RESULT, &[0, 0, 0], b""), Request::Store),
    ]
}

#[test]
fn client_requests_decode() {
    for (b, want) in client_pdus() {
        assert_eq!(decode(&b), Ok(want), "{:x?}", words(&b));
    }
}

/// Every proper prefix of every request, with its length word saying the prefix's length (a
/// truncated PDU) and with the original length (a length past the data), is refused.
#[test]
fn truncated_requests_are_refused() {
    for (b, _) in client_pdus() {
        if matches!(decode(&b), Ok(Request::Store)) {
            continue;
        }
        for cut in 0..b.len() {
            let mut p = b[..cut].to_vec();
            if cut >= 4 {
                p[..4].copy_from_slice(&(cut as u32).to_be_bytes());
            }
            // A cut at a word boundary past the fixed fields may still be a valid, shorter
            // PDU (a name list with fewer names is not); it must not decode as the original.
            if let Ok(r) = decode(&p) {
                assert_ne!(Ok(r), decode(&b), "prefix {cut} of {:x?}", words(&b));
            }
        }
        let mut longer = b.clone();
        longer.extend_from_slice(&[0; 4]);
        longer[..4].copy_from_slice(&(b.len() as u32 + 4).to_be_bytes());
        assert!(
            matches!(
                decode(&longer),
                Err(PduError::Trailing { .. }) | Err(PduError::Invalid { .. })
            ),
            "{:x?}",
            words(&b)
        );
    }
}

#[test]
fn hostile_counts_are_refused_before_allocating() {
    // A million names (or 2^31 - 1) claimed by a 24-byte PDU.
    for n in [1_000_000u32, 0x7fff_ffff, 0xffff_ffff] {
        let b = build(t::PMNS_NAMES, &[0, 0, n], b"");
        assert!(decode(&b).is_err());
        let b = build(t::FETCH, &[0, 0, 0, n], b"");
        assert!(decode(&b).is_err());
        let b = build(t::PROFILE, &[0, 0, n, 0], b"");
        assert!(decode(&b).is_err());
        let b = build(t::PROFILE, &[0, 0, 1, 0, 5, 1, n, 0], b"");
        assert!(decode(&b).is_err());
        let b = build(t::PMNS_CHILD, &[0, n], b"abcd");
        assert!(decode(&b).is_err());
    }
    // The header's own bounds.
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&(1u32 << 30).to_be_bytes());
    assert_eq!(
        Header::parse(&h, MAX_CLIENT_PDU),
        Err(PduError::TooLong(1 << 30))
    );
    h[..4].copy_from_slice(&11u32.to_be_bytes());
    assert_eq!(
        Header::parse(&h, MAX_CLIENT_PDU),
        Err(PduError::TooShort(11))
    );
    assert!(decode(&[0; 5]).is_err());
    assert_eq!(
        decode(&build(0x7fff, &[], b"")),
        Err(PduError::Unexpected(0x7fff))
    );
}

/// Random bytes, and random corruptions of real requests, through every decoder: no panic.
#[test]
fn random_bytes_never_panic() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let reqs: Vec<Vec<u8>> = client_pdus().into_iter().map(|(b, _)| b).collect();
    for i in 0..200_000 {
        let mut b = if i % 2 == 0 {
            let len = (next() % 96) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if b.len() >= 8 {
                // Mostly a known type, so the decoders past the type switch are reached.
                let ty = 0x7000 + (next() % 0x18) as u32;
                b[4..8].copy_from_slice(&ty.to_be_bytes());
            }
            b
        } else {
            let mut b = reqs[(next() as usize) % reqs.len()].clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() as usize) % b.len();
                b[at] = next() as u8;
            }
            b
        };
        if b.len() >= 4 && next() % 2 == 0 {
            let len = b.len() as u32;
            b[..4].copy_from_slice(&len.to_be_bytes());
        }
        let _ = decode(&b);
        if b.len() >= HEADER {
            let _ = Header::parse(b[..HEADER].try_into().unwrap(), MAX_CLIENT_PDU);
        }
    }
}

#[test]
fn profiles_as_pcp_applies_them() {
    let p = Profile {
        ctx: 0,
        state: 0,
        indoms: vec![pdu::IndomProfile {
            indom: 5,
            state: 1,
            instances: vec![2],
        }],
    };
    // pmval -i: indom 5 excludes all but instance 2; other indoms include everything.
    assert!(p.includes(5, 2));
    assert!(!p.includes(5, 3));
    assert!(p.includes(6, 3));
    let everything_but = Profile {
        indoms: vec![pdu::IndomProfile {
            indom: 5,
            state: 0,
            instances: vec![2],
        }],
        ..Profile::default()
    };
    assert!(!everything_but.includes(5, 2));
    assert!(everything_but.includes(5, 1));
}
