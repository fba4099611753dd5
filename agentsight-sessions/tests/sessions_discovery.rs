//! Discovery: ordering, de-duplication, limits, the Codex SQLite fast path,
//! id lookup outside the newest 25, and path classification.
mod sessions_common;

use std::path::Path;
use std::time::Duration;

use agentsight_sessions::{
    DiscoveryOptions, Provider, SessionIndex, SummarySource, TokenUsage, discover, find_by_id,
    provider_roots, session_id_for_path,
};
use sessions_common::{home, set_mtime};

const SHOP: &str = ".claude/projects/-home-dev-shop/aaaaaaaa-0000-4000-8000-000000000001.jsonl";
const LEGACY: &str = ".claude/projects/-home-dev-legacy/bbbbbbbb-0000-4000-8000-000000000002.jsonl";
const MID: &str = ".claude/projects/-home-dev-mid/cccccccc-0000-4000-8000-000000000003.jsonl";
const CX_PARENT: &str = ".codex/sessions/2026/03/02/rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-00000000abcd.jsonl";
const CX_CHILD: &str = ".codex/sessions/2026/03/02/rollout-2026-03-02T11-00-18-019c0000-0000-7000-8000-00000000beef.jsonl";
const CX_LEGACY: &str =
    ".codex/sessions/rollout-2025-08-01T11-00-00-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl";
const CX_ARCH: &str = ".codex/archived_sessions/rollout-2026-02-01T13-00-00-019b0000-0000-7000-8000-000000000001.jsonl";
const CX_V169: &str = ".codex/sessions/2026/04/02/rollout-2026-04-02T09-00-00-019c0000-0000-7000-8000-000000000169.jsonl";
const GM_A: &str = ".gemini/tmp/shop/chats/session-2026-01-10T08-00-5e1f0c2a.json";
const GM_B_JSON: &str = ".gemini/tmp/shop/chats/session-2026-05-01T08-00-7a3c9e10.json";
const GM_B: &str = ".gemini/tmp/shop/chats/session-2026-05-01T08-00-7a3c9e10.jsonl";
const CU_WEB: &str =
    ".cursor/projects/home-dev-web/agent-transcripts/c0ffee00-1111-4222-8333-444455556666.jsonl";
const CU_SUB: &str = ".cursor/projects/home-dev-web/agent-transcripts/c0ffee00-1111-4222-8333-444455556666/subagents/5ab00000-aaaa-4bbb-8ccc-dddddddddddd.jsonl";
const CU_EMPTY: &str =
    ".cursor/projects/empty-window/agent-transcripts/c0ffee00-1111-4222-8333-444455556666.jsonl";
const CU_NESTED: &str = ".cursor/projects/home-dev-web/agent-transcripts/d00d0000-1111-4222-8333-444455556666/d00d0000-1111-4222-8333-444455556666.jsonl";

/// Gives every fixture a distinct age (seconds ago) so the order is known.
fn age_fixtures(h: &Path) {
    for (rel, age) in [
        (CU_SUB, 10),    // makes the Cursor parent the freshest session
        (CU_EMPTY, 20),  // newer than its twin, but in the empty-window tree
        (GM_B_JSON, 30), // the stale .json twin is newer than the .jsonl
        (SHOP, 40),
        (GM_B, 50),
        (CX_PARENT, 60),
        (CX_CHILD, 70),
        (MID, 80),
        (LEGACY, 90),
        (GM_A, 100),
        (CX_ARCH, 110),
        (CU_NESTED, 120),
        (CX_V169, 130),
        (CX_LEGACY, 30 * 86_400),
        (CU_WEB, 5_000),
    ] {
        set_mtime(&h.join(rel), age);
    }
}

fn opts(h: &Path) -> DiscoveryOptions {
    DiscoveryOptions {
        home: Some(h.to_path_buf()),
        ..DiscoveryOptions::default()
    }
}

