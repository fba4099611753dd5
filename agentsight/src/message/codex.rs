//! The Codex driver: `codex app-server --listen stdio://`, JSON-RPC over
//! stdio (M4 and M5 of the messaging design; docs/messaging.md).
//!
//! One app-server per message: `initialize` → `initialized` →
//! `thread/resume` → `turn/start` (or `turn/steer` into a turn Codex reports
//! in progress, with its id) → `turn/completed`. Every request of the server
//! (approvals, user input, tool calls) is answered with a JSON-RPC error: we
//! never approve anything for the user. Verified against the pinned Codex
//! 0.169.0: the refused command is not run, and the rollout records the call
//! as failed (`exec_command failed: … approval request failed`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::child::{Input, ProviderChild};
use super::lines::{Line, LineReader, ReadEnd};
use super::{MessageError, Options, Progress, Runtime, Spawner, Target, TurnEnd};

/// The transport name the log and the bridge report.
pub const TRANSPORT: &str = "codex-app-server";

/// A line of the app-server over this closes the transport (M4).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// JSON-RPC "method not found": the answer to every server request.
const REFUSAL_CODE: i64 = -32601;
pub const REFUSAL: &str =
    "agentsight does not answer Codex server requests (approvals are never granted)";

/// Notifications we do not read (M4): the per-item stream. The turn's
/// outcome and its final agent message come with `turn/completed`.
const OPT_OUT: &[&str] = &[
    "item/started",
    "item/completed",
    "item/agentMessage/delta",
    "item/commandExecution/outputDelta",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/textDelta",
    "item/plan/delta",
    "turn/diff/updated",
];

/// After the turn ended (or was interrupted), how long the app-server gets
/// to finish its rollout and exit on its own before it is killed.
const WIND_DOWN: Duration = Duration::from_secs(5);

/// What a turn continued through the bridge runs with (M5), and what the
/// command says. Verified on Codex 0.169.0: `sandboxPolicy` on `turn/start`
/// is not kept for later turns (a later `thread/resume` reports the
/// session's own sandbox again), while an `approvalPolicy` override would
/// be recorded in the rollout and inherited by every later resume — so
/// approvals are left as the session has them, and refused by us.
pub const CONTAINER_NOTE: &str = "Codex in a container: this turn runs without Codex's own command sandbox (sandboxPolicy externalSandbox, network enabled) — the container is the sandbox boundary; approval requests are refused, never granted; later turns keep the session's own settings";

/// The sandbox policy of a turn continued inside a container.
fn container_sandbox() -> Value {
    json!({ "type": "externalSandbox", "networkAccess": "enabled" })
}

/// Starts `codex app-server` for `target` and returns once Codex accepted
/// the message into a turn (the `turn/start` or `turn/steer` result).
pub fn start(
    target: &Target,
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let program = program(spawner, target.cli_version.as_deref())?;
    start_with(&program, target, text, spawner, opts, progress)
}

/// The Codex binary (M4): `AGENTSIGHT_CODEX_BIN`; else the standalone
/// release of the session's CLI version under the owner's
/// `~/.codex/packages/standalone/releases/`; else `codex` on PATH.
fn program(spawner: &Spawner, cli_version: Option<&str>) -> Result<PathBuf, MessageError> {
    const OVERRIDE: &str = "AGENTSIGHT_CODEX_BIN";
    if std::env::var_os(OVERRIDE).is_some_and(|v| !v.is_empty()) {
        return spawner.program(OVERRIDE, "codex");
    }
    let releases = spawner
        .identity
        .home
        .join(".codex/packages/standalone/releases");
    if let Some(p) = cli_version.and_then(|v| standalone_release(&releases, v)) {
        return Ok(p);
    }
    spawner.program(OVERRIDE, "codex")
}

