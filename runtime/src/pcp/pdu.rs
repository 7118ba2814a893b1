//! PCP's PDUs as PCP 6.0.3 lays them out (libpcp `p_*.c`): the requests a client (or pmcd,
//! toward a PMDA) sends, decoded with every length checked, and the replies a server sends,
//! encoded byte for byte as libpcp's decoders expect them (exact lengths, value blocks packed
//! right after the value lists).
//!
//! Owns only the byte layouts; what to answer is `serve.rs`'s.

use super::wire::{HEADER, IN_NULL, PduError, Reader, Writer, pad4, types as t};

/// A request, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// `CREDS`: the client's credentials (the first PDU of every connection).
    Creds(Vec<u32>),
    /// `PMNS_NAMES`: names to look up (`pmLookupName`).
    Names(Vec<String>),
    /// `PMNS_IDS`: PMIDs to name (`pmNameAll`; one id).
    Ids(Vec<u32>),
    /// `PMNS_CHILD`: children of a name; `status`: with leaf/non-leaf statuses.
    Child { name: String, status: bool },
    /// `PMNS_TRAVERSE`: every leaf at or below a name.
    Traverse(String),
    /// `DESC_REQ`: one metric's descriptor.
    DescReq(u32),
    /// `DESC_IDS`: many metrics' descriptors (only sent when DESCS is advertised).
    DescIds(Vec<u32>),
    /// `INSTANCE_REQ`: all instances (`inst` = -1, no name), one by name, or one by number.
    InstanceReq {
        indom: u32,
        inst: i32,
        name: Option<String>,
    },
    /// `PROFILE`: which instances later fetches of this context return (no reply).
    Profile(Profile),
    /// `FETCH` (or `HIGHRES_FETCH`: `highres`).
    Fetch {
        ctx: u32,
        ids: Vec<u32>,
        highres: bool,
    },
    /// `TEXT_REQ`: help text of a PMID or an indom.
    TextReq { ident: u32, kind: u32 },
    /// `LABEL_REQ` (only sent when LABELS is advertised).
    LabelReq { ident: u32, kind: u32 },
    /// `RESULT` from a client is `pmStore`; its values are not decoded (stores are refused).
    Store,
    /// `ERROR`: from pmcd to a PMDA, a client went away.
    Error(i32),
}

/// A `PROFILE` PDU: the default state for every indom, and per-indom exceptions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub ctx: u32,
    /// 0: include every instance by default (`PM_PROFILE_INCLUDE`), 1: exclude.
    pub state: u32,
    pub indoms: Vec<IndomProfile>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndomProfile {
    pub indom: u32,
    pub state: u32,
    /// The instances whose state is the inverse of `state`.
    pub instances: Vec<i32>,
}

impl Profile {
    /// libpcp's `__pmInProfile`: whether `inst` of `indom` is to be returned.
    pub fn includes(&self, indom: u32, inst: i32) -> bool {
        match self.indoms.iter().find(|p| p.indom == indom) {
            None => self.state == 0,
            Some(p) => p.instances.contains(&inst) == (p.state != 0),
        }
    }
}

/// Most indoms one `PROFILE` may carry; the PDU size bounds it anyway (16 bytes each).
const PROFILE_ENTRY: usize = 16;

