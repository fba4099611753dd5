//! The event parsing on output recorded from the pinned Gemini CLI 0.61.0
//! (`fixtures/messaging/gemini-0.61.0/`, see the README there).

use super::*;

fn fixture(name: &str) -> Vec<Vec<u8>> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/messaging/gemini-0.61.0")
        .join(name);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn kinds(name: &str) -> Vec<Event> {
    fixture(name).iter().map(|l| parse_event(l)).collect()
}

#[test]
fn a_continued_turn_with_a_read() {
    assert_eq!(
        kinds("continue-read.jsonl"),
        vec![
            Event::Quiet,
            Event::Echo,
            Event::Text("Reading notes.".into()),
            Event::Tool("read_file".into()),
            Event::Quiet,
            Event::Text("Continued: notes say release profile.".into()),
            Event::Result(Ok(())),
        ]
    );
}

#[test]
fn an_error_result_keeps_the_api_error() {
    let events = kinds("auth-error.jsonl");
    assert_eq!(events[..2], [Event::Quiet, Event::Echo]);
    assert_eq!(
        events[2],
        Event::Result(Err("[API Error: {\"error\":{\"code\":401,\"message\":\"Request had invalid \
             authentication credentials. Expected OAuth 2 access token, login cookie or other valid \
             authentication credential.\",\"status\":\"UNAUTHENTICATED\"}}]"
            .into()))
    );
    let long = format!(
        "{{\"type\":\"result\",\"status\":\"error\",\"error\":{{\"message\":\"{}\"}}}}",
        "é".repeat(400)
    );
    assert_eq!(
        parse_event(long.as_bytes()),
        Event::Result(Err(format!("{}…", "é".repeat(300))))
    );
}

#[test]
fn a_stalled_answer_is_acknowledged_text_without_a_result() {
    assert_eq!(
        kinds("stalled.jsonl"),
        vec![
            Event::Quiet,
            Event::Echo,
            Event::Text("Working on it".into())
        ]
    );
}

#[test]
fn ugly_lines() {
    // What Gemini CLI prints outside the stream (here the first line of
    // its unknown-session error, recorded from its stderr).
    let text = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/messaging/gemini-0.61.0/unknown-session.stderr.txt"),
    )
    .expect("fixture");
    let first = text.split(|&b| b == b'\n').next().expect("a line");
    assert_eq!(
        parse_event(first),
        Event::Note(
            "Error resuming session: Invalid session identifier \
             \"00000000-0000-4000-8000-000000000000\"."
                .into()
        )
    );
    assert_eq!(
        parse_event(b"{\"type\":\"tool_result\",\"tool_id\":\"t1\",\"status\":\"error\",\"error\":{\"type\":\"x\",\"message\":\"denied\"}}"),
        Event::Note("tool call t1 ended error: denied".into())
    );
    assert_eq!(
        parse_event(b"{\"type\":\"error\",\"severity\":\"warning\",\"message\":\"loop detected\"}"),
        Event::Note("loop detected".into())
    );
    assert_eq!(
        parse_event(b"{\"type\":\"thought\"}"),
        Event::Note("gemini event \"thought\" ignored".into())
    );
    assert_eq!(
        parse_event(b"\xff{\"type\":"),
        Event::Note("\u{fffd}{\"type\":".into())
    );
}

#[test]
fn fatal_exit_codes() {
    assert_eq!(
        exit_meaning(42),
        Some("bad input (for --resume: no such session in this project)")
    );
    assert_eq!(exit_meaning(41), Some("authentication failed"));
    assert_eq!(exit_meaning(1), None);
}

