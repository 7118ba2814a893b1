//! The mapping table (`metrics` in the parameters): one row per cc-metric-collector metric
//! and level, naming the PCP metric(s) it is computed from, the formula, and the tags it
//! carries. Parsing only: errors name the row and field (`metrics[3].formula`).

use wasmon_guest::{Params, Str, intern};

/// How a row's value is computed (see `formula.rs` for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Formula {
    /// The value × `factor` (loadavg, memstat, numastats, netstat's absolute counters).
    Value,
    /// Change per second × `factor` (cpustat's percentages, netstat's `_bw`).
    Rate,
    /// Change since the previous poll × `factor` (iostat).
    Diff,
    /// The number of instances `from` has in the poll (cpustat's `num_cpus`).
    Count,
    /// The sum, per type id, of this poll's outputs named in `of` (cpustat's `cpu_used`).
    Sum,
    /// Whole gigabytes of the value × `factor` (diskstat's `disk_free`, `disk_total`).
    Gbytes,
    /// The largest whole percent used of the filesystems, from `from = [total, free]`
    /// (diskstat's `part_max_used`).
    UsedPercentMax,
    /// A hwmon temperature under tempstat's name for its sensor, `to` replacing the name's
    /// first `temp` (`temp`, `max_temp`, `crit_temp`), in whole degrees (`formula::whole`).
    HwmonTemp,
    /// A job's value divided over the hardware threads of its cpuset, one output per thread,
    /// and 0 for each online thread no job holds (slurm_cgroup): `from = [value, the job's
    /// threads (instances JOB:cpuN), the online threads (instances cpuN)]`.
    SplitCpus,
}

const FORMULAS: &[(&str, Formula)] = &[
    ("value", Formula::Value),
    ("rate", Formula::Rate),
    ("diff", Formula::Diff),
    ("count", Formula::Count),
    ("sum", Formula::Sum),
    ("gbytes", Formula::Gbytes),
    ("used-percent-max", Formula::UsedPercentMax),
    ("hwmon-temp", Formula::HwmonTemp),
    ("split-cpus", Formula::SplitCpus),
];

/// ClusterCockpit's topology levels (cc-metric-store's `type` tag values).
const LEVELS: &[&str] = &[
    "node",
    "socket",
    "die",
    "memoryDomain",
    "llc",
    "core",
    "hwthread",
    "accelerator",
];

const FIELDS: &[&str] = &[
    "from",
    "to",
    "formula",
    "type",
    "instance",
    "stype",
    "device",
    "unit",
    "factor",
    "wrap",
    "include",
    "exclude",
    "of",
    "f32",
    "split",
    "join",
    "nonzero",
    "baseline",
    "tag-override",
    "where",
    "hidden",
    "rename",
    "nonzero-input",
];

/// What `to` holds where the output is named by its instance (nfs3stat's `nfs3_getattr`).
pub const INSTANCE: &str = "{instance}";

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    /// PCP names read (interned: compared by address with the samples' names).
    pub from: Vec<Str>,
    /// The cc-metric-collector name written.
    pub to: Str,
    pub formula: Formula,
    /// The `type` tag; for levels below the node, `type-id` is the instance's trailing digits.
    pub level: Str,
    /// Only this instance (`1 minute` of `kernel.all.load`).
    pub instance: Option<String>,
    /// A `stype` tag whose `stype-id` is the instance (netstat's `network`).
    pub stype: Option<Str>,
    /// A `device` tag naming the instance (iostat, diskstat).
    pub device: bool,
    pub unit: Option<Str>,
    pub factor: f64,
    /// The counter's width in PCP when narrower than the kernel's (see `formula::diff`).
    pub wrap: Option<u32>,
    /// Only these instances, when not empty (netstat's `include_devices`).
    pub include: Vec<String>,
    /// Instances containing any of these are left out (iostat's and diskstat's `loop`).
    pub exclude: Vec<String>,
    /// `sum`: the outputs added up.
    pub of: Vec<Str>,
    /// The PCP metric is a 32-bit float of a decimal text (`hinv.cpu.clock` of cpuinfo's
    /// `cpu MHz`): its value is the shortest decimal that float stands for.
    pub f32: bool,
    /// Tags naming the instance's `:`-separated parts in order (ibstat's `device` and `port`
    /// of `mlx5_0:1`).
    pub split: Vec<Str>,
    /// A tag whose value is another metric's latest value for the same instance (ibstat's
    /// `lid`, cpufreq's `package_id`); not written while that value is unknown.
    pub join: Option<Join>,
    /// Instances where this metric's latest value is 0 are left out (ibstat skips ports
    /// whose LID is 0x0; cpufreq reads the first hardware thread of each core); an unknown
    /// value keeps the instance.
    pub only_where: Option<Str>,
    /// Computed for `sum` rows but not sent (schedstat's running and waiting parts).
    pub hidden: bool,
    /// Outputs equal to 0 are left out (tempstat sends no limit the chip reports as 0).
    pub nonzero: bool,
    /// The first poll that has an instance only sets its baseline (nfsiostat sends a mount's
    /// values from its second read on).
    pub baseline: bool,
    /// Instances containing a key get that level instead of the row's (tempstat's
    /// `tag_override`): (substring, type, type-id).
    pub overrides: Vec<(String, Str, Str)>,
    /// `to` holds `{instance}`: each instance is an output of its own, named by it (after
    /// `rename`), at the row's level (nfs3stat's and nfs4stat's operations).
    pub by_instance: bool,
    /// Instance -> the name it takes in `to` (PCP's `readdir+` is nfsstat's `readdirplus`).
    pub rename: Vec<(String, String)>,
    /// `diff`: sent only while the counter is non-zero at the previous poll and at this one
    /// (nfsstat's list leaves out operations with no calls, and cc-metric-collector sends a
    /// difference only for names both of its reads listed).
    pub nonzero_input: bool,
}

