//! The JavaScript SDK's `Files` helper in a real JS guest (`guests/js/files_agent`): files and
//! listings of a read-only grant through the `files` import, and the errors it names.

use serde_json::json;
use wasmon::host::DirGrant;
use wasmon::host::agent_types::{Atom, NsError, Pmid};

use super::{built, load_agent_granted};

fn pmid(item: u32) -> Pmid {
    Pmid {
        domain: 48,
        cluster: 0,
        item,
    }
}

#[test]
fn a_js_agent_reads_granted_files_through_the_sdks_files_helper() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\nsecond line\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let grant = || {
        vec![DirGrant {
            host: dir.path().to_path_buf(),
            guest: "/data".into(),
            read_only: true,
        }]
    };
    let load = |probe: &str| {
        let params = json!({"dir": "/data", "probe": probe}).to_string();
        load_agent_granted(&built("js", "files_agent"), "files_agent", &params, grant()).unwrap()
    };
    let mut a = load("/data/a.txt");
    let sets = a.fetch(&[pmid(0), pmid(1), pmid(2), pmid(7)]).unwrap();
    let values = |i: usize| -> Vec<(String, Atom)> {
        sets[i]
            .values
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| (v.instance.clone(), v.value.clone()))
            .collect()
    };
    // Every regular file of the listing, read whole; the subdirectory is not a file.
    assert_eq!(
        values(0),
        [
            ("a.txt".into(), Atom::Uint(18)),
            ("b.txt".into(), Atom::Uint(0))
        ]
    );
    assert_eq!(
        values(1),
        [
            ("a.txt".into(), Atom::Text("alpha".into())),
            ("b.txt".into(), Atom::Text(String::new()))
        ]
    );
    assert_eq!(values(2), [(String::new(), Atom::Text("18 bytes".into()))]);
    assert_eq!(sets[3].values, Err(NsError::UnknownPmid));

    // The files appear and change between fetches: nothing is cached.
    std::fs::write(dir.path().join("c.txt"), "gamma").unwrap();
    let sets = a.fetch(&[pmid(0)]).unwrap();
    assert_eq!(sets[0].values.as_ref().unwrap().len(), 3);

    // Each error names the path and why, with the file-error case.
    for (probe, want) in [
        (
            "/data/missing",
            "no-entry: /data/missing: no such file or directory",
        ),
        ("/data/sub", "wrong-kind: /data/sub: not a regular file"),
        (
            "/etc/hostname",
            "elsewhere: /etc/hostname: not under a read-only directory grant",
        ),
    ] {
        let mut a = load(probe);
        let sets = a.fetch(&[pmid(2)]).unwrap();
        let got = match &sets[0].values.as_ref().unwrap()[0].value {
            Atom::Text(t) => t.clone(),
            other => panic!("{probe}: {other:?}"),
        };
        assert!(got.starts_with(want), "{probe}: {got}");
    }
}
