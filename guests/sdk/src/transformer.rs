//! The `transformer` world: WIT bindings (whose `types` every world shares), and the adapter
//! from the `transform` export to a [`Transformer`]; batches are decoded and encoded by
//! [`crate::batch`].

use crate::batch::{encode, samples, with_input};
use crate::{Transformer, with_state};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "transformer",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_raw",
        default_bindings_module: "wasmon_guest::transformer::bindings",
        additional_derives: [PartialEq],
    });
}

use bindings::exports::wasmon::collector::transform::Guest;
use bindings::wasmon::collector::types as wit;

/// Implements the WIT `transform` export for `T`; used through [`crate::export_transformer!`].
#[doc(hidden)]
pub struct Export<T>(std::marker::PhantomData<T>);

impl<T: Transformer> Guest for Export<T> {
    fn configure(params: String) -> Result<(), String> {
        crate::set_state(T::configure(&crate::parse_params(&params)?)?);
        Ok(())
    }

    fn handle(mut input: wit::Batch) -> wit::Batch {
        let mut out = Vec::new();
        let configured = with_input(&mut input, |t, b, m| {
            with_state(|tr: &mut T| tr.handle(samples(t, b, m), &mut out))
        });
        if configured.is_none() {
            // Not configured: the host always configures first, so this is a host bug; pass
            // nothing on rather than trap.
            crate::log::log(crate::log::Level::Error, "handle called before configure");
        }
        encode(out)
    }

    fn flush() -> wit::Batch {
        let mut out = Vec::new();
        with_state(|t: &mut T| t.flush(&mut out));
        encode(out)
    }
}
