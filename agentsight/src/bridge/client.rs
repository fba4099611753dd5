//! The host side: one long-lived bridge child per container, started lazily,
//! reused while it runs, discarded (killed) after a `failed` result or an
//! operation timeout, and the fail-closed fan-out over several containers.
//!
//! The child command is data (an argv): in production the `docker exec …
//! agentsight bridge` of [`super::identity::bridge_argv`], in tests a local
//! `agentsight bridge`.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;
use tokio::time::timeout;

use crate::sessions::{AgentSession, SessionSummary, discovery::MAX_LIST};

use super::protocol::{
    ErrorCode, GetParams, HelloParams, ListParams, MAX_FRAME, MessageParams, Payload, Request,
    Response,
};
use super::server::version_mismatch;

/// One bridge operation, spawn and handshake included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
/// Waiting for the bridge's lock (one request at a time per bridge).
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(1);

/// A failed bridge call, in the protocol's vocabulary (host-side conditions
/// map to `conflict` and `failed`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("container {container}: {code}: {message}")]
pub struct CallError {
    pub container: String,
    pub code: ErrorCode,
    pub message: String,
}

/// A running bridge child and its pipes.
struct Child {
    process: tokio::process::Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The first [`STDERR_KEPT`] bytes of its stderr (docker's own words
    /// when `docker exec` fails), read by a task until the pipe closes.
    stderr: tokio::task::JoinHandle<Vec<u8>>,
}

/// How much of a bridge child's stderr is kept for an error message; the
/// rest is read and dropped so the child never blocks on a full pipe.
const STDERR_KEPT: usize = 4096;

/// Reads `stderr` to its end, keeping the first [`STDERR_KEPT`] bytes.
async fn keep_head(mut stderr: tokio::process::ChildStderr) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = STDERR_KEPT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// What a child that broke the protocol said and how it ended, as one
/// line: `"; the bridge command exited with status 1: Error response …"`.
/// Empty when it is still running and said nothing.
async fn child_detail(child: &mut Child) -> String {
    let status = timeout(Duration::from_millis(500), child.process.wait())
        .await
        .ok()
        .and_then(Result::ok);
    let said = match status {
        Some(_) => timeout(Duration::from_millis(500), &mut child.stderr)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let said = String::from_utf8_lossy(&said);
    let said = crate::rawtext::visible(said.trim());
    let ended = match status {
        Some(st) => match st.code() {
            Some(c) => format!("the bridge command exited with status {c}"),
            None => format!("the bridge command ended by {st}"),
        },
        None if said.is_empty() => return String::new(),
        None => "the bridge command".to_string(),
    };
    match said.is_empty() {
        true => format!("; {ended}"),
        false => format!("; {ended}: {said}"),
    }
}

/// The bridge of one container.
pub struct Bridge {
    container: String,
    argv: Vec<OsString>,
    /// One operation's bound (30 s; tests shorten it).
    pub op_timeout: Duration,
    /// The lock's bound (1 s).
    pub lock_timeout: Duration,
    /// The version the bridge must report (this binary's).
    pub version: String,
    slot: Mutex<Option<Child>>,
}

impl Bridge {
    /// A bridge for `container` that runs `argv` when first needed.
    pub fn new(container: impl Into<String>, argv: Vec<OsString>) -> Self {
        Bridge {
            container: container.into(),
            argv,
            op_timeout: OPERATION_TIMEOUT,
            lock_timeout: LOCK_TIMEOUT,
            version: env!("CARGO_PKG_VERSION").to_string(),
            slot: Mutex::new(None),
        }
    }

    pub fn container(&self) -> &str {
        &self.container
    }

    /// The command the bridge child runs.
    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }

    fn error(&self, code: ErrorCode, message: impl Into<String>) -> CallError {
        CallError {
            container: self.container.clone(),
            code,
            message: message.into(),
        }
    }

    /// The pid of the running child, if one is running (waits for the lock
    /// like a call does).
    pub async fn child_pid(&self) -> Option<u32> {
        let mut slot = timeout(self.lock_timeout, self.slot.lock()).await.ok()?;
        let c = slot.as_mut()?;
        match c.process.try_wait() {
            Ok(None) => c.process.id(),
            _ => None,
        }
    }

    /// Sends one request and returns its Ok payload.
    pub async fn call(&self, req: &Request) -> Result<Payload, CallError> {
        let Ok(mut slot) = timeout(self.lock_timeout, self.slot.lock()).await else {
            return Err(self.error(ErrorCode::Conflict, "bridge is busy; retry shortly"));
        };
        // A child that exited (or cannot be asked) is replaced.
        if let Some(c) = slot.as_mut()
            && !matches!(c.process.try_wait(), Ok(None))
        {
            tracing::debug!("bridge {}: child gone, respawning", self.container);
            *slot = None;
        }
        let result = match timeout(self.op_timeout, self.exchange(&mut slot, req)).await {
            Ok(r) => r,
            Err(_) => Err(self.error(
                ErrorCode::Failed,
                format!(
                    "bridge did not answer within {} s",
                    self.op_timeout.as_secs_f64()
                ),
            )),
        };
        if let Err(e) = &result
            && e.code == ErrorCode::Failed
        {
            // Dropping the child kills it; the next call starts a new one.
            tracing::debug!("bridge {}: discarded after {e}", self.container);
            *slot = None;
        }
        result
    }

    async fn exchange(
        &self,
        slot: &mut Option<Child>,
        req: &Request,
    ) -> Result<Payload, CallError> {
        if slot.is_none() {
            let mut child = self.spawn()?;
            self.hello(&mut child).await?;
            *slot = Some(child);
        }
        let Some(child) = slot.as_mut() else {
            return Err(self.error(ErrorCode::Failed, "bridge is not running"));
        };
        self.roundtrip(child, req)
            .await?
            .map_err(|w| self.error(w.code, w.message))
    }

    fn spawn(&self) -> Result<Child, CallError> {
        let Some((program, args)) = self.argv.split_first() else {
            return Err(self.error(ErrorCode::Failed, "no bridge command"));
        };
        let mut process = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                self.error(
                    ErrorCode::Failed,
                    format!("starting the bridge ({}): {e}", program.to_string_lossy()),
                )
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            process.stdin.take(),
            process.stdout.take(),
            process.stderr.take(),
        ) else {
            return Err(self.error(ErrorCode::Failed, "bridge pipes missing"));
        };
        Ok(Child {
            process,
            stdin,
            stdout: BufReader::new(stdout),
            stderr: tokio::spawn(keep_head(stderr)),
        })
    }

