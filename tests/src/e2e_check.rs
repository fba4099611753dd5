//! What a real agent CLI run must show (issue 6), shared by the host runs
//! (`tests/e2e_agents.rs`) and the run inside a container
//! (`tests/container_agent.rs`): the CLI's transcript as `sessions` and
//! `session show --json` report it, and `correlate --json` on its capture.
//!
//! The expected tool calls are derived here from the scenario's generic
//! intents by each CLI's own tool set, independently of the server's mapping,
//! so a server that picked the wrong tool fails too.

use std::{fs, path::Path};

use serde_json::Value;

use crate::e2e::{Agent, Run};

/// One expected tool event, in the fields `session show --json` reports.
#[derive(Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub category: String,
    pub command: Option<String>,
    pub paths: Vec<(String, String)>,
    pub status: String,
    /// The exit code the transcript states (`null` where it says none).
    pub exit_code: Option<i64>,
}

pub fn tool(name: &str, category: &str, command: Option<String>, paths: &[(&Path, &str)]) -> Tool {
    Tool {
        name: name.into(),
        category: category.into(),
        command,
        paths: paths
            .iter()
            .map(|(p, a)| (p.display().to_string(), a.to_string()))
            .collect(),
        status: "ok".into(),
        exit_code: None,
    }
}

/// Quoting as the server writes it into commands (`'…'`).
pub fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The name each CLI gives server `server`'s tool `tool` (`docs/mcp.md` §4):
/// Claude Code and Codex (namespace `mcp__S__` joined with the tool name)
/// and Qwen Code `mcp__S__T`, Gemini CLI `mcp_S_T`, Copilot CLI `S-T`,
/// opencode `S_T`.
pub fn mcp_tool_name(agent: Agent, server: &str, tool: &str) -> String {
    match agent {
        Agent::Claude | Agent::Codex | Agent::Qwen => format!("mcp__{server}__{tool}"),
        Agent::Gemini => format!("mcp_{server}_{tool}"),
        Agent::Copilot => format!("{server}-{tool}"),
        Agent::Opencode => format!("{server}_{tool}"),
    }
}

/// Maps one scenario intent onto the call each CLI's tool set implies.
pub fn expected_tool(agent: Agent, run: &Run, intent: &Value) -> Tool {
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
        Agent::Gemini | Agent::Qwen => "run_shell_command",
        Agent::Copilot | Agent::Opencode => "bash",
    };
    let shell = |c: String| tool(shell_name, "shell", Some(c), &[]);
    let mut t = if let Some(c) = intent["shell"].as_str() {
        shell(c.replace("{{TARGET_PORT}}", &run.target_port.to_string()))
    } else if let Some(p) = intent["read_file"].as_str() {
        match agent {
            Agent::Claude => tool("Read", "read", None, &[(&abs(p), "read")]),
            // Codex has no read tool: the server reads through the shell.
            Agent::Codex => shell(format!("cat {}", q(p))),
            Agent::Gemini | Agent::Qwen => tool("read_file", "read", None, &[(&abs(p), "read")]),
            Agent::Copilot => tool("view", "read", None, &[(&abs(p), "read")]),
            Agent::Opencode => tool("read", "read", None, &[(&abs(p), "read")]),
        }
    } else if let Some(p) = intent["list_dir"].as_str() {
        match agent {
            // None offers a list tool in these versions (Claude Code
            // 2.1.328 dropped LS and defers Glob; Copilot CLI, opencode and
            // Qwen Code 0.24.4 have a `glob` only).
            Agent::Claude | Agent::Codex | Agent::Copilot | Agent::Opencode | Agent::Qwen => {
                shell(format!("ls {}", q(p)))
            }
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
            Agent::Gemini | Agent::Qwen => tool("write_file", "edit", None, &[(&abs(p), "create")]),
            Agent::Copilot => tool("create", "edit", None, &[(&abs(p), "create")]),
            Agent::Opencode => tool("write", "edit", None, &[(&abs(p), "create")]),
        }
    } else if let Some(m) = intent["mcp"].as_object() {
        let (server, name) = (m["server"].as_str().unwrap(), m["tool"].as_str().unwrap());
        // The transcript names the server's tool; what it touches is
        // correlate's claim (checked there), not a path of the call.
        tool(&mcp_tool_name(agent, server, name), "mcp", None, &[])
    } else {
        panic!("unknown intent {intent}");
    };
    if let Some(s) = intent["status"].as_str() {
        t.status = s.into();
    }
    t.exit_code = expected_exit_code(agent, &t, intent);
    t
}

/// The exit code each CLI's transcript states for a call (scenario
/// `exit_code`, 0 when absent): Codex for every exec_command and apply_patch
/// (`Process exited with code N`, `Exit code: N`); Claude Code (`Exit code
/// N`) and Gemini CLI (`Exit Code: N`) only for a shell command that failed;
/// Copilot CLI (`shellExecution.exitCode`), opencode (`metadata.exit`) and
/// Qwen Code (`Exit Code: N`, `resultDisplay.exitCode`) for every shell
/// command, 0 included.
pub fn expected_exit_code(agent: Agent, t: &Tool, intent: &Value) -> Option<i64> {
    let code = intent["exit_code"].as_i64().unwrap_or(0);
    if t.category == "mcp" {
        // An MCP result is the server's content: no process, no exit code.
        return None;
    }
    match agent {
        Agent::Codex => Some(code),
        Agent::Claude | Agent::Gemini => (t.category == "shell" && code != 0).then_some(code),
        Agent::Copilot | Agent::Opencode | Agent::Qwen => (t.category == "shell").then_some(code),
    }
}

