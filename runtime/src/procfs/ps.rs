//! `wasmon ps`: one bulk pass over /proc printed as a table or JSON. Owns the CLI arguments and
//! the formatting; reading is `ProcReader`'s. The lead mounts `PsArgs` as a clap subcommand and
//! calls `ps_main`.

use std::io::{self, Write};

use anyhow::Context;
use serde_json::{Map, Value, json};

use super::parse::TaskStat;
use super::reader::{ProcReader, Scope};
use super::{Fields, ProcInfo, SchedStat, Snapshot, ThreadInfo, Wchan};

/// `wasmon ps [--fields cpu,mem,state] [--threads] [--pid N] [--json]`
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct PsArgs {
    /// Field groups: cpu, mem, state, wchan, sched, fd, blocking (= state,wchan,sched), all.
    #[arg(long, value_delimiter = ',', default_value = "cpu,mem,state")]
    pub fields: Vec<String>,
    /// Also list every thread under its process.
    #[arg(long)]
    pub threads: bool,
    /// Only this process.
    #[arg(long)]
    pub pid: Option<u32>,
    /// One JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl PsArgs {
    pub fn field_set(&self) -> anyhow::Result<Fields> {
        let mut f = Fields::NONE;
        for name in &self.fields {
            f |= Fields::from_name(name).with_context(|| {
                format!("unknown field group {name:?} (cpu, mem, state, wchan, sched, fd, blocking, all)")
            })?;
        }
        Ok(f)
    }
}

