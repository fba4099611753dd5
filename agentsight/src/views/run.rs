//! The run model the picture exports share: every session a capture
//! stored, each correlated with the trees bound to it exactly as
//! `correlate --db` does (no second copy of matching or attribution).

use crate::{
    correlate::{self, CaptureView, CorrelateError, Report},
    sessions::AgentSession,
    store::Capture,
};

/// One stored session and its correlation.
pub struct CorrelatedSession {
    /// Its `sessions` row.
    pub row: i64,
    pub session: AgentSession,
    /// What `correlate --db` reports for it (its `unmatched_trees` are the
    /// capture's trees bound to no session).
    pub report: Report,
}

/// Every session stored in `cap`, by row, each correlated with its bound
/// trees. A capture that stored no sessions (schema version 1, or a
/// recording that bound none) gives none.
pub fn correlated_sessions(cap: &Capture) -> Result<Vec<CorrelatedSession>, CorrelateError> {
    let view = CaptureView::load(cap.reader())?;
    let mut out = Vec::new();
    for s in cap.stored_sessions("")? {
        let report = correlate_stored(&view, s.row, &s.session)?;
        out.push(CorrelatedSession {
            row: s.row,
            session: s.session,
            report,
        });
    }
    Ok(out)
}

/// One stored session (its `sessions` row) correlated with the trees bound
/// to it, from the capture alone, as `correlate --db` does.
pub fn correlate_stored(
    view: &CaptureView,
    row: i64,
    session: &AgentSession,
) -> Result<Report, CorrelateError> {
    let (bound, unmatched) = view.stored_trees(row)?;
    correlate::correlate(
        view,
        session,
        correlate::SessionSource::Capture,
        &bound,
        unmatched,
    )
}
