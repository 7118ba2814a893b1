//! One MMV file through pmcd's MMV PMDA and wasmon's mmv guest.

use super::*;

/// Writes an MMV file with python3-pcp (PCP's own writer) and keeps it mapped until dropped;
/// the file is removed then.
pub(super) struct MmvFile {
    child: std::process::Child,
    path: PathBuf,
}

const MMV_WRITER: &str = r#"
import sys
from pcp import mmv, pmapi
import cmmv
indom = mmv.mmv_indom(serial=1, shorttext="ports", helptext="ports")
indom.set_instances([mmv.mmv_instance(0, "p0"), mmv.mmv_instance(1, "p1")])
v = mmv.MemoryMappedValues(sys.argv[1], cluster=7)
v.add_indoms([indom])
def metric(name, item, ty, sem, units, indom):
    m = mmv.mmv_metric(name, item, ty, sem, units, indom, name, name)
    m.semantics = sem; m.dimension = units
    return m
v.add_metrics([
    metric("ops", 1, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,0,1,0,0,0), 0),
    metric("port.bytes", 2, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(1,0,0,0,0,0), 1),
    metric("temp", 3, cmmv.MMV_TYPE_DOUBLE, cmmv.MMV_SEM_INSTANT, pmapi.pmUnits(0,0,0,0,0,0), 0),
    metric("small", 4, cmmv.MMV_TYPE_I32, cmmv.MMV_SEM_INSTANT, pmapi.pmUnits(0,0,0,0,0,0), 0),
    metric("ratio", 5, cmmv.MMV_TYPE_FLOAT, cmmv.MMV_SEM_INSTANT, pmapi.pmUnits(0,0,0,0,0,0), 0),
    metric("state", 6, cmmv.MMV_TYPE_STRING, cmmv.MMV_SEM_DISCRETE, pmapi.pmUnits(0,0,0,0,0,0), 0),
    metric("busy", 7, cmmv.MMV_TYPE_ELAPSED, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,0,0,0,0,0), 0),
    metric("total", 8, cmmv.MMV_TYPE_I64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,0,1,0,0,0), 0),
])
v.start()
v.lookup_add("ops", "", 41)
v.lookup_add("port.bytes", "p0", 5)
v.lookup_add("port.bytes", "p1", 7)
v.lookup_set("temp", "", 21.5)
v.lookup_set("small", "", -3)
v.lookup_set("ratio", "", 0.25)
v.lookup_set_string("state", "", "running")
v.lookup_add("total", "", 123456789012)
print("ok", flush=True)
sys.stdin.read()
"#;

impl MmvFile {
    pub(super) fn write(path: PathBuf) -> MmvFile {
        use std::io::BufRead;
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", MMV_WRITER])
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ok", "the MMV writer failed");
        MmvFile { child, path }
    }
}

impl Drop for MmvFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// (metric, instance name, value as pminfo prints it) from `pminfo -f`: the same type gives
/// the same text (`41`, `21.5`, `"running"`).
pub(super) fn values(text: &str) -> Vec<(String, String, String)> {
    let mut metric = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            metric = line.trim().to_string();
        } else if let Some((head, v)) = line.trim().rsplit_once("value ") {
            let inst = head
                .split_once(" or \"")
                .and_then(|(_, n)| n.split_once("\"]"))
                .map_or(String::new(), |(n, _)| n.to_string());
            out.push((metric.clone(), inst, v.trim().to_string()));
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

#[test]
fn an_mmv_file_reads_the_same_through_pmcds_mmv_pmda_and_wasmons_mmv_guest() {
    let pmcd = reference_pmcd();
    let dir = PathBuf::from("/var/lib/pcp/tmp/mmv");
    std::fs::create_dir_all(&dir).unwrap();
    let name = format!("wasmontest{}", std::process::id());
    let _file = MmvFile::write(dir.join(&name));
    let w = wasmon(&dir);
    let prefix = format!("mmv.{name}");
    let fetch = |port| {
        let o = pcp_tool("pminfo", port, &["-f", &prefix]);
        o.status.success().then(|| values(&stdout(&o)))
    };
    let mut theirs = None;
    wait_until("pmcd's MMV PMDA to see the file", || {
        theirs = fetch(pmcd).filter(|v| v.len() == 9);
        theirs.is_some()
    });
    let ours = fetch(w.pcp).expect("wasmon serves the MMV file");
    // Names, instances and values agree.
    assert_eq!(ours, theirs.unwrap());
    // So do the descriptors, line for line: PMID, type, indom, semantics, units.
    let desc = |port| {
        let mut d = desc_blocks(&ok("pminfo", port, &["-d", "-m", &prefix]));
        d.sort();
        d
    };
    assert_eq!(desc(w.pcp), desc(pmcd));
}
