//! The `exporter` world: WIT bindings and the adapter from the `encode` export to an
//! [`Exporter`]. The host owns the queue, retries, acknowledgements and TLS; an exporter owns
//! only the bytes of the requests that carry a batch.

use crate::batch::{samples, with_input};
use crate::{Input, Params, with_state};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "exporter",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_raw",
        default_bindings_module: "wasmon_guest::exporter::bindings",
        // One `batch` type and one `log` import for every world: the decoder in
        // `crate::batch` serves them all.
        with: {
            "wasmon:collector/types@0.1.0": crate::transformer::bindings::wasmon::collector::types,
            "wasmon:collector/host@0.1.0": crate::transformer::bindings::wasmon::collector::host,
        },
    });
}

use crate::transformer::bindings::wasmon::collector::types as wit;
use bindings::exports::wasmon::collector::encode::{Guest, Request as WitRequest};

/// One request for the host to send (the WIT `request`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    /// Appended to the sink's URL (or NATS subject); empty: the URL itself.
    pub suffix: String,
    /// The HTTP `Content-Type`.
    pub content_type: String,
    /// More headers (`Content-Encoding`, an API key). The host refuses the ones it owns
    /// (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`, and `Authorization`
    /// where the sink has a token).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// An exporter: implement this and export it with [`crate::export_exporter!`].
pub trait Exporter: Sized + 'static {
    /// Builds the exporter from the sink's `params`; an error names the bad parameter.
    fn configure(params: &Params) -> Result<Self, String>;

    /// Pushes the requests that carry `input` onto `out`, to be sent in order. `Err`: the
    /// batch can never be encoded (it goes to the dead-letter file with the message). A
    /// panic is not that: the host retries the batch on a fresh instance.
    fn encode(&mut self, input: impl Input, out: &mut Vec<Request>) -> Result<(), String>;
}

/// Implements the WIT `encode` export for `T`; used through [`crate::export_exporter!`].
#[doc(hidden)]
pub struct Export<T>(std::marker::PhantomData<T>);

impl<T: Exporter> Guest for Export<T> {
    fn configure(params: String) -> Result<(), String> {
        crate::set_state(T::configure(&crate::parse_params(&params)?)?);
        Ok(())
    }

    fn encode(mut input: wit::Batch) -> Result<Vec<WitRequest>, String> {
        let mut out = Vec::new();
        let done = with_input(&mut input, |t, b, m| {
            with_state(|ex: &mut T| ex.encode(samples(t, b, m), &mut out))
        });
        match done {
            Some(result) => result?,
            // The host always configures first. An `Err` would dead-letter the batch; a trap
            // leaves it queued for a fresh (configured) instance.
            None => panic!("encode called before configure"),
        }
        Ok(out
            .into_iter()
            .map(|r| WitRequest {
                suffix: r.suffix,
                content_type: r.content_type,
                headers: r.headers,
                body: r.body,
            })
            .collect())
    }
}
