//! Live session states: what each transcript says *now* (working, your turn,
//! stalled, rate-limited, auth required, idle), from the tail of the file,
//! its times, the process truth the caller supplies, and what was seen
//! before. The rules are written down in `docs/live-states.md`.
//!
//! Two steps, kept apart so each is testable alone:
//! - [`read_tail`] / [`read_tail_bytes`] turn the last 128 KiB (≤ 200 lines)
//!   of one transcript into [`TailFacts`] (pure per provider, no clock);
//! - [`Tracker::classify`] turns facts + times + process truth into a
//!   [`LiveState`] with an injected clock, remembering per path whether the
//!   session was seen working (only such a session can become stalled).
//!
//! Everything is read from local files; nothing here touches the network.

mod classify;
pub mod desktop;
pub mod registry;
mod tail;

use std::path::PathBuf;
use std::time::Duration;

/// The time type of this module (jiff's), re-exported so callers need no
/// jiff dependency of their own.
pub use jiff::Timestamp;
use serde::Serialize;

use crate::{Provider, SessionError};

pub use classify::{Tracker, activity_time};
pub use tail::{read_tail, read_tail_bytes};

/// The live state of one session. Declaration order is not the urgency
/// order: use [`LiveState::urgency`] (or `Ord`, which follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveState {
    /// Nothing recent, or too old to matter.
    Idle,
    /// The agent wrote recently, a turn is open, or its processes run tools.
    Working,
    /// The agent finished a turn (or asks a question / an approval) and
    /// waits for the person.
    YourTurn,
    /// Seen working by this tracker, then silent for too long.
    Stalled,
    /// The provider refused for quota or rate reasons (from the transcript).
    RateLimited,
    /// The provider refused for login or credential reasons.
    AuthRequired,
    /// The sources say something this reader cannot interpret (an unknown
    /// registry status, a transcript without any turn evidence). Never idle.
    Unknown,
}

impl LiveState {
    pub const ALL: [LiveState; 7] = [
        LiveState::Idle,
        LiveState::Unknown,
        LiveState::Working,
        LiveState::YourTurn,
        LiveState::Stalled,
        LiveState::RateLimited,
        LiveState::AuthRequired,
    ];

    /// Urgency, higher first when sorting: idle 0, unknown 1, working 2,
    /// your turn 3, stalled 4, rate-limited 5, auth required 6 (the order of
    /// the states table; `unknown` sits just above idle so it is shown,
    /// never hidden with idle, but never outranks a state that was read).
    pub fn urgency(self) -> u8 {
        match self {
            LiveState::Idle => 0,
            LiveState::Unknown => 1,
            LiveState::Working => 2,
            LiveState::YourTurn => 3,
            LiveState::Stalled => 4,
            LiveState::RateLimited => 5,
            LiveState::AuthRequired => 6,
        }
    }

    /// The word used in JSON and text: `idle`, `working`, `your_turn`,
    /// `stalled`, `rate_limited`, `auth_required`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            LiveState::Idle => "idle",
            LiveState::Working => "working",
            LiveState::YourTurn => "your_turn",
            LiveState::Stalled => "stalled",
            LiveState::RateLimited => "rate_limited",
            LiveState::AuthRequired => "auth_required",
            LiveState::Unknown => "unknown",
        }
    }

    /// Stalled, rate-limited and auth required ask for the person's help.
    pub fn needs_attention(self) -> bool {
        matches!(
            self,
            LiveState::Stalled | LiveState::RateLimited | LiveState::AuthRequired
        )
    }
}

impl PartialOrd for LiveState {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LiveState {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.urgency().cmp(&other.urgency())
    }
}

