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
    let view = CaptureView::load(&cap.conn, &cap.path)?;
    let mut out = Vec::new();
    for s in cap.stored_sessions("")? {
        let (bound, unmatched) = view.stored_trees(s.row)?;
        let report = correlate::correlate(
            &view,
            &s.session,
            correlate::SessionSource::Capture,
            &bound,
            unmatched,
        )?;
        out.push(CorrelatedSession {
            row: s.row,
            session: s.session,
            report,
        });
    }
    Ok(out)
}
