//! Tests of naming, PMIDs, descriptions and fetches over a directory made of byte vectors
//! (files from `testwriter.rs`), and of the parameters. Test-only.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use wasmon_guest::agent::{Atom, Child, NsError, Pmid, Semantics, Value, ValueType};

use crate::files::{Files, name_hash};
use crate::pmda::{DOMAIN, Mmv, indom_id};
use crate::testwriter::*;
use crate::{Config, Params};

/// A directory of byte vectors, shared with the test so it can change files between calls.
#[derive(Clone, Default)]
pub struct MapDir {
    pub files: Rc<RefCell<HashMap<String, Vec<u8>>>>,
    pub lists: Rc<RefCell<usize>>,
    pub reads: Rc<RefCell<usize>>,
    pub fail_list: Rc<RefCell<Option<String>>>,
}

impl MapDir {
    fn put(&self, name: &str, bytes: Vec<u8>) {
        self.files.borrow_mut().insert(name.into(), bytes);
    }
    fn remove(&self, name: &str) {
        self.files.borrow_mut().remove(name);
    }
    fn edit(&self, name: &str, f: impl FnOnce(&mut Vec<u8>)) {
        f(self.files.borrow_mut().get_mut(name).unwrap());
    }
}

impl Files for MapDir {
    fn list(&mut self) -> Result<Vec<String>, String> {
        *self.lists.borrow_mut() += 1;
        if let Some(e) = self.fail_list.borrow().clone() {
            return Err(e);
        }
        Ok(self.files.borrow().keys().cloned().collect())
    }
    fn read(&mut self, name: &str, len: u64) -> Result<(u64, Vec<u8>), String> {
        *self.reads.borrow_mut() += 1;
        let files = self.files.borrow();
        let b = files
            .get(name)
            .ok_or_else(|| format!("{name}: no such file"))?;
        let n = b.len().min(usize::try_from(len).unwrap_or(usize::MAX));
        Ok((b.len() as u64, b[..n].to_vec()))
    }
}

fn pmid(cluster: u32, item: u32) -> Pmid {
    Pmid {
        domain: DOMAIN,
        cluster,
        item,
    }
}

fn child(name: &str, leaf: bool) -> Child {
    Child {
        name: name.into(),
        leaf,
    }
}

fn val(instance: &str, value: impl Into<wasmon_guest::agent::Atom>) -> Value {
    Value::new(instance, value)
}

/// `app` (cluster 9): requests.total, requests.bytes (per interface), temp, state (a string).
fn app(total: u64, eth0: u64) -> TFile {
    let mut f = file(
        9,
        vec![
            TMetric {
                units: COUNT,
                help: Some("requests served".into()),
                ..metric("requests.total", 1, U64, &[total])
            },
            TMetric {
                units: KBYTE,
                indom: 3,
                ..metric("requests.bytes", 2, U64, &[eth0, 7])
            },
            TMetric {
                sem: INSTANT,
                ..metric("temp", 3, DOUBLE, &[36.5f64.to_bits()])
            },
            TMetric {
                sem: DISCRETE,
                text: Some("running".into()),
                ..metric("state", 4, STRING, &[])
            },
        ],
    );
    f.indoms = vec![(3, vec![(0, "eth0".into()), (1, "lo".into())])];
    f
}

fn setup() -> (MapDir, Mmv<MapDir>) {
    let dir = MapDir::default();
    dir.put("app", app(42, 1000).build());
    (dir.clone(), Mmv::new(dir, "mmv"))
}

#[test]
fn names_lead_to_pmids_and_back() {
    let (_, mut a) = setup();
    assert_eq!(a.lookup_name("mmv"), Err(NsError::NonLeaf));
    assert_eq!(a.lookup_name("mmv.app"), Err(NsError::NonLeaf));
    assert_eq!(a.lookup_name("mmv.app.requests"), Err(NsError::NonLeaf));
    assert_eq!(a.lookup_name("mmv.app.requests.total"), Ok(pmid(9, 1)));
    assert_eq!(a.lookup_name("mmv.app.temp"), Ok(pmid(9, 3)));
    for unknown in [
        "mmv.app.nope",
        "mmv.app.temp.x",
        "mmv.other",
        "mmvx",
        "mmv.",
        "other.app",
    ] {
        assert_eq!(
            a.lookup_name(unknown),
            Err(NsError::UnknownName),
            "{unknown}"
        );
    }
    assert_eq!(
        a.names_of(pmid(9, 2)),
        Ok(vec!["mmv.app.requests.bytes".to_string()])
    );
    assert_eq!(a.names_of(pmid(9, 9)), Err(NsError::UnknownPmid));
    assert_eq!(a.names_of(pmid(8, 1)), Err(NsError::UnknownPmid));
    let other_domain = Pmid {
        domain: 44,
        ..pmid(9, 1)
    };
    assert_eq!(a.names_of(other_domain), Err(NsError::UnknownPmid));
}

