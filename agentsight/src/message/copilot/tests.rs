//! The event parsing on output recorded from the pinned Copilot CLI 1.0.102
//! (`fixtures/messaging/copilot-1.0.102/`, see the README there), and the
//! driver against a stand-in replaying it.

use std::time::{Duration, Instant};

use super::*;
use crate::message::TurnEnd;
use crate::message::oneshot::testing::{OPTS, bytes_of, fixture, replaying, target};
use crate::sessions::Provider;

const DIR: &str = "copilot-1.0.102";
const ID: &str = "c4b7feb6-dc72-48b9-95aa-03fbc9bdfdb7";

/// The fixture's events, without the quiet ones.
fn events(name: &str) -> Vec<Event> {
    fixture(DIR, name)
        .iter()
        .flat_map(|l| parse_event(l))
        .filter(|e| *e != Event::Quiet)
        .collect()
}

fn tool(id: &str, name: &str) -> Event {
    Event::Tool {
        id: id.into(),
        name: name.into(),
    }
}

#[test]
fn a_continued_turn_with_a_read() {
    assert_eq!(
        events("continue-read.jsonl"),
        vec![
            Event::Ack,
            Event::Text("Reading the notes again.".into()),
            tool("call_e2econtinue_chat_inspect_000002", "view"),
            Event::Text("notes.txt still says: The build needs the release profile.".into()),
            Event::Result(Ok(())),
        ]
    );
}

#[test]
fn a_write_copilot_refuses_without_approval() {
    let refusal = "Permission denied because no interactive user response was available. Retry \
                   in an interactive session so the user can approve it, or try an alternative \
                   that does not require this permission.";
    assert_eq!(
        events("refused-write.jsonl"),
        vec![
            Event::Ack,
            Event::Text("Writing the file.".into()),
            tool("call_e2e000002", "create"),
            Event::Refused {
                id: "call_e2e000002".into(),
                detail: format!(
                    "refused by Copilot CLI's permission rules (agentsight never approves): {refusal}"
                ),
            },
            Event::Text("Checking it.".into()),
            tool("call_e2e000004", "bash"),
            Event::Text("hello.txt holds one line: hello from the agent.".into()),
            Event::Result(Ok(())),
        ]
    );
}

const AUTH: &str = "authentication: Authentication failed with provider at \
    http://127.0.0.1:8787/v1 (HTTP 401).\n  Check your COPILOT_PROVIDER_API_KEY, \
    COPILOT_PROVIDER_API_KEY_COMMAND, or COPILOT_PROVIDER_BEARER_TOKEN.";

#[test]
fn an_authentication_error_then_a_failed_result() {
    assert_eq!(
        events("auth-error.jsonl"),
        vec![
            Event::Ack,
            Event::Note(AUTH.into()),
            Event::Result(Err(String::new())),
        ]
    );
}

#[test]
fn ugly_lines() {
    assert_eq!(
        parse_event(b"{\"type\":\"user.mess"),
        vec![Event::Note("{\"type\":\"user.mess".into())]
    );
    assert_eq!(
        parse_event(b"{\"type\":\"session.compaction_start\",\"data\":{}}"),
        vec![Event::Quiet]
    );
    assert_eq!(
        parse_event(b"{\"type\":\"assistant.message\",\"data\":{\"content\":\"\"}}"),
        vec![Event::Quiet]
    );
    assert_eq!(
        parse_event(
            b"{\"type\":\"tool.execution_complete\",\"data\":{\"toolCallId\":\"c1\",\"success\":false,\"error\":{\"message\":\"boom\"}}}"
        ),
        vec![Event::Note("tool call c1 failed: boom".into())]
    );
}

#[test]
fn the_driver_follows_a_turn_to_the_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = bytes_of(DIR, "refused-write.jsonl");
    let spawner = replaying(dir.path(), "copilot", &out, "0", b"", 0);
    let mut seen = Vec::new();
    let t = target(dir.path(), Provider::Copilot, ID);
    let mut rt = start(&t, "Write it.", &spawner, &OPTS, &mut |p| seen.push(p)).expect("taken");
    assert_eq!(rt.transport(), "copilot-resume");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |p| {
            seen.push(p)
        })
        .expect("turn");
    assert_eq!(
        end,
        TurnEnd {
            completed: true,
            response: Some("hello.txt holds one line: hello from the agent.".into()),
            detail: None
        }
    );
    assert_eq!(
        seen[..4],
        [
            Progress::Acknowledged,
            Progress::Text("Writing the file.".into()),
            Progress::Tool("create".into()),
            Progress::Rejected {
                method: "create".into(),
                detail: "refused by Copilot CLI's permission rules (agentsight never approves): \
                     Permission denied because no interactive user response was available. \
                     Retry in an interactive session so the user can approve it, or try an \
                     alternative that does not require this permission."
                    .into()
            },
        ]
    );
    assert_eq!(seen.len(), 7, "{seen:?}");
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect(f);
    assert_eq!(read("input"), "Write it.");
    assert_eq!(
        read("args"),
        format!("--resume={ID}\n--no-auto-update\n--output-format\njson\n")
    );
}

#[test]
fn a_failed_turn_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = fixture(DIR, "auth-error.jsonl");
    let split = |r: std::ops::Range<usize>| {
        lines[r]
            .iter()
            .flat_map(|l| [l.as_slice(), b"\n"].concat())
            .collect::<Vec<u8>>()
    };
    let spawner = replaying(
        dir.path(),
        "copilot",
        &split(0..5),
        "1",
        &split(5..lines.len()),
        1,
    );
    let t = target(dir.path(), Provider::Copilot, ID);
    let mut rt = start(&t, "hi", &spawner, &OPTS, &mut |_| {}).expect("taken");
    let end = rt
        .wait_turn(Instant::now() + Duration::from_secs(20), &mut |_| {})
        .expect("turn");
    assert_eq!(
        end,
        TurnEnd {
            completed: false,
            response: None,
            detail: Some(format!("Copilot CLI failed (exit status 1): {AUTH}")),
        }
    );
}

#[test]
fn the_provider_settings_come_from_our_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = crate::message::test_spawner(dir.path(), "/usr/bin")
        .with_env_from(
            [
                ("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:1/v1"),
                ("COPILOT_MODEL", "gpt-4.1"),
                ("COPILOT_MODELS", "no"),
                ("COPILOT_HOME", "/elsewhere"),
                ("GH_TOKEN", "no"),
            ]
            .map(|(k, v)| (k.into(), v.into())),
            PROVIDER_ENV,
        )
        .with_var("COPILOT_AUTO_UPDATE", "false");
    let names: Vec<String> = s
        .env()
        .iter()
        .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        .filter(|kv| kv.starts_with("COPILOT") || kv.starts_with("GH_"))
        .collect();
    assert_eq!(
        names,
        [
            "COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:1/v1",
            "COPILOT_MODEL=gpt-4.1",
            "COPILOT_AUTO_UPDATE=false"
        ]
    );
}
