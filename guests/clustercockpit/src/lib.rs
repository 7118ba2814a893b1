//! The `clustercockpit` transformer: PCP's names in, cc-metric-collector's out. Each row of
//! its mapping table (`table.rs`) names a cc-metric-collector metric, the PCP metric(s) it is
//! computed from, the formula (`formula.rs`), and the tags that put it at its level
//! (`type`, `type-id`, `stype`, `stype-id`, `device`, `unit` in the sample's metadata, which
//! the store sink and the line protocol of an `http` sink read). Samples no row reads are
//! dropped: the output is what cc-metric-collector would send, and nothing else.
//!
//! ```json
//! {"metrics": [
//!   {"from": "kernel.percpu.cpu.user", "to": "cpu_user", "formula": "rate",
//!    "factor": 0.1, "type": "hwthread", "unit": "Percent"},
//!   {"from": "kernel.all.load", "instance": "1 minute", "to": "load_one"}
//! ]}
//! ```
//!
//! A poll's samples share one timestamp; counts, sums and maxima are taken over the samples
//! of one timestamp, and rates and differences against the previous poll's value of the same
//! metric and instance (so, as in cc-metric-collector, whose `Init` reads the first values,
//! the first poll only sets the baseline for them).

use std::collections::HashMap;

use wasmon_guest::{
    FxBuildHasher, Input, Key, Kind, Metadata, Params, Sample, Str, Transformer, intern, same,
};

pub mod formula;
pub mod table;

use table::{Formula, Row};

/// Series whose previous value is kept (rates, differences): a node's CPUs, disks and
/// interfaces are hundreds to a few thousand; instances that come and go (job ids, mounts)
/// must not grow the instance without end, so past this the memory starts over (one poll of
/// rates is then skipped).
const MAX_SERIES: usize = 1 << 16;

type Map<K, V> = HashMap<K, V, FxBuildHasher>;

pub struct ClusterCockpit {
    rows: Vec<Row>,
    /// PCP name -> a range of `targets`.
    by_name: Map<Key, (usize, usize)>,
    /// (row, which of the row's `from`), grouped by PCP name.
    targets: Vec<(usize, usize)>,
    /// (row, instance) -> previous value and timestamp.
    prev: Map<(usize, Key), (f64, i64)>,
    /// (row, instance) -> the output's metadata, built once.
    meta: Map<(usize, Key), Metadata>,
    /// (row, instance) -> the output's name, for rows that name it by instance (`hwmon-temp`,
    /// a `to` holding `{instance}`).
    names: Map<(usize, Key), Option<Str>>,
    /// The PCP names rows read as `join` tags or `where` conditions.
    join_names: Vec<Str>,
    /// (PCP name, instance) -> the latest value of each of `join_names`, from this poll or an
    /// earlier one (another agent's: cpufreq_cpuinfo's rows read the linux agent's clock and
    /// the cpusys agent's topology).
    latest: Map<(Key, Key), f64>,
    keys: Keys,
}

/// The tag names, interned once.
struct Keys {
    kind: Str,
    kind_id: Str,
    stype: Str,
    stype_id: Str,
    device: Str,
    unit: Str,
    node: Str,
    empty: Str,
}

