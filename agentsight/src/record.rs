//! `agentsight record`: load the kernel programs, start or adopt the agent's
//! process tree, and stream everything into a capture until the run ends.

use std::{
    collections::BTreeSet,
    ffi::OsString,
    os::{
        fd::{AsFd, AsRawFd},
        unix::process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Child, Command},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI32, Ordering},
        mpsc::SyncSender,
    },
    time::{Duration, Instant},
};

use aya::maps::IterableMap;

use crate::{
    capture::{
        ProcessOrigin, ProcessSeed,
        container::{self, ContainerInfo},
        loader::Probes,
        reader::{self, ReaderStats},
    },
    clock::{Anchor, mono_now_ns, rfc3339_ns},
    privileges::{self, TargetUser},
    procinfo::{self, AgentName},
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
    #[error("nothing to record: give a command after --, or --pid, --agent or --container")]
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
    #[error("cannot start {program}: {reason}")]
    Spawn { program: String, reason: String },
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
    /// Set by a caller that reads the capture while it is being recorded
    /// (`livecap::KernelWatch`, under `agentsight top`).
    pub live: Option<LiveLink>,
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

/// How the run ended, for the summary and the exit status.
#[derive(Debug)]
pub struct RecordOutcome {
    pub output: PathBuf,
    /// The command's exit status, mapped like a shell does (128 + signal).
    pub command_status: Option<i32>,
    pub events: u64,
    pub processes: u64,
    pub lost: u64,
    pub gap_missing: u64,
    pub failed_programs: Vec<String>,
    pub end_reason: String,
    pub store_error: Option<String>,
    /// Storing stopped because the disk was full (the capture was still
    /// finished and says so): when, and what was not stored.
    pub disk_full: Option<crate::store::DiskFull>,
    /// Events not stored because the capture reached `--max-size`.
    pub not_stored: u64,
    pub elapsed: Duration,
    /// The recorder's peak resident memory, KiB.
    pub peak_rss_kib: u64,
    /// With `program_stats`: how often the kernel programs ran and for how
    /// long, all programs together.
    pub program_runs: Option<(u64, Duration)>,
    /// The recorder's CPU time (user + system).
    pub cpu: Duration,
}

/// Signals that ask us to stop, counted by the handler thread.
struct Signals {
    interrupt: Arc<AtomicI32>,
    terminate: Arc<AtomicI32>,
}

fn install_signals() -> Result<Signals, RecordError> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let interrupt = Arc::new(AtomicI32::new(0));
    let terminate = Arc::new(AtomicI32::new(0));
    let mut sigs = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| RecordError::Other(format!("cannot install signal handlers: {e}")))?;
    let (i, t) = (interrupt.clone(), terminate.clone());
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for s in sigs.forever() {
                if s == SIGINT {
                    i.fetch_add(1, Ordering::SeqCst);
                } else {
                    t.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
        .map_err(|e| RecordError::Other(format!("cannot start signal thread: {e}")))?;
    Ok(Signals {
        interrupt,
        terminate,
    })
}

/// Host facts for the metadata table.
fn host_meta() -> Vec<(String, String)> {
    let uname = nix::sys::utsname::uname().ok();
    let host = uname
        .as_ref()
        .map(|u| u.nodename().to_string_lossy().into_owned())
        .unwrap_or_default();
    let kernel = uname
        .as_ref()
        .map(|u| {
            format!(
                "{} {}",
                u.release().to_string_lossy(),
                u.machine().to_string_lossy()
            )
        })
        .unwrap_or_default();
    vec![
        ("tool_version".into(), env!("CARGO_PKG_VERSION").into()),
        ("host".into(), host),
        ("kernel".into(), kernel),
    ]
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
    /// A start that failed left a file it could not remove (never silenced).
    CleanupFailed(String),
}

/// Who the recording is for: the command's user, the caller's file
/// credentials, and (under sudo) the only uid whose processes are recorded.
struct Target {
    user: Option<TargetUser>,
    creds: Option<privileges::FileCreds>,
    only_uid: Option<u32>,
    /// The `--container`s, resolved.
    containers: Vec<ContainerInfo>,
}

/// Checks what can be checked before anything is created or loaded.
fn check_target(opts: &RecordOptions) -> Result<Target, RecordError> {
    if opts.command.is_empty()
        && opts.pids.is_empty()
        && opts.agent.is_none()
        && opts.containers.is_empty()
    {
        return Err(RecordError::NoTarget);
    }
    // Names are data: every one is checked before any docker call.
    for name in &opts.containers {
        container::validate_name(name)?;
    }
    privileges::check_root()?;
    let user = if opts.command.is_empty() {
        None
    } else {
        Some(privileges::target_user(opts.user.as_deref())?)
    };
    let creds = privileges::FileCreds::invoking_user();
    // Under sudo, only the caller's own processes are recorded. A container
    // is tracked by its cgroup in the kernel, whoever's processes run in it
    // (a root `docker exec` too), so it cannot honour that: it needs the
    // explicit --all-users, which the capture records.
    if creds.is_some() && !opts.all_users && !opts.containers.is_empty() {
        return Err(RecordError::ContainerNeedsAllUsers);
    }
    let only_uid = match (&creds, opts.all_users) {
        (Some(c), false) => Some(c.uid),
        _ => None,
    };
    check_pids(&opts.pids, only_uid)?;
    let mut containers: Vec<ContainerInfo> = Vec::new();
    for name in &opts.containers {
        let c = container::resolve(name)?;
        // The same container named twice (name and id) is recorded once.
        if !containers.iter().any(|k| k.id == c.id) {
            containers.push(c);
        }
    }
    Ok(Target {
        user,
        creds,
        only_uid,
        containers,
    })
}

/// The kernel programs as loaded, with what the capture and summary say
/// about them.
struct Loaded {
    probes: Probes,
    /// Statistics stay on while this fd is open (the kernel counts for every
    /// program while anyone holds one).
    stats_fd: Option<std::os::fd::OwnedFd>,
    failed_programs: Vec<String>,
}

/// Loads and attaches the programs; notes each one's state in the capture.
fn load_programs(
    opts: &RecordOptions,
    cgroups: &[(u64, agentsight_common::ContainerNs)],
    tx: &SyncSender<StoreMsg>,
    notify: &mut dyn FnMut(Notice),
) -> Result<Loaded, crate::capture::loader::LoadError> {
    let meta = |k: &str, v: String| {
        let _ = tx.send(StoreMsg::Meta(k.to_owned(), v));
    };
    let probes = Probes::load(opts.ring_bytes, cgroups)?;
    // Loading parsed the kernel's BTF (tens of MiB of small allocations, all
    // freed by now); give those pages back to the system, or they stay
    // resident under everything held later. glibc only returns them on request.
    // Safety: malloc_trim has no preconditions.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0)
    };
    let stats_fd = if opts.program_stats {
        match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => Some(fd),
            Err(e) => {
                notify(Notice::Warning(format!(
                    "program statistics unavailable: {e}"
                )));
                meta("program_stats_error", e.to_string());
                None
            }
        }
    } else {
        None
    };
    let programs_json: Vec<serde_json::Value> = probes
        .programs
        .iter()
        .map(|p| serde_json::json!({"name": p.name, "hook": p.hook, "attached": p.error.is_none(), "error": p.error}))
        .collect();
    meta(
        "programs",
        serde_json::Value::Array(programs_json).to_string(),
    );
    if let Some(note) = &probes.tracefs_note {
        tracing::info!("{note}");
        meta("tracefs", note.clone());
    }
    let failed_programs: Vec<String> = probes
        .programs
        .iter()
        .filter_map(|p| {
            p.error
                .as_ref()
                .map(|e| format!("{} ({}): {e}", p.name, p.hook))
        })
        .collect();
    for f in &failed_programs {
        notify(Notice::Warning(format!("program not attached: {f}")));
    }
    Ok(Loaded {
        probes,
        stats_fd,
        failed_programs,
    })
}

