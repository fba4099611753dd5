//! `agentsight session message` continuing real Claude Code and Gemini CLI
//! sessions (issue 17): the pinned CLIs against the scripted model server,
//! in the run's network namespace, as root under sudo for the test user
//! (`SUDO_UID`/`SUDO_GID`/`SUDO_USER` set through `env`). A continuation
//! scenario (`continue_claude_*` / `continue_gemini_*`, `prior_results` =
//! the earlier run's tool results) scripts the new turn; the ground truth is
//! what the CLI itself wrote into its transcript and what its process was.

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentsight_tests::{
    TEST_USER, bin,
    e2e::{Agent, Outcome, Run, clis_bin, scenario},
    messaging::{Caller, continue_session, json_of, message_argv, session_of_a_run, texts},
    require_root, test_user,
};
use serde_json::Value;

fn message(run: &mut Run, id: &str, continuation: &str, text: &str, env: &[String]) -> Outcome {
    continue_session(run, id, continuation, text, env, &[], Caller::Sudo)
}

/// The outcome's main fields, for one exact comparison.
fn summary(j: &Value) -> Value {
    serde_json::json!({
        "provider": j["provider"], "transport": j["transport"], "run_as": j["run_as"],
        "acknowledged": j["acknowledged"], "completed": j["completed"],
        "response": j["response"], "exit_status": j["exit_status"], "error": j["error"],
    })
}

/// Every file under `dir` and its owner uid.
fn owners(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).expect("stat");
            if m.is_dir() {
                stack.push(p.clone());
            }
            out.push((p, m.uid()));
        }
    }
    out
}

/// A session from a normal Claude Code run, continued: the same transcript
/// holds the new prompt, a command and the answer; the command (`id -un`)
/// ran as the session's owner, and everything written is theirs.
#[test]
fn claude_session_continued_under_sudo() {
    require_root();
    let (mut run, id, transcript) = session_of_a_run(Agent::Claude, "inspect");
    let text = "Who runs your commands? Check with id.";
    let out = message(&mut run, &id, "continue_claude_inspect", text, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let j = json_of(&out);
    assert_eq!(
        summary(&j),
        serde_json::json!({
            "provider": "claude", "transport": "claude-stream-json", "run_as": TEST_USER,
            "acknowledged": true, "completed": true,
            "response": "Commands run as the session's owner.", "exit_status": 0,
            "error": null,
        }),
        "{j}"
    );
    assert_eq!(j["rejected_requests"], serde_json::json!([]));
    assert!(j["provider_pid"].as_u64().is_some_and(|p| p > 1), "{j}");

    assert_eq!(
        run.transcripts(),
        vec![transcript.clone()],
        "no new session file"
    );
    let show = run.session_show(&id);
    assert_eq!(
        texts(&show, "prompts"),
        vec![scenario("inspect").prompt, text.to_string()]
    );
    let responses = texts(&show, "responses");
    assert_eq!(
        responses[responses.len() - 2..],
        [
            "Checking which user runs my commands.".to_string(),
            "Commands run as the session's owner.".to_string()
        ],
        "{show}"
    );
    let call = show["tools"].as_array().and_then(|t| t.last()).cloned();
    let call = call.unwrap_or_else(|| panic!("no tool calls: {show}"));
    assert_eq!(
        (
            &call["name"],
            &call["command"],
            &call["status"],
            &call["prompt_index"]
        ),
        (
            &Value::from("Bash"),
            &Value::from("id -un"),
            &Value::from("ok"),
            &Value::from(1)
        ),
        "{call}"
    );
    // What `id -un` printed, as Claude Code recorded the tool result.
    let result = tool_result(&transcript, call["call_id"].as_str().expect("call id"));
    assert_eq!(result, TEST_USER);
    // Nothing under the run's home or workspace became root's.
    let (uid, _) = test_user();
    for dir in [&run.home, &run.work] {
        let foreign: Vec<_> = owners(dir).into_iter().filter(|(_, u)| *u != uid).collect();
        assert!(foreign.is_empty(), "not the owner's: {foreign:?}");
    }
}

/// The text of the `tool_result` for `call_id` in a Claude transcript.
fn tool_result(transcript: &Path, call_id: &str) -> String {
    let text = std::fs::read_to_string(transcript).expect("transcript");
    for v in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        for b in v["message"]["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" && b["tool_use_id"] == call_id {
                return match &b["content"] {
                    Value::String(s) => s.clone(),
                    other => other[0]["text"].as_str().unwrap_or_default().to_string(),
                };
            }
        }
    }
    panic!("no tool_result for {call_id} in {}", transcript.display())
}

