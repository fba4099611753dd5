//! The kernel side of `agentsight top`: a recording of every agent on the
//! machine (as `record --agent auto` makes one) that is read while it runs.
//!
//! [`KernelWatch::start`] runs [`record::run`] on its own thread, with a
//! [`record::LiveLink`] to stop it and to share its `/proc` fd evidence; the
//! capture goes to `--record FILE` or to a private temporary file removed at
//! [`KernelWatch::stop`]. [`KernelWatch::snapshot`] reads the capture as it
//! grows (`store::LiveCapture`: read-only, beside the writer), binds its process
//! trees to sessions with the matching ladder (`matching::match_trees`, the
//! same inputs record's final binding uses) and counts, per bound session,
//! what its trees did up to the snapshot's `as_of`. [`KernelWatch::activity`]
//! runs `correlate` read-only on the live capture for one session.
//!
//! Nothing here is a second pipeline: loading, adoption (agents already
//! running at start, new ones within 250 ms), loss accounting and the final
//! binding are record's own.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, atomic::Ordering},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use serde::Serialize;

use crate::{
    clock::{Anchors, rfc3339_ns},
    correlate::{self, BoundTree, CaptureView, SessionSource, ToolReport},
    matching::{self, FallbackSession, ProcTable, SessionKey, Tree, match_trees},
    privileges,
    procinfo::AgentName,
    record::{self, LiveLink, Notice, RecordOptions, RecordOutcome},
    sessions::{Provider, live::ProcessTruth},
    store::{CaptureReader, LiveCapture, StoreError, read::TreeCounts},
};

