//! The bundled guest agents that read /proc and /sys through read-only directory grants
//! (infiniband, denki, hwmon, lustre): their values on captured trees of other machines against what
//! node_exporter reports for the same trees, hostile trees, PCP's pminfo through the daemon's
//! PCP port, what a bundled agent brings to its `[[agent]]` entry, and `when-present`.

mod lustre;
pub mod trees;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wasmon::host::agent_types::{Atom, NsError, Pmid};
use wasmon::host::{AgentInstance, AgentWorld, DirGrant, Grants, GuestConfig, Image};

use crate::common::*;

/// The bundled agent `name` reading `root/sys` as its `/sys`.
fn agent_on(name: &str, root: &Path) -> AgentInstance {
    agent_with(name, root, &["sys"])
}

/// The bundled agent `name` reading `root/D` as its `/D` for each of `dirs`.
fn agent_with(name: &str, root: &Path, dirs: &[&str]) -> AgentInstance {
    let rt = runtime();
    let compiled = rt.compile(&guest_bytes(name), name).unwrap();
    let mut cfg = GuestConfig::new(name, "{}");
    cfg.deadline = Duration::from_secs(5);
    cfg.grants = Grants {
        dirs: dirs
            .iter()
            .map(|d| {
                std::fs::create_dir_all(root.join(d)).unwrap();
                DirGrant {
                    host: root.join(d),
                    guest: format!("/{d}"),
                    read_only: true,
                }
            })
            .collect(),
        ..Default::default()
    };
    Image::<AgentWorld>::load(&rt, &compiled, cfg).unwrap()
}

/// Instance -> value of the leaf `name`.
fn values(a: &mut AgentInstance, name: &str) -> BTreeMap<String, Atom> {
    let id = a
        .lookup_name(name)
        .unwrap()
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let sets = a.fetch(&[id]).unwrap();
    sets[0]
        .values
        .as_ref()
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
        .iter()
        .map(|v| (v.instance.clone(), v.value.clone()))
        .collect()
}

/// The start of a config whose guests-dir holds the built `agent`: `guest = "NAME"` finds it
/// there (and gets the bundled agent's defaults by its name) whichever build of the daemon
/// runs.
fn guests_dir_with(dir: &Path, agent: &str) -> String {
    std::fs::create_dir_all(dir.join("guests")).unwrap();
    std::fs::copy(
        guest_path(agent),
        dir.join("guests").join(format!("{agent}.wasm")),
    )
    .unwrap();
    format!("guests-dir = \"guests\"\n{NO_PROCFS}")
}

fn one(a: &mut AgentInstance, name: &str, instance: &str) -> Option<Atom> {
    values(a, name).remove(instance)
}

