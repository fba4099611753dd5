//! Synthetic captures with known ground truth, exported and decoded by the
//! PyPI `perfetto` package's own protobuf definitions
//! (`tests/perfetto/check_trace.py`, run with the pinned venv that `cargo
//! xtask setup` installs): pid reuse, overlapping and untimed tool calls, a
//! call with no result, a process still running at the end, sequence gaps,
//! kernel loss and an unfinished capture.

use std::{path::Path, process::Command};

use serde_json::{Value as Json, json};

use crate::{
    sessions::{
        AgentSession, LlmResponse, PathAccess, Prompt, Provider, TokenUsage, ToolCategory,
        ToolEvent, ToolPath, ToolStatus,
    },
    store::{
        Capture,
        meta::key,
        sessions::{BindingRow, TreeRow},
        synthetic::{EventDetail, EventRow, ProcessRow, SyntheticCapture},
    },
};

/// The venv `cargo xtask setup` installs (tests/src/python.rs names it too).
const PYTHON: &str = "/var/cache/agentsight-e2e/python/bin/python3";
const CHECKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/perfetto/check_trace.py"
);

const S: i64 = 1_000_000_000;
const MONO0: i64 = 1000 * S;
/// A whole millisecond, so transcript times convert exactly.
const WALL0: i64 = 1_800_000_000_000_000_000;
/// The second anchor's wall clock runs 5 µs ahead of the first's.
const DRIFT: i64 = 5_000;

fn ms(mono: i64) -> i64 {
    (WALL0 + mono - MONO0) / 1_000_000
}

/// (row id, pid, parent row, argv, start, end, exit code)
type ProcRow = (
    i64,
    i64,
    Option<i64>,
    &'static [&'static str],
    i64,
    Option<i64>,
    Option<i64>,
);

const PROCS: [ProcRow; 5] = [
    (
        1,
        100,
        None,
        &["node", "/usr/lib/claude/cli.js"],
        MONO0,
        Some(MONO0 + 20 * S),
        Some(0),
    ),
    (
        2,
        200,
        Some(1),
        &["bash", "-c", "echo hi"],
        MONO0 + 2 * S,
        Some(MONO0 + 2 * S + S / 2),
        Some(0),
    ),
    // pid 200 again: a new process, so a new track.
    (
        3,
        200,
        Some(1),
        &["bash", "-c", "ls /w"],
        MONO0 + 5 * S,
        Some(MONO0 + 5 * S + S / 5),
        Some(1),
    ),
    (
        4,
        300,
        Some(3),
        &["ls", "/w"],
        MONO0 + 5 * S + S / 20,
        Some(MONO0 + 5 * S + S / 10),
        Some(1),
    ),
    // Still running when the capture ended.
    (
        5,
        400,
        Some(1),
        &["sleep", "100"],
        MONO0 + 15 * S,
        None,
        None,
    ),
];

fn tool(name: &str, cmd: Option<&str>, start: Option<i64>, end: Option<i64>) -> ToolEvent {
    ToolEvent {
        prompt_index: Some(0),
        subagent: None,
        name: name.into(),
        category: if name == "Bash" {
            ToolCategory::Shell
        } else {
            ToolCategory::Edit
        },
        call_id: Some(format!("toolu_{name}_{}", start.unwrap_or(0))),
        command: cmd.map(str::to_owned),
        command_truncated: false,
        cwd: Some("/w".into()),
        status: if end.is_some() {
            ToolStatus::Ok
        } else {
            ToolStatus::Unknown
        },
        exit_code: None,
        start_ms: start.map(ms),
        end_ms: end.map(ms),
        paths: Vec::new(),
        domains: Vec::new(),
        mcp: None,
    }
}