/// Decodes one whole PDU (header included, as read off the wire; its header already checked
/// by [`super::wire::Header::parse`]).
pub fn decode(pdu: &[u8]) -> Result<Request, PduError> {
    if pdu.len() < HEADER {
        return Err(PduError::TooShort(pdu.len() as u32));
    }
    let ty = u32::from_be_bytes([pdu[4], pdu[5], pdu[6], pdu[7]]);
    let mut r = Reader::new(pdu, ty);
    let req = match ty {
        t::CREDS => {
            let n = r.count(4)?;
            let mut creds = Vec::with_capacity(n);
            for _ in 0..n {
                creds.push(r.u32()?);
            }
            Request::Creds(creds)
        }
        t::PMNS_NAMES => decode_names(&mut r)?,
        t::PMNS_IDS | t::DESC_IDS => {
            let _sts = r.i32()?;
            let n = r.count(4)?;
            let mut ids = Vec::with_capacity(n);
            for _ in 0..n {
                ids.push(r.u32()?);
            }
            if ty == t::PMNS_IDS {
                Request::Ids(ids)
            } else {
                Request::DescIds(ids)
            }
        }
        t::PMNS_CHILD | t::PMNS_TRAVERSE => {
            let subtype = r.u32()?;
            let len = r.count(1)?;
            let name = r.name(len)?.to_string();
            if ty == t::PMNS_TRAVERSE {
                Request::Traverse(name)
            } else if subtype > 1 {
                return Err(r.invalid("children subtype is neither 0 nor 1"));
            } else {
                Request::Child {
                    name,
                    status: subtype == 1,
                }
            }
        }
        t::DESC_REQ => Request::DescReq(r.u32()?),
        t::INSTANCE_REQ => {
            let indom = r.u32()?;
            r.skip(8)?;
            let inst = r.i32()?;
            let len = r.count(1)?;
            let name = (len > 0)
                .then(|| r.name(len).map(str::to_string))
                .transpose()?;
            Request::InstanceReq { indom, inst, name }
        }
        t::PROFILE => Request::Profile(decode_profile(&mut r)?),
        t::FETCH | t::HIGHRES_FETCH => {
            let ctx = r.u32()?;
            r.skip(8)?;
            let n = r.count(4)?;
            let mut ids = Vec::with_capacity(n);
            for _ in 0..n {
                ids.push(r.u32()?);
            }
            Request::Fetch {
                ctx,
                ids,
                highres: ty == t::HIGHRES_FETCH,
            }
        }
        t::TEXT_REQ => Request::TextReq {
            ident: r.u32()?,
            kind: r.u32()?,
        },
        t::LABEL_REQ => Request::LabelReq {
            ident: r.u32()?,
            kind: r.u32()?,
        },
        t::RESULT => {
            // Not decoded: a store is refused whatever it holds.
            r.skip(r.remaining())?;
            Request::Store
        }
        t::ERROR => {
            let code = r.i32()?;
            // The extended form carries one more word (the handshake's challenge).
            if r.remaining() == 4 {
                r.u32()?;
            }
            Request::Error(code)
        }
        other => return Err(PduError::Unexpected(other)),
    };
    r.end()?;
    Ok(req)
}

fn decode_names(r: &mut Reader) -> Result<Request, PduError> {
    let _nstrbytes = r.i32()?;
    let numstatus = r.i32()?;
    // Each entry is at least its length word (and status word): the count is bounded by
    // what the PDU holds before anything is allocated.
    let entry = if numstatus > 0 { 8 } else { 4 };
    let n = r.count(entry)?;
    if numstatus != 0 && numstatus as usize != n {
        return Err(r.invalid("numstatus is neither 0 nor numnames"));
    }
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        if numstatus != 0 {
            r.u32()?;
        }
        let len = r.count(1)?;
        names.push(r.name(len)?.to_string());
    }
    Ok(Request::Names(names))
}

fn decode_profile(r: &mut Reader) -> Result<Profile, PduError> {
    let ctx = r.u32()?;
    let state = r.u32()?;
    let n = r.count(4)?;
    r.skip(4)?;
    if n.saturating_mul(PROFILE_ENTRY) > r.remaining() {
        return Err(r.invalid("more indoms than the PDU holds"));
    }
    let mut heads = Vec::with_capacity(n);
    for _ in 0..n {
        let indom = r.u32()?;
        let st = r.u32()?;
        let numinst = r.i32()?;
        r.skip(4)?;
        if numinst < 0 {
            return Err(r.invalid("negative instance count"));
        }
        heads.push((indom, st, numinst as usize));
    }
    let total: usize = heads.iter().map(|h| h.2).fold(0, usize::saturating_add);
    if total.saturating_mul(4) != r.remaining() {
        return Err(r.invalid("instance counts do not match the PDU's length"));
    }
    let mut indoms = Vec::with_capacity(n);
    for (indom, st, k) in heads {
        let mut instances = Vec::with_capacity(k);
        for _ in 0..k {
            instances.push(r.i32()?);
        }
        indoms.push(IndomProfile {
            indom,
            state: st,
            instances,
        });
    }
    Ok(Profile { ctx, state, indoms })
}

