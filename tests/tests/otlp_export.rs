//! `agentsight export --format otlp-json` and `--otlp-endpoint` (issue 16
//! part 2), decoded by an independent decoder — the PyPI
//! `opentelemetry-proto` package (tests/otlp/decode.py) — on real-CLI e2e
//! captures: span names, parentage, attributes and counts against
//! `correlate --json` and `session show --json`; planted secrets; byte-for-
//! byte determinism; a loopback receiver answering 503 + Retry-After then
//! 200; a dead endpoint; an incomplete and a lossy capture.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use agentsight_tests::{
    assert_exit_0, bin,
    e2e::{Agent, Run},
    export_otlp_json, python, require_root, scratch,
};
use serde_json::Value;

fn otlp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("otlp")
}

/// The decoder's summary of OTLP/JSON lines or protobuf bodies.
fn decode(mode: &str, files: &[PathBuf]) -> Value {
    let o = Command::new(python::interpreter())
        .arg(otlp_dir().join("decode.py"))
        .arg(mode)
        .args(files)
        .output()
        .expect("run decode.py");
    assert!(
        o.status.success(),
        "decode.py {mode}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("decoder JSON")
}

/// The spans of each trace, checked: ids of the right size, exactly one
/// root, every parent resolving inside its trace, span ids unique.
fn traces(summary: &Value) -> BTreeMap<String, Vec<Value>> {
    let mut by_trace: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for s in summary["spans"].as_array().expect("spans") {
        by_trace
            .entry(s["trace_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(s.clone());
    }
    for (trace, spans) in &by_trace {
        assert_eq!(trace.len(), 32, "trace id {trace}");
        let ids: BTreeSet<&str> = spans
            .iter()
            .map(|s| s["span_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), spans.len(), "span ids unique in {trace}");
        assert!(ids.iter().all(|i| i.len() == 16));
        let roots: Vec<&Value> = spans.iter().filter(|s| s["parent_span_id"] == "").collect();
        assert_eq!(roots.len(), 1, "one root in trace {trace}");
        for s in spans {
            let p = s["parent_span_id"].as_str().unwrap();
            assert!(
                p.is_empty() || ids.contains(p),
                "parent of {} resolves",
                s["name"]
            );
            assert!(s["start"].as_u64().unwrap() <= s["end"].as_u64().unwrap());
        }
    }
    for b in summary["batches"].as_array().unwrap() {
        assert_eq!(b["schema_url"], "https://opentelemetry.io/schemas/1.42.0");
        assert_eq!(b["resource"]["service.name"], "agentsight");
        assert_eq!(b["scopes"][0]["name"], "agentsight");
    }
    by_trace
}

fn children<'a>(spans: &'a [Value], parent: &Value) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| s["parent_span_id"] == parent["span_id"])
        .collect()
}

/// `span` and all its descendants.
fn subtree<'a>(spans: &'a [Value], span: &'a Value) -> Vec<&'a Value> {
    let mut out = vec![span];
    let mut i = 0;
    while i < out.len() {
        out.extend(children(spans, out[i]));
        i += 1;
    }
    out
}

fn event_count(spans: &[&Value]) -> u64 {
    spans
        .iter()
        .map(|s| {
            s["events"].as_array().unwrap().len() as u64 + s["dropped_events"].as_u64().unwrap()
        })
        .sum()
}

/// The id of the capture's first stored session (read through the store).
fn stored_session_id(db: &Path) -> String {
    let cap = agentsight::store::Capture::open(db).expect("open capture");
    let stored = cap.stored_sessions("").expect("stored sessions");
    stored
        .first()
        .expect("one stored session")
        .session
        .session_id
        .clone()
}

const SPAWNED: [&str; 3] = ["argv_match", "descendant", "time_window"];

/// One session's trace against `correlate --json` and `session show --json`.
fn check_session_trace(run: &Run, db: &Path, summary: &Value) {
    let id = stored_session_id(db);
    let c = run.correlate(&id, db);
    let s = run.session_show(&id);
    let by_trace = traces(summary);
    let (agent, provider) = match run.agent {
        Agent::Claude => ("claude-code", "anthropic"),
        Agent::Codex => ("codex", "openai"),
        Agent::Gemini => ("gemini-cli", "gcp.gemini"),
        other => panic!("no OTLP expectations for {} yet", other.name()),
    };
    let (trace, spans) = by_trace
        .iter()
        .find(|(_, v)| {
            v.iter()
                .any(|s| s["name"] == format!("invoke_agent {agent}"))
        })
        .expect("the session's trace");
    let root = spans.iter().find(|s| s["parent_span_id"] == "").unwrap();
    let input = check_root(root, (agent, provider), &id, &s);
    let chats = check_chats(spans, root, &s, input);
    let tool_spans = check_tool_spans(spans, root, &c, &s);
    let un = check_unattributed(spans, root, &c);
    let runtime = check_runtime(spans, root, &c);
    // Nothing else in the trace.
    let counted = 1
        + chats
        + tool_spans
            .iter()
            .map(|t| subtree(spans, t).len())
            .sum::<usize>()
        + subtree(spans, un).len()
        + runtime.map_or(0, |r| subtree(spans, r).len());
    assert_eq!(counted, spans.len(), "spans of trace {trace}");
}

/// The root span's attributes; returns the session's input tokens (§3).
fn check_root(root: &Value, (agent, provider): (&str, &str), id: &str, s: &Value) -> i64 {
    assert_eq!(root["name"], format!("invoke_agent {agent}"));
    assert_eq!(root["kind"], "SPAN_KIND_INTERNAL");
    let a = &root["attributes"];
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.provider.name"], provider);
    assert_eq!(a["gen_ai.agent.name"], agent);
    assert_eq!(a["agentsight.session.id"], id);
    assert_eq!(
        a.get("gen_ai.conversation.id").unwrap_or(&Value::Null),
        &s["conversation_id"],
        "conversation id only when the transcript has one"
    );
    assert_eq!(a["agentsight.capture.complete"], true);
    assert_eq!(a["agentsight.capture.lost_events"], 0);
    assert_eq!(a["agentsight.capture.missing_by_sequence"], 0);
    // §3: input counts cache reads and writes; output includes reasoning.
    let u = &s["usage"];
    let n = |v: &Value| v.as_i64().unwrap();
    let input = n(&u["input"]) + n(&u["cache_read"]) + n(&u["cache_creation"]);
    assert!(input > 0, "the scripted server reports usage");
    assert_eq!(n(&a["gen_ai.usage.input_tokens"]), input);
    assert_eq!(n(&a["gen_ai.usage.output_tokens"]), n(&u["output"]));
    assert_eq!(
        n(&a["gen_ai.usage.cache_read.input_tokens"]),
        n(&u["cache_read"])
    );
    assert_eq!(
        n(&a["gen_ai.usage.cache_creation.input_tokens"]),
        n(&u["cache_creation"])
    );
    assert_eq!(
        n(&a["gen_ai.usage.reasoning.output_tokens"]),
        n(&u["reasoning"])
    );
    input
}

/// One chat span per model response, under the root, summing to the
/// totals; returns their number.
fn check_chats(spans: &[Value], root: &Value, s: &Value, input: i64) -> usize {
    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "chat")
        .collect();
    let responses = s["responses"].as_array().unwrap();
    assert_eq!(chats.len(), responses.len(), "chat spans");
    let mut chat_input = 0;
    for (chat, r) in chats.iter().zip(responses) {
        assert_eq!(chat["parent_span_id"], root["span_id"]);
        assert_eq!(chat["kind"], "SPAN_KIND_CLIENT");
        assert_eq!(
            chat["name"],
            format!("chat {}", r["model"].as_str().unwrap())
        );
        assert_eq!(chat["attributes"]["gen_ai.request.model"], r["model"]);
        assert_eq!(chat["attributes"]["agentsight.time.start_inferred"], true);
        assert_eq!(
            chat["attributes"]
                .get("gen_ai.response.id")
                .unwrap_or(&Value::Null),
            &r["native_id"]
        );
        chat_input += chat["attributes"]["gen_ai.usage.input_tokens"]
            .as_i64()
            .unwrap_or(0);
    }
    assert_eq!(
        chat_input, input,
        "chat spans add up to the session's usage"
    );
    chats.len()
}

/// One execute_tool span per call; its subtree holds exactly the call's
/// attributed activity, one CLI span per process started for it.
fn check_tool_spans<'a>(spans: &'a [Value], root: &Value, c: &Value, s: &Value) -> Vec<&'a Value> {
    let tools: Vec<&Value> = c["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap())
        .collect();
    let tool_spans: Vec<&Value> = spans
        .iter()
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "execute_tool")
        .collect();
    assert_eq!(tool_spans.len(), tools.len(), "tool spans");
    assert_eq!(tools.len() as u64, s["tool_count"].as_u64().unwrap());
    for t in &tools {
        let span = tool_spans
            .iter()
            .find(|sp| sp["attributes"]["gen_ai.tool.call.id"] == t["call_id"])
            .unwrap_or_else(|| panic!("a span for call {}", t["call_id"]));
        assert_eq!(
            span["name"],
            format!("execute_tool {}", t["name"].as_str().unwrap())
        );
        assert_eq!(span["parent_span_id"], root["span_id"]);
        assert_eq!(span["attributes"]["gen_ai.tool.name"], t["name"]);
        // An MCP call is an extension's tool (docs/otlp.md), the rest the
        // agent's own functions.
        let tool_type = if t["mcp"].is_object() {
            "extension"
        } else {
            "function"
        };
        assert_eq!(span["attributes"]["gen_ai.tool.type"], tool_type);
        assert_eq!(span["attributes"]["agentsight.tool.status"], t["status"]);
        let failed = t["status"] == "failed";
        assert_eq!(
            span["status"],
            if failed {
                "STATUS_CODE_ERROR"
            } else {
                "STATUS_CODE_UNSET"
            }
        );
        let acts = t["activity"].as_array().unwrap();
        let tree = subtree(spans, span);
        assert_eq!(
            event_count(&tree),
            acts.len() as u64,
            "events of {}",
            t["name"]
        );
        let mut spawned: BTreeMap<i64, i64> = BTreeMap::new();
        for act in acts
            .iter()
            .filter(|a| SPAWNED.contains(&a["reason"].as_str().unwrap()))
        {
            spawned.insert(
                act["process_id"].as_i64().unwrap(),
                act["pid"].as_i64().unwrap(),
            );
        }
        let procs: BTreeMap<i64, i64> = tree[1..]
            .iter()
            .map(|p| {
                assert_eq!(p["kind"], "SPAN_KIND_CLIENT");
                let pa = &p["attributes"];
                assert_eq!(p["name"], pa["process.executable.name"]);
                assert!(
                    pa.get("process.command_args").is_none(),
                    "argv only with --capture-content"
                );
                (
                    pa["agentsight.process.row"].as_i64().unwrap(),
                    pa["process.pid"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(procs, spawned, "process spans of {}", t["name"]);
        if t["category"] == "shell" {
            assert!(
                !procs.is_empty(),
                "a shell call ran a process: {}",
                t["name"]
            );
        }
    }
    tool_spans
}

/// The unattributed rest, under one span.
fn check_unattributed<'a>(spans: &'a [Value], root: &Value, c: &Value) -> &'a Value {
    let un: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "agentsight.unattributed")
        .collect();
    assert_eq!(un.len(), 1);
    assert_eq!(un[0]["parent_span_id"], root["span_id"]);
    let unclaimed = c["flags"]["observed_not_claimed"].as_array().unwrap().len() as u64;
    assert_eq!(
        un[0]["attributes"]["agentsight.unattributed.count"],
        unclaimed
    );
    assert_eq!(event_count(&subtree(spans, un[0])), unclaimed);
    un[0]
}