/// See [`Row::join`].
#[derive(Debug)]
pub struct Join {
    pub tag: Str,
    pub from: Str,
    /// Written as `0x` and hex digits, as sysfs writes a LID.
    pub hex: bool,
}

fn err(i: usize, field: &str, why: impl std::fmt::Display) -> String {
    format!("parameter `metrics[{i}].{field}`: {why}")
}

fn strings(i: usize, row: &Params, field: &str) -> Result<Vec<String>, String> {
    match row.get(field) {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::String(s)) => Ok(vec![s.clone()]),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| err(i, field, format!("expected strings, got {v}")))
            })
            .collect(),
        Some(v) => Err(err(
            i,
            field,
            format!("expected a string or a list of strings, got {v}"),
        )),
    }
}

fn string(i: usize, row: &Params, field: &str) -> Result<Option<String>, String> {
    match row.get(field) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(v) => Err(err(
            i,
            field,
            format!("expected a non-empty string, got {v}"),
        )),
    }
}

/// The rows of `params.metrics`.
pub fn parse(params: &Params) -> Result<Vec<Row>, String> {
    wasmon_guest::params::refuse_unknown(params, &["metrics"])?;
    let rows = match params.get("metrics") {
        Some(serde_json::Value::Array(a)) if !a.is_empty() => a,
        Some(v) => {
            return Err(format!(
                "parameter `metrics`: expected a non-empty list of rows, got {v}"
            ));
        }
        None => return Err("parameter `metrics` is required: the list of rows to compute".into()),
    };
    rows.iter().enumerate().map(|(i, v)| row(i, v)).collect()
}

