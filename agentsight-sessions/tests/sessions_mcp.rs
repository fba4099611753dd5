//! MCP tool calls in each provider's transcript, and the configuration that
//! names their servers (`fixtures/mcp/home`).

use std::path::{Path, PathBuf};

use agentsight_sessions::mcp::{self, McpCall, McpPlaces};
use agentsight_sessions::{AgentSession, Bounds, Provider, ToolCategory, ToolStatus};
use serde_json::json;

fn home() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp/home")
}

const CLAUDE: &str = ".claude/projects/-w-proj/11111111-0000-4000-8000-0000000000c1.jsonl";
const CODEX: &str = ".codex/sessions/2026/06/01/rollout-2026-06-01T10-00-00-019c0000-0000-7000-8000-0000000000c2.jsonl";
const GEMINI: &str = ".gemini/tmp/proj/chats/session-2026-06-01T10-00-5e1f0c2a.jsonl";
const CURSOR: &str =
    ".cursor/projects/w-proj/agent-transcripts/c0ffee00-0000-4000-8000-0000000000c4.jsonl";

fn parse(p: Provider, rel: &str) -> AgentSession {
    agentsight_sessions::parse_file(p, &home().join(rel)).expect("parse")
}

/// (name, category, status, call id, end time set).
fn calls(s: &AgentSession) -> Vec<(&str, ToolCategory, ToolStatus, Option<&str>, bool)> {
    s.tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.category,
                t.status,
                t.call_id.as_deref(),
                t.end_ms.is_some(),
            )
        })
        .collect()
}

fn mcp_of(s: &AgentSession) -> Vec<Option<McpCall>> {
    s.tools.iter().map(|t| t.mcp.clone()).collect()
}

fn call(
    server: Option<&str>,
    tool: Option<&str>,
    args: Option<serde_json::Value>,
) -> Option<McpCall> {
    Some(McpCall {
        server: server.map(str::to_string),
        tool: tool.map(str::to_string),
        arguments: args,
    })
}

#[test]
fn claude_code_mcp_calls() {
    use {ToolCategory::Mcp, ToolStatus::*};
    let s = parse(Provider::Claude, CLAUDE);
    assert_eq!(
        calls(&s),
        [
            ("mcp__fs__write_file", Mcp, Ok, Some("toolu_W1"), true),
            ("mcp__fs__read_text_file", Mcp, Ok, Some("toolu_R1"), true),
            ("mcp__fs__write_file", Mcp, Failed, Some("toolu_W2"), true),
            ("mcp__my__srv__do_it", Mcp, Unknown, Some("toolu_X1"), false),
        ]
    );
    let notes = json!({"path": "/w/proj/mcp-notes.txt", "content": "one\ntwo\n"});
    assert_eq!(
        mcp_of(&s),
        [
            call(Some("fs"), Some("write_file"), Some(notes)),
            call(
                Some("fs"),
                Some("read_text_file"),
                Some(json!({"path": "/w/proj/mcp-notes.txt"}))
            ),
            call(
                Some("fs"),
                Some("write_file"),
                Some(json!({"path": "/tmp/outside.txt", "content": "x"}))
            ),
            // Two `__` after the prefix: the server is left to the configuration.
            call(None, None, Some(json!({"q": 1}))),
        ]
    );
    // No command or paths are invented for an MCP call.
    assert!(
        s.tools
            .iter()
            .all(|t| t.command.is_none() && t.paths.is_empty())
    );
}