/// Run `wasmon ps`.
pub fn ps_main(args: PsArgs) -> anyhow::Result<()> {
    let fields = args.field_set()?;
    let scope = args.pid.map_or(Scope::All, Scope::Pid);
    let mut reader = ProcReader::new();
    let mut snap = Snapshot::default();
    reader.read_into(&mut snap, fields, args.threads, scope)?;
    if let Some(pid) = args.pid
        && snap.procs.is_empty()
    {
        anyhow::bail!("no process {pid}");
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match write_ps(&snap, args.json, &mut out) {
        // `wasmon ps | head` closes the pipe early: not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing ps output"),
    }
}

/// ps-style STAT: state letter, then `<` high priority, `N` low priority, `s` session leader,
/// `l` multi-threaded, `+` in the foreground process group.
fn stat_text(pid: u32, st: &TaskStat) -> String {
    let mut s = String::with_capacity(6);
    s.push(st.state as char);
    if st.nice < 0 {
        s.push('<');
    } else if st.nice > 0 {
        s.push('N');
    }
    if st.session == pid as i32 {
        s.push('s');
    }
    if st.num_threads > 1 {
        s.push('l');
    }
    if st.tpgid >= 0 && st.tpgid == st.pgrp {
        s.push('+');
    }
    s
}

/// Write the table (or JSON) for a snapshot; the columns follow `snap.fields`.
pub fn write_ps(snap: &Snapshot, json: bool, out: &mut impl Write) -> io::Result<()> {
    if json {
        let rows: Vec<Value> = snap
            .procs
            .iter()
            .map(|p| {
                let mut o = row_json(snap, p.pid, None, &p.stat, p.wchan, p.sched);
                if let Some(n) = p.fd_count {
                    o.insert("fd_count".into(), json!(n));
                }
                if snap.with_threads {
                    let ts: Vec<Value> = snap
                        .threads_of(p)
                        .iter()
                        .map(|t| {
                            Value::Object(row_json(
                                snap,
                                t.pid,
                                Some(t.tid),
                                &t.stat,
                                t.wchan,
                                t.sched,
                            ))
                        })
                        .collect();
                    o.insert("threads".into(), Value::Array(ts));
                }
                Value::Object(o)
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows)?;
        return writeln!(out);
    }
    write_header(snap, out)?;
    for p in &snap.procs {
        write_row(snap, out, p, None)?;
        for t in snap.threads_of(p) {
            write_row(snap, out, p, Some(t))?;
        }
    }
    Ok(())
}

fn row_json(
    snap: &Snapshot,
    pid: u32,
    tid: Option<u32>,
    st: &TaskStat,
    wchan: Option<Wchan>,
    sched: Option<SchedStat>,
) -> Map<String, Value> {
    let f = snap.fields;
    let mut o = Map::new();
    o.insert("pid".into(), json!(pid));
    if let Some(tid) = tid {
        o.insert("tid".into(), json!(tid));
    }
    o.insert("comm".into(), json!(st.comm.as_str()));
    o.insert("nlwp".into(), json!(st.num_threads));
    if f.contains(Fields::STATE) {
        o.insert("state".into(), json!((st.state as char).to_string()));
        o.insert("stat".into(), json!(stat_text(pid, st)));
        o.insert("ppid".into(), json!(st.ppid));
    }
    if f.contains(Fields::CPU) {
        o.insert("utime_s".into(), json!(snap.ticks_to_secs(st.utime)));
        o.insert("stime_s".into(), json!(snap.ticks_to_secs(st.stime)));
        o.insert("processor".into(), json!(st.processor));
    }
    if f.contains(Fields::MEM) {
        o.insert("rss_bytes".into(), json!(snap.rss_bytes(st)));
        o.insert("vsize_bytes".into(), json!(st.vsize));
    }
    if let Some(w) = wchan {
        o.insert("wchan".into(), json!(w.as_str()));
    }
    if let Some(s) = sched {
        o.insert("run_s".into(), json!(s.run_ns as f64 * 1e-9));
        o.insert("wait_s".into(), json!(s.wait_ns as f64 * 1e-9));
    }
    o
}

fn write_header(snap: &Snapshot, out: &mut impl Write) -> io::Result<()> {
    let f = snap.fields;
    write!(out, "{:>7}", "PID")?;
    if snap.with_threads {
        write!(out, " {:>7}", "TID")?;
    }
    if f.contains(Fields::STATE) {
        write!(out, " {:>7} {:<5}", "PPID", "STAT")?;
    }
    if f.contains(Fields::CPU) {
        write!(out, " {:>9} {:>9}", "UTIME", "STIME")?;
    }
    if f.contains(Fields::MEM) {
        write!(out, " {:>9} {:>10}", "RSS(KiB)", "VSZ(KiB)")?;
    }
    write!(out, " {:>4}", "NLWP")?;
    if f.contains(Fields::FD) {
        write!(out, " {:>5}", "FDS")?;
    }
    if f.contains(Fields::SCHED) {
        write!(out, " {:>9} {:>9}", "RUN(s)", "WAIT(s)")?;
    }
    if f.contains(Fields::WCHAN) {
        write!(out, " {:<20}", "WCHAN")?;
    }
    writeln!(out, " COMMAND")
}

fn write_row(
    snap: &Snapshot,
    out: &mut impl Write,
    p: &ProcInfo,
    t: Option<&ThreadInfo>,
) -> io::Result<()> {
    let f = snap.fields;
    let (st, wchan, sched) = match t {
        Some(t) => (&t.stat, t.wchan, t.sched),
        None => (&p.stat, p.wchan, p.sched),
    };
    write!(out, "{:>7}", p.pid)?;
    if snap.with_threads {
        match t {
            Some(t) => write!(out, " {:>7}", t.tid)?,
            None => write!(out, " {:>7}", "-")?,
        }
    }
    if f.contains(Fields::STATE) {
        write!(out, " {:>7} {:<5}", st.ppid, stat_text(p.pid, st))?;
    }
    if f.contains(Fields::CPU) {
        write!(
            out,
            " {:>9.2} {:>9.2}",
            snap.ticks_to_secs(st.utime),
            snap.ticks_to_secs(st.stime)
        )?;
    }
    if f.contains(Fields::MEM) {
        write!(
            out,
            " {:>9} {:>10}",
            snap.rss_bytes(st) / 1024,
            st.vsize / 1024
        )?;
    }
    write!(out, " {:>4}", st.num_threads)?;
    if f.contains(Fields::FD) {
        match (t, p.fd_count) {
            (None, Some(n)) => write!(out, " {n:>5}")?,
            _ => write!(out, " {:>5}", "-")?,
        }
    }
    if f.contains(Fields::SCHED) {
        match sched {
            Some(s) => write!(
                out,
                " {:>9.3} {:>9.3}",
                s.run_ns as f64 * 1e-9,
                s.wait_ns as f64 * 1e-9
            )?,
            None => write!(out, " {:>9} {:>9}", "-", "-")?,
        }
    }
    if f.contains(Fields::WCHAN) {
        let w = wchan.filter(|w| !w.is_empty());
        write!(out, " {:<20}", w.as_ref().map_or("-", |w| w.as_str()))?;
    }
    match t {
        Some(_) => writeln!(out, "  \\_ {}", st.comm),
        None => writeln!(out, " {}", st.comm),
    }
}
