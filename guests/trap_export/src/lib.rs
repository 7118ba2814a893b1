//! An exporter that configures fine and traps on every `encode` call (test-only): the fleet's
//! exporter test publishes it as the broken next version of a working exporter, which must be
//! quarantined and rolled back with no batch lost.

use wasmon_guest::exporter::{Exporter, Request};
use wasmon_guest::{Input, Params};

pub struct TrapExport;

impl Exporter for TrapExport {
    fn configure(_params: &Params) -> Result<Self, String> {
        Ok(TrapExport)
    }

    fn encode(&mut self, _input: impl Input, _out: &mut Vec<Request>) -> Result<(), String> {
        panic!("trap_export: every call traps");
    }
}

wasmon_guest::export_exporter!(TrapExport);
