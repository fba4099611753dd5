//! GitHub Copilot CLI: `copilot --resume=ID --no-auto-update --output-format
//! json` in the session's cwd, the message on stdin, then stdin closed. One
//! process per message. Verified on the pinned 1.0.102: with no `-p`, the
//! piped stdin is the prompt, and the turn is appended to the session's own
//! `~/.copilot/session-state/ID/events.jsonl` (a `session.resume` record,
//! then the turn, then a new `session.shutdown`).
//!
//! Output (`--output-format json`, JSON lines): the session's events as
//! written to `events.jsonl` plus ephemeral ones (deltas, `model.call_*`).
//! The message echoed as `user.message` is the acknowledgement;
//! `assistant.message` carries whole texts; `tool.execution_start` /
//! `…_complete` the calls; `assistant.turn_end` ends one model call only
//! (its `turnId` counts the calls of the message), so the turn ends with the
//! final `result` (`exitCode`) and the process exit.
//!
//! No `--allow-all-tools`: without it the pinned CLI still runs what it
//! deems safe (`ls`, `view`) and refuses the rest itself ("Permission denied
//! because no interactive user response was available"), which is reported
//! as a refused request. Nothing is approved for the user.

use std::ffi::OsString;

use serde_json::Value;

use super::oneshot::{self, Event, Flavor};
use super::{MessageError, Options, Progress, Runtime, Spawner, Target, clip};

pub const TRANSPORT: &str = "copilot-resume";

/// Copilot CLI's bring-your-own-model settings exist only as environment
/// variables (`copilot help providers`): these are taken from agentsight's
/// own environment, so a session started against a custom provider can be
/// continued against it. `COPILOT_PROVIDER_` is a prefix.
pub const PROVIDER_ENV: &[&str] = &["COPILOT_PROVIDER_", "COPILOT_MODEL", "COPILOT_OFFLINE"];

static FLAVOR: Flavor = Flavor {
    name: "Copilot CLI",
    transport: TRANSPORT,
    parse: parse_event,
    exit_meaning: |_| None,
};

/// What one output line means.
pub fn parse_event(line: &[u8]) -> Vec<Event> {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return vec![Event::Note(clip(String::from_utf8_lossy(line).trim()))];
    };
    let d = &v["data"];
    let s = |x: &Value| x.as_str().unwrap_or_default().to_string();
    match v["type"].as_str().unwrap_or_default() {
        "user.message" => vec![Event::Ack],
        "assistant.message" => match d["content"].as_str() {
            Some(t) if !t.is_empty() => vec![Event::Text(t.into())],
            _ => vec![Event::Quiet],
        },
        "tool.execution_start" => vec![Event::Tool {
            id: s(&d["toolCallId"]),
            name: s(&d["toolName"]),
        }],
        "tool.execution_complete" if d["success"] == false => {
            let msg = clip(d["error"]["message"].as_str().unwrap_or_default());
            if msg.starts_with("Permission denied") {
                vec![Event::Refused {
                    id: s(&d["toolCallId"]),
                    detail: format!(
                        "refused by Copilot CLI's permission rules (agentsight never approves): {msg}"
                    ),
                }]
            } else {
                vec![Event::Note(format!(
                    "tool call {} failed: {msg}",
                    s(&d["toolCallId"])
                ))]
            }
        }
        "session.error" => vec![Event::Note(format!(
            "{}: {}",
            d["errorType"].as_str().unwrap_or("error"),
            clip(d["message"].as_str().unwrap_or_default())
        ))],
        // A failed turn's reason is the `session.error` before it.
        "result" => match v["exitCode"].as_i64() {
            Some(0) => vec![Event::Result(Ok(()))],
            _ => vec![Event::Result(Err(String::new()))],
        },
        _ => vec![Event::Quiet],
    }
}

/// Starts Copilot CLI on the session.
pub fn start(
    target: &Target,
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let program = spawner.program("AGENTSIGHT_COPILOT_BIN", "copilot")?;
    let args: Vec<OsString> = [
        &format!("--resume={}", target.session_id),
        "--no-auto-update",
        "--output-format",
        "json",
    ]
    .map(OsString::from)
    .to_vec();
    // The pin runs, not a newer package its loader would fetch or prefer.
    let spawner = spawner
        .clone()
        .with_own_env(PROVIDER_ENV)
        .with_var("COPILOT_AUTO_UPDATE", "false");
    oneshot::start(&FLAVOR, &program, &args, text, &spawner, opts, progress)
}

#[cfg(test)]
mod tests;
