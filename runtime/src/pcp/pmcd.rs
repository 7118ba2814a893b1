//! The `pmcd.*` metrics a pmcd answers itself (domain 2, PCP's `root_pmcd` names and PMIDs)
//! that PCP's clients look up: `pmcd.hostname` (pmval, pmlogger and pmrep label their output
//! with it), `pmcd.timezone` and `pmcd.zoneinfo` (pmlogger writes them into archives), and a
//! few that describe the server.
//!
//! Owns only this small table; the server answers for domain 2 from it before asking the
//! namespace.

use super::pdu::{Desc, Value};
use super::wire::NULL_ID;
use crate::namespace::Pmid;

/// pmcd's own domain.
pub const PMCD_DOMAIN: u32 = 2;
/// The top of the names below.
pub const PMCD_ROOT: &str = "pmcd";
/// The PCP release whose pmcd this server behaves as (what `pmcd.version` says: clients that
/// look at it compare it with the protocol they speak).
pub const PCP_VERSION: &str = "6.0.3";

/// What is known of the server when a value is fetched.
pub struct PmcdInfo {
    pub hostname: String,
    pub timezone: String,
    pub zoneinfo: Option<String>,
    pub numclients: u32,
    pub numagents: u32,
}

#[derive(Clone, Copy)]
enum Src {
    NumAgents,
    NumClients,
    Timezone,
    Version,
    Build,
    Hostname,
    Pid,
    Seqnum,
    Zoneinfo,
}

struct Def {
    name: &'static str,
    item: u32,
    /// `PM_TYPE_*` and `PM_SEM_*`.
    ty: u32,
    sem: u32,
    help: &'static str,
    src: Src,
}

const U32: u32 = 1;
const U64: u32 = 3;
const STRING: u32 = 6;
const INSTANT: u32 = 3;
const DISCRETE: u32 = 4;

#[rustfmt::skip]
static DEFS: &[Def] = &[
    Def { name: "pmcd.numagents", item: 2, ty: U32, sem: INSTANT, help: "Number of agents (PMDAs) currently connected to PMCD", src: Src::NumAgents },
    Def { name: "pmcd.numclients", item: 3, ty: U32, sem: INSTANT, help: "Number of clients currently connected to PMCD", src: Src::NumClients },
    Def { name: "pmcd.timezone", item: 5, ty: STRING, sem: DISCRETE, help: "local $TZ", src: Src::Timezone },
    Def { name: "pmcd.version", item: 7, ty: STRING, sem: DISCRETE, help: "PMCD version", src: Src::Version },
    Def { name: "pmcd.build", item: 20, ty: STRING, sem: DISCRETE, help: "Build version of the server (wasmon's version)", src: Src::Build },
    Def { name: "pmcd.hostname", item: 21, ty: STRING, sem: DISCRETE, help: "local hostname", src: Src::Hostname },
    Def { name: "pmcd.pid", item: 23, ty: U64, sem: DISCRETE, help: "Process identifier of the server", src: Src::Pid },
    Def { name: "pmcd.seqnum", item: 24, ty: U32, sem: DISCRETE, help: "Namespace change sequence number", src: Src::Seqnum },
    Def { name: "pmcd.zoneinfo", item: 26, ty: STRING, sem: DISCRETE, help: "local timezone in zoneinfo form", src: Src::Zoneinfo },
];

fn pmid(d: &Def) -> Pmid {
    Pmid {
        domain: PMCD_DOMAIN,
        cluster: 0,
        item: d.item,
    }
}

fn by_id(id: Pmid) -> Option<&'static Def> {
    DEFS.iter().find(|d| pmid(d) == id)
}

/// The PMID of a `pmcd.*` leaf.
pub fn lookup(name: &str) -> Option<Pmid> {
    DEFS.iter().find(|d| d.name == name).map(pmid)
}

pub fn name_of(id: Pmid) -> Option<&'static str> {
    by_id(id).map(|d| d.name)
}

/// Every `pmcd.*` leaf name, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    DEFS.iter().map(|d| d.name)
}

pub fn desc(id: Pmid) -> Option<Desc> {
    by_id(id).map(|d| Desc {
        pmid: id.to_raw(),
        ty: d.ty,
        indom: NULL_ID,
        sem: d.sem,
        units: 0,
    })
}

pub fn help(id: Pmid) -> Option<&'static str> {
    by_id(id).map(|d| d.help)
}

/// A `pmcd.*` value; `None` for an unknown PMID or a value this host does not have.
pub fn value(id: Pmid, info: &PmcdInfo) -> Option<Value> {
    Some(match by_id(id)?.src {
        Src::NumAgents => Value::U32(info.numagents),
        Src::NumClients => Value::U32(info.numclients),
        Src::Timezone => Value::String(info.timezone.clone()),
        Src::Version => Value::String(PCP_VERSION.into()),
        Src::Build => Value::String(format!("wasmon {}", env!("CARGO_PKG_VERSION"))),
        Src::Hostname => Value::String(info.hostname.clone()),
        Src::Pid => Value::U64(u64::from(std::process::id())),
        Src::Seqnum => Value::U32(0),
        Src::Zoneinfo => Value::String(info.zoneinfo.clone()?),
    })
}

/// `$TZ` as pmcd reports it: the environment's when set, else the local offset in POSIX form
/// (`UTC`, or `LCL-2` east of Greenwich: POSIX counts hours west).
pub fn timezone() -> String {
    if let Ok(tz) = std::env::var("TZ")
        && !tz.is_empty()
    {
        return tz;
    }
    use chrono::Offset;
    let secs = chrono::Local::now().offset().fix().local_minus_utc();
    if secs == 0 {
        return "UTC".into();
    }
    let west = -secs;
    let (h, m) = (west / 3600, (west.abs() % 3600) / 60);
    if m == 0 {
        format!("LCL{h:+}")
    } else {
        format!("LCL{h:+}:{m:02}")
    }
}

/// The zoneinfo name of the local zone (`:Europe/Berlin`), from `/etc/localtime`'s link.
pub fn zoneinfo() -> Option<String> {
    let link = std::fs::read_link("/etc/localtime").ok()?;
    let s = link.to_str()?;
    let (_, zone) = s.split_once("zoneinfo/")?;
    Some(format!(":{zone}"))
}
