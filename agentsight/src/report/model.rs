//! The run model the report draws: everything is read through what exists
//! — `correlate::correlate` per stored session (the model `correlate
//! --json` prints), the store's read API and `show`'s run facts, loss and
//! activity sections — never a second copy of correlation.

use std::collections::HashMap;

use crate::{
    clock::Anchors,
    correlate::{self, CaptureView, TreeInfo},
    store::{
        Capture,
        read::{self, DnsQuery, ProcessRecord},
    },
    views::show::{ActivitySection, Loss, RunFacts},
};

use super::ReportError;

/// One capture, as the report shows it.
pub struct RunModel {
    pub capture: String,
    pub facts: RunFacts,
    pub loss: Loss,
    /// Events stored, all kinds.
    pub events: i64,
    /// One correlation per stored session, in the order stored.
    pub sessions: Vec<correlate::Report>,
    /// Trees bound to no session (or left ambiguous).
    pub unbound: Vec<TreeInfo>,
    /// Whether the capture holds sessions and bindings at all (a capture
    /// made before schema version 2, or by `--agent` before binding, has none).
    pub has_bindings: bool,
    pub processes: Vec<ProcessRecord>,
    /// `processes.id` → its index in `processes`.
    pub process_ix: HashMap<i64, usize>,
    /// DNS names asked, per process row id.
    pub dns: HashMap<i64, Vec<DnsQuery>>,
    pub activity: Vec<ActivitySection>,
    pub anchors: Anchors,
}

impl RunModel {
    /// Loads the model of `cap`: the stored sessions each correlated with
    /// the trees bound to them, exactly as `correlate --db` does.
    pub fn load(cap: &Capture) -> Result<Self, ReportError> {
        let facts = RunFacts::load(cap)?;
        let loss = Loss::load(cap, facts.complete)?;
        let events = cap.event_counts()?.iter().map(|(_, n)| n).sum();
        let has_bindings = cap.has_session_tables()?;
        let view = CaptureView::load(cap.reader())?;
        let mut sessions = Vec::new();
        let mut unbound = Vec::new();
        if has_bindings {
            // The unbound trees are the same for every session; row 0 is no
            // session's, so this asks for them alone.
            unbound = view.stored_trees(0)?.1;
            for s in cap.stored_sessions("")? {
                sessions.push(crate::views::run::correlate_stored(
                    &view, s.row, &s.session,
                )?);
            }
        }
        let processes = cap.processes()?;
        let process_ix = processes
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id, i))
            .collect();
        let mut dns: HashMap<i64, Vec<DnsQuery>> = HashMap::new();
        for q in read::dns_queries(&cap.conn).map_err(|e| cap.query_err(e))? {
            dns.entry(q.process_id).or_default().push(q);
        }
        Ok(Self {
            capture: cap.path.clone(),
            facts,
            loss,
            events,
            sessions,
            unbound,
            has_bindings,
            processes,
            process_ix,
            dns,
            activity: crate::views::show::activity_sections(cap)?,
            anchors: view.anchors,
        })
    }

    pub fn process(&self, id: i64) -> Option<&ProcessRecord> {
        self.process_ix.get(&id).map(|&i| &self.processes[i])
    }

    /// A process's lifetime in wall ms: its start, and its end when seen.
    pub fn lifetime_ms(&self, p: &ProcessRecord) -> (i64, Option<i64>) {
        let wall = |ns: i64| self.anchors.wall_ms(ns.max(0) as u64);
        (wall(p.start_mono_ns), p.end_mono_ns.map(wall))
    }

    /// Wall ms of a capture monotonic time.
    pub fn wall_ms(&self, mono_ns: u64) -> i64 {
        self.anchors.wall_ms(mono_ns)
    }
}
