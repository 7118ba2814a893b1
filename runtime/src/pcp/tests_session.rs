//! The answers over a small namespace with a dynamic subtree (the seed's foo agent): the
//! seed's table over the wire, descriptions, fetches with profiles, instances, help text,
//! pmcd.* metrics, and the feature bits' PDUs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::pdu::{self, Desc, Profile, Request, Value, ValueSet, decode};
use super::serve::{Session, Shared, Source};
use super::wire::{errors, types as t};
use crate::namespace::{
    Agent, Child, Delegates, LabelsOf, MetricDesc, Namespace, NsError, Pmid, Semantics, Traversal,
    ValueType, Values,
};

use super::tests::words;

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
            value_type: if id.item == 0 {
                ValueType::U64
            } else {
                ValueType::Double
            },
        })
    }
    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        ids.iter()
            .map(|&id| {
                let v = match (id.cluster, id.item) {
                    (0, 3) => Ok(vec![
                        ("red".into(), 1.0.into()),
                        ("green".into(), 2.0.into()),
                        ("blue".into(), 3.0.into()),
                    ]),
                    (1, 0) => Ok(vec![(String::new(), 42.0.into())]),
                    (0, 1) | (1, 1) | (0, 27) => Ok(vec![(String::new(), 3.0.into())]),
                    _ => Err(NsError::UnknownPmid),
                };
                (id, v)
            })
            .collect()
    }
}

struct FooSource {
    ns: Namespace,
    agents: Mutex<BTreeMap<u32, Box<dyn Agent>>>,
}

impl FooSource {
    fn with<R>(&self, f: impl FnOnce(&Namespace, &mut dyn Delegates) -> R) -> R {
        let mut a = crate::util::lock(&self.agents);
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
    fn instance_id(&self, _: u32, _: u32, _: &str) -> Option<u32> {
        None
    }
    fn fetch(&self, ids: &[Pmid]) -> Vec<Result<Values, NsError>> {
        Foo.fetch(ids).into_iter().map(|(_, v)| v).collect()
    }
    fn agent_name(&self, domain: u32) -> Option<String> {
        (domain == 44).then(|| "foo".to_string())
    }
    fn labels(&self, _: u32, _: LabelsOf) -> Vec<(String, serde_json::Value)> {
        Vec::new()
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

/// The reply to a FETCH of `ids` in context `ctx` (`highres`: HIGHRES_FETCH).
fn fetch(s: &mut Session, ctx: u32, ids: &[u32], highres: bool) -> Vec<u32> {
    ask(
        s,
        Request::Fetch {
            ctx,
            ids: ids.to_vec(),
            highres,
        },
    )
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
    let r = fetch(&mut s, 3, &[colour, ops], false);
    // colour: one DPTR value (a double), instance 1; ops: one U64.
    assert_eq!(r[5], 2);
    assert_eq!(r[6..10], [colour, 1, 1, 1]);
    let other_ctx = fetch(&mut s, 4, &[colour], false);
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
    // The context's labels, sorted by name as libpcp sorts them.
    let json = String::from_utf8_lossy(&l);
    let at = |k: &str| json.find(k).unwrap_or_else(|| panic!("{k} in {json}"));
    assert!(at(r#""domainname":"#) < at(r#""hostname":"testhost""#));
    assert!(at(r#""hostname":"#) < at(r#""machineid":"#));
    assert!(l.ends_with(b"\"}"), "{json}");
    // A domain's label names its agent; a domain without one is PM_ERR_NOAGENT.
    let domain = s.answer(Request::LabelReq { ident: 44, kind: 2 }).unwrap();
    assert!(domain.ends_with(br#"{"agent":"foo"}"#));
    assert_eq!(
        ask(&mut s, Request::LabelReq { ident: 45, kind: 2 })[3],
        errors::NOAGENT as u32
    );
    // Items and indoms the agent states nothing for: an empty list of sets.
    let none = ask(
        &mut s,
        Request::LabelReq {
            ident: ops,
            kind: 16,
        },
    );
    assert_eq!(none, [28, t::LABEL, 0, ops, 16, 0, 0]);
    let r = fetch(&mut s, 0, &[ops], true);
    assert_eq!((r[1], r[3]), (t::HIGHRES_RESULT, 1));
}