#[test]
fn children_walk_the_tree() {
    let (dir, mut a) = setup();
    dir.put("db", file(0, vec![metric("q", 1, U64, &[1])]).build());
    assert_eq!(
        a.children("mmv"),
        Ok(vec![child("app", false), child("db", false)])
    );
    assert_eq!(
        a.children("mmv.app"),
        Ok(vec![
            child("requests", false),
            child("state", true),
            child("temp", true)
        ])
    );
    assert_eq!(
        a.children("mmv.app.requests"),
        Ok(vec![child("bytes", true), child("total", true)])
    );
    assert_eq!(a.children("mmv.app.temp"), Ok(vec![]));
    assert_eq!(a.children("mmv.app.nope"), Err(NsError::UnknownName));
    assert_eq!(a.children("mmv.nope"), Err(NsError::UnknownName));
    assert_eq!(a.children("elsewhere"), Err(NsError::UnknownName));
}

#[test]
fn a_dotted_root_works_too() {
    let dir = MapDir::default();
    dir.put("app", app(1, 2).build());
    let mut a = Mmv::new(dir, "pcp.mmv");
    assert_eq!(a.lookup_name("pcp.mmv.app.temp"), Ok(pmid(9, 3)));
    assert_eq!(a.lookup_name("pcp.mmv"), Err(NsError::NonLeaf));
    assert_eq!(a.lookup_name("mmv.app.temp"), Err(NsError::UnknownName));
    assert_eq!(
        a.names_of(pmid(9, 3)),
        Ok(vec!["pcp.mmv.app.temp".to_string()])
    );
}

#[test]
fn descriptions_carry_semantics_units_indom_and_help() {
    let (_, mut a) = setup();
    let d = a.describe(pmid(9, 1)).unwrap();
    assert_eq!(
        (d.semantics, d.units.as_str(), d.indom, d.help.as_str()),
        (Semantics::Counter, "count", None, "requests served")
    );
    let d = a.describe(pmid(9, 2)).unwrap();
    assert_eq!((d.units.as_str(), d.indom), ("Kbyte", Some(indom_id(9, 3))));
    assert_eq!(indom_id(9, 3), (9 << 11) | 3);
    assert_eq!(
        a.describe(pmid(9, 3)).unwrap().semantics,
        Semantics::Instant
    );
    assert_eq!(
        a.describe(pmid(9, 4)).unwrap().semantics,
        Semantics::Discrete
    );
    assert_eq!(a.describe(pmid(9, 77)), Err(NsError::UnknownPmid));
    // Types as pmdammv declares them.
    let mut ty = |item| a.describe(pmid(9, item)).unwrap().value_type;
    assert_eq!(
        [ty(1), ty(2), ty(3), ty(4)],
        [
            ValueType::Uint64,
            ValueType::Uint64,
            ValueType::Double,
            ValueType::Text
        ]
    );
}

#[test]
fn fetch_reads_current_values_by_instance_name() {
    let (dir, mut a) = setup();
    let ids = [pmid(9, 1), pmid(9, 2), pmid(9, 3), pmid(9, 4), pmid(9, 99)];
    let got = a.fetch(&ids);
    assert_eq!(got.len(), 5);
    assert_eq!(got[0].id, ids[0]);
    assert_eq!(got[0].values, Ok(vec![val("", 42u64)]));
    assert_eq!(
        got[1].values,
        Ok(vec![val("eth0", 1000u64), val("lo", 7u64)])
    );
    assert_eq!(got[2].values, Ok(vec![val("", 36.5)]));
    assert_eq!(got[3].values, Ok(vec![val("", "running")]));
    assert_eq!(got[4].values, Err(NsError::UnknownPmid));
    // Values change in place (same generation, same size): the next fetch sees them.
    dir.put("app", app(43, 2000).build());
    let got = a.fetch(&ids[..2]);
    assert_eq!(got[0].values, Ok(vec![val("", 43u64)]));
    assert_eq!(
        got[1].values,
        Ok(vec![val("eth0", 2000u64), val("lo", 7u64)])
    );
}