    /// The version handshake: a bridge of another version is refused with
    /// both versions named.
    async fn hello(&self, child: &mut Child) -> Result<(), CallError> {
        let req = Request::Hello(HelloParams {
            version: self.version.clone(),
        });
        match self.roundtrip(child, &req).await? {
            Ok(Payload::Hello { version, .. }) if version == self.version => Ok(()),
            Ok(Payload::Hello { version, .. }) => {
                Err(self.error(ErrorCode::Failed, version_mismatch(&self.version, &version)))
            }
            Ok(_) => Err(self.error(ErrorCode::Failed, "wrong answer to bridge/hello")),
            // The bridge's own refusal already names both versions.
            Err(w) if w.code == ErrorCode::Failed => Err(self.error(ErrorCode::Failed, w.message)),
            // A bridge without the handshake is of another version.
            Err(w) => Err(self.error(
                ErrorCode::Failed,
                format!(
                    "version handshake refused (host agentsight {}; the container's is another): {}",
                    self.version, w.message
                ),
            )),
        }
    }

    /// Writes one request line and reads one response line. A child that
    /// breaks the protocol (no answer, an answer that is not one) is named
    /// with what it said on stderr and how it ended.
    async fn roundtrip(&self, child: &mut Child, req: &Request) -> Result<Response, CallError> {
        match self.exchange_line(child, req).await {
            Err(mut e) if e.code == ErrorCode::Failed => {
                e.message.push_str(&child_detail(child).await);
                Err(e)
            }
            r => r,
        }
    }