/// `ERROR`, 16 bytes.
pub fn error(code: i32) -> Vec<u8> {
    let mut w = Writer::new(t::ERROR, 0);
    w.i32(code);
    w.finish()
}

/// The handshake's extended `ERROR` (20 bytes: that length is what tells a client the server
/// speaks PDU version 2): `code` 0 accepts, `challenge` carries version and feature bits.
pub fn xerror(code: i32, challenge: u32) -> Vec<u8> {
    let mut w = Writer::new(t::ERROR, 0);
    w.i32(code).u32(challenge);
    w.finish()
}

/// `CREDS` with one credential (a PMDA's first PDU).
pub fn creds(from: u32, cred: u32) -> Vec<u8> {
    let mut w = Writer::new(t::CREDS, from);
    w.u32(1).u32(cred);
    w.finish()
}

/// `PMNS_IDS`: `sts` is the count of ids found (misses are `PM_ID_NULL`).
pub fn ids(sts: i32, ids: &[u32]) -> Vec<u8> {
    let mut w = Writer::new(t::PMNS_IDS, 0);
    w.i32(sts).u32(ids.len() as u32);
    for id in ids {
        w.u32(*id);
    }
    w.finish()
}

/// `PMNS_NAMES`; `leaf` (one per name) adds statuses (0 leaf, 1 non-leaf).
pub fn names(names: &[impl AsRef<str>], leaf: Option<&[bool]>) -> Vec<u8> {
    let mut w = Writer::new(t::PMNS_NAMES, 0);
    let nstrbytes: usize = names.iter().map(|n| n.as_ref().len() + 1).sum();
    w.u32(nstrbytes as u32)
        .u32(if leaf.is_some() {
            names.len() as u32
        } else {
            0
        })
        .u32(names.len() as u32);
    for (i, n) in names.iter().enumerate() {
        if let Some(l) = leaf {
            w.u32(if l.get(i).copied().unwrap_or(true) {
                0
            } else {
                1
            });
        }
        let n = n.as_ref().as_bytes();
        w.u32(n.len() as u32).padded(n);
    }
    w.finish()
}

/// A metric's descriptor (`pmDesc`) as PCP's wire carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    pub pmid: u32,
    /// `PM_TYPE_*`.
    pub ty: u32,
    /// `PM_INDOM_NULL` for singular metrics.
    pub indom: u32,
    /// `PM_SEM_*`.
    pub sem: u32,
    /// `pmUnits` packed (see `units.rs`).
    pub units: u32,
}

/// `DESC`, exactly 32 bytes.
pub fn desc(d: &Desc) -> Vec<u8> {
    let mut w = Writer::new(t::DESC, 0);
    w.u32(d.pmid).u32(d.ty).u32(d.indom).u32(d.sem).u32(d.units);
    w.finish()
}

/// `INSTANCE`: (instance number or `PM_IN_NULL`, name or none) per instance.
pub fn instance(indom: u32, items: &[(i32, Option<&str>)]) -> Vec<u8> {
    let mut w = Writer::new(t::INSTANCE, 0);
    w.u32(indom).u32(items.len() as u32);
    for (inst, name) in items {
        w.i32(*inst);
        match name {
            Some(n) => {
                w.u32(n.len() as u32).padded(n.as_bytes());
            }
            None => {
                w.u32(0);
            }
        }
    }
    w.finish()
}

/// `TEXT`.
pub fn text(ident: u32, text: &str) -> Vec<u8> {
    let mut w = Writer::new(t::TEXT, 0);
    w.u32(ident).u32(text.len() as u32).padded(text.as_bytes());
    w.finish()
}

