//! An exporter that encodes as `otlp` does but traps on every third `encode` call of an
//! instance (test-only): the guest sink must retry the batch on a fresh instance, whose
//! count starts again at 0, so that every batch arrives once and none is lost.

// The `otlp` encoding itself, compiled in rather than linked: the `otlp` crate also exports
// its component interface, which would then be exported twice.
#[path = "../../otlp/src/encode.rs"]
#[allow(dead_code)] // `encode_request` is the `otlp` crate's API, unused here
mod encode;

use wasmon_guest::exporter::{Exporter, Request};
use wasmon_guest::{Input, Params};

pub struct TrapThird {
    cfg: encode::Config,
    /// `encode` calls on this instance so far.
    calls: u64,
}

impl Exporter for TrapThird {
    fn configure(params: &Params) -> Result<Self, String> {
        Ok(TrapThird {
            cfg: encode::Config::from_params(params)?,
            calls: 0,
        })
    }

    fn encode(&mut self, input: impl Input, out: &mut Vec<Request>) -> Result<(), String> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            panic!("trap_third: call {} of this instance traps", self.calls);
        }
        out.extend(encode::request(input, &self.cfg));
        Ok(())
    }
}

wasmon_guest::export_exporter!(TrapThird);
