//! An MCP call's `execute_tool` span, on a synthetic capture whose
//! correlation is given the server's attribution by hand (as correlate's
//! MCP attribution reports it): the server's own activity as the call's
//! events, a process it started during the call as a CLI span under it,
//! and the server's command line and the call's arguments only with
//! `--capture-content`.

use std::path::Path;

use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, any_value::Value},
    trace::v1::Span,
};

use super::{
    Options,
    spans::{Source, session_trace},
};
use crate::{
    correlate::{Reason, report::McpServerInfo},
    sessions::{AgentSession, Provider, ToolCategory, ToolEvent, ToolStatus, mcp::McpCall},
    store::{
        Capture,
        sessions::{BindingRow, TreeRow},
        synthetic::{EventRow, ProcessRow, SyntheticCapture},
    },
    views::run::RunModel,
};

const S: i64 = 1_000_000_000;
const MONO0: i64 = 1000 * S;
const WALL0: i64 = 1_800_000_000_000_000_000;

fn ms(mono: i64) -> i64 {
    (WALL0 + mono - MONO0) / 1_000_000
}

/// (row, pid, parent row, argv, start, end)
type Proc = (i64, i64, Option<i64>, &'static [&'static str], i64, i64);

const PROCS: [Proc; 3] = [
    (
        1,
        100,
        None,
        &["node", "/usr/lib/claude/cli.js"],
        MONO0,
        MONO0 + 20 * S,
    ),
    // The stdio server: started with the agent, long before the call.
    (
        2,
        150,
        Some(1),
        &["node", "/srv/fs.js", "/w"],
        MONO0 + S / 2,
        MONO0 + 19 * S,
    ),
    // Started by the server during the call.
    (
        3,
        160,
        Some(2),
        &["git", "status"],
        MONO0 + 5 * S + S / 10,
        MONO0 + 5 * S + S / 5,
    ),
];

fn session() -> AgentSession {
    let mut s = AgentSession::new(
        Provider::Claude,
        "s-mcp".into(),
        "/h/.claude/projects/-w/s-mcp.jsonl".into(),
    );
    s.cwd = Some("/w".into());
    s.start_ms = Some(ms(MONO0 + S));
    s.end_ms = Some(ms(MONO0 + 19 * S));
    s.tools = vec![ToolEvent {
        prompt_index: None,
        subagent: None,
        name: "mcp__fs__write_file".into(),
        category: ToolCategory::Mcp,
        call_id: Some("toolu_mcp".into()),
        command: None,
        command_truncated: false,
        cwd: None,
        status: ToolStatus::Ok,
        exit_code: None,
        start_ms: Some(ms(MONO0 + 5 * S)),
        end_ms: Some(ms(MONO0 + 6 * S)),
        paths: Vec::new(),
        domains: Vec::new(),
        mcp: Some(McpCall {
            server: Some("fs".into()),
            tool: Some("write_file".into()),
            arguments: Some(serde_json::json!({"path": "/w/a.txt", "content": "hi"})),
        }),
    }];
    s.tool_count = 1;
    s
}

fn write_capture(path: &Path) {
    let mut cap = SyntheticCapture::create(path, &path.display().to_string());
    cap.anchor("start", MONO0, WALL0);
    for (id, pid, parent, argv, start, end) in PROCS {
        cap.process(&ProcessRow {
            id,
            pid,
            start_mono_ns: start,
            parent: parent.map(|p| (p, PROCS[p as usize - 1].1)),
            comm: argv[0],
            argv,
            cwd: Some("/w"),
            exec_count: 1,
            exit_code: Some(0),
            ..Default::default()
        });
        cap.end_process(id, end);
    }
    let events: [(i64, i64, &str, Option<&str>); 4] = [
        (2, MONO0 + 5 * S + S / 20, "fork", None),
        (3, MONO0 + 5 * S + S / 10 + 1000, "exec", None),
        (2, MONO0 + 5 * S + S / 2, "openat", Some("/w/a.txt")),
        (3, MONO0 + 5 * S + S / 5, "exit", None),
    ];
    for (row, mono, kind, p) in events {
        let (_, pid, parent, argv, ..) = PROCS[row as usize - 1];
        cap.event(&EventRow {
            mono_ns: mono,
            wall_ns: WALL0 + mono - MONO0,
            kind,
            pid,
            ppid: parent.map_or(1, |p| PROCS[p as usize - 1].1),
            process_id: Some(row),
            comm: Some(argv[0]),
            argv: (kind == "exec").then_some(argv),
            path: p,
            flags: (kind == "openat").then_some("write,create,trunc"),
            ..Default::default()
        });
    }
    let row = cap.session(&session());
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
        evidence_count: 1,
        evidence_process_id: Some(1),
        evidence_path: Some("/h/.claude/projects/-w/s-mcp.jsonl".into()),
        first_evidence_mono_ns: Some(MONO0 + S / 10),
        from_mono_ns: MONO0,
        to_mono_ns: None,
    });
    cap.create_indexes();
}

