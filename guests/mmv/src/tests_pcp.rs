//! End-to-end tests on files PCP itself writes: a live libpcp_mmv writer (Debian's
//! python3-pcp, driven statement by statement over a pipe) creates files in a real directory,
//! changes values in place and stops, while the agent names and fetches them; then the files
//! are damaged by hand. Needs `/usr/bin/python3` with `pcp.mmv` (`apt-get install -y
//! python3-pcp`). Test-only.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child as Process, ChildStdin, ChildStdout, Command, Stdio};

use wasmon_guest::agent::{Atom, Child, NsError, Pmid, Semantics, Value};

use crate::files::{Files, name_hash};
use crate::pmda::{DOMAIN, Mmv};

/// A real directory.
struct FsDir(PathBuf);

impl Files for FsDir {
    fn list(&mut self) -> Result<Vec<String>, String> {
        let entries = std::fs::read_dir(&self.0).map_err(|e| e.to_string())?;
        Ok(entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect())
    }

    fn read(&mut self, name: &str, len: u64) -> Result<(u64, Vec<u8>), String> {
        let f = std::fs::File::open(self.0.join(name)).map_err(|e| e.to_string())?;
        let size = f.metadata().map_err(|e| e.to_string())?.len();
        let mut out = Vec::new();
        f.take(len)
            .read_to_end(&mut out)
            .map_err(|e| e.to_string())?;
        Ok((size, out))
    }
}

/// The writer: `make(name, cluster, flags)` creates an MMV file with libpcp_mmv and keeps
/// it mapped; every line on stdin is then a Python statement, answered by "ok" or the error.
const PY_WRITER: &str = r#"
import os, sys, traceback
from pcp import mmv, pmapi
import cmmv
D = os.environ["DIR"]
def metric(name, item, typ, sem, units, indom=0, help=""):
    m = mmv.mmv_metric(name, item, typ, sem, units, indom, help, help)
    m.semantics = sem           # pcp.mmv 6.0.3 forgets these two
    m.dimension = units
    return m
def make(name, cluster, flags=0):
    indom = mmv.mmv_indom(serial=3, shorttext="interfaces", helptext="network interfaces")
    indom.set_instances([mmv.mmv_instance(0, "eth0"), mmv.mmv_instance(1, "lo")])
    v = mmv.MemoryMappedValues(os.path.join(D, name), flags=flags, cluster=cluster)
    v.add_indoms([indom])
    v.add_metrics([
        metric("requests.total", 1, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,0,1,0,0,0), 0, "requests served"),
        metric("requests.bytes", 2, cmmv.MMV_TYPE_I64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(1,0,0,1,0,0), 3),
        metric("temp", 3, cmmv.MMV_TYPE_DOUBLE, cmmv.MMV_SEM_INSTANT, pmapi.pmUnits(0,0,0,0,0,0)),
        metric("state", 4, cmmv.MMV_TYPE_STRING, cmmv.MMV_SEM_DISCRETE, pmapi.pmUnits(0,0,0,0,0,0)),
        metric("busy", 5, cmmv.MMV_TYPE_ELAPSED, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,1,0,0,1,0)),
    ])
    v.start()
    return v
F = {}
for line in sys.stdin:
    try:
        exec(line, globals())
        print("ok", flush=True)
    except Exception:
        print(traceback.format_exc().replace("\n", " | "), flush=True)
"#;

