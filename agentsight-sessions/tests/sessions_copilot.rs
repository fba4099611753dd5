//! GitHub Copilot CLI 1.0.102 sessions (`~/.copilot/session-state/<id>/events.jsonl`),
//! recorded offline against the scripted Anthropic server
//! (`fixtures/sessions/copilot-1.0.102/README.md`). Token figures are the
//! server's own, per its log.
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use agentsight_sessions::mcp::{McpPlaces, configured_servers, resolve_name};
use agentsight_sessions::{
    self as sessions, AgentSession, DiscoveryOptions, ErrorKind, PathAccess, Provider, TokenUsage,
    ToolCategory, ToolStatus,
};

const EDIT: &str = "c91ebd9c-d94a-477b-a7f2-1abb54229108";
const FAILING: &str = "b0f9dcc8-bd07-43ff-98fc-e9d19efb618e";
const PARALLEL: &str = "114b0086-dfc3-4660-8ed2-481b0d033ea6";
const TOOLS: &str = "ae85ed48-db7c-424c-ad29-beb27b503d98";
const KILLED: &str = "345de852-8d65-4e07-843d-84f90fd6083a";
const RATE: &str = "4c70c227-c8e9-407b-95a9-118ad08175d8";
const AUTH: &str = "c1d97085-6659-4856-9835-eda89bc37880";
const MCP: &str = "6f592146-034f-48e8-bf92-1bbad1646adb";
const OPENAI: &str = "3057b71d-3fbd-4730-9cd5-429dbc89597b";

fn home() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions/copilot-1.0.102/home")
}

fn events(id: &str) -> PathBuf {
    home()
        .join(".copilot/session-state")
        .join(id)
        .join("events.jsonl")
}

fn parse(id: &str) -> AgentSession {
    sessions::parse_file(Provider::Copilot, &events(id)).expect("parse fixture")
}

fn ts(s: &str) -> Option<i64> {
    sessions::parse_ts(s)
}

/// (call id, name, category, command, paths, status, exit code, subagent)
type Row<'a> = (
    &'a str,
    &'a str,
    ToolCategory,
    Option<&'a str>,
    Vec<(&'a str, PathAccess)>,
    ToolStatus,
    Option<i32>,
    Option<usize>,
);

fn tools(s: &AgentSession) -> Vec<Row<'_>> {
    s.tools
        .iter()
        .map(|t| {
            (
                t.call_id.as_deref().unwrap_or(""),
                t.name.as_str(),
                t.category,
                t.command.as_deref(),
                t.paths
                    .iter()
                    .map(|p| (p.path.as_str(), p.access))
                    .collect(),
                t.status,
                t.exit_code,
                t.subagent,
            )
        })
        .collect()
}

