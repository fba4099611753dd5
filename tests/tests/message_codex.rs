//! `agentsight session message` continuing real Codex sessions (issue 17):
//! the pinned Codex 0.169's `app-server` against the scripted model server,
//! in the run's network namespace. A continuation scenario
//! (`continue_codex_*.json`, `prior_results` = the earlier run's tool
//! results) scripts the new turn; the ground truth is what Codex itself
//! wrote (its rollout) and what the workspace holds afterwards.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentsight_tests::{
    TEST_USER, bin,
    codex_container::{CODEX_IN, codex_path, start_the_container},
    docker::{DOCKER_USER, ensure_base_image},
    e2e::{Agent, Outcome, Run, as_test_user, e2e_dir, scenario},
    messaging::{Caller, continue_session, json_of, only_session, texts},
    test_user,
};
use serde_json::Value;

/// What the command says about a Codex turn continued in a container
/// (docs/messaging.md, "Codex in a container").
const CONTAINER_NOTE: &str = "Codex in a container: this turn runs without Codex's own command sandbox (sandboxPolicy externalSandbox, network enabled) — the container is the sandbox boundary; approval requests are refused, never granted; later turns keep the session's own settings";

/// Continues the run's session with `text` under `continuation`'s script,
/// as root sudo'd by the test user, with `extra` arguments.
fn message(run: &mut Run, id: &str, continuation: &str, text: &str, extra: &[&str]) -> Outcome {
    continue_session(run, id, continuation, text, &[], extra, Caller::Sudo)
}

