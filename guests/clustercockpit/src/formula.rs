//! cc-metric-collector's arithmetic, one function per formula, over PCP's values: plain
//! numbers in, plain numbers out, so each is tested on its own (the transformer only picks
//! the inputs and remembers the previous ones).
//!
//! Where PCP's units differ from the files cc-metric-collector reads, the row's `factor`
//! bridges them (PCP's CPU milliseconds are USER_HZ ticks × 1000 / USER_HZ, so cpustat's
//! `ticks / seconds / USER_HZ × 100` is `milliseconds / seconds × 0.1`).

/// A counter's change per second × `factor`: cpustat's percentages (`factor` 0.1 on PCP's
/// milliseconds), netstat's `_bw` rates. `None` without a positive time step (the first
/// sample, or two samples of the same poll).
pub fn rate(
    prev: f64,
    prev_ns: i64,
    now: f64,
    now_ns: i64,
    wrap: Option<u32>,
    factor: f64,
) -> Option<f64> {
    let dt = (now_ns - prev_ns) as f64 / 1e9;
    if dt <= 0.0 {
        return None;
    }
    Some(diff(prev, now, wrap) / dt * factor)
}

/// A counter's change since the previous read (iostat's `io_*`). cc-metric-collector reads
/// the kernel's 64-bit fields, which do not wrap; PCP narrows some to 32 bits (`wrap = 32`),
/// so a value below the previous one is a 32-bit wrap there, put back as the kernel had it.
pub fn diff(prev: f64, now: f64, wrap: Option<u32>) -> f64 {
    match wrap {
        Some(bits) if now < prev => now + 2f64.powi(bits as i32) - prev,
        _ => now - prev,
    }
}

/// diskstat's `disk_free` and `disk_total`: bytes as whole gigabytes (10^9, rounded down, as
/// Go's integer division does); `bytes` is PCP's Kbyte value × the row's factor 1024.
pub fn gbytes(bytes: f64) -> f64 {
    (bytes / 1e9).floor()
}

/// diskstat's per-filesystem use in whole percent from whole gigabytes: `100 × (total − free)
/// / total`, rounded down; `None` for a filesystem under 1 GB (cc-metric-collector skips it).
pub fn used_percent(total_gb: f64, free_gb: f64) -> Option<f64> {
    if total_gb <= 0.0 {
        return None;
    }
    Some((100.0 * (total_gb - free_gb) / total_gb).floor())
}

/// The shortest decimal the 32-bit float `v` stands for, as a 64-bit float: a `cpu MHz` of
/// `2596.122` that PCP keeps as a float is 2596.1220703125 when widened, 2596.122 here, as
/// cc-metric-collector parses the text.
pub fn from_f32(v: f64) -> f64 {
    (v as f32).to_string().parse().unwrap_or(v)
}

/// The type id of an instance: its trailing digits (`cpu12` is hwthread 12, `node1` memory
/// domain 1); `None` when it has none.
pub fn type_id(instance: &str) -> Option<&str> {
    let digits = instance.len()
        - instance
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .len();
    (digits > 0).then(|| &instance[instance.len() - digits..])
}

