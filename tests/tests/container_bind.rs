//! Root test of `record --docker-container` on a real Docker engine: a
//! process started by `docker exec` writes a Claude transcript inside the
//! recorded container; the matching at the end of `record` binds that
//! container tree to the session read inside the container through this
//! build's bridge, never to the host file at the same path.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use agentsight_tests::{
    docker::{BASE_IMAGE, Container, ensure_base_image, wait_seeded},
    *,
};
use serde_json::Value;

const NAME: &str = "agentsight-test-bind";
/// The container's home: a path that is no real user's home on the host,
/// so the test can put a different session at the same host path.
const HOME_IN: &str = "/tmp/agentsight-bindtest-home";
const PROJECT: &str = ".claude/projects/-home-dev-shop";
/// The fixture session written inside the container.
const ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";
/// A different fixture session: the host file at the same path.
const DECOY: &str = "-home-dev-mid/cccccccc-0000-4000-8000-000000000003.jsonl";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions/home")
}

fn transcript_in() -> String {
    format!("{HOME_IN}/{PROJECT}/{ID}.jsonl")
}

/// The container script: writes its stdin (the fixture) as the transcript.
fn script() -> String {
    format!("mkdir -p {HOME_IN}/{PROJECT} && cat > {}", transcript_in())
}