#[test]
fn codex_namespaced_calls_tool_search_and_call_ends() {
    use ToolStatus::*;
    let s = parse(Provider::Codex, CODEX);
    assert_eq!(
        calls(&s),
        [
            (
                "tool_search",
                ToolCategory::Search,
                Ok,
                Some("call_S1"),
                true
            ),
            (
                "mcp__fs__write_file",
                ToolCategory::Mcp,
                Ok,
                Some("call_W1"),
                true
            ),
            (
                "mcp__fs__write_file",
                ToolCategory::Mcp,
                Failed,
                Some("call_W2"),
                true
            ),
            // Only an `mcp_tool_call_end` (its call not persisted): made once.
            (
                "mcp__fs__list_directory",
                ToolCategory::Mcp,
                Failed,
                Some("call_L1"),
                true
            ),
        ]
    );
    assert_eq!(s.tools[0].command.as_deref(), Some("fs write_file"));
    assert_eq!(s.tools[0].mcp, None);
    assert_eq!(
        mcp_of(&s)[1..],
        [
            call(
                Some("fs"),
                Some("write_file"),
                Some(json!({"path": "/w/proj/mcp-notes.txt", "content": "one\ntwo\n"}))
            ),
            call(
                Some("fs"),
                Some("write_file"),
                Some(json!({"path": "/tmp/outside.txt", "content": "x"}))
            ),
            call(
                Some("fs"),
                Some("list_directory"),
                Some(json!({"path": "/w/proj"}))
            ),
        ]
    );
    assert_eq!(
        s.tools[1].start_ms,
        agentsight_sessions::parse_ts("2026-06-01T10:00:02.000Z")
    );
    assert_eq!(
        s.tools[1].end_ms,
        agentsight_sessions::parse_ts("2026-06-01T10:00:02.400Z")
    );
    assert_eq!(
        s.tools[3].start_ms, None,
        "no call record: no start invented"
    );
    assert_eq!((s.stats.bad_lines, s.stats.unknown_records), (0, 0));
}

#[test]
fn gemini_cli_mcp_calls_resolve_against_its_settings() {
    use ToolStatus::*;
    let s = parse(Provider::Gemini, GEMINI);
    assert_eq!(
        calls(&s),
        [
            (
                "mcp_fs_write_file",
                ToolCategory::Mcp,
                Ok,
                Some("c-w1"),
                true
            ),
            (
                "mcp_fs_read_text_file",
                ToolCategory::Mcp,
                Ok,
                Some("c-r1"),
                true
            ),
            (
                "mcp_fs_write_file",
                ToolCategory::Mcp,
                Failed,
                Some("c-w2"),
                true
            ),
            ("list_directory", ToolCategory::Read, Ok, Some("c-l1"), true),
        ]
    );
    assert_eq!(
        mcp_of(&s),
        [
            call(
                None,
                None,
                Some(json!({"path": "/w/proj/mcp-notes.txt", "content": "one\ntwo\n"}))
            ),
            call(None, None, Some(json!({"path": "/w/proj/mcp-notes.txt"}))),
            call(
                None,
                None,
                Some(json!({"path": "/tmp/outside.txt", "content": "x"}))
            ),
            None,
        ]
    );
    // The home the transcript belongs to declares `fs`: the names resolve.
    let cfg_home = mcp::config_home(Provider::Gemini, &s.source_path).expect("home");
    assert_eq!(cfg_home, home());
    let configs = mcp::configured_servers(
        Provider::Gemini,
        &McpPlaces {
            home: cfg_home,
            project: None,
            argv: Vec::new(),
            env: Vec::new(),
        },
    );
    let names: Vec<&str> = configs.servers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["fs", "legacy_sse", "web_api"]);
    assert_eq!(
        mcp::resolve_name(Provider::Gemini, &s.tools[1].name, &names),
        Some(("fs".to_string(), "read_text_file".to_string()))
    );
}

#[test]
fn cursor_call_mcp_tool() {
    let s = parse(Provider::Cursor, CURSOR);
    assert_eq!(
        calls(&s),
        [(
            "CallMcpTool",
            ToolCategory::Mcp,
            ToolStatus::Unknown,
            None,
            false
        )]
    );
    assert_eq!(
        mcp_of(&s),
        [call(
            Some("user-fs"),
            Some("write_file"),
            Some(json!({"path": "/w/proj/mcp-notes.txt", "content": "one\n"}))
        )]
    );
}