#[test]
fn edit_then_resumed_in_the_same_file() {
    let s = parse(EDIT);
    assert_eq!(s.session_id, EDIT);
    assert_eq!(s.cwd.as_deref(), Some("/home/u/work/edit"));
    assert_eq!(s.agent_version.as_deref(), Some("1.0.102"));
    assert_eq!(s.models, ["claude-sonnet-4-5"]);
    assert_eq!(s.start_ms, ts("2026-12-02T13:09:06.231Z"));
    assert_eq!(s.end_ms, ts("2026-12-02T13:09:38.938Z"));
    let prompts: Vec<_> = s.prompts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        prompts,
        [
            "Create hello.txt saying hello from the agent, then show me its contents and line count.",
            "Now count the bytes of hello.txt."
        ]
    );
    use PathAccess::*;
    use ToolCategory as C;
    use ToolStatus::*;
    assert_eq!(
        tools(&s),
        [
            (
                "toolu_e2e000001",
                "create",
                C::Edit,
                None,
                vec![("/home/u/work/edit/hello.txt", Create)],
                Ok,
                None,
                None
            ),
            (
                "toolu_e2e000003",
                "bash",
                C::Shell,
                Some("cat hello.txt && wc -l hello.txt"),
                vec![],
                Ok,
                Some(0),
                None
            ),
            (
                "toolu_e2eresume_000001",
                "bash",
                C::Shell,
                Some("wc -c hello.txt"),
                vec![],
                Ok,
                Some(0),
                None
            ),
        ]
    );
    assert_eq!(
        s.tools.iter().map(|t| t.prompt_index).collect::<Vec<_>>(),
        [Some(0), Some(0), Some(1)]
    );
    assert_eq!(s.tools[0].start_ms, ts("2026-12-02T13:09:06.733Z"));
    // Five calls (three, then two after the resume); the two cumulative
    // shutdowns (3 then 5 requests) are not added. Anthropic wire:
    // inputTokens = input + cache write + cache read.
    assert_eq!(s.response_count, 5);
    assert_eq!(s.usage, TokenUsage::new(3800, 212, 1600, 1350, 0));
    let r = &s.responses[0];
    assert_eq!(r.tokens, Some(TokenUsage::new(1000, 40, 0, 600, 0)));
    assert_eq!(r.request_id.as_deref(), Some("msg_e2e000002"));
    assert_eq!(
        r.native_id.as_deref(),
        Some("b021ab42-6039-4e22-804a-d8a1f6c9d901")
    );
    assert_eq!(r.text, "Writing the file.");
    assert_eq!(r.ts_ms, ts("2026-12-02T13:09:06.733Z"));
    assert_eq!(
        s.responses[4].tokens,
        Some(TokenUsage::new(700, 43, 400, 50, 0))
    );
    assert_eq!(s.responses[4].prompt_index, Some(1));
    assert!(s.errors.is_empty());
    assert_eq!(s.stats.lines, 33);
    assert_eq!(s.stats.unknown_records, 0);
    assert_eq!(s.stats.bad_lines, 0);
}

#[test]
fn a_failing_command_reported_as_success_is_failed() {
    // 1.0.102 writes `success: true` with `shellExecution.exitCode: 3`.
    let s = parse(FAILING);
    assert_eq!(
        tools(&s),
        [(
            "toolu_e2e000001",
            "bash",
            ToolCategory::Shell,
            Some("sh -c 'echo check failed: 2 problems; exit 3'"),
            vec![],
            ToolStatus::Failed,
            Some(3),
            None
        )]
    );
    assert_eq!(s.usage, TokenUsage::new(1700, 83, 400, 650, 0));
}

#[test]
fn openai_wire_input_holds_the_cached_part_and_output_the_reasoning() {
    // `failing` against COPILOT_PROVIDER_TYPE=openai (Chat Completions):
    // the server sent prompt_tokens 1000 (0 cached) and 1100 (400 cached),
    // completion_tokens 50 and 54 with reasoning 10 and 11.
    let s = parse(OPENAI);
    assert_eq!(
        s.responses[1].tokens,
        Some(TokenUsage::new(700, 54, 400, 0, 11))
    );
    assert_eq!(s.usage, TokenUsage::new(1700, 104, 400, 0, 21));
    assert_eq!(s.tools[0].status, ToolStatus::Failed);
    assert_eq!(s.tools[0].exit_code, Some(3));
}

#[test]
fn parallel_calls_pair_by_call_id() {
    let s = parse(PARALLEL);
    use ToolCategory as C;
    assert_eq!(
        tools(&s),
        [
            (
                "toolu_e2e000001",
                "bash",
                C::Shell,
                Some("echo marker-one"),
                vec![],
                ToolStatus::Ok,
                Some(0),
                None
            ),
            (
                "toolu_e2e000002",
                "bash",
                C::Shell,
                Some("wc -l notes.txt"),
                vec![],
                ToolStatus::Ok,
                Some(0),
                None
            ),
            (
                "toolu_e2e000003",
                "view",
                C::Read,
                None,
                vec![("/home/u/work/parallel/notes.txt", PathAccess::Read)],
                ToolStatus::Ok,
                None,
                None
            ),
        ]
    );
    // Completed out of order: each end time is its own record's.
    assert!(s.tools.iter().all(|t| t.end_ms.is_some()));
    assert_eq!(s.usage, TokenUsage::new(1700, 83, 400, 650, 0));
}

