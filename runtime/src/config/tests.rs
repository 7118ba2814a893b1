//! Tests of the config's parsing and checks: the embedded default, a bundled agent's
//! defaults, and what the sections refuse.

use super::*;

/// What parsing `toml` refuses, as the daemon says it.
fn refused(toml: &str) -> String {
    Config::parse(toml).unwrap_err().to_string()
}

#[test]
fn default_config_parses() {
    let c = Config::parse(DEFAULT).unwrap();
    assert_eq!(c.daemon.listen, "127.0.0.1:8082".parse().unwrap());
    assert_eq!(c.pipelines.len(), 3);
    // linux, proc, foo, mmv, and the guest collectors gated by `when-present`.
    let names: Vec<&str> = c.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "linux",
            "proc",
            "foo",
            "mmv",
            "infiniband",
            "denki",
            "hwmon",
            "lustre",
            "nfsclient",
            "slurm"
        ]
    );
    // The C and Python agents run only where their files are: nothing to build elsewhere.
    for name in ["nfsclient", "slurm"] {
        let a = c.agents.iter().find(|a| a.name == name).unwrap();
        assert!(a.when_present.is_some(), "{name}");
    }
    assert_eq!(c.guest_defaults.memory, 64 << 20);
}

#[test]
fn a_bundled_agent_brings_its_domain_and_pmns_and_an_entry_may_override_them() {
    let c = Config::parse("[[agent]]\nname = \"f\"\nguest = \"foo\"\n").unwrap();
    let d = crate::guests::agent_defaults("foo").unwrap();
    assert_eq!(c.agents[0].domain, Some(d.domain));
    assert_eq!(c.agents[0].pmns.as_deref(), Some(d.pmns));
    let c = Config::parse("[[agent]]\nname = \"f\"\nguest = \"foo\"\ndomain = 99\n").unwrap();
    assert_eq!(c.agents[0].domain, Some(99));
    // Not a bundled agent: the entry must say everything.
    let e = Config::parse("[[agent]]\nname = \"f\"\nguest = \"x/foo.wasm\"\n").unwrap_err();
    assert!(
        format!("{e:#}").contains("needs `domain` and `pmns`"),
        "{e:#}"
    );
}

#[test]
fn when_present_is_a_guest_path_under_a_granted_directory() {
    let agent = |extra: &str| {
        Config::parse(&format!(
            "[[agent]]\nname = \"f\"\nguest = \"foo\"\n{extra}\n\
             grants = {{ dirs = [{{ host = \"/srv/tree/sys\", guest = \"/sys\" }}] }}\n"
        ))
    };
    let c = agent("when-present = \"/sys/class/infiniband\"").unwrap();
    assert_eq!(
        c.agents[0].when_present_on_host(Path::new("/etc")),
        Some(PathBuf::from("/srv/tree/sys/class/infiniband"))
    );
    for bad in ["when-present = \"/proc/x\"", "when-present = \"sys/x\""] {
        let e = agent(bad).unwrap_err();
        assert!(
            format!("{e:#}").contains("under one of the agent's grants.dirs"),
            "{e:#}"
        );
    }
    let e =
        Config::parse("[[agent]]\nname = \"linux\"\nnative = \"linux\"\nwhen-present = \"/sys\"\n")
            .unwrap_err();
    assert!(format!("{e:#}").contains("for guest agents"), "{e:#}");
}

#[test]
fn native_agents_take_a_root_and_device_filters_guests_do_not() {
    let c = Config::parse(
        "[[agent]]\nname = \"linux\"\nnative = \"linux\"\nroot = \"/srv/tree\"\n\
         [agent.devices]\ndisks = { exclude = [\"loop*\"] }\n",
    )
    .unwrap();
    let a = &c.agents[0];
    assert_eq!(a.root.as_deref(), Some(Path::new("/srv/tree")));
    assert!(!a.devices.disks.admits("loop0") && a.devices.disks.admits("sda"));
    assert_eq!(a.served_domain(), 60);
    let e = refused(
        "[[agent]]\nname = \"g\"\nguest = \"foo\"\ndomain = 44\npmns = \"root { foo 44:*:* }\"\nroot = \"/\"\n",
    );
    assert!(e.contains("`root`"), "{e}");
    let e =
        refused("[[agent]]\nname = \"linux\"\nnative = \"linux\"\n[agent.devices]\ndisk = {}\n");
    assert!(e.contains("disk"), "{e}");
}

#[test]
fn unknown_fields_and_bad_values_name_the_field() {
    for (toml, names) in [
        (
            "[daemon]\nlisten = \"127.0.0.1:1\"\nlisten-port = 3\n",
            &["listen-port"][..],
        ),
        (
            "[guest-defaults]\ndeadline = \"10 parsecs\"\n",
            &["deadline", "parsecs"],
        ),
        (
            "[[pipeline]]\nname = \"a\"\nsinks = [\"nowhere\"]\n",
            &["nowhere"],
        ),
        (
            "[[pipeline]]\nname = \"a\"\n[[pipeline]]\nname = \"a\"\n",
            &["used twice"],
        ),
    ] {
        let e = refused(toml);
        assert!(names.iter().all(|n| e.contains(n)), "{toml}: {e}");
    }
}

