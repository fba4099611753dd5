//! Real CLIs under `agentsight record --enforce` (issue 31): the risky
//! scenario asks each agent to show the synthetic private key planted in its
//! user's home (`cat ~/.ssh/id_rsa`). Enforced with the default policy (the
//! run's home declared, as `audit` is given it), the read is refused before it
//! happens: the key never reaches the model (no request the scripted server
//! received holds it), the `cat` failed with EPERM and the agent went on to
//! its final answer, the capture holds the denial of that read by that `cat`,
//! and `audit` marks the finding `blocked`.

use std::path::Path;

use agentsight::{
    enforce::DenialKind,
    store::{Capture, enforcement::DenialRow},
};
use agentsight_tests::{
    e2e::{Agent, Run},
    e2e_check::{audit_json, default_policy},
    require_root,
};
use serde_json::Value;

/// The key's unique line (tests/e2e/scenarios/risky.json).
const KEY_MARKER: &str = "AGS-KEY-3b9d51c7e2a4";

fn risky_is_refused(agent: Agent, scenario: &str) {
    risky_is_refused_with(agent, scenario, &[]);
}

/// [`risky_is_refused`] with more `record` options (`--wire`: the agent
/// then reaches its model through the relay, whose loopback address the
/// network rules allow as the audit declares it).
fn risky_is_refused_with(agent: Agent, scenario: &str, more: &[&str]) {
    require_root();
    let run = Run::prepare(agent, scenario);
    let policy = default_policy(&run);
    let policy_arg = policy.display().to_string();
    let args = ["--enforce", "--audit", &policy_arg];
    let (out, db) = if more == ["--wire"] {
        run.run_recorded_wire_with(&args)
    } else {
        assert!(more.is_empty(), "{more:?}");
        run.run_recorded_with(&args)
    };
    let ctx = format!("{} {scenario}: stderr {}", agent.name(), out.stderr);
    let key = run.home.join(".ssh/id_rsa").display().to_string();
    // The agent succeeded; `record --audit` then exits 1 for the audit's
    // one error finding, the refused read, marked blocked in its report.
    assert_eq!(out.status.code(), Some(1), "{ctx}");
    assert!(
        out.stderr.contains(&format!(
            "ERROR [denied-path] attempted read of denied path {key} (blocked)\n"
        )),
        "{ctx}"
    );
    assert!(
        out.stderr.contains(
            "agentsight: enforce: 1 access blocked (1 read, 0 writes, 0 execs, 0 connects, 0 sends); "
        ),
        "{ctx}"
    );
    assert!(
        out.stderr
            .contains("audit FAILED: 1 error(s), 0 warning(s), 0 note(s)"),
        "{ctx}"
    );

    model_never_saw_the_key(&run, &ctx);
    if more.contains(&"--wire") {
        // Every model call went through the relay (the agent's connects to
        // it were allowed), each one captured.
        let cap = Capture::open(&db).expect("open capture");
        let relayed = cap.reader().wire_exchanges().expect("wire").len();
        let served = run
            .server_entries()
            .iter()
            .filter(|e| e["kind"] == "main")
            .count();
        assert!(served >= 2, "{ctx}");
        assert_eq!(relayed, served, "{ctx}");
    }
    let d = the_denial(&db, &key, &ctx);
    correlate_marks_it(&run, &db, &key, &d, &ctx);
    exported(&db, &key, &d, &ctx);
    reported(&run, &db, &d, &ctx);
    otlp_event_says_blocked(&run, &db, &d, &ctx);
    audited(&db, &policy, &key, &ctx);
}

/// The model never saw the key, and was told the read failed.
fn model_never_saw_the_key(run: &Run, ctx: &str) {
    let entries = run.server_entries();
    let log = serde_json::to_string(&entries).unwrap();
    assert!(
        !log.contains(KEY_MARKER),
        "the key reached the model: {ctx}"
    );
    the_refusal_reached_the_model(
        run,
        "Operation not permitted",
        "That is your private key.",
        ctx,
    );
}

/// The last request the model server received says the call was refused
/// (`said`), and the scripted conversation ran to its final answer.
fn the_refusal_reached_the_model(run: &Run, said: &str, final_text: &str, ctx: &str) {
    // Each logged entry holds the request as the server parsed it.
    let requests: Vec<String> = run
        .server_entries()
        .iter()
        .filter(|e| e["kind"] == "main")
        .map(|e| e["request"].to_string())
        .collect();
    assert!(
        requests.last().is_some_and(|r| r.contains(said)),
        "the last request does not say the call was refused: {:?}\n{ctx}",
        requests.last()
    );
    let last = run.main_responses().last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["text"], final_text, "{ctx}");
}

