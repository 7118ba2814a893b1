//! `runtime::linux`: the native linux agent, PCP's linux PMDA (domain 60) built into the
//! daemon: the same names, PMIDs, types, instance domains, semantics and units
//! ([`table`]), with values computed as pmdalinux computes them.
//!
//! As in PCP, a PMID's cluster names the file it comes from (0 `/proc/stat`, 1
//! `/proc/meminfo`, 28 `/proc/vmstat`, ...). Each file (or small family of files) has a
//! [`Group`] in a module of its own: its parser and the values of its clusters' metrics. A
//! fetch refreshes each group it needs once, then asks it for each requested metric, so a
//! fetch of every metric reads every file once. A metric whose file is absent, unreadable
//! or malformed has no value; the others are untouched.
//!
//! Everything is read under a root ([`read::Root`], `/` by default), so captured trees from
//! other machines test the parsers.
//!
//! Owns this agent only; uses nothing of the crate but the namespace's types.

pub mod indom;
pub mod read;
pub mod table;

mod buddyinfo;
mod cpuinfo;
mod devices;
mod diskstats;
mod fchost;
mod filesys;
mod interrupts;
mod ipc;
mod ksm;
mod loadavg;
mod locks;
mod login;
mod meminfo;
mod net_conn;
mod net_dev;
mod net_rpc;
mod net_snmp;
mod net_sysfs;
mod numa;
mod pressure;
mod rows;
mod scsi;
mod slabinfo;
mod sock_diag;
mod sockstat;
mod softnet;
mod stat;
mod statfs;
mod swapdev;
mod sys_fs;
mod sys_kernel;
mod sysfs_kernel;
mod tty_serial;
mod uname;
mod uptime;
mod vmstat;
mod whole;
mod zoneinfo;

#[cfg(test)]
mod machines;
#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod tests;

pub use devices::{DeviceFilter, Devices};
pub use read::Root;
pub use table::{LINUX_DOMAIN, Metric, table};

use crate::namespace::{Agent, Child, LabelsOf, MetricDesc, NsError, Pmid, Values};

/// What a group's refresh may use.
pub struct Ctx<'a> {
    pub root: &'a Root,
    pub devices: &'a Devices,
}

/// One /proc or /sys file (or family of files): its parser and its metrics' values.
pub trait Group: Send {
    /// True for the metrics it answers: mostly whole clusters, but pmdalinux's cluster 0
    /// (`/proc/stat`) also holds disk and swap metrics read from other files, so a group may
    /// pick by name too. Asked once per metric when the agent is built; the first group in
    /// [`groups`] order that answers takes the metric.
    fn answers(&self, m: &Metric) -> bool;
    /// Reads its files into its own state. Called at most once per fetch, and only when one
    /// of its metrics is asked for. What it cannot read leaves its state empty: no values.
    fn refresh(&mut self, ctx: &Ctx);
    /// Appends the values of `m` (one of its metrics) from the last refresh, by instance name
    /// ("" for a singular metric). Nothing appended: no value.
    fn values(&self, m: &Metric, out: &mut Values);
    /// The error pmdalinux answers for `m` instead of values, from the last refresh (`swap.in`
    /// is "not supported by this version" on 2.6+ kernels). `None`: answer [`Group::values`].
    fn error(&self, _m: &Metric) -> Option<NsError> {
        None
    }
    /// PCP's instance number for an instance of one of its indoms, when pmdalinux fixes one
    /// (`cpu3` is 3). `None`: numbered by the server in discovery order, as pmdalinux's
    /// instance cache does.
    fn instance_id(&self, _indom: u32, _name: &str) -> Option<u32> {
        None
    }
    /// Every instance of an indom pmdalinux lists from a fixed table whether or not a fetch
    /// has values for it (the NFS operations); `None`: the server lists an indom's metrics'
    /// instances.
    fn instances(&self, _indom: u32) -> Option<Vec<String>> {
        None
    }
    /// Labels it states for an instance whose labels need its parsed state (pmdalinux's
    /// `linux_labelCallBack` for zones, buddies, interrupt lines); `None`: those of
    /// [`indom::labels`].
    fn labels(&self, _of: LabelsOf) -> Option<Vec<(String, serde_json::Value)>> {
        None
    }
}

/// Every group, in the order they are asked for instance numbers and labels.
fn groups() -> Vec<Box<dyn Group>> {
    vec![
        Box::new(stat::Stat::default()),
        Box::new(meminfo::MemInfo::default()),
        Box::new(loadavg::LoadAvg::default()),
        Box::new(net_dev::NetDev::default()),
        Box::new(net_snmp::NetSnmp::default()),
        Box::new(net_conn::NetConn::default()),
        Box::new(net_sysfs::NetSysfs::default()),
        Box::new(net_rpc::NetRpc::default()),
        Box::new(tty_serial::TtySerial::default()),
        Box::new(fchost::FcHost::default()),
        Box::new(sockstat::SockStat::default()),
        Box::new(softnet::SoftNet::default()),
        Box::new(uptime::Uptime::default()),
        Box::new(diskstats::DiskStats::default()),
        Box::new(filesys::FileSys::default()),
        Box::new(scsi::Scsi::default()),
        Box::new(scsi::Tape::default()),
        Box::new(interrupts::Interrupts::default()),
        Box::new(interrupts::SoftIrqs::default()),
        Box::new(pressure::Pressure::default()),
        Box::new(uname::Uname::default()),
        Box::new(cpuinfo::CpuSys::default()),
        Box::new(login::Login::default()),
        Box::new(sys_kernel::SysKernel::default()),
        Box::new(sys_fs::SysFs::default()),
        Box::new(locks::Locks::default()),
        Box::new(sysfs_kernel::SysfsKernel::default()),
        Box::new(ipc::Ipc::default()),
        Box::new(vmstat::VmStat::default()),
        Box::new(swapdev::Swaps::default()),
        Box::new(slabinfo::SlabInfo::default()),
        Box::new(numa::Numa::default()),
        Box::new(buddyinfo::BuddyInfo::default()),
        Box::new(zoneinfo::ZoneInfo::default()),
        Box::new(ksm::Ksm::default()),
    ]
}

