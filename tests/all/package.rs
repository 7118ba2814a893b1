//! The Debian package: built with `cargo deb` (cargo-deb is installed when missing), its
//! contents and maintainer scripts checked, its unit checked by `systemd-analyze verify`, and
//! the packaged binary run as the unit runs it (the packaged config, an unprivileged user, no
//! capabilities, no new privileges): it serves, reloads on SIGHUP, and on SIGTERM writes its
//! final snapshot and exits within the unit's TimeoutStopSec.
//!
//! The package reuses `target/release/wasmon` when a release build exists (`cargo deb`'s own
//! build is then incremental); otherwise it packages the debug build the tests already made
//! (`--profile dev`), so the suite never pays for a release build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// cargo-deb version the test installs when `cargo deb` is missing.
const CARGO_DEB: &str = "3.7.0";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn ensure_cargo_deb() {
    let present = || {
        cargo()
            .args(["deb", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if present() {
        return;
    }
    let ok = cargo()
        .args(["install", "--locked", "cargo-deb", "--version", CARGO_DEB])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok && present(),
        "cargo install cargo-deb {CARGO_DEB} failed"
    );
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Builds the package into `out`; returns the .deb's path.
fn build_package(out: &Path) -> PathBuf {
    ensure_cargo_deb();
    ensure_debian_package("dpkg-dev", || Path::new("/usr/bin/dpkg-shlibdeps").exists());
    let mut cmd = cargo();
    cmd.args(["deb", "-p", "wasmon", "--output"]).arg(out);
    if !target_dir().join("release/wasmon").exists() {
        cmd.args(["--profile", "dev"]);
    }
    run(&mut cmd);
    std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .expect("cargo deb wrote no .deb")
}

fn unit_value<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

#[test]
fn debian_package_contents_unit_and_service_behaviour() {
    let tmp = tempfile::tempdir().unwrap();
    let deb = build_package(tmp.path());
    let listing = run(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let files: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    for want in [
        "./usr/bin/wasmon",
        "./etc/wasmon/wasmon.toml",
        "./usr/lib/sysusers.d/wasmon.conf",
        "./usr/share/doc/wasmon/README.md",
    ] {
        assert!(files.contains(&want), "{want} missing:\n{listing}");
    }
    let unit_path = *files
        .iter()
        .find(|f| f.ends_with("/systemd/system/wasmon.service"))
        .unwrap_or_else(|| panic!("no unit:\n{listing}"));

    let root = tmp.path().join("root");
    let control = tmp.path().join("control");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    run(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control));

    // The conffile is the embedded default with its state in /var/lib/wasmon.
    let conffiles = std::fs::read_to_string(control.join("conffiles")).unwrap();
    assert!(
        conffiles.lines().any(|l| l == "/etc/wasmon/wasmon.toml"),
        "{conffiles}"
    );
    let packaged = std::fs::read_to_string(root.join("etc/wasmon/wasmon.toml")).unwrap();
    assert!(packaged.contains("data-dir = \"/var/lib/wasmon\"\n"));
    assert!(packaged.contains("guests-dir = \"/var/lib/wasmon/guests\"\n"));
    let bin = root.join("usr/bin/wasmon");
    let check = run(Command::new(&bin)
        .args(["config", "check"])
        .arg(root.join("etc/wasmon/wasmon.toml")));
    assert!(check.contains(": ok"), "{check}");
    let fields = run(Command::new("dpkg-deb").arg("-f").arg(&deb));
    assert!(fields.contains("Package: wasmon"), "{fields}");
    assert!(fields.contains("Depends: libc6"), "{fields}");

    // Maintainer scripts: the user is created, the unit enabled and started.
    let postinst = std::fs::read_to_string(control.join("postinst")).unwrap();
    assert!(
        postinst.contains("systemd-sysusers wasmon.conf"),
        "{postinst}"
    );
    assert!(postinst.contains("wasmon.service"), "{postinst}");
    assert!(!postinst.contains("#DEBHELPER#"), "{postinst}");

    // The unit: hardened, reloads with SIGHUP, state writable, no capabilities.
    let unit = std::fs::read_to_string(root.join(unit_path.trim_start_matches("./"))).unwrap();
    for (key, value) in [
        ("User", "wasmon"),
        (
            "ExecStart",
            "/usr/bin/wasmon run --config /etc/wasmon/wasmon.toml",
        ),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
        ("ProtectSystem", "strict"),
        ("NoNewPrivileges", "yes"),
        ("ReadWritePaths", "/var/lib/wasmon"),
        ("StateDirectory", "wasmon wasmon/guests"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
    ] {
        assert_eq!(unit_value(&unit, key), [value], "{key} in the unit");
    }
    assert!(unit_value(&unit, "MemoryDenyWriteExecute").is_empty());
    let timeout: u64 = unit_value(&unit, "TimeoutStopSec")[0].parse().unwrap();

    // systemd's own check of the unit, in a root holding this system's units (for the
    // targets it names), `kill` (ExecReload) and the packaged binary (ExecStart).
    ensure_debian_package("systemd", || Path::new("/usr/bin/systemd-analyze").exists());
    let vroot = tmp.path().join("verify-root");
    let units = vroot.join("usr/lib/systemd/system");
    std::fs::create_dir_all(vroot.join("usr/bin")).unwrap();
    std::fs::create_dir_all(vroot.join("usr/lib/systemd")).unwrap();
    run(Command::new("cp")
        .args(["-a", "/usr/lib/systemd/system"])
        .arg(vroot.join("usr/lib/systemd")));
    std::os::unix::fs::symlink("usr/bin", vroot.join("bin")).unwrap();
    std::os::unix::fs::symlink("usr/lib", vroot.join("lib")).unwrap();
    std::fs::copy(&bin, vroot.join("usr/bin/wasmon")).unwrap();
    std::fs::copy("/usr/bin/kill", vroot.join("usr/bin/kill")).unwrap();
    std::fs::write(units.join("wasmon.service"), &unit).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(format!("--root={}", vroot.display()))
        .arg(units.join("wasmon.service"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "systemd-analyze verify:\n{said}");
    assert!(
        !said.contains("wasmon.service:"),
        "systemd-analyze has remarks on the unit:\n{said}"
    );

    run_as_the_unit_would(&bin, &root.join("etc/wasmon/wasmon.toml"), timeout);
}

/// The packaged binary and config as an unprivileged user (nobody) with an empty capability
/// bounding set and no_new_privs, as the unit runs it; state in a temporary directory.
fn run_as_the_unit_would(bin: &Path, config: &Path, timeout: u64) {
    let state = tempfile::tempdir().unwrap();
    let data = state.path().join("wasmon");
    std::fs::create_dir(&data).unwrap();
    let root_user = unsafe { libc::geteuid() } == 0;
    let port = free_port();
    let mut cmd = if root_user {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--no-new-privs",
        ])
        .arg(bin);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(["run", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .current_dir(&data)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = log.clone();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let url = |p: &str| format!("http://127.0.0.1:{port}{p}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while reqwest::blocking::get(url("/api/healthcheck")).is_err() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "exited:\n{}",
            log.lock().unwrap()
        );
        assert!(
            Instant::now() < deadline,
            "not serving:\n{}",
            log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = reqwest::blocking::Client::new()
        .post(url("/api/write?cluster=pkg"))
        .body(format!(
            "m,hostname=h value=1 {}\n",
            chrono::Utc::now().timestamp()
        ))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let kill = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &child.id().to_string()])
                .status()
                .unwrap()
                .success()
        )
    };
    kill("-HUP");
    let wait_log = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !log.lock().unwrap().contains(what) {
            assert!(
                Instant::now() < deadline,
                "no {what:?}:\n{}",
                log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_log("SIGHUP: reloading");
    let stop = Instant::now();
    kill("-TERM");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            stop.elapsed() < Duration::from_secs(timeout),
            "not stopped within TimeoutStopSec={timeout}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    let log = log.lock().unwrap().clone();
    assert!(status.success(), "{status}\n{log}");
    assert!(log.contains("stopped"), "{log}");
    // The final snapshot holds the sample written above.
    let snapshots: Vec<_> = std::fs::read_dir(data.join("store"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        snapshots.iter().any(|n| n.starts_with("snap-")),
        "no snapshot in {snapshots:?}\n{log}"
    );
}
