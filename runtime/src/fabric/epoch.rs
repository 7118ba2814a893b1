//! The blocking part of a fabric agent's epoch: the owned ports read from the counter source
//! and processed by the engine, the clears the engine asks for applied, and the reports and
//! traps named for the wire ([`Epoch`]). [`Work`] holds the source and the engine between
//! epochs and runs on a blocking thread; it knows no NATS, notifier or pipeline (the agent,
//! `agent`, hands the epoch on).

use super::engine::{Engine, Output};
use super::histogram::Histogram;
use super::source::CounterSource;
use super::wire::{DataEntry, TrapMsg};

/// What the blocking part of an epoch hands back.
pub(super) struct Epoch {
    pub(super) hist: Vec<Histogram>,
    pub(super) entries: Vec<DataEntry>,
    pub(super) traps: Vec<TrapMsg>,
    pub(super) epoch: u64,
    pub(super) ts_ns: i64,
    pub(super) read: u32,
    pub(super) missing: u32,
    pub(super) ports: u32,
}

/// An agent's counter source and engine, and the engine's output reused epoch to epoch.
pub(super) struct Work {
    pub(super) source: Box<dyn CounterSource>,
    pub(super) engine: Engine,
    pub(super) out: Output,
}

impl Work {
    /// Read and process `ports`; apply clear requests.
    pub(super) fn run(&mut self, me: &str, ports: Vec<u32>, fresh: bool) -> anyhow::Result<Epoch> {
        self.engine.set_ports(ports);
        if fresh {
            self.engine.start_fresh();
            if self.source.can_clear() {
                let all = (1u32 << self.engine.schema().len()) - 1;
                for &p in self.engine.ports() {
                    self.source.clear(p as usize, all);
                }
            }
        }
        let ports = self.engine.ports().to_vec();
        self.source.read(&ports, self.engine.reading_mut())?;
        self.engine.process(&mut self.out);
        for &(slot, mask) in &self.out.clears {
            self.source.clear(ports[slot as usize] as usize, mask);
        }
        let schema = self.engine.schema();
        let src = &*self.source;
        let resource = |slot: u32| {
            let p = ports[slot as usize] as usize;
            (
                src.node_name(src.port_node(p)).to_string(),
                src.port_label(p),
            )
        };
        let entries = self
            .out
            .reports
            .iter()
            .map(|r| {
                let (n, l) = resource(r.slot);
                DataEntry {
                    resource: format!("{n}/{l}"),
                    counter: schema[r.counter as usize].name.to_string(),
                    change: r.change,
                    rate: r.rate,
                }
            })
            .collect();
        let traps = self
            .out
            .traps
            .iter()
            .map(|t| {
                let (node, port) = resource(t.slot);
                TrapMsg {
                    agent: me.to_string(),
                    epoch: self.out.epoch,
                    ts_ns: self.out.ts_ns,
                    node,
                    port,
                    counter: schema[t.counter as usize].name.to_string(),
                    increase: t.increase,
                    at_least: t.at_least,
                    threshold: t.threshold,
                }
            })
            .collect();
        Ok(Epoch {
            hist: self.out.hist.clone(),
            entries,
            traps,
            epoch: self.out.epoch,
            ts_ns: self.out.ts_ns,
            read: self.out.ports_read,
            missing: self.out.ports_missing,
            ports: ports.len() as u32,
        })
    }
}
