//! A container for a real Codex (issue 14; used by `container_agent.rs` and
//! `message_codex.rs`): the pinned Codex's native build mounted read-only,
//! the run's home, workspace and TMPDIR mounted at the same paths, the test
//! user as in the host's passwd, and this build's `agentsight` for the
//! bridge.

use std::process::Command;

use crate::{
    TEST_USER, bin,
    docker::{BASE_IMAGE, Container},
    e2e::{Run, codex_native_dir},
    test_user,
};

/// Where the container sees the native Codex package.
pub const CODEX_IN: &str = "/opt/codex";

/// The PATH prefix of the container's Codex (its binary, and its `rg`).
pub fn codex_path() -> String {
    format!("{CODEX_IN}/bin:{CODEX_IN}/codex-path")
}

/// Starts the run's container: the host's network namespace, the run's
/// directories and the Codex package mounted, the identity the bridge
/// reads as labels, and this build's `agentsight` copied in for the bridge.
pub fn start_the_container(run: &Run, name: &str) -> Container {
    let (uid, _) = test_user();
    let mounts: Vec<String> = [&run.home, &run.work, &run.tmp]
        .iter()
        .map(|d| format!("{0}:{0}", d.display()))
        .collect();
    let codex = format!("{}:{CODEX_IN}:ro", codex_native_dir().display());
    let labels = [
        format!("com.agentsight.user={uid}"),
        format!("com.agentsight.home={}", run.home.display()),
        format!("com.agentsight.workspace={}", run.work.display()),
    ];
    let mut args: Vec<&str> = Vec::new();
    for m in &mounts {
        args.extend(["-v", m]);
    }
    args.extend(["-v", &codex]);
    for l in &labels {
        args.extend(["--label", l]);
    }
    args.extend([BASE_IMAGE, "sleep", "600"]);
    let c = Container::run_on("host", name, &args);
    // The test user, as in the host's /etc/passwd (home, login shell
    // /bin/sh): Codex runs its tools in the user's login shell.
    let (uid, gid) = (uid.to_string(), test_user().1.to_string());
    let home = run.home.display().to_string();
    let cmds: [&[&str]; 2] = [
        &["groupadd", "--gid", &gid, TEST_USER],
        &[
            "useradd",
            "--uid",
            &uid,
            "--gid",
            &gid,
            "--no-create-home",
            "--home-dir",
            &home,
            "--shell",
            "/bin/sh",
            TEST_USER,
        ],
    ];
    for cmd in cmds {
        let out = c.exec(cmd);
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new("docker")
        .arg("cp")
        .arg(bin())
        .arg(format!("{name}:/usr/local/bin/agentsight"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "docker cp: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    c
}
