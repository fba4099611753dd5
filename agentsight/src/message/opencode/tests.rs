//! The event parsing on output recorded from the pinned opencode 1.18.33
//! (`fixtures/messaging/opencode-1.18.33/`, see the README there), and the
//! driver against a stand-in replaying it.

use std::time::{Duration, Instant};

use super::*;
use crate::message::TurnEnd;
use crate::message::oneshot::testing::{OPTS, bytes_of, fixture, replaying, target};
use crate::sessions::Provider;

const DIR: &str = "opencode-1.18.33";
const ID: &str = "ses_dc91e3406ffeG2mzy5IBjFuFMQ";

fn events(name: &str) -> Vec<Event> {
    fixture(DIR, name)
        .iter()
        .flat_map(|l| parse_event(l))
        .filter(|e| *e != Event::Quiet)
        .collect()
}

#[test]
fn a_continued_turn_with_a_read() {
    assert_eq!(
        events("continue-read.jsonl"),
        vec![
            Event::Ack,
            Event::Ack,
            Event::Text("Reading the notes again.".into()),
            Event::Ack,
            Event::Tool {
                id: "call_e2econtinue_chat_inspect_000002".into(),
                name: "read".into()
            },
            Event::Ack,
            Event::Ack,
            Event::Text("notes.txt still says: The build needs the release profile.".into()),
            Event::Result(Ok(())),
        ]
    );
}

const AUTH: &str = "APIError: Incorrect API key provided: sk-agent***e2e.";

#[test]
fn an_api_error_is_a_failed_result() {
    assert_eq!(
        events("auth-error.jsonl"),
        vec![Event::Result(Err(AUTH.into()))]
    );
}

#[test]
fn ugly_lines() {
    assert_eq!(
        parse_event(b"{\"type\":\"step_fin"),
        vec![Event::Note("{\"type\":\"step_fin".into())]
    );
    assert_eq!(
        parse_event(b"{\"type\":\"reasoning\",\"part\":{}}"),
        vec![Event::Note("opencode event \"reasoning\" ignored".into())]
    );
    assert_eq!(
        parse_event(b"{\"type\":\"step_finish\",\"part\":{\"reason\":\"length\"}}"),
        vec![Event::Note("a model call ended with reason length".into())]
    );
    let rejected = "The user rejected permission to use this specific tool call.";
    assert_eq!(
        parse_event(
            format!(
                "{{\"type\":\"tool_use\",\"part\":{{\"tool\":\"bash\",\"callID\":\"c9\",\"state\":{{\"status\":\"error\",\"error\":\"{rejected}\"}}}}}}"
            )
            .as_bytes()
        ),
        vec![
            Event::Ack,
            Event::Tool {
                id: "c9".into(),
                name: "bash".into()
            },
            Event::Refused {
                id: "c9".into(),
                detail: format!(
                    "refused by opencode's permission rules (agentsight never approves): {rejected}"
                )
            },
        ]
    );
}

#[test]
fn the_driver_follows_a_turn_to_the_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = bytes_of(DIR, "continue-read.jsonl");
    let spawner = replaying(dir.path(), "opencode", &out, "0", b"", 0);
    let mut seen = Vec::new();
    let t = target(dir.path(), Provider::Opencode, ID);
    let mut rt = start(&t, "Read it.", &spawner, &OPTS, &mut |p| seen.push(p)).expect("taken");
    assert_eq!(rt.transport(), "opencode-run");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |p| {
            seen.push(p)
        })
        .expect("turn");
    let answer = "notes.txt still says: The build needs the release profile.";
    assert_eq!(
        end,
        TurnEnd {
            completed: true,
            response: Some(answer.into()),
            detail: None
        }
    );
    assert_eq!(
        seen,
        [
            Progress::Acknowledged,
            Progress::Text("Reading the notes again.".into()),
            Progress::Tool("read".into()),
            Progress::Text(answer.into()),
        ]
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect(f);
    assert_eq!(read("input"), "Read it.");
    assert_eq!(
        read("args"),
        format!("run\n--session\n{ID}\n--format\njson\n")
    );
}

#[test]
fn an_error_before_any_step_fails_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = bytes_of(DIR, "auth-error.jsonl");
    let spawner = replaying(dir.path(), "opencode", &out, "0", b"", 1);
    let t = target(dir.path(), Provider::Opencode, ID);
    let e = start(&t, "hi", &spawner, &OPTS, &mut |_| {})
        .err()
        .expect("failed");
    assert_eq!(
        e,
        MessageError::Failed(format!("opencode failed (exit status 1): {AUTH}"))
    );
}

#[test]
fn an_exit_without_a_stop_is_an_incomplete_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = fixture(DIR, "continue-read.jsonl");
    let out: Vec<u8> = lines[..4]
        .iter()
        .flat_map(|l| [l.as_slice(), b"\n"].concat())
        .collect();
    let spawner = replaying(dir.path(), "opencode", &out, "0", b"", 0);
    let t = target(dir.path(), Provider::Opencode, ID);
    let mut rt = start(&t, "hi", &spawner, &OPTS, &mut |_| {}).expect("taken");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |_| {})
        .expect("turn");
    assert_eq!(
        end,
        TurnEnd {
            completed: false,
            response: None,
            detail: Some("opencode exited without reporting the end of its turn".into()),
        }
    );
}
