//! A test-only agent that tries file operations inside the sandbox and reports what happened,
//! for the tests of directory grants. Params: `{"domain": N, "ops": ["read:/sys/x", ...]}`.
//!
//! - `N:0:0` (`fsprobe.result`): one text value per op, the op as instance: `ok LEN`,
//!   `ok LEN TEXT` for `head` (the first 4 KiB), or `err KIND: MESSAGE`;
//! - `N:0:1` (`fsprobe.spin`): reads the first op's file again and again, forever (only the
//!   deadline ends the call).
//!
//! Ops: `read` (the whole file), `head`, `list` (a directory's names, sorted), `link` (a
//! symlink's target), `write`, `create`, `append`, `mkdir`, `remove`; through the host's
//! `files` interface instead of WASI: `fread` (the whole file, no `max` of its own: the
//! host's cap), `fsmall` (`max` 4096, the text too) and `flist` (sorted names); their errors
//! are `err FILE-ERROR` (`err too-large`).

use std::io::{Read, Write};

use wasmon_guest::Params;
use wasmon_guest::agent::{
    Agent, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType,
};
use wasmon_guest::names::Names;

pub struct Probe {
    domain: u32,
    ops: Vec<String>,
    names: Names,
}

/// An op through the `files` interface: its outcome.
fn run_files(verb: &str, path: &str) -> Option<String> {
    use wasmon_guest::agent::files;
    let out = match verb {
        "fread" => files::read_file(path, u64::MAX).map(|b| format!("ok {}", b.len())),
        "fsmall" => files::read_file(path, 4096)
            .map(|b| format!("ok {} {}", b.len(), String::from_utf8_lossy(&b))),
        "flist" => files::list_dir(path, 4096).map(|mut names| {
            names.sort();
            format!("ok {}", names.join(","))
        }),
        _ => return None,
    };
    Some(out.unwrap_or_else(|e| format!("err {}", e.name())))
}

fn run(op: &str) -> std::io::Result<String> {
    let (verb, path) = op.split_once(':').unwrap_or((op, ""));
    if let Some(out) = run_files(verb, path) {
        return Ok(out);
    }
    match verb {
        "read" => Ok(format!("ok {}", std::fs::read(path)?.len())),
        "head" => {
            let mut buf = Vec::new();
            std::fs::File::open(path)?
                .take(4096)
                .read_to_end(&mut buf)?;
            Ok(format!(
                "ok {} {}",
                buf.len(),
                String::from_utf8_lossy(&buf)
            ))
        }
        "list" => {
            let mut names: Vec<String> = std::fs::read_dir(path)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect::<Result<_, _>>()?;
            names.sort();
            Ok(format!("ok {}", names.join(",")))
        }
        "link" => Ok(format!("ok {}", std::fs::read_link(path)?.display())),
        "write" => {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)?
                .write_all(b"x")?;
            Ok("ok".into())
        }
        "append" => {
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)?
                .write_all(b"x")?;
            Ok("ok".into())
        }
        "create" => std::fs::write(path, b"x").map(|_| "ok".into()),
        "mkdir" => std::fs::create_dir(path).map(|_| "ok".into()),
        "remove" => std::fs::remove_file(path).map(|_| "ok".into()),
        other => Ok(format!("err unknown op {other:?}")),
    }
}

impl Agent for Probe {
    fn configure(params: &Params) -> Result<Self, String> {
        let domain = params
            .get("domain")
            .and_then(|d| d.as_u64())
            .ok_or("`domain` (a number) is required")? as u32;
        let ops = params
            .get("ops")
            .and_then(|o| o.as_array())
            .ok_or("`ops` (a list of strings) is required")?
            .iter()
            .map(|o| o.as_str().map(str::to_string).ok_or("`ops`: strings only"))
            .collect::<Result<_, _>>()?;
        let pmid = |item| Pmid {
            domain,
            cluster: 0,
            item,
        };
        let names = Names::new([
            ("fsprobe.result".to_string(), pmid(0)),
            ("fsprobe.spin".to_string(), pmid(1)),
        ]);
        Ok(Probe { domain, ops, names })
    }

    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        self.names.lookup(name)
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.names.names_of(id)
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        self.names.children(name)
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        if id.domain != self.domain {
            return Err(NsError::UnknownPmid);
        }
        Ok(MetricDesc {
            id,
            value_type: ValueType::Text,
            semantics: Semantics::Discrete,
            units: String::new(),
            indom: Some(0),
            help: "outcome of a file operation".into(),
        })
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<ValueSet> {
        ids.iter()
            .map(|&id| {
                let values = match id.item {
                    0 => Ok(self
                        .ops
                        .iter()
                        .map(|op| {
                            let out =
                                run(op).unwrap_or_else(|e| format!("err {:?}: {e}", e.kind()));
                            Value::new(op.clone(), out)
                        })
                        .collect()),
                    1 => {
                        let first = self.ops.first().and_then(|o| o.split_once(':'));
                        let Some((verb, path)) = first else {
                            return ValueSet {
                                id,
                                values: Err(NsError::Other("no op to spin on".into())),
                            };
                        };
                        if verb.starts_with('f') {
                            loop {
                                let _ = std::hint::black_box(run_files(verb, path));
                            }
                        }
                        loop {
                            let _ = std::hint::black_box(std::fs::read(path));
                        }
                    }
                    _ => Err(NsError::UnknownPmid),
                };
                ValueSet { id, values }
            })
            .collect()
    }
}

wasmon_guest::export_agent!(Probe);
