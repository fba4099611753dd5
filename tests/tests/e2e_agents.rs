//! Real Claude Code, Codex and Gemini CLI runs driven by the scripted model
//! server (issue 6): each test runs one CLI through one scenario offline, then
//! checks that `agentsight sessions` and `agentsight session show --json`
//! report exactly what the CLI's genuine transcript holds — session id, cwd,
//! model, every tool call, prompt count and token totals equal to what the
//! server reported.
//!
//! The expected tool calls are derived here from the scenario's generic
//! intents by each CLI's own tool set, independently of the server's mapping,
//! so a server that picked the wrong tool fails too.

use std::{fs, path::Path};

use agentsight_tests::e2e::{Agent, Run};
use serde_json::Value;

/// One expected tool event, in the fields `session show --json` reports.
#[derive(Debug, PartialEq)]
struct Tool {
    name: String,
    category: String,
    command: Option<String>,
    paths: Vec<(String, String)>,
    status: String,
}

fn tool(name: &str, category: &str, command: Option<String>, paths: &[(&Path, &str)]) -> Tool {
    Tool {
        name: name.into(),
        category: category.into(),
        command,
        paths: paths
            .iter()
            .map(|(p, a)| (p.display().to_string(), a.to_string()))
            .collect(),
        status: "ok".into(),
    }
}

/// Quoting as the server writes it into commands (`'…'`).
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Maps one scenario intent onto the call each CLI's tool set implies.
fn expected_tool(agent: Agent, run: &Run, intent: &Value) -> Tool {
    // As the server sends them: absolute, "." being the workspace itself.
    let abs = |p: &str| {
        if p == "." {
            run.work.clone()
        } else {
            run.work.join(p)
        }
    };
    let shell_name = match agent {
        Agent::Claude => "Bash",
        Agent::Codex => "exec_command",
        Agent::Gemini => "run_shell_command",
    };
    let shell = |c: String| tool(shell_name, "shell", Some(c), &[]);
    let mut t = if let Some(c) = intent["shell"].as_str() {
        shell(c.replace("{{TARGET_PORT}}", "8788"))
    } else if let Some(p) = intent["read_file"].as_str() {
        match agent {
            Agent::Claude => tool("Read", "read", None, &[(&abs(p), "read")]),
            // Codex has no read tool: the server reads through the shell.
            Agent::Codex => shell(format!("cat {}", q(p))),
            Agent::Gemini => tool("read_file", "read", None, &[(&abs(p), "read")]),
        }
    } else if let Some(p) = intent["list_dir"].as_str() {
        match agent {
            // Neither offers a list tool in these versions (Claude Code
            // 2.1.328 dropped LS and defers Glob).
            Agent::Claude | Agent::Codex => shell(format!("ls {}", q(p))),
            Agent::Gemini => tool("list_directory", "read", None, &[(&abs(p), "read")]),
        }
    } else if let Some(w) = intent["write_file"].as_object() {
        let p = w["path"].as_str().unwrap();
        let content = w["content"].as_str().unwrap();
        match agent {
            Agent::Claude => tool("Write", "edit", None, &[(&abs(p), "create")]),
            Agent::Codex => {
                let body: String = content.lines().map(|l| format!("+{l}\n")).collect();
                let patch = format!("*** Begin Patch\n*** Add File: {p}\n{body}*** End Patch\n");
                // The patch names the file relative to the turn's cwd and the
                // parser reports it as written (not resolved).
                tool(
                    "apply_patch",
                    "edit",
                    Some(patch),
                    &[(Path::new(p), "create")],
                )
            }
            Agent::Gemini => tool("write_file", "edit", None, &[(&abs(p), "create")]),
        }
    } else {
        panic!("unknown intent {intent}");
    };
    if let Some(s) = intent["status"].as_str() {
        t.status = s.into();
    }
    t
}

fn actual_tool(v: &Value) -> Tool {
    Tool {
        name: v["name"].as_str().unwrap().into(),
        category: v["category"].as_str().unwrap().into(),
        command: v["command"].as_str().map(str::to_string),
        paths: v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["path"].as_str().unwrap().into(),
                    p["access"].as_str().unwrap().into(),
                )
            })
            .collect(),
        status: v["status"].as_str().unwrap().into(),
    }
}

/// The session id from the CLI's own files, read without agentsight.
fn native_session_id(agent: Agent, run: &Run) -> (String, String) {
    let files = transcript_files(agent, run);
    assert_eq!(files.len(), 1, "one transcript expected, found {files:?}");
    let f = &files[0];
    let first: Value =
        serde_json::from_str(fs::read_to_string(f).unwrap().lines().next().unwrap()).unwrap();
    let id = match agent {
        // Claude: the file stem is the session id.
        Agent::Claude => f.file_stem().unwrap().to_str().unwrap().to_string(),
        Agent::Codex => first["payload"]["id"].as_str().unwrap().to_string(),
        Agent::Gemini => first["sessionId"].as_str().unwrap().to_string(),
    };
    (id, fs::read_to_string(f).unwrap())
}

