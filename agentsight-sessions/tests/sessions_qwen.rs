//! Qwen Code 0.24.4 chats recorded from the pinned CLI against the scripted
//! Chat Completions server (`fixtures/sessions/qwen-0.24.4/README.md`).
//! Usage figures are the server's: each response's `prompt_tokens` (cached
//! included), `cached_tokens`, `completion_tokens` (reasoning included) and
//! `reasoning_tokens`, as the server logged them.

use std::path::{Path, PathBuf};

use agentsight_sessions::discovery::{DiscoveryOptions, discover, session_id_for_path};
use agentsight_sessions::{
    AgentSession, ErrorKind, PathAccess, Provider, TokenUsage, ToolPath, ToolStatus, parse_file,
    parse_ts,
};

const EDIT: &str = "568487f7-9a4b-480e-b77d-02630bb4efa1";
const FAILING: &str = "7a8de412-df4b-4768-9312-af9b111459eb";
const PARALLEL: &str = "4aa4a974-ef93-4100-b6b8-91c9acae61e9";
const LIMITED: &str = "25fdd452-d333-42a4-941a-384274915eb4";
const UNAUTHORIZED: &str = "87c8993b-f44d-4645-b522-891412daacee";
const KILLED: &str = "c95be75b-1cea-456f-9730-bc6248d845b9";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions/qwen-0.24.4")
}

fn chat(id: &str) -> PathBuf {
    root().join(format!("home/.qwen/projects/-home-u-work/chats/{id}.jsonl"))
}

fn parse(id: &str) -> AgentSession {
    parse_file(Provider::Qwen, &chat(id)).expect("parse fixture")
}

type Row<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    ToolStatus,
    Option<i32>,
);

fn tools(s: &AgentSession) -> Vec<Row<'_>> {
    s.tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.call_id.as_deref(),
                t.command.as_deref(),
                t.status,
                t.exit_code,
            )
        })
        .collect()
}

/// The edit run and its `--resume` continuation, appended to one file.
#[test]
fn edit_then_resume() {
    let s = parse(EDIT);
    assert_eq!(s.session_id, EDIT);
    assert_eq!(s.conversation_id.as_deref(), Some(EDIT));
    assert_eq!(s.cwd.as_deref(), Some("/home/u/work"));
    assert_eq!(s.agent_version.as_deref(), Some("0.24.4"));
    assert_eq!(s.models, ["qwen3-coder-plus"]);
    assert_eq!(s.start_ms, parse_ts("2026-12-02T13:09:34.948Z"));
    assert_eq!(s.end_ms, parse_ts("2026-12-02T13:10:35.301Z"));
    let prompts: Vec<_> = s.prompts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        prompts,
        [
            "Create hello.txt saying hello from the agent, then show me its contents and line count.",
            "Read hello.txt again and quote it."
        ]
    );
    assert_eq!(s.prompt_count, 2);
    assert_eq!(s.response_count, 5);
    assert_eq!(
        tools(&s),
        [
            (
                "write_file",
                Some("call_e2e000002"),
                None,
                ToolStatus::Ok,
                None
            ),
            (
                "run_shell_command",
                Some("call_e2e000004"),
                Some("cat hello.txt && wc -l hello.txt"),
                ToolStatus::Ok,
                Some(0)
            ),
            (
                "read_file",
                Some("call_e2econtinue_qwen_edit_000002"),
                None,
                ToolStatus::Ok,
                None
            ),
        ]
    );
    let hello = "/home/u/work/hello.txt";
    assert_eq!(s.tools[0].paths, [ToolPath::new(hello, PathAccess::Create)]);
    assert_eq!(s.tools[2].paths, [ToolPath::new(hello, PathAccess::Read)]);
    let prompt_of: Vec<_> = s.tools.iter().map(|t| t.prompt_index).collect();
    assert_eq!(prompt_of, [Some(0), Some(0), Some(1)]);
    assert_eq!(s.tools[0].start_ms, parse_ts("2026-12-02T13:09:35.754Z"));
    assert_eq!(s.tools[0].end_ms, parse_ts("2026-12-02T13:09:36.122Z"));
    // Server: prompt 1000/1100/1200 (cached 0/400/800), completion 50/54/58
    // (reasoning 10/11/12); resumed: prompt 1000/1100 (cached 0/400),
    // completion 50/54 (reasoning 10/11).
    assert_eq!(
        s.responses[1].tokens,
        Some(TokenUsage::new(700, 54, 400, 0, 11))
    );
    assert_eq!(s.usage, TokenUsage::new(3800, 266, 1600, 0, 54));
    assert_eq!(s.usage.total, 5666);
    assert_eq!(s.responses[0].text, "Writing the file.");
    assert_eq!(
        s.responses[0].native_id.as_deref(),
        Some("ea0ba03a-4db9-4913-905e-eacc41e98a6d")
    );
    assert!(s.errors.is_empty());
    assert_eq!(s.stats.bad_lines + s.stats.unknown_records, 0);
}

