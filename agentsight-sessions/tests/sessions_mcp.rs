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
