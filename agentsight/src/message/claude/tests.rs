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