/// The ring reader's thread and what it shares with the main thread.
struct Reading {
    thread: std::thread::JoinHandle<Vec<crate::capture::reader::Gap>>,
    stop: Arc<AtomicBool>,
    stats: Arc<ReaderStats>,
}

fn start_reader(probes: &mut Probes, writer: &Writer) -> Result<Reading, RecordError> {
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ReaderStats::default());
    let ring = probes.take_ring()?;
    let io = probes.io.take();
    let seq = probes.take_seq().ok();
    let thread = reader::spawn(
        ring,
        io,
        seq,
        writer.event_sender(),
        stop.clone(),
        stats.clone(),
    )
    .map_err(|e| RecordError::Other(format!("cannot start ring reader: {e}")))?;
    Ok(Reading {
        thread,
        stop,
        stats,
    })
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
            "containers".into(),
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
        skipped: Skipped::new(target.only_uid),
    };
    tracker.adopt_targets(opts, notify);
    tracker.adopt_containers(&target.containers);
    // Start the command, tracked from before its first instruction.
    let child = match (&target.user, opts.command.is_empty()) {
        (Some(u), false) => match tracker.spawn_tracked(u, &opts.command, &opts.env) {
            Ok(c) => Some(c),
            Err(e) => {
                // Nothing was recorded: leave no half-made capture behind.
                reading.stop.store(true, Ordering::Release);
                let _ = reading.thread.join();
                drop(tracker);
                abandon(writer, &opts.output, target.creds.as_ref(), notify);
                return Err(e);
            }
        },
        _ => None,
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
    let ended = Ended {
        start_wall_ns: start.wall_ns,
        failed_programs: loaded.failed_programs,
        stats_fd: loaded.stats_fd,
        watched,
    };
    finish(opts, &target, writer, tracker, reading, ended, notify)
}

/// The agent whose processes are looked for on the host (`--agent`, unless
/// `--container` names what to record: then the agents are the ones in the
/// containers, tracked by their cgroup and only labelled).
fn host_agent(opts: &RecordOptions) -> Option<AgentName> {
    opts.agent.filter(|_| opts.containers.is_empty())
}