impl Transformer for ClusterCockpit {
    fn configure(params: &Params) -> Result<Self, String> {
        let rows = table::parse(params)?;
        let mut grouped: Vec<(Str, usize, usize)> = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            for (slot, name) in r.from.iter().enumerate() {
                grouped.push((name.clone(), i, slot));
            }
        }
        grouped.sort_by(|a, b| a.0.cmp(&b.0));
        let mut by_name: Map<Key, (usize, usize)> = Map::default();
        for (j, (name, _, _)) in grouped.iter().enumerate() {
            by_name.entry(Key(name.clone())).or_insert((j, j)).1 = j + 1;
        }
        let mut join_names: Vec<Str> = Vec::new();
        let read = rows.iter().flat_map(|r| {
            r.join
                .as_ref()
                .map(|j| &j.from)
                .into_iter()
                .chain(&r.only_where)
        });
        for name in read {
            if !join_names.iter().any(|n| same(n, name)) {
                join_names.push(name.clone());
            }
        }
        Ok(ClusterCockpit {
            rows,
            names: Map::default(),
            join_names,
            latest: Map::default(),
            by_name,
            targets: grouped.into_iter().map(|(_, i, slot)| (i, slot)).collect(),
            prev: Map::default(),
            meta: Map::default(),
            keys: Keys {
                kind: intern("type"),
                kind_id: intern("type-id"),
                stype: intern("stype"),
                stype_id: intern("stype-id"),
                device: intern("device"),
                unit: intern("unit"),
                node: intern("node"),
                empty: intern(""),
            },
        })
    }

    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
        let mut run: Vec<Sample> = Vec::with_capacity(input.len());
        for s in input {
            if run.last().is_some_and(|l| l.timestamp_ns != s.timestamp_ns) {
                self.poll(&run, out);
                run.clear();
            }
            run.push(s);
        }
        if !run.is_empty() {
            self.poll(&run, out);
        }
    }
}

