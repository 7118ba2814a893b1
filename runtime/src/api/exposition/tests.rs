use super::*;
use crate::testutil::minute_store;

/// Descriptions as the linux agent gives them (semantics and units from PCP's linux PMDA,
/// `/tmp/ref/linux.desc`), else the process table and the fallback.
struct Table;

impl Describe for Table {
    fn describe(&mut self, metric: &str) -> Description {
        let pcp = |counter: bool, units: &str, indom: Option<u32>| Description {
            counter,
            units: Some(units.into()),
            help: format!("help of {metric}\nsecond line"),
            instances: Instances::Pcp { domain: 60, indom },
            semantics: Some(if counter { "counter" } else { "instant" }),
        };
        match metric {
            "kernel.all.cpu.user" => pcp(true, "millisec", None),
            "kernel.all.pswitch" => pcp(true, "count", None),
            "network.interface.in.bytes" => pcp(true, "byte", Some(3)),
            "kernel.all.load" => pcp(false, "", Some(2)),
            "mem.util.used" => pcp(false, "Kbyte", None),
            "odd.unit" => pcp(false, "byte / count", None),
            _ => fallback(metric),
        }
    }

    fn instance_id(&mut self, domain: u32, indom: u32, name: &str) -> Option<u32> {
        assert_eq!(domain, 60);
        match (indom, name) {
            (2, "1 minute") => Some(1),
            (3, "eth0") => Some(2),
            _ => None,
        }
    }
}

fn render(store: &Store, now: i64, taken: &[&str]) -> String {
    let taken = taken.iter().map(|s| s.to_string()).collect();
    let mut commands = HashMap::new();
    let mut seen = BTreeSet::new();
    let mut lookup = Lookup {
        describer: &mut Table,
        own_host: ("local", "me"),
        instance_ids: HashMap::new(),
        commands: &mut commands,
        seen_pids: &mut seen,
    };
    let mut out = String::new();
    render_store(store, now, &taken, &mut lookup, &mut out);
    out
}

