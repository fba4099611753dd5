//! The runtime shared by the drivers that run one agent process per
//! message and read its JSON lines until it exits: Copilot CLI, opencode and
//! Qwen Code. Each driver says what a line means ([`Event`]) and how its CLI
//! is named; the waiting, bounds and outcome rules are the same for all
//! (those of the Gemini CLI driver, which predates this module).

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::child::{ProviderChild, describe};
use super::lines::{Line, LineReader, ReadEnd};
use super::{MessageError, Options, Progress, Runtime, Spawner, TurnEnd};

/// Output lines over this are skipped (and counted).
pub const MAX_LINE: usize = 1024 * 1024;
/// The most answer text held at once.
const MAX_ANSWER: usize = 1024 * 1024;
/// An agent that exits non-zero this soon after starting failed to take the
/// message (as for Gemini CLI).
pub const EARLY_EXIT: Duration = Duration::from_millis(300);

/// What one output line means to the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The agent took the message (its echo, or the model's first output).
    Ack,
    /// One whole piece of agent text (not a delta).
    Text(String),
    /// A tool call: the id the model gave it, and the tool's name.
    Tool { id: String, name: String },
    /// A tool call the agent itself refused for want of an approval (we
    /// approve nothing): the call's id and the agent's words.
    Refused { id: String, detail: String },
    /// The end-of-turn report: `Ok(())` completed, else the error (empty:
    /// the last note is the reason).
    Result(Result<(), String>),
    /// A line that is not a known event, or an error: kept as the detail
    /// should the agent fail.
    Note(String),
    /// Nothing for the caller.
    Quiet,
}

/// One agent's words and ways.
pub struct Flavor {
    /// As people call it: "Copilot CLI".
    pub name: &'static str,
    pub transport: &'static str,
    /// One line's events, in order.
    pub parse: fn(&[u8]) -> Vec<Event>,
    /// What a non-zero exit status means, when the agent documents it.
    pub exit_meaning: fn(i32) -> Option<&'static str>,
}

/// Starts `program args` with `text` on its stdin (then closed) and returns
/// once it took the message (within `opts.ack_timeout`) and did not fail
/// within [`EARLY_EXIT`].
pub fn start(
    flavor: &'static Flavor,
    program: &std::path::Path,
    args: &[OsString],
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let started = Instant::now();
    let (child, stdout) = ProviderChild::start(spawner, program, args, text.as_bytes().to_vec())?;
    let mut rt = OneShot {
        flavor,
        child,
        lines: LineReader::spawn(stdout, MAX_LINE),
        acked: false,
        answer: String::new(),
        tools: HashMap::new(),
        result: None,
        last: None,
        skipped: 0,
        eof: false,
    };
    rt.until_ack(started, opts.ack_timeout, progress)?;
    Ok(Box::new(rt))
}

struct OneShot {
    flavor: &'static Flavor,
    child: ProviderChild,
    lines: LineReader,
    acked: bool,
    /// The agent's last text after its last tool call.
    answer: String,
    /// Tool call id → tool name, to name a refused call.
    tools: HashMap<String, String>,
    /// The end-of-turn report, once seen.
    result: Option<Result<(), String>>,
    /// The last note or unparsed line: the detail of a failure.
    last: Option<String>,
    skipped: usize,
    /// The output has closed.
    eof: bool,
}

impl OneShot {
    /// Handles lines until `deadline`, the end of the output or `done`;
    /// `false` on the deadline.
    fn pump(
        &mut self,
        deadline: Instant,
        progress: &mut dyn FnMut(Progress),
        done: fn(&Self) -> bool,
    ) -> bool {
        while !self.eof && !done(self) {
            match self.lines.next(deadline) {
                Ok(Line::Text(l)) => {
                    if !l.iter().all(u8::is_ascii_whitespace) {
                        for e in (self.flavor.parse)(&l) {
                            self.handle(e, progress);
                        }
                    }
                }
                Ok(Line::TooLong(n)) => {
                    self.skipped += 1;
                    progress(Progress::Note(format!(
                        "skipped a {} output line of {n} bytes (over {MAX_LINE}); {} so far",
                        self.flavor.name, self.skipped
                    )));
                }
                Err(ReadEnd::Timeout) => return false,
                Err(ReadEnd::Eof(_)) => self.eof = true,
            }
        }
        true
    }