#[test]
fn failing_shell_and_parallel_calls() {
    let s = parse(FAILING);
    let cmd = "sh -c 'echo check failed: 2 problems; exit 3'";
    assert_eq!(
        tools(&s),
        [(
            "run_shell_command",
            Some("call_e2e000002"),
            Some(cmd),
            ToolStatus::Failed,
            Some(3)
        )]
    );
    assert_eq!(s.usage, TokenUsage::new(1700, 104, 400, 0, 21));

    let s = parse(PARALLEL);
    assert_eq!(
        tools(&s),
        [
            (
                "run_shell_command",
                Some("call_e2e000002"),
                Some("echo marker-one"),
                ToolStatus::Ok,
                Some(0)
            ),
            (
                "run_shell_command",
                Some("call_e2e000003"),
                Some("wc -l notes.txt"),
                ToolStatus::Failed,
                Some(1)
            ),
            (
                "read_file",
                Some("call_e2e000004"),
                None,
                ToolStatus::Failed,
                None
            ),
        ]
    );
    assert_eq!(
        s.tools[2].paths,
        [ToolPath::new("/home/u/work/notes.txt", PathAccess::Read)]
    );
    assert_eq!(s.response_count, 2);
}

/// 429 and 401: one `qwen-code.api_error` once the CLI gives up.
#[test]
fn api_errors() {
    let s = parse(LIMITED);
    assert_eq!(s.errors.len(), 1);
    assert_eq!(s.errors[0].kind, ErrorKind::RateLimit);
    assert_eq!(
        s.errors[0].message,
        "429 Rate limit reached for requests. Please try again in 20s."
    );
    assert_eq!((s.prompt_count, s.response_count), (1, 0));
    let s = parse(UNAUTHORIZED);
    assert_eq!(s.errors.len(), 1);
    assert_eq!(s.errors[0].kind, ErrorKind::ApiError);
    assert_eq!(
        s.errors[0].message,
        "401 Incorrect API key provided: sk-agent***e2e."
    );
    let s = parse(KILLED);
    assert_eq!((s.prompt_count, s.response_count, s.tool_count), (1, 0, 0));
    assert_eq!(
        s.prompts[0].text,
        "Run the slow check and tell me when it is done."
    );
}

/// A line cut by a writer still at work is not an error.
#[test]
fn partial_last_line() {
    let p = root().join(format!("cut/{EDIT}.jsonl"));
    let s = parse_file(Provider::Qwen, &p).expect("parse");
    assert!(s.stats.partial_last_line);
    assert_eq!(s.stats.bad_lines, 0);
    assert_eq!(s.stats.lines, 10);
    // The shell call's result is in the cut line: still running.
    assert_eq!(
        tools(&s),
        [
            (
                "write_file",
                Some("call_e2e000002"),
                None,
                ToolStatus::Ok,
                None
            ),
            (
                "run_shell_command",
                Some("call_e2e000004"),
                Some("cat hello.txt && wc -l hello.txt"),
                ToolStatus::Unknown,
                None
            )
        ]
    );
    assert_eq!(s.tools[1].end_ms, None);
    assert_eq!(s.response_count, 2);
}