struct Writer {
    process: Process,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Writer {
    fn start(dir: &Path) -> Writer {
        let works = Command::new("/usr/bin/python3")
            .args(["-c", "import pcp.mmv"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !works {
            let _ = Command::new("apt-get")
                .args(["install", "-y", "python3-pcp"])
                .status();
        }
        let mut process = Command::new("/usr/bin/python3")
            .args(["-c", PY_WRITER])
            .env("DIR", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("these tests need /usr/bin/python3 with PCP's pcp.mmv (apt-get install -y python3-pcp)");
        let stdin = process.stdin.take().unwrap();
        let stdout = BufReader::new(process.stdout.take().unwrap());
        Writer {
            process,
            stdin,
            stdout,
        }
    }

    fn run(&mut self, statement: &str) {
        writeln!(self.stdin, "{statement}").unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), "ok", "python: {statement}");
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wasmon-mmv-agent-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn pmid(cluster: u32, item: u32) -> Pmid {
    Pmid {
        domain: DOMAIN,
        cluster,
        item,
    }
}

/// A numeric value as f64 (the tests compare numbers, whatever their integer case).
fn num(a: &Atom) -> f64 {
    match a {
        Atom::Int(i) => *i as f64,
        Atom::Uint(u) => *u as f64,
        Atom::Real(f) => *f,
        Atom::Text(t) => panic!("expected a number, got text {t:?}"),
    }
}

fn one(values: &Result<Vec<Value>, NsError>) -> f64 {
    match values {
        Ok(v) if v.len() == 1 && v[0].instance.is_empty() => num(&v[0].value),
        other => panic!("expected one singular value, got {other:?}"),
    }
}

#[test]
fn a_live_writer_files_appear_values_change_and_files_vanish() {
    let dir = tempdir("live");
    let mut w = Writer::start(&dir);
    let mut a = Mmv::new(FsDir(dir.clone()), "mmv");
    assert_eq!(a.children("mmv"), Ok(vec![]));

    // PROCESS is set (pmdammv would check the pid); it is ignored here.
    w.run(r#"F["app"] = make("app", 0, cmmv.MMV_FLAG_PROCESS)"#);
    let c = 1 + name_hash("app") % 2047;
    assert_eq!(
        a.children("mmv"),
        Ok(vec![Child {
            name: "app".into(),
            leaf: false
        }])
    );
    assert_eq!(a.lookup_name("mmv.app.requests.total"), Ok(pmid(c, 1)));
    assert_eq!(a.lookup_name("mmv.app.requests"), Err(NsError::NonLeaf));
    let d = a.describe(pmid(c, 1)).unwrap();
    assert_eq!(
        (d.semantics, d.units.as_str(), d.help.as_str()),
        (Semantics::Counter, "count", "requests served")
    );
    let d = a.describe(pmid(c, 2)).unwrap();
    assert_eq!((d.units.as_str(), d.indom), ("Kbyte", Some((c << 11) | 3)));
    assert_eq!(a.describe(pmid(c, 5)).unwrap().units, "microsec");

    w.run(r#"F["app"].lookup_add("requests.total", "", 41)"#);
    w.run(r#"F["app"].lookup_add("requests.bytes", "lo", 7)"#);
    w.run(r#"F["app"].lookup_set("temp", "", 36.5)"#);
    w.run(r#"F["app"].lookup_set_string("state", "", "running")"#);
    w.run(r#"F["app"].lookup_set("busy", "", 1500)"#);
    let ids: Vec<Pmid> = (1..=5).map(|i| pmid(c, i)).collect();
    let got = a.fetch(&ids);
    assert_eq!(one(&got[0].values), 41.0);
    let bytes = got[1].values.as_ref().unwrap();
    let pairs: Vec<(&str, f64)> = bytes
        .iter()
        .map(|v| (v.instance.as_str(), num(&v.value)))
        .collect();
    assert_eq!(pairs, [("eth0", 0.0), ("lo", 7.0)]);
    assert_eq!(one(&got[2].values), 36.5);
    assert_eq!(got[3].values, Ok(vec![Value::new("", "running")]));
    assert_eq!(one(&got[4].values), 1500.0);

    // Values written in place by the running writer.
    w.run(r#"F["app"].lookup_inc("requests.total", "")"#);
    w.run(r#"F["app"].lookup_interval_start("busy", "")"#);
    let got = a.fetch(&ids);
    assert_eq!(one(&got[0].values), 42.0);
    assert!(one(&got[4].values) >= 1500.0);

    // A second file, with its own cluster; NOPREFIX is ignored (files stay a name level).
    w.run(r#"F["web"] = make("web", 77, cmmv.MMV_FLAG_NOPREFIX)"#);
    w.run(r#"F["web"].lookup_add("requests.total", "", 5)"#);
    assert_eq!(a.lookup_name("mmv.web.requests.total"), Ok(pmid(77, 1)));
    let got = a.fetch(&[pmid(c, 1), pmid(77, 1)]);
    assert_eq!((one(&got[0].values), one(&got[1].values)), (42.0, 5.0));

    // The first writer stops, and libpcp_mmv removes its file.
    w.run(r#"F["app"].stop()"#);
    assert!(!dir.join("app").exists());
    assert_eq!(
        a.lookup_name("mmv.app.requests.total"),
        Err(NsError::UnknownName)
    );
    assert_eq!(a.names_of(pmid(c, 1)), Err(NsError::UnknownPmid));
    let got = a.fetch(&[pmid(c, 1), pmid(77, 1)]);
    assert_eq!(got[0].values, Err(NsError::UnknownPmid));
    assert_eq!(one(&got[1].values), 5.0);
    assert_eq!(a.children("mmv").unwrap().len(), 1);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    drop(w);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Overwrites bytes of a file in place, as a writer would.
fn poke(path: &Path, at: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn real_files_mid_update_and_truncated_fail_alone() {
    let dir = tempdir("damage");
    let mut w = Writer::start(&dir);
    w.run(r#"F["a"] = make("a", 10); F["a"].lookup_add("requests.total", "", 1)"#);
    w.run(r#"F["b"] = make("b", 11); F["b"].lookup_add("requests.total", "", 2)"#);
    drop(w); // the files stay, with their last values
    let mut a = Mmv::new(FsDir(dir.clone()), "mmv");
    let ids = [pmid(10, 1), pmid(11, 1)];
    let got = a.fetch(&ids);
    assert_eq!((one(&got[0].values), one(&got[1].values)), (1.0, 2.0));

    // a's writer is re-initialising it: g2 differs from g1.
    let path = dir.join("a");
    let g2 = std::fs::read(&path).unwrap()[16..24].to_vec();
    poke(&path, 16, &[g2[0] ^ 1]);
    let got = a.fetch(&ids);
    assert!(
        matches!(&got[0].values, Err(NsError::Other(m)) if m.contains("being updated")),
        "{:?}",
        got[0].values
    );
    assert_eq!(one(&got[1].values), 2.0);
    poke(&path, 16, &g2);
    assert_eq!(one(&a.fetch(&ids)[0].values), 1.0);

    // b is truncated: an error for b's metrics only, logged once.
    let path = dir.join("b");
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 256)
        .unwrap();
    for _ in 0..3 {
        let got = a.fetch(&ids);
        assert_eq!(one(&got[0].values), 1.0);
        assert!(
            matches!(&got[1].values, Err(NsError::Other(m)) if m.starts_with("mmv file b:")),
            "{:?}",
            got[1].values
        );
    }
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    assert_eq!(a.lookup_name("mmv.a.temp"), Ok(pmid(10, 3)));
    let _ = std::fs::remove_dir_all(&dir);
}
