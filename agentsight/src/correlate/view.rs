//! Phase 1, the capture view: what correlate reads from a capture besides
//! the events — its processes, clock anchors, and the trees bound to a
//! session (stored by `record`, or matched now in memory).

use std::collections::HashMap;

use super::{
    CorrelateError,
    report::{TreeInfo, TreeStatus},
};
use crate::{
    clock::Anchors,
    matching::{self, ProcTable},
    sessions::AgentSession,
    store::{CaptureReader, StoreError, read::ContainerRef},
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
    /// Where correlate reads the events (and the stored trees).
    pub cap: CaptureReader<'a>,
    pub path: String,
    pub procs: ProcTable,
    pub anchors: Anchors,
    /// Process row id → its container, for the processes that ran in one
    /// (`record --container`); empty for a host-only capture.
    pub containers: HashMap<i64, ContainerRef>,
}

/// The capture's processes: the one place correlate loads them.
fn load_processes(cap: CaptureReader) -> Result<ProcTable, StoreError> {
    ProcTable::load(cap)
}

/// The containers of the capture's processes, read through the store
/// (captures made before the container columns have none).
fn load_containers(cap: CaptureReader) -> Result<HashMap<i64, ContainerRef>, StoreError> {
    Ok(cap
        .processes()?
        .into_iter()
        .filter_map(|p| Some((p.id, ContainerRef::of(&p.identity)?)))
        .collect())
}

impl<'a> CaptureView<'a> {
    /// `cap.reader()` of a [`crate::store::Capture`] or a
    /// [`crate::store::CaptureRw`].
    pub fn load(cap: CaptureReader<'a>) -> Result<Self, CorrelateError> {
        Ok(CaptureView {
            cap,
            path: cap.path().to_string(),
            procs: load_processes(cap)?,
            anchors: cap.anchors()?,
            containers: load_containers(cap)?,
        })
    }

    /// Trees bound to `session_row` and the trees bound to nothing, from the
    /// stored tables. A row whose evidence or status word this version does
    /// not know is left out (and logged).
    pub fn stored_trees(
        &self,
        session_row: i64,
    ) -> Result<(Vec<BoundTree>, Vec<TreeInfo>), CorrelateError> {
        let bound = self
            .cap
            .session_bindings(session_row)?
            .into_iter()
            .filter_map(|b| {
                let Some(evidence) = matching::Evidence::from_word(&b.evidence) else {
                    let evidence = b.evidence;
                    tracing::warn!(%evidence, "{}: unknown binding evidence, binding skipped", self.path);
                    return None;
                };
                Some(BoundTree {
                    root: *self.procs.by_id.get(&b.root_process_id)?,
                    evidence,
                    evidence_count: b.evidence_count,
                    evidence_path: b.evidence_path,
                    from_mono_ns: b.from_mono_ns.max(0) as u64,
                    to_mono_ns: b.to_mono_ns.map(|v| v.max(0) as u64),
                })
            })
            .collect();
        Ok((bound, self.unbound_trees()?))
    }

    /// The stored trees bound to no session (the same for every session of
    /// the capture). A tree whose status word this version does not know is
    /// left out (and logged).
    pub fn unbound_trees(&self) -> Result<Vec<TreeInfo>, CorrelateError> {
        Ok(self
            .cap
            .unbound_trees()?
            .into_iter()
            .filter_map(|t| {
                let i = *self.procs.by_id.get(&t.root_process_id)?;
                let Some(status) = TreeStatus::from_word(&t.status) else {
                    let status = t.status;
                    tracing::warn!(%status, "{}: unknown tree status, tree skipped", self.path);
                    return None;
                };
                Some(self.tree_info(i, status, t.note))
            })
            .collect())
    }

    /// Matches in memory (for captures that stored no bindings).
    pub fn match_now(
        &self,
        session: &AgentSession,
    ) -> Result<(Vec<BoundTree>, Vec<TreeInfo>), CorrelateError> {
        let ev = matching::transcript_writes(self.cap, &self.procs)?;
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

    /// The tree rooted at process table index `i`, as correlate names it.
    pub fn tree_info(&self, i: usize, status: TreeStatus, note: Option<String>) -> TreeInfo {
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