/// One value on the wire, in the metric's type.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    Float(f32),
    Double(f64),
    String(String),
}

impl Value {
    /// `PM_TYPE_*`.
    pub fn type_code(&self) -> u32 {
        match self {
            Value::I32(_) => 0,
            Value::U32(_) => 1,
            Value::I64(_) => 2,
            Value::U64(_) => 3,
            Value::Float(_) => 4,
            Value::Double(_) => 5,
            Value::String(_) => 6,
        }
    }

    /// 32-bit integers travel in the value list itself (`PM_VAL_INSITU`); the rest in a
    /// value block, as libpcp's `__pmStuffValue` puts them.
    fn insitu(&self) -> Option<u32> {
        match self {
            Value::I32(v) => Some(*v as u32),
            Value::U32(v) => Some(*v),
            _ => None,
        }
    }

    /// The value block's size: its header word, the payload, padding to a word.
    fn block_len(&self) -> usize {
        4 + match self {
            Value::String(s) => pad4(s.len() + 1),
            Value::Float(_) | Value::I32(_) | Value::U32(_) => 4,
            Value::I64(_) | Value::U64(_) | Value::Double(_) => 8,
        }
    }

    fn write_block(&self, w: &mut Writer) {
        let (vlen, payload): (usize, Option<u64>) = match self {
            Value::I64(v) => (12, Some(*v as u64)),
            Value::U64(v) => (12, Some(*v)),
            Value::Double(v) => (12, Some(v.to_bits())),
            Value::Float(v) => {
                w.u32((self.type_code() << 24) | 8).u32(v.to_bits());
                return;
            }
            Value::String(s) => {
                // The length counts the NUL; padding follows.
                w.u32((self.type_code() << 24) | (4 + s.len() + 1) as u32);
                let mut b = Vec::with_capacity(s.len() + 1);
                b.extend_from_slice(s.as_bytes());
                b.push(0);
                w.padded(&b);
                return;
            }
            Value::I32(_) | Value::U32(_) => return,
        };
        w.u32((self.type_code() << 24) | vlen as u32);
        if let Some(p) = payload {
            w.u64(p);
        }
    }
}

/// One metric of a `RESULT`: its values per instance, or a PCP error code.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSet {
    pub pmid: u32,
    pub values: Result<Vec<(i32, Value)>, i32>,
}

/// `PM_VAL_INSITU` and `PM_VAL_DPTR`.
const VAL_INSITU: u32 = 0;
const VAL_DPTR: u32 = 1;

/// `RESULT` (timestamp in seconds and microseconds): the value lists, then every value block
/// back to back, each list pointing at its blocks by word offset from the PDU's start.
pub fn result(sec: i32, usec: i32, sets: &[ValueSet]) -> Vec<u8> {
    let mut w = Writer::new(t::RESULT, 0);
    w.i32(sec).i32(usec).u32(sets.len() as u32);
    value_sets(w, sets)
}

/// `HIGHRES_RESULT` (for HIGHRES_FETCH): the count first, then 64-bit seconds and
/// nanoseconds; the value lists as in [`result`].
pub fn highres_result(sec: i64, nsec: i64, sets: &[ValueSet]) -> Vec<u8> {
    let mut w = Writer::new(t::HIGHRES_RESULT, 0);
    w.u32(sets.len() as u32).u64(sec as u64).u64(nsec as u64);
    value_sets(w, sets)
}

