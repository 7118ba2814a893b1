//! A misbehaving guest for the runtime's sandbox tests. It passes samples through (or holds
//! them until flush with `{"mode": "hold"}`), except for samples whose names ask for trouble:
//!
//! - `test.loop`: spins forever (the epoch deadline must stop it);
//! - `test.alloc`: allocates until the memory cap refuses (the call must fail);
//! - `test.trap`: panics (a trap);
//! - `test.open`: reads the file named by metadata `path` and emits `test.open` with value 1
//!   when it could, 0 (and a warning naming the error) when it could not;
//! - `test.flood`: emits `value` copies of the sample (for the output cap);
//! - `test.sleep`: sleeps `value` seconds (a WASI sleep: the deadline is wall time);
//! - `test.recurse`: recurses without end (the wasm stack limit must trap it);
//! - `test.stderr` / `test.stdout`: writes `value` lines of 1 KB to stderr / stdout;
//! - `test.trap-on-flush`: held like any sample in hold mode; the flush that finds it panics;
//! - `test.fds`: opens the file named by metadata `path` `value` times, keeping every handle,
//!   and emits `test.fds` with the number it could open.
//!
//! `{"tag": "v2"}` adds metadata `version=v2` to what it emits (hot-reload tests tell versions
//! apart by it); `{"fail": "why"}` refuses the configuration.

use wasmon_guest::{Input, Metadata, Params, Sample, Str, Transformer};

pub struct Testing {
    hold: bool,
    held: Vec<Sample>,
    tag: Option<Metadata>,
}

impl Testing {
    fn tagged(&self, mut s: Sample) -> Sample {
        if let Some(tag) = &self.tag {
            s.metadata = tag.clone();
        }
        s
    }
}

impl Transformer for Testing {
    fn configure(params: &Params) -> Result<Self, String> {
        if let Some(why) = params.get("fail") {
            return Err(format!("refused as asked: {why}"));
        }
        let hold = match params.get("mode").and_then(|m| m.as_str()) {
            None | Some("passthrough") => false,
            Some("hold") => true,
            Some(other) => {
                return Err(format!("`mode` must be passthrough or hold, got {other:?}"));
            }
        };
        let tag = params
            .get("tag")
            .and_then(|t| t.as_str())
            .map(|t| Metadata::new(vec![(Str::from("version"), Str::from(t))]));
        Ok(Testing {
            hold,
            held: Vec::new(),
            tag,
        })
    }

    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
        for s in input {
            match &*s.name {
                "test.loop" => {
                    let mut x: u64 = 0;
                    loop {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                }
                "test.alloc" => {
                    let mut hog: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hog.push(vec![1u8; 1 << 20]);
                        std::hint::black_box(&hog);
                    }
                }
                "test.trap" => panic!("trap requested by sample test.trap"),
                "test.open" => {
                    let path = s.metadata.get("path").unwrap_or("/etc/passwd").to_string();
                    let ok = match std::fs::read(&path) {
                        Ok(_) => 1.0,
                        Err(e) => {
                            wasmon_guest::warn!("cannot read {path}: {e}");
                            0.0
                        }
                    };
                    let mut r = s.clone();
                    r.value = ok;
                    out.push(r);
                }
                "test.sleep" => {
                    std::thread::sleep(std::time::Duration::from_secs_f64(s.value));
                    out.push(s.clone());
                }
                "test.recurse" => {
                    out.push(s.clone());
                    std::hint::black_box(recurse(std::hint::black_box(1)));
                }
                "test.stderr" | "test.stdout" => {
                    let line = "x".repeat(1024);
                    for i in 0..(s.value as usize) {
                        if &*s.name == "test.stderr" {
                            eprintln!("{i} {line}");
                        } else {
                            println!("{i} {line}");
                        }
                    }
                    out.push(s.clone());
                }
                "test.fds" => {
                    let path = s.metadata.get("path").unwrap_or("/data/x").to_string();
                    let mut kept = Vec::new();
                    for _ in 0..(s.value as usize) {
                        match std::fs::File::open(&path) {
                            Ok(f) => kept.push(f),
                            Err(_) => break,
                        }
                    }
                    let mut r = s.clone();
                    r.value = kept.len() as f64;
                    out.push(r);
                }
                "test.flood" => {
                    for _ in 0..(s.value as usize) {
                        out.push(s.clone());
                    }
                }
                _ if self.hold => {
                    let s = self.tagged(s);
                    self.held.push(s)
                }
                _ => out.push(self.tagged(s)),
            }
        }
    }

    fn flush(&mut self, out: &mut Vec<Sample>) {
        if self.held.iter().any(|s| &*s.name == "test.trap-on-flush") {
            panic!("trap requested by a held test.trap-on-flush");
        }
        out.append(&mut self.held);
    }
}

/// Recursion the optimiser cannot turn into a loop (the call's result feeds a non-associative
/// step), with frames small enough to live on wasm's own stack.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let below = recurse(depth + 1);
    (below >> 3) ^ depth.rotate_left(below as u32 & 63)
}

wasmon_guest::export_transformer!(Testing);