/// The output Codex recorded for the last call with this id, from its
/// rollout.
fn call_output(rollout: &Path, call_id: &str) -> String {
    std::fs::read_to_string(rollout)
        .unwrap()
        .lines()
        // The scripted server numbers its calls per run: the last is ours.
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| {
            v["payload"]["type"] == "function_call_output" && v["payload"]["call_id"] == call_id
        })
        .and_then(|v| v["payload"]["output"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no output of {call_id} in {}", rollout.display()))
}

/// A session made by a normal e2e run (`codex exec`), continued under sudo:
/// the same rollout holds the new prompt, the call and the response; the
/// app-server ran as the session's owner.
#[test]
fn codex_session_continued_under_sudo() {
    agentsight_tests::require_root();
    let mut run = Run::prepare(Agent::Codex, "inspect");
    let out = run.run();
    assert!(out.status.success(), "{out:?}");
    let (id, rollout) = only_session(&run);

    let text = "Who runs your commands? Check with id.";
    let out = message(&mut run, &id, "continue_codex_inspect", text, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let j = json_of(&out);
    assert_eq!(
        (
            &j["provider"],
            &j["transport"],
            &j["run_as"],
            &j["acknowledged"],
            &j["completed"],
            &j["response"],
        ),
        (
            &Value::from("codex"),
            &Value::from("codex-app-server"),
            &Value::from(TEST_USER),
            &Value::from(true),
            &Value::from(true),
            &Value::from("Commands run as the session's owner."),
        ),
        "{j}"
    );
    assert_eq!(j["rejected_requests"], serde_json::json!([]));

    // The same session file, no new one.
    assert_eq!(run.transcripts(), vec![rollout.clone()]);
    let show = run.session_show(&id);
    assert_eq!(
        texts(&show, "prompts"),
        vec![run_prompt("inspect"), text.to_string()]
    );
    let responses = texts(&show, "responses");
    assert_eq!(
        responses[responses.len() - 2..],
        [
            "Checking which user runs my commands.".to_string(),
            "Commands run as the session's owner.".to_string()
        ]
    );
    // The new call ran as the test user: `id -un` said so in the rollout.
    let call = show["tools"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (
            &call["command"],
            &call["status"],
            &call["exit_code"],
            &call["prompt_index"]
        ),
        (
            &Value::from("id -un"),
            &Value::from("ok"),
            &Value::from(0),
            &Value::from(1)
        ),
        "{call}"
    );
    let output = call_output(&rollout, call["call_id"].as_str().unwrap());
    assert!(
        output.ends_with(&format!("Output:\n{TEST_USER}\n")),
        "{output:?}"
    );
}

fn run_prompt(name: &str) -> String {
    scenario(name).prompt
}

/// A session started the way an IDE client starts one (`app-server`
/// `thread/start`): Codex records its default approval policy, `on-request`.
/// Returns its id.
fn ide_session(run: &Run) -> String {
    let script = e2e_dir().join("codex_thread.js").display().to_string();
    let prompt = run.scenario.prompt.clone();
    let out = run.launch(|cmd| {
        // The CLI's environment, then the IDE client instead of `codex exec`.
        let at = cmd.iter().position(|a| a == "codex").unwrap();
        let mut v = cmd[..at].to_vec();
        v.extend(["node".to_string(), script, prompt]);
        as_test_user(v)
    });
    assert!(out.status.success(), "{out:?}");
    out.stdout.trim().to_string()
}

/// Codex asks to run a command outside its sandbox; agentsight refuses the
/// approval request: the command did not run, the output names the
/// request, and Codex records the call as failed.
#[test]
fn codex_approval_request_refused() {
    agentsight_tests::require_root();
    let mut run = Run::prepare(Agent::Codex, "codex_ready");
    let id = ide_session(&run);
    let (listed, rollout) = only_session(&run);
    assert_eq!(listed, id);

    let text = "Create approved.txt in the project.";
    let out = message(&mut run, &id, "continue_codex_approval", text, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The shell Codex runs commands with is the user's login shell.
    let shell = "/bin/sh";
    let detail = format!(
        "command: {shell} -lc 'touch approved.txt'; in {}; reason: Create approved.txt outside the sandbox?",
        run.work.display()
    );
    let j = json_of(&out);
    assert_eq!(
        j["rejected_requests"],
        serde_json::json!([{
            "method": "item/commandExecution/requestApproval",
            "detail": detail,
        }]),
        "{j}"
    );
    assert!(
        out.stderr.contains(&format!(
            "agentsight: refused the agent's request item/commandExecution/requestApproval: {detail}\n"
        )),
        "{}",
        out.stderr
    );
    assert_eq!(
        j["response"],
        "The command was not approved, so approved.txt was not created."
    );
    // Ground truth: the command never ran.
    assert!(!run.work.join("approved.txt").exists());
    assert_eq!(run.transcripts(), vec![rollout.clone()]);
    let show = run.session_show(&id);
    assert_eq!(
        texts(&show, "prompts"),
        vec![run_prompt("codex_ready"), text.to_string()]
    );
    let tools = show["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{show}");
    assert_eq!(
        (
            &tools[0]["command"],
            &tools[0]["status"],
            &tools[0]["exit_code"]
        ),
        (
            &Value::from("touch approved.txt"),
            &Value::from("failed"),
            &Value::Null
        ),
        "{}",
        tools[0]
    );
    assert_eq!(
        call_output(&rollout, tools[0]["call_id"].as_str().unwrap()),
        r#"exec_command failed: CreateProcess { message: "Rejected(\"approval request failed\")" }"#
    );
}

/// A model stream that stalls: the command gives up at `--turn-timeout`
/// with exit status 8 and one clear line.
#[test]
fn codex_stalled_turn_times_out() {
    agentsight_tests::require_root();
    let mut run = Run::prepare(Agent::Codex, "inspect");
    let out = run.run();
    assert!(out.status.success(), "{out:?}");
    let (id, _) = only_session(&run);

    let out = message(
        &mut run,
        &id,
        "continue_codex_stall",
        "Summarise the notes again.",
        &["--turn-timeout", "20"],
    );
    assert_eq!(out.status.code(), Some(8), "{out:?}");
    assert!(
        out.elapsed >= Duration::from_secs(20) && out.elapsed < Duration::from_secs(60),
        "{:?}",
        out.elapsed
    );
    let j = json_of(&out);
    assert_eq!(
        (&j["acknowledged"], &j["exit_status"], &j["error"]),
        (
            &Value::from(true),
            &Value::from(8),
            &Value::from("Codex's turn did not finish within 20 s; it was interrupted")
        ),
        "{j}"
    );
    assert_eq!(
        out.stderr,
        "agentsight: error: Codex's turn did not finish within 20 s; it was interrupted\n"
    );
}

/// A Codex session made inside a container, continued from the host through
/// the container's bridge: the host says what the turn runs without, the
/// turn runs in the container on the external-sandbox policy (its write in
/// the workspace succeeds, as the container user), and the session there
/// holds the new prompt and response, in the same rollout. Without the
/// host's opt-in the command refuses (exit 2); a bridge started without
/// `--allow-messaging` refuses too.
#[test]
fn codex_in_a_container_continued_through_the_bridge() {
    agentsight_tests::require_root();
    ensure_base_image();
    let mut run = Run::prepare(Agent::Codex, "codex_ready");
    let server = run.start_server();
    let name = format!("agentsight-test-message-codex-{}", std::process::id());
    run.docker_container = Some(name.clone());
    let c = start_the_container(&run, &name);
    // The session's own release, where Codex's standalone installer puts
    // it, is the app-server the bridge starts (codex is not on its PATH).
    let releases = run.home.join(".codex/packages/standalone/releases");
    std::fs::create_dir_all(&releases).unwrap();
    std::os::unix::fs::symlink(
        CODEX_IN,
        releases.join(format!(
            "0.169.0-{}-unknown-linux-musl",
            std::env::consts::ARCH
        )),
    )
    .unwrap();
    // `codex exec` with Codex's own sandbox (read-only): the session
    // records it, and a later turn would run under it, where the
    // container cannot give it the namespaces it needs.
    let (uid, gid) = test_user();
    let mut session = run.cli_command_with_path(&codex_path());
    session.retain(|a| a != "--dangerously-bypass-approvals-and-sandbox");
    let out = Command::new("docker")
        .args(["exec", "-i", "--user", &format!("{uid}:{gid}"), &name])
        .args(session)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (id, rollout) = only_session(&run);

    // The continuation's model server (the config in the mounted home now
    // names its port).
    drop(server);
    run.scenario = scenario("continue_codex_container");
    run.server_log = run.server_dir.join("continue.jsonl");
    let _server = run.start_server();
    let text = "Leave a marker file in the project.";
    let docker_user = nix::unistd::User::from_name(agentsight_tests::docker::docker_user())
        .unwrap()
        .unwrap();
    let (docker_uid, docker_gid, docker_home) = (
        docker_user.uid.as_raw(),
        docker_user.gid.as_raw(),
        docker_user.dir.clone(),
    );
    let host = |extra: &[&str]| {
        Command::new(bin())
            .args(["session", "message", &id, "--docker-container", &name])
            .args(["--text", text])
            .args(extra)
            .env("HOME", &run.server_dir)
            // Through sudo by a user of the docker group (docker is driven
            // with the caller's rights): the host's log is theirs.
            .env("SUDO_UID", docker_uid.to_string())
            .env("SUDO_GID", docker_gid.to_string())
            .env("SUDO_USER", DOCKER_USER)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let host_log = docker_home.join(".local/state/agentsight/messages.jsonl");
    let host_lines_before = log_lines(&host_log, &id).len();

    // Off by default: exit 2 and how to enable it; nothing reached Codex.
    let off = host(&[]);
    assert_eq!(off.status.code(), Some(2), "{off:?}");
    assert_eq!(
        String::from_utf8_lossy(&off.stderr),
        "agentsight: error: messaging is not enabled: pass --allow-messaging, or put `messaging = true` in ~/.config/agentsight/config.toml (a file you own)\n"
    );

    let on = host(&["--allow-messaging"]);
    let stdout = String::from_utf8_lossy(&on.stdout);
    let stderr = String::from_utf8_lossy(&on.stderr);
    assert_eq!(on.status.code(), Some(0), "{on:?}");
    assert_eq!(
        stdout,
        format!(
            "acknowledged: codex session {id} in container {name} (docker-exec/codex-app-server); the turn goes on there\n"
        )
    );
    assert_eq!(stderr, format!("note: {CONTAINER_NOTE}\n"));

    // The turn goes on in the container: poll its session (≤ 60 s).
    let want = "Left from-container.txt in the project.";
    let start = Instant::now();
    let show = loop {
        let show = run.session_show(&id);
        if texts(&show, "responses").last().map(String::as_str) == Some(want) {
            break show;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no response after 60 s: {show}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        texts(&show, "prompts"),
        vec![run_prompt("codex_ready"), text.to_string()]
    );
    assert_eq!(run.transcripts(), vec![rollout]);
    // The command ran without Codex's sandbox (which cannot work in the
    // container): the file is there, the container user's.
    let marker = std::fs::metadata(run.work.join("from-container.txt")).unwrap();
    assert_eq!(
        (
            std::os::unix::fs::MetadataExt::uid(&marker),
            std::os::unix::fs::MetadataExt::gid(&marker)
        ),
        (uid, gid)
    );
    let call = show["tools"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&call["command"], &call["status"], &call["exit_code"]),
        (
            &Value::from("touch from-container.txt"),
            &Value::from("ok"),
            &Value::from(0)
        ),
        "{call}"
    );

    // On the record on both sides.
    let host = log_lines(&host_log, &id);
    assert_eq!(host.len(), host_lines_before + 2, "{host:?}");
    assert_logged_on_both_sides(&run, &host, &id, &name, text, uid);
    bridge_without_the_opt_in_refuses(&name, uid, &id, text);
    drop(c);
}

/// The host logged its submission (acknowledged through the bridge, by
/// the sudo caller), the bridge in the container the provider's turn
/// (completed, as the container user `uid`), each in its user's log.
fn assert_logged_on_both_sides(
    run: &Run,
    host: &[Value],
    id: &str,
    name: &str,
    text: &str,
    uid: u32,
) {
    let (sub, fin) = (&host[host.len() - 2], &host[host.len() - 1]);
    assert_eq!(
        (
            &sub["event"],
            &sub["provider"],
            &sub["transport"],
            &sub["container"],
            &sub["invoking_user"],
            &sub["message_bytes"],
            &fin["event"],
            &fin["outcome"],
            fin["id"] == sub["id"],
        ),
        (
            &Value::from("submitted"),
            &Value::from("codex"),
            &Value::from("docker-exec/codex-app-server"),
            &Value::from(name),
            &Value::from(DOCKER_USER),
            &Value::from(text.len()),
            &Value::from("finished"),
            &Value::from("acknowledged"),
            true,
        ),
        "{host:?}"
    );
    let in_container = run.home.join(".local/state/agentsight/messages.jsonl");
    let start = Instant::now();
    let inside = loop {
        let lines = log_lines(&in_container, id);
        if lines.len() == 2 {
            break lines;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{lines:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (
            &inside[0]["transport"],
            &inside[0]["container"],
            &inside[0]["run_as_uid"],
            &inside[1]["outcome"],
            inside[1]["provider_pid"].is_u64(),
        ),
        (
            &Value::from("codex-app-server"),
            &Value::Null,
            &Value::from(uid),
            &Value::from("completed"),
            true,
        ),
        "{inside:?}"
    );
}

/// A bridge started without `--allow-messaging` refuses the message.
fn bridge_without_the_opt_in_refuses(name: &str, uid: u32, id: &str, text: &str) {
    let mut bridge = Command::new("docker")
        .args(["exec", "-i", "--user", &uid.to_string(), name])
        .args(["agentsight", "bridge"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let request = serde_json::json!({
        "method": "session/message",
        "params": { "session_id": id, "message": text },
    });
    let mut stdin = bridge.stdin.take().unwrap();
    writeln!(stdin, "{request}").unwrap();
    drop(stdin);
    let out = bridge.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"Err\":{\"code\":\"failed\",\"message\":\"messaging is not enabled\"}}\n"
    );
}

/// The messaging log's lines of session `id`'s submissions (both events of
/// each: a `finished` line is matched by its `id`).
fn log_lines(log: &Path, session_id: &str) -> Vec<Value> {
    let all: Vec<Value> = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ids: Vec<Value> = all
        .iter()
        .filter(|e| e["session_id"] == session_id)
        .map(|e| e["id"].clone())
        .collect();
    all.into_iter().filter(|e| ids.contains(&e["id"])).collect()
}
