//! A transformer that configures fine and traps on every batch (test-only): the fleet's
//! rollback tests publish it as the broken next version of a working guest.

use wasmon_guest::{Input, Params, Sample, Transformer};

pub struct TrapAlways;

impl Transformer for TrapAlways {
    fn configure(_params: &Params) -> Result<Self, String> {
        Ok(TrapAlways)
    }

    fn handle(&mut self, _input: impl Input, _out: &mut Vec<Sample>) {
        panic!("trap_always: every batch traps");
    }

    fn flush(&mut self, _out: &mut Vec<Sample>) {}
}

wasmon_guest::export_transformer!(TrapAlways);
