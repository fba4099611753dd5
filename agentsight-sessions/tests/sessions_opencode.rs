//! opencode 1.18.33 sessions (one SQLite database, `opencode.db`, holding
//! every session), recorded offline against the scripted server
//! (`fixtures/sessions/opencode-1.18.33/README.md`): `home/` with the
//! built-in `anthropic` provider (its newest rows only in `opencode.db-wal`),
//! `compat/` with `@ai-sdk/openai-compatible` (checkpointed, vacuumed).
//! Token figures are the server's own, from `server-usage.jsonl`.
use std::path::{Path, PathBuf};

use agentsight_sessions::{
    self as sessions, AgentSession, Bounds, DiscoveryOptions, ErrorKind, ParseBatch, PathAccess,
    Provider, SessionIndex, TokenUsage, ToolCategory, ToolStatus, opencode,
};

const EDIT: &str = "ses_dc91de60fffe143stbETqZSq2W";
const FAILING: &str = "ses_dc91d5fecffegkeh4F9Hy0tzkB";
const PARALLEL: &str = "ses_dc91ce720ffepDCXeHnNkYstFH";
const ERRORS: &str = "ses_dc91c9ca0ffezSnHAyOoHdUkH4";
const C_EDIT: &str = "ses_dc90ff55bffe6rGSq4h6FGPpu1";
const C_FAILING: &str = "ses_dc90fc3cbffe9346aU6gtOQ6Kz";
const C_PARALLEL: &str = "ses_dc90f92d3ffexcTo487rpo020S";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions/opencode-1.18.33")
}

/// A copy of a fixture home in a temporary directory: SQLite creates the
/// `-shm` beside a WAL database it opens, which must not touch the tree.
fn copy_home(set: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = fixture().join(set).join(".local/share/opencode");
    let dst = dir.path().join(".local/share/opencode");
    std::fs::create_dir_all(&dst).expect("mkdir");
    for e in std::fs::read_dir(&src).expect("fixture dir").flatten() {
        std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy");
    }
    let home = dir.path().to_path_buf();
    (dir, home)
}

fn db(home: &Path) -> PathBuf {
    home.join(".local/share/opencode/opencode.db")
}

fn parse(home: &Path, id: &str) -> AgentSession {
    sessions::parse_session_in(
        Provider::Opencode,
        &db(home),
        Some(id),
        &Bounds::default(),
        &mut ParseBatch::default(),
    )
    .expect("parse fixture")
}

/// The server's usage of one run by opencode's rule, from its log.
fn server_usage(set: &str, runs: &[&str]) -> TokenUsage {
    let text = std::fs::read_to_string(fixture().join("server-usage.jsonl")).expect("log");
    let mut sum = TokenUsage::default();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        if v["set"] != set || !runs.iter().any(|r| v["run"] == *r) || v["kind"] != "main" {
            continue;
        }
        let u = &v["usage"];
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let one = if set == "compat" {
            let cached = u["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
            let reasoning = u["completion_tokens_details"]["reasoning_tokens"]
                .as_u64()
                .unwrap_or(0);
            TokenUsage::new(
                n("prompt_tokens") - cached,
                n("completion_tokens"),
                cached,
                0,
                reasoning,
            )
        } else {
            TokenUsage::new(
                n("input_tokens"),
                n("output_tokens"),
                n("cache_read_input_tokens"),
                n("cache_creation_input_tokens"),
                0,
            )
        };
        sum.add(&one);
    }
    sum
}

type Row<'a> = (
    &'a str,
    &'a str,
    ToolCategory,
    Option<&'a str>,
    Vec<(&'a str, PathAccess)>,
    ToolStatus,
    Option<i32>,
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
            )
        })
        .collect()
}

#[test]
fn edit_session_with_its_continuation_read_from_the_wal() {
    let (_d, home) = copy_home("home");
    let s = parse(&home, EDIT);
    assert_eq!(s.session_id, EDIT);
    assert_eq!(s.cwd.as_deref(), Some("/home/u/work/edit"));
    assert_eq!(s.title.as_deref(), Some("OK"));
    assert_eq!(s.agent_version.as_deref(), Some("1.18.33"));
    assert_eq!(s.parent_session_id, None);
    assert_eq!(s.models, vec!["m".to_string()]);
    // opencode run quotes an argument holding spaces before storing it.
    let prompts: Vec<&str> = s.prompts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        prompts,
        vec![
            "\"Create hello.txt saying hello from the agent, then show me its contents and line count.\"",
            "\"Summarise the notes once more, in one sentence.\"",
        ]
    );
    assert_eq!(
        tools(&s),
        vec![
            (
                "toolu_e2e000002",
                "write",
                ToolCategory::Edit,
                None,
                vec![("/home/u/work/edit/hello.txt", PathAccess::Create)],
                ToolStatus::Ok,
                None,
            ),
            (
                "toolu_e2e000004",
                "bash",
                ToolCategory::Shell,
                Some("cat hello.txt && wc -l hello.txt"),
                vec![],
                ToolStatus::Ok,
                Some(0),
            ),
        ]
    );
    assert_eq!(s.tools[1].cwd.as_deref(), Some("/home/u/work/edit"));
    assert!(
        s.tools
            .iter()
            .all(|t| t.start_ms.is_some() && t.end_ms >= t.start_ms)
    );
    assert_eq!(s.response_count, 4);
    let texts: Vec<&str> = s.responses.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "Writing the file.",
            "Checking it.",
            "hello.txt holds one line: hello from the agent.",
            "Once more: the build needs the release profile.",
        ]
    );
    assert_eq!(s.responses[3].prompt_index, Some(1));
    // The title call (aux) is in no total; message tokens counted, never
    // the step-finish copies.
    assert_eq!(s.usage, server_usage("anthropic", &["edit", "continue"]));
    assert_eq!(s.usage.total, 1640 + 1193 + 1296 + 1640);
    assert!(s.errors.is_empty());
}

