//! `agentsight session message` refuses before anything acts (issue 17):
//! off by default (help, exit status, the bridge's answer), the config file
//! that enables it only if it is the user's own, Cursor observe-only,
//! identity (never root, never someone else's session), a busy session, and
//! a session live outside agentsight — the last with the real CLIs running.
//! Every refusal has its own exit status (docs/messaging.md).

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentsight_tests::{
    bin,
    e2e::{Agent, Run, as_test_user},
    require_root, scratch, test_user,
};

const CLAUDE_ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const CURSOR_ID: &str = "d00d0000-1111-4222-8333-444455556666";

const NOT_ENABLED: &str = "agentsight: error: messaging is not enabled: pass --allow-messaging, or put `messaging = true` in ~/.config/agentsight/config.toml (a file you own)\n";

/// A copy of the fixture home, owned by `uid`.
fn fixture_home(name: &str, uid: u32, gid: u32) -> PathBuf {
    let dir = scratch(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions/home");
    let st = Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(dir.join("home"))
        .status()
        .expect("cp");
    assert!(st.success());
    let st = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(&dir)
        .status()
        .expect("chown");
    assert!(st.success());
    dir.join("home")
}

/// `agentsight session message ARGS…`, as the test user (`as_user`) or as
/// root with the given extra environment; `HOME` is `home`.
fn message(as_user: bool, home: &Path, env: &[(&str, String)], args: &[&str]) -> Output {
    let (uid, gid) = test_user();
    let mut c = if as_user {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--init-groups")
            .arg("--")
            .arg(bin());
        c
    } else {
        Command::new(bin())
    };
    c.args(["session", "message"])
        .args(args)
        .env("HOME", home)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run agentsight session message")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn sudo_env() -> Vec<(&'static str, String)> {
    let (uid, gid) = test_user();
    vec![
        ("SUDO_UID", uid.to_string()),
        ("SUDO_GID", gid.to_string()),
        ("SUDO_USER", agentsight_tests::TEST_USER.to_string()),
    ]
}

#[test]
fn messaging_is_off_by_default() {
    require_root();
    let (uid, gid) = test_user();
    let home = fixture_home("msg-off", uid, gid);

    let help = Command::new(bin())
        .args(["session", "message", "--help"])
        .output()
        .expect("help");
    assert!(help.status.success());
    let h = text(&help.stdout);
    assert!(
        h.contains("OFF by default: enable it with --allow-messaging, or with `messaging =\ntrue` in ~/.config/agentsight/config.toml")
            || h.contains("OFF by default: enable it with --allow-messaging, or with `messaging = true` in ~/.config/agentsight/config.toml"),
        "{h}"
    );
    assert!(
        h.contains("3 the session is live outside agentsight"),
        "{h}"
    );

    // Not enabled: explained, exit 2, before the session is even looked up
    // (a known and an unknown id get the same answer), nothing written.
    for id in [CLAUDE_ID, "no-such-session"] {
        let out = message(
            true,
            &home,
            &[],
            &[id, "--text", "hi", "--home", home.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(text(&out.stderr), NOT_ENABLED);
        assert_eq!(text(&out.stdout), "");
    }
    assert!(!home.join(".local/state/agentsight").exists());

    // The config file enables it only when it is the user's own.
    let cfg_dir = home.join(".config/agentsight");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    let cfg = cfg_dir.join("config.toml");
    std::fs::write(&cfg, "messaging = true\n").unwrap();
    std::os::unix::fs::chown(&cfg, Some(uid), Some(gid)).unwrap();
    let args = [
        "no-such-session",
        "--text",
        "hi",
        "--home",
        home.to_str().unwrap(),
    ];
    let out = message(true, &home, &[], &args);
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (
            Some(2),
            "agentsight: error: session no-such-session not found\n".to_string()
        )
    );
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = message(true, &home, &[], &args);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "note: {} is ignored: it must be a regular file of yours (uid {uid}) that no one else may write\n{NOT_ENABLED}",
            cfg.display()
        )
    );
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&cfg, Some(0), Some(0)).unwrap();
    let out = message(true, &home, &[], &args);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).ends_with(NOT_ENABLED),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&cfg, "messagin = true\n").unwrap();
    std::os::unix::fs::chown(&cfg, Some(uid), Some(gid)).unwrap();
    let out = message(true, &home, &[], &args);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "agentsight: error: {}:1: unknown field `messagin`",
            cfg.display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // A bad key on line 2 is reported at line 2, and a file over the bound
    // is refused as such.
    std::fs::write(&cfg, "# mine\nmessagin = true\n").unwrap();
    let err = text(&message(true, &home, &[], &args).stderr);
    assert!(
        err.starts_with(&format!(
            "agentsight: error: {}:2: unknown field `messagin`",
            cfg.display()
        )),
        "{err}"
    );
    std::fs::write(
        &cfg,
        format!("messaging = true\n#{}\n", "x".repeat(64 * 1024)),
    )
    .unwrap();
    let out = message(true, &home, &[], &args);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "agentsight: error: {}: larger than 64 KiB, the most a config file may be\n",
            cfg.display()
        )
    );
}