fn text(v: &AnyValue) -> String {
    match &v.value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(text).collect();
            format!("[{}]", items.join(" "))
        }
        other => format!("{other:?}"),
    }
}

fn attrs(kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> Vec<String> {
    kvs.iter()
        .map(|kv| {
            format!(
                "{}={}",
                kv.key,
                kv.value.as_ref().map(text).unwrap_or_default()
            )
        })
        .collect()
}

/// The session's spans, with correlate's report given the MCP attribution:
/// the server and every activity of its tree as `mcp_server`.
fn spans(db: &Path, capture_content: bool) -> Vec<Span> {
    let cap = Capture::open(db).unwrap();
    let run = RunModel::load(&cap).unwrap();
    let stored = run.stored_sessions().unwrap().remove(0);
    let mut session = run.correlate(stored).unwrap();
    let report = &mut session.report;
    // What correlate made of the server's tree before it knew MCP: taken
    // out of the flags and runtime groups, given to the call.
    let mut server_acts: Vec<_> = report
        .flags
        .observed_not_claimed
        .drain(..)
        .chain(report.runtime_activity.drain(..).flat_map(|g| g.activity))
        .chain(report.prompts[0].tools[0].activity.drain(..))
        .filter(|a| a.process_id != 1)
        .collect();
    server_acts.sort_by_key(|a| a.mono_ns);
    for a in &mut server_acts {
        a.reason = Some(Reason::McpServer);
        a.by = None;
    }
    assert_eq!(server_acts.len(), 2, "{server_acts:?}");
    let tool = &mut report.prompts[0].tools[0];
    tool.activity = server_acts;
    tool.mcp = Some(McpServerInfo {
        server: "fs".into(),
        tool: Some("write_file".into()),
        transport: Some("stdio".into()),
        kind: Some("filesystem".into()),
        pid: Some(150),
        command: vec!["node".into(), "/srv/fs.js".into(), "/w".into()],
        url: None,
    });
    let source = Source {
        run: &run,
        view: run.view().unwrap(),
        last_event_wall_ns: cap.last_event_wall_ns().unwrap(),
    };
    session_trace(&source, &session, Options { capture_content }).spans
}

#[test]
fn an_mcp_call_carries_its_server_and_its_activity() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mcp.db");
    write_capture(&db);
    let spans = spans(&db, false);
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool mcp__fs__write_file")
        .unwrap();
    assert_eq!(
        attrs(&tool.attributes),
        [
            "gen_ai.operation.name=execute_tool",
            "gen_ai.tool.name=mcp__fs__write_file",
            "gen_ai.tool.call.id=toolu_mcp",
            "gen_ai.tool.type=extension",
            "mcp.method.name=tools/call",
            "agentsight.mcp.server=fs",
            "agentsight.mcp.tool=write_file",
            "agentsight.mcp.transport=stdio",
            "network.transport=pipe",
            "agentsight.mcp.server.kind=filesystem",
            "agentsight.mcp.server.pid=150",
            "agentsight.tool.status=ok",
            "agentsight.tool.category=mcp",
            "agentsight.correlate.activity=2",
        ]
    );
    // The server's own activity is the call's (with its pid); the git it
    // started during the call is a CLI span under the call; the server
    // itself, running long before and after, has no span of the call's.
    let events: Vec<(String, Vec<String>)> = tool
        .events
        .iter()
        .map(|e| (e.name.clone(), attrs(&e.attributes)))
        .collect();
    assert_eq!(
        events,
        [(
            "file.write".to_owned(),
            vec![
                "agentsight.event.id=3".to_owned(),
                "process.pid=150".to_owned(),
                "file.path=/w/a.txt".to_owned(),
                "agentsight.attribution.reason=mcp_server".to_owned(),
            ]
        )]
    );
    let children: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id == tool.span_id)
        .collect();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].name, "git");
    assert!(attrs(&children[0].attributes).contains(&"process.pid=160".to_owned()));
    assert!(
        !spans.iter().any(
            |s| attrs(&s.attributes).contains(&"process.pid=150".to_owned()) && s.name == "node"
        )
    );
}

#[test]
fn an_mcp_calls_arguments_and_command_are_content() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mcp.db");
    write_capture(&db);
    let spans = spans(&db, true);
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool mcp__fs__write_file")
        .unwrap();
    let a = attrs(&tool.attributes);
    assert!(
        a.contains(&"agentsight.mcp.server.command=[node /srv/fs.js /w]".to_owned()),
        "{a:?}"
    );
    assert!(
        a.contains(&r#"gen_ai.tool.call.arguments={"content":"hi","path":"/w/a.txt"}"#.to_owned()),
        "{a:?}"
    );
}
