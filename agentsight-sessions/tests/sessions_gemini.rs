//! Gemini CLI chats: legacy .json, .jsonl event log with $set/$rewindTo.
mod sessions_common;

use agentsight_sessions::{ErrorKind, PathAccess, Provider, TokenUsage, ToolStatus};
use sessions_common::{parse, ts};

const LEGACY: &str = ".gemini/tmp/shop/chats/session-2026-01-10T08-00-5e1f0c2a.json";
const JSONL: &str = ".gemini/tmp/shop/chats/session-2026-05-01T08-00-7a3c9e10.jsonl";

#[test]
fn legacy_json_record() {
    let s = parse(Provider::Gemini, LEGACY);
    assert_eq!(s.session_id, "5e1f0c2a-0000-4000-8000-0000000000aa");
    assert_eq!(
        s.cwd.as_deref(),
        Some("/home/dev/shop"),
        "from .project_root"
    );
    assert_eq!(s.models, ["gemini-2.5-pro"]);
    assert_eq!(s.start_ms, ts("2026-01-10T08:00:00.000Z"));
    assert_eq!(s.end_ms, ts("2026-01-10T08:01:10.000Z"));
    assert_eq!(
        s.prompts
            .iter()
            .map(|p| p.text.as_str())
            .collect::<Vec<_>>(),
        ["list files", "read README.md"]
    );
    // cached is inside input; thoughts add to output; tool to input.
    assert_eq!(
        s.responses[0].tokens,
        Some(TokenUsage::new(2200, 120, 3000, 0, 80))
    );
    assert_eq!(s.responses[0].tokens.map(|t| t.total), Some(5320));
    assert_eq!(
        s.responses[1].tokens,
        Some(TokenUsage::new(1010, 20, 5000, 0, 0))
    );
    assert_eq!(s.usage, TokenUsage::new(3210, 140, 8000, 0, 80));
    assert_eq!(s.responses[1].native_id.as_deref(), Some("m-4"));
    let t: Vec<_> = s
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.status, t.prompt_index))
        .collect();
    assert_eq!(
        t,
        [
            ("list_directory", ToolStatus::Ok, Some(0)),
            ("read_file", ToolStatus::Failed, Some(1))
        ]
    );
    assert_eq!(
        s.tools[1].paths[0].path, "/home/dev/shop/README.md",
        "old absolute_path spelling"
    );
    assert_eq!(s.tools[1].end_ms, ts("2026-01-10T08:00:33.200Z"));
    assert_eq!(s.errors.len(), 1);
    assert_eq!(s.errors[0].kind, ErrorKind::Error);
    assert!(s.errors[0].message.starts_with("Quota exceeded"));
}

#[test]
fn jsonl_replay_set_and_rewind() {
    let s = parse(Provider::Gemini, JSONL);
    assert_eq!(s.session_id, "7a3c9e10-0000-4000-8000-0000000000bb");
    assert_eq!(
        s.title.as_deref(),
        Some("List and summarise files"),
        "from $set.summary"
    );
    assert_eq!(
        s.end_ms,
        ts("2026-05-01T08:02:30.000Z"),
        "from $set.lastUpdated"
    );
    // m-3/m-4 were rewound away; m-2 was re-appended with tokens (counted once).
    let p: Vec<_> = s
        .prompts
        .iter()
        .map(|p| (p.index, p.text.as_str()))
        .collect();
    assert_eq!(
        p,
        [
            (0, "list files"),
            (1, "write a summary to NOTES.md instead")
        ]
    );
    assert!(!s.tools.iter().any(|t| t.name == "write_file"));
    let ids: Vec<_> = s.responses.iter().map(|r| r.native_id.as_deref()).collect();
    assert_eq!(ids, [Some("m-2"), Some("m-6"), Some("s-2")]);
    assert_eq!(
        s.responses[0].tokens,
        Some(TokenUsage::new(2200, 40, 3000, 0, 0))
    );
    assert_eq!(s.responses[0].text, "Here are the files.");
    assert_eq!(
        s.tools[0].status,
        ToolStatus::Ok,
        "last version of m-2 wins"
    );
    assert_eq!(s.usage, TokenUsage::new(4205, 140, 9000, 0, 10));
    assert_eq!(s.usage.total, 13_345);
}

