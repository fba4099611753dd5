//! Storing correlations: after `record` binds sessions, every stored
//! session's report becomes `correlations` rows (what `audit` reads).

use super::{CorrelateError, Report, SessionSource, correlate_with, mcp, view::CaptureView};
use crate::store::{
    CaptureRw,
    sessions::{CorrelationRow, Role},
};

/// Computes and stores correlation rows for every stored session of a
/// capture opened read-write (called by `record` after binding).
pub fn store_all(rw: &CaptureRw) -> Result<(), CorrelateError> {
    let view = CaptureView::load(rw.reader())?;
    let mut out: Vec<CorrelationRow> = Vec::new();
    for stored in rw.reader().readable_sessions()? {
        let (bound, unmatched) = view.stored_trees(stored.row)?;
        let report = correlate_with(
            &view,
            &stored.session,
            SessionSource::Capture,
            &bound,
            unmatched,
            &mcp::stored_servers(&view, stored.row)?,
        )?;
        rows_of(stored.row, &report, &mut out);
    }
    rw.put_correlations(&out)?;
    Ok(())
}

/// The rows of one session's report: attributed activity, then the flags
/// (unclaimed activity, claims not observed, mismatches).
fn rows_of(row: i64, report: &Report, out: &mut Vec<CorrelationRow>) {
    for p in &report.prompts {
        for t in &p.tools {
            for a in &t.activity {
                out.push(CorrelationRow {
                    session_row: row,
                    tool_index: Some(t.tool_index as i64),
                    call_id: t.call_id.clone(),
                    event_id: Some(a.event_id),
                    process_id: Some(a.process_id),
                    role: Role::Attributed,
                    reason: a.reason.map(|r| r.as_str().to_string()),
                    late: a.late,
                });
            }
        }
    }
    for a in &report.flags.observed_not_claimed {
        out.push(CorrelationRow {
            session_row: row,
            tool_index: None,
            call_id: None,
            event_id: Some(a.event_id),
            process_id: Some(a.process_id),
            role: Role::ObservedNotClaimed,
            reason: a.by.map(|b| b.as_str().to_string()),
            late: false,
        });
    }
    for c in &report.flags.claimed_not_observed {
        out.push(CorrelationRow {
            session_row: row,
            tool_index: Some(c.tool_index as i64),
            call_id: c.call_id.clone(),
            event_id: None,
            process_id: None,
            role: Role::ClaimedNotObserved,
            reason: Some(c.detail.clone()),
            late: false,
        });
    }
    for m in &report.flags.mismatches {
        out.push(CorrelationRow {
            session_row: row,
            tool_index: Some(m.tool_index as i64),
            call_id: m.call_id.clone(),
            event_id: None,
            process_id: None,
            role: Role::Mismatch,
            reason: Some(format!("{}: {}", m.kind, m.detail)),
            late: false,
        });
    }
}