    fn handle(&mut self, e: Event, progress: &mut dyn FnMut(Progress)) {
        match e {
            Event::Ack => {
                if !self.acked {
                    self.acked = true;
                    progress(Progress::Acknowledged);
                }
            }
            Event::Text(t) => {
                self.answer = t.chars().take(MAX_ANSWER).collect();
                progress(Progress::Text(t));
            }
            Event::Tool { id, name } => {
                self.answer.clear();
                self.tools.insert(id, name.clone());
                progress(Progress::Tool(name));
            }
            Event::Refused { id, detail } => {
                let method = self.tools.get(&id).cloned().unwrap_or(id);
                progress(Progress::Rejected { method, detail });
            }
            Event::Result(r) => self.result = Some(r),
            Event::Note(n) => {
                progress(Progress::Note(n.clone()));
                self.last = Some(n);
            }
            Event::Quiet => {}
        }
    }

    /// Until the acknowledgement, and at least [`EARLY_EXIT`] after the
    /// start (a non-zero exit by then is a failed send).
    fn until_ack(
        &mut self,
        started: Instant,
        bound: Duration,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), MessageError> {
        if !self.pump(started + bound, progress, |s| s.acked) {
            return Err(MessageError::Timeout(format!(
                "{} did not acknowledge the message within {} s{}",
                self.flavor.name,
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
            (None, false) => Err(MessageError::Failed(format!(
                "{} ended without taking the message{}",
                self.flavor.name,
                self.last
                    .as_ref()
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            ))),
        }
    }

    /// Why the agent failed: its error result, else its last note, else
    /// what its exit status means.
    fn failure(&self, st: ExitStatus) -> String {
        // An empty error is a report without words of its own (Copilot
        // CLI's non-zero `exitCode`): the note before it says why.
        let said = match &self.result {
            Some(Err(e)) if !e.is_empty() => Some(e.clone()),
            _ => self.last.clone(),
        };
        let mut s = format!("{} failed ({}", self.flavor.name, describe(st));
        if let Some(m) = st.code().and_then(self.flavor.exit_meaning) {
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

impl Runtime for OneShot {
    fn transport(&self) -> &'static str {
        self.flavor.transport
    }

    fn provider_pid(&self) -> u32 {
        self.child.pid()
    }

    /// Until the agent exits: status 0 and a successful end-of-turn report
    /// complete the turn; anything else is an incomplete turn with the reason.
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
            return Err(MessageError::Timeout(format!(
                "{}'s turn did not end in time; it was stopped",
                self.flavor.name
            )));
        };
        let response = Some(std::mem::take(&mut self.answer)).filter(|a| !a.is_empty());
        Ok(match (&self.result, st.success()) {
            (Some(Ok(())), true) => TurnEnd {
                completed: true,
                response,
                detail: None,
            },
            (None, true) => TurnEnd {
                completed: false,
                response,
                detail: Some(format!(
                    "{} exited without reporting the end of its turn",
                    self.flavor.name
                )),
            },
            _ => TurnEnd {
                completed: false,
                response,
                detail: Some(self.failure(st)),
            },
        })
    }
}

/// Stand-in agents and fixtures for the drivers' tests.
#[cfg(test)]
pub(super) mod testing {
    use std::path::Path;

    use super::super::{Options, Spawner, Target};
    use crate::sessions::Provider;

    pub const OPTS: Options = Options {
        ack_timeout: std::time::Duration::from_secs(20),
        in_container: false,
    };

    /// The lines of `fixtures/messaging/DIR/NAME`.
    pub fn fixture(dir: &str, name: &str) -> Vec<Vec<u8>> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/messaging")
            .join(dir)
            .join(name);
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// A whole fixture, each line with its newline.
    pub fn bytes_of(dir: &str, name: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for l in fixture(dir, name) {
            out.extend(l);
            out.push(b'\n');
        }
        out
    }

    /// A stand-in `name` on the spawner's PATH that saves its arguments
    /// and stdin (the message), then prints `before`, waits `pause`
    /// seconds, prints `after` and exits `status`.
    pub fn replaying(
        dir: &Path,
        name: &str,
        before: &[u8],
        pause: &str,
        after: &[u8],
        status: i32,
    ) -> Spawner {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(dir.join("before"), before).expect("write output");
        std::fs::write(dir.join("after"), after).expect("write output");
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let script = format!(
            "#!/bin/sh\ncd '{d}'\nprintf '%s\\n' \"$@\" > args\ncat > input\ncat before\nsleep {pause}\ncat after\nexit {status}\n",
            d = dir.display(),
        );
        let exe = bin.join(name);
        std::fs::write(&exe, script).expect("write script");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        super::super::test_spawner(dir, &format!("{}:/usr/bin:/bin", bin.display()))
    }

    pub fn target(dir: &Path, provider: Provider, id: &str) -> Target {
        Target {
            provider,
            session_id: id.into(),
            transcript: dir.join("t"),
            cwd: dir.to_path_buf(),
            cli_version: None,
        }
    }
}
