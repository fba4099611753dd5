//! The event parsing on output recorded from the pinned Qwen Code 0.24.4
//! (`fixtures/messaging/qwen-0.24.4/`, see the README there), and the
//! driver against a stand-in replaying it.

use std::time::{Duration, Instant};

use super::*;
use crate::message::TurnEnd;
use crate::message::oneshot::testing::{OPTS, bytes_of, fixture, replaying, target};
use crate::sessions::Provider;

const DIR: &str = "qwen-0.24.4";
const ID: &str = "fc8c42c8-3a59-4033-8105-e81e8d309461";

fn events(name: &str) -> Vec<Event> {
    fixture(DIR, name)
        .iter()
        .flat_map(|l| parse_event(l))
        .filter(|e| *e != Event::Quiet)
        .collect()
}

const ANSWER: &str = "notes.txt still says: The build needs the release profile.";
const AUTH: &str = "[API Error: 401 Incorrect API key provided: sk-agent***e2e.]";

#[test]
fn a_continued_turn_with_a_read() {
    assert_eq!(
        events("continue-read.jsonl"),
        vec![
            Event::Ack,
            Event::Text("Reading the notes again.".into()),
            Event::Ack,
            Event::Tool {
                id: "call_e2econtinue_chat_inspect_000002".into(),
                name: "read_file".into()
            },
            Event::Ack,
            Event::Ack,
            Event::Text(ANSWER.into()),
            Event::Result(Ok(())),
        ]
    );
}

#[test]
fn an_api_error_is_a_failed_result() {
    assert_eq!(
        events("auth-error.jsonl"),
        vec![
            Event::Ack,
            Event::Text(AUTH.into()),
            Event::Result(Err(AUTH.into()))
        ]
    );
}

#[test]
fn ugly_lines_and_denials() {
    assert_eq!(
        parse_event(b"{\"type\":\"resu"),
        vec![Event::Note("{\"type\":\"resu".into())]
    );
    assert_eq!(
        parse_event(b"{\"type\":\"control_request\"}"),
        vec![Event::Note("qwen event \"control_request\" ignored".into())]
    );
    assert_eq!(
        parse_event(
            b"{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"permission_denials\":[{\"tool_name\":\"write_file\",\"tool_use_id\":\"c3\",\"tool_input\":{\"file_path\":\"/home/u/work/x\"}}]}"
        ),
        vec![
            Event::Refused {
                id: "c3".into(),
                detail: "refused by Qwen Code's approval mode (agentsight never approves): \
                         {\"file_path\":\"/home/u/work/x\"}"
                    .into()
            },
            Event::Result(Ok(()))
        ]
    );
}

#[test]
fn the_driver_follows_a_turn_to_the_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = bytes_of(DIR, "continue-read.jsonl");
    let spawner = replaying(dir.path(), "qwen", &out, "0", b"", 0);
    let mut seen = Vec::new();
    let t = target(dir.path(), Provider::Qwen, ID);
    let mut rt = start(&t, "Read it.", &spawner, &OPTS, &mut |p| seen.push(p)).expect("taken");
    assert_eq!(rt.transport(), "qwen-resume");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |p| {
            seen.push(p)
        })
        .expect("turn");
    assert_eq!(
        end,
        TurnEnd {
            completed: true,
            response: Some(ANSWER.into()),
            detail: None
        }
    );
    assert_eq!(
        seen,
        [
            Progress::Acknowledged,
            Progress::Text("Reading the notes again.".into()),
            Progress::Tool("read_file".into()),
            Progress::Text(ANSWER.into()),
        ]
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect(f);
    assert_eq!(read("input"), "Read it.");
    assert_eq!(read("args"), format!("--resume\n{ID}\n-o\nstream-json\n"));
}

#[test]
fn a_later_error_result_is_an_incomplete_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = fixture(DIR, "auth-error.jsonl");
    let join = |r: std::ops::Range<usize>| -> Vec<u8> {
        lines[r]
            .iter()
            .flat_map(|l| [l.as_slice(), b"\n"].concat())
            .collect()
    };
    let spawner = replaying(dir.path(), "qwen", &join(0..3), "1", &join(3..4), 1);
    let t = target(dir.path(), Provider::Qwen, ID);
    let mut rt = start(&t, "hi", &spawner, &OPTS, &mut |_| {}).expect("taken");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |_| {})
        .expect("turn");
    assert_eq!(
        end,
        TurnEnd {
            completed: false,
            response: Some(AUTH.into()),
            detail: Some(format!("Qwen Code failed (exit status 1): {AUTH}")),
        }
    );
}

#[test]
fn a_missing_qwen_names_node_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spawner = crate::message::test_spawner(dir.path(), "/nonexistent");
    let t = target(dir.path(), Provider::Qwen, ID);
    let e = start(&t, "hi", &spawner, &OPTS, &mut |_| {})
        .err()
        .expect("failed");
    assert_eq!(
        e,
        MessageError::Failed(
            "`qwen` is not on PATH (/nonexistent); set AGENTSIGHT_QWEN_BIN to its path (Qwen \
             Code also needs Node.js 22 or newer as `node` on that PATH: the user's installation)"
                .into()
        )
    );
}
