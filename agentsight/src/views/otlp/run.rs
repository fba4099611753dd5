//! The run model the exports draw: per stored session, its parsed model
//! and what `correlate` made of it (prompts, responses, tool calls, the
//! activity attributed to each, the unattributed rest); the trees bound to
//! no session with their activity; and the capture's loss and completeness.
//! Everything comes from `correlate::correlate` and the store's read API:
//! this module adds no matching or attribution of its own.

use sha2::{Digest, Sha256};

use crate::{
    clock::Anchors,
    correlate::{self, Activity, CaptureView, CorrelateError, Report, TreeInfo, TreeStatus},
    sessions::AgentSession,
    store::{Capture, StoreError, sessions::StoredSession},
};

/// Loss and completeness, as `show` states them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureFacts {
    /// Identifies the capture (its start time, host and recorder pid): the
    /// seed of every id an export derives, so they are stable across runs.
    pub key: [u8; 32],
    pub host: Option<String>,
    pub started_at: Option<String>,
    /// The recorder finished and marked the capture complete.
    pub recorder_finished: bool,
    /// Events lost in the kernel (reserve failures), all kinds.
    pub lost_events: u64,
    /// Events not stored because the capture reached `--max-size` or the
    /// disk was full.
    pub not_stored: u64,
    /// Records missing by per-CPU sequence number.
    pub missing_by_sequence: u64,
    /// Every loss counter, `(kind, count)`, zero ones left out.
    pub loss_by_kind: Vec<(String, u64)>,
    /// Wall time (ns) of the newest stored event.
    pub last_event_wall_ns: Option<i64>,
}

impl CaptureFacts {
    pub fn load(cap: &Capture) -> Result<Self, StoreError> {
        let meta = |k: &str| cap.meta(k);
        let (started_at, host, pid) = (meta("started_at")?, meta("host")?, meta("recorder_pid")?);
        let mut h = Sha256::new();
        for part in [&started_at, &host, &pid] {
            h.update(part.as_deref().unwrap_or("").as_bytes());
            h.update([0]);
        }
        let loss = cap.loss()?;
        let split = cap.loss_split()?;
        Ok(CaptureFacts {
            key: h.finalize().into(),
            host,
            started_at,
            recorder_finished: meta("complete")?.as_deref() == Some("true"),
            lost_events: split.kernel.iter().map(|(_, n)| n).sum(),
            not_stored: split.not_stored,
            missing_by_sequence: cap.gap_missing()?,
            loss_by_kind: loss.iter().filter(|(_, n)| *n > 0).cloned().collect(),
            last_event_wall_ns: cap.last_event_wall_ns()?,
        })
    }

    /// Complete only if the recorder finished and nothing was lost, left
    /// unstored or found missing: a capture with loss is never complete.
    pub fn complete(&self) -> bool {
        self.recorder_finished
            && self.lost_events == 0
            && self.not_stored == 0
            && self.missing_by_sequence == 0
    }
}

/// One stored session and its correlation.
pub struct SessionRun {
    pub session: AgentSession,
    pub report: Report,
}

/// The trees bound to no session (unmatched or ambiguous) and everything
/// their processes did.
pub struct UnboundRun {
    /// Each tree and its root's index in the view's process table.
    pub trees: Vec<(TreeInfo, usize)>,
    pub activity: Vec<Activity>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Correlate(#[from] CorrelateError),
}

/// A capture opened for drawing: its view (processes, anchors,
/// containers) and facts; sessions are correlated one at a time.
pub struct RunModel<'a> {
    pub cap: &'a Capture,
    pub view: CaptureView<'a>,
    pub facts: CaptureFacts,
}

impl<'a> RunModel<'a> {
    pub fn load(cap: &'a Capture) -> Result<Self, RunError> {
        Ok(RunModel {
            cap,
            view: CaptureView::load(cap.reader())?,
            facts: CaptureFacts::load(cap)?,
        })
    }

    pub fn anchors(&self) -> &Anchors {
        &self.view.anchors
    }

    /// The stored sessions, in storing order (none in a capture made
    /// before sessions were stored).
    pub fn stored_sessions(&self) -> Result<Vec<StoredSession>, RunError> {
        Ok(self.cap.stored_sessions("")?)
    }

    /// A stored session correlated with the trees bound to it, from the
    /// capture alone (the stored session model, as `correlate --db`).
    pub fn correlate(&self, s: StoredSession) -> Result<SessionRun, RunError> {
        let report = crate::views::run::correlate_stored(&self.view, s.row, &s.session)?;
        Ok(SessionRun {
            session: s.session,
            report,
        })
    }

    /// The trees bound to no session. A capture that stored no trees
    /// (made before matching was stored) has every process tree here.
    pub fn unbound(&self) -> Result<UnboundRun, RunError> {
        let procs = &self.view.procs;
        let trees: Vec<(TreeInfo, usize)> = if self.cap.has_session_tables()? {
            let (_, unmatched) = self.view.stored_trees(-1)?;
            unmatched
                .into_iter()
                .filter_map(|t| Some((procs.by_id.get(&t.root_process_id).copied()?, t)))
                .map(|(i, t)| (t, i))
                .collect()
        } else {
            procs
                .roots()
                .into_iter()
                .map(|i| {
                    let p = &procs.procs[i];
                    let info = TreeInfo {
                        root_pid: p.pid,
                        root_process_id: p.id,
                        root_argv: p.argv.clone(),
                        status: TreeStatus::Unmatched,
                        note: Some("the capture stores no session matching".into()),
                        container: self.view.containers.get(&p.id).cloned(),
                    };
                    (info, i)
                })
                .collect()
        };
        let roots: Vec<usize> = trees.iter().map(|(_, i)| *i).collect();
        let activity = correlate::tree_activity(&self.view, &roots)?;
        Ok(UnboundRun { trees, activity })
    }
}
