use super::*;

/// A synthesized tree in the shape of an IB host's sysfs (a ConnectX-5 `mlx5_0` with one
/// InfiniBand port and its IPoIB interface, and a RoCE `mlx5_1` whose connection-manager
/// counters live under /sys/class/infiniband_cm), removed when dropped.
struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tree(name: &str) -> Tree {
    let root = std::env::temp_dir().join(format!("ib-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let put = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let ib = "sys/class/infiniband/mlx5_0";
    put(&format!("{ib}/node_type"), "1: CA\n");
    put(&format!("{ib}/node_guid"), "0c42:a103:0065:3a5c\n");
    put(&format!("{ib}/fw_ver"), "16.35.2000\n");
    put(
        &format!("{ib}/ports/1/gids/0"),
        "fe80:0000:0000:0000:0c42:a103:0065:3a5c\n",
    );
    put(&format!("{ib}/ports/1/cap_mask"), "0x2651e84a\n");
    put(&format!("{ib}/ports/1/lid"), "0x1a\n");
    for (group, file, v) in [
        ("cm_rx_msgs", "req", "4021"),
        ("cm_tx_msgs", "rep", "4019"),
        ("cm_tx_retries", "req", "N/A"),
        ("cm_rx_duplicates", "sidr_req", "7"),
    ] {
        put(&format!("{ib}/ports/1/{group}/{file}"), &format!("{v}\n"));
    }
    // The IPoIB interface on port 1 (dev_port 0), and one on another port.
    put(&format!("{ib}/device/net/ib0/dev_port"), "0\n");
    put(&format!("{ib}/device/net/ib1/dev_port"), "1\n");
    let roce = "sys/class/infiniband/mlx5_1";
    put(&format!("{roce}/node_type"), "1: CA\n");
    put(
        &format!("{roce}/ports/1/gids/0"),
        "fe80:0000:0000:0000:0e42:a1ff:fe65:3a5d\n",
    );
    put(&format!("{roce}/ports/1/cap_mask"), "0x04010000\n");
    put(&format!("{roce}/ports/1/link_layer"), "Ethernet\n");
    put(&format!("{roce}/device/net/ens1f1/dev_id"), "0x0\n");
    put("sys/class/infiniband_cm/mlx5_1/1/cm_rx_msgs/req", "12\n");
    put("sys/class/infiniband_cm/mlx5_1/1/cm_tx_msgs/dreq", "3\n");
    // An iWARP adapter with a GID that is not one, and a mask that is not a number.
    let iw = "sys/class/infiniband/irdma0";
    put(&format!("{iw}/node_type"), "4: RNIC\n");
    put(&format!("{iw}/ports/1/gids/0"), "fe80::1\n");
    put(&format!("{iw}/ports/1/cap_mask"), "lots\n");
    Tree(root)
}

/// `name`'s values by instance, with their atoms shown for comparing.
fn values(ib: &Infiniband, name: &str) -> Vec<(String, String)> {
    let id = ib.catalog.names().lookup(name).unwrap();
    let set = ib.fetch_ids(&[id]).pop().unwrap();
    let Ok(values) = set.values else {
        panic!("{name}: an error")
    };
    values
        .into_iter()
        .map(|v| {
            let shown = format!("{:?}", v.value);
            (v.instance, shown.trim_start_matches("Atom::").to_string())
        })
        .collect()
}

fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
    want.iter()
        .map(|(i, v)| (i.to_string(), v.to_string()))
        .collect()
}

#[test]
fn pmids_are_pmdainfinibands_every_name_once() {
    let c = Catalog::new(DOMAIN, METRICS);
    let p = |cluster, item| Pmid {
        domain: 91,
        cluster,
        item,
    };
    for (name, id) in [
        ("infiniband.hca.transport", p(0, 16)),
        ("infiniband.hca.vendor_id", p(0, 18)),
        ("infiniband.hca.res.srq", p(0, 25)),
        ("infiniband.port.guid", p(0, 7)),
        ("infiniband.port.gid_prefix", p(0, 8)),
        ("infiniband.port.capabilities", p(0, 13)),
        ("infiniband.port.max_mtu", p(0, 28)),
        ("infiniband.port.active_mtu", p(0, 29)),
        ("infiniband.port.netdev_name", p(0, 31)),
        ("infiniband.port.select", p(1, 20)),
        ("infiniband.port.counter_select", p(1, 21)),
        ("infiniband.control.query_timeout", p(2, 0)),
        ("infiniband.control.hiwat", p(2, 1)),
        ("infiniband.port.switch.in.bytes", p(3, 0)),
        ("infiniband.port.switch.total.packets", p(3, 5)),
        ("infiniband.port.cm.rx_duplicates.apr", p(4, 1)),
        ("infiniband.port.cm.rx_msgs.req", p(4, 19)),
        ("infiniband.port.cm.tx_msgs.apr", p(4, 23)),
        ("infiniband.port.cm.tx_retries.sidr_req", p(4, 44)),
        ("infiniband.port.diag.rq.dup", p(4, 45)),
    ] {
        assert_eq!(c.names().lookup(name).unwrap(), id, "{name}");
    }
    // pmdainfiniband's pmns has 137 leaves.
    assert_eq!(METRICS.len(), 137);
    let mut pmids: Vec<(u32, u32)> = METRICS.iter().map(|m| (m.cluster, m.item)).collect();
    pmids.sort();
    pmids.dedup();
    assert_eq!(pmids.len(), METRICS.len());
    let mut names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), METRICS.len());
}

