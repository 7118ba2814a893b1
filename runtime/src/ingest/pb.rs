//! A protobuf wire-format reader for the receivers: zero-copy (strings and nested messages are
//! slices of the body), and every length is checked against the bytes that are left, so a
//! declared length past the body, a varint of eleven bytes or a group is an error, never an
//! allocation. Repeated fields have no declared count on the wire: what a message holds is
//! bounded by its bytes, and callers bound what they build from it.

use std::fmt;

/// Where a repeated field's elements stand in their message, tags included: when they stand
/// together (as every encoder writes them), their bytes are a key for what they decode to.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    range: Option<(usize, usize)>,
    together: bool,
}

impl Default for Span {
    fn default() -> Span {
        Span {
            range: None,
            together: true,
        }
    }
}

impl Span {
    /// One more element, from `start` (its tag) to `end`.
    #[inline]
    pub fn add(&mut self, start: usize, end: usize) {
        self.range = Some(match self.range {
            None => (start, end),
            Some((first, last)) => {
                self.together &= last == start;
                (first, end)
            }
        });
    }

    /// No element was added.
    pub fn is_empty(&self) -> bool {
        self.range.is_none()
    }

    /// The elements' bytes in `msg`, if there are any and they stand together.
    #[inline]
    pub fn bytes<'a>(&self, msg: &'a [u8]) -> Option<&'a [u8]> {
        let (start, end) = self.range.filter(|_| self.together)?;
        Some(&msg[start..end])
    }
}

/// A field's value as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// Why a body is not the message it claims to be, and where: `path` names the field
/// (`timeseries[3].labels[1].value`), built only on the way out of an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub path: String,
    pub what: String,
}

impl DecodeError {
    pub fn new(what: impl Into<String>) -> DecodeError {
        DecodeError {
            path: String::new(),
            what: what.into(),
        }
    }

    /// The error inside `field` (an index for a repeated field's element).
    pub fn at(mut self, field: &str, index: Option<usize>) -> DecodeError {
        let seg = match index {
            Some(i) => format!("{field}[{i}]"),
            None => field.to_string(),
        };
        self.path = if self.path.is_empty() {
            seg
        } else if self.path.starts_with('[') {
            format!("{seg}{}", self.path)
        } else {
            format!("{seg}.{}", self.path)
        };
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.what)
        } else {
            write!(f, "{}: {}", self.path, self.what)
        }
    }
}

impl std::error::Error for DecodeError {}

/// Reads one message's fields in wire order.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Reads the message's fields to its end, each handed to `each`, and returns the span
    /// the occurrences of field `key` cover: the bytes a receiver remembers what they
    /// carry by (OTLP points' attributes, remote write series' labels).
    #[inline(always)]
    pub fn fields_spanning<E: From<DecodeError>>(
        &mut self,
        key: u32,
        mut each: impl FnMut(u32, Wire<'a>) -> Result<(), E>,
    ) -> Result<Span, E> {
        let mut span = Span::default();
        loop {
            let at = self.pos;
            let Some((f, v)) = self.next_field()? else {
                return Ok(span);
            };
            each(f, v)?;
            if f == key {
                span.add(at, self.pos);
            }
        }
    }

    /// The next field number and value; `None` at the end of the message. (Errors are made
    /// by `#[cold]` functions: this is the receivers' innermost loop, and kept small it is
    /// inlined into every caller: returned through memory, its result cost a stall per field.)
    #[inline(always)]
    pub fn next_field(&mut self) -> Result<Option<(u32, Wire<'a>)>, DecodeError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let at = self.pos;
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 || field > u32::MAX as u64 >> 3 {
            return Err(bad_field(field, at));
        }
        let v = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => Wire::Fixed64(u64::from_le_bytes(*self.take_array::<8>()?)),
            2 => {
                let len = self.varint()?;
                let left = self.buf.len() - self.pos;
                if len > left as u64 {
                    return Err(past_end(field, at, len, left));
                }
                let s = &self.buf[self.pos..self.pos + len as usize];
                self.pos += len as usize;
                Wire::Bytes(s)
            }
            5 => Wire::Fixed32(u32::from_le_bytes(*self.take_array::<4>()?)),
            t => return Err(group(field, at, t)),
        };
        Ok(Some((field as u32, v)))
    }

    #[inline]
    fn take_array<const N: usize>(&mut self) -> Result<&'a [u8; N], DecodeError> {
        match self.buf.get(self.pos..).and_then(|b| b.first_chunk::<N>()) {
            Some(a) => {
                self.pos += N;
                Ok(a)
            }
            None => Err(truncated(self.pos)),
        }
    }

    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        // Tags and most lengths are one byte.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.varint_long()
    }

    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(varint_truncated(self.pos));
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(varint_long(self.pos))
    }

    /// The offset of the next field.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// True when every byte was read.
    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