fn session() -> AgentSession {
    let mut s = AgentSession::new(
        Provider::Claude,
        "s-1".into(),
        "/h/.claude/projects/-w/s-1.jsonl".into(),
    );
    s.cwd = Some("/w".into());
    s.start_ms = Some(ms(MONO0 + S));
    s.end_ms = Some(ms(MONO0 + 19 * S));
    s.prompts = vec![
        Prompt::new(0, Some(ms(MONO0 + S + S / 2)), "say hi".into()),
        Prompt::new(1, Some(ms(MONO0 + 5 * S - S / 10)), "list and write".into()),
    ];
    s.responses = vec![LlmResponse {
        prompt_index: Some(0),
        subagent: None,
        ts_ms: Some(ms(MONO0 + S + S * 8 / 10)),
        model: Some("claude-test".into()),
        native_id: Some("msg_1".into()),
        request_id: None,
        phase: None,
        text: String::new(),
        text_truncated: false,
        tokens: Some(TokenUsage::new(10, 20, 30, 40, 0)),
    }];
    let mut write = tool(
        "Write",
        None,
        Some(MONO0 + 5 * S + S / 10),
        Some(MONO0 + 5 * S + S * 4 / 10),
    );
    write.paths = vec![ToolPath::new("/w/a.txt", PathAccess::Write)];
    s.tools = vec![
        tool(
            "Bash",
            Some("echo hi"),
            Some(MONO0 + 2 * S - S / 100),
            Some(MONO0 + 2 * S + S * 6 / 10),
        ),
        // Overlaps the Write below: two lanes.
        tool(
            "Bash",
            Some("ls /w"),
            Some(MONO0 + 5 * S - S / 100),
            Some(MONO0 + 5 * S + S * 3 / 10),
        ),
        write,
        // The transcript gives no time: no slice.
        tool("Read", None, None, None),
        // No result recorded: it ends with the session.
        tool(
            "Bash",
            Some("sleep 100"),
            Some(MONO0 + 15 * S - S / 100),
            None,
        ),
    ];
    s.prompt_count = 2;
    s.response_count = 1;
    s.tool_count = s.tools.len();
    s
}

/// The events of the synthetic run: (process row, mono, kind, path).
fn events() -> Vec<(i64, i64, &'static str, Option<&'static str>)> {
    vec![
        (
            1,
            MONO0 + S / 10,
            "openat",
            Some("/h/.claude/projects/-w/s-1.jsonl"),
        ),
        (1, MONO0 + S / 5, "connect", None),
        // A DNS query: its name is annotated.
        (1, MONO0 + S / 5 + 1000, "sendto", None),
        (1, MONO0 + 2 * S, "fork", None),
        (2, MONO0 + 2 * S + S / 100, "exec", None),
        (2, MONO0 + 2 * S + S / 2, "exit", None),
        (1, MONO0 + 5 * S, "fork", None),
        (3, MONO0 + 5 * S + S / 100, "exec", None),
        (3, MONO0 + 5 * S + S / 20, "fork", None),
        (4, MONO0 + 5 * S + S / 20 + 1000, "exec", None),
        (4, MONO0 + 5 * S + S / 10, "exit", None),
        // The Write, done by the agent itself: path_match.
        (1, MONO0 + 5 * S + S * 2 / 10, "openat", Some("/w/a.txt")),
        (3, MONO0 + 5 * S + S / 5, "exit", None),
        // After the second anchor: its offset applies.
        (
            1,
            MONO0 + 12 * S,
            "openat",
            Some("/h/.claude/projects/-w/s-1.jsonl"),
        ),
        (1, MONO0 + 15 * S, "fork", None),
        (5, MONO0 + 15 * S + S / 100, "exec", None),
    ]
}

/// Writes the synthetic capture; `complete` and loss as given.
fn write_capture(path: &Path, with_session: bool, complete: bool) {
    let mut cap = SyntheticCapture::create(path, &path.display().to_string());
    cap.anchor("start", MONO0, WALL0);
    cap.anchor("periodic", MONO0 + 10 * S, WALL0 + 10 * S + DRIFT);
    for (id, pid, parent, argv, start, end, code) in PROCS {
        cap.process(&ProcessRow {
            id,
            pid,
            start_mono_ns: start,
            parent: parent.map(|p| (p, PROCS[p as usize - 1].1)),
            comm: argv[0],
            argv,
            cwd: Some("/w"),
            exec_count: 1,
            exit_code: code,
            ..Default::default()
        });
        if let Some(end) = end {
            cap.end_process(id, end);
        }
    }
    for (row, mono, kind, path) in events() {
        let (_, pid, parent, argv, ..) = PROCS[row as usize - 1];
        let ppid = parent.map(|p| PROCS[p as usize - 1].1).unwrap_or(1);
        let wall = if mono >= MONO0 + 10 * S {
            WALL0 + mono - MONO0 + DRIFT
        } else {
            WALL0 + mono - MONO0
        };
        let (addr, port) = match kind {
            "connect" => (Some("127.0.0.1"), Some(443)),
            "sendto" => (Some("127.0.0.53"), Some(53)),
            _ => (None, None),
        };
        let event = EventRow {
            mono_ns: mono,
            wall_ns: wall,
            kind,
            pid,
            ppid,
            process_id: Some(row),
            comm: Some(argv[0]),
            argv: (kind == "exec").then_some(argv),
            path,
            flags: (kind == "openat").then_some("write,create,trunc"),
            family: addr.map(|_| "ipv4"),
            addr,
            port,
            ..Default::default()
        };
        let detail = EventDetail {
            query: (kind == "sendto").then_some("api.example.com"),
            ..Default::default()
        };
        cap.event_with(&event, &detail);
    }
    if !complete {
        cap.gap(0, 1, 10..=12, MONO0 + 8 * S, MONO0 + 8 * S + 1000);
        cap.loss("syscall", 2);
    }
    cap.meta(key::COMPLETE, if complete { "true" } else { "false" });
    if with_session {
        bind(&cap, &session());
    }
    cap.create_indexes();
}

