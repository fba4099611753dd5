//! Real CLI runs under `agentsight record --wire` (issue 30): the relay sits
//! between the pinned CLI and the scripted model server, and the capture
//! must hold every request the server received byte for byte (the server
//! logs each body's SHA-256), every streamed answer reassembled exactly
//! (text and tool calls as the server sent them), joined to the
//! transcript's turns by their ids with nothing left over, and no relay
//! bypass.

use std::collections::BTreeMap;
use std::path::Path;

use agentsight_tests::{
    e2e::{Agent, Run},
    e2e_check::*,
};
use agentsight_wire::{RawExchange, decode};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The stored exchanges, through the store's typed read.
fn exchanges(db: &Path) -> Vec<RawExchange> {
    let cap = agentsight::store::Capture::open(db).unwrap();
    let rows = cap.reader().wire_exchanges().unwrap();
    rows.into_iter().map(|r| r.raw).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The server's log entries of requests it answered (not its own target
/// server's), by body digest.
fn server_requests(run: &Run) -> Vec<Value> {
    std::fs::read_to_string(&run.server_log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["body_sha256"].is_string())
        .collect()
}

fn check_wire(agent: Agent, scenario: &str) {
    agentsight_tests::require_root();
    let run = Run::prepare(agent, scenario);
    let (out, db) = run.run_recorded_wire();
    let id = verify(&run, out);
    assert_no_loss(&db);
    let stored = exchanges(&db);
    let log = server_requests(&run);
    let ctx = format!("{} {scenario}", agent.name());
    // Every request byte for byte, nothing more, nothing less.
    let mut by_digest: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for e in &log {
        by_digest
            .entry(e["body_sha256"].as_str().unwrap().to_string())
            .or_default()
            .push(e);
    }
    assert_eq!(
        stored.len(),
        log.len(),
        "{ctx}: exchanges stored vs requests the server got"
    );
    for x in &stored {
        assert_eq!(x.error, None, "{ctx}: exchange {}/{} failed", x.conn, x.seq);
        let (body, notes) = decode::request_body(x, &decode::Limits::default());
        assert!(notes.is_empty(), "{ctx}: request body notes {notes:?}");
        let digest = hex(&Sha256::digest(&body));
        let entry = by_digest
            .get_mut(&digest)
            .and_then(|v| v.pop())
            .unwrap_or_else(|| {
                panic!(
                    "{ctx}: a stored request the server did not get ({} bytes)",
                    body.len()
                )
            });
        let d = decode::decode(x, &decode::Limits::default()).exchange;
        assert_eq!(d.notes, Vec::<String>::new(), "{ctx}: decoding notes");
        // The streamed answer, reassembled: the text and the calls the server sent.
        if entry["kind"] == "main" && entry["fail"].is_null() {
            assert_eq!(
                d.response_text,
                entry["text"].as_str().unwrap_or(""),
                "{ctx}: answer text"
            );
            let names: Vec<&str> = d.tool_calls.iter().map(|c| c.name.as_str()).collect();
            let sent: Vec<&str> = entry["calls"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
                .unwrap_or_default();
            assert_eq!(names, sent, "{ctx}: tool calls requested");
        }
    }
    assert!(
        by_digest.values().all(Vec::is_empty),
        "{ctx}: requests the capture lacks"
    );
    // Joined to the transcript, side by side.
    let c = run.correlate(&id, &db);
    let w = &c["wire"];
    assert_eq!(w["exchanges_in_capture"], stored.len(), "{ctx}: {w}");
    let mains = log.iter().filter(|e| e["kind"] == "main").count();
    assert_eq!(
        w["turns"].as_array().unwrap().len(),
        mains,
        "{ctx}: joined turns {w}"
    );
    for k in [
        "calls_requested_not_in_transcript",
        "calls_not_requested_on_wire",
        "transcript_turns_without_exchange",
        "usage_differences",
    ] {
        assert_eq!(w[k], serde_json::json!([]), "{ctx}: {k}: {w}");
    }
    // `show` lists the model traffic: its count, the routes, one line each.
    let show = std::process::Command::new(agentsight_tests::bin())
        .args(["show", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains(&format!(
            "\nMODEL TRAFFIC (record --wire): {} exchange(s), 0 with an error\n",
            stored.len()
        )),
        "{ctx}: {text}"
    );
    let lines = text.lines().filter(|l| l.starts_with("  #")).count();
    assert_eq!(lines, stored.len(), "{ctx}: {text}");
    // The default audit passes: no model traffic went around the relay, no
    // denied content reached the model, the relay's port is declared.
    otlp_wire_spans_are_the_joined_turns(&run, &db, w, &ctx);
    report_lists_each_turn(&run, &db, w, &ctx);
    perfetto_has_a_slice_per_turn(&run, &db, w, &ctx);
    session_show_has_the_wire(&run, &id, &db, w, &ctx);
    audit_default_policy_passes(&run, &db);
}

/// `session show ID --wire DB`: the transcript with correlate's wire report
/// beside it (JSON: the same report; text: one entry per exchange).
fn session_show_has_the_wire(run: &Run, id: &str, db: &Path, w: &Value, ctx: &str) {
    let shown = run.session_show_wire(id, db);
    assert_eq!(shown["session_id"], id, "{ctx}");
    assert_eq!(&shown["wire"], w, "{ctx}");
    let text = std::process::Command::new(agentsight_tests::bin())
        .args(["session", "show", id, "--wire"])
        .arg(db)
        .arg("--home")
        .arg(&run.home)
        .output()
        .unwrap();
    assert!(
        text.status.success(),
        "{ctx}: {}",
        String::from_utf8_lossy(&text.stderr)
    );
    let text = String::from_utf8_lossy(&text.stdout);
    let (turns, hidden) = (
        w["turns"].as_array().unwrap(),
        w["not_in_transcript"].as_array().unwrap(),
    );
    let heading = format!(
        "model traffic (wire): {} exchange(s) in the capture; {} joined to this session, {} of its trees the transcript does not show, {} not model calls",
        w["exchanges_in_capture"],
        turns.len(),
        hidden.len(),
        w["not_model_calls"].as_array().unwrap().len()
    );
    assert!(
        text.lines().any(|l| l == heading),
        "{ctx}: {heading}\n{text}"
    );
    for t in turns.iter().chain(hidden) {
        let line = format!("  #{} {}  ", t["exchange"], t["time"].as_str().unwrap());
        assert!(
            text.lines().any(|l| l.starts_with(&line)),
            "{ctx}: {line}\n{text}"
        );
        let sent = format!(
            "    sent: system {} B, tools {} ({} B), history {} message(s) ({} B), request {} B",
            t["system_bytes"],
            t["tools_offered"],
            t["tools_bytes"],
            t["messages"],
            t["history_bytes"],
            t["request_bytes"]
        );
        assert!(text.lines().any(|l| l == sent), "{ctx}: {sent}\n{text}");
    }
}

/// `export --format perfetto`: one slice per model call of the session on
/// its "model calls (wire)" lanes, starting at the request's first byte
/// (the turn's time), with the exchange's ids and sizes; the trace decodes
/// whole (the PyPI decoder, `tests/perfetto/check_trace.py`).
fn perfetto_has_a_slice_per_turn(run: &Run, db: &Path, w: &Value, ctx: &str) {
    let trace = run.root.join("wire.pftrace");
    let jsonl = run.root.join("wire.jsonl");
    agentsight_tests::export_as(db, "perfetto", &trace, &[]);
    agentsight_tests::export_as(db, "jsonl", &jsonl, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("perfetto/check_trace.py");
    let out = std::process::Command::new(agentsight_tests::python::interpreter())
        .arg(script)
        .arg(&trace)
        .arg(&jsonl)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{ctx}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["errors"], serde_json::json!([]), "{ctx}: {d}");
    let slices = d["wire_slices"].as_array().unwrap();
    let turns = all_turns(w);
    assert_eq!(slices.len(), turns.len(), "{ctx}: {slices:?}");
    for t in turns {
        let s = slices
            .iter()
            .find(|s| s["exchange"] == t["exchange"])
            .unwrap_or_else(|| panic!("{ctx}: no wire slice of exchange {}", t["exchange"]));
        let wall = agentsight::clock::rfc3339_ns(s["begin_wall_ns"].as_u64().unwrap());
        assert_eq!(wall, t["time"].as_str().unwrap(), "{ctx}: {s}");
        for k in [
            "model",
            "response_id",
            "system_bytes",
            "tools_bytes",
            "history_bytes",
            "request_bytes",
            "response_bytes",
        ] {
            assert_eq!(s[k], t[k], "{ctx}: {k} of exchange {}", t["exchange"]);
        }
        let name = match t["model"].as_str() {
            Some(m) => format!("chat {m}"),
            None => "chat".to_owned(),
        };
        assert_eq!(s["name"], name.as_str());
        assert!(s["end"].as_u64().unwrap() >= s["begin"].as_u64().unwrap());
        assert!(
            s["track"]
                .as_str()
                .unwrap()
                .starts_with("model calls (wire)")
        );
    }
}

/// The report's per-turn view: one row per exchange of the session, with
/// the sizes of what was sent (system prompt, tools, history, the whole
/// request) and of what came back, as correlate joined them.
fn report_lists_each_turn(run: &Run, db: &Path, w: &Value, ctx: &str) {
    let html = agentsight_tests::report_html(db, &run.root.join("wire-report.html"));
    let (turns, hidden) = (
        w["turns"].as_array().unwrap(),
        w["not_in_transcript"].as_array().unwrap(),
    );
    let heading = format!(
        "<h3 id=\"wire-0\">Model traffic (wire): {} exchange(s) joined to this session, {} the transcript does not show</h3>",
        turns.len(),
        hidden.len()
    );
    assert!(
        html.contains(&heading),
        "{ctx}: {heading} not in the report"
    );
    for t in turns.iter().chain(hidden) {
        let n = |k: &str| t[k].as_u64().unwrap();
        let row = format!(
            "<tr id=\"wire-0-{}\"><td>{}</td>",
            t["exchange"], t["exchange"]
        );
        let sizes = format!(
            "<td>{} B</td><td>{} ({} B)</td><td>{} message(s), {} B</td><td>{} B</td><td>{} B</td>",
            n("system_bytes"),
            n("tools_offered"),
            n("tools_bytes"),
            n("messages"),
            n("history_bytes"),
            n("request_bytes"),
            n("response_bytes")
        );
        let at = html
            .find(&row)
            .or_else(|| html.find(&row.replace("<tr id", "<tr class=\"flag-wire\" id")))
            .unwrap_or_else(|| panic!("{ctx}: no row {row}"));
        let end = at + html[at..].find("</tr>").unwrap();
        assert!(
            html[at..end].contains(&sizes),
            "{ctx}: {sizes} in {}",
            &html[at..end]
        );
        assert!(n("request_bytes") > n("system_bytes"), "{ctx}: {t}");
    }
}

/// The attributes of each span of an OTLP/JSON export marked
/// `agentsight.evidence` = `wire`, keyed by name (values as the JSON has
/// them: strings, integers as strings, arrays).
/// Correlate's wire turns of the session: joined, then those the
/// transcript does not show.
fn all_turns(w: &Value) -> Vec<&Value> {
    w["turns"]
        .as_array()
        .unwrap()
        .iter()
        .chain(w["not_in_transcript"].as_array().unwrap())
        .collect()
}

fn wire_spans(export: &str) -> Vec<BTreeMap<String, Value>> {
    let mut out = Vec::new();
    for line in export.lines() {
        let req: Value = serde_json::from_str(line).unwrap();
        for rs in req["resourceSpans"].as_array().unwrap() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for span in ss["spans"].as_array().unwrap() {
                    let attrs: BTreeMap<String, Value> = span["attributes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|a| {
                            let v = a["value"].as_object().unwrap();
                            let (_, inner) = v.iter().next().unwrap();
                            (a["key"].as_str().unwrap().to_owned(), inner.clone())
                        })
                        .collect();
                    if attrs.get("agentsight.evidence") == Some(&Value::from("wire")) {
                        out.push(attrs);
                    }
                }
            }
        }
    }
    out
}

