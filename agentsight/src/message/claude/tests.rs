//! The event parsing on output recorded from the pinned Claude Code 2.1.328
//! (`fixtures/messaging/claude-2.1.328/`, see the README there).

use super::*;

fn fixture(name: &str) -> Vec<Vec<u8>> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/messaging/claude-2.1.328")
        .join(name);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn kinds(lines: &[Vec<u8>]) -> Vec<Event> {
    lines.iter().map(|l| parse_event(l)).collect()
}

#[test]
fn a_continued_turn_with_a_read() {
    let lines = fixture("continue-read.jsonl");
    let want = vec![
        Event::Quiet,
        Event::Turn(vec![Progress::Text("Reading notes.".into())]),
        Event::Turn(vec![Progress::Tool("Read".into())]),
        Event::Turn(vec![]),
        Event::Turn(vec![Progress::Text(
            "Continued: notes say release profile.".into(),
        )]),
        Event::Result(TurnEnd {
            completed: true,
            response: Some("Continued: notes say release profile.".into()),
            detail: None,
        }),
    ];
    assert_eq!(kinds(&lines), want);
    assert_eq!(denials(&lines[5]), vec![]);
}

#[test]
fn a_refused_write_is_a_rejection_and_the_turn_still_completes() {
    let lines = fixture("write-refused.jsonl");
    let last = lines.last().expect("result line");
    assert_eq!(
        parse_event(last),
        Event::Result(TurnEnd {
            completed: true,
            response: Some("Wrote it.".into()),
            detail: None,
        })
    );
    assert_eq!(
        denials(last),
        vec![Progress::Rejected {
            method: "Write".into(),
            detail: "refused by Claude Code's permission mode (agentsight never approves): \
                     {\"content\":\"hi\\n\",\"file_path\":\"/var/tmp/cl-p1/work/out.txt\"}"
                .into(),
        }]
    );
}

#[test]
fn an_unknown_session_is_an_error_result() {
    let lines = fixture("unknown-session.jsonl");
    assert_eq!(
        kinds(&lines),
        vec![Event::Result(TurnEnd {
            completed: false,
            response: None,
            detail: Some(
                "Claude Code reported an error: No conversation found with session ID: \
                 00000000-0000-4000-8000-000000000000"
                    .into()
            ),
        })]
    );
}

#[test]
fn retries_are_notes_and_never_an_acknowledgement() {
    let lines = fixture("auth-retries.jsonl");
    let events = kinds(&lines);
    assert_eq!(events[0], Event::Quiet);
    assert_eq!(
        events[1],
        Event::Note(
            "the model endpoint failed (authentication_failed, status 401); \
             Claude Code retries (attempt 1 of 10)"
                .into()
        )
    );
    assert_eq!(events.len(), 8);
    assert!(events[1..].iter().all(|e| matches!(e, Event::Note(_))));
    let stalled = kinds(&fixture("stalled.jsonl"));
    assert_eq!(
        stalled[1],
        Event::Note(
            "the model endpoint failed (unknown, status null); \
             Claude Code retries (attempt 1 of 10)"
                .into()
        )
    );
}

#[test]
fn ugly_lines() {
    assert_eq!(
        parse_event(b"{\"type\":\"result\",\"subtype\":\"error_max_turns\",\"is_error\":false}"),
        Event::Result(TurnEnd {
            completed: false,
            response: None,
            detail: Some("Claude Code reported an error: result error_max_turns".into()),
        })
    );
    assert_eq!(
        parse_event(b"{\"type\":\"error\",\"error\":{\"message\":\"overloaded\"}}"),
        Event::Error("Claude Code reported an error: overloaded".into())
    );
    assert_eq!(
        parse_event(b"{\"type\":\"control_request\"}"),
        Event::Note("claude event \"control_request\" ignored".into())
    );
    assert_eq!(
        parse_event(b"\xff\xfe not json"),
        Event::Note("claude wrote a line that is not JSON: \u{fffd}\u{fffd} not json".into())
    );
    // A truncated last line (the provider killed mid-write).
    assert_eq!(
        parse_event(b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"te"),
        Event::Note(
            "claude wrote a line that is not JSON: {\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"te"
                .into()
        )
    );
}

