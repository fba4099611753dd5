//! `session message`: continue an existing native session with one new
//! message (issue 17; docs/messaging.md). The one feature that acts, so it is
//! off unless enabled, never approves anything for the user, never runs an
//! agent as root, refuses when the session is live elsewhere or busy, and
//! every submission is on the record (the messaging log).
//!
//! - [`spawn`]: whom the provider runs as and with which environment.
//! - [`lock`]: one message at a time per session (a `flock`).
//! - [`live`]: the session running outside agentsight.
//! - [`lines`]: the provider's output as bounded lines with deadlines.
//! - [`claude`], [`codex`], [`gemini`], [`copilot`], [`opencode`],
//!   [`qwen`]: one driver per provider (the last three share [`oneshot`]'s
//!   runtime); `child` holds their provider process (kill-on-drop,
//!   deadlines); `sweep` ends every process of a turn, also those that left
//!   its process group.

pub mod child;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod gemini;
pub mod lines;
pub mod live;
pub mod lock;
pub mod oneshot;
pub mod opencode;
pub mod qwen;
pub mod spawn;
mod sweep;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::bridge::ErrorCode;
use crate::privileges::{AsUser, FileCreds};
use crate::sessions::{self, Provider, SessionRef};

pub use spawn::{Identity, Owner, Spawner};

/// Every wait on a provider before it acknowledged the message (start,
/// acknowledgement, the answer to one of our requests).
pub const ACK_TIMEOUT: Duration = Duration::from_secs(20);
/// The rest of the turn, by default, once acknowledged.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a message was not delivered, each with its own exit status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error(
        "messaging is not enabled: pass --allow-messaging, or put `messaging = true` in ~/.config/agentsight/config.toml (a file you own)"
    )]
    NotEnabled,
    #[error("{0}")]
    Invalid(String),
    #[error("session {0} not found")]
    NotFound(String),
    #[error("session is already running outside agentsight; cannot attach safely: {0}")]
    LiveElsewhere(String),
    #[error("this session is already accepting another message")]
    Busy,
    #[error("messaging {0} sessions is not supported (observation only)")]
    Unsupported(String),
    #[error("refused: {0}")]
    Identity(String),
    #[error("{0}")]
    Failed(String),
    #[error("{0}")]
    Timeout(String),
}

impl MessageError {
    /// The command's exit status (docs/messaging.md lists them).
    pub fn exit_status(&self) -> i32 {
        match self {
            Self::NotEnabled | Self::Invalid(_) | Self::NotFound(_) => 2,
            Self::LiveElsewhere(_) => 3,
            Self::Busy => 4,
            Self::Unsupported(_) => 5,
            Self::Identity(_) => 6,
            Self::Failed(_) => 7,
            Self::Timeout(_) => 8,
        }
    }

    /// The bridge protocol's code for it.
    pub fn wire_code(&self) -> ErrorCode {
        match self {
            Self::LiveElsewhere(_) | Self::Busy => ErrorCode::Conflict,
            Self::Invalid(_) => ErrorCode::InvalidParams,
            Self::NotFound(_) => ErrorCode::NotFound,
            _ => ErrorCode::Failed,
        }
    }

    /// The word the messaging log keeps for it.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "timeout",
            Self::Failed(_) => "failed",
            _ => "refused",
        }
    }
}

/// The session a driver continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub provider: Provider,
    pub session_id: String,
    pub transcript: PathBuf,
    pub cwd: PathBuf,
    /// The agent version the transcript names (Codex picks its binary by it).
    pub cli_version: Option<String>,
}

/// How a driver waits and what it may change for this turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub ack_timeout: Duration,
    /// Continued through the bridge: the container is the sandbox boundary
    /// (Codex's nested sandbox and approvals are off for this turn only).
    pub in_container: bool,
}

/// What a driver tells its caller while it works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Acknowledged,
    /// Agent text.
    Text(String),
    /// A tool call the agent made.
    Tool(String),
    /// A request of the provider (an approval) that we answered with a refusal.
    Rejected {
        method: String,
        detail: String,
    },
    Note(String),
}

/// How the turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TurnEnd {
    /// The provider reports the turn finished normally.
    pub completed: bool,
    pub response: Option<String>,
    pub detail: Option<String>,
}

/// A provider that acknowledged a message and is working on its turn. On
/// drop it kills the provider's process group if still running.
pub trait Runtime: Send {
    fn transport(&self) -> &'static str;
    fn provider_pid(&self) -> u32;
    fn wait_turn(
        &mut self,
        deadline: Instant,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<TurnEnd, MessageError>;
}

/// The transport name of a provider that can be messaged.
pub fn transport_of(p: Provider) -> Result<&'static str, MessageError> {
    match p {
        Provider::Claude => Ok("claude-stream-json"),
        Provider::Codex => Ok("codex-app-server"),
        Provider::Gemini => Ok("gemini-resume"),
        Provider::Copilot => Ok(copilot::TRANSPORT),
        Provider::Opencode => Ok(opencode::TRANSPORT),
        Provider::Qwen => Ok(qwen::TRANSPORT),
        Provider::Cursor => Err(MessageError::Unsupported(p.to_string())),
    }
}

/// What to deliver, where.
#[derive(Debug, Clone)]
pub struct Submission {
    pub session: SessionRef,
    /// As given: measured before trimming, sent trimmed.
    pub text: String,
    pub options: Options,
}

/// A message the provider acknowledged; its turn goes on.
pub struct Started {
    pub target: Target,
    pub identity: Identity,
    pub runtime: Box<dyn Runtime>,
    pub lock: lock::SessionLock,
}

