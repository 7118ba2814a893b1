//! `hwmon`: the kernel's hardware sensors from `/sys/class/hwmon` and its thermal zones from
//! `/sys/class/thermal`, under names of its own (PCP has no such agent; domain 180, unassigned
//! in PCP's stdpmid). Instances are `CHIP:LABEL`: the chip's `name` (with `-N` after it when
//! several `hwmonN` share a name, as coretemp does per socket) and the sensor's `_label`, or
//! its file stem (`temp1`) when it has none. Thermal zones are `thermal_zoneN:TYPE`.
//!
//! The kernel's units (millidegrees, millivolts, microwatts) are converted here, once, to
//! degrees Celsius, volts and watts. A sensor whose input is absent or not a number (a chip
//! reporting an error reads as EIO or ENODATA) has no value.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use wasmon_guest::agent::{Atom, Pmid, Semantics, Value, ValueSet, ValueType};
use wasmon_guest::names::{Catalog, Metric};
use wasmon_guest::sysfs;

pub const DOMAIN: u32 = 180;
const HWMON: &str = "/sys/class/hwmon";
const THERMAL: &str = "/sys/class/thermal";

/// (metric, sysfs file prefix, file suffix, divisor to the metric's unit)
const SENSORS: &[(&str, &str, &str, f64)] = &[
    ("hwmon.temp", "temp", "_input", 1000.0),
    ("hwmon.temp_max", "temp", "_max", 1000.0),
    ("hwmon.temp_crit", "temp", "_crit", 1000.0),
    ("hwmon.fan", "fan", "_input", 1.0),
    ("hwmon.voltage", "in", "_input", 1000.0),
    ("hwmon.power", "power", "_input", 1_000_000.0),
];

/// Sensors of hwmon chips (cluster 0) and thermal zones (cluster 1).
const SENSOR: Option<u32> = Some(0);
const ZONE: Option<u32> = Some(1);

use Semantics::Instant;
use ValueType::Double;

#[rustfmt::skip]
pub static METRICS: &[Metric] = &[
    Metric::new("hwmon.temp", 0, 0, Double, Instant, "", SENSOR, "Temperature a hardware sensor reads, in degrees Celsius"),
    Metric::new("hwmon.temp_max", 0, 1, Double, Instant, "", SENSOR, "Temperature above which the sensor's chip warns, in degrees Celsius"),
    Metric::new("hwmon.temp_crit", 0, 2, Double, Instant, "", SENSOR, "Critical temperature of the sensor's chip, in degrees Celsius"),
    Metric::new("hwmon.fan", 0, 3, Double, Instant, "", SENSOR, "Speed of a fan, in revolutions per minute"),
    Metric::new("hwmon.voltage", 0, 4, Double, Instant, "", SENSOR, "Voltage a hardware sensor reads, in volts"),
    Metric::new("hwmon.power", 0, 5, Double, Instant, "", SENSOR, "Power a hardware sensor reads, in watts"),
    Metric::new("hwmon.thermal.temp", 1, 0, Double, Instant, "", ZONE, "Temperature of a thermal zone, in degrees Celsius"),
];

pub struct Hwmon {
    catalog: Catalog,
    root: PathBuf,
}

/// Chips as (chip instance prefix, directory), sorted by hwmonN.
fn chips(class: &Path) -> Vec<(String, PathBuf)> {
    let dirs: Vec<(String, PathBuf, String)> = sysfs::list(class)
        .into_iter()
        .filter_map(|entry| {
            let dir = class.join(&entry);
            let name = sysfs::read_line(&dir.join("name")).ok()?;
            Some((entry, dir, name))
        })
        .collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (_, _, name) in &dirs {
        *count.entry(name).or_default() += 1;
    }
    dirs.iter()
        .map(|(entry, dir, name)| {
            let chip = if count[name.as_str()] > 1 {
                format!("{name}-{}", entry.trim_start_matches("hwmon"))
            } else {
                name.clone()
            };
            (chip, dir.clone())
        })
        .collect()
}

impl Hwmon {
    pub fn at(root: &Path) -> Hwmon {
        Hwmon {
            catalog: Catalog::new(DOMAIN, METRICS),
            root: root.to_path_buf(),
        }
    }

    /// The values of sensor metric `metric` (one of [`SENSORS`]) on every chip.
    fn sensors(&self, metric: &str, chips: &[(String, PathBuf, Vec<String>)]) -> Vec<Value> {
        let Some(&(_, prefix, suffix, divisor)) = SENSORS.iter().find(|s| s.0 == metric) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (chip, dir, files) in chips {
            for file in files {
                let Some(stem) = file.strip_suffix(suffix) else {
                    continue;
                };
                let is_sensor = stem
                    .strip_prefix(prefix)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                if !is_sensor {
                    continue;
                }
                let Ok(raw) = sysfs::read_i64(&dir.join(file)) else {
                    continue;
                };
                let label = sysfs::read_line(&dir.join(format!("{stem}_label")))
                    .ok()
                    .filter(|l| !l.is_empty())
                    .unwrap_or_else(|| stem.to_string());
                out.push(Value::new(
                    format!("{chip}:{label}"),
                    Atom::Real(raw as f64 / divisor),
                ));
            }
        }
        out
    }

    fn thermal(&self) -> Vec<Value> {
        let class = sysfs::under(&self.root, THERMAL);
        sysfs::list(&class)
            .into_iter()
            .filter(|z| z.starts_with("thermal_zone"))
            .filter_map(|zone| {
                let dir = class.join(&zone);
                let millideg = sysfs::read_i64(&dir.join("temp")).ok()?;
                let kind = sysfs::read_line(&dir.join("type")).unwrap_or_default();
                Some(Value::new(
                    format!("{zone}:{kind}"),
                    Atom::Real(millideg as f64 / 1000.0),
                ))
            })
            .collect()
    }

    pub fn fetch_ids(&self, ids: &[Pmid]) -> Vec<ValueSet> {
        let mut listed: Option<Vec<(String, PathBuf, Vec<String>)>> = None;
        self.catalog.value_sets(ids, |m| {
            if m.cluster == 1 {
                return self.thermal();
            }
            let chips = listed.get_or_insert_with(|| {
                chips(&sysfs::under(&self.root, HWMON))
                    .into_iter()
                    .map(|(c, d)| {
                        let files = sysfs::list(&d);
                        (c, d, files)
                    })
                    .collect()
            });
            self.sensors(m.name, chips)
        })
    }
}

wasmon_guest::tree_agent!(Hwmon);
