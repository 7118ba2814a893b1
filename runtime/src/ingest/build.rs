//! What the receivers' decoders share: the per-request bounds, the error that says which
//! answer a refused body gets, and [`Build`], which turns decoded fields into [`Sample`]s
//! within those bounds. Nothing is sent from here: a decoder returns every sample of a body
//! or an error, so a refused body leaves nothing half-stored.

use std::collections::HashMap;
use std::sync::Arc;

use super::pb::DecodeError;
use crate::sample::{Metadata, Name, NameBudget, Pair, Sample};

/// Longest label (attribute) name or value a receiver takes. Every sample carries its
/// metadata into the pipeline and the forwarding queues, so a megabyte label costs a
/// megabyte per sample downstream; Mimir's default limits are 1,024 (names) and 2,048
/// (values) bytes; OpenTelemetry attribute values (command lines, URLs) can be longer.
pub const MAX_LABEL_BYTES: usize = 16 << 10;

/// Labels (attributes, resource ones included) one series or data point may carry. Mimir's
/// default is 30; Kubernetes resources bring 20 or more of their own.
pub const MAX_LABELS: usize = 256;

/// Why a body was refused, by the answer it gets.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// The body is not what it claims to be (400).
    #[error("{0}")]
    Malformed(#[from] DecodeError),
    /// The body asks for more than one request may (413).
    #[error("{0}")]
    TooLarge(String),
    /// A content type or encoding the route does not take (415).
    #[error("{0}")]
    Unsupported(String),
}

/// An error inside a repeated element (a series, a data point): a malformed one is told where
/// on its way out ([`Nested::within`]), the request's bounds are not (they say nothing of
/// where).
pub enum Nested {
    Malformed(DecodeError),
    Refused(ReceiveError),
}

impl From<DecodeError> for Nested {
    fn from(e: DecodeError) -> Self {
        Nested::Malformed(e)
    }
}

impl From<ReceiveError> for Nested {
    fn from(e: ReceiveError) -> Self {
        match e {
            ReceiveError::Malformed(d) => Nested::Malformed(d),
            other => Nested::Refused(other),
        }
    }
}

impl Nested {
    /// The request's error; a malformed element's path gains `field[i]` in front.
    pub fn at(self, field: &str, i: Option<usize>) -> ReceiveError {
        match self {
            Nested::Malformed(d) => ReceiveError::Malformed(d.at(field, i)),
            Nested::Refused(r) => r,
        }
    }

    /// A malformed element's path, one level further out.
    pub fn within(self, field: &str, i: Option<usize>) -> Nested {
        match self {
            Nested::Malformed(d) => Nested::Malformed(d.at(field, i)),
            other => other,
        }
    }
}

/// Per-request bounds (issue 10's table): `max_samples` after histograms expand,
/// `max_body` for the body once decompressed.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_samples: usize,
    pub max_body: usize,
}

/// The samples of one body, built within [`Limits`] and a [`NameBudget`]. Strings of the
/// body that become metadata are shared: a label value repeated across series (`job`, a
/// host name) is one allocation per request.
pub struct Build<'a> {
    pub samples: Vec<Sample>,
    max: usize,
    budget: NameBudget,
    strings: HashMap<&'a str, Arc<str>, foldhash::fast::FixedState>,
    /// Metadata sets by their pairs' addresses (their strings come from [`Build::arc`], so
    /// equal text is one address): the series of one host share one set, which the store
    /// sink then resolves to a level once, not once per sample.
    sets: HashMap<Box<[(usize, usize)]>, Metadata, foldhash::fast::FixedState>,
    key: Vec<(usize, usize)>,
}

impl<'a> Build<'a> {
    /// For a body of `raw` bytes: samples are reserved for at most one per `per_sample`
    /// bytes of it (the least an encoding spends on one), so that a request's samples are
    /// not copied as they grow; pages reserved and not written cost no memory.
    pub fn new(limits: Limits, raw: usize, per_sample: usize) -> Build<'a> {
        Build {
            samples: Vec::with_capacity((raw / per_sample.max(1)).min(limits.max_samples)),
            max: limits.max_samples,
            budget: NameBudget::per_request(),
            strings: HashMap::default(),
            sets: HashMap::default(),
            key: Vec::new(),
        }
    }

    /// Adds a sample, refusing the request past `max_samples`.
    #[inline]
    pub fn push(&mut self, s: Sample) -> Result<(), ReceiveError> {
        if self.samples.len() >= self.max {
            return Err(self.too_many());
        }
        self.samples.push(s);
        Ok(())
    }

    /// Room for `n` more samples, or the refusal.
    pub fn room(&self, n: usize) -> Result<(), ReceiveError> {
        if self.samples.len().saturating_add(n) > self.max {
            return Err(self.too_many());
        }
        Ok(())
    }

    fn too_many(&self) -> ReceiveError {
        ReceiveError::TooLarge(format!(
            "the request carries more than {} samples (the bound is [api] \
             max-receive-samples); send fewer per request",
            self.max
        ))
    }

    /// A metric name or unit, interned within the request's budget of new names.
    pub fn name(&mut self, field: &'static str, text: &str) -> Result<Name, DecodeError> {
        self.budget
            .name(field, text)
            .map_err(|e| DecodeError::new(e.to_string()))
    }

    /// `text` as a shared string, one allocation per distinct text in the request.
    #[inline]
    pub fn arc(&mut self, text: &'a str) -> Arc<str> {
        if let Some(a) = self.strings.get(text) {
            return a.clone();
        }
        let a: Arc<str> = text.into();
        self.strings.insert(text, a.clone());
        a
    }

    /// `pairs` as a metadata set, shared with every earlier set of the request with the same
    /// pairs (strings made by [`Build::arc`]) in the same order.
    pub fn metadata(&mut self, pairs: Vec<Pair>) -> Metadata {
        if pairs.is_empty() {
            return Metadata::default();
        }
        let addr = |s: &Arc<str>| s.as_ptr() as usize;
        self.key.clear();
        self.key
            .extend(pairs.iter().map(|(k, v)| (addr(k), addr(v))));
        if let Some(m) = self.sets.get(self.key.as_slice()) {
            return m.clone();
        }
        let m = Metadata::new(pairs);
        self.sets.insert(self.key.as_slice().into(), m.clone());
        m
    }

    /// An owned string (not from the body) as a shared string.
    pub fn owned(&mut self, text: String) -> Arc<str> {
        text.into()
    }
}

/// Refuses a label name or value past [`MAX_LABEL_BYTES`].
#[inline]
pub fn check_label(text: &str, what: &str) -> Result<(), DecodeError> {
    if text.len() > MAX_LABEL_BYTES {
        return Err(DecodeError::new(format!(
            "{what} of {} bytes; at most {MAX_LABEL_BYTES} are taken",
            text.len()
        )));
    }
    Ok(())
}