/// `agentsight bridge [--allow-messaging]` on stdin/stdout, as the test user
/// with HOME = `home`: the answer to one hello and one `session/message`.
fn bridge_answer(home: &Path, allow: bool, session_id: &str) -> String {
    let (uid, gid) = test_user();
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--init-groups")
        .arg("--")
        .arg(bin())
        .arg("bridge");
    if allow {
        c.arg("--allow-messaging");
    }
    let mut child = c
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bridge");
    let v = env!("CARGO_PKG_VERSION");
    let req = format!(
        "{{\"method\":\"bridge/hello\",\"params\":{{\"version\":\"{v}\"}}}}\n{{\"method\":\"session/message\",\"params\":{{\"session_id\":\"{session_id}\",\"message\":\"continue\"}}}}\n"
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("bridge output");
    let s = text(&out.stdout);
    s.lines().nth(1).unwrap_or_default().to_string()
}

#[test]
fn the_bridge_answers_messages_only_when_started_with_the_opt_in() {
    require_root();
    let (uid, gid) = test_user();
    let home = fixture_home("msg-bridge", uid, gid);
    assert_eq!(
        bridge_answer(&home, false, CLAUDE_ID),
        r#"{"Err":{"code":"failed","message":"messaging is not enabled"}}"#
    );
    assert_eq!(
        bridge_answer(&home, true, CURSOR_ID),
        r#"{"Err":{"code":"failed","message":"messaging cursor sessions is not supported (observation only)"}}"#
    );
    assert_eq!(
        bridge_answer(&home, true, "no-such-session"),
        r#"{"Err":{"code":"not_found","message":"session no-such-session not found"}}"#
    );
}

#[test]
fn cursor_sessions_are_observe_only() {
    require_root();
    let (uid, gid) = test_user();
    let home = fixture_home("msg-cursor", uid, gid);
    let h = home.to_str().unwrap();
    let out = message(
        true,
        &home,
        &[],
        &[CURSOR_ID, "--allow-messaging", "--text", "hi", "--home", h],
    );
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(
        text(&out.stderr),
        "agentsight: error: messaging cursor sessions is not supported (observation only)\n"
    );
}

#[test]
fn identity_is_never_root_and_never_someone_else() {
    require_root();
    let (uid, _) = test_user();
    let transcript =
        |home: &Path| home.join(format!(".claude/projects/-home-dev-shop/{CLAUDE_ID}.jsonl"));
    let args = |h: &str| -> Vec<String> {
        [CLAUDE_ID, "--allow-messaging", "--text", "hi", "--home", h]
            .map(String::from)
            .to_vec()
    };
    let run = |as_user: bool, home: &Path, env: &[(&str, String)]| {
        let a = args(home.to_str().unwrap());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = message(as_user, home, env, &a);
        (out.status.code(), text(&out.stderr))
    };

    // Root's own transcript, root asking: refused.
    let root_home = fixture_home("msg-id-root", 0, 0);
    assert_eq!(
        run(false, &root_home, &[]),
        (
            Some(6),
            format!(
                "agentsight: error: refused: {} belongs to root; agentsight never runs an agent as root\n",
                transcript(&root_home).display()
            )
        )
    );
    // Another user's transcript: refused to the test user, and to the test
    // user through sudo.
    let other = fixture_home("msg-id-other", 65534, 65534);
    assert_eq!(
        run(true, &other, &[]),
        (
            Some(6),
            format!(
                "agentsight: error: refused: {} belongs to uid 65534, not to you (uid {uid}): a session is continued only as its owner\n",
                transcript(&other).display()
            )
        )
    );
    assert_eq!(
        run(false, &other, &sudo_env()),
        (
            Some(6),
            format!(
                "agentsight: error: refused: {} belongs to uid 65534, not to the sudo caller (uid {uid}): a session is continued only as its owner\n",
                transcript(&other).display()
            )
        )
    );
    // Nothing was written into anyone's home.
    for h in [&root_home, &other] {
        assert!(!h.join(".local/state/agentsight").exists());
    }
}

#[test]
fn a_second_message_while_one_is_handled_is_a_conflict() {
    require_root();
    let (uid, gid) = test_user();
    let home = fixture_home("msg-busy", uid, gid);
    let h = home.to_str().unwrap();
    let lock = home.join(format!(
        ".local/state/agentsight/locks/claude-{CLAUDE_ID}.lock"
    ));
    // The first message: its lock is held (as the test user, like a running
    // `session message` of theirs).
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(home.join(".local"))
        .status()
        .unwrap();
    let mut holder = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--init-groups")
        .args(["--", "flock", "--exclusive"])
        .arg(&lock)
        .args(["sleep", "60"])
        .spawn()
        .expect("flock");
    let t = Instant::now();
    while !lock.exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let out = message(
        true,
        &home,
        &[],
        &[CLAUDE_ID, "--allow-messaging", "--text", "hi", "--home", h],
    );
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (
            Some(4),
            "agentsight: error: this session is already accepting another message\n".to_string()
        )
    );
    // A message that takes the lock (then fails: the fixture's cwd does not
    // exist here), through sudo and as root itself: the lock is the
    // owner's, in their home, never root's.
    for env in [sudo_env(), Vec::new()] {
        std::fs::remove_dir_all(home.join(".local")).unwrap();
        let out = message(
            false,
            &home,
            &env,
            &[CLAUDE_ID, "--allow-messaging", "--text", "hi", "--home", h],
        );
        assert_eq!(
            (out.status.code(), text(&out.stderr)),
            (
                Some(7),
                "agentsight: error: the session's working directory /home/dev/shop no longer exists\n"
                    .to_string()
            )
        );
        let m = std::fs::metadata(&lock).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (uid, 0o600));
        let m = std::fs::metadata(lock.parent().unwrap()).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (uid, 0o700));
    }
}