#[test]
fn list_is_sorted_deduplicated_and_preferring() {
    let h = home();
    age_fixtures(h.path());
    let rows = discover(&opts(h.path())).expect("discover");
    let ids: Vec<(Provider, &str)> = rows
        .iter()
        .map(|r| (r.provider, r.session_id.as_str()))
        .collect();
    assert_eq!(
        ids,
        [
            (Provider::Cursor, "c0ffee00-1111-4222-8333-444455556666"),
            (Provider::Gemini, "7a3c9e10-0000-4000-8000-0000000000bb"),
            (Provider::Claude, "aaaaaaaa-0000-4000-8000-000000000001"),
            (Provider::Codex, "019c0000-0000-7000-8000-00000000abcd"),
            (Provider::Codex, "019c0000-0000-7000-8000-00000000beef"),
            (Provider::Claude, "cccccccc-0000-4000-8000-000000000003"),
            (Provider::Claude, "bbbbbbbb-0000-4000-8000-000000000002"),
            (Provider::Gemini, "5e1f0c2a-0000-4000-8000-0000000000aa"),
            (Provider::Codex, "019b0000-0000-7000-8000-000000000001"),
            (Provider::Cursor, "d00d0000-1111-4222-8333-444455556666"),
            (Provider::Codex, "019c0000-0000-7000-8000-000000000169"),
            (Provider::Codex, "5973b6c0-94b8-487b-a530-2aeb6098ae0e"),
        ]
    );
    // Cursor: the candidate outside empty-window wins; Gemini: the .jsonl.
    assert!(rows[0].path.ends_with(CU_WEB));
    assert_eq!(rows[0].prompts, Some(2));
    assert!(rows[1].path.ends_with(GM_B));
    assert_eq!(rows[1].usage.map(|u| u.total), Some(13_345));
    assert_eq!(
        rows[2].model.as_deref(),
        Some("claude-opus-4-6"),
        "main model, not the subagent's"
    );
    assert_eq!(rows[2].usage.map(|u| u.total), Some(105_951));
    assert_eq!(
        rows[4].parent_session_id.as_deref(),
        Some("019c0000-0000-7000-8000-00000000abcd")
    );
    assert!(
        rows.iter()
            .all(|r| r.source == SummarySource::Parsed && r.error.is_none())
    );
}

/// The file's modification time in ms since the epoch.
fn mtime_ms(path: &Path) -> i64 {
    let m = std::fs::metadata(path)
        .expect("stat")
        .modified()
        .expect("mtime");
    let d = m.duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    i64::try_from(d.as_millis()).expect("ms")
}

#[test]
fn a_cursor_parent_is_as_fresh_as_its_subagents_in_both_layouts() {
    let h = home();
    age_fixtures(h.path());
    // The flat parent (5,000 s old) takes its subagent's time (10 s).
    let rows = discover(&opts(h.path())).expect("discover");
    assert_eq!(rows[0].session_id, "c0ffee00-1111-4222-8333-444455556666");
    assert_eq!(rows[0].updated_ms, mtime_ms(&h.path().join(CU_SUB)));
    // A nested parent's subagents live beside it, in `<id>/subagents/`.
    let nested_sub = Path::new(CU_NESTED)
        .parent()
        .expect("dir")
        .join("subagents/5ab00000-aaaa-4bbb-8ccc-eeeeeeeeeeee.jsonl");
    let sub = h.path().join(&nested_sub);
    std::fs::create_dir_all(sub.parent().expect("dir")).expect("mkdir");
    std::fs::copy(h.path().join(CU_SUB), &sub).expect("copy");
    set_mtime(&sub, 5);
    let rows = discover(&opts(h.path())).expect("discover");
    assert_eq!(rows[0].session_id, "d00d0000-1111-4222-8333-444455556666");
    assert_eq!(rows[0].updated_ms, mtime_ms(&sub));
    assert_eq!(rows[1].session_id, "c0ffee00-1111-4222-8333-444455556666");
    assert_eq!(rows[1].updated_ms, mtime_ms(&h.path().join(CU_SUB)));
}