#[test]
fn one_look_at_the_directory_per_call() {
    let (dir, mut a) = setup();
    a.fetch(&[pmid(9, 1)]);
    let (lists, reads) = (*dir.lists.borrow(), *dir.reads.borrow());
    // First call: list, header, parse (new file), and the fetch's read.
    assert_eq!((lists, reads), (1, 3));
    a.lookup_name("mmv.app.temp").unwrap();
    a.children("mmv.app").unwrap();
    // Unchanged: one list and one header read per call, no re-parse.
    assert_eq!((*dir.lists.borrow(), *dir.reads.borrow()), (3, 5));
}

#[test]
fn files_appear_and_vanish_with_their_names() {
    let (dir, mut a) = setup();
    assert_eq!(a.lookup_name("mmv.web.hits"), Err(NsError::UnknownName));
    dir.put("web", file(12, vec![metric("hits", 5, U64, &[3])]).build());
    assert_eq!(a.lookup_name("mmv.web.hits"), Ok(pmid(12, 5)));
    assert_eq!(a.fetch(&[pmid(12, 5)])[0].values, Ok(vec![val("", 3u64)]));
    dir.remove("web");
    assert_eq!(a.lookup_name("mmv.web.hits"), Err(NsError::UnknownName));
    assert_eq!(a.names_of(pmid(12, 5)), Err(NsError::UnknownPmid));
    assert_eq!(a.fetch(&[pmid(12, 5)])[0].values, Err(NsError::UnknownPmid));
    assert_eq!(a.children("mmv"), Ok(vec![child("app", false)]));
    // Dot files and files whose names cannot be a name component are not metrics.
    dir.put(".hidden", app(1, 1).build());
    dir.put("my-app", app(1, 1).build());
    assert_eq!(a.children("mmv"), Ok(vec![child("app", false)]));
    a.children("mmv").unwrap();
    let refusals = a.warnings.iter().filter(|w| w.contains("my-app")).count();
    assert_eq!(refusals, 1, "{:?}", a.warnings);
}

#[test]
fn a_recreated_file_gets_new_names() {
    let (dir, mut a) = setup();
    assert_eq!(a.lookup_name("mmv.app.temp"), Ok(pmid(9, 3)));
    let mut f = file(9, vec![metric("uptime", 1, U64, &[5])]);
    f.g1 = 2000;
    f.g2 = 2000;
    dir.put("app", f.build());
    assert_eq!(a.lookup_name("mmv.app.temp"), Err(NsError::UnknownName));
    assert_eq!(a.lookup_name("mmv.app.uptime"), Ok(pmid(9, 1)));
    assert_eq!(a.fetch(&[pmid(9, 1)])[0].values, Ok(vec![val("", 5u64)]));
}

#[test]
fn clusters_come_from_the_header_or_a_hash_and_stay() {
    let dir = MapDir::default();
    let one = |c| file(c, vec![metric("x", 1, U64, &[1])]).build();
    dir.put("a", one(7));
    dir.put("b", one(7)); // asks for a's cluster
    dir.put("c", one(0)); // asks for none
    dir.put("d", one(5000)); // out of range
    let mut a = Mmv::new(dir.clone(), "mmv");
    let hashed = |n: &str| 1 + name_hash(n) % 2047;
    let cluster =
        |a: &mut Mmv<MapDir>, f: &str| a.lookup_name(&format!("mmv.{f}.x")).unwrap().cluster;
    assert_eq!(cluster(&mut a, "a"), 7);
    assert_eq!(cluster(&mut a, "b"), hashed("b"));
    assert_eq!(cluster(&mut a, "c"), hashed("c"));
    assert_eq!(cluster(&mut a, "d"), hashed("d"));
    assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
    assert!(a.warnings[0].contains("cluster 7 is already another file's"));
    assert!(a.warnings[1].contains("out of range"));
    // Stable across value changes, rescans, and a file vanishing and coming back.
    dir.put("c", one(0));
    dir.remove("a");
    assert_eq!(cluster(&mut a, "b"), hashed("b"));
    dir.remove("c");
    a.children("mmv").unwrap();
    dir.put("c", one(0));
    assert_eq!(cluster(&mut a, "c"), hashed("c"));
    // A fresh agent (a restart) gives the same PMIDs.
    let mut again = Mmv::new(dir.clone(), "mmv");
    assert_eq!(cluster(&mut again, "c"), hashed("c"));
}