#[test]
fn jsonl_tools_and_subagent() {
    let s = parse(Provider::Gemini, JSONL);
    let t: Vec<_> = s
        .tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.call_id.as_deref(),
                t.status,
                t.prompt_index,
                t.subagent,
            )
        })
        .collect();
    assert_eq!(
        t,
        [
            (
                "list_directory",
                Some("call-1"),
                ToolStatus::Ok,
                Some(0),
                None
            ),
            (
                "run_shell_command",
                Some("call-3"),
                ToolStatus::Ok,
                Some(1),
                None
            ),
            (
                "codebase_investigator",
                Some("call-4"),
                ToolStatus::Ok,
                Some(1),
                None
            ),
            (
                "web_fetch",
                Some("call-5"),
                ToolStatus::Failed,
                Some(1),
                None
            ),
            // Gemini CLI says `success`; the result's `Exit Code: 1` says not.
            (
                "run_shell_command",
                Some("call-6"),
                ToolStatus::Failed,
                Some(1),
                None
            ),
            (
                "read_file",
                Some("call-s1"),
                ToolStatus::Ok,
                Some(1),
                Some(0)
            ),
        ]
    );
    assert_eq!(s.tools[1].command.as_deref(), Some("wc -l NOTES.md"));
    assert_eq!(s.tools[1].cwd.as_deref(), Some("/home/dev/shop"));
    assert_eq!(s.tools[3].domains, ["example.org", "docs.example.com"]);
    assert_eq!(s.tools[5].paths[0].path, "/home/dev/shop/NOTES.md");
    assert_eq!(s.tools[5].paths[0].access, PathAccess::Read);
    // A code only where a shell result states one: none for a command that
    // succeeded (Gemini CLI writes `Exit Code:` only when non-zero).
    assert_eq!(
        s.tools.iter().map(|t| t.exit_code).collect::<Vec<_>>(),
        [None, None, None, None, Some(1), None]
    );
    assert_eq!(s.subagents.len(), 1);
    let a = &s.subagents[0];
    assert_eq!(
        a.agent_id.as_deref(),
        Some("9d1e2f30-0000-4000-8000-0000000000cc")
    );
    assert_eq!(a.kind.as_deref(), Some("subagent"));
    assert_eq!(a.parent_call_id.as_deref(), Some("call-4"));
    assert_eq!(a.usage, TokenUsage::new(1000, 30, 0, 0, 0));
}

