//! The bundled `lustre` agent side by side with PCP's own pmdalustre (Debian's pcp 6.0.3,
//! Perl, under a private pmcd) on the same synthesized Lustre 2.10 tree: every descriptor and
//! every value `pminfo` shows must be the same.

use std::path::Path;

use super::nfsclient::side_by_side;
use crate::common::{DaemonProcess, NO_PROCFS, config_file, free_port};

/// pmdalustre reading `llite` and `lnet` under a pmcd of its own: the pmcd (killed by the
/// caller) and its port.
fn reference(llite: &Path, lnet: &Path, run: &Path) -> (std::process::Child, u16) {
    super::ensure_pcp();
    crate::common::ensure_debian_package("libpcp-pmda-perl", || {
        std::process::Command::new("perl")
            .args(["-e", "use PCP::PMDA"])
            .status()
            .is_ok_and(|s| s.success())
    });
    let line = format!(
        "lustre\t134\tpipe\tbinary\t/usr/bin/env LUSTRE_LLITE_PATH={}/ LUSTRE_LNET_PATH={}/ /usr/bin/perl /var/lib/pcp/pmdas/lustre/pmdalustre.pl",
        llite.display(),
        lnet.display()
    );
    super::pmcd_with_one_pmda(run, &line, "lustre", 134)
}

#[test]
fn lustre_answers_as_pmdalustre_on_the_same_tree() {
    let tree = tempfile::tempdir().unwrap();
    crate::guest_agents::trees::lustre_procfs(tree.path());
    let run = tempfile::tempdir().unwrap();
    let (mut pmcd, ref_port) = reference(
        &tree.path().join("proc/fs/lustre/llite"),
        &tree.path().join("proc/sys/lnet"),
        run.path(),
    );
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // The bundled agent's name is all it needs; the grants point it at the tree.
    let config = config_file(
        dir.path(),
        &format!(
            "{NO_PROCFS}[[agent]]\nname = \"lustre\"\nguest = \"lustre\"\n\
             grants = {{ dirs = [{{ host = \"{0}/proc\", guest = \"/proc\" }}, \
             {{ host = \"{0}/sys\", guest = \"/sys\" }}] }}\n\
             [pcp]\nlisten = \"127.0.0.1:{port}\"\n",
            tree.path().display()
        ),
    );
    std::fs::create_dir_all(tree.path().join("sys")).unwrap();
    let _daemon = DaemonProcess::start(&config);
    super::wait_until("wasmon's PCP port", || {
        super::pcp_tool("pminfo", port, &["lustre.llite.volume"])
            .status
            .success()
    });

    let (want, got) = side_by_side("lustre", ref_port, port, "lustre", 66);
    let _ = pmcd.kill();
    let _ = pmcd.wait();
    assert_eq!(got, want);
    // Both instances of every llite metric and every LNet value were compared.
    let compared: usize = want.values().map(|v| v.len()).sum();
    assert_eq!(compared, 55 * 2 + 11);
    assert_eq!(
        want["lustre.llite.read_bytes.total"]["scratch"],
        "614400000"
    );
}