#[test]
fn metrics_pmdammv_would_refuse_are_left_out() {
    let dir = MapDir::default();
    let f = file(
        3,
        vec![
            metric("good", 1, U64, &[1]),
            metric("9lives", 2, U64, &[1]),
            metric("bad-name", 3, U64, &[1]),
            metric("empty..part", 4, U64, &[1]),
            metric("big", 1024, U64, &[1]),
            metric("same_item", 1, U64, &[1]),
            metric("good", 5, U64, &[1]),
            metric("good.below", 6, U64, &[1]),
            metric("tree.leaf", 7, U64, &[1]),
            metric("tree", 8, U64, &[1]),
        ],
    );
    dir.put("f", f.build());
    let mut a = Mmv::new(dir, "mmv");
    assert_eq!(
        a.children("mmv.f"),
        Ok(vec![
            child("9lives", true),
            child("good", true),
            child("tree", false)
        ])
    );
    assert_eq!(a.warnings.len(), 7, "{:#?}", a.warnings);
    // Logged once per parse, not per call.
    a.children("mmv.f").unwrap();
    assert_eq!(a.warnings.len(), 7);
}

#[test]
fn a_file_mid_update_is_skipped_alone() {
    let (dir, mut a) = setup();
    dir.put("web", file(12, vec![metric("hits", 5, U64, &[3])]).build());
    let ids = [pmid(9, 1), pmid(12, 5)];
    assert!(a.fetch(&ids).iter().all(|v| v.values.is_ok()));
    // The writer is re-initialising app: g2 no longer equals g1.
    dir.edit("app", |b| b[16] ^= 1);
    let got = a.fetch(&ids);
    assert!(
        matches!(&got[0].values, Err(NsError::Other(m)) if m.contains("app is being updated")),
        "{:?}",
        got[0].values
    );
    assert_eq!(got[1].values, Ok(vec![val("", 3u64)]));
    // Its names stay meanwhile, and it is not a warning.
    assert_eq!(a.lookup_name("mmv.app.temp"), Ok(pmid(9, 3)));
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    dir.edit("app", |b| b[16] ^= 1);
    assert_eq!(a.fetch(&ids)[0].values, Ok(vec![val("", 42u64)]));
    // A file caught before its writer finished it has no names yet, and no warning either.
    let mut f = file(20, vec![metric("n", 1, U64, &[1])]);
    f.g2 = 0;
    dir.put("new", f.build());
    dir.put("empty", Vec::new());
    assert_eq!(a.lookup_name("mmv.new.n"), Err(NsError::UnknownName));
    assert_eq!(
        a.children("mmv"),
        Ok(vec![child("app", false), child("web", false)])
    );
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
}

#[test]
fn a_truncated_file_errors_alone_and_is_logged_once() {
    let (dir, mut a) = setup();
    dir.put("web", file(12, vec![metric("hits", 5, U64, &[3])]).build());
    let ids = [pmid(9, 1), pmid(12, 5)];
    a.fetch(&ids);
    dir.edit("app", |b| b.truncate(b.len() - 100));
    for _ in 0..3 {
        let got = a.fetch(&ids);
        assert!(
            matches!(&got[0].values, Err(NsError::Other(m)) if m.starts_with("mmv file app: ")),
            "{:?}",
            got[0].values
        );
        assert_eq!(got[1].values, Ok(vec![val("", 3u64)]));
    }
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    // Damaged differently: logged again. Repaired: values again, and a later break is new.
    dir.edit("app", |b| b.truncate(200));
    a.fetch(&ids);
    assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
    dir.put("app", app(42, 1000).build());
    assert_eq!(a.fetch(&ids)[0].values, Ok(vec![val("", 42u64)]));
    dir.edit("app", |b| b[0] = b'X');
    assert!(a.fetch(&ids)[0].values.is_err());
    assert_eq!(a.warnings.len(), 3, "{:?}", a.warnings);
    // Garbage with another generation: the old names are stale and go.
    dir.edit("app", |b| b[8] ^= 0x55);
    assert_eq!(a.lookup_name("mmv.app.temp"), Err(NsError::UnknownName));
    assert_eq!(a.fetch(&ids)[0].values, Err(NsError::UnknownPmid));
}

