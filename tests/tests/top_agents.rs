//! Live states of real CLI sessions (issues 15 and 29): the pinned Claude
//! Code, Codex, Gemini CLI, Copilot CLI, opencode and Qwen Code are driven by
//! the scripted model server to each state — working, then your turn (a
//! normal scenario), rate-limited (429
//! with the provider's own rate-limit body), auth required (401), stalled
//! (headers and the first stream events, then silence) — and the state is
//! read from `agentsight top --json --home <run home>`, run as the test user
//! (no kernel programs), on the transcripts the CLIs really wrote.
//!
//! Where a CLI writes nothing a state could be derived from, the test
//! asserts what it does write and the state that follows from it; the gaps
//! are listed in docs/live-states.md.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use agentsight_tests::{
    bin,
    e2e::{Agent, Run, as_test_user},
    require_root, test_user,
};
use serde_json::Value;

/// How long a state may take to show up.
const STATE_TIMEOUT: Duration = Duration::from_secs(90);

/// `agentsight top ARGS… --home HOME` as the test user: the transcript
/// states only (an unprivileged `top` loads no kernel programs).
fn top_command(run: &Run, args: &[&str]) -> Command {
    let (uid, gid) = test_user();
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--init-groups")
        .arg("--")
        .arg(bin())
        .arg("top")
        .args(args)
        .arg("--home")
        .arg(&run.home)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER");
    c
}