/// Window over which `execs_per_s` is averaged, ending at `as_of`.
pub const EXEC_RATE_WINDOW: Duration = Duration::from_secs(10);
/// Stored events younger than this (relative to the newest stored one) are
/// not counted yet: the ring is drained in batches, and an event can reach
/// the capture a few ms after a younger one from another CPU. Counting only
/// up to `newest − SETTLE` makes a snapshot's figures final: the finished
/// capture gives the same figures for the same `as_of`.
pub const SETTLE: Duration = Duration::from_millis(100);
/// Events older than this before a stored clock anchor were stored before
/// it: the reader drains the ring every 20 ms and hands each batch to the
/// writer's queue, which the anchor joins behind them. The margin covers a
/// reader that is late by an order of magnitude.
pub const DRAINED_BEFORE_ANCHOR: Duration = Duration::from_millis(250);
/// How long [`KernelWatch::start`] waits for the kernel programs to load.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the cwd-fallback candidates are re-read from the home.
const FALLBACK_REFRESH: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum KernelWatchError {
    #[error(transparent)]
    Privilege(#[from] privileges::PrivilegeError),
    #[error(transparent)]
    Creds(#[from] privileges::CredsError),
    #[error(transparent)]
    Record(#[from] record::RecordError),
    #[error("cannot make a temporary capture: {0}")]
    Temp(std::io::Error),
    #[error("cannot start the kernel watch thread: {0}")]
    Thread(std::io::Error),
    #[error("the kernel watch stopped: {0}")]
    Stopped(String),
    #[error("kernel programs not loaded within {0:?}")]
    StartTimeout(Duration),
    #[error("{path}: {reason}")]
    Query { path: String, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Correlate(#[from] correlate::CorrelateError),
    #[error("session {0} is not bound to any process tree")]
    NotBound(String),
    #[error("session {id}: {reason}")]
    Session { id: String, reason: String },
}

/// What to watch and where to keep it.
#[derive(Clone, Debug)]
pub struct KernelWatchOptions {
    /// The home whose sessions are bound by cwd when no path evidence names
    /// them (`top --home`); `None`: path evidence only.
    pub home: Option<PathBuf>,
    /// `top --record FILE`: keep everything watched as a normal capture
    /// (bound and correlated at stop). `None`: a temporary capture, deleted
    /// at stop.
    pub record_to: Option<PathBuf>,
    /// Under sudo, watch other users' agents too (as `record --all-users`).
    pub all_users: bool,
    /// Ring buffer size (bytes), as `record --ring-mib`.
    pub ring_bytes: u32,
}

impl KernelWatchOptions {
    pub fn new(home: Option<PathBuf>) -> Self {
        Self {
            home,
            record_to: None,
            all_users: false,
            ring_bytes: 16 * 1024 * 1024,
        }
    }
}

/// The kernel columns of one bound session, counted over its trees'
/// processes up to the snapshot's `as_of` (definitions in docs/top-kernel.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionColumns {
    pub provider: Provider,
    pub session_id: String,
    /// Pids of the roots of the trees bound to it.
    pub root_pids: Vec<u32>,
    /// The columns count events up to this monotonic time (the snapshot's).
    pub as_of_mono_ns: u64,
    /// Processes of its trees alive at `as_of`.
    pub processes_alive: u64,
    /// Execs in the `EXEC_RATE_WINDOW` before `as_of`, per second.
    pub execs_per_s: f64,
    /// Distinct paths its processes opened for writing, created or
    /// truncated (successfully) since the watch began.
    pub files_written: u64,
    /// IPv4/IPv6 connects (succeeded or in progress) since the watch began.
    pub connections: u64,
    /// Events the kernel could not deliver, for the whole capture: loss is
    /// counted per kind, not per process, so it cannot be attributed.
    pub lost_events: u64,
    /// Exited (nothing alive), Alive, or RunningTools (see `truth_of`).
    pub process: ProcessTruth,
}

/// One look at the live capture.
#[derive(Clone, Debug, Default, Serialize)]
pub struct KernelSnapshot {
    /// Events up to this monotonic time are counted (`None`: none stored yet).
    pub as_of_mono_ns: Option<u64>,
    /// The same instant in UTC (RFC 3339), from the capture's anchors.
    pub as_of: Option<String>,
    /// Capture-wide loss so far (kernel reserve failures, per kind summed).
    pub lost_events: u64,
    /// Processes the capture holds (tracked since the watch began).
    pub processes: u64,
    /// Per bound session id.
    pub sessions: BTreeMap<String, SessionColumns>,
    /// Trees no session could be bound to.
    pub unbound_trees: usize,
    /// Programs that failed to attach, and other warnings from the recorder.
    pub warnings: Vec<String>,
}

/// How the watch ended.
#[derive(Debug)]
pub struct KernelWatchStopped {
    /// The kept capture (`record_to`), bound and correlated; `None`: the
    /// temporary capture was deleted.
    pub kept: Option<PathBuf>,
    pub outcome: RecordOutcome,
}

/// What the recording thread tells the watch.
#[derive(Default)]
struct Shared {
    /// The first status line came: programs loaded, running agents adopted.
    running: bool,
    warnings: Vec<String>,
}

/// Cwd-fallback candidates, re-read every `FALLBACK_REFRESH`.
struct Fallback {
    read_at: Option<Instant>,
    sessions: Vec<FallbackSession>,
}

/// A running kernel watch. Root only.
pub struct KernelWatch {
    capture: PathBuf,
    kept: bool,
    /// The temporary directory of an unkept capture.
    temp: Option<tempfile::TempDir>,
    link: LiveLink,
    home: Option<PathBuf>,
    thread: Option<JoinHandle<Result<RecordOutcome, record::RecordError>>>,
    shared: Arc<Mutex<Shared>>,
    live: Mutex<Option<LiveCapture>>,
    fallback: Mutex<Fallback>,
}

impl KernelWatch {
    /// Loads the kernel programs (as `record --agent auto`) and returns once
    /// they run and the agents already running are adopted.
    pub fn start(opts: &KernelWatchOptions) -> Result<KernelWatch, KernelWatchError> {
        privileges::check_root()?;
        let creds = privileges::FileCreds::invoking_user();
        let (capture, temp) = match &opts.record_to {
            Some(p) => (p.clone(), None),
            None => {
                // Made by the caller (under sudo), as record creates the
                // capture inside it with the caller's credentials.
                let _as_user = privileges::AsUser::maybe(creds.as_ref())?;
                let dir = tempfile::Builder::new()
                    .prefix("agentsight-top-")
                    .tempdir()
                    .map_err(KernelWatchError::Temp)?;
                (dir.path().join("live.db"), Some(dir))
            }
        };
        let link = LiveLink {
            homes: opts.home.iter().cloned().collect(),
            ..LiveLink::default()
        };
        let shared = Arc::new(Mutex::new(Shared::default()));
        let thread = spawn_recording(opts.clone(), capture.clone(), link.clone(), shared.clone())?;
        let mut watch = KernelWatch {
            capture,
            kept: opts.record_to.is_some(),
            temp,
            link,
            home: opts.home.clone(),
            thread: Some(thread),
            shared,
            live: Mutex::new(None),
            fallback: Mutex::new(Fallback {
                read_at: None,
                sessions: Vec::new(),
            }),
        };
        watch.wait_running()?;
        Ok(watch)
    }

    /// The capture being written (the `--record` file, or the temporary one).
    pub fn capture_path(&self) -> &Path {
        &self.capture
    }

    /// Waits for the first status line of the recording (it comes once the
    /// programs run and the running agents are adopted), or its failure.
    fn wait_running(&mut self) -> Result<(), KernelWatchError> {
        let began = Instant::now();
        loop {
            if self.shared.lock().map(|s| s.running).unwrap_or(false) {
                return Ok(());
            }
            if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                return match self.thread.take().map(|t| t.join()) {
                    Some(Ok(Err(e))) => Err(e.into()),
                    _ => Err(KernelWatchError::Stopped(
                        "the recording ended before it started".into(),
                    )),
                };
            }
            if began.elapsed() > START_TIMEOUT {
                self.link.stop.store(true, Ordering::Release);
                return Err(KernelWatchError::StartTimeout(START_TIMEOUT));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Per bound session, the kernel columns up to `as_of` (see
    /// [`KernelSnapshot`]). Reads the capture; changes nothing.
    pub fn snapshot(&self) -> Result<KernelSnapshot, KernelWatchError> {
        let warnings = self
            .shared
            .lock()
            .map(|s| s.warnings.clone())
            .unwrap_or_default();
        if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
            return Err(KernelWatchError::Stopped(
                "the recording is not running".into(),
            ));
        }
        let fd_obs = self.fd_observations();
        // The anchor asked for now marks how far the next snapshot may count.
        self.link.anchor_request.store(true, Ordering::Release);
        self.with_capture(|cap| {
            let fallback = self.fallback_sessions(cap);
            let mut snap = snapshot_of(cap, &fd_obs, &fallback)?;
            snap.warnings = warnings;
            Ok(snap)
        })
    }

    /// The last `last` tool calls of session `session_id`, each with the
    /// processes and file/network activity correlate attributes to it on the
    /// live capture (read-only). The session is parsed from its transcript.
    pub fn activity(
        &self,
        session_id: &str,
        last: usize,
    ) -> Result<SessionActivity, KernelWatchError> {
        let fd_obs = self.fd_observations();
        self.with_capture(|cap| {
            let fallback = self.fallback_sessions(cap);
            activity_of(cap, &fd_obs, &fallback, session_id, last)
        })
    }

    /// Ends the recording: the capture is finished (and, kept, bound and
    /// correlated as `record` does) or deleted.
    pub fn stop(mut self) -> Result<KernelWatchStopped, KernelWatchError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<KernelWatchStopped, KernelWatchError> {
        if let Ok(mut c) = self.live.lock() {
            c.take();
        }
        self.link.stop.store(true, Ordering::Release);
        let joined = self.thread.take().map(|t| t.join());
        let kept = self.kept.then(|| self.capture.clone());
        // Dropping the directory removes the temporary capture.
        self.temp.take();
        match joined {
            Some(Ok(Ok(outcome))) => Ok(KernelWatchStopped { kept, outcome }),
            Some(Ok(Err(e))) => Err(e.into()),
            Some(Err(_)) => Err(KernelWatchError::Stopped(
                "the recording thread panicked".into(),
            )),
            None => Err(KernelWatchError::Stopped("already stopped".into())),
        }
    }

    /// Runs `f` in one read transaction of the (lazily opened) live
    /// capture: every query of a snapshot sees the same committed batches.
    fn with_capture<T>(
        &self,
        f: impl FnOnce(CaptureReader) -> Result<T, KernelWatchError>,
    ) -> Result<T, KernelWatchError> {
        let qe = |reason: String| KernelWatchError::Query {
            path: self.capture.display().to_string(),
            reason,
        };
        let mut guard = self
            .live
            .lock()
            .map_err(|_| qe("connection lock poisoned".into()))?;
        if guard.is_none() {
            *guard = Some(LiveCapture::open(&self.capture)?);
        }
        let Some(live) = guard.as_ref() else {
            return Err(qe("no connection".into()));
        };
        live.read(f)
    }

    /// The `/proc` fd evidence record gathered so far.
    fn fd_observations(&self) -> Vec<matching::FdObservation> {
        self.link
            .fd_observations
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// The home's sessions active during the capture, as cwd-fallback
    /// candidates (record's own rule), refreshed every 10 s: the capture's
    /// anchors, which bound "during", move on every 10 s too.
    fn fallback_sessions(&self, cap: CaptureReader) -> Vec<FallbackSession> {
        let Ok(mut fb) = self.fallback.lock() else {
            return Vec::new();
        };
        if fb.read_at.is_none_or(|t| t.elapsed() >= FALLBACK_REFRESH) {
            let anchors = cap.anchors().unwrap_or_default();
            let homes: Vec<PathBuf> = self.home.iter().cloned().collect();
            let mut notes = Vec::new();
            fb.sessions = crate::enrich::fallback_sessions(&anchors, &homes, &mut notes);
            for n in notes {
                tracing::warn!("{n}");
            }
            fb.read_at = Some(Instant::now());
        }
        fb.sessions.clone()
    }
}

impl Drop for KernelWatch {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}

/// `record --agent auto` with the watch's options.
fn record_options(opts: &KernelWatchOptions, output: &Path, live: LiveLink) -> RecordOptions {
    RecordOptions {
        output: output.to_path_buf(),
        command: Vec::new(),
        pids: Vec::new(),
        containers: Vec::new(),
        container_sessions: None,
        agent: Some(AgentName::Auto),
        user: None,
        env: Vec::new(),
        duration: None,
        ring_bytes: opts.ring_bytes,
        all_users: opts.all_users,
        // A kept capture is a normal one: with its transcripts.
        copy_transcripts: opts.record_to.is_some(),
        transcript_budget: crate::enrich::DEFAULT_TRANSCRIPT_BUDGET,
        program_stats: false,
        wire: false,
        max_bytes: None,
        start_meta: vec![(crate::store::meta::key::STARTED_BY.into(), "top".into())],
        live: Some(live),
        enforce: None,
    }
}

/// Runs the recording on its own thread (its options are built there: they
/// may hold container sources that stay on one thread).
fn spawn_recording(
    opts: KernelWatchOptions,
    output: PathBuf,
    link: LiveLink,
    shared: Arc<Mutex<Shared>>,
) -> Result<JoinHandle<Result<RecordOutcome, record::RecordError>>, KernelWatchError> {
    std::thread::Builder::new()
        .name("kernel-watch".into())
        .spawn(move || {
            let ropts = record_options(&opts, &output, link);
            record::run(&ropts, &mut |n| {
                let Ok(mut s) = shared.lock() else { return };
                match n {
                    Notice::Status { .. } => s.running = true,
                    Notice::Warning(w) | Notice::CleanupFailed(w) => s.warnings.push(w),
                    Notice::SkippedOtherUsers(n) => {
                        s.warnings.retain(|w| !w.starts_with("other users'"));
                        s.warnings.push(format!(
                            "other users' processes left out: {n} (--all-users watches them)"
                        ));
                    }
                    Notice::Stopped | Notice::Wire(_) | Notice::Enforced(_) => {}
                }
            })
        })
        .map_err(KernelWatchError::Thread)
}

/// The live binding: the capture's trees matched to sessions with the same
/// ladder and inputs as record's final binding.
fn live_trees(
    cap: CaptureReader,
    fd_obs: &[matching::FdObservation],
    fallback: &[FallbackSession],
) -> Result<(ProcTable, Anchors, Vec<Tree>, Vec<matching::PathEvidence>), StoreError> {
    let procs = ProcTable::load(cap)?;
    let anchors = cap.anchors()?;
    let evidence = crate::enrich::path_evidence(cap, &procs, &anchors, fd_obs)?;
    let trees = match_trees(&procs, &anchors, &evidence, fallback);
    Ok((procs, anchors, trees, evidence))
}

fn snapshot_of(
    cap: CaptureReader,
    fd_obs: &[matching::FdObservation],
    fallback: &[FallbackSession],
) -> Result<KernelSnapshot, KernelWatchError> {
    let (procs, anchors, trees, evidence) = live_trees(cap, fd_obs, fallback)?;
    let lost = cap.loss_total()?;
    let mut snap = KernelSnapshot {
        lost_events: lost,
        processes: procs.procs.len() as u64,
        unbound_trees: trees.iter().filter(|t| t.bindings.is_empty()).count(),
        ..KernelSnapshot::default()
    };
    let Some(as_of) = settled_until(cap, &anchors)? else {
        return Ok(snap);
    };
    snap.as_of_mono_ns = Some(as_of);
    snap.as_of = (!anchors.0.is_empty()).then(|| rfc3339_ns(anchors.wall_ns(as_of).max(0) as u64));
    for (key, roots) in roots_by_session(&trees) {
        let members = members_of(&procs, &roots, as_of);
        let ids: Vec<i64> = members.iter().map(|&i| procs.procs[i].id).collect();
        let counts = cap.tree_counts(&ids, as_of, EXEC_RATE_WINDOW.as_nanos() as u64)?;
        let first_write = evidence
            .iter()
            .filter(|e| e.key == key && roots.iter().any(|&r| procs.subtree(r).contains(&e.proc)))
            .map(|e| e.mono_ns)
            .min();
        snap.sessions.insert(
            key.1.clone(),
            columns(
                &key,
                &procs,
                &roots,
                &members,
                &counts,
                as_of,
                first_write,
                lost,
            ),
        );
    }
    Ok(snap)
}

/// The time up to which the capture is complete: the newest stored event
/// less `SETTLE` while events flow, and, when they stop (the agents are
/// idle or gone), the newest stored anchor less `DRAINED_BEFORE_ANCHOR`
/// (every snapshot asks for a fresh anchor), so exits are counted even
/// when nothing follows them.
fn settled_until(cap: CaptureReader, anchors: &Anchors) -> Result<Option<u64>, StoreError> {
    let by_events = cap
        .newest_event_mono_ns()?
        .map(|n| n.saturating_sub(SETTLE.as_nanos() as u64));
    let by_anchor = anchors
        .0
        .iter()
        .map(|a| a.0)
        .max()
        .map(|m| m.saturating_sub(DRAINED_BEFORE_ANCHOR.as_nanos() as u64));
    Ok(by_events.max(by_anchor))
}

/// Each bound session's tree roots (a session resumed in a new process has
/// several trees).
fn roots_by_session(trees: &[Tree]) -> BTreeMap<SessionKey, Vec<usize>> {
    let mut out: BTreeMap<SessionKey, Vec<usize>> = BTreeMap::new();
    for t in trees {
        for b in &t.bindings {
            let roots = out.entry(b.key.clone()).or_default();
            if !roots.contains(&t.root) {
                roots.push(t.root);
            }
        }
    }
    out
}

/// The processes of the trees under `roots` that had started by `as_of`.
fn members_of(procs: &ProcTable, roots: &[usize], as_of: u64) -> Vec<usize> {
    let mut v: Vec<usize> = roots
        .iter()
        .flat_map(|&r| procs.subtree(r))
        .filter(|&i| procs.procs[i].start_mono_ns <= as_of)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn alive_at(p: &matching::Proc, as_of: u64) -> bool {
    p.start_mono_ns <= as_of && p.end_mono_ns.is_none_or(|e| e > as_of)
}

#[allow(clippy::too_many_arguments)]
fn columns(
    key: &SessionKey,
    procs: &ProcTable,
    roots: &[usize],
    members: &[usize],
    counts: &TreeCounts,
    as_of: u64,
    first_write: Option<u64>,
    lost: u64,
) -> SessionColumns {
    let alive = members
        .iter()
        .filter(|&&i| alive_at(&procs.procs[i], as_of))
        .count() as u64;
    SessionColumns {
        provider: key.0,
        session_id: key.1.clone(),
        root_pids: roots.iter().map(|&r| procs.procs[r].pid).collect(),
        as_of_mono_ns: as_of,
        processes_alive: alive,
        execs_per_s: counts.execs_in_window as f64 / EXEC_RATE_WINDOW.as_secs_f64(),
        files_written: counts.files_written,
        connections: counts.connections,
        lost_events: lost,
        process: truth_of(procs, roots, members, as_of, first_write),
    }
}

/// Exited when nothing of the trees is alive; RunningTools when a process
/// that is not an agent runtime, started after the session first wrote its
/// transcript (so during the conversation, for a call), is alive; else
/// Alive. Start-up helpers (MCP servers spawned before the first prompt)
/// are not tools by this rule; ones spawned later are (docs/top-kernel.md).
fn truth_of(
    procs: &ProcTable,
    roots: &[usize],
    members: &[usize],
    as_of: u64,
    first_write: Option<u64>,
) -> ProcessTruth {
    let alive: Vec<&matching::Proc> = members
        .iter()
        .filter(|i| !roots.contains(i))
        .map(|&i| &procs.procs[i])
        .filter(|p| alive_at(p, as_of))
        .collect();
    let roots_alive = roots.iter().any(|&r| alive_at(&procs.procs[r], as_of));
    if !roots_alive && alive.is_empty() {
        return ProcessTruth::Exited;
    }
    let tool = first_write.is_some_and(|w| {
        alive
            .iter()
            .any(|p| p.start_mono_ns > w && AgentName::Auto.recognise(&p.argv, None).is_none())
    });
    if tool {
        ProcessTruth::RunningTools
    } else {
        ProcessTruth::Alive
    }
}

fn activity_of(
    cap: CaptureReader,
    fd_obs: &[matching::FdObservation],
    fallback: &[FallbackSession],
    session_id: &str,
    last: usize,
) -> Result<SessionActivity, KernelWatchError> {
    let (_, _, trees, evidence) = live_trees(cap, fd_obs, fallback)?;
    let bound: Vec<(SessionKey, &Tree, &matching::Binding)> = trees
        .iter()
        .flat_map(|t| t.bindings.iter().map(move |b| (b.key.clone(), t, b)))
        .filter(|(k, _, _)| k.1 == session_id)
        .collect();
    let Some((key, _, _)) = bound.first() else {
        return Err(KernelWatchError::NotBound(session_id.to_string()));
    };
    let path = evidence
        .iter()
        .find(|e| &e.key == key && !e.path.contains("/subagents/"))
        .map(|e| PathBuf::from(&e.path))
        .or_else(|| {
            fallback
                .iter()
                .find(|f| &f.key == key)
                .map(|f| f.path.clone())
        })
        .ok_or_else(|| KernelWatchError::NotBound(session_id.to_string()))?;
    // The id names the session in a store holding many (opencode's database).
    let session = crate::sessions::parse_session_in(
        key.0,
        &path,
        Some(&key.1),
        &crate::sessions::Bounds::default(),
        &mut crate::sessions::ParseBatch::default(),
    )
    .map_err(|e| KernelWatchError::Session {
        id: session_id.to_string(),
        reason: e.to_string(),
    })?;
    let view = CaptureView::load(cap)?;
    let trees: Vec<BoundTree> = bound
        .iter()
        .map(|(_, t, b)| BoundTree {
            root: t.root,
            evidence: b.evidence,
            evidence_count: b.evidence_count,
            evidence_path: b.evidence_path.clone(),
            from_mono_ns: b.from_mono_ns,
            to_mono_ns: b.to_mono_ns,
        })
        .collect();
    // The servers are stored only at the recording's end: identified now,
    // as enrichment will, so the detail shows a server's activity under its
    // MCP calls while the session runs.
    let servers = view.mcp_servers_now(&session, &trees)?;
    let report = correlate::correlate_with(
        &view,
        &session,
        SessionSource::Home,
        &trees,
        Vec::new(),
        &servers,
    )?;
    let mut tools: Vec<ToolReport> = report.prompts.into_iter().flat_map(|p| p.tools).collect();
    let skip = tools.len().saturating_sub(last);
    Ok(SessionActivity {
        tools: tools.split_off(skip),
        runtime: report.runtime_activity,
        unexplained: report.flags.observed_not_claimed,
    })
}

/// What correlate made of one session on the live capture (`top`'s
/// detail): its last calls with their attributed activity, and what
/// happened outside every call, kept apart as correlate keeps it.
pub struct SessionActivity {
    pub tools: Vec<ToolReport>,
    /// The agent runtime's own activity outside every call, by program
    /// (never flagged).
    pub runtime: Vec<correlate::RuntimeGroup>,
    /// Activity no call and not the runtime accounts for (flagged).
    pub unexplained: Vec<correlate::Activity>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{
        Capture,
        synthetic::{EventRow, ProcessRow, SyntheticCapture},
    };

    const ID: &str = "aaaaaaaa-0000-4000-8000-0000000000f3";
    /// Monotonic 1 s is wall 2027-01-15T08:00:00Z.
    const S: i64 = 1_000_000_000;
    const WALL0: i64 = 1_800_000_000_000_000_000;

    /// A Claude Code transcript line at 08:00:0`second`.
    fn line(second: u32, kind: &str, message: serde_json::Value) -> String {
        serde_json::json!({
            "type": kind, "uuid": format!("u{second}"), "sessionId": ID, "cwd": "/w",
            "timestamp": format!("2027-01-15T08:00:0{second}.000Z"), "message": message,
        })
        .to_string()
    }

    /// Claude Code (pid 100) writes its transcript under `home` and runs
    /// the configured filesystem server `fs` (pid 101); inside the call
    /// `mcp__fs__write_file` of /w/a.txt (08:00:02 → 08:00:03) the server
    /// writes /w/a.txt; nothing is stored but processes and events, as
    /// while the recording runs.
    fn live_capture(dir: &Path) -> (PathBuf, PathBuf) {
        let home = dir.join("home");
        let projects = home.join(".claude/projects/-w");
        std::fs::create_dir_all(&projects).unwrap();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"mcpServers": {"fs": {"command": "node",
                "args": ["/opt/server-filesystem/dist/index.js", "/w"]}}}"#,
        )
        .unwrap();
        let transcript = projects.join(format!("{ID}.jsonl"));
        let args = serde_json::json!({"path": "/w/a.txt", "content": "hi\n"});
        let lines = [
            line(
                1,
                "user",
                serde_json::json!({"role": "user", "content": "write a.txt"}),
            ),
            line(
                2,
                "assistant",
                serde_json::json!({"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "tool_use", "id": "toolu_1",
                                 "name": "mcp__fs__write_file", "input": args}]}),
            ),
            line(
                3,
                "user",
                serde_json::json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "ok"}]}]}),
            ),
        ];
        std::fs::write(&transcript, lines.join("\n") + "\n").unwrap();
        let db = dir.join("live.db");
        let mut cap = SyntheticCapture::create(&db, "live.db");
        cap.anchor("start", S, WALL0);
        let server = ["node", "/opt/server-filesystem/dist/index.js", "/w"];
        for (id, parent, argv) in [
            (1, None, &["claude", "-p", "write a.txt"][..]),
            (2, Some((1, 100)), &server[..]),
        ] {
            cap.process(&ProcessRow {
                id,
                pid: 99 + id,
                start_mono_ns: S + id,
                parent,
                comm: argv[0],
                argv,
                cwd: Some("/w"),
                exec_count: 1,
                ..Default::default()
            });
        }
        let transcript_s = transcript.display().to_string();
        for (mono, pid, process_id, path) in [
            (S + S / 2, 100, 1, transcript_s.as_str()),
            (2 * S + S / 2 + S, 101, 2, "/w/a.txt"),
        ] {
            cap.event(&EventRow {
                mono_ns: mono,
                wall_ns: WALL0 + mono - S,
                kind: "openat",
                pid,
                ppid: if pid == 100 { 1 } else { 100 },
                process_id: Some(process_id),
                path: Some(path),
                flags: Some("write,create"),
                ..Default::default()
            });
        }
        (db, transcript)
    }

    /// `top`'s detail of a running session: its MCP call names its server
    /// (identified now from the session's home, as enrichment will at the
    /// end) and the server's write inside the call is the call's.
    #[test]
    fn a_live_mcp_call_shows_its_server_s_activity() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = live_capture(dir.path());
        let cap = Capture::open(&db).unwrap();
        let found = activity_of(cap.reader(), &[], &[], ID, 5).unwrap();
        assert_eq!(found.tools.len(), 1);
        let call = &found.tools[0];
        let mcp = call.mcp.as_ref().expect("the call's server");
        assert_eq!(
            (mcp.server.as_str(), mcp.tool.as_deref(), mcp.pid),
            ("fs", Some("write_file"), Some(101))
        );
        let acts: Vec<(u32, &str, Option<&str>, Option<correlate::Reason>)> = call
            .activity
            .iter()
            .map(|a| (a.pid, a.op.as_str(), a.path.as_deref(), a.reason))
            .collect();
        assert_eq!(
            acts,
            vec![(
                101,
                "write",
                Some("/w/a.txt"),
                Some(correlate::Reason::McpServer)
            )]
        );
        assert_eq!(found.unexplained.len(), 0);
    }
}
