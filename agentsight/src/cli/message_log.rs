//! The messaging log's two lines for a local `session message` (see
//! `agentsight::message_log`): `submitted` before the provider is started,
//! `finished` when the submission ended, in the session owner's
//! `~/.local/state/agentsight/messages.jsonl` (home from passwd: the user the
//! provider runs as, whose log `record` reads), written with their file
//! credentials; the invoking user's when the owner is refused.

use std::path::PathBuf;

use agentsight::message::{self, MessageError, TurnEnd};
use agentsight::message_log::{self, Entry, Event, Finished, Outcome, Submitted};
use agentsight::privileges::{AsUser, FileCreds};
use agentsight::sessions::SessionRef;
use nix::unistd::{Uid, User};

/// A submission whose `submitted` line is written.
pub struct Logged {
    path: PathBuf,
    id: String,
    /// Root acting for the owner (no sudo) writes with the owner's file
    /// credentials: never a root-owned file in their home.
    creds: Option<FileCreds>,
}

/// What a submission is about, for its `submitted` line.
pub struct Subject<'a> {
    pub session_id: &'a str,
    pub provider: agentsight::sessions::Provider,
    /// `docker-exec/<transport>` through the bridge.
    pub transport: String,
    pub container: Option<&'a str>,
    /// The transcript, when it is on this machine (it decides whom the
    /// provider runs as); `None` in a container seen from the host.
    pub transcript: Option<&'a std::path::Path>,
}

impl<'a> Subject<'a> {
    /// A session on this machine (the host, or inside the container for
    /// the bridge).
    pub fn local(session: &'a SessionRef) -> Self {
        Subject {
            session_id: &session.session_id,
            provider: session.provider,
            transport: message::transport_of(session.provider)
                .unwrap_or("none")
                .to_owned(),
            container: None,
            transcript: Some(&session.path),
        }
    }
}

/// Writes the `submitted` line; a log that cannot be written refuses the
/// message (every submission is on the record). Called as the invoking
/// user (`AsUser`).
pub fn submitted(subject: &Subject, text: &str, log_text: bool) -> Result<Logged, MessageError> {
    let failed = |e: String| MessageError::Failed(format!("the messaging log: {e}"));
    let euid = nix::unistd::geteuid().as_raw();
    let sudo_uid = FileCreds::invoking_user().map(|c| c.uid);
    let invoking_uid = sudo_uid.unwrap_or(euid);
    let user = User::from_uid(Uid::from_raw(invoking_uid))
        .map_err(|e| failed(format!("looking up uid {invoking_uid}: {e}")))?
        .ok_or_else(|| failed(format!("uid {invoking_uid} has no passwd entry")))?;
    // Whom the provider will run as; a refusal there is logged as such, in
    // the invoking user's log. A session in a container runs as the
    // container's user: the host logs its own side, as the invoking user.
    let identity = subject
        .transcript
        .and_then(|t| message::spawn::decide(t, euid, sudo_uid).ok());
    let run_as_uid = identity.as_ref().map_or(invoking_uid, |i| i.owner.uid);
    let owner = match &identity {
        Some(i) if i.owner.uid != invoking_uid => User::from_uid(Uid::from_raw(i.owner.uid))
            .map_err(|e| failed(format!("looking up uid {}: {e}", i.owner.uid)))?
            .ok_or_else(|| failed(format!("uid {} has no passwd entry", i.owner.uid)))?,
        _ => user.clone(),
    };
    let creds = identity
        .as_ref()
        .filter(|i| i.switch && sudo_uid.is_none())
        .map(|i| FileCreds {
            uid: i.owner.uid,
            gid: i.owner.gid,
            groups: vec![i.owner.gid],
        });
    let path = message_log::default_path(&owner.dir);
    let id = Entry::new_id();
    let entry = Entry::now(
        &id,
        Event::Submitted(Submitted {
            session_id: subject.session_id.to_owned(),
            provider: subject.provider.to_string(),
            transport: subject.transport.clone(),
            container: subject.container.map(str::to_owned),
            invoking_uid,
            invoking_user: user.name,
            run_as_uid,
            pid: std::process::id(),
            message_bytes: text.len() as u64,
            text: log_text.then(|| text.to_owned()),
        }),
    );
    {
        let _as_owner = AsUser::maybe(creds.as_ref()).map_err(|e| failed(e.to_string()))?;
        message_log::append(&path, &entry).map_err(|e| failed(e.to_string()))?;
    }
    Ok(Logged { path, id, creds })
}

impl Logged {
    /// Writes the `finished` line (as the invoking user); a failure is said
    /// on stderr, the message is already delivered.
    pub fn finished(self, result: &Result<TurnEnd, MessageError>, provider_pid: Option<u32>) {
        self.finished_as(result, provider_pid, Outcome::Completed);
    }

    /// [`Logged::finished`] of a submission whose turn is not waited for
    /// here (through the bridge): success is `acknowledged`.
    pub fn acknowledged(self, result: &Result<TurnEnd, MessageError>) {
        self.finished_as(result, None, Outcome::Acknowledged);
    }

    fn finished_as(
        self,
        result: &Result<TurnEnd, MessageError>,
        provider_pid: Option<u32>,
        success: Outcome,
    ) {
        let (outcome, detail) = match result {
            Ok(end) if end.completed => (success, None),
            Ok(end) => (Outcome::Failed, end.detail.clone()),
            Err(e) => (
                match e.outcome() {
                    "timeout" => Outcome::Timeout,
                    "failed" => Outcome::Failed,
                    _ => Outcome::Refused,
                },
                Some(e.to_string()),
            ),
        };
        let entry = Entry::now(
            &self.id,
            Event::Finished(Finished {
                outcome,
                provider_pid,
                detail,
            }),
        );
        let creds = self.creds.clone().or_else(FileCreds::invoking_user);
        let written = AsUser::maybe(creds.as_ref())
            .map_err(|e| e.to_string())
            .and_then(|_guard| message_log::append(&self.path, &entry).map_err(|e| e.to_string()));
        if let Err(e) = written {
            agentsight::sayln!("agentsight: warning: the messaging log: {e}");
        }
    }
}
