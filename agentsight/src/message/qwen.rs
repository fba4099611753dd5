//! Qwen Code: `qwen --resume ID -o stream-json` in the session's cwd, the
//! message on stdin, then stdin closed. One process per message. Verified
//! on the pinned 0.24.4: `--resume` takes the session's UUID, the piped
//! stdin is the prompt (Qwen Code appends "\n\n" to it), and the turn is
//! appended to the session's own `~/.qwen/projects/CWD/chats/ID.jsonl`.
//!
//! Output with `-o stream-json` (Claude Code's shape): `system`/`init`,
//! `assistant` messages (text and `tool_use` blocks), `user` messages
//! (tool results), `stream_event`s, then one `result` (`is_error`,
//! `error.message`, `permission_denials`). The message is not echoed: the
//! first `assistant` or `user` message is the acknowledgement. The turn
//! ends with the `result` and the process exit. No approval mode is passed
//! (never `--yolo`): Qwen Code's default mode does not offer the model the
//! tools that need an approval in a non-interactive run.
//!
//! Qwen Code 0.24.4 needs Node.js 22 as `node` on the `PATH` (its entry
//! script starts `node` again): that is the user's installation.

use std::ffi::OsString;

use serde_json::Value;

use super::oneshot::{self, Event, Flavor};
use super::{MessageError, Options, Progress, Runtime, Spawner, Target, clip};

pub const TRANSPORT: &str = "qwen-resume";

static FLAVOR: Flavor = Flavor {
    name: "Qwen Code",
    transport: TRANSPORT,
    parse: parse_event,
    exit_meaning: |_| None,
};

/// What one output line means.
pub fn parse_event(line: &[u8]) -> Vec<Event> {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return vec![Event::Note(clip(String::from_utf8_lossy(line).trim()))];
    };
    match v["type"].as_str().unwrap_or_default() {
        "assistant" => {
            let mut out = vec![Event::Ack];
            for b in v["message"]["content"].as_array().into_iter().flatten() {
                match b["type"].as_str() {
                    Some("text") => match b["text"].as_str() {
                        Some(t) if !t.is_empty() => out.push(Event::Text(t.into())),
                        _ => {}
                    },
                    Some("tool_use") => out.push(Event::Tool {
                        id: b["id"].as_str().unwrap_or_default().into(),
                        name: b["name"].as_str().unwrap_or("?").into(),
                    }),
                    _ => {}
                }
            }
            out
        }
        "user" => vec![Event::Ack],
        "result" => result(&v),
        "system" | "stream_event" => vec![Event::Quiet],
        other => vec![Event::Note(format!("qwen event {other:?} ignored"))],
    }
}

/// The `result`: its refused calls, then the end of the turn.
fn result(v: &Value) -> Vec<Event> {
    let mut out: Vec<Event> = v["permission_denials"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| Event::Refused {
            id: d["tool_use_id"].as_str().unwrap_or("?").into(),
            detail: format!(
                "refused by Qwen Code's approval mode (agentsight never approves): {}",
                clip(&d["tool_input"].to_string())
            ),
        })
        .collect();
    let failed =
        v["is_error"] == true || v["subtype"].as_str().is_some_and(|s| s.contains("error"));
    out.push(Event::Result(if failed {
        Err(v["error"]["message"]
            .as_str()
            .map_or_else(|| clip(&v.to_string()), clip))
    } else {
        Ok(())
    }));
    out
}

/// Starts Qwen Code on the session.
pub fn start(
    target: &Target,
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let program = spawner.program("AGENTSIGHT_QWEN_BIN", "qwen").map_err(|e| {
        MessageError::Failed(format!(
            "{e} (Qwen Code also needs Node.js 22 or newer as `node` on that PATH: the user's installation)"
        ))
    })?;
    let args: Vec<OsString> = ["--resume", &target.session_id, "-o", "stream-json"]
        .map(OsString::from)
        .to_vec();
    oneshot::start(&FLAVOR, &program, &args, text, spawner, opts, progress)
}

#[cfg(test)]
mod tests;
