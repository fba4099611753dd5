//! The run model the picture exports share: every session a capture
//! stored, each correlated with the trees bound to it exactly as
//! `correlate --db` does (no second copy of matching or attribution).

use crate::{
    correlate::{self, CaptureView, CorrelateError, Report, TreeInfo},
    sessions::AgentSession,
    store::Capture,
};

/// One stored session and its correlation.
pub struct CorrelatedSession {
    /// Its `sessions` row.
    pub row: i64,
    pub session: AgentSession,
    pub report: Report,
}

/// Every session stored in `cap`, by row, each correlated with its bound
/// trees; and the trees bound to no session. A capture that stored no
/// sessions (`--no-transcripts` does store them; version 1 captures do
/// not) gives none.
pub fn correlated_sessions(
    cap: &Capture,
) -> Result<(Vec<CorrelatedSession>, Vec<TreeInfo>), CorrelateError> {
    let view = CaptureView::load(&cap.conn, &cap.path)?;
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for s in cap.stored_sessions("")? {
        let (bound, trees) = view.stored_trees(s.row)?;
        unmatched = trees.clone();
        let report = correlate::correlate(
            &view,
            &s.session,
            correlate::SessionSource::Capture,
            &bound,
            trees,
        )?;
        out.push(CorrelatedSession {
            row: s.row,
            session: s.session,
            report,
        });
    }
    if out.is_empty() && cap.has_session_tables()? {
        unmatched = view.stored_trees(-1)?.1;
    }
    Ok((out, unmatched))
}