fn row(i: usize, v: &serde_json::Value) -> Result<Row, String> {
    let Some(r) = v.as_object() else {
        return Err(format!(
            "parameter `metrics[{i}]`: expected an object, got {v}"
        ));
    };
    if let Some(k) = r.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(err(
            i,
            k,
            format!("unknown field (known: {})", FIELDS.join(", ")),
        ));
    }
    let to = string(i, r, "to")?.ok_or_else(|| err(i, "to", "is required: the metric written"))?;
    let formula = match string(i, r, "formula")? {
        None => Formula::Value,
        Some(f) => FORMULAS
            .iter()
            .find(|(n, _)| *n == f)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let known: Vec<&str> = FORMULAS.iter().map(|(n, _)| *n).collect();
                err(
                    i,
                    "formula",
                    format!("unknown {f:?} (known: {})", known.join(", ")),
                )
            })?,
    };
    let from: Vec<Str> = strings(i, r, "from")?.iter().map(|s| intern(s)).collect();
    let of: Vec<Str> = strings(i, r, "of")?.iter().map(|s| intern(s)).collect();
    match (formula, from.len(), of.len()) {
        (Formula::Sum, 0, n) if n > 0 => {}
        (Formula::Sum, _, _) => {
            return Err(err(
                i,
                "of",
                "`sum` adds outputs named in `of`, and reads no `from`",
            ));
        }
        (Formula::SplitCpus, 3, 0) => {}
        (Formula::SplitCpus, _, _) => {
            return Err(err(
                i,
                "from",
                "`split-cpus` reads three metrics: [value per job, the jobs' threads, the online threads]",
            ));
        }
        (Formula::UsedPercentMax, 2, 0) => {}
        (Formula::UsedPercentMax, _, _) => {
            return Err(err(
                i,
                "from",
                "`used-percent-max` reads two metrics: [total, free]",
            ));
        }
        (_, 1, 0) => {}
        (_, _, 0) => return Err(err(i, "from", "is required: one PCP metric name")),
        _ => return Err(err(i, "of", "only `sum` reads `of`")),
    }
    let level = string(i, r, "type")?.unwrap_or_else(|| "node".into());
    if !LEVELS.contains(&level.as_str()) {
        return Err(err(
            i,
            "type",
            format!("unknown level {level:?} (known: {})", LEVELS.join(", ")),
        ));
    }
    let factor = match r.get("factor") {
        None | Some(serde_json::Value::Null) => 1.0,
        Some(v) => v
            .as_f64()
            .filter(|f| f.is_finite())
            .ok_or_else(|| err(i, "factor", format!("expected a number, got {v}")))?,
    };
    let wrap = match r.get("wrap") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(b @ (32 | 64)) => Some(b as u32),
            _ => return Err(err(i, "wrap", format!("expected 32 or 64 (bits), got {v}"))),
        },
    };
    let flag = |field: &str| match r.get(field) {
        None | Some(serde_json::Value::Null) => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(v) => Err(err(i, field, format!("expected true or false, got {v}"))),
    };
    let device = flag("device")?;
    let join = match r.get("join") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(j)) => {
            let field = |k: &str| match j.get(k) {
                Some(serde_json::Value::String(v)) if !v.is_empty() => Ok(v.clone()),
                other => Err(err(
                    i,
                    &format!("join.{k}"),
                    format!("expected a non-empty string, got {other:?}"),
                )),
            };
            if let Some(k) = j
                .keys()
                .find(|k| !["tag", "from", "format"].contains(&k.as_str()))
            {
                return Err(err(
                    i,
                    &format!("join.{k}"),
                    "unknown field (known: tag, from, format)",
                ));
            }
            let hex = match j.get("format") {
                None => false,
                Some(serde_json::Value::String(f)) if f == "decimal" => false,
                Some(serde_json::Value::String(f)) if f == "hex" => true,
                Some(v) => {
                    return Err(err(
                        i,
                        "join.format",
                        format!("expected \"hex\" or \"decimal\", got {v}"),
                    ));
                }
            };
            Some(Join {
                tag: intern(&field("tag")?),
                from: intern(&field("from")?),
                hex,
            })
        }
        Some(v) => {
            return Err(err(
                i,
                "join",
                format!("expected {{ tag, from, format }}, got {v}"),
            ));
        }
    };
    let overrides = match r.get("tag-override") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Object(o)) => {
            let mut out = Vec::new();
            for (key, v) in o {
                let (Some(t), Some(id)) = (
                    v.get("type").and_then(|t| t.as_str()),
                    v.get("type-id").and_then(|t| t.as_str()),
                ) else {
                    return Err(err(
                        i,
                        &format!("tag-override.{key}"),
                        format!("expected {{ type, type-id }} strings, got {v}"),
                    ));
                };
                if !LEVELS.contains(&t) {
                    return Err(err(
                        i,
                        &format!("tag-override.{key}.type"),
                        format!("unknown level {t:?} (known: {})", LEVELS.join(", ")),
                    ));
                }
                out.push((key.clone(), intern(t), intern(id)));
            }
            out
        }
        Some(v) => {
            return Err(err(
                i,
                "tag-override",
                format!("expected a table of {{ type, type-id }} by instance text, got {v}"),
            ));
        }
    };
    let rename = match r.get("rename") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Object(o)) => o
            .iter()
            .map(|(k, v)| match v.as_str() {
                Some(to) if !to.is_empty() => Ok((k.clone(), to.to_string())),
                _ => Err(err(
                    i,
                    &format!("rename.{k}"),
                    format!("expected a non-empty string, got {v}"),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(err(
                i,
                "rename",
                format!("expected a table of names by instance, got {v}"),
            ));
        }
    };
    let by_instance = to.contains(INSTANCE);
    if !rename.is_empty() && !by_instance {
        return Err(err(
            i,
            "rename",
            format!("renames instances for a `to` holding {INSTANCE}"),
        ));
    }
    let nonzero_input = flag("nonzero-input")?;
    if nonzero_input && formula != Formula::Diff {
        return Err(err(i, "nonzero-input", "is for `diff` rows"));
    }
    Ok(Row {
        by_instance,
        rename,
        nonzero_input,
        from,
        to: intern(&to),
        formula,
        level: intern(&level),
        instance: string(i, r, "instance")?,
        stype: string(i, r, "stype")?.map(|s| intern(&s)),
        device,
        unit: string(i, r, "unit")?.map(|s| intern(&s)),
        factor,
        wrap,
        include: strings(i, r, "include")?,
        exclude: strings(i, r, "exclude")?,
        of,
        f32: flag("f32")?,
        split: strings(i, r, "split")?.iter().map(|s| intern(s)).collect(),
        join,
        nonzero: flag("nonzero")?,
        only_where: string(i, r, "where")?.map(|s| intern(&s)),
        hidden: flag("hidden")?,
        baseline: flag("baseline")?,
        overrides,
    })
}

impl Row {
    /// Whether this row reads `instance`.
    pub fn takes(&self, instance: &str) -> bool {
        self.instance.as_deref().is_none_or(|want| want == instance)
            && (self.include.is_empty() || self.include.iter().any(|d| d == instance))
            && !self.exclude.iter().any(|x| instance.contains(x.as_str()))
    }
}
