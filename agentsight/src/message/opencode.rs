//! opencode: `opencode run --session ID --format json` in the session's
//! cwd, the message on stdin, then stdin closed. One process per message.
//! Verified on the pinned 1.18.33: `run` reads a piped stdin as the message
//! (no positional message is passed, so no text is ever read as an option)
//! and appends the turn to the session in its database
//! (`~/.local/share/opencode/opencode.db`); no new session is made.
//!
//! Output with `--format json` (JSON lines, each with `sessionID` and the
//! `part`): `step_start` when a model call starts (the acknowledgement: the
//! message is not echoed), `text` (a whole text part), `tool_use` (a call in
//! its final state), `step_finish` with the step's `reason`, and `error`.
//! The turn is complete at a `step_finish` of reason `stop` and the process
//! exit. No `--auto`: opencode's own permission rules decide, and what it
//! asks for in a `run` is rejected by opencode itself.

use std::ffi::OsString;

use serde_json::Value;

use super::oneshot::{self, Event, Flavor};
use super::{MessageError, Options, Progress, Runtime, Spawner, Target, clip};

pub const TRANSPORT: &str = "opencode-run";

static FLAVOR: Flavor = Flavor {
    name: "opencode",
    transport: TRANSPORT,
    parse: parse_event,
    exit_meaning: |_| None,
};

/// What one output line means.
pub fn parse_event(line: &[u8]) -> Vec<Event> {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return vec![Event::Note(clip(String::from_utf8_lossy(line).trim()))];
    };
    let part = &v["part"];
    let s = |x: &Value| x.as_str().unwrap_or_default().to_string();
    match v["type"].as_str().unwrap_or_default() {
        "step_start" => vec![Event::Ack],
        "text" => match part["text"].as_str() {
            Some(t) if !t.is_empty() => vec![Event::Ack, Event::Text(t.into())],
            _ => vec![Event::Ack],
        },
        "tool_use" => {
            let id = s(&part["callID"]);
            let mut out = vec![
                Event::Ack,
                Event::Tool {
                    id: id.clone(),
                    name: s(&part["tool"]),
                },
            ];
            if part["state"]["status"] == "error" {
                let err = clip(part["state"]["error"].as_str().unwrap_or_default());
                // opencode's words when a permission it asked for was
                // rejected (a `run` cannot answer it).
                out.push(if err.contains("rejected permission") {
                    Event::Refused {
                        id,
                        detail: format!(
                            "refused by opencode's permission rules (agentsight never approves): {err}"
                        ),
                    }
                } else {
                    Event::Note(format!("tool call {id} failed: {err}"))
                });
            }
            out
        }
        "step_finish" => match part["reason"].as_str() {
            Some("stop") => vec![Event::Result(Ok(()))],
            Some("tool-calls") => vec![Event::Quiet],
            other => vec![Event::Note(format!(
                "a model call ended with reason {}",
                other.unwrap_or("?")
            ))],
        },
        "error" => {
            let e = &v["error"];
            let msg = e["data"]["message"]
                .as_str()
                .or(e["message"].as_str())
                .map_or_else(|| clip(&e.to_string()), clip);
            vec![Event::Result(Err(match e["name"].as_str() {
                Some(name) => format!("{name}: {msg}"),
                None => msg,
            }))]
        }
        other => vec![Event::Note(format!("opencode event {other:?} ignored"))],
    }
}

/// Starts opencode on the session.
pub fn start(
    target: &Target,
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let program = spawner.program("AGENTSIGHT_OPENCODE_BIN", "opencode")?;
    let args: Vec<OsString> = ["run", "--session", &target.session_id, "--format", "json"]
        .map(OsString::from)
        .to_vec();
    oneshot::start(&FLAVOR, &program, &args, text, spawner, opts, progress)
}

#[cfg(test)]
mod tests;