    async fn exchange_line(&self, child: &mut Child, req: &Request) -> Result<Response, CallError> {
        let mut line = serde_json::to_vec(req)
            .map_err(|e| self.error(ErrorCode::Failed, format!("encoding the request: {e}")))?;
        line.push(b'\n');
        if line.len() > MAX_FRAME {
            return Err(self.error(
                ErrorCode::RequestTooLarge,
                format!("request of {} bytes exceeds the frame limit", line.len()),
            ));
        }
        let sent = async {
            child.stdin.write_all(&line).await?;
            child.stdin.flush().await
        };
        if let Err(e) = sent.await {
            return Err(self.error(ErrorCode::Failed, format!("writing to the bridge: {e}")));
        }
        let frame = read_frame(&mut child.stdout, MAX_FRAME)
            .await
            .map_err(|e| self.error(ErrorCode::Failed, format!("reading the bridge: {e}")))?;
        match frame {
            Some(Ok(line)) => serde_json::from_slice(&line).map_err(|e| {
                self.error(
                    ErrorCode::Failed,
                    format!("unparseable bridge response: {e}"),
                )
            }),
            Some(Err(bytes)) => Err(self.error(
                ErrorCode::Failed,
                format!("bridge response of {bytes} bytes exceeds the frame limit"),
            )),
            None => Err(self.error(ErrorCode::Failed, "bridge closed its output")),
        }
    }

    /// `sessions/list` in this container.
    pub async fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, CallError> {
        self.list_with(ListParams::newest(limit)).await
    }

    /// `sessions/list` with the provider and age filters applied in the
    /// container, before its limit.
    pub async fn list_with(&self, params: ListParams) -> Result<Vec<SessionSummary>, CallError> {
        match self.call(&Request::SessionsList(params)).await? {
            Payload::Sessions { sessions } => Ok(sessions),
            _ => Err(self.wrong_variant("sessions/list")),
        }
    }

    /// `session/get` in this container (`not_found` when it has no such id).
    pub async fn get(&self, session_id: &str) -> Result<AgentSession, CallError> {
        let req = Request::SessionGet(GetParams {
            session_id: session_id.to_string(),
        });
        match self.call(&req).await? {
            Payload::Session { session } => Ok(*session),
            _ => Err(self.wrong_variant("session/get")),
        }
    }

    /// `session/message` in this container: the provider there acknowledged
    /// the message; `(agent_type, transport)`.
    pub async fn message(
        &self,
        session_id: &str,
        text: &str,
    ) -> Result<(String, String), CallError> {
        let req = Request::SessionMessage(MessageParams {
            session_id: session_id.to_string(),
            message: text.to_string(),
        });
        match self.call(&req).await? {
            Payload::Message {
                agent_type,
                transport,
            } => Ok((agent_type, transport)),
            _ => Err(self.wrong_variant("session/message")),
        }
    }

    fn wrong_variant(&self, method: &str) -> CallError {
        self.error(
            ErrorCode::Failed,
            format!("wrong kind of answer to {method}"),
        )
    }
}