/// `export --format otlp-json` has one wire `chat` span per model call of
/// the session (joined or not), with the exchange's model, response id and
/// usage in the convention's terms (input counts the cache).
fn otlp_wire_spans_are_the_joined_turns(run: &Run, db: &Path, w: &Value, ctx: &str) {
    let out = run.root.join("wire.otlp.jsonl");
    let export = agentsight_tests::export_otlp_json(db, &out, &[]);
    let spans = wire_spans(&String::from_utf8(export).unwrap());
    let turns = all_turns(w);
    assert_eq!(spans.len(), turns.len(), "{ctx}: wire spans {spans:?}");
    for t in turns {
        let id = t["exchange"].to_string();
        let span = spans
            .iter()
            .find(|s| s["agentsight.wire.exchange"].as_str() == Some(id.as_str()))
            .unwrap_or_else(|| panic!("{ctx}: no wire span of exchange {id}"));
        let text = |k: &str| span.get(k).and_then(Value::as_str).map(str::to_owned);
        assert_eq!(
            (text("gen_ai.request.model"), text("gen_ai.response.id")),
            (
                t["model"].as_str().map(str::to_owned),
                t["response_id"].as_str().map(str::to_owned)
            ),
            "{ctx}: exchange {id}"
        );
        if let Some(u) = t["usage"].as_object() {
            let n = |k: &str| u[k].as_u64().unwrap();
            assert_eq!(
                text("gen_ai.usage.input_tokens"),
                Some((n("input") + n("cache_read") + n("cache_creation")).to_string()),
                "{ctx}: exchange {id}"
            );
        }
    }
}