/// The processes the recording follows besides the command it starts:
/// `--pid` trees and `--agent` processes, adopted into the kernel's map.
struct Tracker {
    probes: Probes,
    tx: SyncSender<StoreMsg>,
    /// Pids adopted so far (the kernel map makes re-adding harmless).
    known: BTreeSet<u32>,
    /// The recorded commands' TMPDIRs, stored as meta `tmpdirs`.
    tmpdirs: Vec<String>,
    skipped: Skipped,
}

impl Tracker {
    /// The `--pid` trees and the agents already running.
    fn adopt_targets(&mut self, opts: &RecordOptions, notify: &mut dyn FnMut(Notice)) {
        if !opts.pids.is_empty() {
            let procs = procinfo::snapshot();
            let roots: BTreeSet<u32> = opts.pids.iter().copied().collect();
            let tree = self
                .skipped
                .keep_own(procinfo::tree_of(&procs, &roots), notify);
            self.adopt(&tree, ProcessOrigin::Seeded);
        }
        if let Some(agent) = host_agent(opts) {
            self.scan_agents(agent, notify);
        }
    }
}

impl Tracker {
    /// The processes already in each container: its init's tree and every
    /// process in its cgroup (earlier `docker exec`s are not the init's
    /// descendants). They are adopted whoever owns them: naming the
    /// container asks for all of it, as the kernel's cgroup match does.
    fn adopt_containers(&mut self, containers: &[ContainerInfo]) {
        if containers.is_empty() {
            return;
        }
        let procs = procinfo::snapshot();
        let mut roots = BTreeSet::new();
        for c in containers {
            roots.insert(c.init_pid);
            roots.extend(container::cgroup_pids(&c.cgroup_dir).unwrap_or_default());
        }
        let tree = procinfo::tree_of(&procs, &roots);
        self.adopt(&tree, ProcessOrigin::Seeded);
    }
}

