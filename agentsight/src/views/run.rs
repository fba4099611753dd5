//! The one run model every view draws: what the capture says of its run
//! (`store::meta::RunMeta`), its loss and completeness, and — loaded only
//! when a view asks, so `show` never correlates — every stored session
//! correlated with the trees bound to it exactly as `correlate --db` does,
//! and the trees bound to no session. Everything comes from
//! `correlate::correlate` and the store's read API: this module adds no
//! matching or attribution of its own.

use std::cell::OnceCell;

use crate::{
    clock::Anchors,
    correlate::{self, Activity, CaptureView, CorrelateError, Report, TreeInfo, TreeStatus},
    sessions::AgentSession,
    store::{
        Capture, StoreError,
        meta::{Completeness, Loss, RunMeta},
        sessions::StoredSession,
    },
};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Correlate(#[from] CorrelateError),
}

/// One stored session and its correlation.
pub struct SessionRun {
    /// Its `sessions` row.
    pub row: i64,
    pub session: AgentSession,
    /// What `correlate --db` reports for it (its `unmatched_trees` are the
    /// capture's trees bound to no session).
    pub report: Report,
}

/// The trees bound to no session (unmatched or ambiguous) and everything
/// their processes did.
pub struct UnboundRun {
    /// Each tree and its root's index in the view's process table.
    pub trees: Vec<(TreeInfo, usize)>,
    pub activity: Vec<Activity>,
}

/// A capture's run: its facts and loss at once; its correlation view
/// (processes, anchors, containers) when first asked for.
pub struct RunModel<'a> {
    pub cap: &'a Capture,
    pub meta: RunMeta,
    pub loss: Loss,
    view: OnceCell<CaptureView<'a>>,
}

impl<'a> RunModel<'a> {
    /// The run's facts and loss (a few small reads: nothing is correlated).
    pub fn load(cap: &'a Capture) -> Result<Self, StoreError> {
        Ok(Self {
            cap,
            meta: cap.run_meta()?,
            loss: cap.loss_account()?,
            view: OnceCell::new(),
        })
    }

    /// Whether the capture holds the whole run.
    pub fn completeness(&self) -> Completeness {
        Completeness::of(&self.meta, &self.loss)
    }

    /// Every exit record is known to be there ("no exit seen" then means
    /// "still running at the end").
    pub fn exits_known(&self) -> bool {
        self.meta.recorder_finished && self.loss.exits_whole()
    }

    /// The correlation view, loaded on first use.
    pub fn view(&self) -> Result<&CaptureView<'a>, CorrelateError> {
        if let Some(v) = self.view.get() {
            return Ok(v);
        }
        let v = CaptureView::load(self.cap.reader())?;
        Ok(self.view.get_or_init(|| v))
    }

    pub fn anchors(&self) -> Result<&Anchors, CorrelateError> {
        Ok(&self.view()?.anchors)
    }

    /// The stored sessions, in storing order (none in a capture made
    /// before sessions were stored).
    pub fn stored_sessions(&self) -> Result<Vec<StoredSession>, StoreError> {
        self.cap.stored_sessions("")
    }

    /// A stored session correlated with the trees bound to it, from the
    /// capture alone (the stored session model, as `correlate --db`).
    pub fn correlate(&self, s: StoredSession) -> Result<SessionRun, CorrelateError> {
        let report = correlate_stored(self.view()?, s.row, &s.session)?;
        Ok(SessionRun {
            row: s.row,
            session: s.session,
            report,
        })
    }

    /// Every stored session, correlated, in storing order.
    pub fn correlated_sessions(&self) -> Result<Vec<SessionRun>, CorrelateError> {
        self.stored_sessions()?
            .into_iter()
            .map(|s| self.correlate(s))
            .collect()
    }

    /// The trees stored as bound to no session, each with its root's index
    /// in the view's process table (`CaptureView::unbound_trees`).
    pub fn unbound_trees(&self) -> Result<Vec<(TreeInfo, usize)>, CorrelateError> {
        let view = self.view()?;
        Ok(view
            .unbound_trees()?
            .into_iter()
            .filter_map(|t| Some((*view.procs.by_id.get(&t.root_process_id)?, t)))
            .map(|(i, t)| (t, i))
            .collect())
    }

    /// The trees bound to no session and their activity. A capture that
    /// stored no trees (made before matching was stored) has every process
    /// tree here.
    pub fn unbound(&self) -> Result<UnboundRun, RunError> {
        let view = self.view()?;
        let trees: Vec<(TreeInfo, usize)> = if self.cap.has_session_tables()? {
            self.unbound_trees()?
        } else {
            view.procs
                .roots()
                .into_iter()
                .map(|i| {
                    let note = Some("the capture stores no session matching".into());
                    (view.tree_info(i, TreeStatus::Unmatched, note), i)
                })
                .collect()
        };
        let roots: Vec<usize> = trees.iter().map(|(_, i)| *i).collect();
        let activity = correlate::tree_activity(view, &roots)?;
        Ok(UnboundRun { trees, activity })
    }
}

/// One stored session (its `sessions` row) correlated with the trees bound
/// to it, from the capture alone, as `correlate --db` does.
pub fn correlate_stored(
    view: &CaptureView,
    row: i64,
    session: &AgentSession,
) -> Result<Report, CorrelateError> {
    let (bound, unmatched) = view.stored_trees(row)?;
    correlate::correlate_with(
        view,
        session,
        correlate::SessionSource::Capture,
        &bound,
        unmatched,
        &view.session_mcp_servers(row, session, &bound)?,
    )
}
