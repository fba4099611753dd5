//! Gemini CLI: `gemini --resume ID -o stream-json` in the session's cwd,
//! the message on stdin, then stdin closed. One process per message. The
//! pinned 0.61 takes the session's UUID for `--resume` and appends the turn
//! to that session's own `chats/session-*.jsonl`.
//!
//! Output with `-o stream-json`: `init`, the message echoed as a `message`
//! of role `user` (the acknowledgement: the CLI took it for the session),
//! `message` deltas of role `assistant`, `tool_use` / `tool_result`, and a
//! final `result` (`status` `success` or `error` with `error.message`).
//! Errors before the stream (an unknown session id) go to stderr, which is
//! discarded, so those are told by the exit status (Gemini CLI's fatal
//! codes, [`exit_meaning`]). Gemini CLI's default approval mode does not
//! even offer tools that need an approval in a non-interactive run; nothing
//! is approved for the user.

use std::ffi::OsString;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::child::{ProviderChild, describe};
use super::lines::{Line, LineReader, ReadEnd};
use super::{MessageError, Options, Progress, Runtime, Spawner, Target, TurnEnd, clip};

pub const TRANSPORT: &str = "gemini-resume";
/// Output lines over this are skipped (and counted).
pub const MAX_LINE: usize = 1024 * 1024;
/// The most answer text held at once.
const MAX_ANSWER: usize = 1024 * 1024;
/// A Gemini CLI that exits non-zero this soon after starting failed to take
/// the message (the design's rule; also covers an acknowledgement that
/// came first).
pub const EARLY_EXIT: Duration = Duration::from_millis(300);

/// What one output line means to the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The message echoed back (`message`, role `user`).
    Echo,
    /// A piece of the answer (`message`, role `assistant`).
    Text(String),
    /// A tool call (`tool_use`).
    Tool(String),
    /// `result`: `Ok(())` for success, else the error text.
    Result(Result<(), String>),
    /// A line that is not a known event, or a failed tool: kept as the
    /// detail should the CLI fail.
    Note(String),
    /// `init`, a successful `tool_result`.
    Quiet,
}

/// Interprets one output line.
pub fn parse_event(line: &[u8]) -> Event {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Event::Note(clip(String::from_utf8_lossy(line).trim()));
    };
    match (v["type"].as_str().unwrap_or_default(), v["role"].as_str()) {
        ("message", Some("user")) => Event::Echo,
        ("message", Some("assistant")) => Event::Text(v["content"].as_str().unwrap_or("").into()),
        ("tool_use", _) => Event::Tool(v["tool_name"].as_str().unwrap_or("?").into()),
        ("tool_result", _) if v["status"] == "success" => Event::Quiet,
        ("tool_result", _) => Event::Note(format!(
            "tool call {} ended {}: {}",
            v["tool_id"].as_str().unwrap_or("?"),
            v["status"].as_str().unwrap_or("?"),
            clip(
                &v["error"]["message"]
                    .as_str()
                    .map_or_else(|| v["output"].to_string(), str::to_string)
            )
        )),
        ("result", _) if v["status"] == "success" => Event::Result(Ok(())),
        ("result", _) => Event::Result(Err(v["error"]["message"]
            .as_str()
            .map_or_else(|| clip(&v.to_string()), clip))),
        ("error", _) => Event::Note(clip(v["message"].as_str().unwrap_or(&v.to_string()))),
        ("init", _) => Event::Quiet,
        (other, _) => Event::Note(format!("gemini event {other:?} ignored")),
    }
}

/// What Gemini CLI's fatal exit codes mean (its `Fatal*Error` classes).
pub fn exit_meaning(code: i32) -> Option<&'static str> {
    Some(match code {
        41 => "authentication failed",
        42 => "bad input (for --resume: no such session in this project)",
        44 => "sandbox error",
        52 => "configuration error",
        53 => "turn limit reached",
        54 => "a tool failed fatally",
        55 => "the workspace is not trusted",
        130 => "cancelled",
        _ => return None,
    })
}

/// Starts Gemini CLI on the session and returns once it echoed the message
/// (within `opts.ack_timeout`) and did not fail within [`EARLY_EXIT`].
pub fn start(
    target: &Target,
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let program = spawner.program("AGENTSIGHT_GEMINI_BIN", "gemini")?;
    let args: Vec<OsString> = ["--resume", &target.session_id, "-o", "stream-json"]
        .map(OsString::from)
        .to_vec();
    let started = Instant::now();
    let (child, stdout) = ProviderChild::start(spawner, &program, &args, text.as_bytes().to_vec())?;
    let mut rt = GeminiRuntime {
        child,
        lines: LineReader::spawn(stdout, MAX_LINE),
        acked: false,
        answer: String::new(),
        unsaid: String::new(),
        result: None,
        last: None,
        skipped: 0,
        eof: false,
    };
    rt.until_ack(started, opts.ack_timeout, progress)?;
    Ok(Box::new(rt))
}

struct GeminiRuntime {
    child: ProviderChild,
    lines: LineReader,
    acked: bool,
    /// The answer since the last tool call.
    answer: String,
    /// Answer text not yet reported: Gemini CLI streams it in small deltas,
    /// reported as one piece at the next tool call, result or end.
    unsaid: String,
    /// The `result` event, once seen.
    result: Option<Result<(), String>>,
    /// The last note or unparsed line: the detail of a failure.
    last: Option<String>,
    skipped: usize,
    /// The output has closed.
    eof: bool,
}