fn bind(cap: &SyntheticCapture, session: &AgentSession) {
    let row = cap.session(session);
    let tree = cap.tree(&TreeRow {
        id: 0,
        root_process_id: 1,
        root_pid: 100,
        root_start_mono_ns: MONO0,
        status: "bound".into(),
        note: None,
    });
    cap.binding(&BindingRow {
        tree_id: tree,
        session_row: row,
        evidence: "transcript_write".into(),
        evidence_count: 2,
        evidence_process_id: Some(1),
        evidence_path: Some("/h/.claude/projects/-w/s-1.jsonl".into()),
        first_evidence_mono_ns: Some(MONO0 + S / 10),
        from_mono_ns: MONO0,
        to_mono_ns: None,
    });
}

/// Exports `db` as a trace and as jsonl; decodes both with the checker.
fn decode(db: &Path) -> (super::Exported, Json) {
    decode_with(db, true, false)
}

/// [`decode`], redacted or not, the checker listing every text with `texts`.
fn decode_with(db: &Path, redact: bool, texts: bool) -> (super::Exported, Json) {
    let cap = Capture::open(db).unwrap();
    let trace = db.with_extension("pftrace");
    let jsonl = db.with_extension("jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&trace).unwrap());
    let exported = super::export(&cap, &mut out, redact).unwrap();
    drop(out);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&jsonl).unwrap());
    crate::views::export::jsonl(&cap, &mut out).unwrap();
    drop(out);
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run `cargo xtask setup` (it installs the export decoders)"
    );
    let run = Command::new(PYTHON)
        .arg(CHECKER)
        .args(texts.then_some("--texts"))
        .arg(&trace)
        .arg(&jsonl)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    (exported, serde_json::from_slice(&run.stdout).unwrap())
}

#[test]
fn a_synthetic_run_decodes_with_every_invariant() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    write_capture(&db, true, false);
    let (exported, d) = decode(&db);
    assert_eq!(d["errors"], json!([]), "{d}");
    assert_eq!(d["sequence_ids"], json!([1]));
    assert_eq!(d["primary_clocks"], json!([3]));
    assert_eq!(d["clock_snapshots"], 2);
    // Every event, in order, at its mono_ns and (through the snapshots) at
    // the jsonl export's wall time, the drifted anchor included.
    assert_eq!(
        (d["jsonl_events"].clone(), d["jsonl_mismatch_count"].clone()),
        (json!(16), json!(0)),
        "{d}"
    );
    assert_eq!(exported.events, 16);
    assert_eq!(d["queries"], json!(["api.example.com"]));
    // pid 200 twice: two process tracks.
    assert_eq!(
        d["process_tracks"],
        json!([
            [100, MONO0, "node"],
            [200, MONO0 + 2 * S, "bash"],
            [200, MONO0 + 5 * S, "bash"],
            [300, MONO0 + 5 * S + S / 20, "ls"],
            [400, MONO0 + 15 * S, "sleep"]
        ])
    );
    assert_eq!(
        d["track_kinds"],
        json!({"session": 1, "lane": 2, "process": 5, "tree": 6, "loss": 1, "no_process": 1})
    );
    // Four timed calls (the untimed Read has none), two prompts, a
    // lifetime per process on its track and in the tree.
    assert_eq!(
        d["slices"],
        json!({"lane": 4, "session": 2, "process": 5, "tree": 5})
    );
    let tools: Vec<(Json, Json)> = d["tool_slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tool_index"].clone(), t["flows"].clone()))
        .collect();
    // Flows: echo → its bash; ls → its bash and the ls it forked; the
    // Write → the agent's own open of /w/a.txt; sleep → its process.
    assert_eq!(
        tools,
        vec![
            (json!(0), json!(1)),
            (json!(1), json!(2)),
            (json!(2), json!(1)),
            (json!(4), json!(1))
        ]
    );
    assert_eq!(d["flows"], 5);
    // Paths are interned; they decode to the events' own.
    assert_eq!(
        d["paths"],
        json!(["/h/.claude/projects/-w/s-1.jsonl", "/w/a.txt"])
    );
    // Attributed: the two bash, ls, sleep execs and the Write's open.
    assert_eq!(d["attributed_events"], 5);
    assert_eq!(d["flow_ends_on_events"], 1);
    assert_eq!(
        (
            exported.counts.tool_slices,
            exported.counts.untimed_tools,
            exported.counts.flows
        ),
        (4, 1, 5)
    );
    // The ProcessTree's parents are the capture's.
    let tree: Vec<(Json, Json)> = d["process_tree"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pid"].clone(), p["ppid"].clone()))
        .collect();
    assert_eq!(
        tree,
        vec![
            (json!(100), Json::Null),
            (json!(200), json!(100)),
            (json!(200), json!(100)),
            (json!(300), json!(200)),
            (json!(400), json!(100))
        ]
    );
    // The process still running ends at the capture's end, and says so.
    let last = &d["process_slices"][4];
    assert_eq!(
        (
            last["pid"].clone(),
            last["end"].clone(),
            last["running"].clone()
        ),
        (json!(400), json!(MONO0 + 20 * S), json!(true))
    );
    assert_eq!(d["process_slices"][2]["exit_code"], 1);
    // Loss: the gap, the kernel's count, the unfinished capture.
    assert_eq!(d["instants"]["loss"], 3);
    assert_eq!(
        d["track_names"],
        json!([
            "claude session s-1",
            "loss: 5 records, and UNKNOWN after the last stored record (incomplete)"
        ])
    );
    assert_eq!(d["instants"]["session"], 1);
}

