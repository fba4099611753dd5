//! Hostile inputs: partial and huge lines, unknown records, invalid UTF-8,
//! empty and unreadable files, symlink loops, broken databases, random bytes.
mod sessions_common;

use std::io::Write;
use std::path::Path;

use agentsight_sessions::{
    self as sessions, DiscoveryOptions, Provider, SessionError, SessionIndex, TokenUsage,
    parse_file,
};
use sessions_common::{fixtures, home};

const SHOP: &str = ".claude/projects/-home-dev-shop/aaaaaaaa-0000-4000-8000-000000000001.jsonl";
const CX: &str = ".codex/sessions/2026/03/02/rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-00000000abcd.jsonl";
const GM: &str = ".gemini/tmp/shop/chats/session-2026-05-01T08-00-7a3c9e10.jsonl";
const CU: &str =
    ".cursor/projects/home-dev-web/agent-transcripts/c0ffee00-1111-4222-8333-444455556666.jsonl";

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open");
    f.write_all(bytes).expect("append");
}

#[test]
fn partial_last_line_of_a_live_session() {
    let h = home();
    for (p, rel) in [
        (Provider::Claude, SHOP),
        (Provider::Codex, CX),
        (Provider::Gemini, GM),
        (Provider::Cursor, CU),
    ] {
        let path = h.path().join(rel);
        let before = parse_file(p, &path).expect("parse");
        append(&path, br#"{"type":"assistant","timestamp":"2026-03-01T09:11:00.000Z","message":{"id":"msg_99","content":[{"type":"te"#);
        let after = parse_file(p, &path).expect("parse with partial line");
        assert!(after.stats.partial_last_line, "{p}");
        assert_eq!(after.stats.bad_lines, 0, "{p}");
        assert_eq!(after.usage, before.usage, "{p}");
        assert_eq!(after.prompts, before.prompts, "{p}");
    }
}

#[test]
fn multi_megabyte_lines_and_oversized_lines() {
    let h = home();
    let path = h.path().join(SHOP);
    // An 8 MB tool output inline, as some Claude Code versions write.
    let big = "x".repeat(8 * 1024 * 1024);
    let line = serde_json::json!({"type":"user","timestamp":"2026-03-01T09:10:30.000Z","sessionId":"aaaaaaaa-0000-4000-8000-000000000001",
        "message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":big}]},
        "toolUseResult":{"stdout":big,"stderr":"","interrupted":false}});
    append(&path, format!("{line}\n").as_bytes());
    // A line over the 64 MiB cap is skipped and counted, not buffered.
    let huge = vec![b'a'; 65 * 1024 * 1024];
    append(&path, &huge);
    append(&path, b"\n");
    append(&path, br#"{"type":"user","timestamp":"2026-03-01T09:12:00.000Z","message":{"role":"user","content":"after the huge line"}}"#);
    append(&path, b"\n");
    let s = parse_file(Provider::Claude, &path).expect("parse");
    assert_eq!(s.stats.oversized_lines, 1);
    assert_eq!(
        s.prompts.last().map(|p| p.text.as_str()),
        Some("after the huge line")
    );
    assert_eq!(s.usage, TokenUsage::new(162, 1139, 87000, 17650, 0));
}

#[test]
fn unknown_records_and_fields_are_counted_not_fatal() {
    let h = home();
    let path = h.path().join(CX);
    append(&path, b"{\"timestamp\":\"2026-03-02T10:03:00.000Z\",\"type\":\"inter_agent_communication\",\"payload\":{\"x\":[1,2,3]}}\n");
    append(&path, b"{\"timestamp\":\"2026-03-02T10:03:01.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"user_message\",\"message\":\"more\",\"brand_new_field\":{\"deep\":[null]}}}\n");
    append(&path, b"[1,2,3]\n");
    append(&path, b"not json at all\n");
    let s = parse_file(Provider::Codex, &path).expect("parse");
    assert_eq!(s.stats.unknown_records, 2);
    assert_eq!(s.stats.bad_lines, 2);
    assert!(s.stats.first_error.is_some());
    assert_eq!(s.prompts.last().map(|p| p.text.as_str()), Some("more"));
}