/// A stand-in `gemini` on the spawner's PATH that swallows its stdin (the
/// message), then replays `before`, waits `pause` seconds, replays `after`
/// and exits `status`.
fn replaying(
    dir: &std::path::Path,
    before: &[u8],
    pause: &str,
    after: &[u8],
    status: i32,
) -> Spawner {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(dir.join("before"), before).expect("write output");
    std::fs::write(dir.join("after"), after).expect("write output");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = format!(
        "#!/bin/sh\ncd '{d}'\ncat > input\ncat before\nsleep {pause}\ncat after\nexit {status}\n",
        d = dir.display(),
    );
    let exe = bin.join("gemini");
    std::fs::write(&exe, script).expect("write script");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    super::super::test_spawner(dir, &format!("{}:/usr/bin:/bin", bin.display()))
}

fn target(dir: &std::path::Path) -> Target {
    Target {
        provider: crate::sessions::Provider::Gemini,
        session_id: "6252f51b-a505-4d99-a011-352b386ebcde".into(),
        transcript: dir.join("t.jsonl"),
        cwd: dir.to_path_buf(),
        cli_version: None,
    }
}

const OPTS: Options = Options {
    ack_timeout: Duration::from_secs(20),
    in_container: false,
};

/// Lines `range` of a fixture, each with its newline.
fn lines_of(name: &str, range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = Vec::new();
    for l in &fixture(name)[range] {
        out.extend(l);
        out.push(b'\n');
    }
    out
}

const API_401: &str = "[API Error: {\"error\":{\"code\":401,\"message\":\"Request had invalid \
    authentication credentials. Expected OAuth 2 access token, login cookie or other valid \
    authentication credential.\",\"status\":\"UNAUTHENTICATED\"}}]";

#[test]
fn the_driver_follows_a_turn_to_the_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = lines_of("continue-read.jsonl", 0..7);
    let spawner = replaying(dir.path(), &output, "0", b"", 0);
    let mut seen = Vec::new();
    let mut rt = start(&target(dir.path()), "Read it.", &spawner, &OPTS, &mut |p| {
        seen.push(p)
    })
    .expect("acknowledged");
    assert_eq!(rt.transport(), "gemini-resume");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |p| {
            seen.push(p)
        })
        .expect("turn");
    assert_eq!(
        end,
        TurnEnd {
            completed: true,
            response: Some("Continued: notes say release profile.".into()),
            detail: None
        }
    );
    assert_eq!(
        seen,
        vec![
            Progress::Acknowledged,
            Progress::Text("Reading notes.".into()),
            Progress::Tool("read_file".into()),
            Progress::Text("Continued: notes say release profile.".into()),
        ]
    );
    assert_eq!(
        std::fs::read(dir.path().join("input")).expect("input"),
        b"Read it."
    );
}

#[test]
fn an_early_non_zero_exit_fails_with_what_the_status_means() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spawner = replaying(dir.path(), b"", "0", b"", 42);
    let e = start(&target(dir.path()), "hi", &spawner, &OPTS, &mut |_| {})
        .err()
        .expect("failed");
    assert_eq!(
        e,
        MessageError::Failed(
            "Gemini CLI failed (exit status 42: bad input (for --resume: no such session in \
             this project))"
                .into()
        )
    );
}

#[test]
fn an_error_result_within_300_ms_fails_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = lines_of("auth-error.jsonl", 0..3);
    let spawner = replaying(dir.path(), &output, "0", b"", 1);
    let e = start(&target(dir.path()), "hi", &spawner, &OPTS, &mut |_| {})
        .err()
        .expect("failed");
    assert_eq!(
        e,
        MessageError::Failed(format!("Gemini CLI failed (exit status 1): {API_401}"))
    );
}

#[test]
fn a_later_error_result_is_an_incomplete_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let echo = lines_of("auth-error.jsonl", 0..2);
    let result = lines_of("auth-error.jsonl", 2..3);
    let spawner = replaying(dir.path(), &echo, "1", &result, 1);
    let mut rt = start(&target(dir.path()), "hi", &spawner, &OPTS, &mut |_| {}).expect("taken");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |_| {})
        .expect("turn");
    assert_eq!(
        end,
        TurnEnd {
            completed: false,
            response: None,
            detail: Some(format!("Gemini CLI failed (exit status 1): {API_401}")),
        }
    );
}