/// Reads one `\n`-terminated line of at most `max` bytes (the `\n` counted):
/// `Some(Ok(line))`, `Some(Err(bytes))` for a longer line (consumed, not
/// kept), `None` at end of output before a new line.
async fn read_frame(
    r: &mut (impl AsyncBufRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Result<Vec<u8>, u64>>> {
    let mut line = Vec::new();
    let mut seen: u64 = 0;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            // A response must end with `\n`: a cut line is the bridge dying.
            return Ok(None);
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        seen += chunk as u64;
        if seen as usize <= max {
            line.extend_from_slice(&buf[..chunk]);
        } else {
            line = Vec::new();
        }
        r.consume(chunk);
        if done {
            if seen as usize > max {
                return Ok(Some(Err(seen)));
            }
            line.pop();
            return Ok(Some(Ok(line)));
        }
    }
}

/// A session row and the container it was found in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerSession {
    pub container: String,
    #[serde(flatten)]
    pub session: SessionSummary,
}

/// A merged list: the healthy containers' sessions, newest first, and each
/// container that failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FanoutList {
    pub sessions: Vec<ContainerSession>,
    pub failed: Vec<CallError>,
}

/// Why an exact lookup over all containers did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("session {id} not found in any configured container")]
    NotFound { id: String },
    #[error("session {id} exists in more than one configured container ({})", containers.join(", "))]
    Conflict { id: String, containers: Vec<String> },
    #[error("looking up session {id}: {}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Failed { id: String, errors: Vec<CallError> },
}

/// Why a message through the bridges was not delivered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MessageFailure {
    #[error(transparent)]
    Lookup(LookupError),
    #[error(transparent)]
    Call(CallError),
}

/// The bridges of all configured containers.
pub struct BridgeSet {
    bridges: Vec<Arc<Bridge>>,
}

impl BridgeSet {
    pub fn new(bridges: Vec<Bridge>) -> Self {
        BridgeSet {
            bridges: bridges.into_iter().map(Arc::new).collect(),
        }
    }

    pub fn bridges(&self) -> &[Arc<Bridge>] {
        &self.bridges
    }

