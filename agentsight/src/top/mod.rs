//! `top`: the live model behind `agentsight top` — which agent sessions are
//! working, waiting for their human, stalled, rate-limited or locked out,
//! right now.
//!
//! Candidates come from the sessions crate's discovery (all four providers,
//! any `--home`); their states from `sessions::live` (the one copy of the
//! state rules: tail facts, the `Tracker`, the desktop bookkeeping join).
//! This module keeps them current: it watches provider **directories**
//! (`watch`), re-reads only the tail of a transcript that changed (`model`),
//! re-classifies on a clock tick, and falls back to polling — saying so in
//! every snapshot (`degraded: "polling"`) — when inotify runs out of watches
//! or its queue overflows, so states are never stale silently.
//!
//! The library prints nothing; the CLI renders [`Snapshot`]s as a full-screen
//! UI, plain text or JSON.

mod model;
mod watch;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::sessions::Provider;
use crate::sessions::live::{LiveState, ProcessTruth, Thresholds};

pub use model::{LiveModel, ToolLine};
pub use watch::WatchMsg;

/// Errors of the live model (the CLI turns them into one line).
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    #[error("{0}")]
    Sessions(#[from] crate::sessions::SessionError),
    #[error("cannot start the directory watcher: {0}")]
    Watch(String),
}

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct TopOptions {
    /// Home to read (`--home`); `None`: the invoking user's. Absolute (the
    /// CLI makes `--home` so): watch events name absolute paths, and a
    /// relative root would never match them. So is `desktop_dir`.
    pub home: Option<PathBuf>,
    /// The Claude desktop app's data directory; `None`: `<home>/.config/Claude`.
    pub desktop_dir: Option<PathBuf>,
    /// State thresholds (the defaults, or scaled by a test-only flag).
    pub thresholds: Thresholds,
    /// Watch by polling from the start (the baseline of the benchmark, and
    /// for file systems without inotify).
    pub polling: bool,
    /// How often polling re-stats the candidates.
    pub poll_interval: Duration,
    /// How often states are re-derived from the clock (ages cross thresholds
    /// without any file changing).
    pub tick: Duration,
}

impl Default for TopOptions {
    fn default() -> Self {
        TopOptions {
            home: None,
            desktop_dir: None,
            thresholds: Thresholds::default(),
            polling: false,
            poll_interval: Duration::from_secs(1),
            tick: Duration::from_secs(1),
        }
    }
}

/// Which rows a snapshot lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowFilter {
    /// Only this provider.
    pub provider: Option<Provider>,
    /// Also idle, archived and hidden (subagent, `codex exec`) sessions.
    pub all: bool,
}

/// Live kernel columns of the process tree bound to a session (root only).
/// `None` in a row means "not measured" (unprivileged), never zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct KernelColumns {
    pub processes_alive: u64,
    pub execs_per_s: f64,
    pub files_written: u64,
    pub connections: u64,
    pub lost_events: u64,
    /// The columns count kernel events up to this CLOCK_MONOTONIC time (ns):
    /// the same figures can be recomputed on a `--record` capture.
    pub as_of_mono_ns: u64,
}

/// What a kernel source knows about one session: its columns and whether its
/// processes still run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelSession {
    pub columns: KernelColumns,
    pub process: ProcessTruth,
}

/// Live kernel facts per session id (the CLI adapts `KernelWatch` to it, so
/// this module needs no part of the capture pipeline).
pub trait KernelSource: Send {
    /// The bound sessions' columns now; an error (the recording died) is
    /// shown, never taken for "nothing measured".
    fn sessions(&mut self) -> Result<HashMap<String, KernelSession>, String>;
}

/// Why a row is hidden by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hidden {
    /// Archived in the Claude desktop app.
    Archived,
    /// A subagent's transcript (Codex thread spawn, Gemini subagent chat).
    Subagent,
    /// A `codex exec` run (automation, not a person's session).
    Exec,
}

/// Where a row's title came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TitleSource {
    Desktop,
    FirstPrompt,
    Cwd,
    None,
}

/// Token totals of a session as its transcript reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Prompt tokens, cached ones included.
    pub input: u64,
    pub output: u64,
}

/// One session, as `top` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub provider: Provider,
    pub session_id: String,
    pub state: LiveState,
    pub title: Option<String>,
    pub title_source: TitleSource,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// The activity clock (transcript record or desktop `lastActivityAt`,
    /// else the file's mtime), RFC 3339.
    pub last_activity: Option<String>,
    /// Seconds since `last_activity` at the snapshot's time.
    pub age_s: Option<u64>,
    /// `null` when the transcript records no usage (Cursor).
    pub tokens: Option<Tokens>,
    /// Set when the row is hidden by default.
    pub hidden: Option<Hidden>,
    /// Reset time of a rate limit, when the transcript says it.
    pub resets_at: Option<String>,
    /// `null` unless kernel programs watch this session (root).
    pub kernel: Option<KernelColumns>,
    pub path: PathBuf,
}

/// How many sessions a snapshot leaves out, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NotListed {
    pub idle: u64,
    pub hidden: u64,
    pub other_provider: u64,
    /// Recent transcripts whose tail could not be read (not the home
    /// owner's file, or unreadable): their state is unknown, not idle.
    pub unreadable: u64,
}

/// Why a session is not listed (the `hidden_reasons` of a snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotListedReason {
    Idle,
    Archived,
    Subagent,
    Exec,
    OtherProvider,
    /// The transcript belongs to another user than the home's owner (e.g.
    /// an agent run as root in a user's home): never read, by design.
    NotOwner,
    /// The transcript could not be opened or read (permissions, a race).
    Unreadable,
}

/// One reason with how many sessions it leaves out and the first few of
/// their transcripts (sorted by path, so snapshots compare stably).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    pub reason: NotListedReason,
    pub count: u64,
    pub paths: Vec<PathBuf>,
}

/// Paths kept per reason in `hidden_reasons`.
pub const REASON_PATHS: usize = 3;

/// Everything `top` knows at one instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    /// RFC 3339 time of the snapshot.
    pub at: String,
    /// `"polling"` once file watching gave up (watch limit, queue overflow)
    /// or polling was asked for; `null` while inotify watches everything.
    pub degraded: Option<&'static str>,
    /// Why watching degraded, when it did.
    pub degraded_reason: Option<String>,
    /// Directories watched (0 while polling).
    pub watched_dirs: u64,
    /// Transcripts known (every provider, hidden and idle included).
    pub candidates: u64,
    /// Kernel columns are measured (root with kernel programs loaded).
    pub kernel: bool,
    /// Why kernel columns stopped being measured although they were asked
    /// for (the live recording failed); `null` otherwise.
    pub kernel_error: Option<String>,
    pub rows: Vec<Row>,
    pub not_listed: NotListed,
    /// Every reason that leaves sessions out, in a fixed order, with counts
    /// and example paths (reasons with no session are omitted).
    pub hidden_reasons: Vec<ReasonCount>,
    /// Transcript lines that could not be parsed in the tails read so far
    /// (counted, never fatal), and desktop files skipped as corrupt.
    pub skipped_lines: u64,
    pub desktop_skipped: u64,
}

impl Snapshot {
    /// Equal except for the clock: what a `--json` stream emits a line for.
    pub fn same_content(&self, o: &Snapshot) -> bool {
        let strip = |s: &Snapshot| {
            let mut s = s.clone();
            s.at.clear();
            for r in &mut s.rows {
                r.age_s = None;
            }
            s
        };
        strip(self) == strip(o)
    }
}

pub use watch::LiveTop;
