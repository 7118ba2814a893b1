//! Small helpers several parts share: sizes in config files ("64MiB"), this machine's host
//! name, names safe as NATS keys, the word-wise byte compare of the hot paths, numbers as C's
//! `strtoul` reads them, the protobuf writes of the encoders, and the crate's one policy on
//! poisoned locks. A leaf: it imports nothing of the crate, so every part may use it without
//! an arrow running back up.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Parses "64MiB", "512KiB", "1GiB", "10MB", or a plain number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?}: expected a number and a unit (KiB, MiB, GiB)"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "invalid size {s:?}: unknown unit {other:?} (KiB, MiB, GiB, KB, MB, GB)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("invalid size {s:?}: too large"))
}

/// For `#[serde(with = "crate::util::size")]`: a number of bytes or a [`parse_size`] string;
/// written back as a number.
pub mod size {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Num(u64),
        Text(String),
    }

    pub fn serialize<S: Serializer>(n: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*n)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Num(n) => Ok(n),
            Raw::Text(t) => super::parse_size(&t).map_err(serde::de::Error::custom),
        }
    }

    /// The same for `Option<u64>` fields (with `default`).
    pub mod option {
        use serde::{Deserializer, Serializer};

        pub fn serialize<S: Serializer>(n: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
            match n {
                Some(n) => s.serialize_u64(*n),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            super::deserialize(d).map(Some)
        }
    }
}

/// This machine's host name, for samples that do not name one.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `name`, or when it is empty this host's name made [`key_safe`]: the default id of a fabric
/// agent and of a fleet node.
pub fn name_or_host(name: &str) -> String {
    if name.is_empty() {
        key_safe(&hostname())
    } else {
        name.to_string()
    }
}

/// A name usable as a NATS KV key: `[-_=a-zA-Z0-9]`, other characters become `_`.
pub fn key_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `a == b`, word by word (the last word overlapping) instead of a `memcmp` call: for the
/// short names and tag sections compared per line, the call and its dispatch cost more than
/// the compare itself.
#[inline(always)]
pub fn eq_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        // Not `a == b` either: that is a `memcmp` call too, as slow for 5 bytes as for 50.
        if n >= 4 {
            let w = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4"));
            return (w(a, 0) ^ w(b, 0)) | (w(a, n - 4) ^ w(b, n - 4)) == 0;
        }
        return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let mut diff = word(a, n - 8) ^ word(b, n - 8);
    let mut i = 0;
    while i + 8 <= n {
        diff |= word(a, i) ^ word(b, i);
        i += 8;
    }
    diff == 0
}

/// An optional leading `+` or `-`: whether it was `-`, and the bytes after it.
#[inline]
pub fn split_sign(b: &[u8]) -> (bool, &[u8]) {
    match b {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, b),
    }
}

/// A number as C's `strtoul(s, &end, 10)` reads it, which is how PCP's agents read the
/// numbers of /proc and /sys: blanks (C's `isspace`) skipped, an optional sign, decimal digits
/// up to the first other byte. More than a u64 holds reads as `u64::MAX` (C's `ERANGE`); a
/// `-` negates, wrapping (`-1` is `u64::MAX`). Returns the value and the bytes after the
/// digits; with no digits, 0 and all of `b` (C's `end == s`).
///
/// The per-process and per-CPU files call it for every field, so the common case (1 to 19
/// digits, which cannot overflow) is one pass with wrapping arithmetic and one compare; the
/// rest is [`strtoul_edge`]'s.
#[inline]
pub fn strtoul(b: &[u8]) -> (u64, &[u8]) {
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t'..=b'\r') {
        i += 1;
    }
    let (neg, digits) = split_sign(&b[i..]);
    let mut v: u64 = 0;
    let mut n = 0;
    while let Some(&c @ b'0'..=b'9') = digits.get(n) {
        v = v.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
        n += 1;
    }
    if n.wrapping_sub(1) >= 19 {
        return strtoul_edge(b, digits, n, v, neg);
    }
    (if neg { v.wrapping_neg() } else { v }, &digits[n..])
}