fn value_sets(mut w: Writer, sets: &[ValueSet]) -> Vec<u8> {
    let mut lists = w.len();
    for s in sets {
        lists += 8;
        if let Ok(v) = &s.values
            && !v.is_empty()
        {
            lists += 4 + 8 * v.len();
        }
    }
    let mut block_at = lists;
    for s in sets {
        w.u32(s.pmid);
        match &s.values {
            Err(code) => {
                w.i32(*code);
            }
            Ok(v) => {
                w.u32(v.len() as u32);
                if v.is_empty() {
                    continue;
                }
                let insitu = v.iter().all(|(_, x)| x.insitu().is_some());
                w.u32(if insitu { VAL_INSITU } else { VAL_DPTR });
                for (inst, x) in v {
                    w.i32(*inst);
                    match x.insitu() {
                        Some(word) if insitu => {
                            w.u32(word);
                        }
                        _ => {
                            w.u32((block_at / 4) as u32);
                            block_at += x.block_len();
                        }
                    }
                }
            }
        }
    }
    debug_assert_eq!(w.len(), lists);
    for s in sets {
        if let Ok(v) = &s.values
            && !v.iter().all(|(_, x)| x.insitu().is_some())
        {
            for (_, x) in v {
                if x.insitu().is_some() {
                    // A 32-bit value in a list of blocks: a block of its own.
                    w.u32((x.type_code() << 24) | 8);
                    w.u32(x.insitu().unwrap_or_default());
                } else {
                    x.write_block(&mut w);
                }
            }
        }
    }
    w.finish()
}

/// `DESCS` (for DESC_IDS): 20-byte descriptors back to back; a failed one has `PM_ID_NULL`.
pub fn descs(descs: &[Desc]) -> Vec<u8> {
    let mut w = Writer::new(t::DESCS, 0);
    w.u32(descs.len() as u32);
    for d in descs {
        w.u32(d.pmid).u32(d.ty).u32(d.indom).u32(d.sem).u32(d.units);
    }
    w.finish()
}

/// One label set of a `LABEL` reply: an instance (`PM_IN_NULL` when none) and its labels as
/// (name, JSON value, flags).
pub struct LabelSet<'a> {
    pub inst: i32,
    pub labels: Vec<(&'a str, String, u8)>,
}

/// Bytes of one `pmLabel`: name offset (u16), name length (u8), flags (u8), value offset
/// (u16), value length (u16), padding.
const LABEL: usize = 8;
/// Bytes of a label set's head: inst, nlabels, JSON offset, JSON length.
const LABEL_SET: usize = 16;

/// `LABEL`: the request's `ident` and `kind` echoed (clients check both), the sets' heads and
/// label indices, then each set's JSON, its offset counted from the PDU's start. Not padded:
/// its length is exactly what it holds, as libpcp sends it.
pub fn label(ident: u32, kind: u32, sets: &[LabelSet]) -> Vec<u8> {
    let mut w = Writer::new(t::LABEL, 0);
    w.u32(ident).u32(kind).u32(0).u32(sets.len() as u32);
    let jsons: Vec<(String, Vec<[u16; 4]>)> = sets
        .iter()
        .map(|s| {
            let mut json = String::from("{");
            let mut idx = Vec::new();
            for (i, (name, value, flags)) in s.labels.iter().enumerate() {
                if i > 0 {
                    json.push(',');
                }
                json.push('"');
                let name_at = json.len();
                json.push_str(name);
                json.push_str("\":");
                let value_at = json.len();
                json.push_str(value);
                idx.push([
                    name_at as u16,
                    (name.len() as u16) << 8 | u16::from(*flags),
                    value_at as u16,
                    value.len() as u16,
                ]);
            }
            json.push('}');
            (json, idx)
        })
        .collect();
    let heads: usize = jsons.iter().map(|(_, i)| LABEL_SET + LABEL * i.len()).sum();
    let mut json_at = w.len() + heads;
    for (s, (json, idx)) in sets.iter().zip(&jsons) {
        w.i32(s.inst)
            .u32(idx.len() as u32)
            .u32(json_at as u32)
            .u32(json.len() as u32);
        for [name, len_flags, value, value_len] in idx {
            w.u32(u32::from(*name) << 16 | u32::from(*len_flags))
                .u32(u32::from(*value) << 16 | u32::from(*value_len));
        }
        json_at += json.len();
    }
    let mut w = w.raw();
    for (json, _) in &jsons {
        w.extend_from_slice(json.as_bytes());
    }
    let len = w.len() as u32;
    w[..4].copy_from_slice(&len.to_be_bytes());
    w
}

/// The instance a singular metric's value carries.
pub const SINGULAR: i32 = IN_NULL;