/// The capture: the read by `cat`, refused by fanotify, and nothing else
/// (Claude Code's own `O_PATH` opens of the key raise no permission
/// event: they give no access to its content).
fn the_denial(db: &Path, key: &str, ctx: &str) -> DenialRow {
    let cap = Capture::open(db).expect("open capture");
    let denials = cap.reader().enforcement_denials().expect("denials");
    let cats: Vec<i64> = cap
        .processes()
        .expect("processes")
        .into_iter()
        .filter(|p| p.argv == vec!["cat".to_string(), key.to_string()])
        .map(|p| p.id)
        .collect();
    assert_eq!(cats.len(), 1, "{denials:#?}\n{ctx}");
    let by_cat: Vec<_> = denials
        .iter()
        .filter(|d| d.process_id == Some(cats[0]))
        .collect();
    assert_eq!(by_cat.len(), 1, "{denials:#?}\n{ctx}");
    let d = by_cat[0].clone();
    assert_eq!(
        (
            d.kind,
            d.path.as_str(),
            d.rule.as_str(),
            d.mechanism.as_str()
        ),
        (DenialKind::Read, key, "denied-path", "fanotify"),
        "{ctx}"
    );
    assert_eq!(denials.len(), 1, "{denials:#?}\n{ctx}");
    d
}

/// correlate: the refused read is the shell call's, marked blocked by the
/// denial's row (the agent's own tool call, whatever its name).
fn correlate_marks_it(run: &Run, db: &Path, key: &str, d: &DenialRow, ctx: &str) {
    let blocked = blocked_activities(run, db);
    assert_eq!(blocked.len(), 1, "{blocked:#?}\n{ctx}");
    assert!(blocked[0].0.is_string(), "{blocked:#?}\n{ctx}");
    assert_eq!(blocked[0].1["path"], key, "{ctx}");
    assert_eq!(
        blocked[0].1["blocked"],
        serde_json::json!({"denial_id": d.id, "rule": "denied-path", "mechanism": "fanotify"}),
        "{ctx}"
    );
}

