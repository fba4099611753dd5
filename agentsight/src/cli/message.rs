//! `agentsight session message ID --text …`: continue a session with one new
//! message (docs/messaging.md). Off unless enabled; every refusal has its own
//! exit status (`MessageError::exit_status`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use agentsight::bridge::{ErrorCode, MessageFailure, protocol::MAX_MESSAGE};
use agentsight::message::{self, MessageError, Options, Progress, Submission, TurnEnd};
use agentsight::privileges::{AsUser, FileCreds};
use agentsight::rawtext::{visible, visible_lines};
use agentsight::sessions::{DiscoveryOptions, SessionIndex};

use super::message_log::Subject;

/// `session message`'s arguments (the command's help is on `SessionCmd::Message`).
#[derive(clap::Args, Debug, Clone)]
pub struct MessageArgs {
    /// The session's whole id.
    pub id: String,
    /// The message.
    #[arg(
        long,
        required_unless_present = "text_file",
        conflicts_with = "text_file"
    )]
    pub text: Option<String>,
    /// Read the message from this file (`-`: standard input).
    #[arg(long, value_name = "FILE")]
    pub text_file: Option<PathBuf>,
    /// Read this home instead of the invoking user's.
    #[arg(long, conflicts_with = "docker_container", value_parser = super::absolute_path())]
    pub home: Option<PathBuf>,
    /// Continue the session inside this running container (repeatable; the
    /// one container that holds it, fail-closed), through its bridge.
    #[arg(long = "docker-container", value_name = "NAME")]
    pub docker_container: Vec<String>,
    /// Enable messaging for this command.
    #[arg(long)]
    pub allow_messaging: bool,
    /// Keep the message's text in the messaging log (by default only its length).
    #[arg(long)]
    pub log_text: bool,
    /// Longest wait for the turn to end once the agent acknowledged the
    /// message (at most a week; default 600). Local sessions only: through
    /// the bridge the turn goes on in the container.
    #[arg(
        long,
        value_name = "SECS",
        conflicts_with = "docker_container",
        value_parser = clap::value_parser!(u64).range(1..=MAX_TURN_SECS)
    )]
    pub turn_timeout: Option<u64>,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The longest `--turn-timeout`: a week.
const MAX_TURN_SECS: u64 = 7 * 24 * 3600;

/// What `--json` prints.
#[derive(Debug, Default, Serialize)]
struct Outcome {
    session_id: String,
    provider: String,
    transport: String,
    container: Option<String>,
    run_as: Option<String>,
    provider_pid: Option<u32>,
    acknowledged: bool,
    completed: Option<bool>,
    response: Option<String>,
    /// The first [`MAX_LISTED`] refused requests.
    rejected_requests: Vec<Rejected>,
    /// Every refused request, listed or not.
    rejected_requests_total: u64,
    rejected_requests_limit: Limit,
    notes: Vec<String>,
    error: Option<String>,
    exit_status: i32,
}

/// How many refused requests are listed (`rejected_requests` and one line
/// each on stderr); the rest are only counted: an agent can ask without
/// end, and each would be kept until the turn ends.
const MAX_LISTED: usize = 100;

/// `rejected_requests_limit`: [`MAX_LISTED`], in every outcome.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct Limit(usize);

impl Default for Limit {
    fn default() -> Self {
        Limit(MAX_LISTED)
    }
}

#[derive(Debug, Serialize)]
struct Rejected {
    method: String,
    detail: String,
}

