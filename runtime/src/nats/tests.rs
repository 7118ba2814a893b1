//! The NATS connection config's and the connection helpers' tests (split from nats.rs by
//! role: the file holds the code).

use super::*;

#[test]
fn servers_parse_as_a_list_and_errors_name_the_entry() {
    let two = parse_servers("nats://a:4222, tls://b:4223").unwrap();
    assert_eq!(two.len(), 2);
    assert!(two[1].tls_required());
    assert_eq!(parse_servers("nats://a").unwrap().len(), 1);
    for (text, names) in [
        ("", "no server given"),
        (" , ", "no server given"),
        (
            "nats://a:4222,,nats://b:4222",
            "server 2 of 3 (\"\"): is empty",
        ),
        (
            "nats://a:4222,nats://b:99999",
            "server 2 of 2 (\"nats://b:99999\")",
        ),
        ("http://a:4222", "nats:// or tls://"),
        ("nats://a:4222,b:4222", "server 2 of 2"),
        ("nats://:4222", "\"nats://:4222\""),
    ] {
        let e = parse_servers(text).unwrap_err();
        assert!(e.contains(names), "{text:?}: {e}");
    }
    let many = vec!["nats://a:1"; MAX_SERVERS + 1].join(",");
    assert!(parse_servers(&many).unwrap_err().contains("at most"));
}

#[test]
fn a_servers_field_takes_a_string_or_a_list() {
    #[derive(Deserialize)]
    struct S {
        #[serde(deserialize_with = "servers")]
        url: String,
    }
    let s: S = toml::from_str("url = ['nats://a:1', 'nats://b:2']").unwrap();
    assert_eq!(s.url, "nats://a:1, nats://b:2");
    let s: S = toml::from_str("url = 'nats://a:1,nats://b:2'").unwrap();
    assert_eq!(parse_servers(&s.url).unwrap().len(), 2);
    assert!(
        toml::from_str::<S>("url = []")
            .err()
            .unwrap()
            .to_string()
            .contains("empty list of servers")
    );
}

#[test]
fn connection_check_names_the_field() {
    let c = Connection {
        url_field: "fleet.nats",
        servers: "nats://a:1,nats://b:x",
        ..Default::default()
    };
    let (f, p) = c.check(None).unwrap_err();
    assert_eq!(f, "fleet.nats");
    assert!(p.contains("server 2 of 2"), "{p}");
    // An auth key's error names it in the section's spelling.
    let user = Auth {
        username: Some("u".into()),
        ..Auth::default()
    };
    let ca = Auth {
        tls_ca: Some("missing.pem".into()),
        ..Auth::default()
    };
    let dir = tempfile::tempdir().unwrap();
    for (url_field, auth, base, key) in [
        ("fleet.nats", &user, None, "fleet.username"),
        ("nats.address", &ca, Some(dir.path()), "nats.tls-ca"),
    ] {
        let c = Connection {
            url_field,
            servers: "nats://a:1",
            auth,
        };
        assert_eq!(c.check(base).unwrap_err().0, key);
    }
    assert!(check_replicas(0).is_err() && check_replicas(6).is_err());
    assert!(check_replicas(3).is_ok());
}

#[test]
fn a_server_is_named_by_its_info_and_an_aim_moves_only_to_a_better_one() {
    let line = b"INFO {\"server_id\":\"N1\",\"server_name\":\"s1\",\"port\":4222}\r\n";
    assert_eq!(info_name(line).as_deref(), Some("s1"));
    for bad in [
        &b"-ERR 'x'\r\n"[..],
        b"INFO {\"server_id\":\"N1\"}\r\n",
        b"INFO not json\r\n",
        b"INFO {\"server_name\":7}\r\n",
    ] {
        assert_eq!(info_name(bad), None, "{}", String::from_utf8_lossy(bad));
    }
    let aim = Aim {
        prefer: vec!["s2".into()],
        shun: vec!["s0".into(), "s1".into()],
        known: vec![],
    };
    assert!(aim.moves_from("s0") && aim.moves_from("s1"));
    assert!(!aim.moves_from("s2"));
    // Nowhere better to go: it stays.
    let stuck = Aim {
        prefer: vec!["s0".into()],
        ..aim.clone()
    };
    assert!(!stuck.moves_from("s0"));
    assert!(!Aim::default().moves_from("s0"));
    // Nothing preferred (the leaders not seen yet): away from the shunned server when the
    // cluster has another.
    let three = vec![
        "nats://a:1".to_string(),
        "nats://b:1".into(),
        "nats://c:1".into(),
    ];
    let beside = Aim {
        shun: vec!["s0".into()],
        known: three.clone(),
        ..Aim::default()
    };
    assert!(beside.moves_from("s0") && !beside.moves_from("s1"));
    let everywhere = Aim {
        shun: vec!["s0".into(), "s1".into(), "s2".into(), "s1".into()],
        known: three,
        ..Aim::default()
    };
    assert!(!everywhere.moves_from("s0"));
}

