//! The docker helpers of the host side against a fake `docker` executable
//! (a shell script that logs its argv): validation before any docker call,
//! the identity lookups and the exact bridge argv, the bounded helpers, and
//! a whole list/get through `docker exec … agentsight bridge`, which the fake
//! runs as the local bridge under a fixture home.
// The fixture helpers live with the session parsers' own tests.
#[path = "../../agentsight-sessions/tests/sessions_common/mod.rs"]
mod sessions_common;

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentsight::bridge::{Docker, DockerError, InvalidInput};
use agentsight::sessions::SessionSummary;

const BIN: &str = env!("CARGO_BIN_EXE_agentsight");
const LEGACY: &str = "bbbbbbbb-0000-4000-8000-000000000002";

/// A fake docker in `dir`: `inspect dev` prints `inspect.json` (a root image
/// user, HOME in Env), `inspect pw` and `inspect ghost` a user without
/// HOME (known to getent, unknown), `inspect gone` fails like docker,
/// `inspect slow` hangs; `exec dev stat …` prints 1000, `exec pw getent …`
/// a passwd line, `exec ghost …` exits 2 (getent: no such key); `exec -i … agentsight bridge` runs
/// the local bridge with HOME = `home`. Every call is logged to `log`.
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new(home: &Path) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let inspect = r#"[{"Id":"0123abcd","Config":{"User":"root","WorkingDir":"/workspaces/shop","Env":["PATH=/usr/bin","HOME=/home/vscode"],"Labels":{"com.agentsight.user":""}}}]"#;
        std::fs::write(dir.path().join("inspect.json"), inspect).expect("write");
        let passwd = r#"[{"Config":{"User":"dev:staff","WorkingDir":"","Env":["PATH=/usr/bin"]}}]"#;
        std::fs::write(dir.path().join("passwd.json"), passwd).expect("write");
        let ghost = r#"[{"Config":{"User":"ghost","Env":null,"Labels":null}}]"#;
        std::fs::write(dir.path().join("ghost.json"), ghost).expect("write");
        let script = format!(
            r#"#!/bin/sh
printf '%s\n' "$*" >> '{d}/log'
# agentsight inspects containers only: `inspect --type container -- NAME`.
if [ "$1 $2 $3 $4" = "inspect --type container --" ]; then set -- inspect "$5"; fi
case "$1 $2" in
  "inspect dev") cat '{d}/inspect.json' ;;
  "inspect slow") exec sleep 30 ;;
  "inspect pw") cat '{d}/passwd.json' ;;
  "inspect ghost") cat '{d}/ghost.json' ;;
  "exec pw") echo 'dev:x:1001:50:Dev,,,:/home/dev:/bin/bash' ;;
  "exec ghost") exit 2 ;;
  "inspect "*) echo "Error: No such object: $2" >&2; echo '[]'; exit 1 ;;
  "exec dev") [ "$3" = stat ] && echo 1000 ;;
  "exec -i") exec env HOME='{h}' '{BIN}' bridge ;;
  *) exit 125 ;;
esac
"#,
            d = dir.path().display(),
            h = home.display()
        );
        let path = dir.path().join("docker");
        std::fs::write(&path, script).expect("write fake docker");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Fake { dir }
    }

    fn program(&self) -> PathBuf {
        self.dir.path().join("docker")
    }

    fn docker(&self) -> Docker {
        Docker::new(self.program())
    }

    /// The argv of each docker call so far.
    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("log"))
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }
}

fn cli_list(home: &Path, limit: usize) -> Vec<SessionSummary> {
    let o = Command::new(BIN)
        .args([
            "sessions",
            "--json",
            "--limit",
            &limit.to_string(),
            "--home",
        ])
        .arg(home)
        .output()
        .expect("run sessions");
    assert!(o.status.success());
    serde_json::from_slice(&o.stdout).expect("sessions JSON")
}