#[test]
fn corruption_found_only_at_fetch_is_an_error_for_that_file() {
    let (dir, mut a) = setup();
    a.fetch(&[pmid(9, 1)]);
    // Same size and generation (the quick look sees nothing), but a bad value reference.
    let f = crate::format::parse(&dir.files.borrow()["app"]).unwrap();
    assert_eq!(f.values.len(), 5);
    dir.edit("app", |b| {
        let values_off =
            u64::from_le_bytes(b[40 + 3 * 16 + 8..40 + 3 * 16 + 16].try_into().unwrap());
        b[values_off as usize + 16] ^= 4;
    });
    let got = a.fetch(&[pmid(9, 1)]);
    assert!(
        matches!(&got[0].values, Err(NsError::Other(m)) if m.contains("metrics")),
        "{:?}",
        got
    );
    assert_eq!(a.warnings.len(), 1);
}

#[test]
fn listing_failures_drop_everything_and_log_once() {
    let (dir, mut a) = setup();
    a.lookup_name("mmv.app.temp").unwrap();
    *dir.fail_list.borrow_mut() = Some("no such directory".into());
    assert_eq!(a.lookup_name("mmv.app.temp"), Err(NsError::UnknownName));
    assert_eq!(a.children("mmv"), Ok(vec![]));
    assert_eq!(a.warnings.len(), 1);
    *dir.fail_list.borrow_mut() = None;
    assert_eq!(a.lookup_name("mmv.app.temp"), Ok(pmid(9, 3)));
}

#[test]
fn sentinels_and_elapsed_time() {
    let dir = MapDir::default();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    let mut f = file(
        4,
        vec![
            metric("none", 1, U64, &[u64::MAX]),
            metric("neg", 2, I32, &[u32::MAX as u64]),
            metric("nan", 3, DOUBLE, &[f64::NAN.to_bits()]),
            metric("busy", 4, ELAPSED, &[1500]),
            TMetric {
                extra: -(now_us - 2_000_000),
                ..metric("running", 5, ELAPSED, &[100])
            },
        ],
    );
    dir.put("s", f.build());
    let mut a = Mmv::new(dir.clone(), "mmv");
    let ids: Vec<Pmid> = (1..=5).map(|i| pmid(4, i)).collect();
    let got = a.fetch(&ids);
    // Without the flag, all ones are plain values.
    assert_eq!(got[0].values, Ok(vec![val("", u64::MAX)]));
    assert_eq!(got[1].values, Ok(vec![val("", -1i32)]));
    assert_eq!(got[3].values, Ok(vec![val("", 1500i64)]));
    let Atom::Int(running) = got[4].values.as_ref().unwrap()[0].value else {
        panic!("elapsed time is a 64-bit signed count: {:?}", got[4].values);
    };
    assert!((2_000_100..60_000_000).contains(&running), "{running}");
    assert_eq!(a.describe(pmid(4, 4)).unwrap().units, "microsec");
    f.flags = crate::format::FLAG_SENTINEL;
    f.g1 += 1;
    f.g2 += 1;
    dir.put("s", f.build());
    let got = a.fetch(&ids);
    for g in &got[..3] {
        assert_eq!(g.values, Ok(vec![]), "{:?}", g.id);
    }
    assert_eq!(got[3].values, Ok(vec![val("", 1500i64)]));
}

#[test]
fn parameters() {
    let p = |s: &str| -> Params { serde_json::from_str(s).unwrap() };
    assert_eq!(
        Config::from_params(&p("{}")),
        Ok(Config {
            dir: "mmv".into(),
            root: "mmv".into()
        })
    );
    assert_eq!(
        Config::from_params(&p(r#"{"dir": "apps", "root": "pcp.mmv"}"#)),
        Ok(Config {
            dir: "apps".into(),
            root: "pcp.mmv".into()
        })
    );
    for bad in [
        r#"{"dri": "x"}"#,
        r#"{"dir": 3}"#,
        r#"{"dir": ""}"#,
        r#"{"root": "mmv."}"#,
        r#"{"root": "1mmv"}"#,
        r#"{"root": "a-b"}"#,
    ] {
        let e = Config::from_params(&p(bad)).unwrap_err();
        assert!(e.contains("parameter"), "{bad}: {e}");
    }
}