/// A live server's INFO names it; a stopped one (SIGSTOP) and a closed port name nothing,
/// within the INFO limit.
#[tokio::test]
async fn servers_are_named_by_their_info() {
    let server = crate::testutil::NatsServer::start();
    let _ = server.client().await;
    let live = parse_servers(&server.address).unwrap().remove(0);
    let dead = parse_servers(&format!(
        "nats://127.0.0.1:{}",
        crate::testutil::free_port()
    ))
    .unwrap()
    .remove(0);
    let names = server_names(&[live.clone(), dead.clone()]).await;
    assert!(
        names[0].as_deref().is_some_and(|n| !n.is_empty()),
        "{names:?}"
    );
    assert_eq!(names[1], None);
    let pid = server.pid() as i32;
    // SAFETY: kill(2) on the test's own child; SIGCONT follows below.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // The stop lands asynchronously: a thread still running would send the INFO.
    let stat = format!("/proc/{pid}/stat");
    let stopped_state = || {
        std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('T')))
            .unwrap_or(false)
    };
    for _ in 0..100 {
        if stopped_state() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t = std::time::Instant::now();
    let stopped = server_names(std::slice::from_ref(&live)).await;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    assert_eq!(stopped, vec![None]);
    // Given up at the limit, not waited out (generous: a loaded machine).
    assert!(t.elapsed() < INFO_TIMEOUT * 10, "{:?}", t.elapsed());
}

#[test]
fn the_hung_server_is_known_by_what_it_said() {
    let a = parse_servers("nats://127.0.0.1:4222").unwrap().remove(0);
    assert!(same_server(&a, "127.0.0.1:4222"));
    assert!(same_server(&a, "0.0.0.0:4222"));
    assert!(!same_server(&a, "127.0.0.1:4223"));
    assert!(!same_server(&a, "10.0.0.1:4222"));
    assert!(!same_server(&a, ":0"));
}

/// A stopped server (SIGSTOP: its socket open, nothing answered) fails the probe, and
/// `hung` names it within two probes; a running one answers.
#[tokio::test]
async fn a_stopped_server_is_found_hung() {
    let server = crate::testutil::NatsServer::start();
    let client = server.client().await;
    assert!(answers(&client).await, "a running server answers");
    let port = server.address.rsplit(':').next().unwrap().to_string();
    let pid = server.pid() as i32;
    let watching = {
        let c = client.clone();
        tokio::spawn(async move { hung(&c).await })
    };
    // Answered a probe or two first (a connection that never answered is given longer).
    tokio::time::sleep(PROBE_EVERY * 3).await;
    assert!(!watching.is_finished(), "a running server is not hung");
    // SAFETY: kill(2) on the test's own child; SIGCONT follows below.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let found = tokio::time::timeout(Duration::from_secs(10), watching).await;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let found = found.expect("found hung within 10 s").unwrap();
    assert!(found.server.ends_with(&format!(":{port}")), "{found:?}");
    assert!(answers(&client).await, "it answers again once resumed");
}

/// A daemon whose first seed is down at start connects through another.
#[tokio::test]
async fn connects_through_a_seed_that_answers() {
    let server = crate::testutil::NatsServer::start();
    let _ = server.client().await;
    let dead = format!("nats://127.0.0.1:{}", crate::testutil::free_port());
    let servers = format!("{dead}, {}", server.address);
    let c = Connection {
        url_field: "nats.address",
        servers: &servers,
        ..Default::default()
    };
    for _ in 0..4 {
        let client = tokio::time::timeout(Duration::from_secs(10), c.connect(Path::new("")))
            .await
            .expect("connected in time")
            .expect("connected through the live seed");
        assert_eq!(
            client.connection_state(),
            async_nats::connection::State::Connected
        );
    }
    let only_dead = Connection {
        url_field: "nats.address",
        servers: &dead,
        ..Default::default()
    };
    assert!(matches!(
        only_dead.connect(Path::new("")).await,
        Err(ConnectError::Connect { .. })
    ));
}
