//! The codec against PCP's byte layouts (golden PDUs as libpcp 6.0.3 builds them), every
//! decoder against random and truncated bytes, and the answers over a small namespace with a
//! dynamic subtree (the seed's foo agent).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::pdu::{self, Desc, Profile, Request, Value, ValueSet, decode};
use super::serve::{Session, Shared, Source};
use super::wire::{HEADER, Header, MAX_CLIENT_PDU, PduError, Writer, errors, types as t};
use crate::namespace::{
    Agent, Child, Delegates, MetricDesc, Namespace, NsError, Pmid, Semantics, Traversal, ValueType,
    Values,
};

fn words(b: &[u8]) -> Vec<u32> {
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

/// The seed's foo agent: `foo.count` is a dynamic root (44:*:*) whose names only the agent
/// knows; foo.colour has an instance domain.
struct Foo;

const FOO_PMNS: &str = "root { foo }\nfoo { version 44:0:1 count 44:*:* colour 44:0:3 }";

impl Agent for Foo {
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        match name {
            "foo.count.ops" => Ok(Pmid::new(44, 1, 0).unwrap()),
            "foo.count.errs" => Ok(Pmid::new(44, 1, 1).unwrap()),
            "foo.count.numcount" => Ok(Pmid::new(44, 0, 27).unwrap()),
            _ => Err(NsError::UnknownName),
        }
    }
    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        match (id.cluster, id.item) {
            (1, 0) => Ok(vec!["foo.count.ops".into()]),
            (1, 1) => Ok(vec!["foo.count.errs".into()]),
            (0, 27) => Ok(vec!["foo.count.numcount".into()]),
            _ => Err(NsError::UnknownPmid),
        }
    }
    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        match name {
            "foo.count" => Ok(["ops", "errs", "numcount"]
                .map(|n| Child {
                    name: n.into(),
                    leaf: true,
                })
                .to_vec()),
            _ => self.lookup_name(name).map(|_| Vec::new()),
        }
    }
    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        let (semantics, units, indom, help) = match (id.cluster, id.item) {
            (0, 1) => (Semantics::Discrete, "", None, "version"),
            (0, 3) => (Semantics::Instant, "Kbyte", Some(7), "colours"),
            (1, 0) => (Semantics::Counter, "count", None, "operations"),
            (1, 1) => (Semantics::Counter, "count", None, ""),
            (0, 27) => (Semantics::Instant, "", None, "number of counters"),
            _ => return Err(NsError::UnknownPmid),
        };
        Ok(MetricDesc {
            id,
            semantics,
            units: units.into(),
            indom,
            help: help.into(),
        })
    }
    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        ids.iter()
            .map(|&id| {
                let v = match (id.cluster, id.item) {
                    (0, 3) => Ok(vec![
                        ("red".into(), 1.0),
                        ("green".into(), 2.0),
                        ("blue".into(), 3.0),
                    ]),
                    (1, 0) => Ok(vec![(String::new(), 42.0)]),
                    (0, 1) | (1, 1) | (0, 27) => Ok(vec![(String::new(), 3.0)]),
                    _ => Err(NsError::UnknownPmid),
                };
                (id, v)
            })
            .collect()
    }
    fn value_type(&mut self, id: Pmid) -> Option<ValueType> {
        (id.item == 0).then_some(ValueType::U64)
    }
}

struct FooSource {
    ns: Namespace,
    agents: Mutex<BTreeMap<u32, Box<dyn Agent>>>,
}

impl FooSource {
    fn with<R>(&self, f: impl FnOnce(&Namespace, &mut dyn Delegates) -> R) -> R {
        let mut a = self.agents.lock().unwrap();
        f(&self.ns, &mut *a)
    }
}

