//! The host side of the bridge with real child processes and no Docker: the
//! "container" is the local `agentsight bridge` under a fixture home (its
//! argv is data), or a shell that hangs or dies.
// The fixture helpers live with the session parsers' own tests.
#[path = "../../agentsight-sessions/tests/sessions_common/mod.rs"]
mod sessions_common;

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agentsight::bridge::client::LookupError;
use agentsight::bridge::{Bridge, BridgeSet, CallError, ContainerSession, ErrorCode, FanoutList};
use agentsight::sessions::{AgentSession, SessionSummary};

const BIN: &str = env!("CARGO_BIN_EXE_agentsight");
const ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const LEGACY: &str = "bbbbbbbb-0000-4000-8000-000000000002";

/// The argv of a local bridge reading `home`.
fn local(home: &Path) -> Vec<OsString> {
    let mut h = OsString::from("HOME=");
    h.push(home);
    vec!["env".into(), h, BIN.into(), "bridge".into()]
}

fn sh(script: &str) -> Vec<OsString> {
    vec!["sh".into(), "-c".into(), script.into()]
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

fn cli_show(home: &Path, id: &str) -> AgentSession {
    let o = Command::new(BIN)
        .args(["session", "show", id, "--json", "--home"])
        .arg(home)
        .output()
        .expect("run session show");
    assert!(o.status.success());
    serde_json::from_slice(&o.stdout).expect("session JSON")
}

/// The state letter of /proc/PID/stat, or None once the pid is gone.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Waits until `pid` is no longer a live process (gone or a zombie).
async fn wait_dead(pid: u32) {
    let end = Instant::now() + Duration::from_secs(5);
    while matches!(proc_state(pid), Some(s) if s != 'Z') {
        assert!(Instant::now() < end, "pid {pid} still alive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn failed(container: &str, message: &str) -> CallError {
    CallError {
        container: container.into(),
        code: ErrorCode::Failed,
        message: message.into(),
    }
}

#[tokio::test]
async fn one_child_is_reused_and_respawned_after_it_dies() {
    let home = sessions_common::home();
    let b = Bridge::new("dev", local(home.path()));
    assert_eq!(b.child_pid().await, None, "started lazily");
    assert_eq!(b.list(3).await, Ok(cli_list(home.path(), 3)));
    let first = b.child_pid().await.expect("running");
    assert_eq!(b.get(ID).await, Ok(cli_show(home.path(), ID)));
    assert_eq!(b.child_pid().await, Some(first), "reused");
    // not_found is an answer, not a failure: the child stays.
    assert_eq!(
        b.get("nope").await,
        Err(CallError {
            container: "dev".into(),
            code: ErrorCode::NotFound,
            message: "session nope not found".into()
        })
    );
    assert_eq!(b.child_pid().await, Some(first));

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the bridge");
    wait_dead(first).await;
    assert_eq!(b.list(3).await, Ok(cli_list(home.path(), 3)));
    let second = b.child_pid().await.expect("respawned");
    assert_ne!(second, first);
}

#[tokio::test]
async fn a_failed_answer_discards_the_child() {
    let home = sessions_common::home();
    let b = Bridge::new("dev", local(home.path()));
    assert_eq!(b.list(1).await.map(|s| s.len()), Ok(1));
    let first = b.child_pid().await.expect("running");
    let msg =
        agentsight::bridge::Request::SessionMessage(agentsight::bridge::protocol::MessageParams {
            session_id: ID.into(),
            message: "hi".into(),
        });
    assert_eq!(
        b.call(&msg).await,
        Err(failed("dev", "messaging is not enabled"))
    );
    assert_eq!(b.child_pid().await, None, "discarded");
    wait_dead(first).await;
    assert_eq!(b.list(1).await.map(|s| s.len()), Ok(1));
    assert!(b.child_pid().await.is_some_and(|p| p != first));
}

#[tokio::test]
async fn a_hanging_bridge_times_out_and_is_respawned() {
    let home = sessions_common::home();
    let mark = home.path().join("hung-once");
    // The first start hangs without reading; the next is a real bridge.
    let script = format!(
        "if [ -e '{m}' ]; then exec env HOME='{h}' '{BIN}' bridge; fi; : > '{m}'; exec sleep 60",
        m = mark.display(),
        h = home.path().display()
    );
    let mut b = Bridge::new("slow", sh(&script));
    b.op_timeout = Duration::from_secs(2);
    let t = Instant::now();
    assert_eq!(
        b.list(2).await,
        Err(failed("slow", "bridge did not answer within 2 s"))
    );
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert_eq!(b.child_pid().await, None, "discarded");
    assert!(mark.exists());
    assert_eq!(b.list(2).await, Ok(cli_list(home.path(), 2)));
}

#[test]
fn the_default_bounds_are_the_protocol_s() {
    let b = Bridge::new("dev", vec![]);
    assert_eq!(b.op_timeout, Duration::from_secs(30));
    assert_eq!(b.lock_timeout, Duration::from_secs(1));
    assert_eq!(b.version, env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn a_held_lock_is_a_conflict_within_a_second() {
    let mut b = Bridge::new("busy", sh("exec sleep 60"));
    b.op_timeout = Duration::from_secs(4);
    let holder = b.list(1);
    let waiter = async {
        // Let the holder take the lock first.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = Instant::now();
        let r = b.list(1).await;
        (r, t.elapsed())
    };
    let (held, (r, took)) = tokio::join!(holder, waiter);
    assert_eq!(
        r,
        Err(CallError {
            container: "busy".into(),
            code: ErrorCode::Conflict,
            message: "bridge is busy; retry shortly".into()
        })
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_millis(1800),
        "{took:?}"
    );
    assert_eq!(
        held,
        Err(failed("busy", "bridge did not answer within 4 s"))
    );
}

#[tokio::test]
async fn another_version_is_refused_naming_both() {
    let home = sessions_common::home();
    let mut b = Bridge::new("old", local(home.path()));
    b.version = "0.0.0-host".into();
    let e = b.list(1).await.expect_err("mismatch");
    assert_eq!(
        e,
        failed(
            "old",
            &format!(
                "version mismatch: host agentsight 0.0.0-host, container agentsight {}; install the same version in both",
                env!("CARGO_PKG_VERSION")
            )
        )
    );
    assert_eq!(
        e.to_string(),
        format!(
            "container old: failed: version mismatch: host agentsight 0.0.0-host, container agentsight {}; install the same version in both",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(b.child_pid().await, None);
}

#[tokio::test]
async fn the_same_id_in_two_containers_is_a_conflict() {
    let a = sessions_common::home();
    let b = sessions_common::home();
    // Only container a holds the legacy session.
    std::fs::remove_file(
        b.path()
            .join(".claude/projects/-home-dev-legacy")
            .join(format!("{LEGACY}.jsonl")),
    )
    .expect("remove");
    let set = BridgeSet::new(vec![
        Bridge::new("a", local(a.path())),
        Bridge::new("b", local(b.path())),
    ]);
    assert_eq!(
        set.get(ID).await,
        Err(LookupError::Conflict {
            id: ID.into(),
            containers: vec!["a".into(), "b".into()]
        })
    );
    assert_eq!(
        set.get(ID).await.map_err(|e| e.to_string()),
        Err(format!(
            "session {ID} exists in more than one configured container (a, b)"
        ))
    );
    assert_eq!(
        set.get(LEGACY).await,
        Ok(("a".to_string(), cli_show(a.path(), LEGACY)))
    );
    assert_eq!(
        set.get("nope").await,
        Err(LookupError::NotFound { id: "nope".into() })
    );
}

#[tokio::test]
async fn one_failing_container_fails_the_lookup_and_is_named_in_the_list() {
    let a = sessions_common::home();
    // Reads the handshake, then closes its output.
    let set = BridgeSet::new(vec![
        Bridge::new("a", local(a.path())),
        Bridge::new("broken", sh("read line; exit 0")),
    ]);
    // How the child ended is part of the message (a failing `docker exec`
    // says why on stderr).
    let broken = failed(
        "broken",
        "bridge closed its output; the bridge command exited with status 0",
    );
    // Fail closed: container a found it, but a peer failed.
    assert_eq!(
        set.get(LEGACY).await,
        Err(LookupError::Failed {
            id: LEGACY.into(),
            errors: vec![broken.clone()]
        })
    );
    assert_eq!(
        set.get(LEGACY).await.map_err(|e| e.to_string()),
        Err(format!(
            "looking up session {LEGACY}: container broken: failed: bridge closed its output; the bridge command exited with status 0"
        ))
    );
    let want: Vec<ContainerSession> = cli_list(a.path(), 25)
        .into_iter()
        .map(|session| ContainerSession {
            container: "a".into(),
            session,
        })
        .collect();
    assert_eq!(want.len(), 12);
    assert_eq!(
        set.list(25).await,
        FanoutList {
            sessions: want,
            failed: vec![broken]
        }
    );
}

#[tokio::test]
async fn lists_merge_newest_first_and_clamp() {
    let a = sessions_common::home();
    let b = sessions_common::home();
    // Container b's legacy session is the newest of all.
    let newest = b
        .path()
        .join(".claude/projects/-home-dev-legacy")
        .join(format!("{LEGACY}.jsonl"));
    std::fs::File::options()
        .write(true)
        .open(&newest)
        .expect("open")
        .set_modified(std::time::SystemTime::now() + Duration::from_secs(3600))
        .expect("mtime");
    let set = BridgeSet::new(vec![
        Bridge::new("a", local(a.path())),
        Bridge::new("b", local(b.path())),
    ]);
    let got = set.list(3).await;
    assert_eq!(got.failed, vec![]);
    let mut want: Vec<ContainerSession> = ["a", "b"]
        .iter()
        .zip([a.path(), b.path()])
        .flat_map(|(c, h)| {
            cli_list(h, 3).into_iter().map(|session| ContainerSession {
                container: (*c).to_string(),
                session,
            })
        })
        .collect();
    // Newest first; equal times keep a's rows (in a's order) before b's.
    want.sort_by_key(|s| std::cmp::Reverse(s.session.updated_ms));
    want.truncate(3);
    assert_eq!(got.sessions, want);
    assert_eq!(
        (
            got.sessions[0].container.as_str(),
            got.sessions[0].session.session_id.as_str()
        ),
        ("b", LEGACY)
    );
    // 0 is clamped to 1, 100 to 25 (24 rows exist in the two homes).
    assert_eq!(set.list(0).await.sessions.len(), 1);
    assert_eq!(set.list(100).await.sessions.len(), 24);
}

#[tokio::test]
async fn two_busy_bridges_answer_within_the_shared_lock_bound() {
    let mut x = Bridge::new("x", sh("exec sleep 60"));
    let mut y = Bridge::new("y", sh("exec sleep 60"));
    x.op_timeout = Duration::from_secs(4);
    y.op_timeout = Duration::from_secs(4);
    let set = BridgeSet::new(vec![x, y]);
    let holders = async {
        let _ = tokio::join!(set.bridges()[0].list(1), set.bridges()[1].list(1));
    };
    let asker = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = Instant::now();
        let r = set.get(ID).await;
        (r, t.elapsed())
    };
    let ((), (r, took)) = tokio::join!(holders, asker);
    let busy = |c: &str| CallError {
        container: c.into(),
        code: ErrorCode::Conflict,
        message: "bridge is busy; retry shortly".into(),
    };
    assert_eq!(
        r,
        Err(LookupError::Failed {
            id: ID.into(),
            errors: vec![busy("x"), busy("y")]
        })
    );
    assert!(took < Duration::from_millis(1800), "{took:?}");
}