/// The recorded containers, as meta `containers` (a JSON array).
fn containers_json(containers: &[ContainerInfo]) -> String {
    let items: Vec<serde_json::Value> = containers
        .iter()
        .map(|c| {
            serde_json::json!({
                "id": c.id,
                "name": c.name,
                "image": c.image,
                "init_pid": c.init_pid,
                "cgroup_id": c.cgroup_id,
                "cgroup": c.cgroup_dir.to_string_lossy(),
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

/// True once no recorded container has a process left (its cgroup is
/// empty or gone).
fn containers_stopped(containers: &[ContainerInfo]) -> bool {
    containers
        .iter()
        .all(|c| container::cgroup_pids(&c.cgroup_dir).is_none_or(|pids| pids.is_empty()))
}

/// How the watched run ended.
struct Watched {
    end_reason: String,
    command_status: Option<i32>,
    /// /proc/PID/fd evidence for session matching (see `matching`).
    fd_obs: Vec<crate::matching::FdObservation>,
    started: Instant,
}

/// What `finish` needs besides the writer, the tracker and the reader.
struct Ended {
    /// The start anchor's wall time: the capture's window opens there.
    start_wall_ns: u64,
    failed_programs: Vec<String>,
    stats_fd: Option<std::os::fd::OwnedFd>,
    watched: Watched,
}

/// Why the run stops now, from the signals counted so far.
///
/// With a command, Ctrl-C reaches it through the terminal and it decides;
/// SIGTERM/SIGHUP are passed on. We stop when it exits, or 5 s after a
/// forwarded signal, or at a second Ctrl-C.
fn stop_by_signal(
    signals: &Signals,
    child: Option<&Child>,
    term_forwarded_at: &mut Option<Instant>,
) -> Option<String> {
    let ints = signals.interrupt.load(Ordering::SeqCst);
    let terms = signals.terminate.load(Ordering::SeqCst);
    let Some(c) = child else {
        return (ints > 0 || terms > 0).then(|| "stopped by signal".into());
    };
    if terms > 0 && term_forwarded_at.is_none() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        *term_forwarded_at = Some(Instant::now());
    }
    if ints > 1 {
        return Some("interrupted twice".into());
    }
    if ints == 1 && term_forwarded_at.is_none() {
        *term_forwarded_at = Some(Instant::now());
    }
    term_forwarded_at
        .is_some_and(|t| t.elapsed() > Duration::from_secs(5))
        .then(|| "stopped by signal; the command did not exit within 5 s".into())
}

/// The main thread's periodic work while the run lasts.
struct Periodic {
    status: Instant,
    events: u64,
    anchor: Instant,
    scan: Instant,
    fd_scan: Instant,
}

impl Periodic {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            status: now,
            events: 0,
            anchor: now,
            scan: now,
            fd_scan: now,
        }
    }

    fn tick(&mut self, w: &mut WatchCtx<'_>) {
        if let Some(live) = &w.opts.live
            && live.anchor_request.swap(false, Ordering::AcqRel)
        {
            let _ = w.tracker.tx.send(StoreMsg::Anchor(Anchor::now("live")));
        }
        if let Some(agent) = host_agent(w.opts)
            && self.scan.elapsed() >= Duration::from_millis(250)
        {
            w.tracker.scan_agents(agent, w.notify);
            self.scan = Instant::now();
        }
        if self.status.elapsed() >= Duration::from_secs(1) {
            let loss = w.tracker.probes.loss_counts();
            let lost: u64 = loss.iter().map(|(_, n)| n).sum();
            let _ = w.tracker.tx.send(StoreMsg::Loss(loss));
            let events = w.stats.events.load(Ordering::Relaxed);
            let rate = (events - self.events) as f64 / self.status.elapsed().as_secs_f64();
            self.events = events;
            (w.notify)(Notice::Status {
                elapsed: w.started.elapsed(),
                processes: tracked_count(&w.tracker.probes),
                events_per_s: rate,
                lost,
            });
            self.status = Instant::now();
        }
        if self.fd_scan.elapsed() >= Duration::from_secs(1) {
            let pids: Vec<u32> = w
                .tracker
                .probes
                .tracked
                .keys()
                .filter_map(|k| k.ok())
                .collect();
            let before = w.fd_obs.len();
            crate::matching::scan_fds(&pids, mono_now_ns(), w.fd_obs);
            if let Some(live) = &w.opts.live
                && let Ok(mut shared) = live.fd_observations.lock()
            {
                shared.extend_from_slice(&w.fd_obs[before..]);
            }
            self.fd_scan = Instant::now();
        }
        if self.anchor.elapsed() >= Duration::from_secs(10) {
            let _ = w.tracker.tx.send(StoreMsg::Anchor(Anchor::now("periodic")));
            self.anchor = Instant::now();
        }
    }
}

/// What the periodic work reaches.
struct WatchCtx<'a> {
    opts: &'a RecordOptions,
    tracker: &'a mut Tracker,
    stats: &'a ReaderStats,
    notify: &'a mut dyn FnMut(Notice),
    fd_obs: &'a mut Vec<crate::matching::FdObservation>,
    started: Instant,
}

/// Waits for the end of the run (the command exits, a signal, the
/// duration) while doing the periodic work.
fn watch(
    opts: &RecordOptions,
    signals: &Signals,
    mut child: Option<Child>,
    tracker: &mut Tracker,
    stats: &ReaderStats,
    only_containers: Option<&[ContainerInfo]>,
    notify: &mut dyn FnMut(Notice),
) -> Watched {
    let started = Instant::now();
    let mut containers_checked = started;
    let mut fd_obs = Vec::new();
    let mut periodic = Periodic::new();
    let mut command_status = None;
    let mut term_forwarded_at = None;
    let end_reason = loop {
        // Every 2 ms while the command's TMPDIR is watched (a short command
        // may exec its wrapper's target and finish within a few ms), then 50.
        std::thread::sleep(if child.is_some() && started.elapsed() < TMPDIR_WINDOW {
            Duration::from_millis(2)
        } else {
            Duration::from_millis(50)
        });
        if let Some(c) = child.as_mut() {
            match c.try_wait() {
                Ok(Some(status)) => {
                    command_status = Some(shell_status(status));
                    break "command exited".to_string();
                }
                Ok(None) => {}
                Err(e) => break format!("cannot wait for the command: {e}"),
            }
        }
        if let Some(why) = stop_by_signal(signals, child.as_ref(), &mut term_forwarded_at) {
            break why;
        }
        if opts
            .live
            .as_ref()
            .is_some_and(|l| l.stop.load(Ordering::Acquire))
        {
            break "stopped by its caller".to_string();
        }
        // A wrapper (`env TMPDIR=… agent`, `sh -c 'TMPDIR=… exec agent'`)
        // sets the command's TMPDIR after we started it: read the root's
        // environment as its execs leave it, for its first second only (a
        // later re-exec cannot widen what the audit allows). The child is
        // not reaped yet (try_wait above said so): its pid is still its own.
        if let Some(c) = child.as_ref()
            && started.elapsed() < TMPDIR_WINDOW
            && let Some(t) = procinfo::env_var(c.id(), "TMPDIR")
        {
            tracker.note_tmpdir(&t);
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break "duration reached".to_string();
        }
        // Recording only containers: the run ends with the last of them.
        if let Some(cs) = only_containers
            && containers_checked.elapsed() >= Duration::from_millis(250)
        {
            containers_checked = Instant::now();
            if containers_stopped(cs) {
                break "every container stopped".to_string();
            }
        }
        periodic.tick(&mut WatchCtx {
            opts,
            tracker,
            stats,
            notify,
            fd_obs: &mut fd_obs,
            started,
        });
    };
    notify(Notice::Stopped);
    Watched {
        end_reason,
        command_status,
        fd_obs,
        started,
    }
}

/// Drains the ring, completes the capture, binds sessions, and measures
/// the recorder's own cost.
fn finish(
    opts: &RecordOptions,
    target: &Target,
    writer: Writer,
    tracker: Tracker,
    reading: Reading,
    ended: Ended,
    notify: &mut dyn FnMut(Notice),
) -> Result<RecordOutcome, RecordError> {
    let Tracker {
        probes,
        tx,
        skipped,
        ..
    } = tracker;
    let Watched {
        end_reason,
        command_status,
        fd_obs,
        started,
    } = ended.watched;
    // Drain: the reader empties the ring and returns the gaps it saw.
    reading.stop.store(true, Ordering::Release);
    let gaps = reading.thread.join().unwrap_or_default();
    let program_runs = ended.stats_fd.as_ref().map(|_| program_stats(&probes));
    drop(ended.stats_fd);
    let loss = probes.loss_counts();
    let lost: u64 = loss.iter().map(|(_, n)| n).sum();
    let _ = tx.send(StoreMsg::Loss(loss));
    let stop_anchor = Anchor::now("stop");
    let _ = tx.send(StoreMsg::Anchor(stop_anchor));
    drop(tx);
    let gap_missing: u64 = gaps.iter().map(|g| g.last_seq - g.first_seq + 1).sum();
    let mut final_meta = vec![
        ("ended_at".to_owned(), rfc3339_ns(stop_anchor.wall_ns)),
        ("end_reason".to_owned(), end_reason.clone()),
        ("complete".to_owned(), "true".to_owned()),
    ];
    if let Some(s) = command_status {
        final_meta.push(("command_exit_status".into(), s.to_string()));
    }
    if target.only_uid.is_some() {
        final_meta.push(("skipped_other_users".into(), skipped.pids.len().to_string()));
    }
    if let Some((json, _)) = &program_runs {
        final_meta.push(("program_stats".into(), json.clone()));
    }
    // From here on the capture is only written by this thread: as the user.
    let _as_user = privileges::AsUser::maybe(target.creds.as_ref())?;
    let summary = writer.finish(&gaps, &final_meta);
    if let Some(full) = &summary.disk_full {
        // The disk has no room for transcripts and bindings; the capture
        // itself is finished and says what it did not store.
        notify(Notice::Warning(format!(
            "sessions not bound: storing stopped ({})",
            full.message()
        )));
    } else if summary.error.is_none() {
        label_agents(opts, notify);
        bind_sessions(opts, target, fd_obs, notify);
        let window_ms = (
            (ended.start_wall_ns / 1_000_000) as i64,
            stop_anchor.wall_ns.div_ceil(1_000_000) as i64,
        );
        store_messages(opts, target, window_ms, notify);
    }
    detach_in_parallel();
    // The links are closed above; the rest (maps, programs) closes at exit.
    std::mem::forget(probes);
    // Measured last, so the writer's deferred work (it yields the CPU while
    // the run lasts) and session matching are counted too.
    let (peak_rss_kib, cpu) = self_usage();
    if let Err(e) = store_recorder_usage(&opts.output, peak_rss_kib, cpu) {
        tracing::warn!(
            "{}: storing the recorder's usage: {e}",
            opts.output.display()
        );
    }
    Ok(RecordOutcome {
        output: opts.output.clone(),
        command_status,
        events: summary.events,
        processes: summary.processes,
        lost,
        gap_missing,
        failed_programs: ended.failed_programs,
        end_reason,
        not_stored: summary.not_stored.values().sum(),
        store_error: summary.error,
        disk_full: summary.disk_full,
        elapsed: started.elapsed(),
        peak_rss_kib,
        cpu,
        program_runs: program_runs.map(|(_, total)| total),
    })
}

/// `--agent`: labels every process row the agent's executable/argv rules
/// recognise (`processes.agent`), on the host or in a container alike.
fn label_agents(opts: &RecordOptions, notify: &mut dyn FnMut(Notice)) {
    let Some(agent) = opts.agent else {
        return;
    };
    let labelled = crate::store::CaptureRw::open(&opts.output).and_then(|c| {
        c.label_agents(&|argv: &[String], exe: Option<&str>| {
            agent.recognise(argv, exe).map(|a| a.as_str())
        })
    });
    if let Err(e) = labelled {
        notify(Notice::Warning(format!(
            "agent processes not labelled: {e}"
        )));
    }
}

/// Binds the trees to sessions and stores sessions, transcripts, bindings
/// and correlations in the finished capture (a failure there never loses
/// the capture).
fn bind_sessions(
    opts: &RecordOptions,
    target: &Target,
    fd_obs: Vec<crate::matching::FdObservation>,
    notify: &mut dyn FnMut(Notice),
) {
    // Transcripts are copied into the user's capture only if they are the
    // user's own files (and, under sudo, read as the user: see `finish`).
    crate::sessions::util::set_transcript_owner(target.user.as_ref().map(|u| u.uid));
    let bind = crate::enrich::BindOptions {
        homes: target
            .user
            .iter()
            .map(|u| PathBuf::from(&u.home))
            .chain(opts.live.iter().flat_map(|l| l.homes.iter().cloned()))
            .collect(),
        copy_transcripts: opts.copy_transcripts,
        transcript_budget: opts.transcript_budget,
        fd_observations: fd_obs,
        containers: opts.container_sessions.clone(),
    };
    let correlate = |c: &rusqlite::Connection, p: &str| {
        crate::correlate::store_all(c, p).map_err(|e| e.to_string())
    };
    match crate::enrich::bind_and_store(&opts.output, &bind, &correlate) {
        Ok(b) => {
            for n in &b.notes {
                tracing::warn!("{n}");
            }
        }
        Err(e) => notify(Notice::Warning(format!("sessions not bound: {e}"))),
    }
}

/// Stores the `session message` submissions for the capture's window from
/// the run-as user's log (home from passwd; the invoking user's when no
/// command ran) and every log a recorded process wrote; a log it cannot read
/// is a note in the capture, never a failed recording.
fn store_messages(
    opts: &RecordOptions,
    target: &Target,
    window_ms: (i64, i64),
    notify: &mut dyn FnMut(Notice),
) {
    let home = match (&target.user, &target.creds) {
        (Some(u), _) => Some(PathBuf::from(&u.home)),
        (None, Some(c)) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(c.uid))
            .ok()
            .flatten()
            .map(|u| u.dir),
        (None, None) => None,
    };
    match crate::enrich::store_external_messages(&opts.output, home.as_deref(), window_ms) {
        Ok(stored) => {
            if let Some(n) = stored.note {
                notify(Notice::Warning(n));
            }
        }
        Err(e) => notify(Notice::Warning(format!(
            "session message submissions not stored: {e}"
        ))),
    }
}