#[test]
fn claude_edit_over_the_wire() {
    check_wire(Agent::Claude, "edit");
}

#[test]
fn codex_edit_over_the_wire() {
    check_wire(Agent::Codex, "edit");
}

#[test]
fn gemini_edit_over_the_wire() {
    check_wire(Agent::Gemini, "edit");
}

#[test]
fn qwen_edit_over_the_wire() {
    check_wire(Agent::Qwen, "edit_qwen");
}

#[test]
fn opencode_edit_over_the_wire() {
    check_wire(Agent::Opencode, "edit");
}

#[test]
fn copilot_edit_over_the_wire() {
    check_wire(Agent::Copilot, "edit");
}

/// The audit's findings of `rule` under the default policy.
fn findings_of(run: &Run, db: &Path, rule: &str) -> Vec<Value> {
    let (_, report) = audit_json(db, &default_policy(run));
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == rule)
        .cloned()
        .collect()
}

/// The risky scenario over the wire: the agent shows the planted
/// `~/.ssh/id_rsa`, so its content goes back to the model with the tool
/// result; `content-sent-to-model` names the file and the exchange that
/// carried all four of its lines.
fn check_risky_wire(agent: Agent, scenario: &str) {
    agentsight_tests::require_root();
    let run = Run::prepare(agent, scenario);
    let (out, db) = run.run_recorded_wire();
    verify(&run, out);
    let found = findings_of(&run, &db, "content-sent-to-model");
    let key = run.home.join(".ssh/id_rsa").display().to_string();
    assert_eq!(found.len(), 1, "{}: {found:?}", agent.name());
    let f = &found[0];
    assert_eq!(f["path"], key.as_str());
    assert_eq!(f["severity"], "error");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!("content of denied file {key} was sent to the model: 4 of its 4 identifying lines in exchange ")),
        "{msg}"
    );
    never_send_names_an_allowed_read(&run, &db, &key, msg);
}