#[test]
fn the_input_line_is_one_stream_json_user_message() {
    let line = input_line("say \"hi\"\nand bye");
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    let v: Value = serde_json::from_slice(&line).expect("json");
    assert_eq!(
        v,
        serde_json::json!({"type":"user","message":{"role":"user",
            "content":[{"type":"text","text":"say \"hi\"\nand bye"}]}})
    );
}

/// A stand-in `claude` on the spawner's PATH that swallows its stdin (the
/// message), then replays `output` (recorded lines) and exits `status`.
fn replaying(dir: &std::path::Path, output: &[u8], status: i32) -> Spawner {
    use std::os::unix::fs::PermissionsExt;
    let out = dir.join("output");
    std::fs::write(&out, output).expect("write output");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = format!(
        "#!/bin/sh\ncat > '{d}/input'\ncat '{o}'\nexit {status}\n",
        d = dir.display(),
        o = out.display()
    );
    let exe = bin.join("claude");
    std::fs::write(&exe, script).expect("write script");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    super::super::test_spawner(dir, &format!("{}:/usr/bin:/bin", bin.display()))
}

fn target(dir: &std::path::Path) -> Target {
    Target {
        provider: crate::sessions::Provider::Claude,
        session_id: "373a5f3d-aa0e-48d4-b941-79c8fb907971".into(),
        transcript: dir.join("t.jsonl"),
        cwd: dir.to_path_buf(),
        cli_version: None,
    }
}

const OPTS: Options = Options {
    ack_timeout: Duration::from_secs(20),
    in_container: false,
};

#[test]
fn the_driver_skips_a_huge_line_then_follows_the_turn_to_its_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut output = vec![b'x'; MAX_LINE + 10];
    output.push(b'\n');
    for l in fixture("continue-read.jsonl") {
        output.extend(l);
        output.push(b'\n');
    }
    let spawner = replaying(dir.path(), &output, 0);
    let mut seen = Vec::new();
    let mut rt = start(
        &target(dir.path()),
        "Read the notes.",
        &spawner,
        &OPTS,
        &mut |p| seen.push(p),
    )
    .expect("acknowledged");
    assert_eq!(rt.transport(), "claude-stream-json");
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
            Progress::Note(format!(
                "skipped a claude output line of {} bytes (over {MAX_LINE}); 1 so far",
                MAX_LINE + 10
            )),
            Progress::Acknowledged,
            Progress::Text("Reading notes.".into()),
            Progress::Tool("Read".into()),
            Progress::Text("Continued: notes say release profile.".into()),
        ]
    );
    let input = std::fs::read(dir.path().join("input")).expect("input");
    assert_eq!(input, input_line("Read the notes."));
}

#[test]
fn an_error_result_before_any_answer_fails_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut output = fixture("unknown-session.jsonl").concat();
    output.push(b'\n');
    let spawner = replaying(dir.path(), &output, 1);
    let e = start(&target(dir.path()), "hi", &spawner, &OPTS, &mut |_| {})
        .err()
        .expect("refused");
    assert_eq!(
        e,
        MessageError::Failed(
            "Claude Code reported an error: No conversation found with session ID: \
             00000000-0000-4000-8000-000000000000"
                .into()
        )
    );
}

#[test]
fn silence_then_exit_before_an_answer_fails_with_the_status_and_last_note() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut output = Vec::new();
    for l in fixture("stalled.jsonl") {
        output.extend(l);
        output.push(b'\n');
    }
    let spawner = replaying(dir.path(), &output, 3);
    let e = start(&target(dir.path()), "hi", &spawner, &OPTS, &mut |_| {})
        .err()
        .expect("failed");
    assert_eq!(
        e,
        MessageError::Failed(
            "Claude Code ended (exit status 3) before acknowledging the message (last: the \
             model endpoint failed (unknown, status null); Claude Code retries (attempt 1 of 10))"
                .into()
        )
    );
}