#[test]
fn invalid_utf8_is_repaired_lossily() {
    let h = home();
    let path = h.path().join(SHOP);
    append(&path, b"{\"type\":\"user\",\"timestamp\":\"2026-03-01T09:12:00.000Z\",\"message\":{\"role\":\"user\",\"content\":\"caf\xe9 \xff ok\"}}\n");
    let s = parse_file(Provider::Claude, &path).expect("parse");
    assert_eq!(s.stats.invalid_utf8_lines, 1);
    assert_eq!(
        s.prompts.last().map(|p| p.text.as_str()),
        Some("caf\u{fffd} \u{fffd} ok")
    );
}

#[test]
fn empty_files() {
    let h = home();
    let d = h.path().join("empty");
    std::fs::create_dir_all(&d).expect("mkdir");
    let claude = d.join("11111111-0000-4000-8000-000000000000.jsonl");
    std::fs::write(&claude, b"").expect("write");
    let s = parse_file(Provider::Claude, &claude).expect("empty claude is an empty session");
    assert_eq!((s.prompts.len(), s.tools.len(), s.stats.lines), (0, 0, 0));
    let cursor = d.join("22222222-0000-4000-8000-000000000000.jsonl");
    std::fs::write(&cursor, b"\n\n").expect("write");
    let s = parse_file(Provider::Cursor, &cursor).expect("blank cursor file");
    assert_eq!(s.stats.blank_lines, 2);
    // Codex: the thread id can still come from the file name.
    let codex = d.join("rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-0000000000ee.jsonl");
    std::fs::write(&codex, b"").expect("write");
    let s = parse_file(Provider::Codex, &codex).expect("empty rollout");
    assert_eq!(s.session_id, "019c0000-0000-7000-8000-0000000000ee");
    // Without any id source the parser says so instead of inventing one.
    let codex2 = d.join("rollout-x.jsonl");
    std::fs::write(&codex2, b"").expect("write");
    assert!(matches!(
        parse_file(Provider::Codex, &codex2),
        Err(SessionError::Format { .. })
    ));
    let gem = d.join("session-x.jsonl");
    std::fs::write(&gem, b"").expect("write");
    assert!(matches!(
        parse_file(Provider::Gemini, &gem),
        Err(SessionError::Format { .. })
    ));
    let gem_json = d.join("session-y.json");
    std::fs::write(&gem_json, b"").expect("write");
    assert!(matches!(
        parse_file(Provider::Gemini, &gem_json),
        Err(SessionError::Format { .. })
    ));
}

#[test]
fn unreadable_files() {
    let h = home();
    // A directory where a transcript is expected.
    let dir = h.path().join("dir.jsonl");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for p in Provider::ALL {
        assert!(
            matches!(parse_file(p, &dir), Err(SessionError::NotAFile { .. })),
            "{p}"
        );
    }
    assert!(matches!(
        parse_file(Provider::Claude, &h.path().join("missing.jsonl")),
        Err(SessionError::Io { .. })
    ));
    // Permission bits do not stop root, so that half only runs unprivileged.
    if !nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        let p = h.path().join(SHOP);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        assert!(matches!(
            parse_file(Provider::Claude, &p),
            Err(SessionError::Io { .. })
        ));
        // Listing reports the row as an error instead of failing.
        let rows = sessions::discover(&DiscoveryOptions {
            home: Some(h.path().to_path_buf()),
            ..Default::default()
        })
        .expect("discover");
        assert!(rows.iter().any(|r| r.error.is_some()));
    }
    // An unreadable subagent file (a dangling link) is counted; the parent
    // still parses.
    let sub = h.path().join(
        ".claude/projects/-home-dev-shop/aaaaaaaa-0000-4000-8000-000000000001/subagents/agent-broken.jsonl",
    );
    std::os::unix::fs::symlink("/nonexistent/agent.jsonl", &sub).expect("dangling link");
    let s = parse_file(Provider::Claude, &h.path().join(SHOP)).expect("parse");
    assert_eq!(s.stats.unreadable_files, 1);
    assert_eq!(s.usage.total, 105_951);
}