/// The agent runtime's own activity outside every call, under one span
/// beside the unattributed (none when correlate lists none).
fn check_runtime<'a>(spans: &'a [Value], root: &Value, c: &Value) -> Option<&'a Value> {
    let rt: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "agentsight.runtime")
        .collect();
    let groups = c["runtime_activity"].as_array().unwrap();
    let total: u64 = groups.iter().map(|g| g["count"].as_u64().unwrap()).sum();
    if groups.is_empty() {
        assert!(rt.is_empty());
        return None;
    }
    assert_eq!(rt.len(), 1);
    assert_eq!(rt[0]["parent_span_id"], root["span_id"]);
    assert_eq!(rt[0]["attributes"]["agentsight.runtime.count"], total);
    assert_eq!(
        rt[0]["attributes"]["agentsight.runtime.programs"],
        groups.len() as u64
    );
    assert_eq!(event_count(&subtree(spans, rt[0])), total);
    Some(rt[0])
}

/// A loopback receiver (tests/otlp/receiver.py) answering `statuses`.
struct Receiver {
    child: std::process::Child,
    dir: PathBuf,
    port: u16,
}

impl Receiver {
    fn start(dir: &Path, statuses: &[u16]) -> Self {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let port_file = dir.join("port");
        let child = Command::new(python::interpreter())
            .arg(otlp_dir().join("receiver.py"))
            .arg(&port_file)
            .arg(dir)
            .args(statuses.iter().map(|s| s.to_string()))
            .stdin(Stdio::null())
            .spawn()
            .expect("start receiver.py");
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p.trim().parse().unwrap();
            }
            assert!(Instant::now() < deadline, "receiver did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Receiver {
            child,
            dir: dir.to_owned(),
            port,
        }
    }

    /// The requests received: (meta, body path), in order.
    fn requests(&self) -> Vec<(Value, PathBuf)> {
        (1..)
            .map(|n| {
                (
                    self.dir.join(format!("{n}.json")),
                    self.dir.join(format!("{n}.body")),
                )
            })
            .take_while(|(m, _)| m.exists())
            .map(|(m, b)| {
                (
                    serde_json::from_slice(&std::fs::read(m).unwrap()).unwrap(),
                    b,
                )
            })
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn push(db: &Path, endpoint: Option<&str>, env: &[(&str, &str)]) -> (Output, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(bin());
    cmd.args(["export", "--db"]).arg(db).arg("--otlp-endpoint");
    if let Some(e) = endpoint {
        cmd.arg(e);
    }
    for k in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "http_proxy",
        "HTTP_PROXY",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env_remove(k);
    }
    let o = cmd
        .envs(env.iter().copied())
        .output()
        .expect("run export --otlp-endpoint");
    (o, started.elapsed())
}