impl std::fmt::Display for LiveState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The thresholds of the rules. [`Default`] gives the documented values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// A write this fresh means working even without turn evidence (18 s).
    pub active_window: Duration,
    /// An open turn silent this long is no longer working (300 s).
    pub stall_after: Duration,
    /// Past this, a silent session is idle, not stalled (15 min).
    pub stall_cap: Duration,
    /// A finished turn is "your turn" only while this fresh (20 min).
    pub needs_you_cap: Duration,
    /// Older activity is idle (30 min).
    pub attention_window: Duration,
    /// How much of the end of a transcript is read (128 KiB).
    pub tail_bytes: u64,
    /// At most this many of the last lines are read (200).
    pub tail_lines: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            active_window: Duration::from_secs(18),
            stall_after: Duration::from_secs(300),
            stall_cap: Duration::from_secs(15 * 60),
            needs_you_cap: Duration::from_secs(20 * 60),
            attention_window: Duration::from_secs(30 * 60),
            tail_bytes: 128 * 1024,
            tail_lines: 200,
        }
    }
}

impl Thresholds {
    /// The default durations multiplied by `factor` (the tail sizes stay).
    /// Test-only shortening: a hidden CLI flag uses it so real-CLI tests
    /// reach "stalled" in seconds. A factor that is not finite and positive
    /// gives the defaults.
    pub fn scaled(factor: f64) -> Self {
        let d = Thresholds::default();
        if !(factor.is_finite() && factor > 0.0) {
            return d;
        }
        // A factor so large the product overflows saturates (no panic).
        let s = |x: Duration| {
            Duration::try_from_secs_f64(x.as_secs_f64() * factor).unwrap_or(Duration::MAX)
        };
        Thresholds {
            active_window: s(d.active_window),
            stall_after: s(d.stall_after),
            stall_cap: s(d.stall_cap),
            needs_you_cap: s(d.needs_you_cap),
            attention_window: s(d.attention_window),
            ..d
        }
    }
}

/// Why a finished-looking turn waits for the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// Claude `AskUserQuestion`, Codex `request_user_input`.
    Question,
    /// Claude `ExitPlanMode` (plan approval).
    PlanApproval,
    /// Gemini tool call `awaiting_approval`.
    ToolApproval,
    /// The person interrupted the turn (Claude's interrupt text, Codex
    /// `turn_aborted`, Gemini cancelled tool calls, Cursor aborted turn).
    Interrupted,
}

/// Where the newest turn stands, as the tail says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum TurnStatus {
    /// A turn is running (a prompt, a tool call or streaming output is the
    /// newest turn record).
    Open,
    /// The agent finished its turn. `key` identifies that turn (the record's
    /// `uuid`, else its `id`, else the payload's `turn_id`/`id`/`item_id`/
    /// `call_id`, else a hash of the line) so a notifier can de-duplicate.
    Done { key: String },
    /// The turn stopped to wait for the person (a question, an approval or
    /// an interrupt); shown as "your turn".
    WaitingOnUser { key: String, reason: WaitReason },
    /// The tail holds no turn record at all.
    Unknown,
}

/// A provider refusal read from the tail, kept while it is the newest
/// relevant record (a later prompt or model output clears it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Signal {
    /// Quota or rate limit; `resets_at` when the record says when.
    RateLimited { resets_at: Option<Timestamp> },
    /// Login or credentials refused.
    AuthRequired,
}

/// Why a transcript is not a person's session (hidden by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HiddenReason {
    /// A Claude Code subagent transcript (`…/subagents/…`, `agent-*.jsonl`).
    ClaudeSubagent,
    /// A Codex rollout whose `session_meta.source` names a subagent.
    CodexSubagent,
    /// A `codex exec` rollout (`originator: codex_exec` or `source: exec`).
    CodexExec,
    /// A Gemini CLI subagent chat (`kind: subagent`).
    GeminiSubagent,
    /// A Cursor subagent transcript (`…/subagents/…`).
    CursorSubagent,
}

/// Token counts seen in the tail, normalized as [`crate::TokenUsage`]:
/// `input` excludes cache reads and writes, `output` includes reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
    /// True when these are the whole session's totals: the tail began at the
    /// file's beginning, or the provider writes cumulative totals (Codex's
    /// `total_token_usage`, the Gemini legacy whole-file record). Otherwise
    /// they cover only the tail's responses (Claude: one count per
    /// `message.id`), and a caller may add those of appended lines.
    pub whole_session: bool,
}