/// A real Gemini CLI 0.61.0 chat (the e2e `inspect` scenario continued with
/// `gemini --resume UUID`; paths renamed to /home/dev/work). On resume the
/// CLI appended a second metadata line, a `$set.messages` holding only the
/// session context, then a `$set.messages` rebuilt from the API history: the
/// earlier messages without `toolCalls`, `tokens`, `model` or their own
/// timestamps (all reset to the resume), calls as `functionCall` parts, and
/// each earlier result twice (`<id>_response` and the original message).
#[test]
fn jsonl_after_resume_keeps_earlier_calls_once() {
    let path = sessions_common::fixtures().join(
        "../gemini-resume/home/.gemini/tmp/work/chats/session-2026-12-01T12-35-ca9aa233.jsonl",
    );
    let s = agentsight_sessions::parse_file(Provider::Gemini, &path).expect("parse");
    assert_eq!(s.session_id, "ca9aa233-cec4-4674-b04d-95038af60e2d");
    assert_eq!(s.cwd.as_deref(), Some("/home/dev/work"));
    // First header's startTime; the resume's second header does not move it.
    assert_eq!(s.start_ms, ts("2026-12-01T12:35:34.389Z"));
    assert_eq!(s.end_ms, ts("2026-12-01T12:35:36.899Z"));
    // The doubled results are user-role messages without text: no prompts.
    let p: Vec<_> = s
        .prompts
        .iter()
        .map(|p| (p.index, p.ts_ms, p.text.as_str()))
        .collect();
    assert_eq!(
        p,
        [
            (
                0,
                ts("2026-12-01T12:35:34.402Z"),
                "Look at this project: list its files, then read notes.txt and tell me what it says."
            ),
            (
                1,
                ts("2026-12-01T12:35:36.745Z"),
                "Read notes.txt again and quote it."
            )
        ]
    );
    let t: Vec<_> = s
        .tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.call_id.as_deref(),
                t.status,
                t.prompt_index,
                t.paths
                    .iter()
                    .map(|p| (p.path.as_str(), p.access))
                    .collect::<Vec<_>>(),
                t.start_ms,
                t.end_ms,
            )
        })
        .collect();
    assert_eq!(
        t,
        [
            (
                "list_directory",
                Some("list_directory__list_directory_1796128534434_0"),
                ToolStatus::Ok,
                Some(0),
                vec![("/home/dev/work", PathAccess::Read)],
                ts("2026-12-01T12:35:34.493Z"),
                ts("2026-12-01T12:35:34.504Z")
            ),
            (
                "read_file",
                Some("read_file__read_file_1796128534515_0"),
                ToolStatus::Ok,
                Some(0),
                vec![("/home/dev/work/notes.txt", PathAccess::Read)],
                ts("2026-12-01T12:35:34.518Z"),
                ts("2026-12-01T12:35:34.525Z")
            ),
            (
                "read_file",
                Some("read_file__read_file_1796128536783_0"),
                ToolStatus::Ok,
                Some(1),
                vec![("/home/dev/work/notes.txt", PathAccess::Read)],
                ts("2026-12-01T12:35:36.868Z"),
                ts("2026-12-01T12:35:36.884Z")
            ),
        ]
    );
    // Each model turn once, with the model, usage and time it was written
    // with before the rewrite.
    let r: Vec<_> = s
        .responses
        .iter()
        .map(|r| {
            (
                r.text.as_str(),
                r.model.as_deref(),
                r.ts_ms,
                r.tokens,
                r.prompt_index,
            )
        })
        .collect();
    let flash = Some("gemini-2.5-flash");
    assert_eq!(
        r,
        [
            (
                "Listing the project first.",
                flash,
                ts("2026-12-01T12:35:34.493Z"),
                Some(TokenUsage::new(1000, 50, 0, 0, 10)),
                Some(0)
            ),
            (
                "Now reading the notes.",
                flash,
                ts("2026-12-01T12:35:34.518Z"),
                Some(TokenUsage::new(700, 54, 400, 0, 11)),
                Some(0)
            ),
            (
                "notes.txt says the build needs the release profile.",
                flash,
                ts("2026-12-01T12:35:34.533Z"),
                Some(TokenUsage::new(400, 58, 800, 0, 12)),
                Some(0)
            ),
            (
                "Reading the notes again.",
                flash,
                ts("2026-12-01T12:35:36.868Z"),
                Some(TokenUsage::new(1000, 50, 0, 0, 10)),
                Some(1)
            ),
            (
                "notes.txt still says: The build needs the release profile.",
                flash,
                ts("2026-12-01T12:35:36.899Z"),
                Some(TokenUsage::new(700, 54, 400, 0, 11)),
                Some(1)
            ),
        ]
    );
    assert_eq!(s.usage, TokenUsage::new(3800, 266, 1600, 0, 54));
    assert_eq!(s.models, ["gemini-2.5-flash"]);
    assert_eq!(
        (s.stats.lines, s.stats.bad_lines, s.stats.unknown_records),
        (29, 0, 0)
    );
}