/// `<releases>/<version>-<arch>-<rest of the target>/bin/codex` for this
/// machine's architecture; the first by name when there are several
/// (e.g. a musl and a gnu build).
fn standalone_release(releases: &Path, version: &str) -> Option<PathBuf> {
    // A version is a plain name (it comes from the transcript).
    if version.is_empty() || version.contains('/') || version.starts_with('.') {
        return None;
    }
    let prefix = format!("{version}-{}-", std::env::consts::ARCH);
    let mut names: Vec<OsString> = std::fs::read_dir(releases)
        .ok()?
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_str().is_some_and(|n| n.starts_with(&prefix)))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| releases.join(n).join("bin/codex"))
        .find(|p| p.is_file())
}

/// [`start`] with the binary chosen.
fn start_with(
    program: &Path,
    target: &Target,
    text: &str,
    spawner: &Spawner,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    let args: Vec<OsString> = ["app-server", "--listen", "stdio://"]
        .map(OsString::from)
        .to_vec();
    let (child, input, stdout) = ProviderChild::spawn(spawner, program, &args)?;
    let mut server = AppServer {
        child,
        input,
        // Start-up to acknowledgement is one bound, whatever the steps.
        start_deadline: Some(Instant::now() + opts.ack_timeout),
        lines: LineReader::spawn(stdout, MAX_LINE),
        next_id: 0,
        ack_timeout: opts.ack_timeout,
        thread_id: target.session_id.clone(),
        turn_id: None,
        ended: None,
    };
    server.handshake(progress)?;
    server.submit(text, opts.in_container, progress)?;
    server.start_deadline = None;
    progress(Progress::Acknowledged);
    Ok(Box::new(server))
}

/// A running app-server with our thread resumed.
struct AppServer {
    /// Its process group is killed when this is dropped.
    child: ProviderChild,
    input: Input,
    /// Until acknowledged: the one deadline of every wait.
    start_deadline: Option<Instant>,
    lines: LineReader,
    next_id: u64,
    ack_timeout: Duration,
    thread_id: String,
    /// Our turn, once Codex named it.
    turn_id: Option<String>,
    /// Our turn's end, once `turn/completed` came.
    ended: Option<TurnEnd>,
}

/// One message of the app-server, by JSON-RPC shape.
enum Incoming {
    Response {
        id: Value,
        result: Result<Value, String>,
    },
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

impl Incoming {
    fn parse(line: &[u8]) -> Option<Incoming> {
        let mut v: Value = serde_json::from_slice(line).ok()?;
        let method = v.get("method").and_then(Value::as_str).map(str::to_owned);
        let params = v.get_mut("params").map(Value::take).unwrap_or(Value::Null);
        match (method, v.get_mut("id").map(Value::take)) {
            (Some(method), Some(id)) => Some(Incoming::Request { id, method, params }),
            (Some(method), None) => Some(Incoming::Notification { method, params }),
            (None, Some(id)) => {
                let result = match v.get_mut("error") {
                    Some(e) => Err(e
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| e.to_string(), str::to_owned)),
                    None => Ok(v.get_mut("result").map(Value::take).unwrap_or(Value::Null)),
                };
                Some(Incoming::Response { id, result })
            }
            (None, None) => None,
        }
    }
}