#[test]
fn edit_search_and_a_task_subagent() {
    let s = parse(TOOLS);
    use PathAccess::*;
    use ToolCategory as C;
    use ToolStatus::*;
    assert_eq!(
        tools(&s),
        [
            (
                "toolu_e2e000001",
                "edit",
                C::Edit,
                None,
                vec![("/home/u/work/tools/notes.txt", Write)],
                Ok,
                None,
                None
            ),
            (
                "toolu_e2e000002",
                "view",
                C::Read,
                None,
                vec![("/home/u/work/tools/notes.txt", Read)],
                Ok,
                None,
                None
            ),
            (
                "toolu_e2e000003",
                "grep",
                C::Search,
                Some("release"),
                vec![("/home/u/work/tools", Read)],
                Ok,
                None,
                None
            ),
            (
                "toolu_e2e000004",
                "glob",
                C::Search,
                Some("*.txt"),
                vec![],
                Ok,
                None,
                None
            ),
            (
                "toolu_e2e000006",
                "task",
                C::Subagent,
                Some("Count notes lines"),
                vec![],
                Ok,
                None,
                None
            ),
            (
                "toolu_e2e000008",
                "bash",
                C::Shell,
                Some("wc -l notes.txt"),
                vec![],
                Ok,
                Some(0),
                Some(0)
            ),
        ]
    );
    // The subagent's task prompt is not a person's prompt.
    assert_eq!(s.prompt_count, 1);
    assert_eq!(s.subagents.len(), 1);
    let a = &s.subagents[0];
    assert_eq!(
        a.agent_id.as_deref(),
        Some("d5e0d6dd-06d1-4473-9dc6-747ee7c5fc4a")
    );
    assert_eq!(a.kind.as_deref(), Some("task"));
    assert_eq!(a.description.as_deref(), Some("Count notes lines"));
    assert_eq!(a.parent_call_id.as_deref(), Some("toolu_e2e000006"));
    assert_eq!((a.responses, a.tools), (2, 1));
    assert_eq!(a.usage, TokenUsage::new(500, 95, 2000, 100, 0));
    // Its usage records have their own sourceSessionId and sequence 1, 2:
    // kept apart from the parent's 1, 2, 3.
    assert_eq!(s.usage, TokenUsage::new(2300, 230, 3700, 800, 0));
    assert_eq!(s.response_count, 5);
}

#[test]
fn killed_mid_tool_keeps_its_usage_and_an_open_call() {
    let s = parse(KILLED);
    assert_eq!(
        tools(&s),
        [(
            "toolu_e2e000001",
            "bash",
            ToolCategory::Shell,
            Some("sleep 8; echo slow check done"),
            vec![],
            ToolStatus::Unknown,
            None,
            None
        )]
    );
    assert_eq!(s.tools[0].end_ms, None);
    assert_eq!(s.usage, TokenUsage::new(1000, 40, 0, 600, 0));
    assert_eq!(s.end_ms, ts("2026-12-02T13:09:49.674Z"));
}

#[test]
fn rate_limit_and_auth_errors() {
    let s = parse(RATE);
    assert_eq!(s.errors.len(), 1);
    assert_eq!(s.errors[0].kind, ErrorKind::RateLimit);
    assert_eq!(
        s.errors[0].message,
        "429 This request would exceed your account's rate limit. Please try again later."
    );
    assert_eq!(s.errors[0].prompt_index, Some(0));
    assert_eq!(s.response_count, 0);
    assert!(s.usage.is_zero());
    let s = parse(AUTH);
    assert_eq!(s.errors.len(), 1);
    assert_eq!(
        s.errors[0].kind,
        ErrorKind::Provider("authentication".into())
    );
    assert!(
        s.errors[0].message.starts_with(
            "Authentication failed with provider at http://127.0.0.1:8787 (HTTP 401)."
        ),
        "{}",
        s.errors[0].message
    );
}