#[test]
fn arguments_over_the_command_budget_are_dropped_newest_kept() {
    // A budget of 130 bytes keeps the arguments of the newest three of the
    // Claude Code session's four calls.
    let bounds = Bounds {
        command_text_bytes: 130,
        ..Bounds::default()
    };
    let s = agentsight_sessions::parse_file_with(Provider::Claude, &home().join(CLAUDE), &bounds)
        .expect("parse");
    let kept: Vec<bool> = s
        .tools
        .iter()
        .map(|t| t.mcp.as_ref().is_some_and(|m| m.arguments.is_some()))
        .collect();
    let lens: Vec<usize> = parse(Provider::Claude, CLAUDE)
        .tools
        .iter()
        .map(|t| {
            serde_json::to_string(&t.mcp.as_ref().unwrap().arguments)
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(lens, [55, 32, 41, 7]);
    // Newest first: 7 + 41 = 48 fit, + 32 = 80 fits, + 55 = 135 does not.
    assert_eq!(kept, [false, true, true, true]);
    assert_eq!(s.cut.command_text_bytes_cut, 55);
    // The server and tool stay.
    assert_eq!(
        s.tools[0].mcp.as_ref().unwrap().tool.as_deref(),
        Some("write_file")
    );
}

// Real transcripts of the pinned CLIs (Claude Code 2.1.328, Codex 0.169,
// Gemini CLI 0.61) running the e2e scenarios `mcp` (write_file,
// read_text_file, list_directory through the filesystem server, then a
// shell `wc -l`) and `mcp_refused` (write_file outside the server's root),
// kept whole in `fixtures/mcp/home`.

const CLAUDE_MCP: &str = ".claude/projects/-var-tmp-agentsight-e2e-claude-mcp-28568-1-work/d63b7627-5291-4107-a563-8cb2caf5d253.jsonl";
const CLAUDE_REFUSED: &str = ".claude/projects/-var-tmp-agentsight-e2e-claude-mcp-refused-28568-2-work/0bc5d3ea-28e2-43d0-8bba-7c2768637c84.jsonl";
const CODEX_MCP: &str = ".codex/sessions/2026/12/02/rollout-2026-12-02T07-45-45-01a235b7-7495-71d2-968d-0e305f9c8b46.jsonl";
const CODEX_REFUSED: &str = ".codex/sessions/2026/12/02/rollout-2026-12-02T07-46-11-01a235b7-da0b-7193-b08f-57f61d859c4f.jsonl";
const GEMINI_MCP: &str = ".gemini/tmp/work/chats/session-2026-12-02T07-46-6f70f901.jsonl";
const GEMINI_REFUSED: &str = ".gemini/tmp/work-1/chats/session-2026-12-02T07-47-e1cacd38.jsonl";

/// One call as the tests state it: name, category, status, call id, and
/// the MCP server, tool and arguments (`None` for a built-in call).
type Row = (
    String,
    ToolCategory,
    ToolStatus,
    Option<String>,
    Option<McpCall>,
);

fn rows(s: &AgentSession) -> Vec<Row> {
    s.tools
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.category,
                t.status,
                t.call_id.clone(),
                t.mcp.clone(),
            )
        })
        .collect()
}

fn row(
    name: &str,
    category: ToolCategory,
    status: ToolStatus,
    id: &str,
    mcp: Option<McpCall>,
) -> Row {
    (
        name.to_string(),
        category,
        status,
        Some(id.to_string()),
        mcp,
    )
}

/// Every call of a real transcript has both its records' times.
fn assert_all_ended(s: &AgentSession) {
    for t in &s.tools {
        assert!(
            t.start_ms.is_some() && t.end_ms.is_some() && t.start_ms <= t.end_ms,
            "{}: {:?}..{:?}",
            t.name,
            t.start_ms,
            t.end_ms
        );
    }
}

