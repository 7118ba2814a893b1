//! A hostile exporter (test-only): it configures fine and then fails every `encode` call in
//! the way its `mode` parameter says: `trap` (the default: a panic), `spin` (a loop that only
//! the host's deadline ends) or `flood` (more requests than the host takes). The fleet's test
//! publishes it as the broken next version of a working exporter; the sandbox test checks
//! that each costs the daemon that call and nothing else.

use wasmon_guest::exporter::{Exporter, Request};
use wasmon_guest::{Input, Params};

pub enum TrapExport {
    Trap,
    Spin,
    Flood,
}

impl Exporter for TrapExport {
    fn configure(params: &Params) -> Result<Self, String> {
        match params
            .get("mode")
            .and_then(|m| m.as_str())
            .unwrap_or("trap")
        {
            "trap" => Ok(TrapExport::Trap),
            "spin" => Ok(TrapExport::Spin),
            "flood" => Ok(TrapExport::Flood),
            other => Err(format!("`mode`: {other:?} is not trap, spin or flood")),
        }
    }

    fn encode(&mut self, _input: impl Input, out: &mut Vec<Request>) -> Result<(), String> {
        match self {
            TrapExport::Trap => panic!("trap_export: every call traps"),
            TrapExport::Spin => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            TrapExport::Flood => {
                out.extend((0..100_000).map(|_| Request::default()));
                Ok(())
            }
        }
    }
}

wasmon_guest::export_exporter!(TrapExport);