impl ClusterCockpit {
    /// The rows' outputs for one poll (samples of one timestamp).
    fn poll(&mut self, run: &[Sample], out: &mut Vec<Sample>) {
        let ts = run[0].timestamp_ns;
        let first = out.len();
        let mut counts: Map<usize, usize> = Map::default();
        // used-percent-max: per row, per instance, [total, free].
        let mut filesystems: Map<usize, Map<Key, [Option<f64>; 2]>> = Map::default();
        // split-cpus: per row, [job values, the jobs' threads, the online threads] in order.
        let mut splits: Map<usize, [Vec<(Str, f64)>; 3]> = Map::default();
        if self.prev.len() > MAX_SERIES {
            self.prev.clear();
        }
        // `join` tags and `where` conditions: other metrics' latest values per instance.
        if !self.join_names.is_empty() {
            if self.latest.len() > MAX_SERIES {
                self.latest.clear();
            }
            for s in run {
                if self.join_names.iter().any(|n| same(n, &s.name)) {
                    let key = (Key(s.name.clone()), Key(s.resource.clone()));
                    self.latest.insert(key, s.value);
                }
            }
        }
        for s in run {
            let Some(&(start, end)) = self.by_name.get(&Key(s.name.clone())) else {
                continue;
            };
            for j in start..end {
                let (ri, slot) = self.targets[j];
                let row = &self.rows[ri];
                if !row.takes(&s.resource) {
                    continue;
                }
                let latest = |name: &Str| {
                    let key = (Key(name.clone()), Key(s.resource.clone()));
                    self.latest.get(&key).copied()
                };
                // Unknown (the other agent not run, or not polled yet) keeps the instance,
                // untagged: a node without the cpusys agent still sends cpufreq.
                if let Some(w) = &row.only_where
                    && latest(w) == Some(0.0)
                {
                    continue;
                }
                let tag = row.join.as_ref().and_then(|j| {
                    let v = latest(&j.from)?;
                    Some(if j.hex {
                        format!("0x{:x}", v as u64)
                    } else {
                        format!("{v}")
                    })
                });
                if row.baseline {
                    let key = (ri, Key(s.resource.clone()));
                    if self.prev.insert(key, (s.value, s.timestamp_ns)).is_none() {
                        continue;
                    }
                }
                let value = match row.formula {
                    Formula::Value if row.f32 => Some(formula::from_f32(s.value) * row.factor),
                    Formula::Value => Some(s.value * row.factor),
                    Formula::HwmonTemp => Some(formula::whole(s.value * row.factor)),
                    Formula::Gbytes => Some(formula::gbytes(s.value * row.factor)),
                    Formula::Rate | Formula::Diff => {
                        let key = (ri, Key(s.resource.clone()));
                        let now = (s.value, s.timestamp_ns);
                        match self.prev.insert(key, now) {
                            None => None,
                            Some((v, t)) if row.formula == Formula::Rate => {
                                formula::rate(v, t, s.value, s.timestamp_ns, row.wrap, row.factor)
                            }
                            // nfsstat lists no operation without calls: no difference
                            // unless both reads listed it.
                            Some((v, _)) if row.nonzero_input && (v == 0.0 || s.value == 0.0) => {
                                None
                            }
                            Some((v, _)) => Some(formula::diff(v, s.value, row.wrap) * row.factor),
                        }
                    }
                    Formula::Count => {
                        *counts.entry(ri).or_default() += 1;
                        None
                    }
                    Formula::UsedPercentMax => {
                        filesystems
                            .entry(ri)
                            .or_default()
                            .entry(Key(s.resource.clone()))
                            .or_default()[slot] = Some(s.value);
                        None
                    }
                    Formula::SplitCpus => {
                        splits.entry(ri).or_default()[slot].push((s.resource.clone(), s.value));
                        None
                    }
                    Formula::Sum => None,
                };
                if let Some(v) = value.filter(|v| !(row.nonzero && *v == 0.0)) {
                    self.emit(ri, &s.resource, v, ts, tag, out);
                }
            }
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_unstable();
        for (ri, n) in counts {
            self.emit(ri, "", n as f64, ts, None, out);
        }
        let mut filesystems: Vec<_> = filesystems.into_iter().collect();
        filesystems.sort_unstable_by_key(|(ri, _)| *ri);
        for (ri, fs) in filesystems {
            let f = self.rows[ri].factor;
            let max = fs
                .values()
                .filter_map(|[total, free]| {
                    formula::used_percent(
                        formula::gbytes((*total)? * f),
                        formula::gbytes((*free)? * f),
                    )
                })
                .fold(0.0, f64::max);
            self.emit(ri, "", max, ts, None, out);
        }
        let mut splits: Vec<_> = splits.into_iter().collect();
        splits.sort_unstable_by_key(|(ri, _)| *ri);
        for (ri, [values, members, online]) in splits {
            let values: Vec<(&str, f64)> = values.iter().map(|(j, v)| (&**j, *v)).collect();
            let members: Vec<&str> = members.iter().map(|(m, _)| &**m).collect();
            let online: Vec<&str> = online.iter().map(|(t, _)| &**t).collect();
            for (thread, v) in formula::split_cpus(&values, &members, &online) {
                self.emit(ri, thread, v, ts, None, out);
            }
        }
        self.sums(first, ts, out);
        if self.rows.iter().any(|r| r.hidden) {
            let hidden: Vec<Str> = self
                .rows
                .iter()
                .filter(|r| r.hidden)
                .map(|r| r.to.clone())
                .collect();
            let mut k = first;
            for i in first..out.len() {
                if !hidden.iter().any(|h| same(h, &out[i].name)) {
                    out.swap(k, i);
                    k += 1;
                }
            }
            out.truncate(k);
        }
    }

    /// `sum` rows over this poll's outputs (`out[first..]`), per type id.
    fn sums(&mut self, first: usize, ts: i64, out: &mut Vec<Sample>) {
        for ri in 0..self.rows.len() {
            let row = &self.rows[ri];
            if row.formula != Formula::Sum {
                continue;
            }
            let mut by_id: Vec<(Str, f64)> = Vec::new();
            for s in &out[first..] {
                if !row.of.iter().any(|n| same(n, &s.name))
                    || s.metadata.get("type") != Some(&*row.level)
                {
                    continue;
                }
                let id: Str = match s.metadata.get("type-id") {
                    Some(id) => id.into(),
                    None => self.keys.empty.clone(),
                };
                match by_id.iter_mut().find(|(i, _)| same(i, &id)) {
                    Some((_, sum)) => *sum += s.value,
                    None => by_id.push((id, s.value)),
                }
            }
            for (id, sum) in by_id {
                self.emit(ri, &id, sum, ts, None, out);
            }
        }
    }

    /// Pushes row `ri`'s output for `instance`, with the row's `join` tag's value when it has
    /// one; an instance a sub-node level cannot place (no trailing digits for its `type-id`) or
    /// a `hwmon-temp` row cannot name is left out.
    fn emit(
        &mut self,
        ri: usize,
        instance: &str,
        value: f64,
        ts: i64,
        joined: Option<String>,
        out: &mut Vec<Sample>,
    ) {
        let row = &self.rows[ri];
        let per_instance = !same(&row.level, &self.keys.node)
            || row.stype.is_some()
            || row.device
            || !row.split.is_empty()
            || row.formula == Formula::HwmonTemp;
        let resource: Str = if per_instance {
            instance.into()
        } else {
            self.keys.empty.clone()
        };
        let key = (ri, Key(resource.clone()));
        let name = if row.formula == Formula::HwmonTemp || row.by_instance {
            if self.names.len() > MAX_SERIES {
                self.names.clear();
            }
            let named = self
                .names
                .entry((ri, Key(instance.into())))
                .or_insert_with(|| {
                    if row.by_instance {
                        Some(formula::instance_name(&row.to, instance, &row.rename))
                    } else {
                        formula::hwmon_temp_name(instance, &row.to)
                    }
                    .map(|n| intern(&n))
                });
            match named {
                Some(n) => n.clone(),
                None => return,
            }
        } else {
            row.to.clone()
        };
        let metadata = match (self.meta.get(&key), &joined) {
            (Some(m), None) => m.clone(),
            _ => {
                let Some(m) = self.metadata(row, &resource, joined) else {
                    return;
                };
                if row.join.is_none() {
                    if self.meta.len() > MAX_SERIES {
                        self.meta.clear();
                    }
                    self.meta.insert(key, m.clone());
                }
                m
            }
        };
        out.push(Sample {
            name,
            resource,
            unit: row.unit.clone().unwrap_or_else(|| self.keys.empty.clone()),
            kind: Kind::Gauge,
            value,
            timestamp_ns: ts,
            metadata,
        });
    }

    /// The tags of `row`'s output for `instance`, in cc-metric-collector's order.
    fn metadata(&self, row: &Row, instance: &Str, joined: Option<String>) -> Option<Metadata> {
        let k = &self.keys;
        let level = row
            .overrides
            .iter()
            .find(|(key, _, _)| instance.contains(key.as_str()));
        let mut tags = Vec::new();
        match level {
            Some((_, kind, id)) => {
                tags.push((k.kind.clone(), kind.clone()));
                tags.push((k.kind_id.clone(), id.clone()));
            }
            None => {
                tags.push((k.kind.clone(), row.level.clone()));
                if !same(&row.level, &k.node) {
                    tags.push((k.kind_id.clone(), formula::type_id(instance)?.into()));
                }
            }
        }
        if let Some(st) = &row.stype {
            tags.push((k.stype.clone(), st.clone()));
            tags.push((k.stype_id.clone(), instance.clone()));
        }
        if row.device {
            tags.push((k.device.clone(), instance.clone()));
        }
        if !row.split.is_empty() {
            let parts: Vec<&str> = instance.split(':').collect();
            if parts.len() != row.split.len() {
                return None;
            }
            for (tag, part) in row.split.iter().zip(parts) {
                tags.push((tag.clone(), part.into()));
            }
        }
        if let (Some(j), Some(v)) = (&row.join, joined) {
            tags.push((j.tag.clone(), intern(&v)));
        }
        if let Some(u) = &row.unit {
            tags.push((k.unit.clone(), u.clone()));
        }
        Some(Metadata::new(tags))
    }
}

wasmon_guest::export_transformer!(ClusterCockpit);
