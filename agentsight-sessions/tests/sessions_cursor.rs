//! Cursor transcripts and read-only state.vscdb enrichment.
mod sessions_common;

use agentsight_sessions::{self as sessions, PathAccess, Provider, TokenUsage, ToolStatus, cursor};
use sessions_common::parse;

const WEB: &str =
    ".cursor/projects/home-dev-web/agent-transcripts/c0ffee00-1111-4222-8333-444455556666.jsonl";
const ID: &str = "c0ffee00-1111-4222-8333-444455556666";
const SUB: &str = "5ab00000-aaaa-4bbb-8ccc-dddddddddddd";

#[test]
fn transcript_without_times_models_or_results() {
    let s = parse(Provider::Cursor, WEB);
    assert_eq!(s.session_id, ID);
    assert_eq!(
        s.conversation_id, None,
        "no id recorded in the transcript itself"
    );
    assert_eq!(
        s.cwd.as_deref(),
        Some("/home/dev/web"),
        "Shell working_directory"
    );
    assert_eq!((s.start_ms, s.end_ms), (None, None), "never synthesized");
    assert!(s.models.is_empty());
    assert!(s.usage.is_zero());
    let p: Vec<_> = s.prompts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(p, ["why does the build fail?", "now delete the old config"]);
    let t: Vec<_> = s
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.prompt_index, t.subagent, t.status))
        .collect();
    assert_eq!(
        t,
        [
            ("Shell", Some(0), None, ToolStatus::Unknown),
            ("ReadFile", Some(0), None, ToolStatus::Unknown),
            ("StrReplace", Some(0), None, ToolStatus::Unknown),
            ("Delete", Some(1), None, ToolStatus::Unknown),
            ("WebFetch", Some(1), None, ToolStatus::Unknown),
            ("Grep", None, Some(0), ToolStatus::Unknown),
        ]
    );
    let acc: Vec<_> = s
        .tools
        .iter()
        .flat_map(|t| t.paths.iter().map(|p| (p.path.as_str(), p.access)))
        .collect();
    assert_eq!(
        acc,
        [
            ("/home/dev/web/src/index.ts", PathAccess::Read),
            ("/home/dev/web/src/index.ts", PathAccess::Write),
            ("/home/dev/web/old.config.js", PathAccess::Delete),
            ("/home/dev/web", PathAccess::Read),
        ]
    );
    assert_eq!(s.tools[4].domains, ["nextjs.org"]);
    assert_eq!(s.errors.len(), 1);
    assert_eq!(s.errors[0].message, "User aborted request");
    assert_eq!(s.subagents.len(), 1);
    assert_eq!(s.subagents[0].agent_id.as_deref(), Some(SUB));
}

#[test]
fn nested_layout() {
    let s = parse(
        Provider::Cursor,
        ".cursor/projects/home-dev-web/agent-transcripts/d00d0000-1111-4222-8333-444455556666/d00d0000-1111-4222-8333-444455556666.jsonl",
    );
    assert_eq!(s.session_id, "d00d0000-1111-4222-8333-444455556666");
    assert_eq!(s.tools[0].paths[0].access, PathAccess::Write);
    assert!(s.subagents.is_empty());
}

/// Builds a Cursor global state.vscdb under `home` the way Cursor lays it out.
pub fn build_state_db(home: &std::path::Path) -> std::path::PathBuf {
    let dir = home.join(".config/Cursor/User/globalStorage");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("state.vscdb");
    let c = rusqlite::Connection::open(&path).expect("create db");
    c.execute_batch(
        "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
    )
    .expect("schema");
    let headers = serde_json::json!({"allComposers": [
        {"composerId": ID, "name": "Build failure", "createdAt": 1_772_600_000_000_i64,
         "lastUpdatedAt": 1_772_600_900_000_i64,
         "workspaceIdentifier": {"id": "abc", "uri": {"fsPath": "/home/dev/web", "scheme": "file"}}}
    ]});
    c.execute(
        "INSERT INTO ItemTable VALUES ('composer.composerHeaders', ?1)",
        [headers.to_string()],
    )
    .expect("ins");
    let data = serde_json::json!({"_v": 10, "composerId": ID, "name": "Build failure",
        "createdAt": 1_772_600_000_000_i64, "lastUpdatedAt": 1_772_600_900_000_i64,
        "modelConfig": {"modelName": "claude-4.5-sonnet"}, "usageData": {}});
    c.execute(
        "INSERT INTO cursorDiskKV VALUES (?1, ?2)",
        [format!("composerData:{ID}"), data.to_string()],
    )
    .expect("ins");
    let bubbles = [
        (ID, "b1", 1200, 300, ""),
        (ID, "b2", 0, 0, ""),
        (ID, "b3", 800, 150, "claude-4.5-sonnet"),
        (SUB, "s1", 400, 50, "gpt-5"),
        // Another composer whose key shares the prefix: must not be summed.
        (
            "c0ffee00-1111-4222-8333-4444555566667",
            "x1",
            9999,
            9999,
            "",
        ),
    ];
    for (comp, b, i, o, m) in bubbles {
        let v = serde_json::json!({"_v": 3, "type": 2, "bubbleId": b, "text": "…",
            "tokenCount": {"inputTokens": i, "outputTokens": o}, "modelInfo": {"modelName": m}});
        // Values are stored as BLOB in real databases.
        c.execute(
            "INSERT INTO cursorDiskKV VALUES (?1, ?2)",
            rusqlite::params![format!("bubbleId:{comp}:{b}"), v.to_string().into_bytes()],
        )
        .expect("ins");
    }
    path
}

#[test]
fn state_vscdb_enrichment() {
    let home = sessions_common::home();
    build_state_db(home.path());
    let r = sessions::SessionRef {
        provider: Provider::Cursor,
        session_id: ID.into(),
        path: home.path().join(WEB),
        home: Some(home.path().to_path_buf()),
    };
    let s = sessions::parse_session(&r).expect("parse");
    assert_eq!(s.conversation_id.as_deref(), Some(ID));
    assert_eq!(s.start_ms, Some(1_772_600_000_000));
    assert_eq!(s.end_ms, Some(1_772_600_900_000));
    assert_eq!(s.models, ["claude-4.5-sonnet", "gpt-5"]);
    assert_eq!(s.title.as_deref(), Some("Build failure"));
    // Parent bubbles 1200+800 / 300+150, plus the subagent's 400 / 50.
    assert_eq!(s.usage, TokenUsage::new(2400, 500, 0, 0, 0));
    assert_eq!(
        s.usage_by_model["claude-4.5-sonnet"],
        TokenUsage::new(2000, 450, 0, 0, 0)
    );
    assert_eq!(s.usage_by_model["gpt-5"], TokenUsage::new(400, 50, 0, 0, 0));
    assert_eq!(s.subagents[0].usage, TokenUsage::new(400, 50, 0, 0, 0));
}

#[test]
fn missing_records_leave_transcript_row() {
    let home = sessions_common::home();
    build_state_db(home.path());
    let mut s = parse(
        Provider::Cursor,
        ".cursor/projects/home-dev-web/agent-transcripts/d00d0000-1111-4222-8333-444455556666/d00d0000-1111-4222-8333-444455556666.jsonl",
    );
    let before = s.clone();
    let db = cursor::state_db_candidates(home.path());
    assert_eq!(db.len(), 1);
    assert!(!cursor::enrich_from_db(&mut s, &db[0]).expect("enrich"));
    assert_eq!(s, before);
}
