//! What the node_exporter profile reads besides the linux agent's values, as node_exporter
//! reads it: the scrape's wall-clock time, filesystem types from `/proc/self/mounts`, the NIS
//! domain name. Bounded reads; a file that cannot be read costs only its labels.

use std::collections::HashMap;

/// Bytes read from `/proc/self/mounts`: a host with thousands of container mounts still fits,
/// and a bigger file costs only the `fstype` labels of the mounts past the cut.
const MAX_MOUNTS_BYTES: u64 = 4 << 20;

/// Bytes read from `/proc/sys/kernel/domainname` (the kernel's limit is 64, `__NEW_UTS_LEN`).
const MAX_DOMAINNAME_BYTES: u64 = 128;

/// What the profile reads besides the agent's values.
#[derive(Debug, Default, Clone)]
pub struct Env {
    /// Wall-clock time of the scrape, seconds since the epoch (`node_time_seconds`).
    pub now: f64,
    /// Filesystem type by mount point (`/proc/self/mounts`; the last mount of a point wins,
    /// as it is the one visible there).
    pub fstypes: HashMap<String, String>,
    /// The NIS domain name (`(none)` when unset, as the kernel says).
    pub domainname: String,
}

impl Env {
    /// This host's, now.
    pub fn read() -> Env {
        Env {
            now: chrono::Utc::now().timestamp_micros() as f64 / 1e6,
            fstypes: read_bounded("/proc/self/mounts", MAX_MOUNTS_BYTES)
                .map(|t| fstypes(&t))
                .unwrap_or_default(),
            domainname: read_bounded("/proc/sys/kernel/domainname", MAX_DOMAINNAME_BYTES)
                .map(|t| t.trim_end_matches('\n').to_string())
                .unwrap_or_default(),
        }
    }
}

fn read_bounded(path: &str, max: u64) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    f.take(max).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Mount point -> filesystem type, from the text of a mounts file.
pub fn fstypes(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        if let (Some(_dev), Some(dir), Some(ty)) = (f.next(), f.next(), f.next()) {
            out.insert(unescape_octal(dir), ty.to_string());
        }
    }
    out
}

/// The kernel writes space, tab, newline and backslash in mount points as `\ooo`.
fn unescape_octal(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