#[test]
fn infiniband_on_a_captured_tree_reads_what_node_exporter_reads() {
    let tree = tempfile::tempdir().unwrap();
    trees::infiniband(tree.path());
    let mut ib = agent_on("infiniband", tree.path());
    assert_eq!(
        ib.lookup_name("infiniband.port.in.bytes").unwrap(),
        Ok(Pmid {
            domain: 91,
            cluster: 1,
            item: 0
        }),
        "pmdainfiniband's PMID"
    );
    assert_eq!(
        ib.lookup_name("infiniband.port").unwrap(),
        Err(NsError::NonLeaf)
    );
    // node_infiniband_legacy_data_received_bytes_total{device="mlx4_0",port="1"} 1.8527668e+07:
    // the 64-bit counters_ext copy, in 4-octet words, times 4 (port 2 the same).
    for port in ["mlx4_0:1", "mlx4_0:2"] {
        assert_eq!(
            one(&mut ib, "infiniband.port.in.bytes", port),
            Some(Atom::Int(18_527_668))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.out.bytes", port),
            Some(Atom::Int(14_933_760))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.total.bytes", port),
            Some(Atom::Int(33_461_428))
        );
        // legacy_{unicast,multicast}_packets_{received,transmitted}_total
        assert_eq!(
            one(&mut ib, "infiniband.port.in.ucast_packets", port),
            Some(Atom::Int(61_148))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.out.ucast_packets", port),
            Some(Atom::Int(61_239))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.in.mcast_packets", port),
            Some(Atom::Int(93))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.out.mcast_packets", port),
            Some(Atom::Int(16))
        );
        // legacy_packets_received_total 0: counters_ext wins over counters' 6825908347.
        assert_eq!(
            one(&mut ib, "infiniband.port.in.packets", port),
            Some(Atom::Int(0))
        );
        // The raw data counter, in words.
        assert_eq!(
            one(&mut ib, "infiniband.port.in.data", port),
            Some(Atom::Int(4_631_917))
        );
        // state_id 4, physical_state_id 5, rate_bytes_per_second 5e9 (40 Gbit/s).
        assert_eq!(
            one(&mut ib, "infiniband.port.state", port),
            Some(Atom::Text("Active".into()))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.phystate", port),
            Some(Atom::Text("Link Up".into()))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.rate", port),
            Some(Atom::Int(40))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.linkwidth", port),
            Some(Atom::Int(4))
        );
        assert_eq!(
            one(&mut ib, "infiniband.port.linkspeed", port),
            Some(Atom::Text("10.0 Gbps".into()))
        );
    }
    // port_discards_transmitted_total{device="mlx4_0",port="1"} 5; port 2 has no such file.
    let drops = values(&mut ib, "infiniband.port.out.errors.drop");
    assert_eq!(drops.get("mlx4_0:1"), Some(&Atom::Int(5)));
    assert!(!drops.contains_key("mlx4_0:2"));
    // i40iw0 has no PMA: every counter reads "N/A (no PMA)", so no counter value, while its
    // attributes are there (rate_bytes_per_second 1.25e9: 10 Gbit/s).
    assert!(!values(&mut ib, "infiniband.port.in.bytes").contains_key("i40iw0:1"));
    assert!(!values(&mut ib, "infiniband.port.total.errors.symbol").contains_key("i40iw0:1"));
    assert_eq!(
        one(&mut ib, "infiniband.port.rate", "i40iw0:1"),
        Some(Atom::Int(10))
    );
    // node_infiniband_info{board_id, firmware_version, hca_type}.
    assert_eq!(
        one(&mut ib, "infiniband.hca.board_id", "mlx4_0"),
        Some(Atom::Text("SM_1141000001000".into()))
    );
    assert_eq!(
        one(&mut ib, "infiniband.hca.fw_ver", "i40iw0"),
        Some(Atom::Text("0.2".into()))
    );
    assert_eq!(
        one(&mut ib, "infiniband.hca.ca_type", "mlx4_0"),
        Some(Atom::Text("MT4099".into()))
    );
    assert_eq!(
        one(&mut ib, "infiniband.hca.numports", "mlx4_0"),
        Some(Atom::Int(2))
    );
}

#[test]
fn denki_and_hwmon_on_captured_trees_read_what_node_exporter_reads() {
    let tree = tempfile::tempdir().unwrap();
    trees::powercap(tree.path());
    trees::hwmon(tree.path());
    let mut denki = agent_on("denki", tree.path());
    assert_eq!(
        denki.lookup_name("denki.rapl.sysfs").unwrap(),
        Ok(Pmid {
            domain: 156,
            cluster: 0,
            item: 0
        })
    );
    // node_rapl_package_joules_total 240422.366267, node_rapl_core_joules_total
    // 118821.284256; pmdadenki keeps whole joules.
    let joules = values(&mut denki, "denki.rapl.sysfs");
    assert_eq!(joules.get("package-0"), Some(&Atom::Uint(240_422)));
    assert_eq!(joules.get("core"), Some(&Atom::Uint(118_821)));

    let mut hw = agent_on("hwmon", tree.path());
    let temps = values(&mut hw, "hwmon.temp");
    // node_hwmon_temp_celsius{chip="platform_coretemp_0",sensor="temp1"} 55, temp2 54, ...
    assert_eq!(
        temps.get("coretemp-0:Physical id 0"),
        Some(&Atom::Real(55.0))
    );
    assert_eq!(temps.get("coretemp-0:Core 0"), Some(&Atom::Real(54.0)));
    assert_eq!(temps.get("coretemp-1:Core 3"), Some(&Atom::Real(50.0)));
    assert_eq!(temps.len(), 10);
    // node_hwmon_temp_crit_celsius 100; node_hwmon_fan_rpm{chip="nct6779",sensor="fan2"} 1098;
    // node_hwmon_in_volts in0 0.792, in1 1.024; node_thermal_zone_temp 12.376.
    assert_eq!(
        one(&mut hw, "hwmon.temp_crit", "coretemp-1:Core 0"),
        Some(Atom::Real(100.0))
    );
    assert_eq!(
        values(&mut hw, "hwmon.fan"),
        BTreeMap::from([("nct6779:fan2".to_string(), Atom::Real(1098.0))])
    );
    let volts = values(&mut hw, "hwmon.voltage");
    assert_eq!(volts.get("nct6779:in0"), Some(&Atom::Real(0.792)));
    assert_eq!(volts.get("nct6779:in1"), Some(&Atom::Real(1.024)));
    assert_eq!(
        values(&mut hw, "hwmon.thermal.temp"),
        BTreeMap::from([("thermal_zone0:cpu-thermal".to_string(), Atom::Real(12.376))])
    );
}