#[test]
fn limit_provider_and_max_age() {
    let h = home();
    age_fixtures(h.path());
    let rows = discover(&DiscoveryOptions {
        limit: 3,
        ..opts(h.path())
    })
    .expect("discover");
    assert_eq!(rows.len(), 3);
    let rows = discover(&DiscoveryOptions {
        limit: 500,
        ..opts(h.path())
    })
    .expect("discover");
    assert_eq!(rows.len(), 12, "clamped to 25; 12 distinct sessions exist");
    let rows = discover(&DiscoveryOptions {
        providers: vec![Provider::Codex],
        ..opts(h.path())
    })
    .expect("discover");
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r.provider == Provider::Codex));
    let rows = discover(&DiscoveryOptions {
        max_age: Some(Duration::from_secs(65)),
        ..opts(h.path())
    })
    .expect("discover");
    assert_eq!(rows.len(), 4, "cursor, gemini bb, claude aaaa, codex abcd");
}

fn build_codex_db(h: &Path) {
    let db = h.join(".codex/state_5.sqlite");
    // A leftover older version that must be ignored (highest N wins).
    std::fs::write(h.join(".codex/state_4.sqlite"), b"not a database").expect("write");
    let c = rusqlite::Connection::open(&db).expect("create");
    c.execute_batch(
        "CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL, source TEXT NOT NULL, model_provider TEXT NOT NULL, cwd TEXT NOT NULL,
            title TEXT NOT NULL, sandbox_policy TEXT NOT NULL, approval_mode TEXT NOT NULL,
            tokens_used INTEGER NOT NULL DEFAULT 0, has_user_event INTEGER NOT NULL DEFAULT 0,
            archived INTEGER NOT NULL DEFAULT 0, archived_at INTEGER, git_sha TEXT, git_branch TEXT,
            git_origin_url TEXT, cli_version TEXT NOT NULL DEFAULT '', first_user_message TEXT NOT NULL DEFAULT '',
            agent_nickname TEXT, agent_role TEXT, memory_mode TEXT NOT NULL DEFAULT 'enabled', model TEXT,
            reasoning_effort TEXT, agent_path TEXT, created_at_ms INTEGER, updated_at_ms INTEGER);",
    )
    .expect("schema");
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    c.execute(
        "INSERT INTO threads (id, rollout_path, created_at, updated_at, source, model_provider, cwd, title,
            sandbox_policy, approval_mode, tokens_used, first_user_message, model, created_at_ms, updated_at_ms)
         VALUES (?1, ?2, 1772445600, ?3, 'cli', 'openai', '/home/dev/api', 'Fix failing API test',
            'workspace-write', 'on-request', 42100, 'run the tests', 'gpt-5.2', 1772445600100, ?4)",
        rusqlite::params![
            "019c0000-0000-7000-8000-00000000abcd",
            h.join(CX_PARENT).to_string_lossy(),
            now_ms / 1000 - 45,
            now_ms - 45_000
        ],
    )
    .expect("insert");
}

#[test]
fn codex_sqlite_fast_path() {
    let h = home();
    age_fixtures(h.path());
    build_codex_db(h.path());
    let mut idx = SessionIndex::new(DiscoveryOptions {
        providers: vec![Provider::Codex],
        ..opts(h.path())
    });
    let l = idx.list().expect("list");
    assert!(l.notes.is_empty(), "{:?}", l.notes);
    let ids: Vec<&str> = l.sessions.iter().map(|r| r.session_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "019c0000-0000-7000-8000-00000000abcd", // updated_at_ms = 45 s ago
            "019c0000-0000-7000-8000-00000000beef",
            "019b0000-0000-7000-8000-000000000001",
            "019c0000-0000-7000-8000-000000000169",
            "5973b6c0-94b8-487b-a530-2aeb6098ae0e",
        ]
    );
    let r = &l.sessions[0];
    assert_eq!(r.source, SummarySource::CodexSqlite);
    assert_eq!(r.title.as_deref(), Some("Fix failing API test"));
    assert_eq!(r.model.as_deref(), Some("gpt-5.2"));
    assert_eq!(r.cwd.as_deref(), Some("/home/dev/api"));
    assert_eq!(r.start_ms, Some(1_772_445_600_100));
    assert_eq!(r.prompts, None, "not counted on the fast path");
    // From the rollout tail: the last cumulative total, normalized.
    assert_eq!(r.usage, Some(TokenUsage::new(8000, 1100, 33000, 0, 360)));
    assert_eq!(l.sessions[1].source, SummarySource::Parsed);
    // Warm call: served from the tail cache, same answer.
    let again = idx.list().expect("list");
    assert_eq!(again.sessions, l.sessions);
}