impl Source for FooSource {
    fn lookup(&self, name: &str) -> Result<Pmid, NsError> {
        self.with(|ns, d| ns.lookup(name, Some(d)))
    }
    fn names_of(&self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.with(|ns, d| ns.names_of(id, Some(d)))
    }
    fn children(&self, name: &str) -> Result<Vec<Child>, NsError> {
        self.with(|ns, d| ns.children(name, Some(d)))
    }
    fn traverse(&self, prefix: &str) -> Result<Traversal, NsError> {
        self.with(|ns, d| ns.traverse(prefix, Some(d)))
    }
    fn describe(&self, id: Pmid) -> Result<MetricDesc, NsError> {
        Foo.describe(id)
    }
    fn value_type(&self, id: Pmid) -> Option<ValueType> {
        Foo.value_type(id)
    }
    fn instance_id(&self, _: u32, _: u32, _: &str) -> Option<u32> {
        None
    }
    fn fetch(&self, ids: &[Pmid]) -> Vec<Result<Values, NsError>> {
        Foo.fetch(ids).into_iter().map(|(_, v)| v).collect()
    }
    fn agent_count(&self) -> u32 {
        1
    }
}

fn session() -> Session {
    let mut agents: BTreeMap<u32, Box<dyn Agent>> = BTreeMap::new();
    agents.insert(44, Box::new(Foo));
    let src = FooSource {
        ns: Namespace::from_pmns(&[("foo", FOO_PMNS)]).unwrap(),
        agents: Mutex::new(agents),
    };
    Session::new(Arc::new(Shared::new(Box::new(src), "testhost".into())))
}

fn ask(s: &mut Session, req: Request) -> Vec<u32> {
    words(&s.answer(req).expect("a reply"))
}

/// A reply's names, decoded with the request decoder (the PDU is the same).
fn names_in(reply: &[u32]) -> Vec<String> {
    let bytes: Vec<u8> = reply.iter().flat_map(|w| w.to_be_bytes()).collect();
    match decode(&bytes) {
        Ok(Request::Names(n)) => n,
        other => panic!("not a name list: {other:?}"),
    }
}

#[test]
fn the_seed_table_over_the_wire() {
    let mut s = session();
    let ops = Pmid::new(44, 1, 0).unwrap().to_raw();
    // pmLookupName: a dynamic leaf resolves through the agent; foo.count is not a leaf;
    // foo.count.anything.else is unknown; one miss among several is PM_ID_NULL.
    assert_eq!(
        ask(&mut s, Request::Names(vec!["foo.count.ops".into()]))[3..],
        [1, 1, ops]
    );
    let err = |code: i32| vec![16, t::ERROR, 0, code as u32];
    assert_eq!(
        ask(&mut s, Request::Names(vec!["foo.count".into()])),
        err(-12394)
    );
    assert_eq!(
        ask(
            &mut s,
            Request::Names(vec!["foo.count.anything.else".into()])
        ),
        err(-12357)
    );
    assert_eq!(
        ask(
            &mut s,
            Request::Names(vec!["foo.count.ops".into(), "nope".into()])
        )[3..],
        [1, 2, ops, 0xffff_ffff]
    );
    // pmNameID of a dynamic PMID asks the agent.
    assert_eq!(
        names_in(&ask(&mut s, Request::Ids(vec![ops]))),
        ["foo.count.ops"]
    );
    // Children of foo: foo.count is a non-leaf; of foo.count: the agent's.
    let kids = ask(
        &mut s,
        Request::Child {
            name: "foo".into(),
            status: true,
        },
    );
    assert_eq!(names_in(&kids), ["version", "count", "colour"]);
    assert_eq!(kids[4], 3, "numstatus");
    assert_eq!(kids[6], 0, "version is a leaf");
    // Traverse: the dynamic subtree expanded in place; root adds pmcd.*.
    assert_eq!(
        names_in(&ask(&mut s, Request::Traverse("foo".into()))),
        [
            "foo.version",
            "foo.count.ops",
            "foo.count.errs",
            "foo.count.numcount",
            "foo.colour"
        ]
    );
    let all = names_in(&ask(&mut s, Request::Traverse(String::new())));
    assert!(
        all.contains(&"pmcd.hostname".to_string()) && all.contains(&"foo.count.ops".to_string())
    );
    assert_eq!(
        names_in(&ask(&mut s, Request::Traverse("foo.count.ops".into()))),
        ["foo.count.ops"]
    );
    assert_eq!(ask(&mut s, Request::Traverse("bar".into())), err(-12357));
}