/// What the capture says about the run before anything is recorded.
fn start_meta(
    opts: &RecordOptions,
    user: Option<&TargetUser>,
    start: Anchor,
) -> Vec<(String, String)> {
    let mut v = host_meta();
    let mut meta = |k: &str, val: String| v.push((k.to_owned(), val));
    meta("started_at", rfc3339_ns(start.wall_ns));
    meta("complete", "false".into());
    meta("recorder_pid", std::process::id().to_string());
    meta("ring_buffer_bytes", opts.ring_bytes.to_string());
    meta("all_users", opts.all_users.to_string());
    for (k, val) in &opts.start_meta {
        meta(k, val.clone());
    }
    let command: Vec<String> = opts
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    meta(
        "command",
        serde_json::to_string(&command).unwrap_or_default(),
    );
    meta(
        "target_pids",
        serde_json::to_string(&opts.pids).unwrap_or_default(),
    );
    meta(
        "target_agent",
        opts.agent
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default(),
    );
    if let Some(u) = user {
        meta(
            "run_as",
            format!("{} (uid {}, gid {})", u.name, u.uid, u.gid),
        );
    }
    v
}

/// Every `--pid` exists and, when `only_uid` is set (under sudo), is that
/// user's own process: checked before anything is created or loaded.
fn check_pids(pids: &[u32], only_uid: Option<u32>) -> Result<(), RecordError> {
    for &pid in pids {
        let Some(info) = procinfo::ProcInfo::read(pid) else {
            return Err(RecordError::NoSuchPid(pid));
        };
        if let Some(you) = only_uid
            && !info.owned_by(you)
        {
            let uids = info
                .uids
                .map(|u| format!("{}/{}/{}", u[0], u[1], u[2]))
                .unwrap_or_else(|| "unknown".into());
            return Err(RecordError::NotYourProcess { pid, uids, you });
        }
    }
    Ok(())
}