#[test]
fn corrupt_codex_db_falls_back_to_scanning() {
    let h = home();
    std::fs::write(h.path().join(".codex/state_5.sqlite"), vec![0x42u8; 8192]).expect("write");
    let l = SessionIndex::new(DiscoveryOptions {
        providers: vec![Provider::Codex],
        ..opts(h.path())
    })
    .list()
    .expect("list must not fail");
    assert_eq!(l.sessions.len(), 5);
    assert!(l.sessions.iter().all(|r| r.source == SummarySource::Parsed));
    assert_eq!(l.notes.len(), 1);
    assert!(
        l.notes[0].starts_with("codex state database not used"),
        "{}",
        l.notes[0]
    );
}

#[test]
fn locked_codex_db_falls_back_to_scanning() {
    let h = home();
    build_codex_db(h.path());
    let lock = rusqlite::Connection::open(h.path().join(".codex/state_5.sqlite")).expect("open");
    lock.execute_batch("PRAGMA journal_mode=DELETE; PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; UPDATE threads SET title='x';")
        .expect("lock");
    let l = SessionIndex::new(DiscoveryOptions {
        providers: vec![Provider::Codex],
        ..opts(h.path())
    })
    .list()
    .expect("list must not fail");
    assert_eq!(l.sessions.len(), 5);
    assert!(
        l.notes.iter().any(|n| n.contains("locked")),
        "{:?}",
        l.notes
    );
    drop(lock);
}

#[test]
fn lookup_outside_the_newest_25_and_after_a_move() {
    let h = home();
    age_fixtures(h.path());
    // 30 newer Claude sessions push the fixtures out of the list.
    let src = std::fs::read(h.path().join(MID)).expect("read");
    for i in 0..30 {
        let p = h.path().join(format!(
            ".claude/projects/-home-dev-many/eeeeeeee-0000-4000-8000-{i:012}.jsonl"
        ));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, &src).expect("write");
    }
    let listed = discover(&opts(h.path())).expect("discover");
    assert_eq!(listed.len(), 25);
    assert!(!listed.iter().any(|r| r.session_id.starts_with("5973b6c0")));

    let r = find_by_id(&opts(h.path()), "5973b6c0-94b8-487b-a530-2aeb6098ae0e")
        .expect("lookup")
        .expect("found");
    assert_eq!(r.provider, Provider::Codex);
    assert!(r.path.ends_with(CX_LEGACY));
    // Gemini id from the header; the .jsonl twin is preferred.
    let g = find_by_id(&opts(h.path()), "7a3c9e10-0000-4000-8000-0000000000bb")
        .expect("lookup")
        .expect("found");
    assert!(g.path.ends_with(GM_B));
    // A unique prefix works; an ambiguous one is an error that says so; an
    // unknown one finds nothing.
    let p = find_by_id(&opts(h.path()), "bbbbbbbb-0000")
        .expect("lookup")
        .expect("found");
    assert_eq!(p.session_id, "bbbbbbbb-0000-4000-8000-000000000002");
    let e = find_by_id(&opts(h.path()), "eeeeeeee-0000").expect_err("ambiguous");
    assert!(
        e.to_string().starts_with(
            "session id prefix \"eeeeeeee-0000\" is ambiguous: it matches 30 sessions (eeeeeeee-0000-4000-8000-000000000000, "
        ),
        "{e}"
    );
    assert_eq!(
        find_by_id(&opts(h.path()), "ffffffff-0000-4000-8000-000000000009").expect("lookup"),
        None
    );

    // The index survives a move: a vanished path triggers a rebuild.
    let mut idx = SessionIndex::new(opts(h.path()));
    let first = idx
        .resolve("bbbbbbbb-0000-4000-8000-000000000002")
        .expect("lookup")
        .expect("found");
    let moved = h.path().join(".claude/projects/-home-dev-moved");
    std::fs::create_dir_all(&moved).expect("mkdir");
    let dest = moved.join("bbbbbbbb-0000-4000-8000-000000000002.jsonl");
    std::fs::rename(&first.path, &dest).expect("move");
    let second = idx
        .resolve("bbbbbbbb-0000-4000-8000-000000000002")
        .expect("lookup")
        .expect("found");
    assert_eq!(second.path, dest);
    let s = agentsight_sessions::parse_session(&second).expect("parse");
    assert_eq!(s.session_id, "bbbbbbbb-0000-4000-8000-000000000002");
}

