//! The classification rules over [`TailFacts`], with an injected clock.
//!
//! Order (the numbered steps of docs/live-states.md): a refusal signal wins
//! (idle past the attention window) → a process running tools is working →
//! an unrecognised registry status is unknown → no activity time is
//! unknown, older than the attention window idle → the desktop app busy
//! ahead of the transcript → a finished turn is your turn while fresh → an
//! open turn is working while fresh, then stalled only if this tracker saw
//! it working → no turn record: working only within the fresh-write window.
//! Process truth then corrects: an exited process is never working (nor
//! stalled); registry `waiting` over an open turn is your turn.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;

use super::registry::Status;
use super::{LiveInputs, LiveState, ProcessTruth, Signal, TailFacts, Thresholds, TurnStatus};

/// The desktop app counts as ahead of the transcript only when its
/// `lastActivityAt` is more than this newer than the transcript's newest
/// record (the two clocks are written moments apart for the same event).
pub const DESKTOP_LEAD: Duration = Duration::from_millis(500);

/// Classifies transcripts over time. It remembers, per transcript path, when
/// it last classified the session as working: only a session seen working
/// can become stalled, so a transcript already old when the tracker started
/// never does.
#[derive(Debug, Clone)]
pub struct Tracker {
    started: Timestamp,
    t: Thresholds,
    last_working: HashMap<PathBuf, Timestamp>,
}

/// `now − then`, never negative (a clock step back or a future timestamp
/// counts as fresh).
fn age(now: Timestamp, then: Timestamp) -> Duration {
    let ms = now.as_millisecond().saturating_sub(then.as_millisecond());
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The activity time: the newer of the transcript's newest record and the
/// desktop app's `lastActivityAt`; the file's mtime only when neither exists.
pub fn activity_time(inputs: &LiveInputs) -> Option<Timestamp> {
    match (inputs.facts.last_activity, inputs.desktop_activity) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b).or(inputs.mtime),
    }
}

fn signal_state(s: &Signal) -> LiveState {
    match s {
        Signal::RateLimited { .. } => LiveState::RateLimited,
        Signal::AuthRequired => LiveState::AuthRequired,
    }
}

fn desktop_ahead(facts: &TailFacts, desktop: Option<Timestamp>) -> bool {
    match (desktop, facts.last_activity) {
        (Some(d), Some(t)) => age(d, t) > DESKTOP_LEAD,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl Tracker {
    /// A tracker started at `started` (the tool's start time, from the
    /// caller's clock) with thresholds `t`.
    pub fn new(started: Timestamp, t: Thresholds) -> Self {
        Tracker {
            started,
            t,
            last_working: HashMap::new(),
        }
    }

    pub fn thresholds(&self) -> &Thresholds {
        &self.t
    }

    pub fn started(&self) -> Timestamp {
        self.started
    }

    /// When this tracker last classified `path` as working.
    pub fn last_working(&self, path: &Path) -> Option<Timestamp> {
        self.last_working.get(path).copied()
    }

    /// The state of the transcript at `path` at time `now` (rules in the
    /// module docs). Records the session as seen working when the result is
    /// [`LiveState::Working`].
    pub fn classify(&mut self, path: &Path, inputs: &LiveInputs, now: Timestamp) -> LiveState {
        let state = self.decide(path, inputs, now);
        if state == LiveState::Working {
            self.last_working.insert(path.to_path_buf(), now);
        }
        state
    }

    /// Forgets the paths `keep` rejects (transcripts no longer candidates).
    pub fn prune(&mut self, keep: &dyn Fn(&Path) -> bool) {
        self.last_working.retain(|p, _| keep(p));
    }

    fn decide(&self, path: &Path, inputs: &LiveInputs, now: Timestamp) -> LiveState {
        let facts = inputs.facts;
        if let Some(s) = &facts.signal {
            // A refusal stays while it is the newest relevant record, but
            // not past the attention window.
            return match activity_time(inputs) {
                Some(a) if age(now, a) > self.t.attention_window => LiveState::Idle,
                _ => signal_state(s),
            };
        }
        let turn_finished = matches!(
            facts.turn,
            TurnStatus::Done { .. } | TurnStatus::WaitingOnUser { .. }
        );
        if inputs.process == ProcessTruth::RunningTools && !turn_finished {
            return LiveState::Working;
        }
        let registry_unknown = matches!(inputs.registry_status, Some(Status::Other(_)));
        if registry_unknown && inputs.process != ProcessTruth::Exited {
            return LiveState::Unknown;
        }
        let Some(activity) = activity_time(inputs) else {
            return LiveState::Unknown;
        };
        let age = age(now, activity);
        if age > self.t.attention_window {
            return LiveState::Idle;
        }
        let state = self.by_transcript(path, inputs, age, now);
        self.correct(state, inputs)
    }

    /// Steps 5–8: the desktop rule, the turn, the silence.
    fn by_transcript(
        &self,
        path: &Path,
        inputs: &LiveInputs,
        age: Duration,
        now: Timestamp,
    ) -> LiveState {
        let facts = inputs.facts;
        if desktop_ahead(facts, inputs.desktop_activity) {
            return self.open_turn(path, age, now);
        }
        match facts.turn {
            TurnStatus::Done { .. } | TurnStatus::WaitingOnUser { .. } => {
                if age < self.t.needs_you_cap {
                    LiveState::YourTurn
                } else {
                    LiveState::Idle
                }
            }
            TurnStatus::Open => self.open_turn(path, age, now),
            // No turn evidence at all: only a fresh write says working;
            // after that the tail cannot tell your turn from a stall.
            TurnStatus::Unknown if age < self.t.active_window => LiveState::Working,
            TurnStatus::Unknown => LiveState::Unknown,
        }
    }

    fn open_turn(&self, path: &Path, age: Duration, now: Timestamp) -> LiveState {
        if age < self.t.stall_after {
            return LiveState::Working;
        }
        let seen_recently = self
            .last_working
            .get(path)
            .is_some_and(|&w| self::age(now, w) < self.t.stall_cap);
        if seen_recently && age < self.t.stall_cap {
            LiveState::Stalled
        } else {
            LiveState::Idle
        }
    }

    /// Process truth and the registry hint correct the transcript's verdict.
    fn correct(&self, state: LiveState, inputs: &LiveInputs) -> LiveState {
        match (state, inputs.process) {
            // The process is gone: its open turn will never finish, and
            // nothing waits on the person either.
            (LiveState::Working | LiveState::Stalled, ProcessTruth::Exited) => LiveState::Idle,
            // Claude Code waits on a permission prompt: the transcript shows
            // an open tool call, the registry says waiting.
            (LiveState::Working, _) if inputs.registry_status == Some(&Status::Waiting) => {
                LiveState::YourTurn
            }
            (s, _) => s,
        }
    }
}