/// While a real CLI works on a gated turn (its call waits for a file), a
/// message to its session is refused as live outside agentsight, with the
/// evidence the ladder found.
fn refused_while_live(agent: Agent, evidence: &str) {
    require_root();
    let run = Run::prepare(agent, "gated");
    let mut running = run.start(as_test_user);
    // The call is waiting once the server answered the first main request.
    let t = Instant::now();
    let id = loop {
        assert!(!running.finished(), "the {} run ended early", agent.name());
        let answered = run.main_responses().len();
        let listed = run.sessions();
        if answered >= 1
            && let Some(id) = listed
                .as_array()
                .and_then(|a| a.first())
                .and_then(|s| s["session_id"].as_str())
        {
            break id.to_string();
        }
        assert!(t.elapsed() < Duration::from_secs(90), "no session appeared");
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_millis(500));
    let h = run.home.to_str().unwrap();
    let out = message(
        true,
        &run.home,
        &[],
        &[&id, "--allow-messaging", "--text", "hi", "--home", h],
    );
    std::fs::write(run.work.join("release"), "").unwrap();
    let done = running.wait(Duration::from_secs(90));
    assert!(done.status.success(), "{}", done.stderr);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.starts_with(
            "agentsight: error: session is already running outside agentsight; cannot attach safely: "
        ),
        "{err}"
    );
    assert!(err.contains(evidence), "{}: {err}", agent.name());
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn claude_live_outside_agentsight_is_refused() {
    refused_while_live(Agent::Claude, "Claude Code pid ");
}

#[test]
fn codex_live_outside_agentsight_is_refused() {
    // The npm launcher (node) is met first: its tree is bound by cwd; the
    // native child holds the rollout open (proc_fd) — either is the ladder.
    refused_while_live(Agent::Codex, "codex pid ");
}

#[test]
fn gemini_live_outside_agentsight_is_refused() {
    refused_while_live(Agent::Gemini, "(cwd_fallback: only session with cwd ");
}

#[test]
fn copilot_live_outside_agentsight_is_refused() {
    // Copilot CLI's own marker: `inuse.PID.lock` in the session's directory.
    refused_while_live(Agent::Copilot, "Copilot CLI pid ");
}

#[test]
fn opencode_live_outside_agentsight_is_refused() {
    // opencode's lock (`locks/HASH.lock/meta.json`) of a live process: any
    // live opencode on the home's database is a writer to it.
    refused_while_live(Agent::Opencode, "opencode pid ");
}

#[test]
fn qwen_live_outside_agentsight_is_refused() {
    refused_while_live(Agent::Qwen, "qwen pid ");
}

#[test]
fn a_working_directory_the_user_cannot_enter_is_named_as_such() {
    require_root();
    let (uid, gid) = test_user();
    let home = fixture_home("msg-cwd", uid, gid);
    let h = home.to_str().unwrap();
    // The session's cwd exists but sits in a root-only directory.
    let locked = home.parent().unwrap().join("locked");
    let cwd = locked.join("shop");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let transcript = home.join(format!(".claude/projects/-home-dev-shop/{CLAUDE_ID}.jsonl"));
    let text_of = std::fs::read_to_string(&transcript).unwrap();
    std::fs::write(
        &transcript,
        text_of.replace(
            "\"cwd\":\"/home/dev/shop\"",
            &format!("\"cwd\":\"{}\"", cwd.display()),
        ),
    )
    .unwrap();
    for env in [sudo_env(), Vec::new()] {
        let as_user = env.is_empty();
        let out = message(
            as_user,
            &home,
            &env,
            &[CLAUDE_ID, "--allow-messaging", "--text", "hi", "--home", h],
        );
        assert_eq!(
            (out.status.code(), text(&out.stderr)),
            (
                Some(7),
                format!(
                    "agentsight: error: the session's working directory {} cannot be entered: Permission denied (os error 13)\n",
                    cwd.display()
                )
            ),
            "as_user={as_user}"
        );
    }
}
