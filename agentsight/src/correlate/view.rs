//! Phase 1, the capture view: what correlate reads from a capture besides
//! the events — its processes, clock anchors, and the trees bound to a
//! session (stored by `record`, or matched now in memory).

use std::collections::HashMap;

use rusqlite::Connection;

use super::{
    CorrelateError,
    report::{TreeInfo, TreeStatus},
};
use crate::{
    clock::Anchors,
    matching::{self, ProcTable},
    sessions::AgentSession,
    store::read::{self, ContainerRef},
};

/// A bound tree as correlate uses it.
#[derive(Debug, Clone)]
pub struct BoundTree {
    /// The root's index in [`CaptureView::procs`].
    pub root: usize,
    pub evidence: matching::Evidence,
    pub evidence_count: i64,
    pub evidence_path: Option<String>,
    pub from_mono_ns: u64,
    pub to_mono_ns: Option<u64>,
}

/// Everything correlate reads from a capture besides the session.
pub struct CaptureView<'a> {
    pub conn: &'a Connection,
    pub path: String,
    pub procs: ProcTable,
    pub anchors: Anchors,
    /// Process row id → its container, for the processes that ran in one
    /// (`record --container`); empty for a host-only capture.
    pub containers: HashMap<i64, ContainerRef>,
}

/// The capture's processes: the one place correlate loads them.
fn load_processes(conn: &Connection) -> rusqlite::Result<ProcTable> {
    ProcTable::load(conn)
}

/// The containers of the capture's processes, read through the store
/// (captures made before the container columns have none).
fn load_containers(conn: &Connection) -> rusqlite::Result<HashMap<i64, ContainerRef>> {
    Ok(read::processes(conn)?
        .into_iter()
        .filter_map(|p| Some((p.id, ContainerRef::of(&p.identity)?)))
        .collect())
}

impl<'a> CaptureView<'a> {
    pub fn load(conn: &'a Connection, path: &str) -> Result<Self, CorrelateError> {
        let qe = |e: rusqlite::Error| CorrelateError::Query {
            path: path.to_string(),
            reason: e.to_string(),
        };
        Ok(CaptureView {
            conn,
            path: path.to_string(),
            procs: load_processes(conn).map_err(qe)?,
            anchors: Anchors::load(conn).map_err(qe)?,
            containers: load_containers(conn).map_err(qe)?,
        })
    }

    pub(super) fn qe(&self, e: rusqlite::Error) -> CorrelateError {
        CorrelateError::Query {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// Trees bound to `session_row` and the trees bound to nothing, from the
    /// stored tables. A row whose evidence or status word this version does
    /// not know is left out (and logged).
    pub fn stored_trees(
        &self,
        session_row: i64,
    ) -> Result<(Vec<BoundTree>, Vec<TreeInfo>), CorrelateError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT t.root_process_id, b.evidence, b.evidence_count, b.evidence_path, b.from_mono_ns, b.to_mono_ns
                 FROM bindings b JOIN trees t ON t.id = b.tree_id WHERE b.session_row = ?1 ORDER BY b.id",
            )
            .map_err(|e| self.qe(e))?;
        type Row = (i64, String, i64, Option<String>, i64, Option<i64>);
        let rows: Vec<Row> = st
            .query_map([session_row], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.qe(e))?;
        let bound = rows
            .into_iter()
            .filter_map(|(root, evidence, count, path, from, to)| {
                let Some(evidence) = matching::Evidence::from_word(&evidence) else {
                    tracing::warn!(%evidence, "{}: unknown binding evidence, binding skipped", self.path);
                    return None;
                };
                Some(BoundTree {
                    root: *self.procs.by_id.get(&root)?,
                    evidence,
                    evidence_count: count,
                    evidence_path: path,
                    from_mono_ns: from.max(0) as u64,
                    to_mono_ns: to.map(|v| v.max(0) as u64),
                })
            })
            .collect();
        let mut st = self
            .conn
            .prepare("SELECT root_process_id, status, note FROM trees WHERE status != 'bound' ORDER BY id")
            .map_err(|e| self.qe(e))?;
        let rows: Vec<(i64, String, Option<String>)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.qe(e))?;
        let unmatched = rows
            .into_iter()
            .filter_map(|(root, status, note)| {
                let i = *self.procs.by_id.get(&root)?;
                let Some(status) = TreeStatus::from_word(&status) else {
                    tracing::warn!(%status, "{}: unknown tree status, tree skipped", self.path);
                    return None;
                };
                Some(self.tree_info(i, status, note))
            })
            .collect();
        Ok((bound, unmatched))
    }

    /// Matches in memory (for captures that stored no bindings).
    pub fn match_now(
        &self,
        session: &AgentSession,
    ) -> Result<(Vec<BoundTree>, Vec<TreeInfo>), CorrelateError> {
        let ev = matching::transcript_writes(self.conn, &self.procs).map_err(|e| self.qe(e))?;
        let fallback: Vec<matching::FallbackSession> = match (&session.cwd, session.start_ms) {
            (Some(cwd), Some(start)) => vec![matching::FallbackSession {
                key: (session.provider, session.session_id.clone()),
                path: session.source_path.clone(),
                cwd: cwd.clone(),
                start_ms: start,
                end_ms: session.end_ms,
            }],
            _ => Vec::new(),
        };
        let trees = matching::match_trees(&self.procs, &self.anchors, &ev, &fallback);
        let mut bound = Vec::new();
        let mut unmatched = Vec::new();
        for t in trees {
            let mine = t
                .bindings
                .iter()
                .filter(|b| b.key.0 == session.provider && b.key.1 == session.session_id);
            for b in mine {
                bound.push(BoundTree {
                    root: t.root,
                    evidence: b.evidence,
                    evidence_count: b.evidence_count,
                    evidence_path: b.evidence_path.clone(),
                    from_mono_ns: b.from_mono_ns,
                    to_mono_ns: b.to_mono_ns,
                });
            }
            if t.status != TreeStatus::Bound {
                unmatched.push(self.tree_info(t.root, t.status, t.note.clone()));
            }
        }
        Ok((bound, unmatched))
    }

    fn tree_info(&self, i: usize, status: TreeStatus, note: Option<String>) -> TreeInfo {
        let p = &self.procs.procs[i];
        TreeInfo {
            root_pid: p.pid,
            root_process_id: p.id,
            root_argv: p.argv.clone(),
            status,
            note,
            container: self.containers.get(&p.id).cloned(),
        }
    }
}