/// A continuation whose tool needs a permission: Claude Code's default mode
/// refuses the Write (agentsight approves nothing), the command reports the
/// refusal, the file is not written, and the turn still ends.
#[test]
fn claude_write_needing_permission_is_refused_not_approved() {
    require_root();
    let (mut run, id, _) = session_of_a_run(Agent::Claude, "inspect");
    let text = "Write summary.txt with a one-line summary.";
    let out = message(&mut run, &id, "continue_claude_write", text, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let j = json_of(&out);
    assert_eq!(
        j["response"], "I could not write summary.txt: permission was not granted.",
        "{j}"
    );
    let summary_path = run.work.join("summary.txt");
    let input = serde_json::json!({
        "content": "release profile\n",
        "file_path": summary_path.display().to_string(),
    });
    assert_eq!(
        j["rejected_requests"],
        serde_json::json!([{
            "method": "Write",
            "detail": format!(
                "refused by Claude Code's permission mode (agentsight never approves): {input}"
            ),
        }]),
        "{j}"
    );
    assert!(!summary_path.exists(), "the refused write happened");
    assert!(
        out.stderr
            .contains("agentsight: refused the agent's request Write: refused by Claude Code's permission mode"),
        "{}",
        out.stderr
    );
}

/// A wrapper that saves its own `/proc/PID/status` and `environ` (the
/// process the provider is exec'd into: same pid, same credentials, same
/// initial environment) under `out_dir`, then execs `real`.
fn spy_wrapper(dir: &Path, out_dir: &Path, real: &Path) -> PathBuf {
    let path = dir.join("spy.sh");
    let script = format!(
        "#!/bin/sh\ncat /proc/$$/status > '{o}/status'\ncat /proc/$$/environ > '{o}/environ'\nexec '{r}' \"$@\"\n",
        o = out_dir.display(),
        r = real.display()
    );
    std::fs::write(&path, script).expect("write wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// The `Uid:`, `Gid:` and `Groups:` fields of a saved status (real,
/// effective, saved, filesystem ids; the supplementary groups).
fn ids(status: &str) -> Vec<(String, Vec<u32>)> {
    status
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| ["Uid", "Gid", "Groups"].contains(k))
        .map(|(k, v)| {
            let nums = v.split_whitespace().map(|n| n.parse().expect("an id"));
            (k.to_string(), nums.collect())
        })
        .collect()
}

/// What [`ids`] must be for a process of the test user with no
/// supplementary groups.
fn dropped_to_test_user() -> Vec<(String, Vec<u32>)> {
    let (uid, gid) = test_user();
    vec![
        ("Uid".into(), vec![uid; 4]),
        ("Gid".into(), vec![gid; 4]),
        ("Groups".into(), vec![]),
    ]
}

/// Under sudo, Claude Code runs as the sudo caller with no supplementary
/// groups and exactly the kept environment: the planted variable and the
/// API key in agentsight's own environment do not reach it.
#[test]
fn claude_identity_drop_under_sudo() {
    require_root();
    let (mut run, id, _) = session_of_a_run(Agent::Claude, "inspect");
    let spy_out = run.tmp.join("spy");
    std::fs::create_dir_all(&spy_out).expect("mkdir");
    let (uid, gid) = test_user();
    std::os::unix::fs::chown(&spy_out, Some(uid), Some(gid)).expect("chown");
    let wrapper = spy_wrapper(&run.server_dir, &spy_out, &clis_bin().join("claude"));
    let env = [
        format!("AGENTSIGHT_CLAUDE_BIN={}", wrapper.display()),
        "AGENTSIGHT_PLANTED=1".to_string(),
        "ANTHROPIC_API_KEY=sk-ant-planted-in-agentsight".to_string(),
    ];
    let text = "Who runs your commands? Check with id.";
    let out = message(&mut run, &id, "continue_claude_inspect", text, &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_of(&out)["completed"], true);

    let status = std::fs::read_to_string(spy_out.join("status")).expect("saved status");
    assert_eq!(ids(&status), dropped_to_test_user(), "{status}");
    let environ = std::fs::read(spy_out.join("environ")).expect("saved environ");
    // The order is std's (sorted by name); the set is what matters.
    let environ: BTreeSet<String> = environ
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(
        environ,
        BTreeSet::from([
            "LANG=C.UTF-8".to_string(),
            format!("PATH={}:/usr/local/bin:/usr/bin:/bin", clis_bin().display()),
            "TERM=dumb".to_string(),
            format!("HOME={}", run.home.display()),
            format!("USER={TEST_USER}"),
            format!("LOGNAME={TEST_USER}"),
        ])
    );
}

/// The model stream stalls before any answer: no acknowledgement within the
/// 20 s bound, exit status 8 with the reason, Claude Code stopped.
#[test]
fn claude_stalled_model_hits_the_acknowledgement_bound() {
    require_root();
    let (mut run, id, transcript) = session_of_a_run(Agent::Claude, "inspect");
    let out = message(
        &mut run,
        &id,
        "continue_claude_stall",
        "Summarise the notes again.",
        &[],
    );
    assert_eq!(out.status.code(), Some(8), "{out:?}");
    assert!(
        out.elapsed >= Duration::from_secs(20) && out.elapsed < Duration::from_secs(60),
        "{:?}",
        out.elapsed
    );
    let j = json_of(&out);
    assert_eq!(
        (&j["acknowledged"], &j["exit_status"], &j["completed"]),
        (&Value::from(false), &Value::from(8), &Value::Null),
        "{j}"
    );
    let err = j["error"].as_str().unwrap_or_default();
    assert!(
        err.starts_with("Claude Code did not acknowledge the message within 20 s"),
        "{err}"
    );
    // (netns.sh may add its own lines while the server starts.)
    let said: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("agentsight: "))
        .collect();
    assert_eq!(
        said,
        [format!("agentsight: error: {err}")],
        "{}",
        out.stderr
    );
    assert_eq!(run.transcripts(), vec![transcript]);
}

/// A session from a normal Gemini CLI run, continued by `gemini --resume
/// UUID`: the same chat file holds the new prompt, the read and the answer;
/// Gemini CLI (started through `AGENTSIGHT_GEMINI_BIN`) ran as the owner.
#[test]
fn gemini_session_continued_under_sudo() {
    require_root();
    let (mut run, id, transcript) = session_of_a_run(Agent::Gemini, "inspect");
    let spy_out = run.tmp.join("spy");
    std::fs::create_dir_all(&spy_out).expect("mkdir");
    let (uid, gid) = test_user();
    std::os::unix::fs::chown(&spy_out, Some(uid), Some(gid)).expect("chown");
    let wrapper = spy_wrapper(&run.server_dir, &spy_out, &clis_bin().join("gemini"));
    let env = [format!("AGENTSIGHT_GEMINI_BIN={}", wrapper.display())];
    let text = "Read notes.txt again and quote it.";
    let out = message(&mut run, &id, "continue_gemini_inspect", text, &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let j = json_of(&out);
    let answer = "notes.txt still says: The build needs the release profile.";
    assert_eq!(
        summary(&j),
        serde_json::json!({
            "provider": "gemini", "transport": "gemini-resume", "run_as": TEST_USER,
            "acknowledged": true, "completed": true, "response": answer, "exit_status": 0,
            "error": null,
        }),
        "{j}"
    );
    gemini_turn_in_its_own_file(&run, &id, &transcript, text);
    let show = run.session_show(&id);
    assert_eq!(
        texts(&show, "prompts"),
        vec![scenario("inspect").prompt, text.to_string()]
    );
    let responses = texts(&show, "responses");
    assert_eq!(
        responses[responses.len() - 2..],
        ["Reading the notes again.".to_string(), answer.to_string()],
        "{show}"
    );
    // Every call once, the two before the resume included: Gemini CLI's
    // rewrite on resume drops their records from the replayed list (and
    // sends their results twice); the records are still earlier in the file.
    let tools = show["tools"].as_array().cloned().unwrap_or_default();
    let work = run.work.display().to_string();
    let calls: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::json!([t["name"], t["status"], t["prompt_index"], t["paths"]]))
        .collect();
    let read = |p: &str| serde_json::json!([{"path": p, "access": "read"}]);
    let notes = format!("{work}/notes.txt");
    assert_eq!(
        calls,
        [
            serde_json::json!(["list_directory", "ok", 0, read(&work)]),
            serde_json::json!(["read_file", "ok", 0, read(&notes)]),
            serde_json::json!(["read_file", "ok", 1, read(&notes)]),
        ],
        "{show}"
    );
    let listed: Vec<String> = tools
        .iter()
        .map(|t| t["call_id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(listed, gemini_call_ids(&transcript), "{show}");
    let status = std::fs::read_to_string(spy_out.join("status")).expect("saved status");
    assert_eq!(ids(&status), dropped_to_test_user(), "{status}");
    let seen: BTreeSet<u32> = owners(&run.home).into_iter().map(|(_, u)| u).collect();
    assert_eq!(
        seen,
        BTreeSet::from([uid]),
        "everything under the home is the owner's"
    );
}

/// The distinct `toolCalls[].id`s of a Gemini CLI chat file, in the order
/// first written (any line, `$set.messages` lists included).
fn gemini_call_ids(transcript: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(transcript).expect("read transcript");
    let mut ids: Vec<String> = Vec::new();
    let mut add = |m: &Value| {
        for c in m["toolCalls"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().expect("call id").to_string();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    };
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("a JSON line");
        add(&v);
        for m in v["$set"]["messages"].as_array().into_iter().flatten() {
            add(m);
        }
    }
    ids
}

/// The test user continues its own session (no sudo, no identity switch):
/// the same continuation works, run as itself.
#[test]
fn claude_session_continued_by_its_owner() {
    require_root();
    let (mut run, id, transcript) = session_of_a_run(Agent::Claude, "inspect");
    let text = "Who runs your commands? Check with id.";
    let out = continue_session(
        &mut run,
        &id,
        "continue_claude_inspect",
        text,
        &[],
        &[],
        Caller::TestUser,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let j = json_of(&out);
    assert_eq!(
        (&j["run_as"], &j["completed"], &j["response"]),
        (
            &Value::from(TEST_USER),
            &Value::from(true),
            &Value::from("Commands run as the session's owner.")
        ),
        "{j}"
    );
    assert_eq!(run.transcripts(), vec![transcript.clone()]);
    let show = run.session_show(&id);
    let call = show["tools"].as_array().and_then(|t| t.last()).cloned();
    let call = call.unwrap_or_else(|| panic!("no tool calls: {show}"));
    let result = tool_result(&transcript, call["call_id"].as_str().expect("call id"));
    assert_eq!(result, TEST_USER);
}

/// Gemini CLI echoes the message before it asks the model, so a stalled
/// model stream is acknowledged and then outlasts `--turn-timeout`: exit
/// status 8, Gemini CLI stopped (its process group killed).
#[test]
fn gemini_stalled_turn_hits_the_turn_timeout() {
    require_root();
    let (mut run, id, transcript) = session_of_a_run(Agent::Gemini, "inspect");
    let out = continue_session(
        &mut run,
        &id,
        "continue_gemini_stall",
        "Summarise the notes again.",
        &[],
        &["--turn-timeout", "5"],
        Caller::Sudo,
    );
    assert_eq!(out.status.code(), Some(8), "{out:?}");
    assert!(
        out.elapsed >= Duration::from_secs(5) && out.elapsed < Duration::from_secs(40),
        "{:?}",
        out.elapsed
    );
    let j = json_of(&out);
    assert_eq!(
        summary(&j),
        serde_json::json!({
            "provider": "gemini", "transport": "gemini-resume", "run_as": TEST_USER,
            "acknowledged": true, "completed": null, "response": null, "exit_status": 8,
            "error": "Gemini CLI's turn did not end in time; it was stopped",
        }),
        "{j}"
    );
    let pid = j["provider_pid"].as_u64().expect("provider pid");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "Gemini CLI (pid {pid}) still there"
    );
    // The stalled resume may start in a later minute than the session did:
    // then Gemini CLI leaves its two-line file beside the session's own.
    gemini_no_other_session_file(&run, &id, &transcript, "Summarise the notes again.");
}

/// A second message while the first is being handled is a conflict (exit
/// 4), and the first goes on undisturbed: Claude Code waits 6 s on the
/// model for the first, the second comes meanwhile.
#[test]
fn a_second_message_while_claude_handles_the_first_is_refused() {
    require_root();
    let (mut run, id, transcript) = session_of_a_run(Agent::Claude, "inspect");
    run.scenario = scenario("continue_claude_slow");
    run.server_log = run.server_dir.join("continue_claude_slow.jsonl");
    let argv = message_argv(&run, &id, "Take your time.", &[], &[], Caller::Sudo);
    let first = run.start(|_| argv);
    // The first holds the session's lock (in the home that holds the
    // transcript) once it got past its checks.
    let lock = run
        .home
        .join(format!(".local/state/agentsight/locks/claude-{id}.lock"));
    let t = Instant::now();
    while !lock.exists()
        || Command::new("flock")
            .arg("--nonblock")
            .arg(&lock)
            .arg("true")
            .status()
            .is_ok_and(|s| s.success())
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the first message never took the lock"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (uid, gid) = test_user();
    let second = Command::new(bin())
        .args([
            "session",
            "message",
            &id,
            "--allow-messaging",
            "--text",
            "And another thing.",
        ])
        .arg("--home")
        .arg(&run.home)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .output()
        .expect("second message");
    assert_eq!(
        (
            second.status.code(),
            String::from_utf8_lossy(&second.stderr).into_owned()
        ),
        (
            Some(4),
            "agentsight: error: this session is already accepting another message\n".to_string()
        )
    );
    let first = first.wait(Duration::from_secs(90));
    assert!(first.status.success(), "{}", first.stderr);
    assert_eq!(json_of(&first)["response"], "Done, after a pause.");
    let show = run.session_show(&id);
    let prompts = texts(&show, "prompts");
    assert_eq!(prompts.last().map(String::as_str), Some("Take your time."));
    assert!(
        !prompts.iter().any(|p| p == "And another thing."),
        "{prompts:?}"
    );
    assert_eq!(run.transcripts(), vec![transcript]);
}

/// The continued turn went into the session's own chat file, which
/// `sessions` lists (once). Gemini CLI 0.61 names a chat file by the
/// minute its run started: a resume that starts in a later minute also
/// leaves a two-line file of the same session (its metadata and the
/// session context, no turn), which discovery collapses into the one
/// session by id.
fn gemini_turn_in_its_own_file(run: &Run, id: &str, transcript: &Path, text: &str) {
    let own = std::fs::read_to_string(transcript).unwrap();
    assert!(
        own.contains(text),
        "the turn is not in {}",
        transcript.display()
    );
    gemini_no_other_session_file(run, id, transcript, text);
}

/// Beside the session's own chat file there is at most the two-line file
/// of a resume that started in a later minute (see
/// [`gemini_turn_in_its_own_file`]), never a file holding `text`, and
/// `sessions` lists the session once, at its own file.
fn gemini_no_other_session_file(run: &Run, id: &str, transcript: &Path, text: &str) {
    let files = run.transcripts();
    assert!(files.contains(&transcript.to_path_buf()), "{files:?}");
    for other in files.iter().filter(|f| f.as_path() != transcript) {
        let body = std::fs::read_to_string(other).unwrap();
        let lines: Vec<Value> = body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{}: {body}", other.display());
        assert_eq!(lines[0]["sessionId"], id, "{}", other.display());
        assert!(!body.contains(text), "{}", other.display());
    }
    let list = run.sessions();
    let rows = list
        .as_array()
        .or(list["sessions"].as_array())
        .unwrap()
        .clone();
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["path"], transcript.display().to_string());
}

/// A session of one of the one-process agents (Copilot CLI, opencode, Qwen
/// Code) from a normal `inspect` run, continued under sudo: the answer, the
/// same single transcript holding both prompts and the new read, and
/// everything under the home still the owner's. `env` is agentsight's own
/// extra environment (Copilot CLI's provider variables); `recorded` is the
/// new prompt as the agent wrote it.
fn one_process_agent_continued(agent: Agent, transport: &str, env: &[String], recorded: &str) {
    require_root();
    let (mut run, id, transcript) = session_of_a_run(agent, "inspect");
    let text = "Read notes.txt again and quote it.";
    let out = message(&mut run, &id, "continue_read_again", text, env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let j = json_of(&out);
    let answer = "notes.txt still says: The build needs the release profile.";
    assert_eq!(
        summary(&j),
        serde_json::json!({
            "provider": agent.name(), "transport": transport, "run_as": TEST_USER,
            "acknowledged": true, "completed": true, "response": answer, "exit_status": 0,
            "error": null,
        }),
        "{j}"
    );
    assert_eq!(j["rejected_requests"], serde_json::json!([]), "{j}");
    assert_eq!(run.transcripts(), vec![transcript], "no new session file");
    let show = run.session_show(&id);
    // (The first prompt is as the harness's first run gave it: opencode's
    // is recorded with the shell quotes its command line carried.)
    let prompts = texts(&show, "prompts");
    assert_eq!(
        (prompts.len(), prompts.last().map(String::as_str)),
        (2, Some(recorded)),
        "{show}"
    );
    let responses = texts(&show, "responses");
    assert_eq!(
        responses[responses.len() - 2..],
        ["Reading the notes again.".to_string(), answer.to_string()],
        "{show}"
    );
    let last = show["tools"].as_array().and_then(|t| t.last()).cloned();
    let last = last.unwrap_or_else(|| panic!("no tool calls: {show}"));
    assert_eq!(
        (&last["status"], &last["prompt_index"]),
        (&Value::from("ok"), &Value::from(1)),
        "{last}"
    );
    let (uid, _) = test_user();
    let foreign: Vec<_> = owners(&run.home)
        .into_iter()
        .filter(|(_, u)| *u != uid)
        .collect();
    assert!(foreign.is_empty(), "not the owner's: {foreign:?}");
}

/// Copilot CLI's bring-your-own-model settings exist only as variables:
/// agentsight passes its own `COPILOT_PROVIDER_*`, `COPILOT_MODEL` and
/// `COPILOT_OFFLINE` on (the run's other Copilot variables stay behind).
#[test]
fn copilot_session_continued_under_sudo() {
    let run = agentsight_tests::e2e::Run::prepare(Agent::Copilot, "inspect");
    let base = format!("http://127.0.0.1:{}", run.model_port);
    let env: Vec<String> = run
        .copilot_env(&base)
        .into_iter()
        .filter(|kv| {
            kv.starts_with("COPILOT_PROVIDER_")
                || kv.starts_with("COPILOT_MODEL=")
                || kv.starts_with("COPILOT_OFFLINE=")
        })
        .collect();
    drop(run);
    let text = "Read notes.txt again and quote it.";
    one_process_agent_continued(Agent::Copilot, "copilot-resume", &env, text);
}

#[test]
fn opencode_session_continued_under_sudo() {
    let text = "Read notes.txt again and quote it.";
    one_process_agent_continued(Agent::Opencode, "opencode-run", &[], text);
}

/// Qwen Code 0.24.4 appends "\n\n" to a prompt read from stdin.
#[test]
fn qwen_session_continued_under_sudo() {
    let recorded = "Read notes.txt again and quote it.\n\n";
    one_process_agent_continued(Agent::Qwen, "qwen-resume", &[], recorded);
}