/// The session as this build parses it from `home` on the host.
fn parsed(home: &Path, id: &str) -> Value {
    let out = Command::new(bin())
        .args(["session", "show", id, "--json", "--home"])
        .arg(home)
        .output()
        .unwrap();
    assert_exit_0(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Records the container (with `extra` options) while a `docker exec`
/// writes the fixture transcript inside it. The command's user could not
/// drive the Docker daemon (that is root's): the test starts the `docker
/// exec` itself while the container is recorded, then stops the recording.
fn record_the_write(db: &Path, extra: &[&str], init_pid: u32) {
    let rec = Command::new(bin())
        .args(["record", "--quiet", "-o"])
        .arg(db)
        .args(["--container", NAME])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_seeded(db, init_pid);
    let fixture =
        std::fs::File::open(fixtures().join(PROJECT).join(format!("{ID}.jsonl"))).unwrap();
    let out = Command::new("docker")
        .args(["exec", "-i", NAME, "sh", "-c", &script()])
        .stdin(fixture)
        .output()
        .unwrap();
    assert_exit_0(&out);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(rec.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = rec.wait_with_output().unwrap();
    assert_exit_0(&out);
}

/// One stored binding: tree root (row, pid), status, evidence, evidence
/// path; session id, provider, source path, model.
type Bound = (
    i64,
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
);

/// Starts the container with its HOME and this build copied in; returns
/// it and its init's host pid.
fn start_the_container_with_this_build() -> (Container, u32) {
    let c = Container::run(
        NAME,
        &["-e", &format!("HOME={HOME_IN}"), BASE_IMAGE, "sleep", "600"],
    );
    let out = Command::new("docker")
        .arg("cp")
        .arg(bin())
        .arg(format!("{NAME}:/usr/local/bin/agentsight"))
        .output()
        .unwrap();
    assert_exit_0(&out);
    assert_exit_0(&c.exec(&["mkdir", "-p", HOME_IN]));
    let init_pid: u32 = c.inspect("{{.State.Pid}}").parse().unwrap();
    (c, init_pid)
}

/// On the host, the same path holds another session's transcript; returns
/// the fixture session as parsed from the fixtures (the truth).
fn put_a_decoy_at_the_same_host_path() -> Value {
    let _ = std::fs::remove_dir_all(HOME_IN);
    std::fs::create_dir_all(format!("{HOME_IN}/{PROJECT}")).unwrap();
    std::fs::copy(
        fixtures().join(".claude/projects").join(DECOY),
        transcript_in(),
    )
    .unwrap();
    let host_view = parsed(Path::new(HOME_IN), ID);
    let truth = parsed(&fixtures(), ID);
    // The two differ, so the test tells which one was stored.
    assert_ne!(host_view["prompt_count"], truth["prompt_count"]);
    assert_ne!(host_view["cwd"], truth["cwd"]);
    truth
}

/// Every stored binding of the capture.
fn bindings(conn: &rusqlite::Connection) -> Vec<Bound> {
    let mut st = conn
        .prepare(
            "SELECT t.root_process_id, t.root_pid, t.status, b.evidence, b.evidence_path,
                    s.session_id, s.provider, s.source_path, s.model
             FROM bindings b JOIN trees t ON t.id = b.tree_id JOIN sessions s ON s.id = b.session_row",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        ))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// The one binding is the `docker exec` shell's tree (in the container) to
/// the session read inside the container, with no raw copy and meta naming
/// it; returns that shell's pid.
fn check_the_exec_tree_is_bound_to_the_containers_session(
    conn: &rusqlite::Connection,
    c: &Container,
    truth: &Value,
) -> i64 {
    // The container tree: the `docker exec` shell, in the container.
    let (sh_id, sh_pid): (i64, i64) = conn
        .query_row(
            "SELECT id, pid FROM processes WHERE argv = ?1 AND container_id = ?2",
            [
                serde_json::to_string(&["sh", "-c", &script()]).unwrap(),
                c.id.clone(),
            ],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let rows = bindings(conn);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(
        (r.0, r.1, r.2.as_str(), r.3.as_str(), r.4.as_str()),
        (
            sh_id,
            sh_pid,
            "bound",
            "transcript_write",
            transcript_in().as_str()
        )
    );
    assert_eq!(
        (r.5.as_str(), r.6.as_str(), r.7.as_str()),
        (ID, "claude", transcript_in().as_str())
    );
    // The session read inside the container: the fixture's, not the host's.
    let model: Value = serde_json::from_str(&r.8).unwrap();
    assert_eq!(model["session_id"], ID);
    assert_eq!(model["prompt_count"], truth["prompt_count"]);
    assert_eq!(model["cwd"], truth["cwd"]);
    assert_eq!(model["prompts"], truth["prompts"]);
    // Only structured results cross: no raw copy; meta says which came in.
    let copies: i64 = conn
        .query_row("SELECT COUNT(*) FROM transcript_files", [], |r| r.get(0))
        .unwrap();
    assert_eq!(copies, 0);
    assert_eq!(
        meta(conn, "container_sessions").unwrap(),
        format!(
            r#"[{{"container_id":"{}","container_name":"{NAME}","provider":"claude","session_id":"{ID}"}}]"#,
            c.id
        )
    );
    sh_pid
}

/// correlate works on the stored session, with `--db` and when it finds
/// the capture in `dir` (the host home is not read then).
fn check_correlate_uses_the_stored_session(db: &Path, dir: &Path, sh_pid: i64, truth: &Value) {
    let out = Command::new(bin())
        .args(["correlate", ID, "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert_exit_0(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["session_source"], "capture");
    assert_eq!(v["session"]["session_id"], ID);
    assert_eq!(v["session"]["cwd"], truth["cwd"]);
    assert_eq!(v["bindings"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["bindings"][0]["root_pid"], sh_pid);
    assert_eq!(v["bindings"][0]["evidence"], "transcript_write");
    assert_eq!(
        v["prompts"].as_array().map(Vec::len),
        truth["prompts"].as_array().map(Vec::len)
    );

    // Without --db, correlate finds the capture here and keeps the stored
    // session: the host home with a file at the same path is not read.
    let out = Command::new(bin())
        .args(["correlate", ID, "--json"])
        .current_dir(dir)
        .env("HOME", HOME_IN)
        .output()
        .unwrap();
    assert_exit_0(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["session_source"], "capture");
    assert_eq!(v["session"]["cwd"], truth["cwd"]);
}

/// Without --docker-container: the container's transcript stays unbound,
/// with a note naming the option, although a host file has that path.
fn check_without_the_option_the_session_stays_unbound(dir: &Path, c: &Container, init_pid: u32) {
    let db2 = dir.join("unbound.db");
    record_the_write(&db2, &[], init_pid);
    let conn = open(&db2);
    let sh_pid: i64 = conn
        .query_row(
            "SELECT pid FROM processes WHERE argv = ?1 AND container_id = ?2",
            [
                serde_json::to_string(&["sh", "-c", &script()]).unwrap(),
                c.id.clone(),
            ],
            |r| r.get(0),
        )
        .unwrap();
    let tree: (String, String) = conn
        .query_row(
            "SELECT status, note FROM trees WHERE root_pid = ?1",
            [sh_pid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        tree,
        (
            "unmatched".to_string(),
            format!(
                "session {ID} was written in container {NAME}: not bound; pass --docker-container {NAME} to read it there"
            )
        )
    );
    let stored: i64 = conn
        .query_row("SELECT COUNT(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, 0);
    assert_eq!(meta(&conn, "container_sessions"), None);
}

#[test]
fn a_container_tree_is_bound_to_the_session_read_through_its_bridge() {
    require_root();
    ensure_base_image();
    let (c, init_pid) = start_the_container_with_this_build();
    let truth = put_a_decoy_at_the_same_host_path();

    let dir = scratch("cbind");
    let db = dir.join("bind.db");
    record_the_write(&db, &["--docker-container", NAME], init_pid);
    let conn = open(&db);
    let sh_pid = check_the_exec_tree_is_bound_to_the_containers_session(&conn, &c, &truth);
    check_correlate_uses_the_stored_session(&db, &dir, sh_pid, &truth);
    check_without_the_option_the_session_stays_unbound(&dir, &c, init_pid);

    drop(c);
    let _ = std::fs::remove_dir_all(HOME_IN);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn record_refuses_hostile_docker_container_names_before_any_docker_call() {
    require_root();
    let dir = scratch("cbind-names");
    let db = dir.join("never.db");
    let long = "a".repeat(129);
    for name in ["--privileged", "a/b", "a b", "", long.as_str()] {
        // No docker on PATH: an error about the name, not about running
        // docker, shows that no docker call was tried.
        let o = Command::new(bin())
            .args(["record", "--quiet", "-o"])
            .arg(&db)
            .arg(format!("--docker-container={name}"))
            .args(["--", "true"])
            .env("PATH", "/nonexistent")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!(
                "agentsight: error: --docker-container {name:?}: container name {name:?} "
            )),
            "{name:?}: {err}"
        );
        assert!(!db.exists(), "{name:?}: a capture was created");
    }
    // Under sudo, root's docker reading a container's sessions into the
    // caller's capture needs --all-users, checked before any docker call.
    let (uid, gid) = test_user();
    let o = Command::new(bin())
        .args(["record", "--quiet", "-o"])
        .arg(&db)
        .args(["--docker-container", "dev", "--", "true"])
        .env("PATH", "/nonexistent")
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err,
        "agentsight: error: --docker-container reads the container's sessions with root's docker: under sudo that needs --all-users (stored in the capture)\n"
    );
    assert!(!db.exists(), "a capture was created");
    let _ = std::fs::remove_dir_all(&dir);
}