impl<'a> Wire<'a> {
    /// A length-delimited field (string, bytes, message, packed list).
    pub fn bytes(self, field: &str) -> Result<&'a [u8], DecodeError> {
        match self {
            Wire::Bytes(b) => Ok(b),
            other => Err(wrong(field, "length-delimited", other)),
        }
    }

    /// A string: valid UTF-8, as proto3 requires.
    pub fn str(self, field: &str) -> Result<&'a str, DecodeError> {
        utf8(self.bytes(field)?, field)
    }

    pub fn varint(self, field: &str) -> Result<u64, DecodeError> {
        match self {
            Wire::Varint(v) => Ok(v),
            other => Err(wrong(field, "varint", other)),
        }
    }

    pub fn fixed64(self, field: &str) -> Result<u64, DecodeError> {
        match self {
            Wire::Fixed64(v) => Ok(v),
            other => Err(wrong(field, "64-bit", other)),
        }
    }

    pub fn double(self, field: &str) -> Result<f64, DecodeError> {
        self.fixed64(field).map(f64::from_bits)
    }
}

/// A string field's bytes as text: valid UTF-8, as proto3 requires.
pub fn utf8<'a>(b: &'a [u8], field: &str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(b).map_err(|e| {
        DecodeError::new(format!(
            "invalid UTF-8 at byte {} of the string",
            e.valid_up_to()
        ))
        .at(field, None)
    })
}

#[cold]
fn bad_field(field: u64, at: usize) -> DecodeError {
    DecodeError::new(format!("field number {field} at byte {at}"))
}

#[cold]
fn past_end(field: u64, at: usize, len: u64, left: usize) -> DecodeError {
    DecodeError::new(format!(
        "field {field} at byte {at} declares {len} bytes, {left} are left"
    ))
}

#[cold]
fn group(field: u64, at: usize, t: u64) -> DecodeError {
    DecodeError::new(format!(
        "field {field} at byte {at}: wire type {t} (groups are not taken)"
    ))
}

#[cold]
fn truncated(at: usize) -> DecodeError {
    DecodeError::new(format!("truncated at byte {at}"))
}

#[cold]
fn varint_truncated(at: usize) -> DecodeError {
    DecodeError::new(format!("varint truncated at byte {at}"))
}

#[cold]
fn varint_long(at: usize) -> DecodeError {
    DecodeError::new(format!("varint longer than 10 bytes at byte {at}"))
}

#[cold]
fn wrong(field: &str, want: &str, got: Wire) -> DecodeError {
    let got = match got {
        Wire::Varint(_) => "a varint",
        Wire::Fixed64(_) => "a 64-bit value",
        Wire::Bytes(_) => "length-delimited bytes",
        Wire::Fixed32(_) => "a 32-bit value",
    };
    DecodeError::new(format!("expected {want}, got {got}")).at(field, None)
}