#[test]
fn without_its_wal_the_continuation_is_missing() {
    let (_d, home) = copy_home("home");
    std::fs::remove_file(db(&home).with_file_name("opencode.db-wal")).expect("rm wal");
    // The continuation's user and assistant messages live only in the WAL.
    let s = parse(&home, EDIT);
    assert_eq!(s.prompts.len(), 1);
    assert_eq!(s.response_count, 3);
}

#[test]
fn failing_and_parallel_sessions() {
    let (_d, home) = copy_home("home");
    let s = parse(&home, FAILING);
    assert_eq!(
        tools(&s),
        vec![(
            "toolu_e2e000002",
            "bash",
            ToolCategory::Shell,
            Some("sh -c 'echo check failed: 2 problems; exit 3'"),
            vec![],
            // opencode stores `completed` with `metadata.exit` 3.
            ToolStatus::Failed,
            Some(3),
        )]
    );
    assert_eq!(s.usage, server_usage("anthropic", &["failing"]));
    let p = parse(&home, PARALLEL);
    assert_eq!(
        tools(&p),
        vec![
            (
                "toolu_e2e000002",
                "bash",
                ToolCategory::Shell,
                Some("echo marker-one"),
                vec![],
                ToolStatus::Ok,
                Some(0),
            ),
            (
                "toolu_e2e000003",
                "bash",
                ToolCategory::Shell,
                Some("wc -l notes.txt"),
                vec![],
                ToolStatus::Ok,
                Some(0),
            ),
            (
                "toolu_e2e000004",
                "read",
                ToolCategory::Read,
                None,
                vec![("/home/u/work/parallel/notes.txt", PathAccess::Read)],
                ToolStatus::Ok,
                None,
            ),
        ]
    );
    assert_eq!(p.usage, server_usage("anthropic", &["parallel"]));
}

#[test]
fn an_api_error_is_an_error_event() {
    let (_d, home) = copy_home("home");
    let s = parse(&home, ERRORS);
    assert_eq!(s.errors.len(), 1);
    assert_eq!(s.errors[0].kind, ErrorKind::ApiError);
    assert_eq!(
        s.errors[0].message,
        "Internal Server Error: {\"error\":{\"message\":\"MCP tool fs/write_file not offered\"}}"
    );
    assert_eq!(s.errors[0].prompt_index, Some(0));
    assert!(s.tools.is_empty());
    assert_eq!(s.usage, TokenUsage::default());
}

#[test]
fn openai_compatible_tokens_exclude_cache_and_reasoning_from_opencodes_fields() {
    let (_d, home) = copy_home("compat");
    for (id, run) in [
        (C_EDIT, "edit"),
        (C_FAILING, "failing"),
        (C_PARALLEL, "parallel"),
    ] {
        let s = parse(&home, id);
        assert_eq!(s.usage, server_usage("compat", &[run]), "{run}");
    }
    let s = parse(&home, C_EDIT);
    assert_eq!(s.usage.reasoning, 10 + 11 + 12);
    assert_eq!(s.usage.total, 1050 + 1154 + 1258);
}

#[test]
fn no_id_and_unknown_id_are_format_errors() {
    let (_d, home) = copy_home("home");
    let e = sessions::parse_file(Provider::Opencode, &db(&home)).expect_err("needs an id");
    assert!(e.to_string().contains("a session id is needed"), "{e}");
    let e = sessions::parse_session_in(
        Provider::Opencode,
        &db(&home),
        Some("ses_nope"),
        &Bounds::default(),
        &mut ParseBatch::default(),
    )
    .expect_err("unknown");
    assert!(e.to_string().contains("no session ses_nope"), "{e}");
}