/// Checks the message's bounds: 1–65,536 bytes before trimming, non-empty
/// after; returns the text to send.
pub fn checked_text(text: &str) -> Result<&str, MessageError> {
    crate::bridge::protocol::check_message(text).map_err(MessageError::Invalid)
}

/// Everything up to the provider's acknowledgement: bounds, support,
/// identity, the session's lock, the live-elsewhere check, the session's
/// cwd, then the driver. The conflicts come before anything about the
/// session's contents.
/// `sudo_uid` is the sudo caller's uid, if any.
pub fn start(
    sub: &Submission,
    sudo_uid: Option<u32>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Started, MessageError> {
    let text = checked_text(&sub.text)?;
    let provider = sub.session.provider;
    transport_of(provider)?;
    plain_id(&sub.session.session_id)?;
    let identity = spawn::decide(&sub.session.path, nix::unistd::geteuid().as_raw(), sudo_uid)?;
    let id = &sub.session.session_id;
    // Root acting for the owner creates the lock (and the log) with the
    // owner's file credentials: never a root-owned file in their home, and
    // no link of theirs followed with root's rights.
    let owner_creds = identity.switch.then(|| FileCreds {
        uid: identity.owner.uid,
        gid: identity.owner.gid,
        groups: vec![identity.owner.gid],
    });
    let _as_owner =
        AsUser::maybe(owner_creds.as_ref()).map_err(|e| MessageError::Failed(e.to_string()))?;
    let lock = lock::acquire(&identity.home, provider.as_str(), id)?;
    if let Some(why) = live::running_elsewhere(provider, id, &identity.home, std::process::id()) {
        return Err(MessageError::LiveElsewhere(why));
    }
    let target = target_of(&sub.session)?;
    let spawner = Spawner::new(identity.clone(), target.cwd.clone(), std::env::vars_os());
    let runtime = match provider {
        Provider::Claude => claude::start(&target, text, &spawner, &sub.options, progress)?,
        Provider::Codex => codex::start(&target, text, &spawner, &sub.options, progress)?,
        Provider::Gemini => gemini::start(&target, text, &spawner, &sub.options, progress)?,
        Provider::Copilot => copilot::start(&target, text, &spawner, &sub.options, progress)?,
        Provider::Opencode => opencode::start(&target, text, &spawner, &sub.options, progress)?,
        Provider::Qwen => qwen::start(&target, text, &spawner, &sub.options, progress)?,
        Provider::Cursor => {
            return Err(MessageError::Unsupported(provider.to_string()));
        }
    };
    Ok(Started {
        target,
        identity,
        runtime,
        lock,
    })
}

/// A provider's words for an error or a note, at most 300 characters.
fn clip(s: &str) -> String {
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A spawner for unit tests: the caller's own identity (no switch), HOME
/// and cwd `dir`, `path` as PATH (stand-in providers go first on it).
#[cfg(test)]
fn test_spawner(dir: &std::path::Path, path: &str) -> Spawner {
    let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .expect("own passwd entry");
    let identity = Identity {
        owner: Owner {
            uid: me.uid.as_raw(),
            gid: me.gid.as_raw(),
            name: me.name,
        },
        home: dir.to_path_buf(),
        switch: false,
    };
    Spawner::new(identity, dir.to_path_buf(), [("PATH".into(), path.into())])
}

/// A session id goes on a provider's command line (`--resume ID`): only a
/// plain token is passed, never one a CLI could read as an option.
fn plain_id(id: &str) -> Result<(), MessageError> {
    let mut bytes = id.bytes();
    let plain = id.len() <= 128
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if plain {
        Ok(())
    } else {
        Err(MessageError::Invalid(format!(
            "session id {id:?} is not a plain id (letters, digits, '-', '_', '.'); it is never passed to an agent"
        )))
    }
}

/// The session's cwd and agent version, from its transcript.
fn target_of(r: &SessionRef) -> Result<Target, MessageError> {
    let s = sessions::parse_session(r)
        .map_err(|e| MessageError::Failed(format!("reading session {}: {e}", r.session_id)))?;
    let cwd = s.cwd.as_deref().and_then(spawn::plain_dir).ok_or_else(|| {
        MessageError::Failed(format!(
            "session {} records no usable working directory",
            r.session_id
        ))
    })?;
    // The agent starts in it with the file rights this thread has now (the
    // caller's, who must be the owner): looking up `cwd/.` needs the search
    // right the start's chdir needs, so a directory that cannot be entered
    // is named here, not reported as the agent failing to start. Only a
    // directory that is gone is called so.
    let unusable = |why: String| {
        MessageError::Failed(format!(
            "the session's working directory {} {why}",
            cwd.display()
        ))
    };
    match std::fs::metadata(cwd.join(".")) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(unusable("no longer exists".into()));
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            return Err(unusable("is not a directory".into()));
        }
        Err(e) => return Err(unusable(format!("cannot be entered: {e}"))),
    }
    Ok(Target {
        provider: r.provider,
        session_id: r.session_id.clone(),
        transcript: r.path.clone(),
        cwd,
        cli_version: s.agent_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ids_reach_a_command_line() {
        for ok in ["7d1c0e2a-0000-4000-8000-000000000001", "a", "x_y.z-1"] {
            assert_eq!(plain_id(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "-p",
            "--dangerously-skip-permissions",
            ".x",
            "a b",
            "a/b",
            "ü",
        ] {
            assert!(
                matches!(plain_id(bad), Err(MessageError::Invalid(_))),
                "{bad}"
            );
        }
        assert!(plain_id(&"a".repeat(129)).is_err());
    }
}