/// The agent (see the module doc).
pub struct LinuxAgent {
    root: Root,
    devices: Devices,
    groups: Vec<Box<dyn Group>>,
    /// The group answering each row of the table, by row.
    owner: Vec<Option<usize>>,
    /// Indoms whose values were cut at [`rows::MAX_INSTANCES`] (each said once in the log).
    cut: std::collections::BTreeSet<u32>,
}

impl Default for LinuxAgent {
    fn default() -> Self {
        Self::new()
    }
}

impl LinuxAgent {
    pub fn new() -> Self {
        Self::with_root("/")
    }

    /// Reads `<root>/proc/...` and `<root>/sys/...` instead of the live host's.
    pub fn with_root(root: impl AsRef<std::path::Path>) -> Self {
        Self::with_options(Root::new(root), Devices::default())
    }

    pub fn with_options(root: Root, devices: Devices) -> Self {
        let groups = groups();
        let owner = table()
            .metrics
            .iter()
            .map(|m| groups.iter().position(|g| g.answers(m)))
            .collect();
        LinuxAgent {
            root,
            devices,
            groups,
            owner,
            cut: Default::default(),
        }
    }

    /// The pmns text of every name (load it into the namespace).
    pub fn pmns() -> String {
        table().pmns()
    }
}

impl Agent for LinuxAgent {
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        let t = table();
        match t.by_name(name) {
            Some(m) => Ok(m.pmid()),
            None if t.has_below(name) => Err(NsError::NonLeaf),
            None => Err(NsError::UnknownName),
        }
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        table()
            .by_pmid(id)
            .map(|m| vec![m.name.to_string()])
            .ok_or(NsError::UnknownPmid)
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        let t = table();
        let out = t.children(name);
        // A leaf has no children; a name that is neither leaf nor node is unknown.
        if out.is_empty() && t.by_name(name).is_none() {
            return Err(NsError::UnknownName);
        }
        Ok(out)
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        let m = table().by_pmid(id).ok_or(NsError::UnknownPmid)?;
        Ok(MetricDesc {
            id,
            semantics: m.sem,
            units: m.units.to_string(),
            indom: m.indom,
            help: m.help.to_string(),
            value_type: m.ty,
        })
    }

    fn label_name(&self) -> Option<String> {
        Some("linux".into())
    }

    fn labels(&mut self, of: LabelsOf) -> Vec<(String, serde_json::Value)> {
        self.groups
            .iter()
            .find_map(|g| g.labels(of))
            .unwrap_or_else(|| indom::labels(of))
    }

    fn instance_id(&mut self, indom: u32, name: &str) -> Option<u32> {
        self.groups.iter().find_map(|g| g.instance_id(indom, name))
    }

    fn instances(&mut self, indom: u32) -> Option<Vec<String>> {
        self.groups.iter().find_map(|g| g.instances(indom))
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        let t = table();
        let mut fresh = vec![false; self.groups.len()];
        let ctx = Ctx {
            root: &self.root,
            devices: &self.devices,
        };
        ids.iter()
            .map(|id| {
                let Some(row) = t.row_of(*id) else {
                    return (*id, Err(NsError::UnknownPmid));
                };
                let m = &t.metrics[row];
                let mut out = Values::new();
                // A metric no group answers yet has no value, as pmdalinux answers one
                // whose file this host lacks.
                if let Some(g) = self.owner[row] {
                    if !fresh[g] {
                        self.groups[g].refresh(&ctx);
                        fresh[g] = true;
                    }
                    if let Some(e) = self.groups[g].error(m) {
                        return (*id, Err(e));
                    }
                    self.groups[g].values(m, &mut out);
                }
                let limit = rows::limit(m.indom);
                if out.len() > limit {
                    if self.cut.insert(m.indom.unwrap_or(u32::MAX)) {
                        tracing::warn!(
                            "linux agent: {} has {} instances under {}; only the first {limit} \
                             are answered",
                            m.name,
                            out.len(),
                            self.root.dir().display(),
                        );
                    }
                    out.truncate(limit);
                }
                let out = out
                    .into_iter()
                    .filter_map(|(n, v)| Some((n, v.conform(m.ty)?)))
                    .collect();
                (*id, Ok(out))
            })
            .collect()
    }
}

impl LinuxAgent {
    /// The indoms whose values were cut at the instance limit (tests).
    #[cfg(test)]
    pub fn cut_indoms(&self) -> Vec<u32> {
        self.cut.iter().copied().collect()
    }

    /// True when some group answers `name` (tests: which names have a reader yet).
    pub fn answers(&self, name: &str) -> bool {
        let t = table();
        t.by_name(name)
            .and_then(|m| t.row_of(m.pmid()))
            .is_some_and(|row| self.owner[row].is_some())
    }
}