/// A start that failed before anything was recorded: stop the writer and
/// remove the capture and its sidecars (all created by us, O_EXCL).
fn abandon(
    writer: Writer,
    output: &Path,
    creds: Option<&privileges::FileCreds>,
    notify: &mut dyn FnMut(Notice),
) {
    let _ = writer.finish(&[], &[]);
    let _as_user = privileges::AsUser::maybe(creds).ok().flatten();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = output.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                notify(Notice::CleanupFailed(format!(
                    "could not remove {}: {e}",
                    Path::new(&p).display()
                )));
            }
            _ => {}
        }
    }
}

/// Each attached program's run count and total run time since statistics
/// were turned on (every process's syscalls, not only the tracked ones'),
/// as meta JSON, and the totals.
fn program_stats(probes: &Probes) -> (String, (u64, Duration)) {
    let mut items = Vec::new();
    let (mut runs, mut time) = (0u64, Duration::ZERO);
    for (name, program) in probes.ebpf.programs() {
        match program.info() {
            Ok(info) => {
                runs += info.run_count();
                time += info.run_time();
                items.push(serde_json::json!({
                    "name": name,
                    "runs": info.run_count(),
                    "run_ns": info.run_time().as_nanos() as u64,
                }));
            }
            Err(e) => items.push(serde_json::json!({"name": name, "error": e.to_string()})),
        }
    }
    (serde_json::Value::Array(items).to_string(), (runs, time))
}