/// The same capture under a policy that allows reading the key but lists
/// it in `[wire] never_send`: no denied-path finding, the same
/// content-sent-to-model finding with the file said to be never_send.
fn never_send_names_an_allowed_read(run: &Run, db: &Path, key: &str, denied_msg: &str) {
    let policy = run.root.join("never-send-policy.toml");
    let base = std::fs::read_to_string(default_policy(run)).unwrap();
    std::fs::write(
        &policy,
        format!("{base}[denied_paths]\nread = []\n[wire]\nnever_send = [\"~/.ssh/id_rsa\"]\n"),
    )
    .unwrap();
    let (_, report) = audit_json(db, &policy);
    let rules: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, vec!["content-sent-to-model"], "{report:#}");
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "content-sent-to-model")
        .unwrap();
    assert_eq!(f["path"], key);
    let expected = denied_msg.replacen("content of denied file", "content of never_send file", 1);
    assert_eq!(f["message"].as_str().unwrap(), expected);
}

#[test]
fn claude_risky_over_the_wire() {
    check_risky_wire(Agent::Claude, "risky");
}

#[test]
fn codex_risky_over_the_wire() {
    check_risky_wire(Agent::Codex, "risky");
}

#[test]
fn gemini_risky_over_the_wire() {
    check_risky_wire(Agent::Gemini, "risky");
}

/// A tool call that reaches the model server directly (curl to its port):
/// the kernel layer shows the connection, and the audit says the model
/// traffic bypassed the relay, naming curl.
#[test]
fn a_call_around_the_relay_is_flagged() {
    agentsight_tests::require_root();
    let run = Run::prepare(Agent::Claude, "bypass");
    let (out, db) = run.run_recorded_wire();
    // Not `verify`: the server logs curl's request as one it could not
    // answer, which a normal run never has.
    assert!(out.status.success(), "{}", out.stderr);
    let found = findings_of(&run, &db, "relay-bypass");
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(f["addr"], "127.0.0.1");
    assert_eq!(f["port"], run.model_port);
    assert!(
        f["process"]["argv"][0]
            .as_str()
            .is_some_and(|a| a.ends_with("curl")),
        "{f}"
    );
    assert!(
        f["message"].as_str().unwrap().starts_with(
            "model traffic bypassed the relay: a recorded process connected to 127.0.0.1:"
        ),
        "{f}"
    );
}