/// The protobuf push: 503 + Retry-After, then 200; the delivered bodies
/// decode to exactly the spans of the JSON file.
fn check_push(db: &Path, dir: &Path, file_summary: &Value) {
    let rx = Receiver::start(&dir.join("receiver"), &[503, 200]);
    let endpoint = format!("http://127.0.0.1:{}", rx.port);
    let (o, elapsed) = push(
        db,
        None,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-team=agents,authorization=Bearer%20t0k",
            ),
        ],
    );
    assert_exit_0(&o);
    let reqs = rx.requests();
    let batches = file_summary["batches"].as_array().unwrap().len();
    assert_eq!(
        reqs.len(),
        batches + 1,
        "one retry, then one request per batch"
    );
    assert_eq!(reqs[0].0["status"], 503);
    assert!(reqs[1..].iter().all(|(m, _)| m["status"] == 200));
    let waited = reqs[1].0["time"].as_f64().unwrap() - reqs[0].0["time"].as_f64().unwrap();
    assert!(
        waited >= 0.95,
        "Retry-After: 1 honoured (waited {waited:.3} s)"
    );
    assert!(elapsed < Duration::from_secs(30));
    for (m, _) in &reqs {
        assert_eq!(m["path"], "/v1/traces");
        assert_eq!(m["headers"]["content-type"], "application/x-protobuf");
        assert_eq!(m["headers"]["x-team"], "agents");
        assert_eq!(m["headers"]["authorization"], "Bearer t0k");
    }
    // The retried body is the same batch, byte for byte.
    assert_eq!(
        std::fs::read(&reqs[0].1).unwrap(),
        std::fs::read(&reqs[1].1).unwrap()
    );
    let bodies: Vec<PathBuf> = reqs[1..].iter().map(|(_, b)| b.clone()).collect();
    let proto = decode("proto", &bodies);
    assert_eq!(
        proto["spans"], file_summary["spans"],
        "protobuf body = JSON file"
    );
    let spans = file_summary["spans"].as_array().unwrap().len();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains(&format!("sent {spans} spans")), "{said}");
}

