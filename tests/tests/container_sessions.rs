//! Root tests of `--docker-container` on a real Docker engine: the sessions
//! of a home that lives inside a container, read there by the freshly built
//! `agentsight bridge` (copied into the container) and returned to the host
//! as the same records the host reads from the same home; credentials never
//! cross; lookups fail closed; names are checked before any docker call.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agentsight_tests::{
    bin,
    docker::{BASE_IMAGE, Container, ensure_base_image},
    require_root,
};
use serde_json::Value;

/// Inside the container, the agent user's home.
const HOME_IN: &str = "/home/dev";
/// Bytes of the fixture credential files: never in anything the host gets.
const SECRET: &str = "agentsight-credential-marker-5b1f0c";
/// A Claude session of the fixture home.
const CLAUDE_ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A copy of the fixture home with credential files holding [`SECRET`].
fn fixture_home(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentsight-csess-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new("cp")
        .arg("-a")
        .arg(repo().join("fixtures/sessions/home"))
        .arg(&dir)
        .output()
        .expect("cp");
    assert!(out.status.success(), "cp: {out:?}");
    std::fs::write(
        dir.join(".claude/.credentials.json"),
        format!("{{\"token\":\"{SECRET}\"}}"),
    )
    .expect("claude credentials");
    std::fs::write(
        dir.join(".codex/auth.json"),
        format!("{{\"OPENAI_API_KEY\":\"{SECRET}\"}}"),
    )
    .expect("codex credentials");
    dir
}

/// A container whose home is a copy of `home` and which has this build's
/// `agentsight` on its PATH.
fn container_with(name: &str, home: &Path) -> Container {
    ensure_base_image();
    let c = Container::run(
        name,
        &["-e", &format!("HOME={HOME_IN}"), BASE_IMAGE, "sleep", "600"],
    );
    for (from, to) in [
        (home.to_path_buf(), HOME_IN.to_string()),
        (bin(), "/usr/local/bin/agentsight".to_string()),
    ] {
        let out = Command::new("docker")
            .arg("cp")
            .arg(&from)
            .arg(format!("{name}:{to}"))
            .output()
            .expect("docker cp");
        assert!(out.status.success(), "docker cp {from:?}: {out:?}");
    }
    c
}

fn agentsight(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run agentsight")
}

fn json(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON output")
}

fn assert_no_secret(o: &Output) {
    for stream in [&o.stdout, &o.stderr] {
        assert!(
            !String::from_utf8_lossy(stream).contains(SECRET),
            "credential bytes crossed"
        );
    }
}

/// The same session record the host reads from the same home, with the
/// container's paths for the host copy's.
fn as_in_container(v: &Value, host_home: &Path) -> Value {
    let text = v
        .to_string()
        .replace(&host_home.display().to_string(), HOME_IN);
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn sessions_inside_a_container_read_through_its_bridge() {
    require_root();
    let home = fixture_home("one");
    let _c = container_with("agentsight-csess-one", &home);
    let host = home.display().to_string();

    // The list: every session of the home, each named with its container.
    let listed = agentsight(&[
        "sessions",
        "--json",
        "--docker-container",
        "agentsight-csess-one",
    ]);
    assert_no_secret(&listed);
    let listed = json(&listed);
    let local = json(&agentsight(&["sessions", "--json", "--home", &host]));
    let ids = |v: &Value, with_container: bool| {
        let mut ids: Vec<String> = v
            .as_array()
            .expect("array")
            .iter()
            .map(|s| {
                if with_container {
                    assert_eq!(s["container"], "agentsight-csess-one");
                }
                s["session_id"].as_str().expect("id").to_string()
            })
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&listed, true), ids(&local, false));
    assert!(ids(&listed, true).contains(&CLAUDE_ID.to_string()));

    // One session: the record the host reads from the same home.
    let shown = agentsight(&[
        "session",
        "show",
        CLAUDE_ID,
        "--json",
        "--docker-container",
        "agentsight-csess-one",
    ]);
    assert_no_secret(&shown);
    let mut shown = json(&shown);
    assert_eq!(shown["container"], "agentsight-csess-one");
    shown.as_object_mut().expect("object").remove("container");
    let local = json(&agentsight(&[
        "session", "show", CLAUDE_ID, "--json", "--home", &host,
    ]));
    assert_eq!(shown, as_in_container(&local, &home));

    // The text form names the container under the header.
    let text = agentsight(&[
        "session",
        "show",
        CLAUDE_ID,
        "--docker-container",
        "agentsight-csess-one",
    ]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.starts_with(&format!(
            "claude session {CLAUDE_ID}\n  container     agentsight-csess-one\n"
        )),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn lookups_fail_closed_and_lists_name_the_failed_container() {
    require_root();
    let home = fixture_home("two");
    let _a = container_with("agentsight-csess-a", &home);
    let _b = container_with("agentsight-csess-b", &home);

    // The same id in two containers: a conflict, not the first match.
    let both = agentsight(&[
        "session",
        "show",
        CLAUDE_ID,
        "--docker-container",
        "agentsight-csess-a",
        "--docker-container",
        "agentsight-csess-b",
    ]);
    assert_eq!(both.status.code(), Some(2));
    let err = String::from_utf8_lossy(&both.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "exists in more than one configured container (agentsight-csess-a, agentsight-csess-b)"
        ),
        "{err}"
    );

    // One healthy container and one that does not exist: the exact lookup
    // fails, the list shows the healthy one and names the other (exit 3).
    let missing = agentsight(&[
        "session",
        "show",
        CLAUDE_ID,
        "--docker-container",
        "agentsight-csess-a",
        "--docker-container",
        "agentsight-csess-none",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("agentsight-csess-none"),
        "{missing:?}"
    );
    let listed = agentsight(&[
        "sessions",
        "--json",
        "--docker-container",
        "agentsight-csess-a",
        "--docker-container",
        "agentsight-csess-none",
    ]);
    assert_eq!(listed.status.code(), Some(3), "{listed:?}");
    let rows: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert!(
        rows.as_array()
            .expect("array")
            .iter()
            .all(|s| s["container"] == "agentsight-csess-a")
    );
    let err = String::from_utf8_lossy(&listed.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("agentsight: container agentsight-csess-none: failed: "),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn names_are_refused_before_any_docker_call_and_db_is_not_mixed_in() {
    require_root();
    let long = "a".repeat(129);
    for name in ["a/b", "a b", "", long.as_str(), "-x"] {
        let o = agentsight(&[
            "session",
            "show",
            CLAUDE_ID,
            &format!("--docker-container={name}"),
        ]);
        assert_eq!(o.status.code(), Some(2), "{name:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("container name"), "{name:?}: {err}");
    }
    let o = agentsight(&[
        "correlate",
        CLAUDE_ID,
        "--db",
        "/nonexistent.db",
        "--docker-container",
        "dev",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot be used with"),
        "{o:?}"
    );
}
