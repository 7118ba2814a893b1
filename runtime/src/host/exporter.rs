//! The exporter world on the host side: a batch of [`Sample`]s through the guest's `encode`,
//! and the requests it returns, checked before anything is sent (counts, sizes, header syntax).
//! What the requests go to, and what happens when a call fails, is the caller's (a guest sink
//! keeps its batch queued and retries it on a fresh instance).

use super::bindings::exporter::{Exporter, ExporterPre};
use super::guest::{CallError, Instance, Live, in_guest};
use super::limits::{MAX_EXPORT_BYTES, MAX_EXPORT_REQUESTS};
use super::transformer::encode;
use crate::sample::Sample;

pub use super::bindings::exporter::exports::wasmon::collector::encode::Request;

/// Marker for the `exporter` world.
pub struct ExporterWorld;

world!(
    ExporterWorld,
    ExporterPre,
    Exporter,
    "exporter",
    exporter_linker,
    wasmon_collector_encode
);

/// A running exporter guest.
pub type ExporterInstance = Instance<ExporterWorld>;

impl Instance<ExporterWorld> {
    /// The requests that carry `input`. `Ok(Err(why))`: the guest says this batch can never
    /// be encoded. `Err`: the call failed (trap, deadline, memory, malformed requests) and
    /// its instance was thrown away; the batch may be tried again.
    pub fn encode(&mut self, input: &[Sample]) -> Result<Result<Vec<Request>, String>, CallError> {
        self.call(
            async |live: &mut Live<ExporterWorld>| {
                let batch = encode(input, &mut live.store.data_mut().strings);
                let iface = live.bindings.wasmon_collector_encode();
                in_guest(&mut live.store, async |s| {
                    iface.call_encode(s, &batch).await
                })
                .await
            },
            |r| match r {
                Ok(requests) => check(requests),
                Err(_) => Ok(()),
            },
        )
    }
}

/// Refuses requests no transport should be handed: too many or too large, a header that is
/// not a header, a suffix with whitespace or control characters (it becomes part of a URL or
/// a subject).
fn check(requests: &[Request]) -> Result<(), String> {
    if requests.len() > MAX_EXPORT_REQUESTS {
        return Err(format!(
            "{} requests returned, the cap is {MAX_EXPORT_REQUESTS}",
            requests.len()
        ));
    }
    let bytes: usize = requests.iter().map(|r| r.body.len()).sum();
    if bytes > MAX_EXPORT_BYTES {
        return Err(format!(
            "{bytes} bytes of request bodies returned, the cap is {MAX_EXPORT_BYTES}"
        ));
    }
    for (i, r) in requests.iter().enumerate() {
        if let Some(c) = r
            .suffix
            .chars()
            .find(|c| c.is_whitespace() || c.is_control())
        {
            return Err(format!("request {i}: suffix {:?} holds {c:?}", r.suffix));
        }
        if !r.content_type.is_empty() && !header_value(&r.content_type) {
            return Err(format!(
                "request {i}: content type {:?} is not a header value",
                r.content_type
            ));
        }
        for (k, v) in &r.headers {
            if k.is_empty() || !k.bytes().all(token_byte) {
                return Err(format!("request {i}: {k:?} is not a header name"));
            }
            if !header_value(v) {
                return Err(format!(
                    "request {i}: header {k}: {v:?} is not a header value"
                ));
            }
        }
    }
    Ok(())
}

/// RFC 9110's `tchar`.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Visible characters and spaces or tabs between them (no CR, LF or NUL).
fn header_value(v: &str) -> bool {
    v.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(suffix: &str, headers: &[(&str, &str)]) -> Request {
        Request {
            suffix: suffix.into(),
            content_type: "application/x-protobuf".into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: vec![1, 2, 3],
        }
    }

    #[test]
    fn requests_are_checked_before_anything_is_sent() {
        assert_eq!(
            check(&[req("/v1/metrics", &[("x-api-key", "k 1")])]),
            Ok(())
        );
        let e = check(&[req("a b", &[])]).unwrap_err();
        assert_eq!(e, "request 0: suffix \"a b\" holds ' '");
        let e = check(&[req("", &[]), req("", &[("bad name", "v")])]).unwrap_err();
        assert_eq!(e, "request 1: \"bad name\" is not a header name");
        let e = check(&[req("", &[("x-a", "v\r\nx-b: 1")])]).unwrap_err();
        assert!(e.contains("is not a header value"), "{e}");
        let many: Vec<Request> = (0..=MAX_EXPORT_REQUESTS).map(|_| req("", &[])).collect();
        assert!(check(&many).unwrap_err().contains("the cap is 1024"));
    }
}
