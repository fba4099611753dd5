//! `agentsight record`: load the kernel programs, start or adopt the agent's
//! process tree, and stream everything into a capture until the run ends.
//!
//! In steps, one file each: `target` (what may be recorded, checked before
//! anything is created), `meta` (what the capture says about the run),
//! `load` (programs and the ring reader), `tracker` (the processes followed,
//! adopted into the kernel's map) with `spawn` (the command, tracked before
//! it runs), `watch` (until the run ends), `finish` (drain, complete, bind),
//! `outcome` (how it ended, the summary).

mod enforce;
mod finish;
mod landlock_denials;
mod load;
mod meta;
mod outcome;
mod request;
mod spawn;
mod target;
mod tracker;
mod watch;
mod wire;

pub use outcome::{RecordOutcome, default_output, fmt_elapsed, summary_text};
pub use request::{Followed, Prepared, RecordRequest, Recorded, Said};

use finish::{Ended, abandon, finish};
use load::{load_programs, start_reader};
use meta::{containers_json, start_meta};
use target::check_target;
use tracker::{Skipped, Tracker};
use watch::{install_signals, watch};

use std::{
    collections::BTreeSet,
    ffi::OsString,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use crate::store::meta::key;
use crate::{
    capture::container::{self},
    clock::Anchor,
    privileges::{self},
    procinfo::AgentName,
    store::{StoreMsg, Writer},
};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Privilege(#[from] privileges::PrivilegeError),
    #[error(transparent)]
    Creds(#[from] privileges::CredsError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Load(#[from] crate::capture::loader::LoadError),
    #[error(transparent)]
    Container(#[from] container::ContainerError),
    #[error(
        "nothing to record: give a command after --, or --pid PID, --agent NAME or --container NAME"
    )]
    NoTarget,
    #[error("--pid {0}: no such process")]
    NoSuchPid(u32),
    #[error(
        "--pid {pid} is not your process (its uids are {uids}, you are uid {you}): under sudo only your own processes are recorded (--all-users records any, and says so in the capture)"
    )]
    NotYourProcess { pid: u32, uids: String, you: u32 },
    #[error(
        "--container records every process in the container, whoever runs it: under sudo that needs --all-users (stored in the capture), because only your own processes are recorded otherwise"
    )]
    ContainerNeedsAllUsers,
    #[error(
        "--docker-container reads the container's sessions with root's docker: under sudo that needs --all-users (stored in the capture)"
    )]
    DockerContainerNeedsAllUsers,
    #[error(transparent)]
    Policy(#[from] crate::audit::PolicyError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    #[error(transparent)]
    Output(#[from] crate::outfile::OutFileError),
    #[error(transparent)]
    Report(#[from] crate::report::file::ReportFileError),
    #[error("cannot start {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error(transparent)]
    Enforce(#[from] crate::enforce::EnforceError),
    #[error("{0}")]
    Other(String),
}

/// What to record and how.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    pub output: PathBuf,
    pub command: Vec<OsString>,
    pub pids: Vec<u32>,
    /// `--container NAME|ID` (Docker): every process in its cgroup.
    pub containers: Vec<String>,
    /// `--docker-container`: where the matching at the end reads the
    /// sessions written inside containers (none: they stay unbound).
    pub container_sessions: Option<crate::enrich::ContainerSource>,
    /// `--agent`: adopt the agent's processes found on the host (not with
    /// `--container`: the containers' processes are all tracked already),
    /// and label every process row the agent's rules recognise.
    pub agent: Option<AgentName>,
    pub user: Option<String>,
    /// `--env` arguments for the command's environment (see `envreset`).
    pub env: Vec<crate::envreset::EnvArg>,
    pub duration: Option<Duration>,
    pub ring_bytes: u32,
    /// Under sudo, record other users' processes too (`--pid`, `--agent`).
    pub all_users: bool,
    /// Copy the bound sessions' raw transcripts into the capture, up to
    /// `transcript_budget` bytes in all.
    pub copy_transcripts: bool,
    pub transcript_budget: u64,
    /// Turn on kernel BPF run-time statistics for the recording.
    pub program_stats: bool,
    /// Stop storing (and count the rest as loss) once the capture is this big.
    pub max_bytes: Option<u64>,
    /// Meta stored when recording starts (e.g. `denied_inodes` for --audit).
    pub start_meta: Vec<(String, String)>,
    /// `--wire`: start the loopback model relay and point the command's
    /// agents at it (`record::wire`, `docs/wire.md`); needs a command.
    pub wire: bool,
    /// Set by a caller that reads the capture while it is being recorded
    /// (`livecap::KernelWatch`, under `agentsight top`).
    pub live: Option<LiveLink>,
    /// `--enforce`: the denied reads and executables refused for the
    /// recorded tree (`crate::enforce`, `docs/enforce.md`).
    pub enforce: Option<EnforceOptions>,
}

/// What `--enforce` marks, resolved from the policy before recording.
#[derive(Clone, Debug, Default)]
pub struct EnforceOptions {
    /// `--enforce=best-effort`: a mark the kernel refuses leaves its rule
    /// audited only (said in meta `enforcement`) instead of refusing to start.
    pub best_effort: bool,
    pub plan: crate::enforce::Plan,
    /// Rules of the policy this build does not enforce (judged afterwards
    /// by `audit` only), each with why.
    pub audited_not_enforced: Vec<String>,
}

/// What a caller reading the capture live shares with the recording.
#[derive(Clone, Debug, Default)]
pub struct LiveLink {
    /// Set to end the recording (as a signal would, but without one): the
    /// capture is then finished and bound as usual.
    pub stop: Arc<AtomicBool>,
    /// Every `/proc/PID/fd` observation the recording makes, in order, so
    /// live binding uses the same evidence the final binding does.
    pub fd_observations: Arc<std::sync::Mutex<Vec<crate::matching::FdObservation>>>,
    /// Homes whose sessions are cwd-fallback candidates when the finished
    /// capture is bound (besides the recorded command's user's home).
    pub homes: Vec<PathBuf>,
    /// Set to have a clock anchor stored at the next tick (≤ 50 ms). The
    /// writer keeps the order of what it is sent, so once that anchor is
    /// stored every batch the reader sent before it is too: a live reader
    /// learns how far the capture is complete even when no event comes.
    pub anchor_request: Arc<AtomicBool>,
}

/// What the recorder tells its caller while it runs. The library prints
/// nothing; the caller decides (the CLI: warnings unless `--quiet`, the
/// status line only on a terminal).
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// Something did not work as asked; the recording goes on.
    Warning(String),
    /// Other users' processes left out so far (under sudo; `--all-users`
    /// records them).
    SkippedOtherUsers(usize),
    /// Once a second while recording.
    Status {
        elapsed: Duration,
        processes: usize,
        events_per_s: f64,
        lost: u64,
    },
    /// The recording stopped: no more status lines.
    Stopped,
    /// `--wire`: what the relay does (one route per notice).
    Wire(String),
    /// A start that failed left a file it could not remove (never silenced).
    CleanupFailed(String),
    /// `--enforce`: the one-line summary at the end ("enforce: 3 accesses
    /// blocked (2 reads, 1 exec)…").
    Enforced(String),
}

pub fn run(
    opts: &RecordOptions,
    notify: &mut dyn FnMut(Notice),
) -> Result<RecordOutcome, RecordError> {
    // First of all: a SIGTERM during start-up must stop the recording
    // cleanly, not kill the recorder before it has a handler.
    let signals = install_signals()?;
    let target = check_target(opts)?;
    // The output first, created with the invoking user's own credentials
    // (the capture and its sidecars are theirs from the start, no chown): a
    // path the user could not create fails before anything is loaded.
    let start = Anchor::now("start");
    let writer = {
        let _as_user = privileges::AsUser::maybe(target.creds.as_ref())?;
        Writer::create_as(&opts.output, start, target.creds.clone())?
    };
    if let Some(max) = opts.max_bytes {
        let _ = writer.sender().send(StoreMsg::MaxBytes(max));
    }
    let tx = writer.sender();
    for (k, v) in start_meta(opts, target.user.as_ref(), start) {
        let _ = tx.send(StoreMsg::Meta(k, v));
    }
    if !target.containers.is_empty() {
        let _ = tx.send(StoreMsg::Meta(
            key::CONTAINERS.to_owned(),
            containers_json(&target.containers),
        ));
        let _ = tx.send(StoreMsg::Containers(target.containers.clone()));
    }
    let cgroups: Vec<_> = target
        .containers
        .iter()
        .map(|c| (c.cgroup_id, c.pid_ns))
        .collect();
    let mut loaded = match load_programs(opts, &cgroups, &tx, notify) {
        Ok(l) => l,
        Err(e) => {
            drop(tx);
            abandon(writer, &opts.output, target.creds.as_ref(), notify);
            return Err(e.into());
        }
    };
    let reading = match start_reader(&mut loaded.probes, &writer) {
        Ok(r) => r,
        Err(e) => {
            drop(tx);
            abandon(writer, &opts.output, target.creds.as_ref(), notify);
            return Err(e);
        }
    };
    let mut tracker = Tracker {
        probes: loaded.probes,
        tx,
        known: BTreeSet::new(),
        tmpdirs: Vec::new(),
        config_content: None,
        skipped: Skipped::new(target.only_uid),
        tls: None,
    };
    if opts.wire {
        tracker.start_tls(notify);
    }
    let (enforcer, relay, child) = match start_tree(opts, &target, &writer, &mut tracker, notify) {
        Ok(started) => started,
        Err(failed) => {
            let (e, enforcer) = *failed;
            // Nothing was recorded: leave no half-made capture behind.
            reading.stop.store(true, Ordering::Release);
            let _ = reading.thread.join();
            drop(tracker);
            drop(enforcer);
            abandon(writer, &opts.output, target.creds.as_ref(), notify);
            return Err(e);
        }
    };
    let containers =
        (opts.command.is_empty() && opts.pids.is_empty() && host_agent(opts).is_none())
            .then_some(target.containers.as_slice());
    let watched = watch(
        opts,
        &signals,
        child,
        &mut tracker,
        &reading.stats,
        containers,
        notify,
    );
    let enforced = enforcer.and_then(|e| enforce::stop(opts, e, &writer));
    if let Some(relay) = relay {
        let stats = relay.stop();
        let _ = writer.sender().send(StoreMsg::Meta(
            key::WIRE_STATS.to_owned(),
            serde_json::json!({
                "exchanges": stats.exchanges,
                "errors": stats.errors,
                "bytes_up": stats.bytes_up,
                "bytes_down": stats.bytes_down,
                "connections": stats.connections,
            })
            .to_string(),
        ));
    }
    let ended = Ended {
        start_wall_ns: start.wall_ns,
        failed_programs: loaded.failed_programs,
        stats_fd: loaded.stats_fd,
        watched,
        enforced,
    };
    finish(opts, &target, writer, tracker, reading, ended, notify)
}

/// With `--wire`: the relay started, and the command and its `--env` with
/// every knob pointed at it (routes stored in the capture's meta); without:
/// the command and environment as given.
/// What [`start_tree`] started: the enforcement, the relay, the command.
type Started = (
    Option<enforce::Enforcing>,
    Option<wire::WireRelay>,
    Option<std::process::Child>,
);

/// Why [`start_tree`] failed, and the enforcement it had started.
type NotStarted = Box<(RecordError, Option<enforce::Enforcing>)>;

/// `--enforce` in place, the targets adopted, the `--wire` relay started,
/// then the command, tracked from before its first instruction. On an
/// error, the enforcement started so far is handed back, for the caller to
/// stop after the tracker.
fn start_tree(
    opts: &RecordOptions,
    target: &target::Target,
    writer: &crate::store::Writer,
    tracker: &mut Tracker,
    notify: &mut dyn FnMut(Notice),
) -> Result<Started, NotStarted> {
    // Before anything of the tree runs: a refused start runs nothing.
    let enforcer =
        enforce::start(opts, target, tracker, writer).map_err(|e| Box::new((e, None)))?;
    tracker.adopt_targets(opts, notify);
    tracker.adopt_containers(&target.containers);
    let (relay, command, env) = match start_wire(opts, target, writer, notify) {
        Ok(w) => w,
        Err(e) => return Err(Box::new((e, enforcer))),
    };
    // The agents reach the relay on loopback: allowed, as the audit
    // declares it.
    if let (Some(e), Some(r)) = (&enforcer, &relay)
        && let Err(err) = e.allow_relay(tracker, r.addr())
    {
        return Err(Box::new((err, enforcer)));
    }
    let child = match (&target.user, opts.command.is_empty()) {
        (Some(u), false) => match tracker.spawn_tracked(
            u,
            &command,
            &env,
            enforcer.as_ref().and_then(|e| e.landlock_fd()),
        ) {
            Ok(c) => Some(c),
            Err(e) => return Err(Box::new((e, enforcer))),
        },
        _ => None,
    };
    Ok((enforcer, relay, child))
}

fn start_wire(
    opts: &RecordOptions,
    target: &target::Target,
    writer: &crate::store::Writer,
    notify: &mut dyn FnMut(Notice),
) -> Result<wire::Wired, RecordError> {
    let (Some(user), true) = (&target.user, opts.wire) else {
        return Ok((None, opts.command.clone(), opts.env.clone()));
    };
    let plan = {
        // Codex's configuration is read as the user whose agent it is.
        let _as_user = privileges::AsUser::maybe(target.creds.as_ref())?;
        wire::WirePlan::new(&opts.command, &wire::command_env(user, &opts.env))?
    };
    let relay = wire::WireRelay::start(&plan, writer.sender())?;
    let (env_set, args) = plan.apply(relay.addr());
    let routes = plan.describe();
    for r in &routes {
        notify(Notice::Wire(format!("relaying {r}")));
    }
    let _ = writer.sender().send(StoreMsg::Meta(
        key::WIRE_ROUTES.to_owned(),
        serde_json::to_string(&routes).unwrap_or_default(),
    ));
    let _ = writer.sender().send(StoreMsg::Meta(
        key::WIRE_RELAY.to_owned(),
        relay.addr().to_string(),
    ));
    let mut command = opts.command.clone();
    command.splice(1..1, args);
    let mut env = opts.env.clone();
    env.extend(env_set);
    Ok((Some(relay), command, env))
}

/// The agent whose processes are looked for on the host (`--agent`, unless
/// `--container` names what to record: then the agents are the ones in the
/// containers, tracked by their cgroup and only labelled).
pub(super) fn host_agent(opts: &RecordOptions) -> Option<AgentName> {
    opts.agent.filter(|_| opts.containers.is_empty())
}
