//! What the report draws, taken from the one run model
//! ([`crate::views::run::RunModel`]: `correlate` per stored session, the
//! unbound trees, the run's meta, loss and completeness) and the store's
//! read API (processes, DNS names, `show`'s activity sections) — never a
//! second copy of correlation.

use std::collections::HashMap;

use crate::{
    clock::Anchors,
    correlate::{self, TreeInfo},
    store::{
        Capture,
        enforcement::{DenialRow, EnforcementMeta},
        meta::{Completeness, RunMeta},
        read::{DnsQuery, ProcessRecord},
        run::ActivitySection,
    },
    views::{run::RunModel, show::LossStatement},
};

use super::ReportError;

/// One capture, as the report shows it.
pub struct ReportModel {
    pub capture: String,
    pub meta: RunMeta,
    pub loss: LossStatement,
    pub completeness: Completeness,
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
    /// The arguments an MCP call's transcript recorded (compact JSON), by
    /// (session index, tool index): correlate's report does not carry them.
    pub mcp_arguments: HashMap<(usize, usize), String>,
    /// `record --enforce`: its meta and the accesses it refused; None for
    /// a capture recorded without it.
    pub enforcement: Option<(EnforcementMeta, Vec<DenialRow>)>,
}

impl ReportModel {
    /// Loads the model of `cap`: the stored sessions each correlated with
    /// the trees bound to them, exactly as `correlate --db` does.
    pub fn load(cap: &Capture) -> Result<Self, ReportError> {
        let run = RunModel::load(cap)?;
        let loss = LossStatement::of(&run)?;
        let events = cap.event_counts()?.iter().map(|(_, n)| n).sum();
        let has_bindings = cap.has_session_tables()?;
        let mut sessions = Vec::new();
        let mut unbound = Vec::new();
        let mut mcp_arguments = HashMap::new();
        if has_bindings {
            unbound = run.view()?.unbound_trees()?;
            for (si, s) in run.correlated_sessions()?.into_iter().enumerate() {
                for (ti, t) in s.session.tools.iter().enumerate() {
                    if let Some(a) = t.mcp.as_ref().and_then(|m| m.arguments.as_ref()) {
                        mcp_arguments.insert((si, ti), a.to_string());
                    }
                }
                sessions.push(s.report);
            }
        }
        let processes = cap.processes()?;
        let process_ix = processes
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id, i))
            .collect();
        let mut dns: HashMap<i64, Vec<DnsQuery>> = HashMap::new();
        for q in cap.dns_queries()? {
            dns.entry(q.process_id).or_default().push(q);
        }
        let reader = cap.reader();
        let (meta, denials) = (reader.enforcement_meta()?, reader.enforcement_denials()?);
        let enforcement =
            (meta.is_some() || !denials.is_empty()).then(|| (meta.unwrap_or_default(), denials));
        Ok(Self {
            enforcement,
            capture: cap.path.clone(),
            completeness: run.completeness(),
            loss,
            events,
            sessions,
            unbound,
            has_bindings,
            processes,
            process_ix,
            dns,
            activity: cap.activity_sections()?,
            anchors: run.view()?.anchors.clone(),
            meta: run.meta,
            mcp_arguments,
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
