//! Loading rules (several files, duplicates, errors) and misbehaving or missing agents, with
//! the agents and helpers of `tests.rs`. Test-only.

use super::*;

// ---- pmLoadNameSpace ----

#[test]
fn several_dynamic_subtrees_for_one_agent_are_not_duplicates() {
    let text = "root { foo bar }\nfoo { count 44:*:* version 44:0:1 }\nbar { more 44:*:* }\n";
    let ns = Namespace::from_pmns(&[("two", text)]).unwrap();
    assert_eq!(
        ns.dynamic_roots(),
        vec![("foo.count", 44), ("bar.more", 44)]
    );
    let mut a = agents(vec![(
        44,
        Box::new(ListAgent::new(&[
            ("foo.count.ops", "44:1:0"),
            ("bar.more.x", "44:3:0"),
        ])) as Box<dyn Agent>,
    )]);
    assert_eq!(ns.lookup("bar.more.x", Some(&mut a)), Ok(pmid("44.3.0")));
    assert_eq!(
        ns.traverse("", Some(&mut a)).unwrap().names,
        vec!["foo.count.ops", "foo.version", "bar.more.x"]
    );
    assert_eq!(ns.dynamic_domain_of("bar.more.x.y"), Some(44));
    assert_eq!(ns.dynamic_domain_of("foo.version"), None);
}

#[test]
fn duplicate_pmids_are_refused_unless_allowed() {
    let text = "root { a b }\na { x 1:0:1 }\nb { y 1:0:1 }\n";
    let e = Namespace::from_pmns(&[("dup", text)]).unwrap_err();
    assert!(e.reason.contains("Duplicate metric id (1.0.1)"), "{e}");
    let ns = Namespace::builder()
        .allow_duplicate_pmids(true)
        .pmns("dup", text)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        ns.names_of(pmid("1.0.1"), None),
        Ok(vec!["a.x".to_string(), "b.y".to_string()])
    );
}

#[test]
fn several_files_merge() {
    let base = "root { foo }\nfoo { version 44:0:1 count 44:*:* }\n";
    let linux = "root { kernel }\nkernel { all }\nkernel.all { load 60:2:0 }\n";
    let more = "foo { memory 44:0:2 version 44:0:1 }\n";
    let ns = Namespace::from_pmns(&[("base", base), ("linux", linux), ("more", more)]).unwrap();
    assert_eq!(ns.lookup("kernel.all.load", None), Ok(pmid("60.2.0")));
    assert_eq!(ns.lookup("foo.memory", None), Ok(pmid("44.0.2")));
    assert_eq!(
        ns.children("", None),
        Ok(kids(&[("foo", false), ("kernel", false)]))
    );
    assert_eq!(ns.len(), 3);
}

#[test]
fn loading_errors_name_file_line_and_reason() {
    let e = Namespace::from_pmns(&[("a", "root { x 1:0:0 }\n"), ("b", "root {\n x 1:0:1 }\n")])
        .unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("b", 2));
    assert!(e.reason.contains("conflicting definitions of \"x\""), "{e}");
    let e = Namespace::from_pmns(&[("f", "foo { x 1:0:0 }\n")]).unwrap_err();
    assert_eq!(e.reason, "No name space entry for \"root\"");
    let e = Namespace::from_pmns(&[("f", "root {\n foo\n}\n")]).unwrap_err();
    assert_eq!(
        (e.line, e.reason.as_str()),
        (
            2,
            "Cannot find definition for non-terminal node \"foo\" in name space"
        )
    );
    let e = Namespace::from_pmns(&[("f", "root { x 1:0:0 }\n\nlost { y 1:0:1 }\n")]).unwrap_err();
    assert_eq!(
        (e.line, e.reason.as_str()),
        (3, "Disconnected subtree (\"lost\") in name space")
    );
    let e = Namespace::from_pmns(&[("f", "root { x 1:0:0 }\nx { y 1:0:1 }\n")]).unwrap_err();
    assert!(e.reason.contains("has a PMID and also a subtree"), "{e}");
    let e = Namespace::from_pmns(&[("f", "root {\n x 1:0:0 }\nroot.y { }\n")]).unwrap_err();
    assert!(e.reason.contains("Disconnected"), "{e}");
    assert!(
        e.to_string()
            .starts_with("[f:3] Error Parsing ASCII PMNS: "),
        "{e}"
    );
}

#[test]
fn programmatic_names_check_conflicts() {
    let ns = Namespace::builder()
        .name("a.b.c", pmid("1.0.0"))
        .name("a.d", Pmid::dynamic_root(2))
        .build()
        .unwrap();
    assert_eq!(ns.lookup("a.b.c", None), Ok(pmid("1.0.0")));
    assert_eq!(ns.lookup("a.d.zz", None), Ok(Pmid::dynamic_root(2)));
    let e = Namespace::builder()
        .name("a.b", pmid("1.0.0"))
        .name("a.b.c", pmid("1.0.1"))
        .build()
        .unwrap_err();
    assert!(
        e.reason
            .contains("\"a.b\" defined twice: as leaf 1.0.0 and as a non-terminal"),
        "{e}"
    );
    let e = Namespace::builder()
        .name("a..b", pmid("1.0.0"))
        .build()
        .unwrap_err();
    assert!(e.reason.contains("illegal metric name"), "{e}");
}