#[test]
fn mcp_calls_name_their_server_and_tool() {
    let s = parse(MCP);
    let mcp: Vec<_> = s
        .tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.category,
                t.mcp.as_ref().and_then(|m| m.server.as_deref()),
                t.mcp.as_ref().and_then(|m| m.tool.as_deref()),
                t.status,
            )
        })
        .collect();
    assert_eq!(
        mcp,
        [
            (
                "fs-write_file",
                ToolCategory::Mcp,
                Some("fs"),
                Some("write_file"),
                ToolStatus::Ok
            ),
            (
                "fs-read_text_file",
                ToolCategory::Mcp,
                Some("fs"),
                Some("read_text_file"),
                ToolStatus::Ok
            ),
            ("bash", ToolCategory::Shell, None, None, ToolStatus::Ok),
        ]
    );
    assert_eq!(
        s.tools[0].mcp.as_ref().and_then(|m| m.arguments.clone()),
        Some(serde_json::json!({
            "path": "/home/u/work/mcp/mcp-notes.txt",
            "content": "first note\nsecond note\n"
        }))
    );
    assert_eq!(s.usage, TokenUsage::new(2200, 178, 2400, 750, 0));
    // The configuration the run used.
    let cfg = configured_servers(
        Provider::Copilot,
        &McpPlaces {
            home: home().join(".copilot"),
            project: None,
            argv: vec![
                "copilot".into(),
                "--additional-mcp-config".into(),
                r#"{"mcpServers":{"web":{"type":"http","url":"http://127.0.0.1:8790/mcp"}}}"#
                    .into(),
            ],
            env: Vec::new(),
        },
    );
    assert!(cfg.problems.is_empty(), "{:?}", cfg.problems);
    let names: Vec<_> = cfg.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fs", "web"]);
    assert_eq!(
        cfg.servers[0].command,
        [
            "node",
            "/home/u/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            "/home/u/work/mcp"
        ]
    );
    assert_eq!(
        sessions::mcp::config_home(Provider::Copilot, &events(MCP)),
        Some(home().join(".copilot"))
    );
    assert_eq!(
        resolve_name(Provider::Copilot, "fs-write_file", &["fs", "fs-x"]),
        Some(("fs".into(), "write_file".into()))
    );
}

/// A private copy of one session's file under a fresh home, with `extra`
/// appended.
fn variant(id: &str, extra: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path().join(".copilot/session-state").join(id);
    fs::create_dir_all(&dir).expect("mkdir");
    let p = dir.join("events.jsonl");
    let mut bytes = fs::read(events(id)).expect("read fixture");
    bytes.extend_from_slice(extra);
    fs::write(&p, bytes).expect("write");
    (d, p)
}

#[test]
fn partial_last_line_unknown_record_and_repeated_usage() {
    let fixture = fs::read_to_string(events(FAILING)).expect("read");
    // A usage record written twice (same sourceSessionId and sequence),
    // a record type this reader does not know, then a line cut short.
    let usage = fixture
        .lines()
        .find(|l| l.contains("\"type\":\"session.usage_record\""))
        .expect("usage line");
    let extra = format!(
        "{usage}\n{}\n{}",
        r#"{"type":"session.future_thing","id":"x","timestamp":"2026-12-02T13:09:22.200Z","data":{}}"#,
        r#"{"type":"assistant.message","id":"y","timestamp":"2026-12-02T13:09:22"#
    );
    let (_d, p) = variant(FAILING, extra.as_bytes());
    let s = sessions::parse_file(Provider::Copilot, &p).expect("parse");
    assert!(s.stats.partial_last_line);
    assert_eq!(s.stats.unknown_records, 1);
    assert_eq!(s.stats.repeated_usage_skipped, 1);
    assert_eq!(s.stats.bad_lines, 0);
    assert_eq!(s.usage, TokenUsage::new(1700, 83, 400, 650, 0));
    assert_eq!(s.tool_count, 1);
}

