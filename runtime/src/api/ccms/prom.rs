//! Prometheus text exposition of the newest value of every series in the store. Metric names
//! are sanitised to `[a-zA-Z_:][a-zA-Z0-9_:]*`; levels become labels: `cluster`, `hostname`,
//! `type`/`type_id` and `stype`/`stype_id` (a component name like `hwthread12` is split at its
//! trailing digits), deeper levels `level4`, `level5`, ...

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::sample::{sanitize_metric_name, split_id};
use crate::store::Store;

fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn labels(path: &[&str]) -> String {
    let mut out = String::new();
    let add = |k: &str, v: &str, out: &mut String| {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape_label(v, out);
        out.push('"');
    };
    for (depth, p) in path.iter().enumerate() {
        match depth {
            0 => add("cluster", p, &mut out),
            1 => add("hostname", p, &mut out),
            2 | 3 => {
                let (t, id) = split_id(p);
                let (tk, ik) = if depth == 2 {
                    ("type", "type_id")
                } else {
                    ("stype", "stype_id")
                };
                add(tk, t, &mut out);
                if !id.is_empty() {
                    add(ik, id, &mut out);
                }
            }
            d => add(&format!("level{d}"), p, &mut out),
        }
    }
    out
}

/// Renders `# TYPE` and one sample line (value and timestamp in ms) per series, grouped by
/// metric name; `prefix` is prepended to every name (e.g. `"ccms_"`). Series whose sanitised
/// name and labels collide are emitted once.
pub fn render_prometheus(store: &Store, prefix: &str) -> String {
    let mut by_name: BTreeMap<String, BTreeMap<String, (f64, i64)>> = BTreeMap::new();
    store.for_each_latest(|path, metric, ts, v| {
        by_name
            .entry(sanitize_metric_name(prefix, metric))
            .or_default()
            .entry(labels(path))
            .or_insert((v, ts));
    });
    let mut out = String::new();
    for (name, series) in by_name {
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (labels, (v, ts)) in series {
            let value = if v.is_infinite() {
                if v > 0.0 {
                    "+Inf".to_string()
                } else {
                    "-Inf".to_string()
                }
            } else {
                v.to_string()
            };
            let _ = writeln!(
                out,
                "{name}{{{labels}}} {value} {}",
                ts.saturating_mul(1000)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    #[test]
    fn names_and_labels() {
        assert_eq!(sanitize_metric_name("", "mem-used.total"), "mem_used_total");
        assert_eq!(sanitize_metric_name("", "1x"), "_1x");
        assert_eq!(sanitize_metric_name("ccms_", "flops any"), "ccms_flops_any");
        assert_eq!(sanitize_metric_name("", "é"), "_");
        let s = Store::new(StoreConfig::default());
        s.write(&["alex", "a903", "hwthread12"], "cpu-load", 120, 0.5)
            .unwrap();
        s.write(&["alex", "a903"], "mem_used", 120, 7.0).unwrap();
        s.write(&["alex", "a\"9", "socket0", "core3"], "mem_used", 60, 1.0)
            .unwrap();
        let text = render_prometheus(&s, "");
        let expected = "# TYPE cpu_load gauge\n\
cpu_load{cluster=\"alex\",hostname=\"a903\",type=\"hwthread\",type_id=\"12\"} 0.5 120000\n\
# TYPE mem_used gauge\n\
mem_used{cluster=\"alex\",hostname=\"a903\"} 7 120000\n\
mem_used{cluster=\"alex\",hostname=\"a\\\"9\",type=\"socket\",type_id=\"0\",stype=\"core\",stype_id=\"3\"} 1 60000\n";
        assert_eq!(text, expected);
    }
}
