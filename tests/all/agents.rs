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

/// The instances and values of one fetched metric, in order.
fn listed(r: &Result<wasmon::namespace::Values, wasmon::namespace::NsError>) -> Vec<(String, f64)> {
    r.as_ref()
        .unwrap()
        .iter()
        .map(|(i, v)| (i.clone(), v.as_f64().unwrap()))
        .collect()
}

#[test]
fn an_agent_built_before_the_metrics_export_still_loads_and_answers_by_name() {
    use wasmon::namespace::Agent as _;
    // `legacy_agent` targets the `legacy-agent` world: its fetch carries each instance name in
    // each value, as every agent did before `metrics`.
    let mut a = load_agent("legacy_agent", serde_json::json!({}));
    assert!(a.legacy(), "linked as a legacy-agent");
    assert_eq!(a.lookup_name("legacy.up").unwrap(), Ok(pmid(77, 0, 0)));
    assert_eq!(a.lookup_name("legacy").unwrap(), Err(NsError::NonLeaf));
    let d = a.describe(pmid(77, 0, 1)).unwrap().unwrap();
    assert_eq!(d.indom, Some(77 << 22));
    let ids = [pmid(77, 0, 0), pmid(77, 0, 1), pmid(77, 0, 9)];
    let sets = a.fetch(&ids).unwrap();
    assert_eq!(sets[1].values.as_ref().unwrap()[1].instance, "sdb");
    assert_eq!(sets[2].values, Err(NsError::UnknownPmid));
    // Through the daemon's namespace, as a PCP client or /api/fetch asks.
    let mut agent = wasmon::daemon::agents::GuestAgent(a);
    let got = agent.fetch(&[
        wasmon::namespace::Pmid::new(77, 0, 0).unwrap(),
        wasmon::namespace::Pmid::new(77, 0, 1).unwrap(),
    ]);
    assert_eq!(listed(&got[0].1), [(String::new(), 1.0)]);
    assert_eq!(
        listed(&got[1].1),
        [("sda".to_string(), 11.0), ("sdb".to_string(), 21.0)]
    );

    // `guest check` says which world it is and accepts it.
    let (accepted, text) = guest_check(&guest_path("legacy_agent"));
    assert!(accepted, "{text}");
    says(
        &text,
        &[
            "implements wasmon:collector/legacy-agent@0.1.0",
            "built before the wasmon:collector/metrics@0.1.0 export",
            "accepted: this runtime loads it",
        ],
    );
}

/// `wasmon guest check PATH`: whether it accepted the component, and what it printed.
fn guest_check(path: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(wasmon_bin())
        .args(["guest", "check"])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    (
        out.status.success(),
        text + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Asserts that `text` says each of `parts`.
fn says(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "no {part:?} in: {text}");
    }
}

#[test]
fn an_agent_sends_each_instance_name_once_per_fetch() {
    use wasmon::namespace::Agent as _;
    // The Rust SDK numbers the instances its agent names: foo's values through the daemon's
    // namespace, and the raw answer, whose names are each sent once.
    let mut foo = load_agent("foo", serde_json::json!({}));
    assert!(!foo.legacy());
    let ids = [pmid(44, 1, 0), pmid(44, 0, 1), pmid(44, 9, 9)];
    let raw = foo.fetch_raw(&ids).unwrap();
    let wasmon::host::Fetched::Indexed(f) = &raw else {
        panic!("foo answers by instance number: {raw:?}")
    };
    assert_eq!(
        f.instances,
        [String::new()],
        "one name, for the singular values"
    );
    assert_eq!(f.sets.len(), 3);
    assert!(
        f.sets[..2]
            .iter()
            .all(|s| s.values.as_ref().unwrap().instances.iter().all(|&i| i == 0))
    );
    assert_eq!(f.sets[2].values, Err(NsError::UnknownPmid));
    let mut agent = wasmon::daemon::agents::GuestAgent(foo);
    let got = agent.fetch(&[wasmon::namespace::Pmid::new(44, 0, 1).unwrap()]);
    assert_eq!(listed(&got[0].1), [(String::new(), 1.0)]);
}

/// An agent component built against the `metrics` interface as it was before a metric's values
/// crossed column-wise (`fetched.sets` of `indexed-value` records): this repository's WIT with
/// that type put back as it was, over a core module whose exports (the agent world's six
/// functions, in their flat signatures) trap.
fn agent_of_the_metrics_before_columns() -> Vec<u8> {
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let dir = tempfile::tempdir().unwrap();
    let types = std::fs::read_to_string(wit.join("types.wit")).unwrap();
    let now = "record indexed-set { id: pmid, values: result<indexed-values, ns-error> }";
    assert!(types.contains(now), "the WIT's indexed-set changed: {now}");
    let before = types.replace(
        now,
        "record indexed-value { instance: u32, value: atom }\n    \
         record indexed-set { id: pmid, values: result<list<indexed-value>, ns-error> }",
    );
    std::fs::write(dir.path().join("types.wit"), before).unwrap();
    std::fs::copy(wit.join("worlds.wit"), dir.path().join("worlds.wit")).unwrap();
    let mut resolve = wit_parser::Resolve::default();
    let (pkg, _) = resolve.push_dir(dir.path()).unwrap();
    let world = resolve.select_world(&[pkg], Some("agent")).unwrap();
    let export = |iface: &str, name: &str, params: usize| {
        format!(
            "(func (export \"wasmon:collector/{iface}@0.1.0#{name}\") (param{}) (result i32) unreachable)",
            " i32".repeat(params)
        )
    };
    let wat = format!(
        "(module (memory (export \"memory\") 1) \
         (func (export \"cabi_realloc\") (param i32 i32 i32 i32) (result i32) unreachable) \
         {} {} {} {} {} {})",
        export("namespace", "lookup-name", 2),
        export("namespace", "names-of", 3),
        export("namespace", "children", 2),
        export("metrics", "configure", 2),
        export("metrics", "describe", 3),
        export("metrics", "fetch", 2),
    );
    let mut module = wat::parse_str(&wat).unwrap();
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .unwrap();
    wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .validate(true)
        .encode()
        .unwrap()
}

#[test]
fn an_agent_built_against_the_metrics_before_columns_is_refused_naming_why() {
    let bytes = agent_of_the_metrics_before_columns();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.wasm");
    std::fs::write(&path, &bytes).unwrap();

    // `guest check` refuses it and says what to do.
    let (accepted, text) = guest_check(&path);
    assert!(!accepted, "{text}");
    says(
        &text,
        &[
            "implements wasmon:collector/agent@0.1.0",
            "before a metric's values crossed column-wise",
            "rebuild it with this wasmon's SDK",
        ],
    );

    // A daemon with it as an agent refuses to start, saying why and what to do, beside the
    // linker's own words.
    let config = config_file(
        dir.path(),
        &format!(
            "{NO_PROCFS}[[agent]]\nname = \"old\"\nguest = {:?}\ndomain = 250\n\
             pmns = \"root {{ old }}\\nold {{ dyn 250:*:* }}\"\n",
            path.display().to_string()
        ),
    );
    says(
        &refused_start(&config),
        &[
            "agent \\\"old\\\"",
            "before a metric's values crossed column-wise",
            "rebuild it with this wasmon's SDK",
            "type mismatch",
        ],
    );
}
