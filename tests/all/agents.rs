//! Agents (the `agent` world) through the sandbox: the seed's `foo` and a misbehaving agent.

use wasmon::host::agent_types::{Atom, NsError, Pmid};
use wasmon::host::{AgentInstance, AgentWorld, CallError, GuestConfig, Image};

use crate::common::*;

pub fn load_agent(name: &str, params: serde_json::Value) -> AgentInstance {
    let rt = runtime();
    let compiled = rt.compile(&guest_bytes(name), name).unwrap();
    Image::<AgentWorld>::load(&rt, &compiled, GuestConfig::new(name, &params.to_string())).unwrap()
}

fn pmid(domain: u32, cluster: u32, item: u32) -> Pmid {
    Pmid {
        domain,
        cluster,
        item,
    }
}

#[test]
fn foo_answers_for_its_dynamic_subtree_and_its_values_change() {
    let mut foo = load_agent("foo", serde_json::json!({}));
    assert_eq!(
        foo.lookup_name("foo.count.ops").unwrap(),
        Ok(pmid(44, 1, 0))
    );
    assert_eq!(
        foo.lookup_name("foo.count.numcount").unwrap(),
        Ok(pmid(44, 0, 27))
    );
    assert_eq!(
        foo.lookup_name("foo.count.anything.else").unwrap(),
        Err(NsError::UnknownName)
    );
    assert_eq!(foo.lookup_name("foo.count").unwrap(), Err(NsError::NonLeaf));
    assert_eq!(
        foo.names_of(pmid(44, 1, 1)).unwrap(),
        Ok(vec!["foo.count.errs".to_string()])
    );
    let kids: Vec<String> = foo
        .children("foo.count")
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(kids, ["ops", "errs", "numcount"]);

    let ids = [pmid(44, 1, 0), pmid(44, 0, 1), pmid(44, 9, 9)];
    let first = foo.fetch(&ids).unwrap();
    let second = foo.fetch(&ids).unwrap();
    let ops =
        |v: &[wasmon::host::agent_types::ValueSet]| match v[0].values.as_ref().unwrap()[0].value {
            Atom::Uint(n) => n,
            ref other => panic!("foo.count.ops is a 64-bit count, got {other:?}"),
        };
    assert!(ops(&second) > ops(&first), "foo.count.ops grows");
    assert_eq!(second[1].values.as_ref().unwrap()[0].value, Atom::Uint(1));
    assert_eq!(second[2].values, Err(NsError::UnknownPmid));
}

#[test]
fn an_agent_that_traps_fails_that_call_and_serves_the_next() {
    let mut a = load_agent(
        "testing_agent",
        serde_json::json!({"domain": 77, "root": "bar.dyn"}),
    );
    assert!(matches!(
        a.lookup_name("bar.dyn.trap"),
        Err(CallError::Trap(_))
    ));
    assert_eq!(a.lookup_name("bar.dyn.good").unwrap(), Ok(pmid(77, 0, 0)));
    assert!(matches!(
        a.lookup_name("bar.dyn.loop"),
        Err(CallError::Deadline(_))
    ));
    assert_eq!(
        a.fetch(&[pmid(77, 0, 0)]).unwrap()[0]
            .values
            .as_ref()
            .unwrap()[0]
            .value,
        Atom::Real(42.0)
    );
}