#[test]
fn hostile_names_are_refused_before_any_docker_call() {
    let home = sessions_common::home();
    let fake = Fake::new(home.path());
    let long = "a".repeat(129);
    let cases = [
        (
            "--privileged",
            InvalidInput::NameChars("--privileged".into()),
        ),
        ("a/b", InvalidInput::NameChars("a/b".into())),
        ("a b", InvalidInput::NameChars("a b".into())),
        ("", InvalidInput::NameLength(String::new())),
        (long.as_str(), InvalidInput::NameLength(long.clone())),
    ];
    for (name, want) in cases {
        assert_eq!(
            fake.docker().bridge(name).err(),
            Some(DockerError::Invalid(want)),
            "{name:?}"
        );
    }
    assert_eq!(fake.log(), Vec::<String>::new());
}

#[tokio::test]
async fn a_container_s_bridge_runs_as_the_owner_of_its_home() {
    let home = sessions_common::home();
    let fake = Fake::new(home.path());
    let bridge = fake.docker().bridge("dev").expect("bridge");
    let program = fake.program().into_os_string();
    let want: Vec<OsString> = [
        program.clone(),
        "exec".into(),
        "-i".into(),
        "--user".into(),
        "1000".into(),
        "--workdir".into(),
        "/workspaces/shop".into(),
        "--env".into(),
        "HOME=/home/vscode".into(),
        "dev".into(),
        "agentsight".into(),
        "bridge".into(),
    ]
    .into();
    assert_eq!(bridge.argv(), want.as_slice());
    assert_eq!(bridge.container(), "dev");
    assert_eq!(
        fake.log(),
        [
            "inspect --type container -- dev",
            "exec dev stat -c %u /home/vscode"
        ]
    );
    // Only structured results come back through `docker exec`.
    assert_eq!(bridge.list(4).await, Ok(cli_list(home.path(), 4)));
    assert_eq!(
        bridge.get(LEGACY).await.map(|s| s.session_id),
        Ok(LEGACY.to_string())
    );
    assert_eq!(
        fake.log(),
        [
            "inspect --type container -- dev",
            "exec dev stat -c %u /home/vscode",
            "exec -i --user 1000 --workdir /workspaces/shop --env HOME=/home/vscode dev agentsight bridge"
        ],
        "one long-lived bridge for both calls"
    );
}

#[test]
fn failing_and_hanging_helpers_are_errors() {
    let home = sessions_common::home();
    let fake = Fake::new(home.path());
    assert_eq!(
        fake.docker().bridge("gone").err(),
        Some(DockerError::Failed {
            command: "docker inspect --type container -- gone".into(),
            status: "exit 1".into(),
            stderr: "Error: No such object: gone".into()
        })
    );
    let mut docker = fake.docker();
    assert_eq!(docker.timeout, Duration::from_secs(10));
    docker.timeout = Duration::from_millis(500);
    let t = Instant::now();
    let e = docker.bridge("slow").err();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(
        e,
        Some(DockerError::Timeout {
            command: "docker inspect --type container -- slow".into(),
            secs: 0.5
        })
    );
    assert_eq!(
        e.map(|e| e.to_string()),
        Some("`docker inspect --type container -- slow` did not finish within 0.5 s".into())
    );
    let missing = Docker::new("/nonexistent/docker");
    assert!(matches!(
        missing.bridge("dev"),
        Err(DockerError::Run { ref program, .. }) if program == "/nonexistent/docker"
    ));
}

#[test]
fn without_home_the_passwd_entry_gives_it() {
    let home = sessions_common::home();
    let fake = Fake::new(home.path());
    let program = fake.program().into_os_string();
    let argv = |rest: &[&str]| -> Vec<OsString> {
        std::iter::once(program.clone())
            .chain(rest.iter().map(OsString::from))
            .collect()
    };
    let b = fake.docker().bridge("pw").expect("bridge");
    assert_eq!(
        b.argv(),
        argv(&[
            "exec",
            "-i",
            "--user",
            "dev:staff",
            "--env",
            "HOME=/home/dev",
            "pw",
            "agentsight",
            "bridge"
        ])
    );
    // A user getent does not know: no home, so no --env HOME.
    let b = fake.docker().bridge("ghost").expect("bridge");
    assert_eq!(
        b.argv(),
        argv(&[
            "exec",
            "-i",
            "--user",
            "ghost",
            "ghost",
            "agentsight",
            "bridge"
        ])
    );
    assert_eq!(
        fake.log(),
        [
            "inspect --type container -- pw",
            "exec pw getent passwd dev",
            "inspect --type container -- ghost",
            "exec ghost getent passwd ghost"
        ]
    );
}