impl GeminiRuntime {
    /// Handles lines until `deadline` or the end of the output; `false` on
    /// the deadline.
    fn pump(
        &mut self,
        deadline: Instant,
        progress: &mut dyn FnMut(Progress),
        done: fn(&Self) -> bool,
    ) -> bool {
        while !self.eof && !done(self) {
            match self.lines.next(deadline) {
                Ok(Line::Text(l)) => self.handle(&l, progress),
                Ok(Line::TooLong(n)) => {
                    self.skipped += 1;
                    progress(Progress::Note(format!(
                        "skipped a gemini output line of {n} bytes (over {MAX_LINE}); {} so far",
                        self.skipped
                    )));
                }
                Err(ReadEnd::Timeout) => return false,
                Err(ReadEnd::Eof(_)) => {
                    self.eof = true;
                    self.say(progress);
                }
            }
        }
        true
    }

    fn say(&mut self, progress: &mut dyn FnMut(Progress)) {
        if !self.unsaid.is_empty() {
            progress(Progress::Text(std::mem::take(&mut self.unsaid)));
        }
    }

    fn handle(&mut self, line: &[u8], progress: &mut dyn FnMut(Progress)) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match parse_event(line) {
            Event::Echo => {
                if !self.acked {
                    self.acked = true;
                    progress(Progress::Acknowledged);
                }
            }
            Event::Text(t) => {
                // The answer is held up to a bound (what is said goes out
                // in pieces of at most that size).
                if self.answer.len() < MAX_ANSWER {
                    self.answer.push_str(&t);
                }
                self.unsaid.push_str(&t);
                if self.unsaid.len() >= MAX_ANSWER {
                    self.say(progress);
                }
            }
            Event::Tool(name) => {
                self.say(progress);
                self.answer.clear();
                progress(Progress::Tool(name));
            }
            Event::Result(r) => {
                self.say(progress);
                self.result = Some(r);
            }
            Event::Note(n) => {
                progress(Progress::Note(n.clone()));
                self.last = Some(n);
            }
            Event::Quiet => {}
        }
    }

    /// Until the echo, and at least [`EARLY_EXIT`] after the start (a
    /// non-zero exit by then is a failed send).
    fn until_ack(
        &mut self,
        started: Instant,
        bound: Duration,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), MessageError> {
        if !self.pump(started + bound, progress, |s| s.acked) {
            return Err(MessageError::Timeout(format!(
                "Gemini CLI did not acknowledge the message within {} s{}",
                bound.as_secs(),
                self.last
                    .as_ref()
                    .map(|l| format!(" (last: {l})"))
                    .unwrap_or_default()
            )));
        }
        self.pump(started + EARLY_EXIT, progress, |_| false);
        let failed = match self.child.exited() {
            Some(st) if !st.success() => Some(st),
            None if self.eof => self
                .child
                .wait_until(Instant::now() + Duration::from_secs(5))
                .filter(|st| !st.success()),
            _ => None,
        };
        match (failed, self.acked) {
            (Some(st), _) => Err(MessageError::Failed(self.failure(st))),
            (None, true) => Ok(()),
            (None, false) => Err(MessageError::Failed(
                "Gemini CLI ended without taking the message".into(),
            )),
        }
    }

    /// Why the CLI failed: its error result, else its last line, else
    /// what its exit status means.
    fn failure(&self, st: ExitStatus) -> String {
        let said = match &self.result {
            Some(Err(e)) => Some(e.clone()),
            _ => self.last.clone(),
        };
        let meaning = st.code().and_then(exit_meaning);
        let mut s = format!("Gemini CLI failed ({}", describe(st));
        if let Some(m) = meaning {
            s.push_str(": ");
            s.push_str(m);
        }
        s.push(')');
        if let Some(d) = said {
            s.push_str(": ");
            s.push_str(&d);
        }
        s
    }
}

impl Runtime for GeminiRuntime {
    fn transport(&self) -> &'static str {
        TRANSPORT
    }

    fn provider_pid(&self) -> u32 {
        self.child.pid()
    }

    /// Until Gemini CLI exits: status 0 and a successful result complete
    /// the turn; anything else is an incomplete turn with the reason.
    fn wait_turn(
        &mut self,
        deadline: Instant,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<TurnEnd, MessageError> {
        let status = if self.pump(deadline, progress, |_| false) {
            self.child.wait_until(deadline)
        } else {
            None
        };
        let Some(st) = status else {
            self.child.kill();
            return Err(MessageError::Timeout(
                "Gemini CLI's turn did not end in time; it was stopped".into(),
            ));
        };
        let answer = Some(std::mem::take(&mut self.answer)).filter(|a| !a.is_empty());
        Ok(match (&self.result, st.success()) {
            (Some(Ok(())), true) => TurnEnd {
                completed: true,
                response: answer,
                detail: None,
            },
            (None, true) => TurnEnd {
                completed: false,
                response: answer,
                detail: Some("Gemini CLI exited without reporting a result".into()),
            },
            _ => TurnEnd {
                completed: false,
                response: answer,
                detail: Some(self.failure(st)),
            },
        })
    }
}

#[cfg(test)]
mod tests;