#[test]
fn claude_code_real_mcp_run() {
    use {ToolCategory::*, ToolStatus::*};
    let s = parse(Provider::Claude, CLAUDE_MCP);
    let work = "/var/tmp/agentsight-e2e-claude-mcp-28568-1/work";
    let notes = format!("{work}/mcp-notes.txt");
    assert_eq!(
        rows(&s),
        [
            row(
                "mcp__fs__write_file",
                Mcp,
                Ok,
                "toolu_e2e000001",
                call(
                    Some("fs"),
                    Some("write_file"),
                    Some(json!({"path": notes, "content": "first note\nsecond note\n"}))
                )
            ),
            row(
                "mcp__fs__read_text_file",
                Mcp,
                Ok,
                "toolu_e2e000003",
                call(
                    Some("fs"),
                    Some("read_text_file"),
                    Some(json!({"path": notes}))
                )
            ),
            row(
                "mcp__fs__list_directory",
                Mcp,
                Ok,
                "toolu_e2e000005",
                call(
                    Some("fs"),
                    Some("list_directory"),
                    Some(json!({"path": work}))
                )
            ),
            row("Bash", Shell, Ok, "toolu_e2e000007", None),
        ]
    );
    assert_eq!(s.tools[3].command.as_deref(), Some("wc -l mcp-notes.txt"));
    assert_all_ended(&s);
    assert_eq!(s.stats.bad_lines, 0);
}

#[test]
fn claude_code_real_refused_mcp_call_is_failed() {
    let s = parse(Provider::Claude, CLAUDE_REFUSED);
    assert_eq!(
        rows(&s),
        [row(
            "mcp__fs__write_file",
            ToolCategory::Mcp,
            ToolStatus::Failed,
            "toolu_e2e000001",
            call(
                Some("fs"),
                Some("write_file"),
                Some(json!({
                    "path": "/var/tmp/agentsight-e2e-claude-mcp_refused-28568-2/tmp/outside.txt",
                    "content": "should not be written\n"
                }))
            )
        )]
    );
    assert_all_ended(&s);
    assert_eq!(s.stats.bad_lines, 0);
}

#[test]
fn codex_real_mcp_run_with_tool_search() {
    use {ToolCategory::*, ToolStatus::*};
    let s = parse(Provider::Codex, CODEX_MCP);
    let work = "/var/tmp/agentsight-e2e-codex-mcp-24613-8/work";
    let notes = format!("{work}/mcp-notes.txt");
    assert_eq!(
        rows(&s),
        [
            // Codex 0.169 defers MCP tools: the model searches first
            // (client-executed tool_search, arguments an object).
            row("tool_search", Search, Ok, "call_e2e000003", None),
            row(
                "mcp__fs__write_file",
                Mcp,
                Ok,
                "call_e2e000007",
                call(
                    Some("fs"),
                    Some("write_file"),
                    Some(json!({"path": notes, "content": "first note\nsecond note\n"}))
                )
            ),
            row("tool_search", Search, Ok, "call_e2e000010", None),
            row(
                "mcp__fs__read_text_file",
                Mcp,
                Ok,
                "call_e2e000014",
                call(
                    Some("fs"),
                    Some("read_text_file"),
                    Some(json!({"path": notes}))
                )
            ),
            // The namespace was already loaded: no search before it.
            row(
                "mcp__fs__list_directory",
                Mcp,
                Ok,
                "call_e2e000018",
                call(
                    Some("fs"),
                    Some("list_directory"),
                    Some(json!({"path": work}))
                )
            ),
            row("exec_command", Shell, Ok, "call_e2e000022", None),
        ]
    );
    let searches: Vec<Option<&str>> = s
        .tools
        .iter()
        .filter(|t| t.name == "tool_search")
        .map(|t| t.command.as_deref())
        .collect();
    assert_eq!(searches, [Some("fs write_file"), Some("fs read_text_file")]);
    assert_eq!(s.tools[5].command.as_deref(), Some("wc -l mcp-notes.txt"));
    assert_eq!(s.tools[5].exit_code, Some(0));
    // The write ends at its `McpToolCall` item, before its
    // function_call_output.
    assert_eq!(
        (s.tools[1].start_ms, s.tools[1].end_ms),
        (
            agentsight_sessions::parse_ts("2026-12-02T07:45:46.362Z"),
            agentsight_sessions::parse_ts("2026-12-02T07:45:46.383Z")
        )
    );
    assert_all_ended(&s);
    assert_eq!(s.stats.bad_lines, 0);
}