pub fn run(a: &MessageArgs) -> Result<i32> {
    if !a.allow_messaging && !super::config::messaging_enabled()? {
        return Ok(fail(a, &mut Outcome::default(), &MessageError::NotEnabled));
    }
    if !a.docker_container.is_empty() {
        // Docker is driven with the caller's own rights, never root's: a
        // caller outside the docker group gets the daemon's refusal.
        if agentsight::privileges::FileCreds::invoking_user().is_some() {
            agentsight::privileges::drop_to_invoking_user()?;
            // docker reads its config and context from HOME: the caller's.
            if let Ok(h) = agentsight::sessions::util::default_home() {
                // Safety: no other thread exists yet (the runtime and the
                // signal thread are started later).
                unsafe { std::env::set_var("HOME", h) };
            }
        }
    }
    // The message file is read with the caller's rights, never through a link.
    let text = {
        let creds = FileCreds::invoking_user();
        let _as_user = AsUser::maybe(creds.as_ref())?;
        read_text(a)?
    };
    if let Err(e) = message::checked_text(&text) {
        return Ok(fail(a, &mut Outcome::default(), &e));
    }
    if !a.docker_container.is_empty() {
        return Ok(through_bridge(a, &text));
    }
    let interrupts = Interrupts::install()?;
    let status = local(a, text);
    Ok(match interrupts.received() {
        // The turn ended before the signal mattered.
        Some(_) if status == 0 => 0,
        Some((sig, stopped)) => {
            let what = if stopped > 0 {
                "the agent was stopped"
            } else {
                "no agent was running; nothing more is sent"
            };
            agentsight::sayln!("agentsight: error: interrupted by {sig}; {what}");
            128 + sig as i32
        }
        None => status,
    })
}

/// SIGINT, SIGTERM and SIGHUP while `session message` runs: every agent it
/// started has its process group killed, none starts after, the driver
/// sees its agent end and the log gets its `finished` line. The signals
/// are blocked in every thread (this one, before any other is started) and
/// taken by `sigwait` on a thread of their own, for as long as we run.
struct Interrupts {
    /// The first signal, and how many agents it stopped.
    received: std::sync::Arc<std::sync::Mutex<Option<(nix::sys::signal::Signal, usize)>>>,
}

impl Interrupts {
    fn install() -> Result<Self> {
        use nix::sys::signal::{SigSet, Signal};
        let mut set = SigSet::empty();
        for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            set.add(s);
        }
        set.thread_block()
            .context("blocking SIGINT/SIGTERM/SIGHUP")?;
        let received = std::sync::Arc::new(std::sync::Mutex::new(None));
        let first = received.clone();
        std::thread::spawn(move || {
            while let Ok(sig) = set.wait() {
                let stopped = message::child::stop_all();
                if let Ok(mut f) = first.lock() {
                    let prev = f.map_or(0, |(_, n)| n);
                    let sig0 = f.map_or(sig, |(s, _)| s);
                    *f = Some((sig0, prev + stopped));
                }
            }
        });
        Ok(Interrupts { received })
    }

    fn received(&self) -> Option<(nix::sys::signal::Signal, usize)> {
        self.received.lock().ok().and_then(|f| *f)
    }
}

/// The message from `--text` or `--text-file` (`-`: stdin), read no further
/// than one byte past the bound.
fn read_text(a: &MessageArgs) -> Result<String> {
    let bytes = match (&a.text, &a.text_file) {
        (Some(t), _) => return Ok(t.clone()),
        (None, Some(p)) if p == Path::new("-") => read_bounded(std::io::stdin().lock())
            .context("reading the message from standard input")?,
        (None, Some(p)) => {
            let f = agentsight::safefs::open_regular(p, true)
                .with_context(|| format!("--text-file {}", p.display()))?;
            read_bounded(f).with_context(|| format!("reading {}", p.display()))?
        }
        (None, None) => anyhow::bail!("give the message with --text or --text-file"),
    };
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the message is not valid UTF-8"))
}

fn read_bounded(r: impl Read) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    r.take(MAX_MESSAGE as u64 + 1).read_to_end(&mut v)?;
    Ok(v)
}

/// Prints the refusal or failure (one line on stderr, or the JSON outcome)
/// and returns its exit status.
fn fail(a: &MessageArgs, out: &mut Outcome, e: &MessageError) -> i32 {
    out.exit_status = e.exit_status();
    out.error = Some(e.to_string());
    if a.json {
        print_json(out);
    }
    // Interrupted: the one line says so (`run`).
    if !message::child::stopped() {
        // The agent's or a container's words may be in it: one line.
        agentsight::sayln!("agentsight: error: {}", visible(&e.to_string()));
    }
    out.exit_status
}