#[test]
fn descs_fetch_profile_instances_text() {
    let mut s = session();
    let colour = Pmid::new(44, 0, 3).unwrap().to_raw();
    let ops = Pmid::new(44, 1, 0).unwrap().to_raw();
    let d = ask(&mut s, Request::DescReq(colour));
    // Double (no type from the agent), indom 44.7, instant, Kbyte.
    assert_eq!(
        d[3..],
        [colour, 5, (44 << 22) | 7, 3, (1 << 28) | (1 << 16)]
    );
    assert_eq!(
        ask(&mut s, Request::DescReq(ops))[4],
        3,
        "U64 from the agent"
    );
    assert_eq!(
        ask(&mut s, Request::DescReq(0x1180_0009))[3],
        errors::PMID as u32
    );
    // Every instance, numbered in the order seen.
    let all = ask(
        &mut s,
        Request::InstanceReq {
            indom: (44 << 22) | 7,
            inst: -1,
            name: None,
        },
    );
    assert_eq!(all[4], 3);
    assert_eq!(all[5..8], [0, 3, u32::from_be_bytes(*b"red~")]);
    let by_name = ask(
        &mut s,
        Request::InstanceReq {
            indom: (44 << 22) | 7,
            inst: -1,
            name: Some("blue".into()),
        },
    );
    assert_eq!(by_name[4..], [1, 2, 0]);
    let by_number = ask(
        &mut s,
        Request::InstanceReq {
            indom: (44 << 22) | 7,
            inst: 1,
            name: None,
        },
    );
    assert_eq!(
        by_number[4..],
        [
            1,
            0xffff_ffff,
            5,
            u32::from_be_bytes(*b"gree"),
            u32::from_be_bytes(*b"n~~~")
        ]
    );
    assert_eq!(
        ask(
            &mut s,
            Request::InstanceReq {
                indom: (44 << 22) | 99,
                inst: -1,
                name: None
            }
        )[3],
        errors::INDOM as u32
    );
    // A profile that keeps only instance 1 (green) of the colour indom for context 3.
    assert_eq!(
        s.answer(Request::Profile(Profile {
            ctx: 3,
            state: 0,
            indoms: vec![pdu::IndomProfile {
                indom: (44 << 22) | 7,
                state: 1,
                instances: vec![1],
            }],
        })),
        None
    );
    let r = ask(
        &mut s,
        Request::Fetch {
            ctx: 3,
            ids: vec![colour, ops],
            highres: false,
        },
    );
    // colour: one DPTR value (a double), instance 1; ops: one U64.
    assert_eq!(r[5], 2);
    assert_eq!(r[6..10], [colour, 1, 1, 1]);
    let other_ctx = ask(
        &mut s,
        Request::Fetch {
            ctx: 4,
            ids: vec![colour],
            highres: false,
        },
    );
    assert_eq!(other_ctx[7], 3, "another context has no profile");
    // Help text where the agent has it, PM_ERR_TEXT otherwise (and for indoms).
    let text = ask(
        &mut s,
        Request::TextReq {
            ident: ops,
            kind: 4 | 1,
        },
    );
    assert_eq!(text[4], "operations".len() as u32);
    let errs = Pmid::new(44, 1, 1).unwrap().to_raw();
    assert_eq!(
        ask(
            &mut s,
            Request::TextReq {
                ident: errs,
                kind: 4 | 2
            }
        )[3],
        errors::TEXT as u32
    );
    assert_eq!(
        ask(
            &mut s,
            Request::TextReq {
                ident: colour,
                kind: 8 | 1
            }
        )[3],
        errors::TEXT as u32
    );
    assert_eq!(ask(&mut s, Request::Store)[3], errors::PERMISSION as u32);
}

#[test]
fn pmcd_metrics() {
    let mut s = session();
    let host = ask(&mut s, Request::Names(vec!["pmcd.hostname".into()]));
    assert_eq!(host[5], Pmid::new(2, 0, 21).unwrap().to_raw());
    let r = s
        .answer(Request::Fetch {
            ctx: 0,
            ids: vec![host[5]],
            highres: false,
        })
        .unwrap();
    let w = words(&r);
    // One string value in a block: "testhost\0".
    assert_eq!(w[9], 0xffff_ffff);
    assert_eq!(w[11], (6 << 24) | (4 + 9));
    assert_eq!(&r[48..56], b"testhost");
    assert_eq!(ask(&mut s, Request::DescReq(host[5]))[4], 6, "a string");
    let kids = names_in(&ask(
        &mut s,
        Request::Child {
            name: String::new(),
            status: false,
        },
    ));
    assert_eq!(kids, ["foo", "pmcd"]);
}

