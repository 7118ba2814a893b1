//! Counter sources over Linux sysfs: `/sys/class/net/*/statistics` (every host has it; 64-bit
//! counters) and `/sys/class/infiniband/*/ports/*/counters` with `counters_ext` (PortCounters
//! and PortCountersExtended as the kernel exposes them). Local only: a host sees its own
//! adapters, so discovery ends at them. Read-only: these counters cannot be cleared here.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::counters::{CounterDesc, IB_EXTENDED, IB_LEGACY, NA, NET};
use super::source::{CounterSource, Reading, SourceError};
use crate::util::key_safe;

/// What a sysfs counter file says when the adapter has no performance-management agent.
const NO_PMA: &str = "N/A";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysfsKind {
    Net,
    Infiniband,
}

struct Node {
    name: String,
    ports: std::ops::Range<usize>,
}

struct Port {
    node: usize,
    number: u32,
    label: String,
    /// One file per counter of the schema (`None`: the adapter lacks it: reads as `NA`).
    files: Vec<Option<PathBuf>>,
    /// Exists while the port does.
    dir: PathBuf,
}

/// A sysfs counter source.
pub struct SysfsSource {
    kind: SysfsKind,
    root: PathBuf,
    host: String,
    schema: &'static [CounterDesc],
    nodes: Vec<Node>,
    ports: Vec<Port>,
    buf: Vec<u8>,
}

fn sorted_dirs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    // Port directories are numbers: order them as numbers.
    v.sort_by(|a, b| match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    });
    v
}