/// One line on stdout; a closed or hung-up terminal is not a reason to
/// stop (the log must still get its `finished` line).
fn stdout_line(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

fn print_json(out: &Outcome) {
    if let Ok(s) = serde_json::to_string(out) {
        stdout_line(&s);
    }
}

/// On this machine: look the session up in the home, then deliver.
fn local(a: &MessageArgs, text: String) -> i32 {
    let mut out = Outcome {
        session_id: a.id.clone(),
        ..Outcome::default()
    };
    let mut logged = None;
    let result = (|| {
        // Everything but the provider's start reads and writes as the
        // invoking user; the provider itself gets the owner's identity.
        let creds = FileCreds::invoking_user();
        let _as_user =
            AsUser::maybe(creds.as_ref()).map_err(|e| MessageError::Failed(e.to_string()))?;
        let session = lookup(a)?;
        out.provider = session.provider.to_string();
        // Known before the acknowledgement line is printed.
        out.transport = message::transport_of(session.provider)
            .unwrap_or_default()
            .to_string();
        logged = Some(super::message_log::submitted(
            &Subject::local(&session),
            &text,
            a.log_text,
        )?);
        let sub = Submission {
            session,
            text,
            options: Options {
                ack_timeout: message::ACK_TIMEOUT,
                in_container: false,
            },
        };
        let sudo_uid = creds.map(|c| c.uid);
        let mut started = message::start(&sub, sudo_uid, &mut |p| progress(a, &mut out, p))?;
        out.transport = started.runtime.transport().to_string();
        out.run_as = Some(started.identity.owner.name.clone());
        out.provider_pid = Some(started.runtime.provider_pid());
        let secs = a.turn_timeout.unwrap_or(message::TURN_TIMEOUT.as_secs());
        let deadline = Instant::now() + Duration::from_secs(secs);
        started
            .runtime
            .wait_turn(deadline, &mut |p| progress(a, &mut out, p))
    })();
    if let Some(l) = logged {
        l.finished(&result, out.provider_pid);
    }
    match result {
        Ok(end) => finished(a, &mut out, end),
        Err(e) => fail(a, &mut out, &e),
    }
}

/// The session, by its whole id, under the home.
fn lookup(a: &MessageArgs) -> Result<agentsight::sessions::SessionRef, MessageError> {
    let mut index = SessionIndex::new(DiscoveryOptions {
        home: a.home.clone(),
        ..DiscoveryOptions::default()
    });
    match index.resolve(&a.id) {
        Ok(Some(r)) if r.session_id == a.id => Ok(r),
        Ok(_) => Err(MessageError::NotFound(a.id.clone())),
        Err(e) => Err(MessageError::Failed(format!(
            "looking up session {}: {e}",
            a.id
        ))),
    }
}

fn progress(a: &MessageArgs, out: &mut Outcome, p: Progress) {
    match p {
        Progress::Acknowledged => {
            out.acknowledged = true;
            if !a.json {
                stdout_line(&format!(
                    "acknowledged: {} session {} ({})",
                    out.provider, out.session_id, out.transport
                ));
            }
        }
        Progress::Text(t) if !a.json => stdout_line(&agent_text(&t)),
        Progress::Tool(t) if !a.json => stdout_line(&format!("▸ {}", visible(&t))),
        Progress::Rejected { method, detail } if out.rejected_requests.len() < MAX_LISTED => {
            out.rejected_requests_total += 1;
            agentsight::sayln!(
                "agentsight: refused the agent's request {}: {}",
                visible(&method),
                visible(&detail)
            );
            out.rejected_requests.push(Rejected { method, detail });
        }
        Progress::Rejected { .. } => {
            out.rejected_requests_total += 1;
            if out.rejected_requests_total == MAX_LISTED as u64 + 1 {
                agentsight::sayln!(
                    "agentsight: refusing the agent's further requests without listing them (the first {MAX_LISTED} are)"
                );
            }
        }
        Progress::Note(n) => {
            agentsight::sayln!("note: {}", visible(&n));
            out.notes.push(n);
        }
        _ => {}
    }
}

/// The agent's words as printed: every line indented by two spaces (ours
/// start at the margin: `acknowledged:`, `▸ TOOL`, `turn completed`), so
/// the answer keeps its lines but none can pass for one of ours; anything
/// else that would act on the terminal is shown escaped (`rawtext`).
fn agent_text(t: &str) -> String {
    visible_lines(t)
        .split('\n')
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn finished(a: &MessageArgs, out: &mut Outcome, end: TurnEnd) -> i32 {
    out.completed = Some(end.completed);
    out.response = end.response.clone();
    if end.completed {
        out.exit_status = 0;
    } else {
        let e = MessageError::Failed(format!(
            "the turn did not complete: {}",
            end.detail.as_deref().unwrap_or("the agent gave no reason")
        ));
        return fail(a, out, &e);
    }
    if a.json {
        print_json(out);
    } else {
        stdout_line("turn completed");
    }
    0
}

/// Inside a container: the bridge there delivers and finishes the turn.
/// The host logs its side (transport `docker-exec/…`, the container named)
/// in the invoking user's log.
fn through_bridge(a: &MessageArgs, text: &str) -> i32 {
    let mut out = Outcome {
        session_id: a.id.clone(),
        ..Outcome::default()
    };
    let creds = FileCreds::invoking_user();
    let mut logged = None;
    let result = (|| {
        let bridges = super::containers::Messaging::new(&a.docker_container)
            .map_err(|f| from_bridge(a, &f))?;
        let (container, session) = bridges.find(&a.id).map_err(|f| from_bridge(a, &f))?;
        let transport = message::transport_of(session.provider)?;
        out.provider = session.provider.to_string();
        out.transport = format!("docker-exec/{transport}");
        out.container = Some(container.clone());
        {
            let _as_user =
                AsUser::maybe(creds.as_ref()).map_err(|e| MessageError::Failed(e.to_string()))?;
            let subject = Subject {
                session_id: &a.id,
                provider: session.provider,
                transport: out.transport.clone(),
                container: Some(&container),
                transcript: None,
            };
            logged = Some(super::message_log::submitted(&subject, text, a.log_text)?);
        }
        bridges
            .send(&container, &a.id, text)
            .map_err(|f| from_bridge(a, &f))
    })();
    if let Some(l) = logged {
        // Acknowledged is all the host sees: the turn goes on in the container.
        let end = result.as_ref().map(|_| TurnEnd {
            completed: true,
            ..TurnEnd::default()
        });
        l.acknowledged(&end.map_err(Clone::clone));
    }
    match result {
        Ok((_, transport)) => acknowledged_in_container(a, &mut out, &transport),
        Err(e) => fail(a, &mut out, &e),
    }
}

fn acknowledged_in_container(a: &MessageArgs, out: &mut Outcome, transport: &str) -> i32 {
    out.acknowledged = true;
    // The bridge (the same version: the handshake checks it) runs a Codex
    // turn on the container's sandbox (M5); say so here, where the user
    // reads it.
    if transport == message::codex::TRANSPORT {
        let n = message::codex::CONTAINER_NOTE;
        agentsight::sayln!("note: {n}");
        out.notes.push(n.to_string());
    }
    if a.json {
        print_json(out);
    } else {
        stdout_line(&format!(
            "acknowledged: {} session {} in container {} ({}); the turn goes on there",
            out.provider,
            out.session_id,
            out.container.as_deref().unwrap_or_default(),
            out.transport
        ));
    }
    0
}

/// A bridge failure as the refusal or failure it stands for.
fn from_bridge(a: &MessageArgs, f: &MessageFailure) -> MessageError {
    match f {
        MessageFailure::Call(c) => match c.code {
            ErrorCode::Conflict
                if c.message == MessageError::Busy.to_string()
                    || c.message.starts_with("bridge is busy") =>
            {
                MessageError::Busy
            }
            ErrorCode::Conflict => {
                let why = c
                    .message
                    .strip_prefix(
                        "session is already running outside agentsight; cannot attach safely: ",
                    )
                    .unwrap_or(&c.message);
                MessageError::LiveElsewhere(format!("in container {}: {why}", c.container))
            }
            ErrorCode::NotFound => MessageError::NotFound(a.id.clone()),
            ErrorCode::InvalidParams => MessageError::Invalid(f.to_string()),
            _ => MessageError::Failed(f.to_string()),
        },
        MessageFailure::Lookup(agentsight::bridge::LookupError::NotFound { .. }) => {
            MessageError::NotFound(a.id.clone())
        }
        MessageFailure::Lookup(_) => MessageError::Failed(f.to_string()),
    }
}