#[test]
fn absent_hardware_answers_no_instances_and_a_root_only_counter_no_value() {
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir(empty.path().join("sys")).unwrap();
    for (agent, name) in [
        ("infiniband", "infiniband.port.in.bytes"),
        ("infiniband", "infiniband.hca.fw_ver"),
        ("denki", "denki.rapl.sysfs"),
        ("hwmon", "hwmon.temp"),
        ("hwmon", "hwmon.thermal.temp"),
    ] {
        let mut a = agent_on(agent, empty.path());
        assert!(values(&mut a, name).is_empty(), "{name}");
    }
}

#[test]
fn a_root_only_energy_counter_has_no_value_and_one_log_line() {
    // energy_uj readable by root only: the sandbox's open is refused (a FIFO here, which the
    // grant refuses as the kernel refuses a non-root reader: "permission denied").
    let dir = tempfile::tempdir().unwrap();
    trees::powercap(dir.path());
    let uj = dir
        .path()
        .join("sys/class/powercap/intel-rapl:0:0/energy_uj");
    std::fs::remove_file(&uj).unwrap();
    let c = std::ffi::CString::new(uj.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path of our temporary tree.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o400) }, 0);
    let config = config_file(
        dir.path(),
        &format!(
            "{}[[agent]]\nname = \"denki\"\nguest = \"denki\"\n\
             grants = {{ dirs = [{{ host = \"sys\", guest = \"/sys\" }}] }}\n",
            guests_dir_with(dir.path(), "denki")
        ),
    );
    let d = DaemonProcess::start(&config);
    for _ in 0..3 {
        let v = fetch_api(&d, "denki.rapl.sysfs");
        let values = v[0]["values"].as_array().unwrap_or_else(|| panic!("{v}"));
        assert_eq!(values.len(), 1, "package-0 only, and no error: {v}");
        assert_eq!(values[0][0], "package-0");
        assert_eq!(values[0][1], 240_422.0);
    }
    let log = d.stderr.lock().unwrap().clone();
    assert_eq!(log.matches("may be read by root only").count(), 1, "{log}");
}