/// A real CLI run under `record`, exported twice and pushed.
fn check_agent(agent: Agent, scenario: &str) {
    require_root();
    let run = Run::prepare(agent, scenario);
    let (out, db) = run.run_recorded();
    assert!(out.status.success(), "{}", out.stderr);
    let dir = run.server_dir.clone();
    let first = export_otlp_json(&db, &dir.join("a.jsonl"), &[]);
    let second = export_otlp_json(&db, &dir.join("b.jsonl"), &[]);
    assert!(
        first == second,
        "two exports of one capture are byte-identical"
    );
    assert!(first.ends_with(b"\n"));
    let summary = decode("json", &[dir.join("a.jsonl")]);
    check_session_trace(&run, &db, &summary);
    check_push(&db, &dir, &summary);
}

#[test]
fn otlp_claude_edit() {
    check_agent(Agent::Claude, "edit");
}

#[test]
fn otlp_codex_failing() {
    check_agent(Agent::Codex, "failing");
}

#[test]
fn otlp_gemini_inspect() {
    check_agent(Agent::Gemini, "inspect");
}

const SECRETS_ALWAYS_ABSENT: [&str; 1] = ["AGS-FILE-9d8e7f"];
const SECRETS_WITH_CONTENT: [&str; 3] = [
    "AGS-PROMPT-7f3a91",
    "AGS-ARGV-c0ffee42",
    "AGS-RESPONSE-51c2e8",
];

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Planted secrets (prompt, command line, response text, file content)
/// never leave without --capture-content, in the file or the pushed body;
/// with it, the prompt, argv and response do (file contents never: the
/// capture holds none).
#[test]
fn otlp_planted_secrets() {
    require_root();
    let run = Run::prepare(Agent::Claude, "secret");
    let (out, db) = run.run_recorded();
    assert!(out.status.success(), "{}", out.stderr);
    let dir = run.server_dir.clone();
    // The secrets are really in the capture and the stored session.
    let raw = std::fs::read(&db).unwrap();
    for s in SECRETS_WITH_CONTENT {
        assert!(contains(&raw, s), "{s} is in the capture");
    }
    let plain = export_otlp_json(&db, &dir.join("plain.jsonl"), &[]);
    for s in SECRETS_WITH_CONTENT.iter().chain(&SECRETS_ALWAYS_ABSENT) {
        assert!(!contains(&plain, s), "{s} leaked without --capture-content");
    }
    let rx = Receiver::start(&dir.join("receiver"), &[200]);
    let (o, _) = push(&db, Some(&format!("http://127.0.0.1:{}", rx.port)), &[]);
    assert_exit_0(&o);
    for (_, body) in rx.requests() {
        let body = std::fs::read(body).unwrap();
        for s in SECRETS_WITH_CONTENT.iter().chain(&SECRETS_ALWAYS_ABSENT) {
            assert!(!contains(&body, s), "{s} leaked into the pushed body");
        }
    }
    let content = export_otlp_json(&db, &dir.join("content.jsonl"), &["--capture-content"]);
    for s in SECRETS_WITH_CONTENT {
        assert!(contains(&content, s), "{s} exported with --capture-content");
    }
    for s in SECRETS_ALWAYS_ABSENT {
        assert!(
            !contains(&content, s),
            "{s}: file contents are never exported"
        );
    }
    // Where they are: the prompt on the root's prompt event, the command
    // line on the shell call's process, the text on its chat span.
    let summary = decode("json", &[dir.join("content.jsonl")]);
    let spans = summary["spans"].as_array().unwrap();
    let root = spans
        .iter()
        .find(|s| s["name"] == "invoke_agent claude-code")
        .unwrap();
    let prompt = root["events"][0]["attributes"]["gen_ai.input.messages"]
        .as_str()
        .unwrap();
    assert!(prompt.contains("AGS-PROMPT-7f3a91"));
    assert!(spans.iter().any(|s| {
        s["attributes"]["process.command_args"]
            .as_array()
            .is_some_and(|a| {
                a.iter()
                    .any(|x| x.as_str().unwrap().contains("AGS-ARGV-c0ffee42"))
            })
    }));
    assert!(spans.iter().any(|s| {
        s["attributes"]["gen_ai.output.messages"]
            .as_str()
            .is_some_and(|m| m.contains("AGS-RESPONSE-51c2e8"))
    }));
}