#[test]
fn port_identity_capabilities_and_interface_from_sysfs() {
    let t = tree("identity");
    let ib = Infiniband::at(&t.0);
    assert_eq!(
        values(&ib, "infiniband.port.guid"),
        pairs(&[
            ("mlx5_0:1", "Text(\"0c42:a103:0065:3a5c\")"),
            ("mlx5_1:1", "Text(\"0e42:a1ff:fe65:3a5d\")"),
        ]),
        "a GID that is not one (irdma0) has no value"
    );
    assert_eq!(
        values(&ib, "infiniband.port.gid_prefix"),
        pairs(&[
            ("mlx5_0:1", &format!("Uint({})", 0xfe80_0000_0000_0000u64)),
            ("mlx5_1:1", &format!("Uint({})", 0xfe80_0000_0000_0000u64)),
        ])
    );
    // 0x2651e84a: bits 1, 3, 6, 11, 16, 20, 22, 25 named; 13, 14, 15, 26, 29 not.
    assert_eq!(
        values(&ib, "infiniband.port.capabilities")[0],
        (
            "mlx5_0:1".to_string(),
            "Text(\"SM,Trap,SLMapping,SystemImageGUID,CommunicatonManagement,VendorClass,CapabilityMaskNotice,ClientRegistration\")".to_string()
        )
    );
    assert_eq!(values(&ib, "infiniband.port.capabilities").len(), 2);
    assert_eq!(
        values(&ib, "infiniband.port.netdev_name"),
        pairs(&[
            ("mlx5_0:1", "Text(\"ib0\")"),
            ("mlx5_1:1", "Text(\"ens1f1\")"),
        ])
    );
    assert_eq!(
        values(&ib, "infiniband.hca.transport"),
        pairs(&[
            ("irdma0", "Text(\"iWARP\")"),
            ("mlx5_0", "Text(\"Infinband\")"),
            ("mlx5_1", "Text(\"Infinband\")"),
        ])
    );
}

#[test]
fn cm_counters_from_the_port_or_ib_cm_and_no_value_for_what_sysfs_lacks() {
    let t = tree("cm");
    let ib = Infiniband::at(&t.0);
    assert_eq!(
        values(&ib, "infiniband.port.cm.rx_msgs.req"),
        pairs(&[("mlx5_0:1", "Uint(4021)"), ("mlx5_1:1", "Uint(12)")])
    );
    assert_eq!(
        values(&ib, "infiniband.port.cm.tx_msgs.rep"),
        pairs(&[("mlx5_0:1", "Uint(4019)")])
    );
    assert_eq!(
        values(&ib, "infiniband.port.cm.tx_msgs.dreq"),
        pairs(&[("mlx5_1:1", "Uint(3)")])
    );
    assert_eq!(
        values(&ib, "infiniband.port.cm.rx_duplicates.sidr_req"),
        pairs(&[("mlx5_0:1", "Uint(7)")])
    );
    assert!(
        values(&ib, "infiniband.port.cm.tx_retries.req").is_empty(),
        "N/A is no number"
    );
    for name in [
        "infiniband.hca.vendor_id",
        "infiniband.hca.res.qp",
        "infiniband.port.max_mtu",
        "infiniband.port.active_mtu",
        "infiniband.port.select",
        "infiniband.port.switch.in.bytes",
        "infiniband.control.query_timeout",
        "infiniband.control.hiwat",
    ] {
        assert!(values(&ib, name).is_empty(), "{name}");
    }
    // The metrics read before go on as ever beside them.
    assert_eq!(
        values(&ib, "infiniband.port.lid"),
        pairs(&[("mlx5_0:1", "Int(26)")])
    );
}

#[test]
fn gids_guids_and_capability_masks() {
    assert_eq!(
        gid_halves("fe80:0000:0000:0000:0002:c903:00a1:b2c1\n"),
        Some((0xfe80_0000_0000_0000, 0x0002_c903_00a1_b2c1))
    );
    assert_eq!(gid_halves("fe80::1"), None);
    assert_eq!(gid_halves("fe80:0:0:0:0:0:0:1x"), None);
    assert_eq!(gid_halves("fe80:0:0:0:0:0:0:0:1"), None);
    assert_eq!(gid_halves("12345:0:0:0:0:0:0:1"), None);
    assert_eq!(guid_text(0x0002_c903_00a1_b2c1), "0002:c903:00a1:b2c1");
    assert_eq!(capabilities(0), "");
    assert_eq!(
        capabilities(1 << 1 | 1 << 25 | 1 << 4),
        "SM,ClientRegistration"
    );
}