/// What the tail of one transcript says. Missing means the tail did not say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TailFacts {
    pub provider: Provider,
    pub session_id: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// The first human prompt, only when the tail starts at the file's
    /// beginning (otherwise the tail's first prompt is not the session's).
    pub first_prompt: Option<String>,
    /// The newest semantic record's timestamp (not bookkeeping lines).
    pub last_activity: Option<Timestamp>,
    pub turn: TurnStatus,
    /// A rate-limit or auth refusal that is the newest relevant record.
    pub signal: Option<Signal>,
    pub hidden: Option<HiddenReason>,
    pub tokens: TokenTotals,
    /// Claude Code: the tail's first and last response (`message.id`) with
    /// the usage counted for each, so a caller that adds appended chunks can
    /// count a response whose lines straddle two chunks once.
    pub response_ends: ResponseEnds,
    /// Lines that could not be read (not JSON, invalid UTF-8, too big, an
    /// unknown shape): counted, never fatal.
    pub skipped_lines: u32,
}

impl TailFacts {
    /// Facts of a tail that said nothing yet.
    pub fn empty(provider: Provider) -> Self {
        TailFacts {
            provider,
            session_id: None,
            cwd: None,
            model: None,
            first_prompt: None,
            last_activity: None,
            turn: TurnStatus::Unknown,
            signal: None,
            hidden: None,
            tokens: TokenTotals::default(),
            response_ends: ResponseEnds::default(),
            skipped_lines: 0,
        }
    }
}

/// The first and the last response of a tail, by file order, each with the
/// usage counted for it (its largest count). Empty for providers whose
/// totals are cumulative or per line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResponseEnds {
    pub first: Option<(String, TokenTotals)>,
    pub last: Option<(String, TokenTotals)>,
}

/// What the caller knows of the session's processes (registry pid, the
/// matched process tree, kernel capture).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessTruth {
    /// Nothing is known (no registry entry, no bound tree, not root).
    #[default]
    Unknown,
    /// The session's process (tree) is gone: never working.
    Exited,
    /// Alive, nothing more known.
    Alive,
    /// Alive and running tool processes (a long build): working even when
    /// the transcript is quiet.
    RunningTools,
}

/// Everything [`Tracker::classify`] looks at for one transcript.
#[derive(Debug, Clone, Copy)]
pub struct LiveInputs<'a> {
    pub facts: &'a TailFacts,
    /// The transcript's modification time (the activity clock when the tail
    /// has no timestamps, as for Cursor).
    pub mtime: Option<Timestamp>,
    /// Claude desktop `lastActivityAt` of this session ([`desktop`]).
    pub desktop_activity: Option<Timestamp>,
    pub process: ProcessTruth,
    /// Claude Code's live registry status of this session ([`registry`]):
    /// `waiting` turns an open turn into "your turn" (a permission prompt),
    /// an unrecognised value gives `unknown`. Added to the planned API
    /// because the registry is the only local source for permission prompts.
    pub registry_status: Option<&'a registry::Status>,
}

/// Errors of the live layer (only the transcript itself can fail a read;
/// side files degrade silently).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An RFC 3339 record time as a [`Timestamp`] (the crate's lenient parser).
pub(crate) fn parse_time(s: &str) -> Option<Timestamp> {
    Timestamp::from_millisecond(crate::util::parse_ts(s)?).ok()
}

/// The last resort of a turn key: a stable hash of the whole line.
pub(crate) fn line_key(line: &str) -> String {
    format!("line:{:016x}", crate::util::fnv1a64(line.as_bytes()))
}

/// Keeps the newer of two optional times.
pub(crate) fn newest(slot: &mut Option<Timestamp>, t: Option<Timestamp>) {
    if let Some(t) = t
        && slot.is_none_or(|s| t > s)
    {
        *slot = Some(t);
    }
}

/// Shortens a prompt for display: at most this many characters.
pub(crate) const PROMPT_CHARS: usize = 200;