#[test]
fn agent_feeds_name_existing_pipelines_and_something_to_poll() {
    let agent = |feed: &str, interval: &str| {
        format!(
            "[[pipeline]]\nname = \"p\"\n[[agent]]\nname = \"linux\"\nnative = \"linux\"\n\
             {interval}[[agent.feed]]\n{feed}\n"
        )
    };
    let every = "poll-interval = \"10s\"\npipeline = \"p\"\n";
    let c = Config::parse(&agent("pipeline = \"p\"\nnames = [\"mem\"]", every)).unwrap();
    assert_eq!(c.agents[0].feeds[0].names, ["mem"]);
    for (feed, interval, why) in [
        (
            "pipeline = \"q\"\nnames = [\"mem\"]",
            every,
            "no pipeline named \"q\"",
        ),
        (
            "pipeline = \"p\"\nnames = []",
            every,
            "names must not be empty",
        ),
        (
            "pipeline = \"p\"\nnames = [\"mem\"]",
            "",
            "needs the agent's `poll-interval`",
        ),
    ] {
        let e = refused(&agent(feed, interval));
        assert!(e.contains("feed[0]") && e.contains(why), "{e}");
    }
}

/// The Debian package's /etc/wasmon/wasmon.toml is the embedded default with its state in
/// /var/lib/wasmon: regenerate it when the default changes (the diff names the lines).
#[test]
fn packaged_config_is_the_default_with_state_in_var_lib() {
    let packaged = include_str!("../../debian/wasmon.toml");
    let expected = DEFAULT
        .replace(
            "data-dir = \"wasmon-data\"\n",
            "data-dir = \"/var/lib/wasmon\"\n",
        )
        .replace(
            "guests-dir = \"\"\n",
            "guests-dir = \"/var/lib/wasmon/guests\"\n",
        );
    assert_ne!(
        expected, DEFAULT,
        "the default's data-dir or guests-dir line moved"
    );
    assert_eq!(
        packaged, expected,
        "runtime/debian/wasmon.toml is out of date"
    );
    let c = Config::parse(packaged).unwrap();
    assert_eq!(c.daemon.data_dir, PathBuf::from("/var/lib/wasmon"));
    assert_eq!(c.daemon.guests_dir, PathBuf::from("/var/lib/wasmon/guests"));
}

#[test]
fn the_pcp_section() {
    let c = Config::parse(DEFAULT).unwrap();
    assert_eq!(c.pcp.listen, Some("127.0.0.1:44321".parse().unwrap()));
    let c = Config::parse("").unwrap();
    assert_eq!(c.pcp.listen, None, "no [pcp]: no port");
    let e = refused("[pcp]\nlisten = \"127.0.0.1:1\"\nport = 3\n");
    assert!(e.contains("port"), "{e}");
}

/// Every section that talks to NATS takes the same credential and TLS keys (declared once by
/// `nats::section!`), and its errors name the key and the section.
#[test]
fn nats_sections_take_the_same_auth_keys_and_errors_name_key_and_section() {
    let sections = [
        (
            "[nats]\naddress = 'nats://h:4222'\nsubscriptions = []\n",
            "nats.",
        ),
        ("[notify.nats]\naddress = 'nats://h:4222'\n", "notify.nats."),
        (
            "[fabric]\nenabled = true\nnats = 'nats://h:4222'\nagent = 'a'\n",
            "fabric.",
        ),
        ("[fleet]\nnats = 'nats://h:4222'\nname = 'prod'\n", "fleet."),
        (
            "[[sink]]\nname = 's'\ntype = 'jetstream'\nurl = 'nats://h:4222'\nsubject = 'x'\nstream = 'X'\n",
            "sink \"s\": ",
        ),
    ];
    let all = "username = 'u'\npassword = 'p'\ntoken-file = 't'\ncreds-file-path = 'c'\n\
               tls-ca = 'ca.pem'\ntls-cert = 'c.pem'\ntls-key = 'k.pem'\n";
    let want = crate::nats::Auth {
        username: Some("u".into()),
        password: Some("p".into()),
        token_file: Some("t".into()),
        creds_file: Some("c".into()),
        tls_ca: Some("ca.pem".into()),
        tls_cert: Some("c.pem".into()),
        tls_key: Some("k.pem".into()),
    };
    for (section, prefix) in sections {
        let c = Config::parse(&format!("{section}{all}")).unwrap();
        let auth = [
            c.nats.as_ref().map(|n| n.connection().auth),
            c.notify.nats.as_ref().map(|n| n.connection().auth),
            Some(c.fabric.connection().auth).filter(|a| a.username.is_some()),
            c.fleet.as_ref().map(|f| f.connection().auth),
            c.sinks.first().map(|s| s.connection().auth),
        ];
        let got: Vec<_> = auth.into_iter().flatten().collect();
        assert_eq!(got, [&want], "{section}");
        let header = section.lines().next().unwrap();
        for (extra, names) in [
            ("usrname = 'u'", "unknown field `usrname`"),
            ("tls-ca = 5", "tls-ca = 5"),
        ] {
            let e = refused(&format!("{section}{extra}\n"));
            assert!(e.contains(names) && e.contains(header), "{section}: {e}");
        }
        let e = refused(&format!("{section}username = 'u'\n"));
        assert!(
            e.contains(&format!(
                "{prefix}username: username and password go together"
            )),
            "{section}: {e}"
        );
    }
}