#[test]
fn highres_result_descs_and_labels() {
    let sets = [ValueSet {
        pmid: 9,
        values: Ok(vec![(-1, Value::U64(5))]),
    }];
    let w = words(&pdu::highres_result(0x1_0000_0002, 3, &sets));
    // numpmid, then 64-bit seconds and nanoseconds, then the lists (block offset in words
    // from the PDU's start: 32 bytes of head + 20 of list = word 13).
    assert_eq!(w[..8], [w[0], 0x7015, 0, 1, 1, 2, 0, 3]);
    assert_eq!(w[8..14], [9, 1, 1, 0xffff_ffff, 13, 0x0300_000c]);
    assert_eq!(w[0] as usize, 4 * w.len());

    let d = Desc {
        pmid: 1,
        ty: 3,
        indom: 7,
        sem: 1,
        units: 0,
    };
    let b = pdu::descs(&[d, d]);
    // 16 + 20 per descriptor, as __pmDecodeDescs insists.
    assert_eq!(b.len(), 16 + 40);
    assert_eq!(words(&b)[3..9], [2, 1, 3, 7, 1, 0]);

    let b = pdu::label(
        0xffff_ffff,
        1,
        &[pdu::LabelSet {
            inst: -1,
            labels: vec![("hostname", "\"vm\"".into(), 1)],
        }],
    );
    let json = br#"{"hostname":"vm"}"#;
    // Head 28, one set 16 + one label 8, then the JSON, unpadded.
    assert_eq!(b.len(), 28 + 24 + json.len());
    let w = words(&b[..52]);
    assert_eq!(w[..7], [b.len() as u32, 0x7013, 0, 0xffff_ffff, 1, 0, 1]);
    assert_eq!(w[7..11], [0xffff_ffff, 1, 52, json.len() as u32]);
    // Name at 2 ("hostname", 8 bytes, flags CONTEXT), value at 12 ("\"vm\"", 4 bytes).
    assert_eq!(w[11..13], [(2 << 16) | (8 << 8) | 1, (12 << 16) | 4]);
    assert_eq!(&b[52..], json);
    assert_eq!(&json[2..10], b"hostname");
    assert_eq!(&json[12..16], b"\"vm\"");
    assert_eq!(pdu::label(5, 4, &[]).len(), 28);
}

#[test]
fn descs_and_labels_answers() {
    let mut s = session();
    let ops = Pmid::new(44, 1, 0).unwrap().to_raw();
    let r = ask(&mut s, Request::DescIds(vec![ops, 0x1180_0009]));
    assert_eq!(r[1], t::DESCS);
    assert_eq!(r[3], 2);
    assert_eq!(r[4], ops);
    assert_eq!(r[9], 0xffff_ffff, "the unknown PMID's descriptor failed");
    assert_eq!(
        ask(&mut s, Request::DescIds(vec![0x1180_0009]))[3],
        errors::PMID as u32
    );
    let l = s
        .answer(Request::LabelReq {
            ident: 0xffff_ffff,
            kind: 1,
        })
        .unwrap();
    assert!(l.ends_with(br#"{"hostname":"testhost"}"#));
    let none = ask(&mut s, Request::LabelReq { ident: 44, kind: 2 });
    assert_eq!(none, [28, t::LABEL, 0, 44, 2, 0, 0]);
    let r = ask(
        &mut s,
        Request::Fetch {
            ctx: 0,
            ids: vec![ops],
            highres: true,
        },
    );
    assert_eq!((r[1], r[3]), (t::HIGHRES_RESULT, 1));
}

#[test]
fn the_config_section() {
    let c = crate::config::Config::parse(crate::config::DEFAULT).unwrap();
    assert_eq!(c.pcp.listen, Some("127.0.0.1:44321".parse().unwrap()));
    let c = crate::config::Config::parse("").unwrap();
    assert_eq!(c.pcp.listen, None, "no [pcp]: no port");
    let e = crate::config::Config::parse("[pcp]\nlisten = \"127.0.0.1:1\"\nport = 3\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("port"), "{e}");
}