/// Unknown record types are counted, never fatal; a huge answer is read
/// whole; a deferred MCP call is named after its real tool.
#[test]
fn unknown_records_huge_line_and_deferred_mcp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = std::fs::read_to_string(chat(EDIT)).expect("read");
    let rec = |extra: &str| {
        format!(
            r#"{{"uuid":"x","parentUuid":null,"sessionId":"{EDIT}","timestamp":"2026-12-02T13:11:00.000Z","cwd":"/home/u/work","version":"0.24.4",{extra}}}"#
        )
    };
    text += &(rec(r#""type":"hologram","message":{"parts":[{"text":"?"}]}"#) + "\n");
    text += &(rec(r#""type":"system","subtype":"chat_compression","systemPayload":{}"#) + "\n");
    let big = "y".repeat(3 << 20);
    text += &(rec(&format!(
        r#""type":"assistant","model":"qwen3-coder-plus","message":{{"role":"model","parts":[{{"text":"thinking","thought":true}},{{"text":"{big}"}},{{"functionCall":{{"id":"call_9","name":"tool_call","args":{{"name":"mcp__fs__write_file","arguments":{{"path":"/home/u/work/a.txt","content":"a"}}}}}}}}]}}"#
    )) + "\n");
    let p = dir.path().join(format!("{EDIT}.jsonl"));
    std::fs::write(&p, text).expect("write");
    let s = parse_file(Provider::Qwen, &p).expect("parse");
    assert_eq!(s.stats.unknown_records, 1);
    assert_eq!(s.stats.bad_lines, 0);
    assert_eq!(s.response_count, 6);
    let last = s.responses.last().expect("response");
    // Thought text is reasoning, not answer text; the answer is kept up to
    // the session's text budget.
    assert!(
        last.text.starts_with("yyyy"),
        "thought text is not answer text"
    );
    assert!(last.text.bytes().all(|b| b == b'y'));
    let t = s.tools.last().expect("tool");
    assert_eq!(t.name, "mcp__fs__write_file");
    assert_eq!(t.call_id.as_deref(), Some("call_9"));
    assert_eq!(t.status, ToolStatus::Unknown);
    let mcp = t.mcp.as_ref().expect("mcp");
    assert_eq!(
        (mcp.server.as_deref(), mcp.tool.as_deref()),
        (Some("fs"), Some("write_file"))
    );
}

#[test]
fn discovery_under_home() {
    let opts = DiscoveryOptions {
        home: Some(root().join("home")),
        providers: vec![Provider::Qwen],
        limit: 25,
        max_age: None,
    };
    let mut ids: Vec<(String, Option<String>)> = discover(&opts)
        .expect("discover")
        .into_iter()
        .map(|s| (s.session_id, s.cwd))
        .collect();
    ids.sort();
    let mut want: Vec<_> = [EDIT, FAILING, PARALLEL, LIMITED, UNAUTHORIZED, KILLED]
        .iter()
        .map(|i| (i.to_string(), Some("/home/u/work".to_string())))
        .collect();
    want.sort();
    assert_eq!(ids, want);
}

/// The chat file a process writes names its session, before Claude Code's
/// `projects/` and Gemini CLI's `tmp/…/chats` layouts claim it.
#[test]
fn id_for_path() {
    let q = |p: &str| session_id_for_path(Path::new(p));
    let id = EDIT.to_string();
    assert_eq!(
        q(&format!(
            "/home/u/.qwen/projects/-home-u-work/chats/{EDIT}.jsonl"
        )),
        Some((Provider::Qwen, id.clone()))
    );
    assert_eq!(
        q(&format!(
            "/home/u/.qwen/projects/-home-u-work/chats/archive/{EDIT}.jsonl"
        )),
        Some((Provider::Qwen, id.clone()))
    );
    assert_eq!(
        q(&format!(
            "/tmp/h/.qwen/projects/-tmp-h-w/chats/{EDIT}.jsonl"
        )),
        Some((Provider::Qwen, id.clone()))
    );
    assert_eq!(
        q(&format!(
            "/home/u/.claude/projects/-home-u-work/{EDIT}.jsonl"
        )),
        Some((Provider::Claude, id))
    );
    assert_eq!(
        q("/home/u/.qwen/projects/-home-u-work/chats/x.runtime.json"),
        None
    );
}

mod live {
    use super::*;
    use agentsight_sessions::live::{Signal, TailFacts, Thresholds, TurnStatus, read_tail};

    fn tail(path: &Path) -> TailFacts {
        read_tail(Provider::Qwen, path, &Thresholds::default()).expect("tail")
    }

    fn live(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/live/qwen")
            .join(rel)
    }

    fn done(key: &str) -> TurnStatus {
        TurnStatus::Done {
            key: key.to_string(),
        }
    }

    /// Working → your turn, rate-limited and auth from the records alone.
    #[test]
    fn turn_and_signal() {
        let rows: [(PathBuf, TurnStatus, Option<Signal>, &str); 6] = [
            (
                live("call-running.jsonl"),
                TurnStatus::Open,
                None,
                "2026-12-02T13:09:35.754Z",
            ),
            (
                live("results-pending.jsonl"),
                TurnStatus::Open,
                None,
                "2026-12-02T13:09:36.122Z",
            ),
            (
                chat(EDIT),
                done("8f8784f1-6659-45bd-b23d-3779357f2b09"),
                None,
                "2026-12-02T13:10:35.301Z",
            ),
            (
                chat(KILLED),
                TurnStatus::Open,
                None,
                "2026-12-02T13:25:47.123Z",
            ),
            (
                chat(LIMITED),
                done("2830c029-4f37-4f3b-8448-8907975921c1"),
                Some(Signal::RateLimited { resets_at: None }),
                "2026-12-02T13:11:56.770Z",
            ),
            (
                chat(UNAUTHORIZED),
                done("e7fc23d1-7a1f-404a-a095-b5c25ff7394f"),
                Some(Signal::AuthRequired),
                "2026-12-02T13:13:00.718Z",
            ),
        ];
        for (path, turn, signal, last) in rows {
            let f = tail(&path);
            let name = path.display().to_string();
            assert_eq!(f.turn, turn, "{name}");
            assert_eq!(f.signal, signal, "{name}");
            assert_eq!(f.last_activity, Some(last.parse().expect("ts")), "{name}");
            assert_eq!(f.skipped_lines, 0, "{name}");
            assert_eq!(f.cwd.as_deref(), Some("/home/u/work"), "{name}");
        }
    }

    /// The whole file's tokens and the identity, from a tail at the start.
    #[test]
    fn identity_model_tokens() {
        let f = tail(&chat(EDIT));
        assert_eq!(f.session_id.as_deref(), Some(EDIT));
        assert_eq!(f.model.as_deref(), Some("qwen3-coder-plus"));
        assert_eq!(
            f.first_prompt.as_deref(),
            Some(
                "Create hello.txt saying hello from the agent, then show me its contents and line count."
            )
        );
        assert!(f.tokens.whole_session);
        assert_eq!(
            (f.tokens.input, f.tokens.output, f.tokens.cache_read),
            (3800, 266, 1600)
        );
    }
}

/// `mcpServers` of the user's and the project's `.qwen/settings.json`; the
/// configuration home of a transcript is the parent of its `.qwen`.
#[test]
fn mcp_servers_from_settings() {
    use agentsight_sessions::mcp::{self, McpPlaces, NamePattern};
    let home = tempfile::tempdir().expect("tempdir");
    let project = tempfile::tempdir().expect("tempdir");
    let write = |dir: &Path, text: &str| {
        std::fs::create_dir_all(dir.join(".qwen")).expect("mkdir");
        std::fs::write(dir.join(".qwen/settings.json"), text).expect("write");
    };
    write(
        home.path(),
        r#"{"mcpServers": {"fs": {"command": "node", "args": ["/srv/fs.js", "/home/u/work"]},
            "web": {"httpUrl": "http://127.0.0.1:8790/mcp"}}}"#,
    );
    write(
        project.path(),
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["fs-server"]}}, "mcp": {"excluded": ["web"]}}"#,
    );
    let configs = mcp::configured_servers(
        Provider::Qwen,
        &McpPlaces {
            home: home.path().to_path_buf(),
            project: Some(project.path().to_path_buf()),
            argv: Vec::new(),
            env: Vec::new(),
        },
    );
    let got: Vec<(&str, Vec<&str>)> = configs
        .servers
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.command.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(got, [("fs", vec!["npx", "fs-server"])]);
    assert!(configs.problems.is_empty());
    assert_eq!(
        mcp::config_home(Provider::Qwen, &chat(EDIT)),
        Some(root().join("home"))
    );
    assert_eq!(
        NamePattern::of(Provider::Qwen),
        Some(NamePattern::McpDoubleUnderscore)
    );
}