fn transcript_files(agent: Agent, run: &Run) -> Vec<std::path::PathBuf> {
    let (root, ext) = match agent {
        Agent::Claude => (run.home.join(".claude/projects"), "jsonl"),
        Agent::Codex => (run.home.join(".codex/sessions"), "jsonl"),
        Agent::Gemini => (run.home.join(".gemini/tmp"), "jsonl"),
    };
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext)
                && (agent != Agent::Gemini || p.to_string_lossy().contains("/chats/session-"))
            {
                out.push(p);
            }
        }
    }
    out
}

/// Token totals the server reported, by each provider's accounting rules
/// (see `agentsight::sessions::TokenUsage`).
fn expected_usage(agent: Agent, responses: &[Value]) -> Value {
    let (mut input, mut output, mut cache_read, mut cache_creation, mut reasoning) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    for r in responses {
        let u = &r["usage"];
        match agent {
            // Anthropic: input excludes cache reads and writes.
            Agent::Claude => {
                input += n(&u["input_tokens"]);
                output += n(&u["output_tokens"]);
                cache_read += n(&u["cache_read_input_tokens"]);
                cache_creation += n(&u["cache_creation_input_tokens"]);
            }
            // Responses API: input includes cached, output includes reasoning.
            Agent::Codex => {
                let cached = n(&u["input_tokens_details"]["cached_tokens"]);
                input += n(&u["input_tokens"]) - cached;
                cache_read += cached;
                output += n(&u["output_tokens"]);
                reasoning += n(&u["output_tokens_details"]["reasoning_tokens"]);
            }
            // Gemini: prompt includes cached; candidates exclude thoughts.
            Agent::Gemini => {
                let cached = n(&u["cachedContentTokenCount"]);
                input += n(&u["promptTokenCount"]) - cached;
                cache_read += cached;
                output += n(&u["candidatesTokenCount"]) + n(&u["thoughtsTokenCount"]);
                reasoning += n(&u["thoughtsTokenCount"]);
            }
        }
    }
    serde_json::json!({
        "input": input,
        "output": output,
        "cache_read": cache_read,
        "cache_creation": cache_creation,
        "reasoning": reasoning,
        "total": input + output + cache_read + cache_creation,
    })
}

fn check(agent: Agent, scenario: &str) {
    agentsight_tests::require_root();
    let run = Run::prepare(agent, scenario);
    let out = run.run();
    verify(&run, out);
}