    /// Runs `op` on every bridge at once; results in configuration order.
    async fn fan_out<T, F, Fut>(&self, op: F) -> Vec<(String, Result<T, CallError>)>
    where
        T: Send + 'static,
        F: Fn(Arc<Bridge>) -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>> + Send + 'static,
    {
        let mut set = tokio::task::JoinSet::new();
        for (i, b) in self.bridges.iter().enumerate() {
            let fut = op(Arc::clone(b));
            set.spawn(async move { (i, fut.await) });
        }
        let mut out: Vec<Option<Result<T, CallError>>> = std::iter::repeat_with(|| None)
            .take(self.bridges.len())
            .collect();
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                out[i] = Some(r);
            }
        }
        self.bridges
            .iter()
            .zip(out)
            .map(|(b, r)| {
                let r = r.unwrap_or_else(|| {
                    Err(b.error(ErrorCode::Failed, "the bridge task did not finish"))
                });
                (b.container.clone(), r)
            })
            .collect()
    }

    /// Exact lookup, fail-closed: any container's error fails it (even when
    /// another found the id), and an id found in two containers is a
    /// conflict. Returns the container and the session.
    pub async fn get(&self, id: &str) -> Result<(String, AgentSession), LookupError> {
        let owned = id.to_string();
        let results = self
            .fan_out(move |b| {
                let id = owned.clone();
                async move { b.get(&id).await }
            })
            .await;
        let mut found = Vec::new();
        let mut errors = Vec::new();
        for (container, r) in results {
            match r {
                Ok(s) => found.push((container, s)),
                Err(e) if e.code == ErrorCode::NotFound => {}
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(LookupError::Failed {
                id: id.to_string(),
                errors,
            });
        }
        match found.len() {
            0 => Err(LookupError::NotFound { id: id.to_string() }),
            1 => Ok(found.remove(0)),
            _ => Err(LookupError::Conflict {
                id: id.to_string(),
                containers: found.into_iter().map(|(c, _)| c).collect(),
            }),
        }
    }

    /// The merged list: healthy containers' rows sorted by update time,
    /// newest first (ties in configuration order), clamped to `limit` (1..=25); failed containers named.
    pub async fn list(&self, limit: usize) -> FanoutList {
        self.list_with(ListParams::newest(limit)).await
    }

    /// [`BridgeSet::list`] with the provider and age filters applied inside
    /// each container before its limit (so a filter never shortens the list).
    pub async fn list_with(&self, params: ListParams) -> FanoutList {
        let limit = params.limit.clamp(1, MAX_LIST);
        let params = ListParams { limit, ..params };
        let results = self
            .fan_out(move |b| {
                let params = params.clone();
                async move { b.list_with(params).await }
            })
            .await;
        let mut out = FanoutList::default();
        for (container, r) in results {
            match r {
                Ok(rows) => out
                    .sessions
                    .extend(rows.into_iter().map(|session| ContainerSession {
                        container: container.clone(),
                        session,
                    })),
                Err(e) => out.failed.push(e),
            }
        }
        // Stable: equal times keep each container's own order (discovery's),
        // containers in configuration order.
        out.sessions
            .sort_by_key(|s| std::cmp::Reverse(s.session.updated_ms));
        out.sessions.truncate(limit);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_from_the_bridge_are_bounded() {
        let data: &[u8] = b"abc\n0123456789\nxy";
        let mut r = BufReader::with_capacity(4, data);
        assert_eq!(
            read_frame(&mut r, 8).await.expect("read"),
            Some(Ok(b"abc".to_vec()))
        );
        assert_eq!(read_frame(&mut r, 8).await.expect("read"), Some(Err(11)));
        // A cut last line is the bridge dying, not a response.
        assert_eq!(read_frame(&mut r, 8).await.expect("read"), None);
    }

    #[tokio::test]
    async fn no_command_and_a_missing_program_fail() {
        let b = Bridge::new("c1", vec![]);
        assert_eq!(
            b.list(5).await,
            Err(CallError {
                container: "c1".into(),
                code: ErrorCode::Failed,
                message: "no bridge command".into()
            })
        );
        let b = Bridge::new("c2", vec!["/nonexistent/agentsight".into()]);
        let e = b.list(5).await.expect_err("no such program");
        assert_eq!(e.code, ErrorCode::Failed);
        assert!(
            e.message
                .starts_with("starting the bridge (/nonexistent/agentsight): "),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_peer_that_is_not_a_bridge_fails_and_is_discarded() {
        // `echo` answers the handshake with a line that is not a response.
        let b = Bridge::new(
            "c3",
            vec![
                "sh".into(),
                "-c".into(),
                "read l; echo nope; sleep 30".into(),
            ],
        );
        let e = b.list(1).await.expect_err("not a bridge");
        assert_eq!(e.code, ErrorCode::Failed);
        assert!(
            e.message.starts_with("unparseable bridge response: "),
            "{e}"
        );
        assert_eq!(b.child_pid().await, None);
        // A peer that exits at once: its output closes.
        let b = Bridge::new("c4", vec!["true".into()]);
        let e = b.list(1).await.expect_err("closed");
        assert!(
            e.message == "bridge closed its output; the bridge command exited with status 0"
                || e.message.starts_with("writing to the bridge: "),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_failing_docker_exec_is_named_with_its_own_words() {
        // What `docker exec` does when the daemon refuses: a line on stdout
        // that is not a response, its reason on stderr, status 126.
        let b = Bridge::new(
            "c5",
            vec![
                "sh".into(),
                "-c".into(),
                "read l; echo 'OCI runtime exec failed'; printf 'Error response from daemon: container c5 is not running\\033]52;c;eA==\\007\\n' >&2; exit 126".into(),
            ],
        );
        let e = b.list(1).await.expect_err("docker failed");
        assert_eq!(e.code, ErrorCode::Failed);
        assert!(
            e.message.starts_with("unparseable bridge response: ")
                && e.message.ends_with(
                    "; the bridge command exited with status 126: Error response from daemon: container c5 is not running\\x1b]52;c;eA==\\x07"
                ),
            "{e}"
        );
    }
}
