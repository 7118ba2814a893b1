//! The linux agent's metric table: every name PCP's linux PMDA (6.0.3) defines, with its
//! PMID, data type, instance domain, semantics and units (`metrics.tsv`, facts read from a
//! reference pmcd with `pminfo -md`), and a one-line help of our own.
//!
//! Names are static, as in PCP: the per-host variety (CPUs, disks, interfaces) lives in
//! instances. The table is parsed once, on first use; a malformed row is a bug in the
//! embedded file and fails the table's unit test, never the daemon (the row is skipped).
//!
//! Owns only the table; knows nothing of how values are read.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::namespace::{Child, Pmid, Semantics, ValueType, children_of};

/// PCP's domain for the linux PMDA.
pub const LINUX_DOMAIN: u32 = 60;

const TSV: &str = include_str!("metrics.tsv");

/// One metric of the table.
#[derive(Debug)]
pub struct Metric {
    pub name: &'static str,
    pub cluster: u32,
    pub item: u32,
    pub ty: ValueType,
    /// Instance domain serial, `None` for singular metrics.
    pub indom: Option<u32>,
    pub sem: Semantics,
    /// As PCP's `pmUnitsStr` writes them ("" for none).
    pub units: &'static str,
    pub help: &'static str,
}

impl Metric {
    pub fn pmid(&self) -> Pmid {
        Pmid {
            domain: LINUX_DOMAIN,
            cluster: self.cluster,
            item: self.item,
        }
    }
}

/// The whole table, with its look-ups.
pub struct Table {
    pub metrics: Vec<Metric>,
    by_name: HashMap<&'static str, usize>,
    by_pmid: HashMap<(u32, u32), usize>,
}

/// The table, parsed on first use.
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table::parse(TSV))
}

impl Table {
    fn parse(text: &'static str) -> Table {
        let metrics: Vec<Metric> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(parse_row)
            .collect();
        let by_name = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| (m.name, i))
            .collect();
        let by_pmid = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| ((m.cluster, m.item), i))
            .collect();
        Table {
            metrics,
            by_name,
            by_pmid,
        }
    }

    pub fn by_name(&self, name: &str) -> Option<&Metric> {
        self.by_name.get(name).map(|&i| &self.metrics[i])
    }

    pub fn by_pmid(&self, id: Pmid) -> Option<&Metric> {
        self.row_of(id).map(|i| &self.metrics[i])
    }

    /// The row of `id` in [`Table::metrics`].
    pub fn row_of(&self, id: Pmid) -> Option<usize> {
        if id.domain != LINUX_DOMAIN {
            return None;
        }
        self.by_pmid.get(&(id.cluster, id.item)).copied()
    }

    /// True when some name lies below `prefix` (a non-leaf).
    pub fn has_below(&self, prefix: &str) -> bool {
        self.metrics.iter().any(|m| below(m.name, prefix).is_some())
    }

    /// Children of a full dotted name ("" for the root), in table order, each once.
    pub fn children(&self, name: &str) -> Vec<Child> {
        children_of(self.metrics.iter().map(|m| m.name), name)
    }

    /// The table as PCP's ASCII pmns text (what the namespace loads, so look-ups and
    /// traversal never reach the agent).
    pub fn pmns(&self) -> String {
        let mut out =
            String::from("/* linux agent (domain 60): names and PMIDs as PCP's linux PMDA */\n");
        // Breadth of the tree in first-seen order: a node's line lists its children.
        let mut stack = vec![String::new()];
        while let Some(node) = stack.pop() {
            let kids = self.children(&node);
            out.push_str(if node.is_empty() { "root" } else { &node });
            out.push_str(" {\n");
            for k in &kids {
                let full = if node.is_empty() {
                    k.name.clone()
                } else {
                    format!("{node}.{}", k.name)
                };
                if k.leaf {
                    let m = self.by_name(&full).expect("a leaf is a row");
                    out.push_str(&format!(
                        "    {} {}:{}:{}\n",
                        k.name, LINUX_DOMAIN, m.cluster, m.item
                    ));
                } else {
                    out.push_str(&format!("    {}\n", k.name));
                }
            }
            out.push_str("}\n");
            for k in kids.iter().rev().filter(|k| !k.leaf) {
                stack.push(if node.is_empty() {
                    k.name.clone()
                } else {
                    format!("{node}.{}", k.name)
                });
            }
        }
        out
    }
}

/// The part of `name` below `prefix` ("" is the root), if `name` is below it.
fn below<'n>(name: &'n str, prefix: &str) -> Option<&'n str> {
    if prefix.is_empty() {
        return Some(name);
    }
    name.strip_prefix(prefix)?.strip_prefix('.')
}