impl AppServer {
    /// `initialize` (clientInfo, the notifications we opt out of), then
    /// `initialized`.
    fn handshake(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<(), MessageError> {
        let params = json!({
            "clientInfo": {
                "name": "agentsight",
                "title": "agentsight",
                "version": env!("CARGO_PKG_VERSION"),
            },
            "capabilities": {
                "experimentalApi": true,
                "optOutNotificationMethods": OPT_OUT,
            },
        });
        self.request("initialize", params, progress)?;
        self.send(&json!({ "jsonrpc": "2.0", "method": "initialized" }))
    }

    /// `thread/resume`, then the message: `turn/start`, or `turn/steer`
    /// into the turn Codex reports in progress. A turn in progress without
    /// an id (still starting) is busy.
    fn submit(
        &mut self,
        text: &str,
        in_container: bool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), MessageError> {
        let params = json!({ "threadId": self.thread_id, "excludeTurns": true });
        let resumed = self.request("thread/resume", params, progress)?;
        let input = json!([{ "type": "text", "text": text }]);
        let turn = match active_turn(&resumed)? {
            Some(turn_id) => {
                let params = json!({
                    "threadId": self.thread_id,
                    "expectedTurnId": turn_id,
                    "input": input,
                });
                let r = self.request("turn/steer", params, progress)?;
                r.get("turnId").and_then(Value::as_str).map(str::to_owned)
            }
            None => {
                let mut params = json!({ "threadId": self.thread_id, "input": input });
                if in_container {
                    params["sandboxPolicy"] = container_sandbox();
                    progress(Progress::Note(CONTAINER_NOTE.into()));
                }
                let r = self.request("turn/start", params, progress)?;
                r.pointer("/turn/id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }
        };
        let turn = turn.ok_or_else(|| {
            MessageError::Failed("Codex accepted the message but named no turn".into())
        })?;
        self.turn_id = Some(turn);
        Ok(())
    }

    /// The deadline of the next wait: the start-up's, or one bound from now.
    fn deadline(&self) -> Instant {
        self.start_deadline
            .unwrap_or_else(|| Instant::now() + self.ack_timeout)
    }

    fn send(&mut self, v: &Value) -> Result<(), MessageError> {
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        self.input
            .write(line, self.deadline())
            .map_err(|e| match e {
                MessageError::Failed(m) => {
                    MessageError::Failed(format!("the Codex app-server: {m}"))
                }
                MessageError::Timeout(m) => MessageError::Timeout(format!(
                    "the Codex app-server: {m} within {}",
                    seconds(self.ack_timeout)
                )),
                other => other,
            })
    }

    /// Sends a request and waits (≤ the acknowledgement bound) for its
    /// result, handling whatever else comes first.
    fn request(
        &mut self,
        method: &str,
        params: Value,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Value, MessageError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        let deadline = self.deadline();
        loop {
            match self.next(deadline, method)? {
                Incoming::Response { id: rid, result } if rid.as_u64() == Some(id) => {
                    return result
                        .map_err(|e| MessageError::Failed(format!("Codex refused {method}: {e}")));
                }
                other => self.handle(other, progress)?,
            }
        }
    }

    /// The next message, or why none came before `deadline`.
    fn next(&mut self, deadline: Instant, waiting_for: &str) -> Result<Incoming, MessageError> {
        loop {
            match self.lines.next(deadline) {
                Ok(Line::Text(l)) => match Incoming::parse(&l) {
                    Some(m) => return Ok(m),
                    None => tracing::warn!(
                        bytes = l.len(),
                        "codex app-server: a line that is not a JSON-RPC message, skipped"
                    ),
                },
                Ok(Line::TooLong(n)) => {
                    self.close();
                    return Err(MessageError::Failed(format!(
                        "the Codex app-server sent a line of {n} bytes (over {MAX_LINE}); transport closed"
                    )));
                }
                Err(ReadEnd::Eof(why)) => {
                    let status = self.exit_status();
                    return Err(MessageError::Failed(format!(
                        "the Codex app-server closed its output while we waited for {waiting_for}{}{}",
                        why.map(|w| format!(" ({w})")).unwrap_or_default(),
                        status
                    )));
                }
                Err(ReadEnd::Timeout) => {
                    return Err(MessageError::Timeout(format!(
                        "the Codex app-server did not answer {waiting_for} within {}",
                        seconds(self.ack_timeout)
                    )));
                }
            }
        }
    }

    /// A server request is refused; `turn/completed` of our turn is kept;
    /// an `error` notification is passed on as a note.
    fn handle(
        &mut self,
        m: Incoming,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), MessageError> {
        match m {
            Incoming::Request { id, method, params } => {
                let reply = json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": { "code": REFUSAL_CODE, "message": REFUSAL },
                });
                self.send(&reply)?;
                progress(Progress::Rejected {
                    detail: request_detail(&method, &params),
                    method,
                });
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "turn/completed" if self.is_ours(&params) => {
                    self.ended = Some(turn_end(&params["turn"]));
                }
                "error" if self.is_ours(&params) => {
                    if let Some(msg) = params.pointer("/error/message").and_then(Value::as_str) {
                        let retry = params["willRetry"].as_bool() == Some(true);
                        progress(Progress::Note(format!(
                            "Codex reports an error{}: {msg}",
                            if retry { " (it retries)" } else { "" }
                        )));
                    }
                }
                _ => {}
            },
            Incoming::Response { .. } => {}
        }
        Ok(())
    }

    /// Our thread, and our turn once we know it.
    fn is_ours(&self, params: &Value) -> bool {
        let thread = params["threadId"].as_str() == Some(&self.thread_id);
        let turn = params
            .pointer("/turn/id")
            .or_else(|| params.get("turnId"))
            .and_then(Value::as_str);
        thread
            && match (&self.turn_id, turn) {
                (Some(ours), Some(t)) => ours == t,
                _ => true,
            }
    }

    /// Closes the app-server's input: it exits once its work is written.
    fn close(&mut self) {
        self.input.close();
    }

    /// ", exit status N" once the app-server has exited (it closed its
    /// output, so it is exiting: waited for up to a second), else "".
    fn exit_status(&mut self) -> String {
        self.child
            .wait_until(Instant::now() + Duration::from_secs(1))
            .map(|s| format!(", {s}"))
            .unwrap_or_default()
    }

    /// Lets the app-server exit on its own (it finishes writing the
    /// rollout), for a bounded time.
    fn wind_down(&mut self) {
        self.close();
        self.child.wait_until(Instant::now() + WIND_DOWN);
    }

    /// Asks Codex to stop our turn, so its rollout records the interruption,
    /// and waits briefly for it.
    fn interrupt(&mut self, progress: &mut dyn FnMut(Progress)) {
        let Some(turn) = self.turn_id.clone() else {
            return;
        };
        let id = self.next_id;
        self.next_id += 1;
        let req = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "turn/interrupt",
            "params": { "threadId": self.thread_id, "turnId": turn },
        });
        if self.send(&req).is_err() {
            return;
        }
        let until = Instant::now() + WIND_DOWN;
        while self.ended.is_none() {
            match self.next(until, "turn/interrupt") {
                Ok(m) => {
                    if self.handle(m, progress).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }
}

impl Runtime for AppServer {
    fn transport(&self) -> &'static str {
        TRANSPORT
    }

    fn provider_pid(&self) -> u32 {
        self.child.pid()
    }

    fn wait_turn(
        &mut self,
        deadline: Instant,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<TurnEnd, MessageError> {
        let started = Instant::now();
        while self.ended.is_none() {
            match self.next(deadline, "the end of the turn") {
                Ok(m) => self.handle(m, progress)?,
                Err(MessageError::Timeout(_)) => {
                    let waited = Duration::from_secs_f64(started.elapsed().as_secs_f64().round());
                    // Interrupted in time, Codex records it and exits; a
                    // Codex that does not answer is killed on drop.
                    self.interrupt(progress);
                    if self.ended.is_some() {
                        self.wind_down();
                    }
                    return Err(MessageError::Timeout(format!(
                        "Codex's turn did not finish within {}; it was interrupted",
                        seconds(waited)
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        self.wind_down();
        Ok(self.ended.take().unwrap_or_default())
    }
}

/// `20 s`, `0.3 s`.
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// The in-progress turn of a resumed thread: `None` when the thread is not
/// active; its id when Codex names it; busy when it is active without one.
fn active_turn(resumed: &Value) -> Result<Option<String>, MessageError> {
    let thread = &resumed["thread"];
    if thread.pointer("/status/type").and_then(Value::as_str) != Some("active") {
        return Ok(None);
    }
    let running = thread["turns"].as_array().and_then(|turns| {
        turns
            .iter()
            .rev()
            .find(|t| t["status"].as_str() == Some("inProgress"))
            .and_then(|t| t["id"].as_str())
    });
    match running {
        Some(id) => Ok(Some(id.to_owned())),
        None => Err(MessageError::Busy),
    }
}

/// A `turn/completed` turn: its status, the last agent message, and the
/// error of a failed or interrupted turn.
fn turn_end(turn: &Value) -> TurnEnd {
    let status = turn["status"].as_str().unwrap_or("unknown");
    let response = turn["items"].as_array().and_then(|items| {
        items
            .iter()
            .rev()
            .find(|i| i["type"].as_str() == Some("agentMessage"))
            .and_then(|i| i["text"].as_str())
            .map(str::to_owned)
    });
    let error = turn.pointer("/error/message").and_then(Value::as_str);
    let more = turn
        .pointer("/error/additionalDetails")
        .and_then(Value::as_str);
    let detail = match (status, error) {
        ("completed", None) => None,
        (s, e) => Some(
            [
                Some(format!("turn {s}")),
                e.map(str::to_owned),
                more.map(str::to_owned),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": "),
        ),
    };
    TurnEnd {
        completed: status == "completed",
        response,
        detail,
    }
}

/// What a refused server request asked for: the command and its cwd, the
/// paths, or the reason it gives; at most 300 characters (a request line
/// may be 16 MiB).
fn request_detail(method: &str, p: &Value) -> String {
    let s = |k: &str| p[k].as_str().filter(|v| !v.is_empty());
    let mut parts: Vec<String> = Vec::new();
    match method {
        "item/commandExecution/requestApproval" => {
            parts.extend(s("command").map(|c| format!("command: {c}")));
            parts.extend(s("cwd").map(|c| format!("in {c}")));
        }
        "execCommandApproval" => {
            if let Some(argv) = p["command"].as_array() {
                let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
                parts.push(format!("command: {}", words.join(" ")));
            }
            parts.extend(s("cwd").map(|c| format!("in {c}")));
        }
        "applyPatchApproval" => {
            if let Some(files) = p["fileChanges"].as_object() {
                let paths: Vec<&str> = files.keys().map(String::as_str).collect();
                parts.push(format!("files: {}", paths.join(", ")));
            }
        }
        "item/fileChange/requestApproval" => {
            parts.extend(s("grantRoot").map(|r| format!("write access under {r}")));
        }
        "item/tool/call" => {
            parts.extend(s("tool").map(|t| format!("tool: {t}")));
        }
        "mcpServer/elicitation/request" => {
            parts.extend(s("serverName").map(|n| format!("MCP server: {n}")));
        }
        _ => {}
    }
    parts.extend(s("reason").map(|r| format!("reason: {r}")));
    super::clip(&parts.join("; "))
}

#[cfg(test)]
mod tests {
    //! The protocol logic against scripted fake app-servers (sh scripts
    //! reading our lines and printing canned ones); the real Codex is
    //! driven by tests/tests/message_codex.rs.
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const THREAD: &str = "019a0000-0000-7000-8000-000000000001";

    struct Fake {
        dir: tempfile::TempDir,
        program: PathBuf,
    }

    /// A fake app-server: `script` is the body of an sh script run in the
    /// fake's directory (its cwd).
    fn fake(script: &str) -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = dir.path().join("codex");
        std::fs::write(&program, format!("#!/bin/sh\n{script}")).expect("write");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Fake { dir, program }
    }

    fn spawner(cwd: &Path) -> Spawner {
        super::super::test_spawner(cwd, "/usr/bin:/bin")
    }

    fn target(cwd: &Path) -> Target {
        Target {
            provider: crate::sessions::Provider::Codex,
            session_id: THREAD.into(),
            transcript: cwd.join("rollout.jsonl"),
            cwd: cwd.to_path_buf(),
            cli_version: Some("0.169.0".into()),
        }
    }

    fn opts(in_container: bool) -> Options {
        Options {
            ack_timeout: Duration::from_secs(10),
            in_container,
        }
    }

    fn run(
        f: &Fake,
        o: Options,
        progress: &mut Vec<Progress>,
    ) -> Result<Box<dyn Runtime>, MessageError> {
        let s = spawner(f.dir.path());
        let mut p = |x| progress.push(x);
        start_with(&f.program, &target(f.dir.path()), "  hi  ", &s, &o, &mut p)
    }

    /// The handshake a fake answers: initialize (id 0), initialized,
    /// thread/resume (id 1, the thread idle); it keeps every line it read.
    fn handshake() -> String {
        format!(
            r#"read -r l; echo "$l" >> in.jsonl
echo '{{"id":0,"result":{{"userAgent":"fake"}}}}'
read -r l; echo "$l" >> in.jsonl
read -r l; echo "$l" >> in.jsonl
echo '{{"method":"thread/status/changed","params":{{"threadId":"{THREAD}","status":{{"type":"idle"}}}}}}'
echo '{{"id":1,"result":{{"thread":{{"id":"{THREAD}","status":{{"type":"idle"}},"turns":[]}}}}}}'
read -r l; echo "$l" >> in.jsonl
echo '{{"id":2,"result":{{"turn":{{"id":"U1","status":"inProgress","items":[]}}}}}}'
"#
        )
    }

    fn lines_read(f: &Fake) -> Vec<Value> {
        std::fs::read_to_string(f.dir.path().join("in.jsonl"))
            .expect("the fake's input")
            .lines()
            .map(|l| serde_json::from_str(l).expect("our line is JSON"))
            .collect()
    }

    #[test]
    fn a_turn_with_an_approval_request_refused() {
        let script = handshake()
            + &format!(
                r#"echo '{{"method":"item/commandExecution/requestApproval","id":0,"params":{{"threadId":"{THREAD}","turnId":"U1","itemId":"call_1","command":"/bin/sh -lc '"'"'touch x'"'"'","cwd":"/w","reason":"May I?","startedAtMs":1}}}}'
read -r l; echo "$l" >> in.jsonl
echo '{{"method":"turn/completed","params":{{"threadId":"{THREAD}","turn":{{"id":"U1","status":"completed","items":[{{"type":"agentMessage","id":"m1","text":"first"}},{{"type":"agentMessage","id":"m2","text":"Done."}}]}}}}}}'
read -r l
"#
            );
        let f = fake(&script);
        let mut progress = Vec::new();
        let mut rt = run(&f, opts(false), &mut progress).expect("acknowledged");
        assert_eq!(progress, vec![Progress::Acknowledged]);
        assert_eq!(rt.transport(), "codex-app-server");
        let mut later = Vec::new();
        let end = rt
            .wait_turn(Instant::now() + Duration::from_secs(10), &mut |p| {
                later.push(p)
            })
            .expect("turn end");
        assert_eq!(
            end,
            TurnEnd {
                completed: true,
                response: Some("Done.".into()),
                detail: None
            }
        );
        assert_eq!(
            later,
            vec![Progress::Rejected {
                method: "item/commandExecution/requestApproval".into(),
                detail: "command: /bin/sh -lc 'touch x'; in /w; reason: May I?".into(),
            }]
        );
        let read = lines_read(&f);
        let want = [
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "clientInfo":{"name":"agentsight","title":"agentsight","version":env!("CARGO_PKG_VERSION")},
                "capabilities":{"experimentalApi":true,"optOutNotificationMethods":OPT_OUT}}}),
            json!({"jsonrpc":"2.0","method":"initialized"}),
            json!({"jsonrpc":"2.0","id":1,"method":"thread/resume","params":{"threadId":THREAD,"excludeTurns":true}}),
            json!({"jsonrpc":"2.0","id":2,"method":"turn/start","params":{"threadId":THREAD,"input":[{"type":"text","text":"  hi  "}]}}),
            json!({"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":REFUSAL}}),
        ];
        assert_eq!(read, want);
    }

    /// A flood of approval requests: each one refused and passed on, the
    /// first with its detail cut to 300 characters; the driver keeps none.
    #[test]
    fn a_flood_of_approval_requests_is_refused_one_by_one() {
        let script = handshake()
            + &format!(
                r#"exec 3<&0
cat <&3 > in-rest.jsonl &
big=$(head -c 100000 /dev/zero | tr '\0' x)
echo '{{"method":"item/commandExecution/requestApproval","id":"big","params":{{"threadId":"{THREAD}","turnId":"U1","command":"'$big'"}}}}'
i=0
while [ $i -lt 2000 ]; do
  echo '{{"method":"item/commandExecution/requestApproval","id":'$i',"params":{{"threadId":"{THREAD}","turnId":"U1","command":"rm -rf /","cwd":"/w"}}}}'
  i=$((i+1))
done
echo '{{"method":"turn/completed","params":{{"threadId":"{THREAD}","turn":{{"id":"U1","status":"completed","items":[]}}}}}}'
wait
"#
            );
        let f = fake(&script);
        let mut rt = run(&f, opts(false), &mut Vec::new()).expect("acknowledged");
        let mut later = Vec::new();
        let end = rt
            .wait_turn(Instant::now() + Duration::from_secs(60), &mut |p| {
                later.push(p)
            })
            .expect("turn end");
        assert!(end.completed);
        assert_eq!(later.len(), 2001);
        assert_eq!(
            later[0],
            Progress::Rejected {
                method: "item/commandExecution/requestApproval".into(),
                detail: format!("command: {}…", "x".repeat(291)),
            }
        );
        assert!(later[1..].iter().all(|p| *p
            == Progress::Rejected {
                method: "item/commandExecution/requestApproval".into(),
                detail: "command: rm -rf /; in /w".into(),
            }));
        drop(rt);
        // Every request got its refusal.
        let answers = std::fs::read_to_string(f.dir.path().join("in-rest.jsonl")).expect("read");
        let refusals = answers
            .lines()
            .filter(|l| l.contains(r#""code":-32601"#))
            .count();
        assert_eq!(refusals, 2001);
    }

    #[test]
    fn in_a_container_the_turn_runs_on_the_external_sandbox() {
        let script = handshake()
            + &format!(
                r#"echo '{{"method":"turn/completed","params":{{"threadId":"{THREAD}","turn":{{"id":"U1","status":"failed","error":{{"message":"stream disconnected","additionalDetails":"retried 5 times"}},"items":[]}}}}}}'
read -r l
"#
            );
        let f = fake(&script);
        let mut progress = Vec::new();
        let mut rt = run(&f, opts(true), &mut progress).expect("acknowledged");
        assert_eq!(
            progress,
            vec![
                Progress::Note(CONTAINER_NOTE.into()),
                Progress::Acknowledged
            ]
        );
        let end = rt
            .wait_turn(Instant::now() + Duration::from_secs(10), &mut |_| {})
            .expect("turn end");
        assert_eq!(
            end,
            TurnEnd {
                completed: false,
                response: None,
                detail: Some("turn failed: stream disconnected: retried 5 times".into()),
            }
        );
        assert_eq!(
            lines_read(&f)[3]["params"],
            json!({"threadId":THREAD,"input":[{"type":"text","text":"  hi  "}],
                   "sandboxPolicy":{"type":"externalSandbox","networkAccess":"enabled"}})
        );
    }

    #[test]
    fn an_active_thread_without_a_turn_id_is_busy_and_one_with_an_id_is_steered() {
        let resume = |turns: &str| {
            format!(
                r#"read -r l; echo '{{"id":0,"result":{{}}}}'
read -r l
read -r l; echo '{{"id":1,"result":{{"thread":{{"id":"{THREAD}","status":{{"type":"active","activeFlags":[]}},"turns":{turns}}}}}}}'
read -r l; echo "$l" >> in.jsonl
echo '{{"id":2,"result":{{"turnId":"U0"}}}}'
read -r l
"#
            )
        };
        let f = fake(&resume("[]"));
        let e = run(&f, opts(false), &mut Vec::new()).err();
        assert_eq!(e, Some(MessageError::Busy));

        let f = fake(&resume(r#"[{"id":"U0","status":"inProgress","items":[]}]"#));
        let mut progress = Vec::new();
        drop(run(&f, opts(true), &mut progress).expect("steered"));
        // Steering adds to a running turn: no sandbox of ours applies.
        assert_eq!(progress, vec![Progress::Acknowledged]);
        assert_eq!(
            lines_read(&f),
            vec![
                json!({"jsonrpc":"2.0","id":2,"method":"turn/steer","params":{
                "threadId":THREAD,"expectedTurnId":"U0","input":[{"type":"text","text":"  hi  "}]}})
            ]
        );
    }

    #[test]
    fn a_refused_request_an_oversized_line_and_an_early_exit_fail() {
        let f = fake(
            r#"read -r l; echo '{"id":0,"error":{"code":-32600,"message":"bad client"}}'; read -r l"#,
        );
        let e = run(&f, opts(false), &mut Vec::new()).err();
        assert_eq!(
            e,
            Some(MessageError::Failed(
                "Codex refused initialize: bad client".into()
            ))
        );

        let f = fake("read -r l; head -c 16777300 /dev/zero | tr '\\0' x; echo; sleep 30");
        let e = run(&f, opts(false), &mut Vec::new()).err();
        assert_eq!(
            e,
            Some(MessageError::Failed(
                "the Codex app-server sent a line of 16777300 bytes (over 16777216); transport closed"
                    .into()
            ))
        );

        let f = fake("read -r l; echo 'not json'; exit 3");
        let e = run(&f, opts(false), &mut Vec::new()).err();
        assert_eq!(
            e,
            Some(MessageError::Failed(
                "the Codex app-server closed its output while we waited for initialize, exit status: 3".into()
            ))
        );
    }

    #[test]
    fn a_silent_app_server_times_out_and_is_killed() {
        let f = fake("exec sleep 30");
        let o = Options {
            ack_timeout: Duration::from_millis(300),
            in_container: false,
        };
        let t = Instant::now();
        let e = run(&f, o, &mut Vec::new()).err();
        assert_eq!(
            e,
            Some(MessageError::Timeout(
                "the Codex app-server did not answer initialize within 0.3 s".into()
            ))
        );
        // Dropped on the error: killed and reaped, not waited out.
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

        // A turn that never ends: interrupted at the deadline.
        let f = fake(&(handshake() + "read -r l; echo \"$l\" >> in.jsonl; sleep 30"));
        let mut rt = run(&f, opts(false), &mut Vec::new()).expect("acknowledged");
        let pid = rt.provider_pid();
        let e = rt
            .wait_turn(Instant::now() + Duration::from_millis(500), &mut |_| {})
            .err();
        assert!(
            matches!(&e, Some(MessageError::Timeout(m)) if m.starts_with("Codex's turn did not finish within ")),
            "{e:?}"
        );
        assert_eq!(
            lines_read(&f)[4],
            json!({"jsonrpc":"2.0","id":3,"method":"turn/interrupt","params":{"threadId":THREAD,"turnId":"U1"}})
        );
        drop(rt);
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None);
        assert_eq!(gone, Err(nix::errno::Errno::ESRCH));
    }

    #[test]
    fn the_standalone_release_of_the_sessions_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let arch = std::env::consts::ARCH;
        for v in ["0.169.0", "0.170.0"] {
            let bin = dir
                .path()
                .join(format!("{v}-{arch}-unknown-linux-musl/bin"));
            std::fs::create_dir_all(&bin).expect("mkdir");
            std::fs::write(bin.join("codex"), b"").expect("write");
        }
        std::fs::create_dir_all(
            dir.path()
                .join(format!("0.171.0-{arch}-unknown-linux-musl")),
        )
        .expect("mkdir");
        assert_eq!(
            standalone_release(dir.path(), "0.169.0"),
            Some(
                dir.path()
                    .join(format!("0.169.0-{arch}-unknown-linux-musl/bin/codex"))
            )
        );
        // No binary in it, another version, a name that is a path: none.
        assert_eq!(standalone_release(dir.path(), "0.171.0"), None);
        assert_eq!(standalone_release(dir.path(), "0.16"), None);
        assert_eq!(standalone_release(dir.path(), "../0.169.0"), None);
    }
}