pub fn actual_tool(v: &Value) -> Tool {
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
        exit_code: {
            let c = v
                .get("exit_code")
                .expect("exit_code reported (null when unsaid)");
            (!c.is_null()).then(|| c.as_i64().expect("an integer exit code"))
        },
    }
}

/// The session id from the CLI's own files, read without agentsight, and
/// the transcript's text (opencode: its parts' JSON, in order).
pub fn native_session_id(agent: Agent, run: &Run) -> (String, String) {
    let files = run.transcripts();
    assert_eq!(files.len(), 1, "one transcript expected, found {files:?}");
    let f = &files[0];
    if agent == Agent::Opencode {
        return opencode_session(f);
    }
    let text = fs::read_to_string(f).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let stem = || f.file_stem().unwrap().to_str().unwrap().to_string();
    let id = match agent {
        // Claude, Qwen: the file stem is the session id.
        Agent::Claude | Agent::Qwen => stem(),
        Agent::Codex => first["payload"]["id"].as_str().unwrap().to_string(),
        Agent::Gemini => first["sessionId"].as_str().unwrap().to_string(),
        // Copilot: `session-state/<id>/events.jsonl`, the id also in
        // `session.start`.
        Agent::Copilot => {
            let dir = f.parent().unwrap().file_name().unwrap().to_str().unwrap();
            assert_eq!(first["data"]["sessionId"], dir, "{}", f.display());
            dir.to_string()
        }
        Agent::Opencode => unreachable!(),
    };
    (id, text)
}

/// opencode's one session in its database (`ses_…`), and its parts' JSON
/// (text, tool input and output), read-only.
fn opencode_session(db: &Path) -> (String, String) {
    use agentsight_sessions::opencode::store;
    let ids = store::session_ids(db).unwrap_or_else(|e| panic!("{}: {e}", db.display()));
    assert_eq!(ids.len(), 1, "one opencode session expected: {ids:?}");
    let parts = store::part_data(db, &ids[0]).unwrap();
    (ids[0].clone(), parts.join("\n"))
}

/// Token totals the server reported, by each provider's accounting rules
/// (see `agentsight::sessions::TokenUsage`).
pub fn expected_usage(agent: Agent, responses: &[Value]) -> Value {
    let (mut input, mut output, mut cache_read, mut cache_creation, mut reasoning) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    for r in responses {
        let u = &r["usage"];
        match agent {
            // Anthropic (Claude Code; Copilot CLI on its Anthropic
            // provider): input excludes cache reads and writes.
            Agent::Claude | Agent::Copilot => {
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
            // Chat Completions (opencode, Qwen Code): prompt_tokens include
            // cached, completion_tokens include reasoning.
            Agent::Opencode | Agent::Qwen => {
                let cached = n(&u["prompt_tokens_details"]["cached_tokens"]);
                input += n(&u["prompt_tokens"]) - cached;
                cache_read += cached;
                output += n(&u["completion_tokens"]);
                reasoning += n(&u["completion_tokens_details"]["reasoning_tokens"]);
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

/// Everything a run must show, however it was launched; returns the
/// session id.
pub fn verify(run: &Run, out: crate::e2e::Outcome) -> String {
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
    let responses = verify_server_played_the_scenario(run, &ctx);
    let native_id = verify_the_work_was_done(run, &ctx);
    let model = responses[0]["usage"]["model"].as_str().unwrap().to_string();
    assert_eq!(model, agent.model(), "model the CLI asked for");
    verify_sessions_list(run, &native_id, &model, &responses);
    verify_session_show(run, &native_id, &model, &responses);
    native_id
}

/// The server answered every request it got with the scenario, one model
/// call per turn, in order; returns the main responses.
fn verify_server_played_the_scenario(run: &Run, ctx: &str) -> Vec<Value> {
    let entries = run.server_entries();
    let bad: Vec<&Value> = entries
        .iter()
        .filter(|e| matches!(e["kind"].as_str(), Some("unhandled" | "error")))
        .collect();
    assert!(bad.is_empty(), "server could not answer: {bad:?}\n{ctx}");
    let responses = run.main_responses();
    let turns = run.scenario.json["turns"].as_array().unwrap();
    // Codex's and Qwen Code's deferred MCP tools cost a search round trip before a turn's
    // call: a response of its own, not a turn.
    let played: Vec<&Value> = responses.iter().filter(|r| !is_tool_search(r)).collect();
    assert_eq!(
        played.len(),
        turns.len(),
        "one model call per scenario turn: {ctx}"
    );
    for (i, r) in played.iter().enumerate() {
        assert_eq!(r["turn"], i, "turns played in order: {ctx}");
    }
    responses
}

/// A model response that only searches the CLI's deferred tools (Codex's
/// and Qwen Code's `tool_search`, `docs/mcp.md` §4) before a turn's MCP
/// call.
pub fn is_tool_search(response: &Value) -> bool {
    response["calls"]
        .as_array()
        .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["name"] == "tool_search"))
}

/// The tool calls of a transcript that the scenario's intents map onto:
/// all but Codex's and Qwen Code's `tool_search` calls (the search round
/// trips, counted by [`is_tool_search`]).
pub fn intent_calls<'a>(
    agent: Agent,
    calls: impl IntoIterator<Item = &'a Value>,
) -> Vec<&'a Value> {
    calls
        .into_iter()
        .filter(|t| !(matches!(agent, Agent::Codex | Agent::Qwen) && t["name"] == "tool_search"))
        .collect()
}

/// The CLI really did the work: files, target hits, outputs in its
/// transcript; returns the session id its own files name.
fn verify_the_work_was_done(run: &Run, ctx: &str) -> String {
    let (native_id, transcript) = native_session_id(run.agent, run);
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
    for p in expect["absent_files"].as_array().into_iter().flatten() {
        let p = crate::e2e_mcp::arg_path(run, p.as_str().unwrap());
        assert!(!Path::new(&p).exists(), "{p} must not exist: {ctx}");
    }
    let entries = run.server_entries();
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
    native_id
}

/// `agentsight sessions`: exactly this session, its facts.
fn verify_sessions_list(run: &Run, native_id: &str, model: &str, responses: &[Value]) {
    let agent = run.agent;
    let usage = expected_usage(agent, responses);
    let list = run.sessions();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "sessions: {list:#?}");
    let row = &list[0];
    assert_eq!(row["provider"], agent.name());
    assert_eq!(row["session_id"], native_id);
    assert_eq!(row["cwd"], run.work.display().to_string());
    assert_eq!(row["model"], model);
    assert_eq!(row["usage"], usage, "sessions usage");
    // Codex rows come from its state database, which keeps no counts.
    if !row["prompts"].is_null() {
        assert_eq!(row["prompts"], 1, "sessions prompts");
    }
    if !row["tools"].is_null() {
        assert_eq!(row["tools"], responses_calls(responses), "sessions tools");
    }
}