#[test]
fn path_classification() {
    let h = home();
    let p = |rel: &str| session_id_for_path(&h.path().join(rel));
    assert_eq!(
        p(SHOP),
        Some((
            Provider::Claude,
            "aaaaaaaa-0000-4000-8000-000000000001".into()
        ))
    );
    assert_eq!(
        p(
            ".claude/projects/-home-dev-shop/aaaaaaaa-0000-4000-8000-000000000001/subagents/agent-a1b2c3d.jsonl"
        ),
        Some((
            Provider::Claude,
            "aaaaaaaa-0000-4000-8000-000000000001".into()
        ))
    );
    assert_eq!(
        p(".claude/projects/-home-dev-mid/agent-9f8e7d6c.jsonl"),
        Some((
            Provider::Claude,
            "cccccccc-0000-4000-8000-000000000003".into()
        ))
    );
    assert_eq!(
        p(CX_CHILD),
        Some((
            Provider::Codex,
            "019c0000-0000-7000-8000-00000000beef".into()
        ))
    );
    assert_eq!(
        p(GM_B),
        Some((
            Provider::Gemini,
            "7a3c9e10-0000-4000-8000-0000000000bb".into()
        ))
    );
    assert_eq!(
        p(
            ".gemini/tmp/shop/chats/7a3c9e10-0000-4000-8000-0000000000bb/9d1e2f30-0000-4000-8000-0000000000cc.jsonl"
        ),
        Some((
            Provider::Gemini,
            "7a3c9e10-0000-4000-8000-0000000000bb".into()
        ))
    );
    assert_eq!(
        p(CU_SUB),
        Some((
            Provider::Cursor,
            "c0ffee00-1111-4222-8333-444455556666".into()
        ))
    );
    assert_eq!(
        p(CU_NESTED),
        Some((
            Provider::Cursor,
            "d00d0000-1111-4222-8333-444455556666".into()
        ))
    );
    let deleted = format!("{} (deleted)", h.path().join(CX_PARENT).display());
    assert_eq!(
        session_id_for_path(Path::new(&deleted)),
        Some((
            Provider::Codex,
            "019c0000-0000-7000-8000-00000000abcd".into()
        ))
    );
    assert_eq!(p(".claude/settings.json"), None);
    assert_eq!(session_id_for_path(Path::new("/etc/passwd")), None);

    let roots = provider_roots(Path::new("/home/u"));
    assert!(roots.contains(&(Provider::Claude, "/home/u/.claude/projects".into())));
    assert!(roots.contains(&(Provider::Claude, "/home/u/.config/claude/projects".into())));
    assert!(roots.contains(&(Provider::Codex, "/home/u/.codex/sessions".into())));
    assert!(roots.contains(&(Provider::Codex, "/home/u/.codex/archived_sessions".into())));
    assert!(roots.contains(&(Provider::Gemini, "/home/u/.gemini/tmp".into())));
    assert!(roots.contains(&(Provider::Cursor, "/home/u/.cursor/projects".into())));
}

