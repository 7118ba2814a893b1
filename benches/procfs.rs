//! Benchmark of `wasmon::procfs`'s bulk read with 1000 extra `sleep 600` processes, against
//! `ps -eo pid,stat,utime,stime,rss,nlwp` (the same fields) and a naive open/read/close of every
//! `/proc/PID/stat`. Goals: at least 3x faster than ps, within 1.5x of the naive scan.
//! Owns nothing but this file; the sleepers are killed when it ends.

use std::hint::black_box;
use std::process::{Child, Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use wasmon::procfs::{Fields, ProcReader, Scope, Snapshot};

const SLEEPERS: usize = 1000;

/// The spawned sleepers, killed and reaped on drop (also when a benchmark panics).
struct Sleepers(Vec<Child>);

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

fn spawn_sleepers() -> Sleepers {
    let mut v = Sleepers(Vec::with_capacity(SLEEPERS));
    for _ in 0..SLEEPERS {
        let c = Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn();
        v.0.push(c.expect("spawn sleep"));
    }
    v
}

/// The naive scan: list /proc, then `std::fs::read` (open, read, close) each pid's stat.
fn naive_stat_scan() -> usize {
    let mut bytes = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let mut p = e.path();
        p.push("stat");
        if let Ok(b) = std::fs::read(&p) {
            bytes += b.len();
        }
    }
    bytes
}

fn bulk_read(c: &mut Criterion) {
    let sleepers = spawn_sleepers();
    let mut reader = ProcReader::new();
    let mut snap = Snapshot::default();
    // pid, stat, utime, stime, rss, nlwp all come from /proc/PID/stat.
    let ps_fields = Fields::CPU | Fields::MEM | Fields::STATE;
    reader
        .read_into(&mut snap, ps_fields, false, Scope::All)
        .unwrap();
    assert!(snap.procs.len() >= SLEEPERS, "sleepers visible");
    eprintln!("processes: {}", snap.procs.len());

    let mut g = c.benchmark_group("procfs_1000_sleepers");
    g.sample_size(20);
    g.bench_function("wasmon_bulk_read", |b| {
        b.iter(|| {
            reader
                .read_into(&mut snap, ps_fields, false, Scope::All)
                .unwrap();
            black_box(snap.procs.len())
        })
    });
    g.bench_function("naive_stat_scan", |b| {
        b.iter(|| black_box(naive_stat_scan()))
    });
    g.bench_function("ps_command", |b| {
        b.iter(|| {
            let out = Command::new("ps")
                .args(["-eo", "pid,stat,utime,stime,rss,nlwp"])
                .output()
                .unwrap();
            assert!(out.status.success());
            black_box(out.stdout.len())
        })
    });
    // For reference: the blocked-thread detector's pass (every thread, stat + schedstat + wchan).
    g.bench_function("wasmon_threads_blocking", |b| {
        b.iter(|| {
            reader
                .read_into(&mut snap, Fields::BLOCKING, true, Scope::All)
                .unwrap();
            black_box(snap.threads.len())
        })
    });
    g.finish();
    drop(sleepers);
}

criterion_group!(benches, bulk_read);
criterion_main!(benches);
