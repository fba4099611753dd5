//! Claude Code: `claude -p --resume ID --input-format stream-json
//! --output-format stream-json --verbose` in the session's cwd, the message
//! as one stream-json user line on stdin, then stdin closed (Claude Code
//! 2.1 keeps reading stdin for more messages until it is closed; closed, it
//! ends after the turn). It appends the turn to the session's own
//! transcript.
//!
//! Output, as the pinned 2.1.328 writes it: `system`/`init`, then
//! `assistant` (one per content block: text, tool_use) and `user` (tool
//! results) events, `system`/`api_retry` while the model endpoint fails,
//! and a final `result` (`subtype` `success` or `error_*`, `is_error`,
//! `result` = the answer, `permission_denials`). The message itself is not
//! echoed, so the first `assistant` (or `user`) event is the
//! acknowledgement. Nothing is ever approved for the user: tools that need
//! a permission are refused by Claude Code's own default mode, and the
//! result's `permission_denials` are reported as rejections.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::child::{ProviderChild, describe};
use super::lines::{Line, LineReader, ReadEnd};
use super::{MessageError, Options, Progress, Runtime, Spawner, Target, TurnEnd, clip};

pub const TRANSPORT: &str = "claude-stream-json";
/// Output lines over this are skipped (and counted).
pub const MAX_LINE: usize = 1024 * 1024;
/// How long Claude Code may take to exit after its result.
const EXIT_AFTER_RESULT: Duration = Duration::from_secs(20);

/// What one output line means to the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `assistant` or `user`: the message was taken; with what it carried.
    Turn(Vec<Progress>),
    /// `system`/`api_retry`, an unknown event, or a line that is not JSON.
    Note(String),
    /// The turn's `result`.
    Result(TurnEnd),
    /// An `error` event.
    Error(String),
    /// `system`/`init` and other events that need no action.
    Quiet,
}

/// The stream-json line that carries `text` as the user's message.
pub fn input_line(text: &str) -> Vec<u8> {
    let msg = serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
    });
    let mut line = msg.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Interprets one output line.
pub fn parse_event(line: &[u8]) -> Event {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Event::Note(format!(
            "claude wrote a line that is not JSON: {}",
            clip(&String::from_utf8_lossy(line))
        ));
    };
    let subtype = v["subtype"].as_str().unwrap_or_default();
    match v["type"].as_str().unwrap_or_default() {
        "assistant" | "user" => Event::Turn(blocks(&v["message"]["content"])),
        "result" => Event::Result(result_of(&v)),
        "error" => Event::Error(error_text(&v)),
        "system" if subtype == "api_retry" => Event::Note(format!(
            "the model endpoint failed ({}, status {}); Claude Code retries (attempt {} of {})",
            v["error"].as_str().unwrap_or("unknown"),
            v["error_status"],
            v["attempt"],
            v["max_retries"]
        )),
        "system" | "stream_event" | "rate_limit_event" => Event::Quiet,
        other => Event::Note(format!("claude event {other:?} ignored")),
    }
}

/// Text and tool calls of an `assistant` message; tool results add nothing.
fn blocks(content: &Value) -> Vec<Progress> {
    let mut out = Vec::new();
    for b in content.as_array().into_iter().flatten() {
        match b["type"].as_str() {
            Some("text") => {
                if let Some(t) = b["text"].as_str().filter(|t| !t.is_empty()) {
                    out.push(Progress::Text(t.to_string()));
                }
            }
            Some("tool_use") => {
                out.push(Progress::Tool(
                    b["name"].as_str().unwrap_or("?").to_string(),
                ));
            }
            _ => {}
        }
    }
    out
}

/// A `result` event: failed when `is_error` or an `error_*` subtype.
fn result_of(v: &Value) -> TurnEnd {
    let subtype = v["subtype"].as_str().unwrap_or_default();
    let failed = v["is_error"].as_bool() == Some(true) || subtype.contains("error");
    let response = v["result"].as_str().map(str::to_string);
    if !failed {
        return TurnEnd {
            completed: true,
            response,
            detail: None,
        };
    }
    let errors: Vec<&str> = v["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let why = if !errors.is_empty() {
        errors.join("; ")
    } else if let Some(r) = response.as_deref().filter(|r| !r.is_empty()) {
        r.to_string()
    } else {
        format!("result {subtype}")
    };
    TurnEnd {
        completed: false,
        response: None,
        detail: Some(format!("Claude Code reported an error: {why}")),
    }
}