/// tempstat's metric name for the hwmon sensor `instance` (`CHIP:LABEL` as the `hwmon` agent
/// names it: the chip's `name`, `-N` after it when several chips share it, and the label or
/// the file stem `tempN` when the sensor has none), with the first `temp` in it replaced by
/// `word` (`max_temp`, `crit_temp` for the limits). cc-metric-collector's rules: coretemp's
/// `Core N` and `Package id N` are `temp_` + label; else `chip_label`, or the chip alone
/// without a label; lower case, spaces as `_`, and `temp_` in front when `temp` is not in it.
/// The kernel refuses `-` in a chip's name, so a `-N` suffix is the agent's.
pub fn hwmon_temp_name(instance: &str, word: &str) -> Option<String> {
    let (chip, label) = instance.split_once(':')?;
    let chip = match chip.rsplit_once('-') {
        Some((c, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => c,
        _ => chip,
    };
    let stem = label
        .strip_prefix("temp")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let label = if stem { "" } else { label };
    let name = match (chip.is_empty(), label.is_empty()) {
        (true, true) => return None,
        _ if chip == "coretemp"
            && (label.starts_with("Core ") || label.starts_with("Package id ")) =>
        {
            format!("temp_{label}")
        }
        (false, false) => format!("{chip}_{label}"),
        (false, true) => chip.to_string(),
        (true, false) => label.to_string(),
    };
    let mut name = name.to_lowercase().replace(' ', "_");
    if !name.contains("temp") {
        name.insert_str(0, "temp_");
    }
    Some(name.replacen("temp", word, 1))
}

/// A value cc-metric-collector reads as an integer and divides by 1000 in integers (tempstat's
/// millidegrees): the agent's `raw / 1000.0`, truncated toward zero as Go's `/` does.
pub fn whole(v: f64) -> f64 {
    v.trunc()
}

/// The name of an output named by its instance: `to` with `{instance}` replaced by the
/// instance, or by its entry in `rename` (nfs3stat's `nfs3_readdirplus` for PCP's `readdir+`).
pub fn instance_name(to: &str, instance: &str, rename: &[(String, String)]) -> String {
    let part = rename
        .iter()
        .find(|(from, _)| from == instance)
        .map_or(instance, |(_, to)| to.as_str());
    to.replace(crate::table::INSTANCE, part)
}

/// slurm_cgroup's split of job values over hardware threads: `values` per job, `members` the
/// job's threads as `JOB:THREAD` in the order read, `online` the node's threads. Each member
/// gets its job's value divided by the job's thread count (a job without a value: 0, as
/// cc-metric-collector's zeroed job data), then each online thread no job holds gets 0.
/// Returns (thread, value) in that order; a member without `:` is no member.
pub fn split_cpus<'a>(
    values: &[(&str, f64)],
    members: &[&'a str],
    online: &[&'a str],
) -> Vec<(&'a str, f64)> {
    use std::collections::{HashMap, HashSet};
    let pairs: Vec<(&'a str, &'a str)> = members
        .iter()
        .filter_map(|m| (*m).rsplit_once(':'))
        .collect();
    let mut per_job: HashMap<&str, usize> = HashMap::new();
    for (job, _) in &pairs {
        *per_job.entry(job).or_default() += 1;
    }
    let values: HashMap<&str, f64> = values.iter().copied().collect();
    let held: HashSet<&str> = pairs.iter().map(|(_, t)| *t).collect();
    let mut out = Vec::with_capacity(pairs.len() + online.len());
    for (job, thread) in &pairs {
        let v = values.get(job).copied().unwrap_or(0.0);
        out.push((*thread, v / per_job[job] as f64));
    }
    out.extend(
        online
            .iter()
            .filter(|t| !held.contains(*t))
            .map(|t| (*t, 0.0)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_milliseconds_per_second_are_cpustat_percent() {
        // 250 ticks of 10 ms over 5 s: cc-metric-collector's 250 / 5 / 100 × 100 = 50 %.
        let v = rate(1_000.0, 0, 1_000.0 + 2_500.0, 5_000_000_000, None, 0.1).unwrap();
        assert!((v - 250.0 / 5.0 / 100.0 * 100.0).abs() < 1e-12, "{v}");
        assert_eq!(rate(1.0, 5, 2.0, 5, None, 1.0), None);
    }

    #[test]
    fn job_values_are_split_over_their_threads_and_idle_threads_are_0() {
        let out = split_cpus(
            &[("7", 800.0), ("9", 30.0)],
            &["7:cpu0", "7:cpu1", "9:cpu3", "nocolon", "8:cpu2"],
            &["cpu0", "cpu1", "cpu2", "cpu3", "cpu4"],
        );
        assert_eq!(
            out,
            vec![
                ("cpu0", 400.0),
                ("cpu1", 400.0),
                ("cpu3", 30.0),
                ("cpu2", 0.0),
                ("cpu4", 0.0)
            ]
        );
        let renamed = [("readdir+".to_string(), "readdirplus".to_string())];
        assert_eq!(
            instance_name("nfs3_{instance}", "readdir+", &renamed),
            "nfs3_readdirplus"
        );
        assert_eq!(
            instance_name("nfs3_{instance}", "read", &renamed),
            "nfs3_read"
        );
    }

    #[test]
    fn a_32_bit_wrap_is_put_back() {
        assert_eq!(diff(4_294_967_290.0, 4.0, Some(32)), 10.0);
        assert_eq!(diff(10.0, 4.0, None), -6.0);
    }

    #[test]
    fn gigabytes_and_percent_round_down() {
        assert_eq!(gbytes(1_999_999_999.0), 1.0);
        assert_eq!(used_percent(3.0, 1.0), Some(66.0));
        assert_eq!(used_percent(0.0, 0.0), None);
    }

    #[test]
    fn a_widened_float_is_its_decimal_again() {
        assert_eq!(from_f32(2596.122f32 as f64), 2596.122);
    }

    #[test]
    fn type_ids_are_trailing_digits() {
        assert_eq!(type_id("cpu12"), Some("12"));
        assert_eq!(type_id("node0"), Some("0"));
        assert_eq!(type_id("eth"), None);
    }

    #[test]
    fn hwmon_sensors_are_named_as_tempstat_names_them() {
        let n = |i: &str| hwmon_temp_name(i, "temp");
        assert_eq!(n("coretemp-0:Core 3").as_deref(), Some("temp_core_3"));
        assert_eq!(
            n("coretemp:Package id 0").as_deref(),
            Some("temp_package_id_0")
        );
        assert_eq!(n("nvme:Composite").as_deref(), Some("temp_nvme_composite"));
        assert_eq!(n("acpitz:temp1").as_deref(), Some("temp_acpitz"));
        assert_eq!(n("k10temp:Tctl").as_deref(), Some("k10temp_tctl"));
        assert_eq!(
            hwmon_temp_name("k10temp:Tctl", "max_temp").as_deref(),
            Some("k10max_temp_tctl")
        );
        assert_eq!(
            hwmon_temp_name("coretemp-1:Core 0", "crit_temp").as_deref(),
            Some("crit_temp_core_0")
        );
        assert_eq!(n("no-colon"), None);
        assert_eq!(whole(45.999), 45.0);
        assert_eq!(whole(-1.5), -1.0);
    }
}