fn parse_row(line: &'static str) -> Option<Metric> {
    let mut f = line.split('\t');
    let name = f.next()?;
    let (cluster, item) = f.next()?.split_once('.')?;
    let ty = match f.next()? {
        "i32" => ValueType::I32,
        "u32" => ValueType::U32,
        "i64" => ValueType::I64,
        "u64" => ValueType::U64,
        "float" => ValueType::Float,
        "double" => ValueType::Double,
        "string" => ValueType::String,
        _ => return None,
    };
    let indom = match f.next()? {
        "-" => None,
        n => Some(n.parse().ok()?),
    };
    let sem = match f.next()? {
        "counter" => Semantics::Counter,
        "instant" => Semantics::Instant,
        "discrete" => Semantics::Discrete,
        _ => return None,
    };
    let units = f.next()?;
    let help = f.next()?;
    Some(Metric {
        name,
        cluster: cluster.parse().ok()?,
        item: item.parse().ok()?,
        ty,
        indom,
        sem,
        units,
        help,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespace::Namespace;

    #[test]
    fn every_row_parses_and_names_and_pmids_are_unique() {
        let rows = TSV
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count();
        let t = table();
        assert_eq!(t.metrics.len(), rows, "a row of metrics.tsv does not parse");
        assert_eq!(t.by_name.len(), rows, "a name is listed twice");
        assert_eq!(t.by_pmid.len(), rows, "a PMID is listed twice");
        assert!(t.metrics.iter().all(|m| !m.help.is_empty()));
        // Units must be what PCP's wire can carry.
        for m in &t.metrics {
            assert!(
                crate::pcp::units::parse_units(m.units).is_some(),
                "{}: units {:?}",
                m.name,
                m.units
            );
        }
    }

    /// Names whose help may repeat another's word for word: each set is one quantity under
    /// several names (pmdalinux keeps aliases), so one sentence is right for all of them.
    const SAME_QUANTITY: &[&[&str]] = &[
        &["swap.pagesout", "mem.vmstat.pswpout"],
        &["swap.length", "mem.util.swapTotal"],
        &["swap.free", "mem.util.swapFree"],
        // One TcpExt column (TCPFastOpenActiveFail) that pmdalinux lists as two items.
        &[
            "network.tcp.fastopenactivefail",
            "network.tcp.tcpfastopenactivefail",
        ],
    ];

    /// Longest help sentence: a one-line summary that fits a terminal line of `pminfo -T`.
    const MAX_HELP: usize = 160;

    /// The placeholder the help column was generated with, "<last name part>, from <file>":
    /// a head of at most three lowercase words (the name's last part, `_` read as a space).
    fn is_placeholder(name: &str, help: &str) -> bool {
        let Some((head, _)) = help.split_once(", from ") else {
            return false;
        };
        let last = name.rsplit('.').next().unwrap_or(name);
        head == last
            || head == last.replace('_', " ")
            || (head.split(' ').count() <= 3
                && head
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == ' '))
    }

    #[test]
    fn help_is_one_specific_line_per_metric() {
        // A tab inside the help would make an eighth column that parse_row drops silently.
        for line in TSV.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            assert_eq!(line.split('\t').count(), 7, "not 7 columns: {line:?}");
        }
        let t = table();
        let mut seen: HashMap<&str, &str> = HashMap::new();
        let mut bad = Vec::new();
        for m in &t.metrics {
            let h = m.help;
            if h.trim().is_empty() || h.trim() != h {
                bad.push(format!("{}: empty or padded help {h:?}", m.name));
            }
            if h.chars().any(char::is_control) {
                bad.push(format!("{}: control character in help {h:?}", m.name));
            }
            if h.chars().count() > MAX_HELP {
                bad.push(format!("{}: help longer than {MAX_HELP}", m.name));
            }
            if is_placeholder(m.name, h) {
                bad.push(format!("{}: placeholder help {h:?}", m.name));
            }
            if let Some(other) = seen.insert(h, m.name) {
                let aliases = SAME_QUANTITY
                    .iter()
                    .any(|set| set.contains(&other) && set.contains(&m.name));
                if !aliases {
                    bad.push(format!("{} repeats the help of {other}: {h:?}", m.name));
                }
            }
        }
        assert!(
            bad.is_empty(),
            "{} bad help rows:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }

    #[test]
    fn placeholder_help_is_recognized() {
        assert!(is_placeholder(
            "kernel.all.cpu.guest_nice",
            "guest nice, from /proc/stat"
        ));
        assert!(is_placeholder("disk.dev.read", "read, from /proc/stat"));
        assert!(is_placeholder(
            "a.b.total",
            "total, from /proc/softirqs (totals)"
        ));
        assert!(!is_placeholder(
            "mem.util.hugepagesSurp",
            "Huge pages beyond the pool size, from overcommit (/proc/meminfo HugePages_Surp)"
        ));
        assert!(!is_placeholder(
            "disk.dev.read",
            "Reads completed by each disk"
        ));
    }

    #[test]
    fn pmns_text_loads_and_agrees_with_the_table() {
        let t = table();
        let ns = Namespace::from_pmns(&[("linux", &t.pmns())]).unwrap();
        let mut listed = ns.traverse("", None).unwrap().names;
        let mut names: Vec<String> = t.metrics.iter().map(|m| m.name.to_string()).collect();
        listed.sort();
        names.sort();
        assert_eq!(listed, names);
        for m in &t.metrics {
            assert_eq!(ns.lookup(m.name, None), Ok(m.pmid()), "{}", m.name);
        }
        assert_eq!(
            t.by_name("mem.util.available").unwrap().pmid().to_string(),
            "60.1.58"
        );
        assert!(t.has_below("kernel.all") && !t.has_below("kernel.all.load"));
    }
}