#[test]
fn counters_are_counters_in_base_units_with_help_and_no_timestamps() {
    let s = minute_store();
    s.write(&["local", "me"], "kernel.all.cpu.user", 1000, 2500.0)
        .unwrap();
    s.write(&["local", "me"], "kernel.all.pswitch", 1000, 7.0)
        .unwrap();
    s.write(
        &["local", "me", "eth0"],
        "network.interface.in.bytes",
        1000,
        9.0,
    )
    .unwrap();
    s.write(&["local", "me"], "mem.util.used", 1000, 2.0)
        .unwrap();
    s.write(&["local", "me"], "odd.unit", 1000, 3.0).unwrap();
    let text = render(&s, 1000, &[]);
    let expected = "\
# PCP kernel.all.cpu.user counter millisec
# HELP wasmon_kernel_all_cpu_user_seconds_total help of kernel.all.cpu.user
# TYPE wasmon_kernel_all_cpu_user_seconds_total counter
wasmon_kernel_all_cpu_user_seconds_total{cluster=\"local\",hostname=\"me\"} 2.5
# PCP kernel.all.pswitch counter count
# HELP wasmon_kernel_all_pswitch_total help of kernel.all.pswitch
# TYPE wasmon_kernel_all_pswitch_total counter
wasmon_kernel_all_pswitch_total{cluster=\"local\",hostname=\"me\"} 7
# PCP mem.util.used instant Kbyte
# HELP wasmon_mem_util_used_bytes help of mem.util.used
# TYPE wasmon_mem_util_used_bytes gauge
wasmon_mem_util_used_bytes{cluster=\"local\",hostname=\"me\"} 2048
# PCP network.interface.in.bytes counter byte
# HELP wasmon_network_interface_in_bytes_total help of network.interface.in.bytes
# TYPE wasmon_network_interface_in_bytes_total counter
wasmon_network_interface_in_bytes_total{cluster=\"local\",hostname=\"me\",instname=\"eth0\",instid=\"2\"} 9
# PCP odd.unit instant byte / count
# HELP wasmon_odd_unit help of odd.unit (units: byte / count)
# TYPE wasmon_odd_unit gauge
wasmon_odd_unit{cluster=\"local\",hostname=\"me\"} 3
";
    assert_eq!(text, expected);
}

#[test]
fn instances_carry_their_pcp_name_and_only_this_hosts_an_id() {
    let s = minute_store();
    s.write(&["local", "me", "1 minute"], "kernel.all.load", 1000, 0.5)
        .unwrap();
    s.write(
        &["local", "other", "1 minute"],
        "kernel.all.load",
        1000,
        0.7,
    )
    .unwrap();
    s.write(&["local", "me", "5 minute"], "kernel.all.load", 1000, 0.25)
        .unwrap();
    let text = render(&s, 1000, &[]);
    assert!(
        text.contains("wasmon_kernel_all_load{cluster=\"local\",hostname=\"me\",instname=\"1 minute\",instid=\"1\"} 0.5\n"),
        "{text}"
    );
    assert!(
        text.contains("wasmon_kernel_all_load{cluster=\"local\",hostname=\"other\",instname=\"1 minute\"} 0.7\n"),
        "{text}"
    );
    // The agent gives no id: none is made up.
    assert!(
        text.contains(
            "wasmon_kernel_all_load{cluster=\"local\",hostname=\"me\",instname=\"5 minute\"} 0.25\n"
        ),
        "{text}"
    );
    assert_eq!(
        text.matches("# TYPE wasmon_kernel_all_load gauge").count(),
        1
    );
}

#[test]
fn processes_carry_pid_tid_and_command() {
    let s = minute_store();
    let me = std::process::id();
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    let comm = comm.trim_end();
    s.write(
        &["local", "me", &me.to_string()],
        "proc.mem.rss",
        1000,
        4096.0,
    )
    .unwrap();
    s.write(
        &["local", "me", &format!("{me}-{me}")],
        "proc.thread.cpu.user",
        1000,
        1.5,
    )
    .unwrap();
    let text = render(&s, 1000, &[]);
    assert!(
        text.contains(&format!("wasmon_proc_mem_rss_bytes{{cluster=\"local\",hostname=\"me\",pid=\"{me}\",command=\"{comm}\"}} 4096\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("wasmon_proc_thread_cpu_user_seconds_total{{cluster=\"local\",hostname=\"me\",pid=\"{me}\",tid=\"{me}\",command=\"{comm}\"}} 1.5\n")),
        "{text}"
    );
    assert!(text.contains("# TYPE wasmon_proc_thread_cpu_user_seconds_total counter\n"));
    assert!(text.contains("# HELP wasmon_proc_mem_rss_bytes Resident set size"));
}

#[test]
fn a_series_not_written_for_three_intervals_leaves() {
    let s = minute_store(); // 60 s default step
    s.write(&["local", "me", "1"], "proc.mem.rss", 1000, 1.0)
        .unwrap();
    s.write(&["local", "me", "2"], "proc.mem.rss", 1000, 2.0)
        .unwrap();
    s.write(&["local", "me", "2"], "proc.mem.rss", 1180, 2.0)
        .unwrap();
    s.write(&["local", "me", "3"], "proc.mem.rss", 1000, 3.0)
        .unwrap();
    s.write(&["local", "me", "3"], "proc.mem.rss", 1600, 3.0)
        .unwrap();
    let at = |now| {
        let t = render(&s, now, &[]);
        (1..=3)
            .filter(|p| t.contains(&format!("pid=\"{p}\"")))
            .collect::<Vec<_>>()
    };
    // pid 1: one value, step 60: live for 180 s.
    assert_eq!(at(1180), vec![1, 2, 3]);
    assert_eq!(at(1181), vec![2, 3]);
    // pid 2: written every 180 s: live for 540 s after its newest value.
    assert_eq!(at(1180 + 540), vec![2, 3]);
    assert_eq!(at(1180 + 541), vec![3]);
    // pid 3: a 600 s gap is its interval: 1,800 s.
    assert_eq!(at(1600 + 1800), vec![3]);
    assert_eq!(at(1600 + 1801), Vec::<i32>::new());
    // Nothing live: no family at all (no HELP/TYPE without a series).
    assert_eq!(render(&s, 10_000, &[]), "");
}

#[test]
fn other_metrics_keep_cc_metric_store_levels() {
    let s = minute_store();
    s.write(&["alex", "a903", "hwthread12"], "cpu-load", 120, 0.5)
        .unwrap();
    s.write(&["alex", "a903"], "mem_used", 120, 7.0).unwrap();
    s.write(&["alex", "a\"9", "socket0", "core3"], "mem_used", 120, 1.0)
        .unwrap();
    let text = render(&s, 120, &[]);
    let expected = "\
# HELP wasmon_cpu_load cpu-load as stored (no agent describes it: a gauge, units not known)
# TYPE wasmon_cpu_load gauge
wasmon_cpu_load{cluster=\"alex\",hostname=\"a903\",type=\"hwthread\",type_id=\"12\"} 0.5
# HELP wasmon_mem_used mem_used as stored (no agent describes it: a gauge, units not known)
# TYPE wasmon_mem_used gauge
wasmon_mem_used{cluster=\"alex\",hostname=\"a903\"} 7
wasmon_mem_used{cluster=\"alex\",hostname=\"a\\\"9\",type=\"socket\",type_id=\"0\",stype=\"core\",stype_id=\"3\"} 1
";
    assert_eq!(text, expected);
}

#[test]
fn a_family_name_is_exposed_once() {
    let s = minute_store();
    // Both sanitise to wasmon_mem_used; the first in name order keeps the family.
    s.write(&["c", "h"], "mem-used", 120, 1.0).unwrap();
    s.write(&["c", "h"], "mem_used", 120, 2.0).unwrap();
    // A name wasmon's own counters hold is not exposed from the store.
    s.write(&["c", "h"], "guest_calls_total", 120, 3.0).unwrap();
    let text = render(&s, 120, &["wasmon_guest_calls_total"]);
    assert_eq!(text.matches("# TYPE").count(), 1, "{text}");
    assert!(text.contains("wasmon_mem_used{cluster=\"c\",hostname=\"h\"} 1\n"));
    assert!(!text.contains("} 2\n") && !text.contains("} 3\n"), "{text}");
}

#[test]
fn names_are_sanitised() {
    assert_eq!(
        snake_case("wasmon_mem_util_swapCached"),
        "wasmon_mem_util_swap_cached"
    );
    assert_eq!(snake_case("wasmon_hinv_NUMA"), "wasmon_hinv_numa");
    assert_eq!(snake_case("wasmon_a_IOps"), "wasmon_a_iops");
    assert_eq!(
        snake_case("wasmon_mem_util_directMap2M"),
        "wasmon_mem_util_direct_map2m"
    );
    assert_eq!(sanitize_metric_name("", "mem-used.total"), "mem_used_total");
    assert_eq!(sanitize_metric_name("", "1x"), "_1x");
    assert_eq!(sanitize_metric_name("ccms_", "flops any"), "ccms_flops_any");
    assert_eq!(sanitize_metric_name("", "é"), "_");
}