fn error_text(v: &Value) -> String {
    let e = &v["error"];
    let text = e["message"]
        .as_str()
        .or(e.as_str())
        .or(v["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| clip(&v.to_string()));
    format!("Claude Code reported an error: {text}")
}

/// The tools Claude Code's permission mode refused during the turn.
pub fn denials(line: &[u8]) -> Vec<Progress> {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Vec::new();
    };
    v["permission_denials"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| Progress::Rejected {
            method: d["tool_name"].as_str().unwrap_or("?").to_string(),
            detail: format!(
                "refused by Claude Code's permission mode (agentsight never approves): {}",
                clip(&d["tool_input"].to_string())
            ),
        })
        .collect()
}

/// Starts Claude Code on the session and returns once it acknowledged the
/// message (its first `assistant` or `user` event), within
/// `opts.ack_timeout`.
pub fn start(
    target: &Target,
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let program = spawner.program("AGENTSIGHT_CLAUDE_BIN", "claude")?;
    let args: Vec<OsString> = [
        "-p",
        "--resume",
        &target.session_id,
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    .map(OsString::from)
    .to_vec();
    let (child, stdout) = ProviderChild::start(spawner, &program, &args, input_line(text))?;
    let mut rt = ClaudeRuntime {
        child,
        lines: LineReader::spawn(stdout, MAX_LINE),
        acked: false,
        end: None,
        skipped: 0,
        last_note: None,
    };
    rt.until_ack(opts.ack_timeout, progress)?;
    Ok(Box::new(rt))
}

struct ClaudeRuntime {
    child: ProviderChild,
    lines: LineReader,
    acked: bool,
    /// The `result`, once seen.
    end: Option<TurnEnd>,
    /// Lines over [`MAX_LINE`], skipped.
    skipped: usize,
    /// The last note (a retry, an unknown line): the reason if it stops.
    last_note: Option<String>,
}

/// Why reading stopped before the awaited event.
enum Stop {
    Timeout,
    /// Output closed: the provider exited (or is about to).
    Eof,
}

impl ClaudeRuntime {
    /// Handles lines until `done(self)` or a stop.
    fn pump(
        &mut self,
        deadline: Instant,
        progress: &mut dyn FnMut(Progress),
        done: fn(&Self) -> bool,
    ) -> Result<(), Stop> {
        while !done(self) {
            let line = match self.lines.next(deadline) {
                Ok(Line::Text(l)) => l,
                Ok(Line::TooLong(n)) => {
                    self.skipped += 1;
                    progress(Progress::Note(format!(
                        "skipped a claude output line of {n} bytes (over {MAX_LINE}); {} so far",
                        self.skipped
                    )));
                    continue;
                }
                Err(ReadEnd::Timeout) => return Err(Stop::Timeout),
                Err(ReadEnd::Eof(_)) => return Err(Stop::Eof),
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.handle(&line, progress);
        }
        Ok(())
    }

    fn handle(&mut self, line: &[u8], progress: &mut dyn FnMut(Progress)) {
        match parse_event(line) {
            Event::Turn(items) => {
                if !self.acked {
                    self.acked = true;
                    progress(Progress::Acknowledged);
                }
                items.into_iter().for_each(&mut *progress);
            }
            Event::Note(n) => {
                progress(Progress::Note(n.clone()));
                self.last_note = Some(n);
            }
            Event::Result(end) => {
                denials(line).into_iter().for_each(&mut *progress);
                self.end = Some(end);
            }
            Event::Error(e) => {
                self.end = Some(TurnEnd {
                    completed: false,
                    response: None,
                    detail: Some(e),
                });
            }
            Event::Quiet => {}
        }
    }

    fn until_ack(
        &mut self,
        bound: Duration,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), MessageError> {
        let deadline = Instant::now() + bound;
        let stop = match self.pump(deadline, progress, |s| s.acked || s.end.is_some()) {
            Ok(()) => match &self.end {
                Some(end) if !self.acked && !end.completed => {
                    let why = end.detail.clone().unwrap_or_default();
                    return Err(MessageError::Failed(why));
                }
                Some(_) if !self.acked => {
                    // A turn that ended well without a word: taken all the same.
                    self.acked = true;
                    progress(Progress::Acknowledged);
                    return Ok(());
                }
                _ => return Ok(()),
            },
            Err(stop) => stop,
        };
        let why = self.last_note.take().map(|n| format!(" (last: {n})"));
        match stop {
            Stop::Timeout => Err(MessageError::Timeout(format!(
                "Claude Code did not acknowledge the message within {} s{}",
                bound.as_secs(),
                why.unwrap_or_default()
            ))),
            Stop::Eof => {
                let st = self
                    .child
                    .wait_until(Instant::now() + Duration::from_secs(5));
                Err(MessageError::Failed(format!(
                    "Claude Code ended ({}) before acknowledging the message{}",
                    st.map(describe).unwrap_or_else(|| "output closed".into()),
                    why.unwrap_or_default()
                )))
            }
        }
    }
}

impl Runtime for ClaudeRuntime {
    fn transport(&self) -> &'static str {
        TRANSPORT
    }

    fn provider_pid(&self) -> u32 {
        self.child.pid()
    }

    /// Until the `result`, then until Claude Code exits.
    fn wait_turn(
        &mut self,
        deadline: Instant,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<TurnEnd, MessageError> {
        match self.pump(deadline, progress, |s| s.end.is_some()) {
            Ok(()) => {}
            Err(Stop::Timeout) => {
                self.child.kill();
                return Err(MessageError::Timeout(
                    "Claude Code's turn did not end in time; it was stopped".into(),
                ));
            }
            Err(Stop::Eof) => {
                let st = self
                    .child
                    .wait_until(Instant::now() + Duration::from_secs(5));
                let last = self.last_note.take().map(|n| format!(" (last: {n})"));
                return Ok(TurnEnd {
                    completed: false,
                    response: None,
                    detail: Some(format!(
                        "Claude Code ended ({}) without a result{}",
                        st.map(describe).unwrap_or_else(|| "output closed".into()),
                        last.unwrap_or_default()
                    )),
                });
            }
        }
        let end = self.end.take().unwrap_or_default();
        let exit_by = deadline.min(Instant::now() + EXIT_AFTER_RESULT);
        if self.child.wait_until(exit_by).is_none() {
            progress(Progress::Note(
                "Claude Code did not exit after its result; stopped it".into(),
            ));
            self.child.kill();
        }
        Ok(end)
    }
}

#[cfg(test)]
mod tests;