impl SysfsSource {
    /// `root`: `/sys/class/net` or `/sys/class/infiniband` (or a fixture tree); `host`: this
    /// machine's name, which names the node of a net source.
    pub fn open(kind: SysfsKind, root: &Path, host: &str) -> Result<SysfsSource, SourceError> {
        if !root.is_dir() {
            return Err(SourceError::Io {
                what: root.display().to_string(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        let schema: &'static [CounterDesc] = match kind {
            SysfsKind::Net => &NET,
            SysfsKind::Infiniband => {
                // 64-bit data counters only when every port has the extended table.
                let all_ext = sorted_dirs(root).iter().all(|dev| {
                    sorted_dirs(&root.join(dev).join("ports")).iter().all(|p| {
                        root.join(dev)
                            .join("ports")
                            .join(p)
                            .join("counters_ext/port_xmit_data_64")
                            .exists()
                    })
                });
                if all_ext { &IB_EXTENDED } else { &IB_LEGACY }
            }
        };
        let mut s = SysfsSource {
            kind,
            root: root.to_path_buf(),
            host: key_safe(host),
            schema,
            nodes: Vec::new(),
            ports: Vec::new(),
            buf: Vec::with_capacity(64),
        };
        s.refresh();
        Ok(s)
    }

    fn counter_file(&self, port_dir: &Path, c: &CounterDesc) -> Option<PathBuf> {
        let p = match self.kind {
            SysfsKind::Net => port_dir.join(c.name),
            SysfsKind::Infiniband => {
                let wide = c.width == super::counters::Width::Wrap64;
                if wide {
                    port_dir.join("counters_ext").join(format!("{}_64", c.name))
                } else {
                    port_dir.join("counters").join(c.name)
                }
            }
        };
        p.exists().then_some(p)
    }

    fn add_node(&mut self, name: String, ports: Vec<(u32, String, PathBuf)>) {
        let node = self.nodes.len();
        let start = self.ports.len();
        self.add_ports(node, ports);
        self.nodes.push(Node {
            name,
            ports: start..self.ports.len(),
        });
    }

    /// Appends `ports` of node `node`, each with its counters' files.
    fn add_ports(&mut self, node: usize, ports: Vec<(u32, String, PathBuf)>) {
        for (number, label, dir) in ports {
            let files = self
                .schema
                .iter()
                .map(|c| self.counter_file(&dir, c))
                .collect();
            self.ports.push(Port {
                node,
                number,
                label,
                files,
                dir,
            });
        }
    }

    fn read_value(&mut self, path: &Path) -> std::io::Result<u64> {
        self.buf.clear();
        std::fs::File::open(path)?.read_to_end(&mut self.buf)?;
        Ok(parse_counter(&self.buf))
    }
}

/// A counter file's content: a decimal number, or `N/A (no PMA)` (and anything else
/// unreadable) as `NA`.
pub fn parse_counter(bytes: &[u8]) -> u64 {
    let text = std::str::from_utf8(bytes).unwrap_or("").trim();
    if text.starts_with(NO_PMA) {
        return NA;
    }
    text.parse().unwrap_or(NA)
}

impl CounterSource for SysfsSource {
    fn schema(&self) -> &[CounterDesc] {
        self.schema
    }

    fn node_count(&self) -> usize {
        self.nodes.len()
    }

    fn node_name(&self, node: usize) -> &str {
        &self.nodes[node].name
    }

    fn node_ports(&self, node: usize) -> std::ops::Range<usize> {
        self.nodes[node].ports.clone()
    }

    fn port_number(&self, port: usize) -> u32 {
        self.ports[port].number
    }

    fn port_node(&self, port: usize) -> usize {
        self.ports[port].node
    }

    /// The interface name for net, the port number for InfiniBand.
    fn port_label(&self, port: usize) -> String {
        self.ports[port].label.clone()
    }

    fn present(&self, node: usize) -> bool {
        self.nodes[node]
            .ports
            .clone()
            .any(|p| self.ports[p].dir.exists())
    }

    fn neighbors(&self, _node: usize, _out: &mut Vec<usize>) {}

    fn read(&mut self, ports: &[u32], out: &mut Reading) -> Result<(), SourceError> {
        out.ts_ns = crate::procfs::now_ns();
        out.epoch = 0;
        for (i, &p) in ports.iter().enumerate() {
            let p = p as usize;
            out.cleared[i] = 0;
            out.reset[i] = 0;
            out.ok[i] = self.ports[p].dir.is_dir();
            if !out.ok[i] {
                continue;
            }
            for c in 0..self.schema.len() {
                let v = match self.ports[p].files[c].clone() {
                    Some(f) => self.read_value(&f).unwrap_or(NA),
                    None => NA,
                };
                out.set(c, i, v);
            }
        }
        Ok(())
    }

    /// New interfaces (net) or adapters (InfiniBand) are appended; ids of known ones stay.
    fn refresh(&mut self) {
        match self.kind {
            SysfsKind::Net => {
                let known: Vec<String> = self.ports.iter().map(|p| p.label.clone()).collect();
                let new: Vec<(u32, String, PathBuf)> = sorted_dirs(&self.root)
                    .into_iter()
                    .filter(|i| !known.contains(i))
                    .filter(|i| self.root.join(i).join("statistics").is_dir())
                    .map(|i| {
                        let number = std::fs::read_to_string(self.root.join(&i).join("ifindex"))
                            .ok()
                            .and_then(|s| s.trim().parse().ok())
                            .unwrap_or(0);
                        let dir = self.root.join(&i).join("statistics");
                        (number, i, dir)
                    })
                    .collect();
                if new.is_empty() {
                    return;
                }
                if self.nodes.is_empty() {
                    let host = self.host.clone();
                    self.add_node(host, new);
                } else {
                    // One node (this host): its range grows at the end.
                    let start = self.ports.len();
                    self.add_ports(0, new);
                    let n = &mut self.nodes[0];
                    n.ports = n.ports.start..self.ports.len();
                    debug_assert_eq!(n.ports.end - start, self.ports.len() - start);
                }
            }
            SysfsKind::Infiniband => {
                for dev in sorted_dirs(&self.root) {
                    let guid = std::fs::read_to_string(self.root.join(&dev).join("node_guid"))
                        .map(|g| g.trim().replace(':', ""))
                        .unwrap_or_default();
                    let name = if guid.is_empty() {
                        key_safe(&format!("{}-{dev}", self.host))
                    } else {
                        key_safe(&format!("hca-{guid}"))
                    };
                    if self.nodes.iter().any(|n| n.name == name) {
                        continue;
                    }
                    let pdir = self.root.join(&dev).join("ports");
                    let ports = sorted_dirs(&pdir)
                        .into_iter()
                        .filter_map(|p| {
                            let number = p.parse().ok()?;
                            Some((number, p.clone(), pdir.join(&p)))
                        })
                        .collect();
                    self.add_node(name, ports);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