/// A `sint32`/`sint64` varint, zigzag-decoded.
pub fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Each element of a repeated scalar field: packed (one length-delimited run) or not (one
/// wire value per element); `fixed` says the element is 64-bit fixed, else a varint.
pub fn for_each_packed(
    v: Wire<'_>,
    field: &str,
    fixed: bool,
    mut f: impl FnMut(u64) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    match v {
        Wire::Bytes(b) if fixed => {
            if b.len() % 8 != 0 {
                return Err(
                    DecodeError::new(format!("packed 64-bit list of {} bytes", b.len()))
                        .at(field, None),
                );
            }
            for c in b.chunks_exact(8) {
                f(u64::from_le_bytes(c.try_into().unwrap()))?;
            }
            Ok(())
        }
        Wire::Bytes(b) => {
            let mut r = Reader::new(b);
            while !r.done() {
                f(r.varint().map_err(|e| e.at(field, None))?)?;
            }
            Ok(())
        }
        Wire::Fixed64(x) if fixed => f(x),
        Wire::Varint(x) if !fixed => f(x),
        other => Err(wrong(field, "a packed list", other)),
    }
}

/// [`for_each_packed`], appending each element to `out`.
pub fn extend_packed(
    out: &mut Vec<u64>,
    v: Wire<'_>,
    field: &str,
    fixed: bool,
) -> Result<(), DecodeError> {
    for_each_packed(v, field, fixed, |x| {
        out.push(x);
        Ok(())
    })
}

#[cfg(test)]
pub(crate) mod enc {
    //! A minimal encoder for the decoders' tests.
    pub fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        varint(out, u64::from(field) << 3 | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }
    pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
        varint(out, u64::from(field) << 3);
        varint(out, v);
    }
    pub fn fixed(out: &mut Vec<u8>, field: u32, v: u64) {
        varint(out, u64::from(field) << 3 | 1);
        out.extend_from_slice(&v.to_le_bytes());
    }
    pub fn double(out: &mut Vec<u8>, field: u32, v: f64) {
        fixed(out, field, v.to_bits());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_past_the_body_and_long_varints_are_errors() {
        // Field 1, length-delimited, declaring 1e9 bytes in a 6-byte body.
        let mut b = vec![0x0a];
        enc::varint(&mut b, 1_000_000_000);
        let e = Reader::new(&b).next_field().unwrap_err();
        assert!(
            e.what.contains("declares 1000000000 bytes, 0 are left"),
            "{e}"
        );
        let mut long = vec![0x08];
        long.extend_from_slice(&[0xff; 11]);
        let e = Reader::new(&long).next_field().unwrap_err();
        assert!(e.what.contains("varint"), "{e}");
        let e = Reader::new(&[0x0b]).next_field().unwrap_err();
        assert!(e.what.contains("wire type 3"), "{e}");
        let e = Reader::new(&[0x09, 1, 2]).next_field().unwrap_err();
        assert!(e.what.contains("truncated"), "{e}");
        let e = Reader::new(&[0x00]).next_field().unwrap_err();
        assert!(e.what.contains("field number 0"), "{e}");
    }

    #[test]
    fn fields_strings_and_packed_lists() {
        let mut b = Vec::new();
        enc::bytes(&mut b, 2, "hé".as_bytes());
        enc::uint(&mut b, 3, 300);
        enc::double(&mut b, 4, 1.5);
        let mut packed = Vec::new();
        for v in [1u64, 150, 3] {
            enc::varint(&mut packed, v);
        }
        enc::bytes(&mut b, 5, &packed);
        let mut r = Reader::new(&b);
        let (f, v) = r.next_field().unwrap().unwrap();
        assert_eq!((f, v.str("s").unwrap()), (2, "hé"));
        let (f, v) = r.next_field().unwrap().unwrap();
        assert_eq!((f, v.varint("n").unwrap()), (3, 300));
        let (_, v) = r.next_field().unwrap().unwrap();
        assert_eq!(v.double("d").unwrap(), 1.5);
        let (_, v) = r.next_field().unwrap().unwrap();
        let mut got = Vec::new();
        extend_packed(&mut got, v, "p", false).unwrap();
        assert_eq!(got, [1, 150, 3]);
        assert!(r.next_field().unwrap().is_none());
        let e = Wire::Bytes(&[0xff, 0xfe]).str("value").unwrap_err();
        assert_eq!(
            e.to_string(),
            "value: invalid UTF-8 at byte 0 of the string"
        );
        assert_eq!(zigzag(3), -2);
        assert_eq!(zigzag(4), 2);
    }
}