/// Adds the recorder's own usage to the finished capture's meta table.
fn store_recorder_usage(
    path: &Path,
    peak_rss_kib: u64,
    cpu: Duration,
) -> Result<(), crate::store::StoreError> {
    let cap = crate::store::CaptureRw::open(path)?;
    cap.put_meta("recorder_peak_rss_kib", &peak_rss_kib.to_string())?;
    cap.put_meta("recorder_cpu_seconds", &format!("{:.3}", cpu.as_secs_f64()))
}

/// The recorder's own peak RSS (VmHWM) and CPU time so far.
fn self_usage() -> (u64, Duration) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let cpu = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
            };
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or_default();
    (hwm, cpu)
}

fn tracked_count(probes: &Probes) -> usize {
    probes.tracked.keys().filter(|k| k.is_ok()).count()
}

pub fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

fn shell_status(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// Other users' processes left out under sudo (`--all-users` keeps them).
struct Skipped {
    only_uid: Option<u32>,
    pids: BTreeSet<u32>,
}

impl Skipped {
    fn new(only_uid: Option<u32>) -> Self {
        Self {
            only_uid,
            pids: BTreeSet::new(),
        }
    }

    /// The caller's own processes of `tree`; says when more were skipped.
    fn keep_own(
        &mut self,
        tree: Vec<procinfo::ProcInfo>,
        notify: &mut dyn FnMut(Notice),
    ) -> Vec<procinfo::ProcInfo> {
        let (own, others) = procinfo::split_by_owner(tree, self.only_uid);
        let before = self.pids.len();
        self.pids.extend(others.iter().map(|p| p.pid));
        if self.pids.len() > before {
            notify(Notice::SkippedOtherUsers(self.pids.len()));
        }
        own
    }
}

impl Tracker {
    /// Tracks `procs` in the kernel and seeds their rows.
    fn adopt(&mut self, procs: &[procinfo::ProcInfo], origin: ProcessOrigin) {
        // The roots' TMPDIR (their environment as /proc shows it): an allowed
        // root for `audit` by default.
        let pids: BTreeSet<u32> = procs.iter().map(|p| p.pid).collect();
        for p in procs.iter().filter(|p| !pids.contains(&p.ppid)) {
            if !self.known.contains(&p.pid)
                && let Some(t) = procinfo::env_var(p.pid, "TMPDIR")
            {
                self.note_tmpdir(&t);
            }
        }
        for p in procs {
            if !self.known.insert(p.pid) {
                continue;
            }
            if let Err(e) = self.probes.track(p.pid) {
                tracing::warn!("{e}");
                continue;
            }
            let _ = self.tx.send(StoreMsg::Seed(p.seed(origin)));
        }
    }

    /// Adds a recorded command's TMPDIR to the capture's meta `tmpdirs` (a
    /// JSON array of distinct paths, in the order seen).
    fn note_tmpdir(&mut self, t: &str) {
        let Some(t) = crate::envreset::usable_tmpdir(t) else {
            return;
        };
        if self.tmpdirs.contains(&t) {
            return;
        }
        self.tmpdirs.push(t);
        let json = serde_json::to_string(&self.tmpdirs).unwrap_or_default();
        let _ = self.tx.send(StoreMsg::Meta("tmpdirs".into(), json));
    }

    /// Finds agent processes (and their trees) not yet tracked. Processes
    /// the kernel already tracks (children of tracked ones) are skipped by
    /// `known` only when we adopted them; the kernel map makes re-adding
    /// harmless.
    fn scan_agents(&mut self, agent: AgentName, notify: &mut dyn FnMut(Notice)) {
        let procs = procinfo::snapshot();
        let me = std::process::id();
        let roots: BTreeSet<u32> = procs
            .iter()
            .filter(|p| p.pid != me && !self.known.contains(&p.pid) && agent.matches(p))
            .map(|p| p.pid)
            .collect();
        if roots.is_empty() {
            return;
        }
        let tree = self
            .skipped
            .keep_own(procinfo::tree_of(&procs, &roots), notify);
        self.adopt(&tree, ProcessOrigin::Seeded);
    }
}

/// How long the root command's environment is watched for its TMPDIR.
const TMPDIR_WINDOW: Duration = Duration::from_secs(1);

impl Tracker {
    /// Starts the command as `user`, tracked by the kernel before it executes.
    fn spawn_tracked(
        &mut self,
        user: &TargetUser,
        command: &[OsString],
        env: &[crate::envreset::EnvArg],
    ) -> Result<Child, RecordError> {
        let map_fd = self.probes.tracked.map().fd().as_fd().as_raw_fd();
        let (uid, gid, groups) = (user.uid, user.gid, user.groups.clone());
        let id = crate::envreset::Identity {
            name: &user.name,
            home: &user.home,
            shell: &user.shell,
        };
        // Like sudo's env_reset: none of root's environment beyond the terminal
        // and locale; the program is looked up in the command's PATH.
        let envs = crate::envreset::build(&id, std::env::vars_os(), env);
        // Its TMPDIR, when its environment has one (`--env TMPDIR…`); a wrapper
        // such as `env TMPDIR=… agent` is read from /proc/PID/environ later.
        if let Some((_, t)) = envs.iter().find(|(k, _)| k == "TMPDIR") {
            self.note_tmpdir(&t.to_string_lossy());
        }
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..]).env_clear().envs(envs);
        // Safety: the closure runs in the forked child before exec and only makes
        // raw syscalls (bpf, setgroups, setgid, setuid), which are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                track_self(map_fd)?;
                let gids: Vec<libc::gid_t> = groups.clone();
                if libc::setgroups(gids.len(), gids.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let spawned_mono = mono_now_ns();
        let child = cmd.spawn().map_err(|e| RecordError::Spawn {
            program: command[0].to_string_lossy().into_owned(),
            reason: e.to_string(),
        })?;
        let pid = child.id();
        let info = procinfo::ProcInfo::read(pid);
        let _ = self.tx.send(StoreMsg::Seed(ProcessSeed {
            pid,
            start_mono_ns: spawned_mono,
            ppid: std::process::id(),
            origin: ProcessOrigin::Root,
            comm: info.as_ref().map(|i| i.comm.clone()),
            argv: Some(
                command
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect(),
            ),
            cwd: info.as_ref().and_then(|i| i.cwd.clone()),
            exe: info.as_ref().and_then(|i| i.exe.clone()),
            uid: Some(uid),
            gid: Some(gid),
            fds: info.as_ref().map(|i| i.fds.clone()).unwrap_or_default(),
        }));
        Ok(child)
    }
}