/// `correlate`'s activities marked blocked, each with its tool call's id.
fn blocked_activities(run: &Run, db: &Path) -> Vec<(Value, Value)> {
    let id = run.sessions()[0]["session_id"]
        .as_str()
        .expect("one session")
        .to_string();
    let c = run.correlate(&id, db);
    c["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap().iter())
        .flat_map(|t| {
            let call = t["call_id"].clone();
            t["activity"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| !a["blocked"].is_null())
                .map(move |a| (call.clone(), a.clone()))
        })
        .collect()
}

/// export: one enforcement_denial record, the row's fields.
fn exported(db: &Path, key: &str, d: &DenialRow, ctx: &str) {
    let jsonl = std::process::Command::new(agentsight_tests::bin())
        .args(["export", "--format", "jsonl", "--db"])
        .arg(db)
        .output()
        .expect("export");
    assert!(jsonl.status.success(), "{ctx}");
    let records: Vec<Value> = String::from_utf8(jsonl.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "enforcement_denial")
        .collect();
    assert_eq!(records.len(), 1, "{records:#?}\n{ctx}");
    let r = &records[0];
    assert_eq!(
        (
            &r["denial_id"],
            &r["access"],
            &r["path"],
            &r["pid"],
            &r["process_id"],
            &r["rule"],
            &r["mechanism"],
            &r["mono_ns"]
        ),
        (
            &Value::from(d.id),
            &Value::from("read"),
            &Value::from(key),
            &Value::from(d.pid),
            &Value::from(d.process_id),
            &Value::from("denied-path"),
            &Value::from("fanotify"),
            &Value::from(d.mono_ns)
        ),
        "{ctx}"
    );
    assert!(r["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{ctx}");
}

/// report: the Enforcement section lists the denial, and the shell call's
/// refused read links to it.
fn reported(run: &Run, db: &Path, d: &DenialRow, ctx: &str) {
    let html = agentsight_tests::report_html(db, &run.root.join("report.html"));
    for want in [
        "<section id=\"enforcement\"><h2>Enforcement: 1 blocked</h2>".to_string(),
        format!("<tr id=\"denial-{}\">", d.id),
        format!(
            "href=\"#denial-{}\">blocked: denied-path (fanotify)</a>",
            d.id
        ),
    ] {
        assert!(html.contains(&want), "{want} not in the report\n{ctx}");
    }
}

/// OTLP: the refused read is one span event, with the denial's attributes.
fn otlp_event_says_blocked(run: &Run, db: &Path, d: &DenialRow, ctx: &str) {
    let out = run.root.join("otlp.jsonl");
    let export = agentsight_tests::export_otlp_json(db, &out, &[]);
    let mut blocked = Vec::new();
    for line in String::from_utf8(export).unwrap().lines() {
        let req: Value = serde_json::from_str(line).unwrap();
        let spans = req["resourceSpans"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|rs| rs["scopeSpans"].as_array().unwrap())
            .flat_map(|ss| ss["spans"].as_array().unwrap());
        for ev in spans.flat_map(|s| s["events"].as_array().unwrap()) {
            let attrs: Vec<(String, Value)> = ev["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| {
                    a["key"]
                        .as_str()
                        .is_some_and(|k| k.starts_with("agentsight.enforcement."))
                })
                .map(|a| (a["key"].as_str().unwrap().to_owned(), a["value"].clone()))
                .collect();
            if !attrs.is_empty() {
                blocked.push(attrs);
            }
        }
    }
    // intValue is a string in OTLP JSON.
    let want = vec![vec![
        (
            "agentsight.enforcement.blocked".to_string(),
            serde_json::json!({"boolValue": true}),
        ),
        (
            "agentsight.enforcement.denial_id".to_string(),
            serde_json::json!({"intValue": d.id.to_string()}),
        ),
        (
            "agentsight.enforcement.rule".to_string(),
            serde_json::json!({"stringValue": "denied-path"}),
        ),
        (
            "agentsight.enforcement.mechanism".to_string(),
            serde_json::json!({"stringValue": "fanotify"}),
        ),
    ]];
    assert_eq!(blocked, want, "{ctx}");
}

/// The audit: the denied read by `cat` is its one error finding, blocked.
fn audited(db: &Path, policy: &Path, key: &str, ctx: &str) {
    let (_, report) = audit_json(db, policy);
    let findings = report["findings"].as_array().unwrap();
    let errors = findings.iter().filter(|f| f["severity"] == "error").count();
    assert_eq!(errors, 1, "{findings:#?}\n{ctx}");
    let by_cat = findings
        .iter()
        .find(|f| {
            f["rule"] == "denied-path" && f["process"]["argv"] == serde_json::json!(["cat", key])
        })
        .unwrap_or_else(|| panic!("no finding for the cat: {findings:#?}\n{ctx}"));
    assert_eq!(by_cat["blocked"], true, "{by_cat:#?}\n{ctx}");
    assert_eq!(by_cat["severity"], "error", "{ctx}");
}

/// One test per agent: `$name` runs `$check(Agent::$agent, $scenario)`.
macro_rules! per_agent {
    ($check:ident => $($name:ident: $agent:ident, $scenario:literal;)*) => {
        $(
            #[test]
            fn $name() {
                $check(Agent::$agent, $scenario);
            }
        )*
    };
}

per_agent! {
    risky_is_refused =>
    claude_risky_read_is_refused: Claude, "risky";
    codex_risky_read_is_refused: Codex, "risky";
    gemini_risky_read_is_refused: Gemini, "risky";
    copilot_risky_read_is_refused: Copilot, "risky";
    opencode_risky_read_is_refused: Opencode, "risky";
    qwen_risky_read_is_refused: Qwen, "risky_qwen";
}

/// The network scenario (the agent runs `curl` to a local status page)
/// under a policy that allows `curl` but does not declare the page's port:
/// the connect is refused in the kernel (EPERM) before any packet, the page
/// is never requested, the agent goes on to its final answer, the capture
/// holds that one refusal, by that `curl`, and the audit's one error is its
/// `network-undeclared` finding, blocked.
fn undeclared_connect_is_refused(agent: Agent) {
    require_root();
    let run = Run::prepare(agent, "network");
    let policy = run.root.join("network-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "home = {:?}\n[executables]\ndeny = [\"wget\", \"nc\", \"sudo\"]\n[network]\nallow = [\"127.0.0.1:{}\"]\n",
            run.home.display().to_string(),
            run.model_port
        ),
    )
    .unwrap();
    let policy_arg = policy.display().to_string();
    let (out, db) = run.run_recorded_with(&["--enforce", "--audit", &policy_arg]);
    let ctx = format!("{} network: stderr {}", agent.name(), out.stderr);
    assert_eq!(out.status.code(), Some(1), "{ctx}");
    let dest = format!("127.0.0.1:{}", run.target_port);
    assert!(
        out.stderr.contains(
            "agentsight: enforce: 1 access blocked (0 reads, 0 writes, 0 execs, 1 connect, 0 sends); "
        ),
        "{ctx}"
    );
    // The page was never requested; the conversation ran to its end.
    let entries = run.server_entries();
    assert!(
        !entries.iter().any(|e| e["kind"] == "target"),
        "the target was reached: {ctx}"
    );
    let last = run.main_responses().last().cloned().unwrap_or(Value::Null);
    assert_eq!(
        last["text"], "The status page says agentsight-e2e-target-ok.",
        "{ctx}"
    );
    // The capture: the one refusal, by the curl.
    let cap = Capture::open(&db).expect("open capture");
    let curls: Vec<i64> = cap
        .processes()
        .expect("processes")
        .into_iter()
        .filter(|p| p.argv.first().map(String::as_str) == Some("curl"))
        .map(|p| p.id)
        .collect();
    assert_eq!(curls.len(), 1, "{ctx}");
    let denials = cap.reader().enforcement_denials().expect("denials");
    let got: Vec<_> = denials
        .iter()
        .map(|d| {
            (
                d.kind,
                d.target(),
                d.process_id,
                d.rule.as_str(),
                d.mechanism.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(
            DenialKind::Connect,
            dest.clone(),
            Some(curls[0]),
            "network-undeclared",
            "cgroup-bpf"
        )],
        "{ctx}"
    );
    // correlate: the refused connect is the shell call's activity, blocked.
    let blocked = blocked_activities(&run, &db);
    assert_eq!(blocked.len(), 1, "{blocked:#?}\n{ctx}");
    assert!(blocked[0].0.is_string(), "{blocked:#?}\n{ctx}");
    assert_eq!(
        blocked[0].1["blocked"],
        serde_json::json!({"denial_id": denials[0].id, "rule": "network-undeclared", "mechanism": "cgroup-bpf"}),
        "{blocked:#?}\n{ctx}"
    );
    // The audit: one error, the curl's connect, blocked.
    let (_, report) = audit_json(&db, &policy);
    let findings = report["findings"].as_array().unwrap();
    let errors: Vec<&Value> = findings
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    assert_eq!(errors.len(), 1, "{findings:#?}\n{ctx}");
    let f = errors[0];
    assert_eq!(
        (
            f["rule"].as_str(),
            f["blocked"].as_bool(),
            f["process"]["argv"][0].as_str()
        ),
        (Some("network-undeclared"), Some(true), Some("curl")),
        "{f:#?}\n{ctx}"
    );
    assert_eq!(
        f["message"].as_str().unwrap_or_default(),
        format!("connect to undeclared loopback destination {dest} (failed: EPERM)"),
        "{ctx}"
    );
}

#[test]
fn claude_risky_read_is_refused_through_the_relay() {
    risky_is_refused_with(Agent::Claude, "risky", &["--wire"]);
}

#[test]
fn claude_undeclared_connect_is_refused() {
    undeclared_connect_is_refused(Agent::Claude);
}

#[test]
fn codex_undeclared_connect_is_refused() {
    undeclared_connect_is_refused(Agent::Codex);
}

#[test]
fn gemini_undeclared_connect_is_refused() {
    undeclared_connect_is_refused(Agent::Gemini);
}

/// The escape scenario (the agent's shell writes `~/agent-note.txt`, in
/// the home, outside the workspace) under a policy whose writes are the
/// default ones without `/tmp` (the run's home, workspace and TMPDIR live
/// there) and with the run's TMPDIR declared: Landlock refuses the
/// redirection (EACCES), the note never exists, the agent goes on to its
/// final answer, and the capture's one denial is that write, by the shell,
/// `write-outside-allowed`, `landlock` — none of the agent's own writes to
/// its state (`~/.claude.json` and its temporary copies, `~/.codex`,
/// `~/.gemini`, …) was refused — with its blocked finding.
fn escape_write_is_refused(agent: Agent, scenario: &str) {
    require_root();
    let run = Run::prepare(agent, scenario);
    let policy = run.root.join("writes-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "home = {:?}\nworkspace = {:?}\n[writes]\nallow = [\
             \"${{workspace}}/**\", {:?}, \"/dev/null\", \"/dev/tty\", \"/dev/pts/*\", \
             \"/dev/shm/**\", \"/proc/self/**\", \"/proc/thread-self/**\", \"~/.claude/**\", \
             \"~/.claude.json\", \"~/.claude.json.*\", \"~/.codex/**\", \"~/.gemini/**\", \
             \"~/.cursor/**\", \"~/.cache/**\", \"~/.copilot/**\", \"~/.qwen/**\", \
             \"~/.local/share/opencode/**\", \"~/.local/state/opencode/**\", \
             \"~/.config/opencode/**\", \"/proc/*/oom_score_adj\"]\n\
             [network]\nallow = [\"127.0.0.1:{}\"]\n",
            run.home.display().to_string(),
            run.work.display().to_string(),
            format!("{}/**", run.tmp.display()),
            run.model_port
        ),
    )
    .unwrap();
    let policy_arg = policy.display().to_string();
    let (out, db) = run.run_recorded_with(&["--enforce", "--audit", &policy_arg]);
    let ctx = format!("{} escape: stderr {}", agent.name(), out.stderr);
    let note = run.home.join("agent-note.txt");
    assert!(!note.exists(), "{ctx}");
    let cap = Capture::open(&db).unwrap();
    let rows = cap.reader().enforcement_denials().unwrap();
    let got: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.kind,
                r.path.clone(),
                r.rule.as_str(),
                r.mechanism.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [(
            DenialKind::Write,
            note.display().to_string(),
            "write-outside-allowed",
            "landlock"
        )],
        "{ctx}"
    );
    // correlate: the refused write is the shell call's activity, blocked.
    let blocked = blocked_activities(&run, &db);
    assert_eq!(blocked.len(), 1, "{blocked:#?}\n{ctx}");
    assert!(blocked[0].0.is_string(), "{blocked:#?}\n{ctx}");
    assert_eq!(blocked[0].1["path"], note.display().to_string(), "{ctx}");
    assert_eq!(
        blocked[0].1["blocked"],
        serde_json::json!({"denial_id": rows[0].id, "rule": "write-outside-allowed", "mechanism": "landlock"}),
        "{blocked:#?}\n{ctx}"
    );
    // Claude Code saves `~/.claude.json` through a sibling temporary file
    // (`~/.claude.json.tmp.PID.HEX`, allowed by the policy): Landlock cannot
    // grant such names without all of the home, so those creates are
    // refused, counted apart and named, never denials nor findings.
    let meta = cap.reader().enforcement_meta().unwrap().unwrap();
    let tmp_prefix = format!("{}.tmp.", run.home.join(".claude.json").display());
    if agent == Agent::Claude {
        assert!(meta.refused_allowed >= 1, "{meta:?}\n{ctx}");
        assert!(
            meta.refused_allowed_paths
                .iter()
                .all(|p| p.starts_with(&tmp_prefix)),
            "{meta:?}\n{ctx}"
        );
    } else {
        assert_eq!(meta.refused_allowed, 0, "{meta:?}\n{ctx}");
    }
    // The agent went on to its final answer; the audit's one error is the
    // refused write, blocked.
    assert_eq!(out.status.code(), Some(1), "{ctx}");
    assert!(
        out.stderr.contains(&format!(
            "ERROR [write-outside-allowed] attempted write outside the allowed roots: {} (refused by landlock) (blocked)\n",
            note.display()
        )),
        "{ctx}"
    );
    assert!(
        out.stderr.contains(
            "agentsight: enforce: 1 access blocked (0 reads, 1 write, 0 execs, 0 connects, 0 sends); "
        ),
        "{ctx}"
    );
    the_refusal_reached_the_model(
        &run,
        "Permission denied",
        "The note could not be written: permission denied.",
        &ctx,
    );
}

per_agent! {
    escape_write_is_refused =>
    claude_write_outside_is_refused: Claude, "escape";
    codex_write_outside_is_refused: Codex, "escape";
    gemini_write_outside_is_refused: Gemini, "escape";
    copilot_write_outside_is_refused: Copilot, "escape";
    opencode_write_outside_is_refused: Opencode, "escape";
    qwen_write_outside_is_refused: Qwen, "escape_qwen";
}
