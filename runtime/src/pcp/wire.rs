//! PCP's framing and primitives: the 12-byte PDU header, PDU type and error codes, a
//! length-checked reader (every read is checked against the PDU's own length, so a decoder
//! can neither panic nor read past the PDU) and a writer that pads strings as libpcp does.
//! Every field on PCP's wire is a 32-bit big-endian word unless stated otherwise.
//!
//! Owns only these primitives; the PDUs themselves are `pdu.rs`'s.

/// Bytes of the header every PDU starts with: `len`, `type`, `from`.
pub const HEADER: usize = 12;
/// Largest PDU a client may send: pmcd's own ceiling for PDUs from clients (`PDU_CHUNK * 64`,
/// libpcp pdu.c), so no client that works with pmcd is refused, and a 1 GB length field costs
/// nothing but the connection.
pub const MAX_CLIENT_PDU: usize = 64 * 1024;

/// PDU types (`PDU_*`, include/pcp/libpcp.h).
pub mod types {
    pub const ERROR: u32 = 0x7000;
    pub const RESULT: u32 = 0x7001;
    pub const PROFILE: u32 = 0x7002;
    pub const FETCH: u32 = 0x7003;
    pub const DESC_REQ: u32 = 0x7004;
    pub const DESC: u32 = 0x7005;
    pub const INSTANCE_REQ: u32 = 0x7006;
    pub const INSTANCE: u32 = 0x7007;
    pub const TEXT_REQ: u32 = 0x7008;
    pub const TEXT: u32 = 0x7009;
    pub const CREDS: u32 = 0x700c;
    pub const PMNS_IDS: u32 = 0x700d;
    pub const PMNS_NAMES: u32 = 0x700e;
    pub const PMNS_CHILD: u32 = 0x700f;
    pub const PMNS_TRAVERSE: u32 = 0x7010;
    pub const ATTR: u32 = 0x7011;
    pub const LABEL_REQ: u32 = 0x7012;
    pub const LABEL: u32 = 0x7013;
    pub const HIGHRES_FETCH: u32 = 0x7014;
    pub const HIGHRES_RESULT: u32 = 0x7015;
    pub const DESC_IDS: u32 = 0x7016;
    pub const DESCS: u32 = 0x7017;
}

/// PCP error codes the server answers with (`PM_ERR_*`, pmapi.h), besides the namespace's.
pub mod errors {
    pub const TEXT: i32 = -12349;
    pub const VALUE: i32 = -12351;
    pub const PMID: i32 = -12358;
    pub const INDOM: i32 = -12359;
    pub const INST: i32 = -12360;
    pub const IPC: i32 = -12366;
    pub const NOAGENT: i32 = -12386;
    pub const PERMISSION: i32 = -12387;
    pub const CONNLIMIT: i32 = -12388;
    pub const NOLABELS: i32 = -12410;
    pub const TOOBIG: i32 = -12444;
    pub const TYPE: i32 = -12397;
}

/// What a LABEL_REQ asks for (`PM_LABEL_*`, pmapi.h); the same bits flag each label of a
/// reply with where it comes from.
pub mod labels {
    pub const CONTEXT: u32 = 1 << 0;
    pub const DOMAIN: u32 = 1 << 1;
    pub const INDOM: u32 = 1 << 2;
    pub const CLUSTER: u32 = 1 << 3;
    pub const ITEM: u32 = 1 << 4;
    pub const INSTANCES: u32 = 1 << 5;
}

/// `PM_ID_NULL`, `PM_INDOM_NULL`: the all-ones word.
pub const NULL_ID: u32 = 0xffff_ffff;
/// `PM_IN_NULL`: the instance of a singular metric, and "no instance" in requests.
pub const IN_NULL: i32 = -1;

/// Why a PDU did not decode. Every variant ends the request; the server answers
/// `PM_ERR_IPC` and closes the connection, as pmcd does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PduError {
    #[error("PDU length {0} is below the 12-byte header")]
    TooShort(u32),
    #[error("PDU length {0} is over the {MAX_CLIENT_PDU}-byte limit for clients")]
    TooLong(u32),
    #[error("PDU of type {ty:#x} ends at byte {at}, {need} bytes short")]
    Truncated { ty: u32, at: usize, need: usize },
    #[error("PDU of type {ty:#x} has {extra} bytes past its fields")]
    Trailing { ty: u32, extra: usize },
    #[error("PDU of type {ty:#x}: {what}")]
    Invalid { ty: u32, what: &'static str },
    #[error("PDU type {0:#x} is not one a client sends")]
    Unexpected(u32),
}

