//! Storing correlations: after `record` binds sessions, every stored
//! session's report becomes `correlations` rows (what `audit` reads).

use rusqlite::Connection;

use super::{CorrelateError, Report, SessionSource, correlate, view::CaptureView};
use crate::{
    sessions::AgentSession,
    store::sessions::{self as stored, CorrelationRow, Role},
};

/// Computes and stores correlation rows for every stored session of a
/// capture opened read-write (called by `record` after binding).
pub fn store_all(conn: &Connection, path: &str) -> Result<(), CorrelateError> {
    let view = CaptureView::load(conn, path)?;
    let mut st = conn
        .prepare("SELECT id, model FROM sessions ORDER BY id")
        .map_err(|e| view.qe(e))?;
    let rows: Vec<(i64, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .map_err(|e| view.qe(e))?;
    let mut out: Vec<CorrelationRow> = Vec::new();
    for (row, model) in rows {
        let Ok(session) = serde_json::from_str::<AgentSession>(&model) else {
            continue;
        };
        let (bound, unmatched) = view.stored_trees(row)?;
        let report = correlate(&view, &session, SessionSource::Capture, &bound, unmatched)?;
        rows_of(row, &report, &mut out);
    }
    conn.execute_batch("BEGIN").map_err(|e| view.qe(e))?;
    stored::insert_correlations(conn, path, &out)?;
    conn.execute_batch("COMMIT").map_err(|e| view.qe(e))?;
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