/// [`strtoul`] with no digits or with 20 or more (which may overflow).
#[cold]
#[inline(never)]
fn strtoul_edge<'a>(b: &'a [u8], digits: &'a [u8], n: usize, v: u64, neg: bool) -> (u64, &'a [u8]) {
    let (read, rest) = digits.split_at(n);
    let fits = read.iter().try_fold(0u64, |v, d| {
        v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    });
    match (n, fits, neg) {
        (0, _, _) => (0, b),
        (_, None, _) => (u64::MAX, rest),
        (_, Some(_), true) => (v.wrapping_neg(), rest),
        (_, Some(_), false) => (v, rest),
    }
}

// The crate's one policy on poisoned locks: a thread that panicked while holding a lock has
// been reported already (the panic hook logs it), and every part keeps the state behind its
// locks whole between statements that can panic (one insert, one push, one swap). So the
// next holder takes the lock over instead of panicking in turn and taking the daemon down:
// `lock`, `read` and `write` below, never a bare `.lock().unwrap()`.

/// Locks `m`, taking it over if a panicking holder poisoned it (the policy above).
#[allow(clippy::disallowed_methods)] // The one place the policy is applied.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read-locks `l`, taking it over if a panicking holder poisoned it (the policy above).
#[allow(clippy::disallowed_methods)] // The one place the policy is applied.
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

/// Write-locks `l`, taking it over if a panicking holder poisoned it (the policy above).
#[allow(clippy::disallowed_methods)] // The one place the policy is applied.
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

/// xorshift64*: a deterministic generator for tests that sweep random inputs without a
/// property-testing crate.
#[cfg(test)]
pub(crate) struct TestRng(pub(crate) u64);

#[cfg(test)]
impl TestRng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Appends `v` as a protobuf varint.
pub fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends the key of protobuf field `field` with wire type `wire` (0 varint, 2 bytes).
pub fn pb_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    pb_varint(out, u64::from(field << 3 | u32::from(wire)));
}

/// Appends protobuf field `field` holding `bytes` (a string, bytes or a nested message).
pub fn pb_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    pb_key(out, field, 2);
    pb_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 parsecs").unwrap_err().contains("parsecs"));
        assert!(
            parse_size("99999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn strtoul_reads_as_c_does() {
        assert_eq!(strtoul(b"  -1 x"), (u64::MAX, &b" x"[..]));
        assert_eq!(strtoul(b"\t\n\x0b\x0c\r+42kB"), (42, &b"kB"[..]));
        assert_eq!(strtoul(b"x"), (0, &b"x"[..]));
        // No digits: nothing is consumed, not even the blanks and the sign.
        assert_eq!(strtoul(b" -x"), (0, &b" -x"[..]));
        assert_eq!(strtoul(b""), (0, &b""[..]));
        assert_eq!(strtoul(b"18446744073709551615 "), (u64::MAX, &b" "[..]));
        // Past u64: ERANGE's ULONG_MAX, whatever the sign.
        assert_eq!(strtoul(b"18446744073709551616"), (u64::MAX, &b""[..]));
        assert_eq!(strtoul(b"-99999999999999999999999,"), (u64::MAX, &b","[..]));
        assert_eq!(strtoul(b"-0"), (0, &b""[..]));
        assert_eq!(split_sign(b"+-1"), (false, &b"-1"[..]));
        assert_eq!(split_sign(b"-1"), (true, &b"1"[..]));
        assert_eq!(split_sign(b"1"), (false, &b"1"[..]));
    }

    #[test]
    fn key_safe_keeps_only_what_a_key_may_hold() {
        assert_eq!(key_safe("node-1.example.com"), "node-1_example_com");
        assert_eq!(key_safe("a=b_c/d e"), "a=b_c_d_e");
    }

    #[test]
    fn a_poisoned_lock_is_taken_over() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = lock(&m2);
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