#[test]
fn codex_real_refused_mcp_call_is_failed() {
    use {ToolCategory::*, ToolStatus::*};
    let s = parse(Provider::Codex, CODEX_REFUSED);
    assert_eq!(
        rows(&s),
        [
            row("tool_search", Search, Ok, "call_e2e000003", None),
            // Its function_call_output (an array of input_text items) says
            // nothing of the refusal; the McpToolCall item says `failed`.
            row(
                "mcp__fs__write_file",
                Mcp,
                Failed,
                "call_e2e000007",
                call(
                    Some("fs"),
                    Some("write_file"),
                    Some(json!({
                        "path": "/var/tmp/agentsight-e2e-codex-mcp_refused-24613-11/tmp/outside.txt",
                        "content": "should not be written\n"
                    }))
                )
            ),
        ]
    );
    assert_all_ended(&s);
    assert_eq!(s.stats.bad_lines, 0);
}

#[test]
fn gemini_cli_real_mcp_run() {
    use {ToolCategory::*, ToolStatus::*};
    let s = parse(Provider::Gemini, GEMINI_MCP);
    let work = "/var/tmp/agentsight-e2e-gemini-mcp-24613-14/work";
    let notes = format!("{work}/mcp-notes.txt");
    // `mcp_fs_write_file` splits more than one way: the server is left to
    // the configuration.
    assert_eq!(
        rows(&s),
        [
            row(
                "mcp_fs_write_file",
                Mcp,
                Ok,
                "mcp_fs_write_file__mcp_fs_write_file_1796197600732_0",
                call(
                    None,
                    None,
                    Some(json!({"path": notes, "content": "first note\nsecond note\n"}))
                )
            ),
            row(
                "mcp_fs_read_text_file",
                Mcp,
                Ok,
                "mcp_fs_read_text_file__mcp_fs_read_text_file_1796197601018_0",
                call(None, None, Some(json!({"path": notes})))
            ),
            row(
                "mcp_fs_list_directory",
                Mcp,
                Ok,
                "mcp_fs_list_directory__mcp_fs_list_directory_1796197601089_0",
                call(None, None, Some(json!({"path": work})))
            ),
            row(
                "run_shell_command",
                Shell,
                Ok,
                "run_shell_command__run_shell_command_1796197601162_0",
                None
            ),
        ]
    );
    assert_eq!(s.cwd.as_deref(), Some(work));
    let names = ["fs", "legacy_sse", "web_api"];
    let resolved: Vec<Option<(String, String)>> = s
        .tools
        .iter()
        .map(|t| mcp::resolve_name(Provider::Gemini, &t.name, &names))
        .collect();
    let fs = |t: &str| Some(("fs".to_string(), t.to_string()));
    assert_eq!(
        resolved,
        [
            fs("write_file"),
            fs("read_text_file"),
            fs("list_directory"),
            None
        ]
    );
    assert_all_ended(&s);
    assert_eq!(s.stats.bad_lines, 0);
}

#[test]
fn gemini_cli_real_refused_mcp_call_is_failed() {
    let s = parse(Provider::Gemini, GEMINI_REFUSED);
    assert_eq!(
        rows(&s),
        [row(
            "mcp_fs_write_file",
            ToolCategory::Mcp,
            ToolStatus::Failed,
            "mcp_fs_write_file__mcp_fs_write_file_1796197639255_0",
            call(
                None,
                None,
                Some(json!({
                    "path": "/var/tmp/agentsight-e2e-gemini-mcp_refused-24613-17/tmp/outside.txt",
                    "content": "should not be written\n"
                }))
            )
        )]
    );
    assert_eq!(
        s.cwd.as_deref(),
        Some("/var/tmp/agentsight-e2e-gemini-mcp_refused-24613-17/work")
    );
    assert_all_ended(&s);
    assert_eq!(s.stats.bad_lines, 0);
}