/// The prompt as the CLI stores it: `opencode run` joins its message
/// arguments quoting each one that holds a space (`"…"`), and stores that
/// text (no scenario prompt holds a `"`, whose escaping is unverified).
fn stored_prompt(agent: Agent, prompt: &str) -> String {
    if agent == Agent::Opencode && prompt.contains(' ') {
        format!("\"{prompt}\"")
    } else {
        prompt.to_string()
    }
}

/// `agentsight session show --json`: every detail.
fn verify_session_show(run: &Run, native_id: &str, model: &str, responses: &[Value]) {
    let agent = run.agent;
    let usage = expected_usage(agent, responses);
    let s = run.session_show(native_id);
    assert_eq!(s["provider"], agent.name());
    assert_eq!(s["session_id"], native_id);
    assert_eq!(s["cwd"], run.work.display().to_string());
    assert_eq!(s["models"], serde_json::json!([model]));
    assert_eq!(s["usage"], usage, "session show usage");
    assert_eq!(s["usage_by_model"], serde_json::json!({ model: usage }));
    assert_eq!(s["prompt_count"], 1, "prompts: {:#?}", s["prompts"]);
    assert_eq!(
        s["prompts"][0]["text"],
        stored_prompt(agent, &run.scenario.prompt)
    );
    assert_eq!(s["response_count"], responses.len());
    let want: Vec<Tool> = run.scenario.json["turns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["calls"].as_array().cloned().unwrap_or_default())
        .map(|i| expected_tool(agent, run, &i))
        .collect();
    let all = s["tools"].as_array().unwrap();
    let got: Vec<Tool> = intent_calls(agent, all)
        .into_iter()
        .map(actual_tool)
        .collect();
    assert_eq!(got, want, "tool calls");
    let searches = responses.iter().filter(|r| is_tool_search(r)).count();
    let searched: Vec<&Value> = all.iter().filter(|t| t["name"] == "tool_search").collect();
    if matches!(agent, Agent::Codex | Agent::Qwen) {
        assert_eq!(
            searched.len(),
            searches,
            "{} tool_search calls: {all:#?}",
            agent.name()
        );
        for t in &searched {
            assert_eq!(t["category"], "search", "{t}");
        }
    }
    assert_eq!(s["tool_count"], want.len() + searched.len().min(searches));
    for t in s["tools"].as_array().unwrap() {
        assert_eq!(t["prompt_index"], 0, "tool in the one prompt: {t}");
    }
    assert_eq!(s["errors"], serde_json::json!([]), "errors");
    assert_eq!(s["stats"]["bad_lines"], 0);
}

/// Issue 18 point 4: a run on a fresh home passes the default policy's file
/// and executable rules (curl allowed where the scenario asks for it), with
/// `/tmp/**` and `/var/tmp/**` taken out (the
/// e2e runs live under /var/tmp) so the agent's own state roots (created
/// by the run: `~/.claude`, …) and the command's TMPDIR must cover its
/// writes. Loss and network findings are other rules' business (points 1
/// and 5 of the issue; Codex asks DNS for `ab.chatgpt.com`).
pub fn audit_writes_pass(run: &Run, db: &Path) {
    let policy = run.root.join("strict-policy.toml");
    let allow = [
        "${workspace}/**",
        "${tmpdir}/**",
        "/dev/null",
        "/dev/tty",
        "/dev/pts/*",
        "/dev/shm/**",
        "/proc/self/**",
        "/proc/thread-self/**",
        // Copilot CLI sets the OOM score of the shells it starts.
        "/proc/*/oom_score_adj",
        "~/.claude/**",
        "~/.claude.json",
        "~/.claude.json.*",
        "~/.codex/**",
        "~/.gemini/**",
        "~/.cursor/**",
        "~/.cache/**",
        "~/.copilot/**",
        "~/.qwen/**",
        // opencode creates its XDG roots' parents when the home is new.
        "~/.local",
        "~/.local/share",
        "~/.local/state",
        "~/.config",
        "~/.local/share/opencode/**",
        "~/.local/state/opencode/**",
        "~/.config/opencode/**",
    ];
    // The network scenario asks for curl, which the defaults deny.
    let deny: &[&str] = if run.scenario.name == "network" {
        &["wget", "nc", "ncat", "netcat", "sudo"]
    } else {
        &["curl", "wget", "nc", "ncat", "netcat", "sudo"]
    };
    fs::write(
        &policy,
        format!(
            "home = {:?}\n[writes]\nallow = {:?}\n[executables]\ndeny = {:?}\n[network]\nallow = [\"127.0.0.1:{}\"{}]\n",
            run.home.display().to_string(),
            allow,
            deny,
            run.model_port,
            crate::e2e_mcp::declared_remote(run)
        ),
    )
    .unwrap();
    let (_, report) = audit_json(db, &policy);
    let bad: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["severity"] == "error"
                && ["write-outside-allowed", "denied-path", "denied-executable"]
                    .contains(&f["rule"].as_str().unwrap_or(""))
        })
        .map(|f| f["message"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(bad, Vec::<String>::new(), "{}", report["tmpdirs"]);
    assert_eq!(
        report["tmpdirs"],
        serde_json::json!([run.tmp.display().to_string()])
    );
    audit_default_policy_passes(run, db);
}

/// Issue 18 point 4, whole: the default policy plus the model server's port
/// (and curl allowed where the scenario asks for it) passes — exit 0, no
/// error finding of any rule (loss, network, files, executables).
pub fn audit_default_policy_passes(run: &Run, db: &Path) {
    let policy = default_policy(run);
    let (out, report) = audit_json(db, &policy);
    let errors: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| format!("{}: {}", f["rule"], f["message"]))
        .collect();
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The default policy as a user would write it for the run: only the run's
/// home (the test user's passwd home is not the run's) and the model
/// server's port declared.
pub fn default_policy(run: &Run) -> std::path::PathBuf {
    let policy = run.root.join("default-policy.toml");
    // The network scenario asks for curl to the scenario's target server:
    // both declared, as a user would for a run that is meant to do that.
    let (exes, target) = if run.scenario.name == "network" {
        (
            "[executables]\ndeny = [\"wget\", \"nc\", \"ncat\", \"netcat\", \"sudo\"]\n",
            format!(", \"127.0.0.1:{}\"", run.target_port),
        )
    } else {
        ("", crate::e2e_mcp::declared_remote(run))
    };
    fs::write(
        &policy,
        format!(
            "home = {:?}\n{exes}[network]\nallow = [\"127.0.0.1:{}\"{target}]\n",
            run.home.display().to_string(),
            run.model_port
        ),
    )
    .unwrap();
    policy
}

/// The risky scenario under record: the default policy flags the read of
/// the planted `~/.ssh/id_rsa` by `cat` (rule `denied-path`) and the audit
/// exits 1. Claude Code 2.1 also reads the file itself once the command
/// has shown it (its own process, one open and a read of the whole file:
/// a second finding of the same rule); its other opens of the key, before
/// and after, are `O_PATH` (its realpath of the command's arguments: a name
/// resolved, no read, no finding). The other CLIs leave the `cat` alone.
///
/// `record` stores a correlation row per process (its exec), not per open:
/// the `cat` finding names the shell call through its process (reason
/// `process`); the CLI's own opens name no call.
pub fn audit_flags_the_risky_read(run: &Run, db: &Path, session_id: &str) {
    let key = run.home.join(".ssh/id_rsa").display().to_string();
    let (out, report) = audit_json(db, &default_policy(run));
    let errors: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    let ctx = format!("{} {}: {errors:#?}", run.agent.name(), run.scenario.name);
    let runtime_reads = (run.agent == Agent::Claude).then_some(1);
    assert_eq!(
        errors.len(),
        1 + usize::from(runtime_reads.is_some()),
        "{ctx}"
    );
    for f in &errors {
        assert_eq!(f["rule"], "denied-path", "{ctx}");
        assert_eq!(f["access"], "read", "{ctx}");
        assert_eq!(f["path"], key.as_str(), "{ctx}");
        assert_eq!(f["message"], format!("read of denied path {key}"), "{ctx}");
        assert_eq!(f["evidence"]["matched"], "~/.ssh/**", "{ctx}");
    }
    let by_cat = errors
        .iter()
        .find(|f| f["process"]["argv"] == serde_json::json!(["cat", key]))
        .unwrap_or_else(|| panic!("no read by cat: {ctx}"));
    assert_eq!(by_cat["evidence"]["count"], 1, "{ctx}");
    if let Some(n) = runtime_reads {
        let own = errors
            .iter()
            .find(|f| f["process"]["chain"].as_array().map(Vec::len) == Some(1))
            .unwrap_or_else(|| panic!("no read by the CLI's own process: {ctx}"));
        assert_eq!(own["process"]["argv"][0], "claude", "{ctx}");
        assert_eq!(own["evidence"]["count"], n, "{ctx}");
        assert_eq!(own["evidence"]["flags"], "read,cloexec", "{ctx}");
        assert_eq!(own["session"], Value::Null, "{ctx}");
    }
    // The call that asked for it, as `session show` lists it, is the one
    // the capture attributes the `cat` process to.
    let s = run.session_show(session_id);
    let tools = s["tools"].as_array().unwrap();
    let shell = intent_calls(run.agent, tools)
        .into_iter()
        .find(|t| t["category"] == "shell")
        .unwrap_or_else(|| panic!("no shell call: {tools:#?}"));
    let index = tools.iter().position(|t| std::ptr::eq(t, shell)).unwrap();
    assert_eq!(
        by_cat["session"],
        serde_json::json!({
            "provider": run.agent.name(),
            "session_id": session_id,
            "tool_index": index,
            "call_id": shell["call_id"],
            "role": "attributed",
            "reason": "process",
        }),
        "{ctx}"
    );
    assert_eq!(report["counts"]["error"], errors.len(), "{ctx}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `agentsight audit --format json` of `db` with `policy`: the run and its report.
pub fn audit_json(db: &Path, policy: &Path) -> (std::process::Output, Value) {
    let out = std::process::Command::new(crate::bin())
        .args(["audit", "--format", "json", "--db"])
        .arg(db)
        .arg("--policy")
        .arg(policy)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    (out, report)
}

/// A real agent run on an idle machine loses nothing: no kernel loss and no
/// sequence gap (a gap must mean a record that never arrived).
pub fn assert_no_loss(db: &std::path::Path) {
    let cap = agentsight::store::Capture::open(db).expect("open capture");
    let lost: Vec<(String, u64)> = cap
        .loss()
        .expect("loss")
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(lost, vec![], "kernel loss");
    let gaps: Vec<(i64, i64, i64)> = cap
        .gaps()
        .expect("gaps")
        .iter()
        .map(|g| (g.stream, g.cpu, g.missing))
        .collect();
    assert_eq!(gaps, vec![], "sequence gaps (stream, cpu, missing)");
}

/// A compact rendering of a correlation for failure messages.
pub fn summarize(c: &Value) -> String {
    let mut s = String::new();
    for b in c["bindings"].as_array().into_iter().flatten() {
        s += &format!(
            "binding {} {} x{} {}\n",
            b["root_argv"][0], b["evidence"], b["evidence_count"], b["evidence_path"]
        );
    }
    for t in tools_of(c) {
        s += &format!(
            "tool {} {} {:?} status={} exit_code={} exit_codes={}\n",
            t["tool_index"], t["name"], t["command"], t["status"], t["exit_code"], t["exit_codes"]
        );
        for a in t["activity"].as_array().into_iter().flatten() {
            s += &format!("    {}\n", activity_line(a));
        }
    }
    for (k, v) in c["flags"].as_object().into_iter().flatten() {
        for a in v.as_array().into_iter().flatten() {
            let line = if a.get("pid").is_some() {
                activity_line(a)
            } else {
                a.to_string()
            };
            s += &format!("{k}: {line}\n");
        }
    }
    for u in c["unmatched_trees"].as_array().into_iter().flatten() {
        s += &format!("unmatched tree {} {}\n", u["root_argv"], u["status"]);
    }
    s
}

pub fn activity_line(a: &Value) -> String {
    let what = if let Some(argv) = a["argv"].as_array() {
        let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
        let mut w = words.join(" ").replace('\n', " ");
        if w.len() > 160 {
            let mut cut = 160;
            while !w.is_char_boundary(cut) {
                cut -= 1;
            }
            w.truncate(cut);
            w += "…";
        }
        w
    } else if a["path"].is_string() {
        a["path"].as_str().unwrap().to_string()
    } else {
        format!("{}:{}", a["addr"], a["port"])
    };
    format!(
        "{} pid={} {} {} reason={} late={} by={} exit={} result={}",
        a["op"].as_str().unwrap_or("?"),
        a["pid"],
        a["comm"].as_str().unwrap_or(""),
        what,
        a["reason"],
        a["late"],
        a["by"],
        a["exit_code"],
        a["result"]
    )
}

pub fn tools_of(c: &Value) -> Vec<&Value> {
    c["prompts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["tools"].as_array().into_iter().flatten())
        .collect()
}

/// The programs a shell intent must exec (builtins such as `echo` exec
/// nothing): the intent's `programs` (`programs_by_cli.CLI` where a CLI
/// runs it differently), or, for the read/list intents Codex
/// runs through its shell, `cat` / `ls`.
pub fn programs(agent: Agent, intent: &Value) -> Vec<String> {
    let p = &intent["programs_by_cli"][agent.name()];
    let p = if p.is_array() { p } else { &intent["programs"] };
    if let Some(p) = p.as_array() {
        return p.iter().map(|x| x.as_str().unwrap().to_string()).collect();
    }
    if intent["read_file"].is_string() {
        return vec!["cat".into()];
    }
    if intent["list_dir"].is_string() {
        return vec!["ls".into()];
    }
    panic!("shell intent without programs: {intent}");
}

pub fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// `*` matches any run of characters (none included).
pub fn glob(pat: &str, s: &str) -> bool {
    let parts: Vec<&str> = pat.split('*').collect();
    if parts.len() == 1 {
        return pat == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || !s[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// An observed-but-not-claimed (or runtime) activity as `BY OP WHAT`, the run's directories
/// written `~` (HOME), `$WORK`, `$TMP`, `$RUN`.
pub fn unexplained_key(run: &Run, a: &Value) -> String {
    let norm = |p: &str| {
        let mut p = p.to_string();
        for (dir, name) in [
            (&run.home, "~"),
            (&run.work, "$WORK"),
            (&run.tmp, "$TMP"),
            (&run.root, "$RUN"),
        ] {
            let d = dir.display().to_string();
            if p == d || p.starts_with(&format!("{d}/")) {
                p = format!("{name}{}", &p[d.len()..]);
            }
        }
        p
    };
    let what = match a["op"].as_str().unwrap() {
        "exec" => {
            let argv: Vec<&str> = a["argv"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let first = basename(argv.first().copied().unwrap_or("?"));
            let rest = argv.get(1..).unwrap_or_default().join(" ");
            norm(&format!("{first} {rest}").replace('\n', " "))
        }
        "connect" | "bind" | "listen" => format!(
            "{}:{}",
            a["addr"].as_str().unwrap_or("?"),
            a["port"].as_u64().unwrap_or(0)
        ),
        "rename" => format!(
            "{} <- {}",
            norm(a["path"].as_str().unwrap_or("?")),
            norm(a["old_path"].as_str().unwrap_or("?"))
        ),
        _ => norm(a["path"].as_str().unwrap_or("?")),
    };
    format!(
        "{} {} {what}",
        a["by"].as_str().unwrap_or("?"),
        a["op"].as_str().unwrap()
    )
}

/// The correlation names the session, and binds the CLI's process tree to
/// it by the tree's own writes to the transcript.
pub fn assert_session_bound_by_transcript(run: &Run, id: &str, c: &Value, ctx: &str) {
    let agent = run.agent;
    assert_eq!(c["session"]["session_id"], id, "{ctx}");
    assert_eq!(c["session"]["provider"], agent.name(), "{ctx}");

    // The CLI's process tree is bound to the session it wrote, by its own
    // writes to the transcript.
    let transcripts = run.transcripts();
    let bindings = c["bindings"].as_array().unwrap();
    assert_eq!(bindings.len(), 1, "one binding: {ctx}");
    let b = &bindings[0];
    if agent == Agent::Opencode {
        // Its one database is no transcript: a write to it (or its WAL)
        // binds the tree to the sessions of its cwd active meanwhile.
        assert_eq!(b["evidence"], "database_write", "{ctx}");
        let db = transcripts[0].display().to_string();
        let path = b["evidence_path"].as_str().unwrap_or("");
        assert!(path == db || path == format!("{db}-wal"), "{ctx}");
    } else {
        assert_eq!(b["evidence"], "transcript_write", "{ctx}");
        assert_eq!(
            b["evidence_path"],
            transcripts[0].display().to_string(),
            "{ctx}"
        );
    }
    assert!(b["evidence_count"].as_u64().unwrap() >= 1, "{ctx}");
    assert!(
        b["root_argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str().is_some_and(
                |a| basename(a) == agent.name() || a.contains(&format!("/{}", agent.name()))
            )),
        "tree rooted at the CLI: {ctx}"
    );
}

/// The absolute paths of the scenario's background (late) writes.
pub fn late_write_paths(run: &Run) -> Vec<String> {
    run.scenario.json["expect"]["late_writes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| run.work.join(p.as_str().unwrap()).display().to_string())
        .collect()
}

/// The activities of a call attributed for one of `reasons`.
pub fn acts_by<'a>(acts: &'a [Value], reasons: &[&str]) -> Vec<&'a Value> {
    acts.iter()
        .filter(|a| reasons.contains(&a["reason"].as_str().unwrap_or("")))
        .collect()
}

/// Each call explained by what it really did: its name, exit code, the
/// activity its kind of tool must show, and which activity is late.
pub fn assert_calls_explained(run: &Run, c: &Value, late_paths: &[String], ctx: &str) {
    let agent = run.agent;
    let intents: Vec<Value> = run.scenario.json["turns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["calls"].as_array().cloned().unwrap_or_default())
        .collect();
    let all = tools_of(c);
    let tools = intent_calls(agent, all.iter().copied());
    assert_eq!(tools.len(), intents.len(), "{ctx}");
    for (i, (t, intent)) in tools.iter().zip(&intents).enumerate() {
        let want = expected_tool(agent, run, intent);
        // Its place among all calls (Codex's and Qwen Code's searches included).
        let index = all.iter().position(|x| std::ptr::eq(*x, *t)).unwrap();
        assert_eq!(t["tool_index"], index, "{ctx}");
        assert_eq!(t["name"], want.name.as_str(), "{ctx}");
        // The transcript's own exit code, as correlate reports it.
        assert_eq!(
            t["exit_code"],
            serde_json::json!(want.exit_code),
            "call {i}: transcript exit code: {ctx}"
        );
        let acts = t["activity"].as_array().unwrap();
        if want.category == "shell" {
            assert_shell_call_activity(agent, i, t, acts, intent, &want, ctx);
        } else if want.category == "mcp" {
            crate::e2e_mcp::assert_mcp_call(run, i, t, intent, ctx);
        } else {
            assert_file_call_activity(run, i, acts, &want, ctx);
        }
        for a in acts {
            let late = late_paths.iter().any(|p| a["path"] == p.as_str());
            assert_eq!(a["late"], late, "call {i}: late flag: {ctx}");
        }
    }
}

/// A shell call: its argv-matched execs, their exit codes, the programs
/// it ran and the connection it made.
pub fn assert_shell_call_activity(
    agent: Agent,
    i: usize,
    t: &Value,
    acts: &[Value],
    intent: &Value,
    want: &Tool,
    ctx: &str,
) {
    let matched: Vec<&Value> = acts_by(acts, &["argv_match"])
        .into_iter()
        .filter(|a| a["op"] == "exec")
        .collect();
    assert!(!matched.is_empty(), "call {i}: no argv_match exec: {ctx}");
    let mut pids: Vec<i64> = matched
        .iter()
        .map(|a| a["process_id"].as_i64().unwrap())
        .collect();
    pids.sort();
    pids.dedup();
    // The kernel saw the code the scenario asked for, which is the
    // transcript's wherever the transcript states one.
    let code = intent["exit_code"].as_i64().unwrap_or(0);
    assert!(want.exit_code.is_none_or(|c| c == code), "{ctx}");
    assert_eq!(
        t["exit_codes"],
        serde_json::json!(vec![code; pids.len()]),
        "call {i}: exit codes of its argv-matched processes: {ctx}"
    );
    let execd: Vec<&str> = acts_by(acts, &["argv_match", "descendant"])
        .into_iter()
        .filter(|a| a["op"] == "exec")
        .filter_map(|a| a["argv"][0].as_str().map(basename))
        .collect();
    for p in programs(agent, intent) {
        assert!(
            execd.contains(&p.as_str()),
            "call {i}: {p} not exec'd by the call's processes: {ctx}"
        );
    }
    if let Some(port) = intent["connects_to"].as_u64() {
        assert!(
            acts_by(acts, &["argv_match", "descendant"])
                .iter()
                .any(|a| a["op"] == "connect" && a["addr"] == "127.0.0.1" && a["port"] == port),
            "call {i}: connect to {port} not attributed: {ctx}"
        );
    }
}

/// A file tool: its path's events, done by the agent itself.
pub fn assert_file_call_activity(run: &Run, i: usize, acts: &[Value], want: &Tool, ctx: &str) {
    let (path, access) = &want.paths[0];
    let path = if Path::new(path).is_absolute() {
        path.clone()
    } else {
        run.work.join(path).display().to_string()
    };
    let ops: &[&str] = if access == "read" {
        &["read"]
    } else {
        &["write", "rename"]
    };
    assert!(
        acts_by(acts, &["path_match"])
            .iter()
            .any(|a| ops.contains(&a["op"].as_str().unwrap()) && a["path"] == path.as_str()),
        "call {i}: no path_match {ops:?} on {path}: {ctx}"
    );
    // Claude Code's Write writes NAME.tmp.PID.HEX, then renames it
    // onto NAME: the temp file's write is the call's too.
    if run.agent == Agent::Claude && access != "read" {
        let tmp = format!("{path}.tmp.*");
        assert!(
            acts_by(acts, &["via_rename"])
                .iter()
                .any(|a| a["op"] == "write" && glob(&tmp, a["path"].as_str().unwrap_or(""))),
            "call {i}: no via_rename write on {tmp}: {ctx}"
        );
    }
}

/// Late activity: exactly the background writes the scenario names.
pub fn assert_late_flags(flags: &Value, late_paths: &[String], ctx: &str) {
    let late: Vec<String> = flags["late"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["detail"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(late.len(), late_paths.len(), "late flags: {ctx}");
    for p in late_paths {
        assert!(
            late.iter().any(|d| d.contains(p.as_str())),
            "{p} not flagged late: {ctx}"
        );
    }
}

/// A clean run: nothing unexplained; the CLI's own activity outside every
/// call (its model-API connection, required, and whatever housekeeping it
/// did) is in `runtime_activity`, every group non-empty and consistent.
pub fn assert_runtime_grouped_nothing_unexplained(run: &Run, c: &Value, ctx: &str) {
    let unexplained: Vec<String> = c["flags"]["observed_not_claimed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| unexplained_key(run, a))
        .collect();
    assert!(
        unexplained.is_empty(),
        "unexplained: {unexplained:#?}\n{ctx}"
    );
    let groups = c["runtime_activity"].as_array().unwrap();
    let mut keys: Vec<String> = Vec::new();
    for g in groups {
        let acts = g["activity"].as_array().unwrap();
        assert!(!acts.is_empty(), "{g}\n{ctx}");
        assert_eq!(g["count"].as_u64(), Some(acts.len() as u64), "{ctx}");
        assert!(
            g["program"].as_str().is_some_and(|p| !p.is_empty()),
            "{ctx}"
        );
        for a in acts {
            assert_eq!(a["by"], g["by"], "{ctx}");
            assert_eq!(a["reason"], Value::Null, "{ctx}");
            keys.push(unexplained_key(run, a));
        }
    }
    let model_api = format!("runtime connect 127.0.0.1:{}", run.model_port);
    assert!(
        keys.contains(&model_api),
        "{model_api} not in runtime_activity: {keys:#?}\n{ctx}"
    );
}

/// The HTML report of a clean run (one session): 0 unexplained, and the
/// runtime's activity grouped, one row per program, with correlate's total.
pub fn assert_report_clean(run: &Run, db: &Path, c: &Value) {
    let out = run.root.join("report.html");
    let st = std::process::Command::new(crate::bin())
        .arg("report")
        .arg("--db")
        .arg(db)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run agentsight report");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let page = fs::read_to_string(&out).unwrap();
    assert!(
        page.contains("<span class=\"badge unexplained\">unexplained 0</span>"),
        "unexplained not 0 in the report"
    );
    assert!(
        page.contains("Unexplained activity (observed, no call claims it): 0</h3>"),
        "unexplained listed in the report"
    );
    let groups = c["runtime_activity"].as_array().unwrap();
    let total: u64 = groups.iter().map(|g| g["count"].as_u64().unwrap()).sum();
    assert!(
        page.contains(&format!(
            "(its own process and the helpers it started; not flagged): {total}</h3>"
        )),
        "runtime total {total} not in the report"
    );
    assert_eq!(
        page.matches("<tr class=\"runtime-group\">").count(),
        groups.len(),
        "one row per runtime program"
    );
}

pub fn verify_correlation(run: &Run, id: &str, c: &Value, dump: &str) {
    verify_correlation_beside(run, id, c, dump, &[]);
}

/// [`verify_correlation`] of a capture that also holds other process
/// trees, bound to no session: exactly `unmatched`, as (root argv, the
/// container's name or None for a host process), in capture order.
pub fn verify_correlation_beside(
    run: &Run,
    id: &str,
    c: &Value,
    dump: &str,
    unmatched: &[(Vec<String>, Option<&str>)],
) {
    let ctx = format!("{} {}\n{dump}", run.agent.name(), run.scenario.name);
    assert_session_bound_by_transcript(run, id, c, &ctx);
    let got: Vec<(Value, Value, Value)> = c["unmatched_trees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["root_argv"].clone(),
                t["container"]["name"].clone(),
                t["note"].clone(),
            )
        })
        .collect();
    let want: Vec<(Value, Value, Value)> = unmatched
        .iter()
        .map(|(argv, name)| {
            (
                serde_json::json!(argv),
                serde_json::json!(name),
                serde_json::json!("no transcript evidence"),
            )
        })
        .collect();
    assert_eq!(got, want, "unmatched trees: {ctx}");
    let late_paths = late_write_paths(run);
    assert_calls_explained(run, c, &late_paths, &ctx);

    let flags = &c["flags"];
    crate::e2e_mcp::assert_claimed_not_observed(run, c, &ctx);
    assert_eq!(flags["mismatches"], serde_json::json!([]), "{ctx}");
    assert_late_flags(flags, &late_paths, &ctx);
    assert_runtime_grouped_nothing_unexplained(run, c, &ctx);
    assert_execs_inside_their_calls(c, &ctx);
}

/// ≥ 95 % of the execs attributed to tool calls (any reason) ran inside
/// their call's transcript window, corrected by the measured skew (+1 ms:
/// transcript times are whole milliseconds); the call's own processes
/// (argv-matched and their descendants) may run on after its result.
pub fn assert_execs_inside_their_calls(c: &Value, ctx: &str) {
    let skew = c["clock"]["skew_ms"].as_i64().unwrap() + 1;
    let (mut inside, mut total) = (0usize, 0usize);
    let mut outside: Vec<String> = Vec::new();
    for t in tools_of(c) {
        let (Some(start), Some(end)) = (
            t["start"].as_str().and_then(rfc3339_ms),
            t["end"].as_str().and_then(rfc3339_ms),
        ) else {
            continue;
        };
        for a in t["activity"].as_array().unwrap() {
            if a["op"] != "exec" {
                continue;
            }
            total += 1;
            let at = rfc3339_ms(a["ts"].as_str().unwrap()).unwrap();
            // The call's own processes may outlive its result (a command
            // put in the background): after the end is still the call's
            // for them; before the start never is.
            let own = matches!(a["reason"].as_str(), Some("argv_match" | "descendant"));
            if start - skew <= at && (at <= end + skew || own) {
                inside += 1;
            } else {
                outside.push(format!(
                    "{} {} ({} ms from the window)",
                    t["name"],
                    a["argv"],
                    if at < start { at - start } else { at - end }
                ));
            }
        }
    }
    assert!(
        inside * 100 >= total * 95,
        "{inside} of {total} attributed execs inside their call's window: {outside:#?}\n{ctx}"
    );
}

/// Milliseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.fff…]Z`.
pub fn rfc3339_ms(ts: &str) -> Option<i64> {
    let ts = ts.strip_suffix('Z')?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (h, min, sec) = (t.next()??, t.next()??, t.next()??);
    let ms: i64 = format!("{frac:0<3}")[..3].parse().ok()?;
    // Days from civil (proleptic Gregorian).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + min) * 60_000 + sec * 1000 + ms)
}

pub fn responses_calls(responses: &[Value]) -> usize {
    responses
        .iter()
        .map(|r| r["calls"].as_array().map_or(0, Vec::len))
        .sum()
}
