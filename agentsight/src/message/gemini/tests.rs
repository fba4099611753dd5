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
