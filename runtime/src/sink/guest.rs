//! Sending a guest sink's record: its samples go through the exporter when the record is
//! sent (not when it is queued), and the requests it returns go out in order. The record
//! leaves the queue only when every request was acknowledged; a failed exporter call leaves it
//! queued for a fresh instance, and only a batch that fails `max-encode-failures` times (or
//! that the exporter says it can never encode) is dead-lettered, with the samples themselves.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use super::exporter::{Encoding, Exporter, Request};
use super::queue::Record;
use super::raw;
use super::transport::{Outcome, Transport};

/// What a guest sink's sender remembers between attempts.
#[derive(Default)]
pub(super) struct GuestSend {
    /// The record being sent: its seq, its requests and how many were delivered. A retry
    /// resumes at the first undelivered request without calling the exporter again, so a
    /// receiver sees a request twice only when an acknowledgement was lost or the daemon
    /// restarted.
    encoded: Option<Encoded>,
    /// Failed exporter calls per queued record. Kept in memory: after a restart a batch gets
    /// its full count of attempts again.
    failures: HashMap<u64, u32>,
}

struct Encoded {
    seq: u64,
    /// The exporter that made them: a reload that swaps it has the record encoded again by
    /// the new one (the operator replaced the exporter because its encoding was wrong).
    exporter: String,
    requests: Vec<Request>,
    delivered: usize,
}

impl GuestSend {
    /// One attempt at `record`: encode it if that is not done yet, then send what is left.
    pub(super) async fn send(
        &mut self,
        encode_failures: &AtomicU64,
        exporter: &Arc<dyn Exporter>,
        transport: &Transport,
        record: &Record,
        id: &str,
        max_failures: u32,
    ) -> Outcome {
        let identity = exporter.identity();
        if self
            .encoded
            .as_ref()
            .is_none_or(|e| e.seq != record.seq || e.exporter != identity)
        {
            self.encoded = None;
            // Records go oldest first: counts of older ones (dropped by the queue's budget
            // while they were failing) are stale.
            self.failures.retain(|&seq, _| seq >= record.seq);
            let samples = match raw::decode(&record.payload) {
                Ok(s) => s,
                Err(e) => {
                    return Outcome::Refused(format!("the queued record cannot be read: {e}"));
                }
            };
            let e = exporter.clone();
            // The exporter runs a guest under its deadline: off the sender's task.
            let encoded = tokio::task::spawn_blocking(move || e.encode(&samples))
                .await
                .unwrap_or_else(|e| Encoding::Failed(format!("the call panicked: {e}")));
            match encoded {
                Encoding::Requests(requests) => {
                    self.failures.remove(&record.seq);
                    self.encoded = Some(Encoded {
                        seq: record.seq,
                        exporter: identity,
                        requests,
                        delivered: 0,
                    });
                }
                Encoding::Refused(why) => {
                    self.failures.remove(&record.seq);
                    return Outcome::Refused(format!(
                        "the exporter cannot encode this batch: {why}"
                    ));
                }
                Encoding::Quarantined(d) => return Outcome::Wait(d),
                Encoding::Failed(why) => {
                    encode_failures.fetch_add(1, Relaxed);
                    let n = self.failures.entry(record.seq).or_insert(0);
                    *n += 1;
                    let n = *n;
                    if n >= max_failures {
                        self.failures.remove(&record.seq);
                        return Outcome::Refused(format!(
                            "the exporter failed on this batch {n} times (max-encode-failures); the last time: {why}"
                        ));
                    }
                    return Outcome::Retry(format!(
                        "the exporter failed ({n} of {max_failures} for this batch; retried on a fresh instance): {why}"
                    ));
                }
            }
        }
        let e = self.encoded.as_mut().expect("encoded above");
        while e.delivered < e.requests.len() {
            let k = e.delivered;
            match transport
                .send_request(&e.requests[k], &format!("{id}.{k}"))
                .await
            {
                Outcome::Delivered => e.delivered += 1,
                other => {
                    if matches!(other, Outcome::Refused(_)) {
                        self.encoded = None;
                    }
                    return other;
                }
            }
        }
        self.encoded = None;
        Outcome::Delivered
    }
}