#[test]
fn a_huge_line_is_read() {
    // A 6 MiB tool result (the output is kept as a 4 KiB prefix).
    let big = "x".repeat(6 << 20);
    let line = format!(
        "{{\"type\":\"tool.execution_complete\",\"id\":\"z\",\"timestamp\":\"2026-12-02T13:09:50.000Z\",\"data\":{{\"toolCallId\":\"toolu_e2e000001\",\"success\":true,\"result\":{{\"content\":\"{big}\\n<shellId: 0 completed with exit code 0>\"}}}}}}\n"
    );
    let (_d, p) = variant(KILLED, line.as_bytes());
    let s = sessions::parse_file(Provider::Copilot, &p).expect("parse");
    assert_eq!(s.stats.oversized_lines, 0);
    assert_eq!(s.tools[0].status, ToolStatus::Ok);
    assert_eq!(s.tools[0].end_ms, ts("2026-12-02T13:09:50.000Z"));
    // The trailer is past the prefix: no exit code read from it.
    assert_eq!(s.tools[0].exit_code, None);
}

#[test]
fn discovery_lists_both_layouts_under_home() {
    let (d, _) = variant(FAILING, b"");
    // The flat layout of 0.0.342–0.0.377: `session-state/<id>.jsonl`.
    let flat = d
        .path()
        .join(".copilot/session-state/0b0f9dcc-bd07-43ff-98fc-e9d19efb618e.jsonl");
    fs::File::create(&flat)
        .and_then(|mut f| f.write_all(&fs::read(events(PARALLEL))?))
        .expect("flat copy");
    let rows = sessions::discover(&DiscoveryOptions {
        home: Some(d.path().to_path_buf()),
        ..DiscoveryOptions::default()
    })
    .expect("discover");
    let mut ids: Vec<_> = rows
        .iter()
        .map(|r| (r.provider, r.session_id.as_str(), r.prompts, r.tools))
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            (
                Provider::Copilot,
                "0b0f9dcc-bd07-43ff-98fc-e9d19efb618e",
                Some(1),
                Some(3)
            ),
            (Provider::Copilot, FAILING, Some(1), Some(1)),
        ]
    );
    let all = sessions::discover(&DiscoveryOptions {
        home: Some(home()),
        ..DiscoveryOptions::default()
    })
    .expect("discover");
    let mut ids: Vec<_> = all.iter().map(|r| r.session_id.as_str()).collect();
    ids.sort_unstable();
    let mut want = [
        EDIT, FAILING, PARALLEL, TOOLS, KILLED, RATE, AUTH, MCP, OPENAI,
    ];
    want.sort_unstable();
    assert_eq!(ids, want);
    assert!(all.iter().all(|r| r.error.is_none()));
}

#[test]
fn only_the_transcript_names_its_session() {
    let id = |p: &str| sessions::session_id_for_path(Path::new(p));
    let c = |s: &str| Some((Provider::Copilot, s.to_string()));
    let dir = format!("/home/u/.copilot/session-state/{EDIT}");
    assert_eq!(id(&format!("{dir}/events.jsonl")), c(EDIT));
    // The session directory's other files and the resume locks name no
    // session: a write to them binds no process to it.
    for other in [
        format!("{dir}/inuse.4242.lock"),
        format!("{dir}/files/plan.md"),
        format!("{dir}/files/notes.jsonl"),
        format!("{dir}/rewind-file-snapshots/tracking.json"),
        format!("{dir}/workspace.yaml"),
        format!("/home/u/.copilot/session-state/.session-operation-locks/{EDIT}.lock"),
    ] {
        assert_eq!(id(&other), None, "{other}");
    }
    assert_eq!(id(&format!("/h/cp/session-state/{EDIT}.jsonl")), c(EDIT));
    assert_eq!(id("/home/u/.copilot/session-state/notes.jsonl"), None);
    assert!(Provider::Copilot.is_transcript(&[EDIT, "events.jsonl"]));
    assert!(Provider::Copilot.is_transcript(&[&format!("{EDIT}.jsonl")]));
    assert!(!Provider::Copilot.is_transcript(&[EDIT, "workspace.yaml"]));
    assert!(!Provider::Copilot.is_transcript(&[".session-operation-locks", "x.lock"]));
}