/// A small capture of a plain command (no agent: one unbound tree).
fn small_capture(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let db = dir.join("run.db");
    let out = agentsight_tests::record(
        &db,
        &[],
        &["sh", "-c", "echo hi > out.txt; /bin/true; ls > /dev/null"],
    );
    assert_exit_0(&out);
    (dir, db)
}

/// A capture with no session is one trace: the unbound tree's processes
/// under `agentsight.unattributed`; an unfinished recorder or counted loss
/// never exports as complete.
#[test]
fn otlp_unbound_incomplete_and_lossy() {
    require_root();
    let (dir, db) = small_capture("otlp-unbound");
    export_otlp_json(&db, &dir.join("t.jsonl"), &[]);
    let summary = decode("json", &[dir.join("t.jsonl")]);
    let by_trace = traces(&summary);
    assert_eq!(by_trace.len(), 1);
    let spans = by_trace.values().next().unwrap();
    let root = &spans[0];
    assert_eq!(root["name"], "agentsight.unattributed");
    assert_eq!(
        root["attributes"]["agentsight.unattributed.scope"],
        "unbound_trees"
    );
    assert_eq!(root["attributes"]["agentsight.capture.complete"], true);
    let procs = agentsight::store::Capture::open(&db)
        .expect("open capture")
        .processes()
        .expect("processes")
        .len();
    assert_eq!(spans.len(), procs + 1, "one CLI span per process");
    let names: BTreeSet<&str> = spans[1..]
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        ["sh", "true", "ls"].iter().all(|n| names.contains(n)),
        "{names:?}"
    );
    let sh = spans.iter().find(|s| s["name"] == "sh").unwrap();
    assert_eq!(sh["parent_span_id"], root["span_id"]);
    assert_eq!(sh["attributes"]["process.exit.code"], 0);
    assert!(
        sh["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "file.write"
                && e["attributes"]["file.path"] == dir.join("out.txt").display().to_string()),
        "the write of out.txt is an event of sh"
    );
    let ls = spans.iter().find(|s| s["name"] == "ls").unwrap();
    assert_eq!(ls["parent_span_id"], sh["span_id"], "nested by parentage");

    // An unfinished recorder: complete=false.
    let unfinished = dir.join("unfinished.db");
    std::fs::copy(&db, &unfinished).unwrap();
    rusqlite::Connection::open(&unfinished)
        .unwrap()
        .execute("UPDATE meta SET value='false' WHERE key='complete'", [])
        .unwrap();
    export_otlp_json(&unfinished, &dir.join("u.jsonl"), &[]);
    let u = decode("json", &[dir.join("u.jsonl")]);
    let a = &u["spans"][0]["attributes"];
    assert_eq!(a["agentsight.capture.complete"], false);
    assert_eq!(a["agentsight.capture.recorder_finished"], false);

    // Counted kernel loss: complete=false, the counts on the root.
    let lossy = dir.join("lossy.db");
    std::fs::copy(&db, &lossy).unwrap();
    rusqlite::Connection::open(&lossy)
        .unwrap()
        .execute(
            "INSERT OR REPLACE INTO loss (kind, lost) VALUES ('syscall', 7)",
            [],
        )
        .unwrap();
    export_otlp_json(&lossy, &dir.join("l.jsonl"), &[]);
    let l = decode("json", &[dir.join("l.jsonl")]);
    let a = &l["spans"][0]["attributes"];
    assert_eq!(a["agentsight.capture.complete"], false);
    assert_eq!(a["agentsight.capture.recorder_finished"], true);
    assert_eq!(a["agentsight.capture.lost_events"], 7);
    assert_eq!(
        a["agentsight.capture.loss"],
        serde_json::json!(["syscall=7"])
    );
}

/// A dead endpoint: bounded time, exit status 2, and the count of
/// undelivered spans in the one-line message.
#[test]
fn otlp_dead_endpoint() {
    require_root();
    let (dir, db) = small_capture("otlp-dead");
    export_otlp_json(&db, &dir.join("t.jsonl"), &[]);
    let spans = decode("json", &[dir.join("t.jsonl")])["spans"]
        .as_array()
        .unwrap()
        .len();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (o, elapsed) = push(
        &db,
        Some(&format!("http://127.0.0.1:{port}")),
        &[("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{spans} of {spans} spans undelivered")),
        "{err}"
    );
    assert!(
        err.contains(&format!("127.0.0.1:{port}/v1/traces")),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(elapsed < Duration::from_secs(20), "bounded: {elapsed:?}");
    // https is refused before anything is sent.
    let (o, _) = push(&db, Some("https://127.0.0.1:1"), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("https is not supported"));
}