#[test]
fn a_capture_without_sessions_has_processes_and_no_loss() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("plain.db");
    write_capture(&db, false, true);
    let (exported, d) = decode(&db);
    assert_eq!(d["errors"], json!([]), "{d}");
    assert_eq!(d["jsonl_mismatch_count"], 0);
    assert_eq!(
        d["track_kinds"],
        json!({"process": 5, "tree": 6, "loss": 1, "no_process": 1})
    );
    assert_eq!(d["track_names"], json!(["loss: none"]));
    assert_eq!(d["flows"], 0);
    assert_eq!(exported.counts.sessions, 0);
    // Two exports of one capture are byte for byte the same.
    let first = std::fs::read(db.with_extension("pftrace")).unwrap();
    decode(&db);
    assert_eq!(std::fs::read(db.with_extension("pftrace")).unwrap(), first);
}

/// Planted secrets: the agent passes keys through `env` and options, its
/// tool's argv carries a header, URL credentials and key formats, the
/// transcript has that command and a key in the prompt.
fn write_secret_capture(path: &Path) {
    use crate::views::redact::planted::{agent_argv, tool_argv};
    let mut cap = SyntheticCapture::create(path, &path.display().to_string());
    cap.anchor("start", MONO0, WALL0);
    for (id, parent, argv) in [(1, None, agent_argv()), (2, Some((1, 100)), tool_argv())] {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let start = MONO0 + id * S;
        cap.process(&ProcessRow {
            id,
            pid: 100 * id,
            start_mono_ns: start,
            parent,
            origin: "fork",
            comm: "x",
            argv: &argv,
            cwd: Some("/w"),
            exec_count: 1,
            exit_code: Some(0),
            ..Default::default()
        });
        cap.end_process(id, MONO0 + 19 * S);
        cap.event(&EventRow {
            mono_ns: start + 1000,
            wall_ns: WALL0 + start + 1000 - MONO0,
            kind: "exec",
            pid: 100 * id,
            ppid: 1,
            process_id: Some(id),
            comm: Some("x"),
            argv: Some(&argv),
            ..Default::default()
        });
    }
    cap.meta(key::COMPLETE, "true");
    let mut s = session();
    s.prompts[0] = Prompt::new(
        0,
        Some(ms(MONO0 + S + S / 2)),
        "use sk-proj-Q7x9Lm2Np4Rt6Vw8Yz0Ab1Cd".into(),
    );
    s.tools[0].command = Some(crate::sessions::util::join_argv(&tool_argv()));
    bind(&cap, &s);
    cap.create_indexes();
}