/// One `top --once --json` snapshot.
fn top_once(run: &Run) -> Value {
    let out = top_command(run, &["--once", "--json", "--all"])
        .output()
        .expect("run agentsight top");
    assert!(
        out.status.success(),
        "top --once --json failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "top --once --json: bad JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The rows of a snapshot.
fn rows(snapshot: &Value) -> Vec<Value> {
    snapshot["rows"].as_array().cloned().unwrap_or_default()
}

/// The row of session `id` in a snapshot, if listed.
fn row_of(snapshot: &Value, id: &str) -> Option<Value> {
    rows(snapshot)
        .into_iter()
        .find(|r| r["session_id"].as_str() == Some(id))
}

/// The run's one transcript and its session id, read without agentsight.
fn session_id(run: &Run) -> Option<String> {
    let files = run.transcripts();
    let f = files.first()?;
    match run.agent {
        Agent::Claude | Agent::Qwen => Some(f.file_stem()?.to_str()?.to_string()),
        Agent::Copilot => Some(f.parent()?.file_name()?.to_str()?.to_string()),
        // Its sessions are rows of one database (top's row: `path` the
        // database, `session_id` the row's id): the run's one session.
        Agent::Opencode => opencode_session_id(f),
        Agent::Codex | Agent::Gemini => {
            let text = std::fs::read_to_string(f).ok()?;
            let first: Value = serde_json::from_str(text.lines().next()?).ok()?;
            match run.agent {
                Agent::Codex => first["payload"]["id"].as_str().map(str::to_string),
                _ => first["sessionId"].as_str().map(str::to_string),
            }
        }
    }
}

/// The one session of an opencode database, read-only (a reader never
/// blocks opencode's WAL writes); None until opencode has written it.
fn opencode_session_id(db: &std::path::Path) -> Option<String> {
    let ids = agentsight_sessions::opencode::store::session_ids(db).ok()?;
    match ids.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Polls `top --once --json` until session `id`'s row has `state`; returns
/// that row.
fn wait_state(run: &Run, state: &str, timeout: Duration) -> Value {
    let start = Instant::now();
    let mut last = Value::Null;
    loop {
        if let Some(id) = session_id(run) {
            let snap = top_once(run);
            if let Some(row) = row_of(&snap, &id) {
                if row["state"] == state {
                    return row;
                }
                last = row;
            }
        }
        assert!(
            start.elapsed() < timeout,
            "{} {}: state {state} not reached in {timeout:?}; last row: {last}",
            run.agent.name(),
            run.scenario.name
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The row's fixed facts: provider and session id as the CLI wrote them.
fn assert_row_is(run: &Run, row: &Value) {
    let provider = match run.agent {
        Agent::Claude => "claude",
        Agent::Codex => "codex",
        Agent::Gemini => "gemini",
        other => other.name(),
    };
    assert_eq!(row["provider"], provider, "row: {row}");
    assert_eq!(row["session_id"].as_str(), session_id(run).as_deref());
}

/// A normal scenario whose first answer takes 4 s and whose first call runs
/// `sleep 8`: working while the CLI waits on the model (and, for Claude
/// Code and Codex, while the call runs — Gemini CLI 0.61 records a call only
/// once it finished, so its transcript reads "your turn" meanwhile; see
/// docs/live-states.md), your turn once the CLI finished its answer.
fn working_then_your_turn(agent: Agent) {
    require_root();
    let run = Run::prepare(agent, "slow");
    let running = run.start(as_test_user);
    let working = wait_state(&run, "working", STATE_TIMEOUT);
    assert_row_is(&run, &working);
    let out = running.wait(agentsight_tests::e2e::RUN_TIMEOUT);
    assert!(
        out.status.success(),
        "{} run failed: {}",
        agent.name(),
        out.stderr
    );
    let snap = top_once(&run);
    let id = session_id(&run).expect("session id");
    let row = row_of(&snap, &id).unwrap_or_else(|| panic!("no row for {id}: {snap}"));
    assert_eq!(row["state"], "your_turn", "after the run: {row}");
}

#[test]
fn claude_working_then_your_turn() {
    working_then_your_turn(Agent::Claude);
}

#[test]
fn codex_working_then_your_turn() {
    working_then_your_turn(Agent::Codex);
}

#[test]
fn gemini_working_then_your_turn() {
    working_then_your_turn(Agent::Gemini);
}

#[test]
fn copilot_working_then_your_turn() {
    working_then_your_turn(Agent::Copilot);
}

#[test]
fn opencode_working_then_your_turn() {
    working_then_your_turn(Agent::Opencode);
}

#[test]
fn qwen_working_then_your_turn() {
    working_then_your_turn(Agent::Qwen);
}

/// A run whose first model call fails with `scenario`'s error; the CLI is
/// told not to retry where it has a switch for it.
fn failed_run(agent: Agent, scenario: &str) -> Run {
    let mut run = Run::prepare(agent, scenario);
    // Claude Code retries a 429 up to 10 times, honouring retry-after.
    run.extra_env.push("CLAUDE_CODE_MAX_RETRIES=0".into());
    let out = run.launch(as_test_user);
    assert!(
        !out.status.success(),
        "{} {scenario}: the CLI should fail; stdout: {}",
        agent.name(),
        out.stdout
    );
    run
}

#[test]
fn claude_rate_limited() {
    require_root();
    let run = failed_run(Agent::Claude, "ratelimited");
    // Its transcript's synthetic error line: `isApiErrorMessage`, error
    // `rate_limit` (with an `end_turn`-like envelope that must not end the turn).
    let text = std::fs::read_to_string(&run.transcripts()[0]).unwrap();
    assert!(
        text.contains(r#""error":"rate_limit""#),
        "transcript:\n{text}"
    );
    let row = wait_state(&run, "rate_limited", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

#[test]
fn codex_rate_limited() {
    require_root();
    let run = failed_run(Agent::Codex, "ratelimited");
    let row = wait_state(&run, "rate_limited", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

#[test]
fn claude_auth_required() {
    require_root();
    let run = failed_run(Agent::Claude, "unauthorized");
    let text = std::fs::read_to_string(&run.transcripts()[0]).unwrap();
    assert!(
        text.contains(r#""error":"authentication_failed""#),
        "transcript:\n{text}"
    );
    let row = wait_state(&run, "auth_required", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

#[test]
fn codex_auth_required() {
    require_root();
    let run = failed_run(Agent::Codex, "unauthorized");
    let row = wait_state(&run, "auth_required", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

/// Gemini CLI 0.61 writes nothing about a 401: the process exits 1, and its
/// last line rewrites the chat's history back to the injected session
/// context (the failed prompt is dropped). No turn record is left, so the
/// transcript says only that it was just written: working while fresh
/// (unknown later). This pins that gap.
#[test]
fn gemini_auth_failure_leaves_no_turn() {
    require_root();
    let run = failed_run(Agent::Gemini, "unauthorized");
    let text = std::fs::read_to_string(&run.transcripts()[0]).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let history = last["$set"]["messages"]
        .as_array()
        .expect("a $set of messages");
    assert_eq!(history.len(), 1, "history: {last}");
    let context = history[0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(context.starts_with("<session_context>"), "history: {last}");
    let row = wait_state(&run, "working", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

/// Gemini CLI 0.61 retries a 429 `RESOURCE_EXHAUSTED` with growing delays
/// and writes nothing about it: while it retries the transcript ends with the
/// user's prompt, an open turn (working).
#[test]
fn gemini_rate_limit_leaves_an_open_turn() {
    require_root();
    let run = Run::prepare(Agent::Gemini, "ratelimited");
    let running = run.start(as_test_user);
    let start = Instant::now();
    while rate_limit_answers(&run) < 2 {
        assert!(
            start.elapsed() < STATE_TIMEOUT,
            "Gemini did not retry the 429"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let last = last_gemini_message(&run);
    assert_eq!(last["type"], "user", "last message: {last}");
    let row = wait_state(&run, "working", Duration::from_secs(10));
    assert_row_is(&run, &row);
    running.kill();
}

/// How many 429s the server has answered.
fn rate_limit_answers(run: &Run) -> usize {
    run.server_entries()
        .iter()
        .filter(|e| e["fail"] == "rate_limit")
        .count()
}

/// The newest message of a Gemini `.jsonl` chat (lines with a `type`).
fn last_gemini_message(run: &Run) -> Value {
    let text = std::fs::read_to_string(&run.transcripts()[0]).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v.get("type").is_some())
        .unwrap_or(Value::Null)
}

/// Thresholds scaled by this for the stalled test (stall after 300 s × 0.02
/// = 6 s of silence).
const STALL_SCALE: &str = "0.02";

/// A stream that stops after its first events: `top --json` (one process,
/// so it remembers having seen the session working) shows working, then
/// stalled once the transcript has been silent past the scaled threshold.
fn stalled(agent: Agent) {
    require_root();
    let run = Run::prepare(agent, "stalled");
    let running = run.start(as_test_user);
    let start = Instant::now();
    let id = loop {
        if let Some(id) = session_id(&run) {
            break id;
        }
        assert!(start.elapsed() < STATE_TIMEOUT, "no transcript appeared");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut top = top_command(
        &run,
        &["--json", "--all", "--test-thresholds-scale", STALL_SCALE],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("start top --json");
    let states = states_until(&mut top, &id, "stalled", STATE_TIMEOUT);
    let _ = top.kill();
    let _ = top.wait();
    running.kill();
    // opencode 1.18.33 writes the session row ~1.5 s before its first
    // message: a session without messages has no turn and reads unknown.
    let first = match (agent, states.as_slice()) {
        (Agent::Opencode, [(s, _), rest @ ..]) if s == "unknown" => rest.first(),
        _ => states.first(),
    };
    assert_eq!(
        first.map(|(s, _)| s.as_str()),
        Some("working"),
        "{states:?}"
    );
    assert_eq!(
        states.last().map(|(s, _)| s.as_str()),
        Some("stalled"),
        "{states:?}"
    );
    assert_row_is(&run, &states.last().unwrap().1);
}

/// The distinct states session `id` goes through in a `top --json` stream,
/// up to `until`.
fn states_until(
    top: &mut std::process::Child,
    id: &str,
    until: &str,
    timeout: Duration,
) -> Vec<(String, Value)> {
    let stdout = top.stdout.take().expect("top stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut states: Vec<(String, Value)> = Vec::new();
    while start.elapsed() < timeout {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) else {
            continue;
        };
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("top --json: bad line ({e}): {line}"));
        let Some(row) = row_of(&v, id) else { continue };
        let state = row["state"].as_str().unwrap_or_default().to_string();
        if states.last().is_none_or(|(s, _)| *s != state) {
            states.push((state.clone(), row));
        }
        if state == until {
            return states;
        }
    }
    panic!("{until} not reached in {timeout:?}: {states:?}");
}

#[test]
fn claude_stalled() {
    stalled(Agent::Claude);
}

#[test]
fn codex_stalled() {
    stalled(Agent::Codex);
}

#[test]
fn gemini_stalled() {
    stalled(Agent::Gemini);
}

#[test]
fn copilot_rate_limited() {
    require_root();
    let run = failed_run(Agent::Copilot, "ratelimited");
    let row = wait_state(&run, "rate_limited", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

#[test]
fn copilot_auth_required() {
    require_root();
    let run = failed_run(Agent::Copilot, "unauthorized");
    let row = wait_state(&run, "auth_required", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

/// Qwen Code 0.24.4 retries a 429 (honouring the server's `retry-after:
/// 20`) and, once one request's retries are used up (~60 s), writes a
/// `ui_telemetry` `qwen-code.api_error` record (status 429,
/// `RateLimitError`) — then starts over without exiting: the state is read
/// while it runs.
#[test]
fn qwen_rate_limited() {
    require_root();
    let run = Run::prepare(Agent::Qwen, "ratelimited");
    let running = run.start(as_test_user);
    let row = wait_state(&run, "rate_limited", STATE_TIMEOUT);
    assert_row_is(&run, &row);
    let text = std::fs::read_to_string(&run.transcripts()[0]).unwrap();
    assert!(
        text.contains(r#""error_type":"RateLimitError","status_code":429"#),
        "transcript:\n{text}"
    );
    running.kill();
}

#[test]
fn qwen_auth_required() {
    require_root();
    let run = failed_run(Agent::Qwen, "unauthorized");
    let row = wait_state(&run, "auth_required", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

/// opencode 1.18.33 honours `retry-after: 20` through six requests (~100
/// s), then stores the assistant message's `error` (`APIError`,
/// `statusCode: 429`) and exits 1.
#[test]
fn opencode_rate_limited() {
    require_root();
    let run = failed_run(Agent::Opencode, "ratelimited");
    let row = wait_state(&run, "rate_limited", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

#[test]
fn opencode_auth_required() {
    require_root();
    let run = failed_run(Agent::Opencode, "unauthorized");
    let row = wait_state(&run, "auth_required", Duration::from_secs(10));
    assert_row_is(&run, &row);
}

#[test]
fn copilot_stalled() {
    stalled(Agent::Copilot);
}

#[test]
fn opencode_stalled() {
    stalled(Agent::Opencode);
}

#[test]
fn qwen_stalled() {
    stalled(Agent::Qwen);
}