#[test]
fn corrupt_and_locked_databases_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("opencode.db");
    std::fs::write(
        &bad,
        b"this is not a database, it is a text file of some length.....",
    )
    .expect("write");
    let e = opencode::sessions_between(&bad, 0, i64::MAX).expect_err("corrupt");
    assert!(e.to_string().starts_with("sqlite "), "{e}");

    // A rollback-journal database held by an exclusive writer. This is
    // opencode's own database (the agent's store, not a capture): the test
    // plays opencode itself holding it, which only SQL can do.
    let locked = dir.path().join("opencode-locked.db");
    let (_h, home) = copy_home("compat");
    std::fs::copy(db(&home), &locked).expect("copy");
    let w = rusqlite::Connection::open(&locked).expect("open");
    w.execute_batch("PRAGMA journal_mode=DELETE; BEGIN EXCLUSIVE; DELETE FROM todo;")
        .expect("lock");
    let t = std::time::Instant::now();
    let e = opencode::sessions_between(&locked, 0, i64::MAX).expect_err("locked");
    assert!(e.to_string().contains("locked"), "{e}");
    assert!(t.elapsed() < std::time::Duration::from_secs(2));
    drop(w);
}

#[test]
fn sessions_between_for_the_recorder() {
    let (_d, home) = copy_home("home");
    let all = opencode::sessions_between(&db(&home), 0, i64::MAX).expect("read");
    let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec![EDIT, FAILING, PARALLEL, ERRORS]);
    assert_eq!(all[1].directory.as_deref(), Some("/home/u/work/failing"));
    assert_eq!(all[1].parent_id, None);
    let f = &all[1];
    let (Some(c), Some(u)) = (f.created_ms, f.updated_ms) else {
        panic!("times")
    };
    let within = opencode::sessions_between(&db(&home), c, u).expect("read");
    assert!(within.iter().any(|s| s.id == FAILING));
    assert!(
        opencode::sessions_between(&db(&home), 0, 1)
            .expect("read")
            .is_empty()
    );
}

#[test]
fn discovery_lists_every_session_of_the_database_and_resolves_ids() {
    let (_d, home) = copy_home("home");
    let opts = DiscoveryOptions {
        home: Some(home.clone()),
        ..Default::default()
    };
    let mut idx = SessionIndex::new(opts.clone());
    let listing = idx.list().expect("list");
    let mut ids: Vec<&str> = listing
        .sessions
        .iter()
        .filter(|s| s.provider == Provider::Opencode)
        .map(|s| s.session_id.as_str())
        .collect();
    ids.sort_unstable();
    let mut want = vec![EDIT, FAILING, PARALLEL, ERRORS];
    want.sort_unstable();
    assert_eq!(ids, want);
    let edit = listing
        .sessions
        .iter()
        .find(|s| s.session_id == EDIT)
        .expect("edit row");
    assert_eq!(edit.path, db(&home));
    assert_eq!(edit.prompts, Some(2));
    assert_eq!(edit.cwd.as_deref(), Some("/home/u/work/edit"));
    let r = idx.resolve(FAILING).expect("resolve").expect("found");
    assert_eq!(
        (r.provider, r.path.clone()),
        (Provider::Opencode, db(&home))
    );
    let r = idx.resolve("ses_dc91ce72").expect("prefix").expect("found");
    assert_eq!(r.session_id, PARALLEL);
    assert_eq!(sessions::parse_session(&r).expect("parse").tool_count, 3);
    for name in ["opencode.db", "opencode.db-wal", "opencode.db-shm"] {
        let p = home.join(".local/share/opencode").join(name);
        assert_eq!(sessions::session_id_for_path(&p), None, "{name}");
    }
}

#[test]
fn live_facts_of_a_finished_session() {
    let (_d, home) = copy_home("home");
    let f = opencode::live::facts(&db(&home), EDIT).expect("facts");
    assert_eq!(f.cwd.as_deref(), Some("/home/u/work/edit"));
    assert_eq!(f.model.as_deref(), Some("m"));
    assert!(
        matches!(f.turn, sessions::live::TurnStatus::Done { .. }),
        "{:?}",
        f.turn
    );
}

#[test]
fn mcp_servers_from_the_config_and_tool_names() {
    use agentsight_sessions::mcp::{McpPlaces, config_home, configured_servers, resolve_name};
    let (_d, home) = copy_home("compat");
    let cfg = home.join(".config/opencode");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    std::fs::write(
        cfg.join("opencode.json"),
        r#"{
  // comments are allowed
  "mcp": {
    "fs": {"type": "local", "command": ["node", "/opt/server-filesystem/dist/index.js", "/home/u/work"], "enabled": true},
    "off": {"type": "local", "command": ["x"], "enabled": false},
    "web": {"type": "remote", "url": "http://127.0.0.1:9/mcp"}
  }
}"#,
    )
    .expect("write");
    assert_eq!(
        config_home(Provider::Opencode, &db(&home)),
        Some(home.clone())
    );
    let got = configured_servers(
        Provider::Opencode,
        &McpPlaces {
            home: home.clone(),
            project: None,
            argv: Vec::new(),
            env: Vec::new(),
        },
    );
    let names: Vec<&str> = got.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["fs", "web"]);
    assert_eq!(
        got.servers[0].command,
        vec![
            "node",
            "/opt/server-filesystem/dist/index.js",
            "/home/u/work"
        ]
    );
    assert!(got.problems.is_empty(), "{:?}", got.problems);
    assert_eq!(
        resolve_name(Provider::Opencode, "fs_write_file", &["fs", "web"]),
        Some(("fs".to_string(), "write_file".to_string()))
    );
}
