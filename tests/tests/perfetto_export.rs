//! `agentsight export --format perfetto` on captures of real Claude Code and
//! Codex runs (the scripted model server's `parallel` scenario: three tool
//! calls in one turn), decoded by the PyPI `perfetto` package's own protobuf
//! definitions (`tests/perfetto/check_trace.py`): every invariant the
//! checker knows holds, and the counts equal the capture's own tables and
//! `correlate --json`'s attribution.

use std::{collections::BTreeSet, path::Path, process::Command};

use agentsight_tests::{
    bin,
    e2e::{Agent, Run},
    open, python,
};
use serde_json::{Value, json};

fn agentsight(args: &[&str]) {
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "agentsight {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The checker's view of `trace`, compared with the jsonl export.
fn decode(trace: &Path, jsonl: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("perfetto/check_trace.py");
    let out = Command::new(python::interpreter())
        .arg(script)
        .arg(trace)
        .arg(jsonl)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Per timed call (tool_index → flows): a flow to each process whose exec
/// is attributed to it, and one to each other attributed event of a
/// process it did not start.
fn expected_flows(correlation: &Value) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for t in correlation["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap())
    {
        if t["start"].is_null() {
            continue;
        }
        let acts = t["activity"].as_array().unwrap();
        let started: BTreeSet<i64> = acts
            .iter()
            .filter(|a| a["op"] == "exec")
            .map(|a| a["process_id"].as_i64().unwrap())
            .collect();
        let others = acts
            .iter()
            .filter(|a| !started.contains(&a["process_id"].as_i64().unwrap()))
            .count();
        out.push((t["tool_index"].clone(), json!(started.len() + others)));
    }
    out
}

#[test]
fn a_real_claude_run_exports_a_trace_that_decodes_whole() {
    check(Agent::Claude, "claude");
}

#[test]
fn a_real_codex_run_exports_a_trace_that_decodes_whole() {
    check(Agent::Codex, "codex");
}

/// Records `agent` through the `parallel` scenario, exports the capture as
/// a trace and as jsonl, and checks the decoded trace against the capture.
fn check(agent: Agent, provider: &str) {
    agentsight_tests::require_root();
    let run = Run::prepare(agent, "parallel");
    let (out, db) = run.run_recorded();
    assert!(out.status.success(), "{}", out.stderr);
    let conn = open(&db);
    let id: String = conn
        .query_row("SELECT session_id FROM sessions", [], |r| r.get(0))
        .unwrap();
    let correlation = run.correlate(&id, &db);
    let trace = run.server_dir.join("run.pftrace");
    let jsonl = run.server_dir.join("run.jsonl");
    let db_s = db.display().to_string();
    agentsight(&[
        "export",
        "--db",
        &db_s,
        "--format",
        "perfetto",
        "-o",
        &trace.display().to_string(),
    ]);
    agentsight(&[
        "export",
        "--db",
        &db_s,
        "--format",
        "jsonl",
        "-o",
        &jsonl.display().to_string(),
    ]);
    let d = decode(&trace, &jsonl);
    assert_eq!(d["errors"], json!([]), "{d}");
    assert_eq!(d["sequence_ids"], json!([1]));
    assert_eq!(d["primary_clocks"], json!([3]));

    // Every event once, in the jsonl export's order, at its times.
    let events: i64 = conn
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(events > 100, "{events} events");
    assert_eq!(d["jsonl_events"], events);
    assert_eq!(d["jsonl_mismatch_count"], 0, "{}", d["jsonl_mismatches"]);
    let anchors: i64 = conn
        .query_row("SELECT COUNT(*) FROM clock_anchors", [], |r| r.get(0))
        .unwrap();
    assert_eq!(d["clock_snapshots"], anchors);

    processes_match(&conn, &d);
    calls_match(&d, &correlation, &format!("{provider} session {id}"));
}

/// One process track per process row, each (pid, start) its own, and the
/// ProcessTree's parents are the capture's (as fork recorded them).
fn processes_match(conn: &rusqlite::Connection, d: &Value) {
    let mut st = conn
        .prepare(
            "SELECT p.pid, p.start_mono_ns, q.pid FROM processes p LEFT JOIN processes q ON q.id = p.parent_id
             ORDER BY p.start_mono_ns, p.id",
        )
        .unwrap();
    let procs: Vec<(i64, i64, Option<i64>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let tracks: Vec<(i64, i64)> = d["process_tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t[0].as_i64().unwrap(), t[1].as_i64().unwrap()))
        .collect();
    let mut want: Vec<(i64, i64)> = procs.iter().map(|p| (p.0, p.1)).collect();
    want.sort();
    assert_eq!(tracks, want);
    assert_eq!(d["track_kinds"]["process"], procs.len());
    assert_eq!(d["slices"]["process"], procs.len());
    let mut tree: Vec<(i64, Option<i64>)> = d["process_tree"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pid"].as_i64().unwrap(), p["ppid"].as_i64()))
        .collect();
    let mut want_tree: Vec<(i64, Option<i64>)> = procs.iter().map(|p| (p.0, p.2)).collect();
    tree.sort();
    want_tree.sort();
    assert_eq!(tree, want_tree);
}

/// One session track; a slice per timed tool call, with the flows
/// correlate's attribution implies; no loss.
fn calls_match(d: &Value, correlation: &Value, session_track: &str) {
    assert_eq!(d["track_kinds"]["session"], 1);
    assert!(
        d["track_names"]
            .as_array()
            .unwrap()
            .contains(&json!(session_track))
    );
    assert!(
        d["track_names"]
            .as_array()
            .unwrap()
            .contains(&json!("loss: none")),
        "{}",
        d["track_names"]
    );
    let calls = expected_flows(correlation);
    assert_eq!(calls.len(), 3, "{correlation}");
    let mut slices: Vec<(Value, Value)> = d["tool_slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tool_index"].clone(), t["flows"].clone()))
        .collect();
    slices.sort_by_key(|s| s.0.as_i64());
    assert_eq!(slices, calls);
    let flows: i64 = calls.iter().map(|c| c.1.as_i64().unwrap()).sum();
    assert!(flows >= 2, "the shell calls' processes: {calls:?}");
    assert_eq!(d["flows"], flows);
}

/// A binary trace never goes to stdout: without `-o` the export stops
/// before reading anything, with one line and status 2; a file that is not
/// a capture leaves no trace file behind.
#[test]
fn perfetto_refuses_bad_arguments_in_one_line() {
    let out = Command::new(bin())
        .args(["export", "--db", "/nonexistent.db", "--format", "perfetto"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "agentsight: error: --format perfetto writes a binary trace: give -o FILE\n"
    );
    let dir = agentsight_tests::scratch("perfetto-bad");
    let db = dir.join("not-a-capture.db");
    std::fs::write(&db, "not a capture\n").unwrap();
    let trace = dir.join("t.pftrace");
    let out = Command::new(bin())
        .arg("export")
        .arg("--db")
        .arg(&db)
        .args(["--format", "perfetto", "-o"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not-a-capture.db"), "{err}");
    assert!(!trace.exists());
}