/// Everything a run must show, however it was launched.
fn verify(run: &Run, out: agentsight_tests::e2e::Outcome) {
    let agent = run.agent;
    let scenario = run.scenario.name.as_str();
    let ctx = format!(
        "{} {scenario} (exit {:?}, {:.1}s)\nstdout:\n{}\nstderr:\n{}",
        agent.name(),
        out.status,
        out.elapsed.as_secs_f64(),
        out.stdout,
        out.stderr
    );
    eprintln!(
        "e2e: {} {scenario}: {:.1}s",
        agent.name(),
        out.elapsed.as_secs_f64()
    );
    assert!(out.status.success(), "run failed: {ctx}");

    // The server answered every request it got with the scenario.
    let entries = run.server_entries();
    let bad: Vec<&Value> = entries
        .iter()
        .filter(|e| matches!(e["kind"].as_str(), Some("unhandled" | "error")))
        .collect();
    assert!(bad.is_empty(), "server could not answer: {bad:?}\n{ctx}");
    let responses = run.main_responses();
    let turns = run.scenario.json["turns"].as_array().unwrap();
    assert_eq!(
        responses.len(),
        turns.len(),
        "one model call per scenario turn: {ctx}"
    );
    for (i, r) in responses.iter().enumerate() {
        assert_eq!(r["turn"], i, "turns played in order: {ctx}");
    }

    // The CLI really did the work: files, target hits, outputs in transcript.
    let (native_id, transcript) = native_session_id(agent, run);
    let expect = &run.scenario.json["expect"];
    for s in expect["transcript_contains"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let s = s.as_str().unwrap();
        assert!(
            transcript.contains(s),
            "transcript lacks {s:?} (the tool did not run?)\n{ctx}"
        );
    }
    for (p, content) in expect["files"].as_object().into_iter().flatten() {
        assert_eq!(
            fs::read_to_string(run.work.join(p)).ok().as_deref(),
            content.as_str(),
            "{p} written by the agent: {ctx}"
        );
    }
    let hits: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "target")
        .filter_map(|e| e["path"].as_str())
        .collect();
    let want_hits: Vec<&str> = expect["target_hits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(hits, want_hits, "requests to the target port: {ctx}");

    // `agentsight sessions`: exactly this session, its facts.
    let model = responses[0]["usage"]["model"].as_str().unwrap().to_string();
    assert_eq!(model, agent.model(), "model the CLI asked for");
    let usage = expected_usage(agent, &responses);
    let list = run.sessions();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "sessions: {list:#?}");
    let row = &list[0];
    assert_eq!(row["provider"], agent.name());
    assert_eq!(row["session_id"], native_id.as_str());
    assert_eq!(row["cwd"], run.work.display().to_string());
    assert_eq!(row["model"], model.as_str());
    assert_eq!(row["usage"], usage, "sessions usage");
    // Codex rows come from its state database, which keeps no counts.
    if !row["prompts"].is_null() {
        assert_eq!(row["prompts"], 1, "sessions prompts");
    }
    if !row["tools"].is_null() {
        assert_eq!(row["tools"], responses_calls(&responses), "sessions tools");
    }

    // `agentsight session show --json`: every detail.
    let s = run.session_show(&native_id);
    assert_eq!(s["provider"], agent.name());
    assert_eq!(s["session_id"], native_id.as_str());
    assert_eq!(s["cwd"], run.work.display().to_string());
    assert_eq!(s["models"], serde_json::json!([model]));
    assert_eq!(s["usage"], usage, "session show usage");
    assert_eq!(
        s["usage_by_model"],
        serde_json::json!({ model.as_str(): usage })
    );
    assert_eq!(s["prompt_count"], 1, "prompts: {:#?}", s["prompts"]);
    assert_eq!(s["prompts"][0]["text"], run.scenario.prompt.as_str());
    assert_eq!(s["response_count"], responses.len());
    let want: Vec<Tool> = turns
        .iter()
        .flat_map(|t| t["calls"].as_array().cloned().unwrap_or_default())
        .map(|i| expected_tool(agent, run, &i))
        .collect();
    let got: Vec<Tool> = s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(actual_tool)
        .collect();
    assert_eq!(got, want, "tool calls");
    assert_eq!(s["tool_count"], want.len());
    for t in s["tools"].as_array().unwrap() {
        assert_eq!(t["prompt_index"], 0, "tool in the one prompt: {t}");
    }
    assert_eq!(s["errors"], serde_json::json!([]), "errors");
    assert_eq!(s["stats"]["bad_lines"], 0);
}

/// The same run wrapped in `agentsight record`: the harness's command is what
/// record starts (as the test user, in the run's network namespace), the
/// transcript checks hold unchanged, and the capture saw the CLI exec.
#[test]
fn claude_inspect_under_record() {
    agentsight_tests::require_root();
    let run = Run::prepare(Agent::Claude, "inspect");
    let db = run.server_dir.join("capture.db");
    let out = run.launch(|cmd| {
        let mut v = vec![
            agentsight_tests::bin().display().to_string(),
            "record".into(),
            "--quiet".into(),
            "--user".into(),
            agentsight_tests::TEST_USER.into(),
            "-o".into(),
            db.display().to_string(),
            "--".into(),
        ];
        v.extend(cmd);
        v
    });
    verify(&run, out);
    let (uid, _) = agentsight_tests::test_user();
    let conn = agentsight_tests::open(&db);
    let execs = agentsight_tests::execs(&conn);
    assert!(
        execs.iter().any(|e| e.kind == "exec"
            && e.uid == i64::from(uid)
            && e.argv.first().is_some_and(|a| a == "claude")
            && e.cwd == run.work.display().to_string()),
        "no exec of claude as the test user in the capture: {:#?}",
        execs.iter().map(|e| &e.argv).collect::<Vec<_>>()
    );
}

fn responses_calls(responses: &[Value]) -> usize {
    responses
        .iter()
        .map(|r| r["calls"].as_array().map_or(0, Vec::len))
        .sum()
}

macro_rules! e2e {
    ($($name:ident: $agent:ident, $scenario:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check(Agent::$agent, $scenario);
            }
        )*
    };
}

e2e! {
    claude_inspect: Claude, "inspect";
    claude_edit: Claude, "edit";
    claude_failing: Claude, "failing";
    claude_network: Claude, "network";
    claude_parallel: Claude, "parallel";
    codex_inspect: Codex, "inspect";
    codex_edit: Codex, "edit";
    codex_failing: Codex, "failing";
    codex_network: Codex, "network";
    codex_parallel: Codex, "parallel";
    gemini_inspect: Gemini, "inspect";
    gemini_edit: Gemini, "edit";
    gemini_failing: Gemini, "failing";
    gemini_network: Gemini, "network";
    gemini_parallel: Gemini, "parallel";
}