#[test]
fn hostile_trees_cost_the_agent_only_what_they_break() {
    let tree = tempfile::tempdir().unwrap();
    trees::infiniband(tree.path());
    let port = tree
        .path()
        .join("sys/devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx4_0/ports/1");
    // A counter that is not a number, a 100 MB counter file, a symlink loop in place of a
    // counter, and an HCA whose class link leads outside the grant.
    std::fs::write(port.join("counters/port_xmit_discards"), "lots\n").unwrap();
    std::fs::File::create(port.join("counters/symbol_error"))
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    std::fs::remove_file(port.join("counters/link_downed")).unwrap();
    std::os::unix::fs::symlink("link_downed", port.join("counters/link_downed")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    trees::infiniband(outside.path());
    let escaped = outside.path().join("sys/class/infiniband/mlx4_0");
    std::os::unix::fs::symlink(
        std::fs::canonicalize(&escaped).unwrap(),
        tree.path().join("sys/class/infiniband/evil0"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../../../..", tree.path().join("sys/class/infiniband/up0"))
        .unwrap();

    let mut ib = agent_on("infiniband", tree.path());
    let drops = values(&mut ib, "infiniband.port.out.errors.drop");
    assert!(!drops.contains_key("mlx4_0:1"), "not a number: no value");
    assert!(!values(&mut ib, "infiniband.port.total.errors.symbol").contains_key("mlx4_0:1"));
    assert!(!values(&mut ib, "infiniband.port.total.errors.link").contains_key("mlx4_0:1"));
    let bytes = values(&mut ib, "infiniband.port.in.bytes");
    assert_eq!(
        bytes.get("mlx4_0:1"),
        Some(&Atom::Int(18_527_668)),
        "the rest is read"
    );
    assert!(
        bytes
            .keys()
            .all(|k| !k.starts_with("evil0") && !k.starts_with("up0")),
        "{bytes:?}"
    );
    let fw = values(&mut ib, "infiniband.hca.fw_ver");
    assert!(
        !fw.contains_key("evil0"),
        "nothing read through a link out of the grant: {fw:?}"
    );
    // The whole fetch of every metric stays within the deadline and the memory cap.
    let ids: Vec<Pmid> = (0..28)
        .map(|item| Pmid {
            domain: 91,
            cluster: 1,
            item,
        })
        .chain((45..68).map(|item| Pmid {
            domain: 91,
            cluster: 4,
            item,
        }))
        .collect();
    let sets = ib.fetch(&ids).unwrap();
    assert_eq!(sets.len(), ids.len());
}

#[test]
fn pminfo_reads_a_guest_agent_through_the_pcp_port() {
    let dir = tempfile::tempdir().unwrap();
    trees::hwmon(dir.path());
    let pcp = free_port();
    let config = config_file(
        dir.path(),
        &format!(
            "{}[[agent]]\nname = \"hwmon\"\nguest = \"hwmon\"\n\
             grants = {{ dirs = [{{ host = \"sys\", guest = \"/sys\" }}] }}\n\
             [pcp]\nlisten = \"127.0.0.1:{pcp}\"\n",
            guests_dir_with(dir.path(), "hwmon")
        ),
    );
    let d = DaemonProcess::start(&config);
    let host = format!("localhost:{pcp}");
    let out = output_ok(std::process::Command::new("pminfo").args([
        "-h",
        &host,
        "-f",
        "-T",
        "hwmon.temp",
        "hwmon.fan",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("inst [") && text.contains("\"coretemp-0:Core 0\"] value 54"),
        "{text}"
    );
    assert!(text.contains("\"nct6779:fan2\"] value 1098"), "{text}");
    assert!(text.contains("Speed of a fan"), "its own help text: {text}");
    let out = output_ok(std::process::Command::new("pminfo").args([
        "-h",
        &host,
        "-m",
        "hwmon.thermal.temp",
    ]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("PMID: 180.1.0"),
        "{:?}",
        out
    );
    assert!(d.get("/api/healthcheck").is_ok());
}

fn fetch_api(d: &DaemonProcess, name: &str) -> Value {
    d.get(&format!("/api/fetch?name={name}"))
        .unwrap()
        .json()
        .unwrap()
}

#[test]
fn a_bundled_agent_needs_only_its_name_and_when_present_is_checked_at_every_reload() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("hw")).unwrap();
    // `foo` brings its domain (44) and PMNS; the grant and when-present are this test's.
    let config = config_file(
        dir.path(),
        &format!(
            "{NO_PROCFS}[[agent]]\nname = \"foo\"\nguest = \"foo\"\nwhen-present = \"/hw/card0\"\n\
             grants = {{ dirs = [{{ host = \"hw\", guest = \"/hw\" }}] }}\n"
        ),
    );
    let d = DaemonProcess::start(&config);
    let ops = |d: &DaemonProcess| fetch_api(d, "foo.count.ops")[0]["values"][0][1].as_f64();
    assert_eq!(ops(&d), None, "not run while /hw/card0 is absent");
    assert!(
        d.stderr.lock().unwrap().contains("does not exist"),
        "the log says why"
    );

    std::fs::write(dir.path().join("hw/card0"), "").unwrap();
    let outcome = d.reload();
    assert!(
        outcome.to_string().contains("foo"),
        "started at the reload: {outcome}"
    );
    assert!(ops(&d).is_some(), "{}", fetch_api(&d, "foo.count.ops"));

    std::fs::remove_file(dir.path().join("hw/card0")).unwrap();
    d.reload();
    assert_eq!(ops(&d), None, "stopped at the next reload");
}