/// A `state_*.sqlite` row whose `rollout_path` lies outside the Codex roots
/// (absolute, or escaping with `..`) is never opened or listed.
#[test]
fn codex_rows_outside_the_roots_are_never_opened() {
    let h = home();
    age_fixtures(h.path());
    build_codex_db(h.path());
    let outside = tempfile::tempdir().expect("tempdir");
    let stolen = outside
        .path()
        .join("rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-00000000dead.jsonl");
    std::fs::copy(h.path().join(CX_PARENT), &stolen).expect("copy");
    let c = rusqlite::Connection::open(h.path().join(".codex/state_5.sqlite")).expect("open");
    for (id, path) in [
        (
            "019c0000-0000-7000-8000-00000000dead",
            stolen.display().to_string(),
        ),
        (
            "019c0000-0000-7000-8000-00000000dea2",
            format!(
                "sessions/../../{}",
                stolen.strip_prefix("/").expect("abs").display()
            ),
        ),
    ] {
        c.execute(
            "INSERT INTO threads (id, rollout_path, created_at, updated_at, source, model_provider, cwd, title,
                sandbox_policy, approval_mode, tokens_used, first_user_message, model, created_at_ms, updated_at_ms)
             VALUES (?1, ?2, 1772445600, 1772445600, 'cli', 'openai', '/x', 't', 'w', 'o', 1, 'p', 'm', 1, 99999999999999)",
            rusqlite::params![id, path],
        )
        .expect("insert");
    }
    let l = SessionIndex::new(DiscoveryOptions {
        providers: vec![Provider::Codex],
        ..opts(h.path())
    })
    .list()
    .expect("list");
    assert!(
        l.sessions
            .iter()
            .all(|s| s.path.starts_with(h.path().join(".codex"))),
        "{:?}",
        l.sessions.iter().map(|s| &s.path).collect::<Vec<_>>()
    );
    assert!(!l.sessions.iter().any(|s| s.session_id.contains("dea")));
}

/// A Gemini CLI resume that starts in a later minute leaves a two-line
/// file of the same session beside the session's own file (Gemini names
/// chat files by the minute) and appends the turn to the own file: looking
/// the id up picks the newest file, as the listing does.
#[test]
fn a_gemini_id_in_two_files_resolves_to_the_newest_as_listed() {
    let h = home();
    age_fixtures(h.path());
    let stub_rel = ".gemini/tmp/shop/chats/session-2026-05-01T08-01-7a3c9e10.jsonl";
    let own = std::fs::read_to_string(h.path().join(GM_B)).expect("read");
    let header = own.lines().next().expect("header");
    let stub = format!("{header}\n{{\"$set\":{{\"lastUpdated\":\"2026-05-01T08:01:00.000Z\"}}}}\n");
    std::fs::write(h.path().join(stub_rel), stub).expect("write stub");
    let id = "7a3c9e10-0000-4000-8000-0000000000bb";
    let resolved = |h: &Path| {
        let r = find_by_id(&opts(h), id).expect("lookup").expect("found");
        let listed = discover(&opts(h)).expect("discover");
        let row = listed.iter().find(|r| r.session_id == id).expect("listed");
        assert_eq!(row.path, r.path);
        r.path
    };
    // The own file took the resumed turn after the stub was written.
    set_mtime(&h.path().join(stub_rel), 55);
    assert!(resolved(h.path()).ends_with(GM_B));
    set_mtime(&h.path().join(stub_rel), 45);
    assert!(resolved(h.path()).ends_with(stub_rel));
}