// ---- misbehaving or missing agents ----

#[test]
fn a_trapped_agent_does_not_disturb_other_subtrees() {
    // `baz` is a dynamic root directly below the root.
    let text = "root { foo baz 45:*:* static 1:0:0 }\nfoo { count 44:*:* version 44:0:1 }\n";
    let ns = Namespace::from_pmns(&[("t", text)]).unwrap();
    let mut a = agents(vec![
        (44, Box::new(Failing::trapped()) as Box<dyn Agent>),
        (
            45,
            Box::new(ListAgent::new(&[
                ("baz.hits", "45:0:0"),
                ("baz.misses", "45:0:1"),
            ])),
        ),
    ]);
    assert_eq!(
        ns.lookup("foo.count.ops", Some(&mut a)),
        Err(NsError::NoAgent)
    );
    assert_eq!(
        ns.children("foo.count", Some(&mut a)),
        Err(NsError::NoAgent)
    );
    assert_eq!(
        ns.names_of(pmid("44.1.0"), Some(&mut a)),
        Err(NsError::NoAgent)
    );
    assert_eq!(ns.lookup("baz.hits", Some(&mut a)), Ok(pmid("45.0.0")));
    assert_eq!(ns.lookup("foo.version", Some(&mut a)), Ok(pmid("44.0.1")));
    assert_eq!(ns.lookup("static", Some(&mut a)), Ok(pmid("1.0.0")));
    let t = ns.traverse("", Some(&mut a)).unwrap();
    assert_eq!(
        t.names,
        vec!["foo.version", "baz.hits", "baz.misses", "static"]
    );
    assert_eq!(t.failed, vec![("foo.count".to_string(), NsError::NoAgent)]);
}

#[test]
fn a_missing_agent_is_no_agent() {
    let ns = seed();
    let mut none: HashMap<u32, Box<dyn Agent>> = HashMap::new();
    assert_eq!(
        ns.lookup("foo.count.ops", Some(&mut none)),
        Err(NsError::NoAgent)
    );
    assert_eq!(
        ns.lookup("foo.version", Some(&mut none)),
        Ok(pmid("44.0.1"))
    );
    assert_eq!(
        ns.children("foo.count", Some(&mut none)),
        Err(NsError::NoAgent)
    );
    let t = ns.traverse("", Some(&mut none)).unwrap();
    assert_eq!(t.names, vec!["foo.version", "foo.memory"]);
    assert_eq!(t.failed.len(), 1);
}

#[test]
fn agents_cannot_escape_their_domain_or_subtree() {
    let ns = Namespace::from_pmns(&[(
        "x",
        "root { foo bar }\nfoo { count 44:*:* }\nbar { x 50:0:0 }\n",
    )])
    .unwrap();
    let rogue = ListAgent::new(&[
        ("foo.count.ops", "50:0:1"),
        ("bar.y", "44:1:0"),
        ("foo.count.ok", "44:1:0"),
    ]);
    let mut a = agents(vec![(44, Box::new(rogue))]);
    let e = ns.lookup("foo.count.ops", Some(&mut a)).unwrap_err();
    assert!(
        matches!(e, NsError::Other(ref m) if m.contains("outside its domain")),
        "{e:?}"
    );
    // names-of keeps only names inside the agent's own subtrees.
    assert_eq!(
        ns.names_of(pmid("44.1.0"), Some(&mut a)),
        Ok(vec!["foo.count.ok".to_string()])
    );
}

#[test]
fn endless_agent_subtrees_are_cut() {
    let mut endless = Failing {
        error: NsError::UnknownPmid,
        children: Some(&[("again", false), ("leaf", true)]),
    };
    let ns = Namespace::from_pmns(&[("x", "root { foo 44:*:* other 1:0:0 }\n")]).unwrap();
    let t = ns
        .traverse(
            "",
            Some(&mut Single {
                domain: 44,
                agent: &mut endless,
            }),
        )
        .unwrap();
    assert_eq!(
        t.names,
        vec!["other"],
        "partial names of a failed subtree are dropped"
    );
    assert!(matches!(&t.failed[0].1, NsError::Other(m) if m.contains("deeper than")));
}

#[test]
fn illegal_child_names_from_agents_are_errors() {
    let ns = seed();
    let bad = ListAgent::new(&[("foo.count.a b", "44:1:0")]);
    let mut a = agents(vec![(44, Box::new(bad))]);
    assert!(matches!(
        ns.children("foo.count", Some(&mut a)),
        Err(NsError::Other(_))
    ));
}

#[test]
fn namespace_is_shareable_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Namespace>();
}