/// A PDU's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub ty: u32,
    pub from: u32,
}

impl Header {
    /// Reads and checks the header: `len` covers the header and stays within `max`.
    pub fn parse(bytes: &[u8; HEADER], max: usize) -> Result<Header, PduError> {
        let word =
            |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let h = Header {
            len: word(0),
            ty: word(4),
            from: word(8),
        };
        if (h.len as usize) < HEADER {
            return Err(PduError::TooShort(h.len));
        }
        if h.len as usize > max {
            return Err(PduError::TooLong(h.len));
        }
        Ok(h)
    }

    /// After reading a PDU's header: `Ok(None)` when the stream had ended cleanly before it,
    /// else `buf` holding the checked header (at most `max` bytes in all) and room for the
    /// body to be read into `buf[HEADER..]`.
    pub fn start<E: From<std::io::Error> + From<PduError>>(
        read: std::io::Result<()>,
        head: &[u8; HEADER],
        max: usize,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Header>, E> {
        match read {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let h = Header::parse(head, max)?;
        buf.clear();
        buf.extend_from_slice(head);
        buf.resize(h.len as usize, 0);
        Ok(Some(h))
    }
}

/// Reads a PDU's words, each read checked against the PDU's end.
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    ty: u32,
}

impl<'a> Reader<'a> {
    /// Over a whole PDU (header included); reading starts after the header. The caller has
    /// checked that `pdu` is at least the header long.
    pub fn new(pdu: &'a [u8], ty: u32) -> Reader<'a> {
        Reader {
            buf: pdu,
            at: HEADER.min(pdu.len()),
            ty,
        }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PduError> {
        if self.remaining() < n {
            return Err(PduError::Truncated {
                ty: self.ty,
                at: self.at,
                need: n - self.remaining(),
            });
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    pub fn u32(&mut self) -> Result<u32, PduError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self) -> Result<i32, PduError> {
        Ok(self.u32()? as i32)
    }

    /// A count of items of `item` bytes each still to come: refused when the PDU cannot hold
    /// them, so no decoder allocates for more than the PDU carries.
    pub fn count(&mut self, item: usize) -> Result<usize, PduError> {
        let n = self.i32()?;
        if n < 0 {
            return Err(self.invalid("negative count"));
        }
        let n = n as usize;
        if n.saturating_mul(item) > self.remaining() {
            return Err(PduError::Truncated {
                ty: self.ty,
                at: self.at,
                need: n.saturating_mul(item) - self.remaining(),
            });
        }
        Ok(n)
    }

    /// `len` bytes of a string, then its padding to the next word.
    pub fn padded(&mut self, len: usize) -> Result<&'a [u8], PduError> {
        let s = self.take(len)?;
        self.take(pad4(len) - len)?;
        Ok(s)
    }

    /// A padded name, which must be UTF-8 (PCP names are ASCII).
    pub fn name(&mut self, len: usize) -> Result<&'a str, PduError> {
        let b = self.padded(len)?;
        std::str::from_utf8(b).map_err(|_| self.invalid("a name is not UTF-8"))
    }

    pub fn skip(&mut self, n: usize) -> Result<(), PduError> {
        self.take(n).map(|_| ())
    }

    /// Every byte read: a PDU longer than its fields is refused, as PCP 7's decoders do.
    pub fn end(&self) -> Result<(), PduError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(PduError::Trailing { ty: self.ty, extra }),
        }
    }

    pub fn invalid(&self, what: &'static str) -> PduError {
        PduError::Invalid { ty: self.ty, what }
    }
}

/// `n` rounded up to a whole word.
pub const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Builds one PDU; [`Writer::finish`] writes its length.
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// A PDU of type `ty`; replies from a server carry `from` = 0 (`FROM_ANON`).
    pub fn new(ty: u32, from: u32) -> Writer {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; 4]);
        buf.extend_from_slice(&ty.to_be_bytes());
        buf.extend_from_slice(&from.to_be_bytes());
        Writer { buf }
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.u32(v as u32)
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Bytes then `~` up to the next word, as libpcp pads.
    pub fn padded(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self.buf
            .resize(self.buf.len() + pad4(b.len()) - b.len(), b'~');
        self
    }

    /// Bytes written so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Overwrites the word at byte `at` (a field known only later, such as an offset).
    pub fn set_u32(&mut self, at: usize, v: u32) {
        self.buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// The bytes so far, for a PDU whose tail is not word-padded (LABEL); the caller writes
    /// the length.
    pub fn raw(self) -> Vec<u8> {
        self.buf
    }

    pub fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }
}
