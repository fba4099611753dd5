//! `agentsight bridge` (hidden): the in-container side of the container
//! bridge, run by the host through `docker exec -i`. Speaks only the
//! protocol on stdout; logs go to stderr.

use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context;

use agentsight::bridge::{ErrorCode, Server, WireError, server::Messenger};
use agentsight::message::{self, MessageError, Options, Progress, Submission};
use agentsight::sessions::SessionRef;

use super::message_log::{Subject, submitted};

#[derive(clap::Args, Debug, Clone)]
pub struct BridgeArgs {
    /// Answer `session/message` (the host passes it when messaging is
    /// enabled there); without it the bridge refuses every message.
    #[arg(long)]
    pub allow_messaging: bool,
}

/// Serves the bridge protocol on stdin/stdout until end of input (exit 0).
pub fn run(a: &BridgeArgs) -> anyhow::Result<i32> {
    // The home is the container user's `$HOME` (the host passes
    // `--env HOME=…` when it knows better); its owner's transcripts only.
    let home = match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        None => Err("HOME is not set".to_string()),
        Some(h) => agentsight::sessions::discovery::read_home_of_owner(Some(h.as_ref()))
            .map_err(|e| format!("HOME: {e}")),
    };
    if let Err(e) = &home {
        tracing::warn!("bridge: {e}");
    }
    let mut server = Server::new(home);
    if a.allow_messaging {
        server.messenger = Some(Box::new(Turns::default()));
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut output = stdout.lock();
    server
        .serve(&mut input, &mut output)
        .context("serving the bridge protocol")?;
    Ok(0)
}

/// The bridge's messaging: each acknowledged message's turn goes on in a
/// thread of its own (holding the session's lock) after the answer, and the
/// bridge waits for those turns before it exits.
#[derive(Default)]
struct Turns {
    running: Mutex<Vec<JoinHandle<()>>>,
}

impl Messenger for Turns {
    fn deliver(&self, session: &SessionRef, text: &str) -> Result<(String, String), WireError> {
        let sub = Submission {
            session: session.clone(),
            text: text.to_string(),
            options: Options {
                ack_timeout: message::ACK_TIMEOUT,
                // The container is the sandbox boundary (docs/messaging.md);
                // a bridge that is not in a container changes nothing.
                in_container: in_a_container(),
            },
        };
        let wire = |e: &MessageError| WireError::new(e.wire_code(), e.to_string());
        // On the record inside the container too: the container user's log.
        let logged = submitted(&Subject::local(session), text, false).map_err(|e| wire(&e))?;
        let mut notes = Vec::new();
        let started = match message::start(&sub, None, &mut |p| log_progress(&mut notes, p)) {
            Ok(s) => s,
            Err(e) => {
                logged.finished(&Err(e.clone()), None);
                return Err(wire(&e));
            }
        };
        let agent_type = started.target.provider.to_string();
        let transport = started.runtime.transport().to_string();
        let handle = std::thread::spawn(move || {
            let mut started = started;
            let deadline = Instant::now() + message::TURN_TIMEOUT;
            let mut ignored = Vec::new();
            let result = started
                .runtime
                .wait_turn(deadline, &mut |p| log_progress(&mut ignored, p));
            logged.finished(&result, Some(started.runtime.provider_pid()));
            match result {
                Ok(end) if end.completed => tracing::info!("bridge: turn completed"),
                Ok(end) => tracing::warn!("bridge: turn did not complete: {:?}", end.detail),
                Err(e) => tracing::warn!("bridge: {e}"),
            }
        });
        match self.running.lock() {
            Ok(mut v) => v.push(handle),
            Err(_) => {
                return Err(WireError::new(
                    ErrorCode::Failed,
                    "the bridge's turn list is poisoned",
                ));
            }
        }
        Ok((agent_type, transport))
    }

    fn drain(&self) {
        let handles = match self.running.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(_) => return,
        };
        for h in handles {
            let _ = h.join();
        }
    }
}

fn log_progress(notes: &mut Vec<String>, p: Progress) {
    match p {
        Progress::Rejected { method, detail } => {
            tracing::warn!("bridge: refused the agent's request {method}: {detail}");
        }
        Progress::Note(n) => {
            tracing::info!("bridge: {n}");
            notes.push(n);
        }
        _ => {}
    }
}

/// Whether this bridge runs inside a container: Docker's `/.dockerenv` or
/// Podman's `/run/.containerenv` marker.
fn in_a_container() -> bool {
    ["/.dockerenv", "/run/.containerenv"]
        .iter()
        .any(|m| std::path::Path::new(m).exists())
}