#[test]
fn symlink_loops_do_not_trap_discovery() {
    let h = home();
    let projects = h.path().join(".claude/projects");
    std::os::unix::fs::symlink(projects.join("loop"), projects.join("loop"))
        .expect("dir self-loop");
    std::os::unix::fs::symlink(
        "ouroboros.jsonl",
        projects.join("-home-dev-shop/ouroboros.jsonl"),
    )
    .expect("file self-loop");
    // A directory cycle inside the Codex tree (sessions/2026/up -> ..).
    std::os::unix::fs::symlink("..", h.path().join(".codex/sessions/2026/up")).expect("cycle");
    let mut idx = SessionIndex::new(DiscoveryOptions {
        home: Some(h.path().to_path_buf()),
        ..Default::default()
    });
    let l = idx.list().expect("list");
    assert_eq!(l.sessions.len(), 12);
    // The directory loop is unreadable; the file loop is a link, which is
    // never followed to a transcript.
    assert!(
        l.scan.unreadable >= 1 && l.scan.not_files >= 1,
        "{:?}",
        l.scan
    );
    assert!(
        l.notes.iter().any(|n| n.starts_with("skipped ")),
        "{:?}",
        l.notes
    );
    assert!(
        idx.resolve("019c0000-0000-7000-8000-00000000abcd")
            .expect("resolve")
            .is_some()
    );
    // A transcript is never opened through a symbolic link (O_NOFOLLOW).
    assert!(matches!(
        parse_file(
            Provider::Claude,
            &projects.join("-home-dev-shop/ouroboros.jsonl")
        ),
        Err(SessionError::NotAFile { .. })
    ));
}

#[test]
fn corrupt_and_locked_cursor_state_db() {
    let h = home();
    let dir = h.path().join(".config/Cursor/User/globalStorage");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("state.vscdb"), vec![7u8; 4096]).expect("garbage");
    let r = sessions::SessionRef {
        provider: Provider::Cursor,
        session_id: "c0ffee00-1111-4222-8333-444455556666".into(),
        path: h.path().join(CU),
        home: Some(h.path().to_path_buf()),
    };
    let s = sessions::parse_session(&r).expect("transcript still parses");
    assert_eq!(s.prompts.len(), 2);
    assert_eq!(s.stats.notes.len(), 1);
    assert!(
        s.stats.notes[0].contains("state.vscdb not used"),
        "{:?}",
        s.stats.notes
    );

    std::fs::remove_file(dir.join("state.vscdb")).expect("rm");
    let c = rusqlite::Connection::open(dir.join("state.vscdb")).expect("create");
    c.execute_batch(
        "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; INSERT INTO ItemTable VALUES ('k','v');",
    )
    .expect("lock");
    let s = sessions::parse_session(&r).expect("transcript still parses");
    assert!(
        s.stats.notes.iter().any(|n| n.contains("locked")),
        "{:?}",
        s.stats.notes
    );
    drop(c);
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x & 0xff) as u8
        })
        .collect()
}

#[test]
fn mutated_fixtures_never_panic() {
    let h = home();
    let d = h.path().join("mut");
    std::fs::create_dir_all(d.join("chats")).expect("mkdir");
    let inputs = [
        (Provider::Claude, SHOP, "x.jsonl"),
        (
            Provider::Codex,
            CX,
            "rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-0000000000ff.jsonl",
        ),
        (Provider::Gemini, GM, "chats/session-m.jsonl"),
        (
            Provider::Gemini,
            ".gemini/tmp/shop/chats/session-2026-01-10T08-00-5e1f0c2a.json",
            "chats/session-m.json",
        ),
        (Provider::Cursor, CU, "c.jsonl"),
    ];
    for (p, rel, name) in inputs {
        let orig = std::fs::read(fixtures().join(rel)).expect("read");
        for seed in 1..40u64 {
            let mut m = orig.clone();
            let n = noise(seed, 64);
            for k in 0..(seed as usize % 8 + 1) {
                let at = (n[k] as usize * 7919 + k * 104_729 + seed as usize * 31) % m.len().max(1);
                match n[k + 8] % 4 {
                    0 => m[at] = n[k + 16],
                    1 => m.truncate(at),
                    2 => m.insert(at, b'"'),
                    _ => m.splice(at..at, noise(seed + k as u64, 16)).for_each(drop),
                }
            }
            let path = d.join(name);
            std::fs::write(&path, &m).expect("write");
            // Any Ok/Err is fine; a panic fails the test.
            let _ = parse_file(p, &path);
        }
    }
}