#[test]
fn planted_secrets_stay_out_of_the_trace_unless_asked() {
    use crate::views::redact::planted::{KEPT, secrets};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("secrets.db");
    write_secret_capture(&db);
    let texts = |d: &Json| -> Vec<String> {
        d["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    let holds = |texts: &[String], s: &str| texts.iter().any(|t| t.contains(s));
    let (_, d) = decode_with(&db, true, true);
    assert_eq!(d["errors"], json!([]), "{d}");
    let shown = texts(&d);
    let raw = std::fs::read(db.with_extension("pftrace")).unwrap();
    for s in secrets() {
        assert!(!holds(&shown, s), "{s} in the trace");
        assert!(
            !raw.windows(s.len()).any(|w| w == s.as_bytes()),
            "{s} in the trace bytes"
        );
    }
    for k in KEPT {
        assert!(holds(&shown, k), "{k} lost");
    }
    // The command lines say what was there.
    for t in [
        "GH_TOKEN=‹redacted›",
        "Authorization: Bearer ‹redacted›",
        "https://alice:‹redacted›@git.example.com/r.git",
        "https://h.example/cb?access_token=‹redacted›&x=1",
    ] {
        assert!(shown.iter().any(|s| s == t), "{t} not in {shown:?}");
    }
    // jsonl keeps the exact bytes, and so does the trace on request.
    let jsonl = std::fs::read_to_string(db.with_extension("jsonl")).unwrap();
    let (_, d) = decode_with(&db, false, true);
    let exact = texts(&d);
    for s in secrets() {
        assert!(jsonl.contains(s), "{s} not in jsonl");
        assert!(holds(&exact, s), "{s} not in the --no-redact trace");
    }
    assert!(!holds(&exact, "‹redacted›"));
}

/// The process that ran a stored MCP server is named with the server on its
/// track (and says so on its lifetime slice); every other track keeps its
/// name.
#[test]
fn an_mcp_servers_process_track_is_named_with_the_server() {
    use crate::store::{CaptureRw, mcp::McpServerRow};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    write_capture(&db, true, true);
    let row = Capture::open(&db).unwrap().stored_sessions("").unwrap()[0].row;
    CaptureRw::open(&db)
        .unwrap()
        .put_mcp_servers(&[McpServerRow {
            session_row: row,
            name: "fs".into(),
            transport: "stdio".into(),
            command: vec!["sleep".into(), "100".into()],
            url: None,
            source: "--mcp-config /p/fs.json".into(),
            kind: Some("filesystem".into()),
            process_id: Some(5),
            evidence: Some("argv".into()),
        }])
        .unwrap();
    let (_, d) = decode(&db);
    assert_eq!(d["errors"], json!([]), "{d}");
    assert_eq!(
        d["process_tracks"],
        json!([
            [100, MONO0, "node"],
            [200, MONO0 + 2 * S, "bash"],
            [200, MONO0 + 5 * S, "bash"],
            [300, MONO0 + 5 * S + S / 20, "ls"],
            [400, MONO0 + 15 * S, "mcp fs"]
        ])
    );
}

/// An MCP call's slice carries its server (name, tool, transport, kind,
/// pid, command or URL) and, with no command text, its arguments.
#[test]
fn an_mcp_calls_slice_names_its_server() {
    use super::{plan::mcp_anns_for_test as mcp_anns, writer::Value};
    use crate::{correlate::report::McpServerInfo, sessions::mcp::McpCall, views::mcp::McpView};
    let mut t = tool("mcp__fs__write_file", None, Some(MONO0), Some(MONO0 + S));
    t.mcp = Some(McpCall {
        server: Some("fs".into()),
        tool: Some("write_file".into()),
        arguments: Some(json!({"path": "/w/a.txt"})),
    });
    let stdio = McpServerInfo {
        server: "fs".into(),
        tool: Some("write_file".into()),
        transport: Some("stdio".into()),
        kind: Some("filesystem".into()),
        pid: Some(150),
        command: vec!["node".into(), "/srv/fs.js".into(), "/w".into()],
        url: None,
    };
    let s = |v: &str| Value::Str(v.into());
    assert_eq!(
        mcp_anns(&McpView::of(&t, Some(&stdio)).unwrap(), true),
        vec![
            ("mcp_server", s("fs")),
            ("mcp_tool", s("write_file")),
            ("mcp_transport", s("stdio")),
            ("mcp_server_kind", s("filesystem")),
            ("mcp_server_pid", Value::Int(150)),
            ("mcp_server_command", s("node /srv/fs.js /w")),
            ("arguments", s(r#"{"path":"/w/a.txt"}"#)),
        ]
    );
    let remote = McpServerInfo {
        server: "api".into(),
        tool: None,
        transport: Some("http".into()),
        kind: None,
        pid: None,
        command: Vec::new(),
        url: Some("http://127.0.0.1:8931/mcp".into()),
    };
    t.mcp = None;
    assert_eq!(
        mcp_anns(&McpView::of(&t, Some(&remote)).unwrap(), false),
        vec![
            ("mcp_server", s("api")),
            ("mcp_transport", s("http")),
            ("mcp_server_url", s("http://127.0.0.1:8931/mcp")),
        ]
    );
}