/// Closes the perf-event links of our tracepoints from many threads at once.
/// Each close waits for an RCU grace period in the kernel (~70 ms here);
/// one after another, 90 of them kept `record` from exiting for 6 s, while
/// concurrent closes share grace periods. Called once capturing is over and
/// before `Probes` is forgotten, so no fd number can have been reused.
fn detach_in_parallel() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok())
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|t| {
                    let t = t.to_string_lossy();
                    t.contains("[perf_event]") || t.contains("bpf_link") || t.contains("bpf-link")
                })
                .unwrap_or(false)
        })
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    let handles: Vec<_> = fds
        .chunks(4)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            std::thread::spawn(move || {
                for fd in chunk {
                    // Safety: these fds belong to links nothing uses any more.
                    unsafe { libc::close(fd) };
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

/// Inserts the calling process into the tracked map with a raw bpf(2) call:
/// it runs between fork and exec, where only async-signal-safe calls are allowed.
fn track_self(map_fd: i32) -> std::io::Result<()> {
    #[repr(C)]
    struct MapElemAttr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    let key: u32 = std::process::id();
    let value: u8 = 1;
    let attr = MapElemAttr {
        map_fd: map_fd as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: &value as *const u8 as u64,
        flags: 0,
    };
    // Safety: attr is a valid bpf_attr prefix for BPF_MAP_UPDATE_ELEM.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_ELEM,
            &attr as *const MapElemAttr,
            std::mem::size_of::<MapElemAttr>(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The default output name: `./agentsight-YYYYmmdd-HHMMSS.db` in local time.
pub fn default_output() -> PathBuf {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
        .map(|t| t.tv_sec())
        .unwrap_or(0);
    // Safety: localtime_r fills the tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = now;
    unsafe { libc::localtime_r(&t, &mut tm) };
    PathBuf::from(format!(
        "agentsight-{:04}{:02}{:02}-{:02}{:02}{:02}.db",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

/// One-paragraph summary printed at the end of a recording.
pub fn summary_text(o: &RecordOutcome) -> String {
    let mut s = format!(
        "agentsight: recorded {} events from {} processes in {} → {}\n",
        o.events,
        o.processes,
        fmt_elapsed(o.elapsed),
        o.output.display()
    );
    s.push_str(&format!(
        "agentsight: lost {} events (kernel ring buffer), {} missing by sequence; ended: {}\n",
        o.lost, o.gap_missing, o.end_reason
    ));
    if o.not_stored > 0 {
        s.push_str(&format!(
            "agentsight: {} events not stored: the capture reached --max-size (counted as loss)\n",
            o.not_stored
        ));
    }
    if let Some(st) = o.command_status {
        s.push_str(&format!("agentsight: command exit status {st}\n"));
    }
    s.push_str(&format!(
        "agentsight: recorder used {:.2} s CPU, peak {:.1} MiB\n",
        o.cpu.as_secs_f64(),
        o.peak_rss_kib as f64 / 1024.0
    ));
    if let Some((runs, time)) = o.program_runs {
        s.push_str(&format!(
            "agentsight: kernel programs ran {runs} times, {:.1} ms in all\n",
            time.as_secs_f64() * 1e3
        ));
    }
    for f in &o.failed_programs {
        s.push_str(&format!("agentsight: not attached: {f}\n"));
    }
    if let Some(e) = &o.store_error {
        s.push_str(&format!(
            "agentsight: storing stopped early: {e} (what was written before stays readable)\n"
        ));
    }
    if let Some(full) = &o.disk_full {
        s.push_str(&format!(
            "agentsight: storing stopped: {} (counted as loss; what was stored before stays readable)\n",
            full.message()
        ));
    }
    s
}
