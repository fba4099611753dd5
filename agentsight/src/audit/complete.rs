//! The last phase, completion: a finding's process chain (argv at the time)
//! and a non-blocking connect's TCP outcome, for the findings kept — from
//! what the pass over the events collected, or (the benchmark's baseline,
//! [`Strategy::PerFindingQueries`]) by a query per finding.

use super::{
    AuditError,
    context::{Ctx, Ev, argv_of},
    fold::{Pending, TcpRef},
    policy::RuleMeta,
    report::{Access, ChainEntry, Evidence, Finding, FindingKind, ProcessInfo, Strategy},
};
use crate::clock;

impl Ctx<'_> {
    /// A finding for `ev` under `meta`; its process chain (and a connect's
    /// TCP outcome) is filled in by [`Ctx::complete`] if it is kept.
    pub fn base(&self, ev: &Ev, meta: &RuleMeta, message: String, access: Access) -> Pending {
        Pending {
            finding: Finding {
                rule: meta.id.clone(),
                severity: meta.severity,
                message,
                kind: FindingKind::Event(ev.kind.as_str().to_owned()),
                access: Some(access),
                path: None,
                addr: None,
                port: None,
                query: None,
                argv: None,
                time: Some(clock::rfc3339_ns(ev.wall_ns.max(0) as u64)),
                process: None,
                // Known now (not only on completion): folding keeps a
                // container's findings apart from the host's.
                container: self.container_of(ev.process_id).cloned(),
                session: self
                    .tool_of
                    .get(&ev.id)
                    .or_else(|| ev.process_id.and_then(|p| self.tool_of_process.get(&p)))
                    .cloned(),
                evidence: Evidence {
                    event_ids: vec![ev.id],
                    result: ev.result,
                    errno: ev.errno.clone(),
                    flags: ev.flags.clone(),
                    ..Evidence::default()
                },
                folded: None,
                blocked: false,
            },
            process: ev.process_id.map(|id| (id, Some(ev.mono_ns))),
            tcp: None,
        }
    }

    /// With [`Strategy::PerFindingQueries`], completes a finding at once, for
    /// every occurrence, as the audit did before (the benchmark's baseline).
    pub fn complete_if_per_finding(&self, p: &mut Pending) -> Result<(), AuditError> {
        if self.strategy == Strategy::PerFindingQueries {
            self.complete(p)?;
        }
        Ok(())
    }

    /// Fills in the process chain and a non-blocking connect's outcome.
    pub fn complete(&self, p: &mut Pending) -> Result<(), AuditError> {
        if let Some((id, at)) = p.process.take() {
            p.finding.process = self.process_info(Some(id), at);
            p.finding.container = self.container_of(Some(id)).cloned();
        }
        if let Some(t) = p.tcp.take() {
            let state = match self.strategy {
                Strategy::Streaming => self.tcp_nearest(&t),
                Strategy::PerFindingQueries => {
                    self.cap
                        .tcp_state_nearest(t.process_id, &t.addr, t.port, t.mono_ns)?
                }
            };
            if let Some(s) = state {
                p.finding.message += &format!(" (TCP {s})");
                p.finding.evidence.detail = Some(format!("tcp_state = {s}"));
            }
        }
        Ok(())
    }

    /// The `tcp_state` of the same process and destination nearest in time
    /// (the state change is stamped in the kernel before the connect syscall
    /// returns, so it may precede the connect row); the earliest on a tie.
    fn tcp_nearest(&self, t: &TcpRef) -> Option<String> {
        let list = self
            .history
            .tcp
            .get(&(t.process_id, t.addr.clone(), t.port))?;
        list.iter()
            .min_by_key(|(mono, _)| (mono - t.mono_ns).unsigned_abs())
            .map(|(_, s)| s.clone())
    }

    /// The argv a process had at a moment: its last exec before then (a
    /// shell that later execs its last command in place must still show as
    /// the shell that did the earlier work), else the stored argv.
    fn argv_at(&self, id: i64, at: Option<i64>, stored: &[String]) -> Vec<String> {
        let found = at.and_then(|t| match self.strategy {
            Strategy::Streaming => {
                let list = self.history.execs.get(&id)?;
                let n = list.partition_point(|(mono, _)| *mono <= t);
                n.checked_sub(1).map(|i| list[i].1.clone())
            }
            Strategy::PerFindingQueries => self.cap.exec_argv_at(id, t),
        });
        found
            .map(|a| argv_of(Some(&a)))
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| stored.to_vec())
    }

    pub fn process_info(&self, id: Option<i64>, at: Option<i64>) -> Option<ProcessInfo> {
        let id = id?;
        let p = self.procs.get(&id)?;
        let mut chain = Vec::new();
        let mut cur = Some(id);
        // Bounded: a corrupt parent_id cycle must not hang the audit.
        while let Some(c) = cur {
            if chain.len() > 256 {
                break;
            }
            let Some(pp) = self.procs.get(&c) else { break };
            chain.push(ChainEntry {
                pid: pp.pid,
                process_id: c,
                argv: self.argv_at(c, at, &pp.argv),
            });
            cur = pp.parent_id.filter(|&pid| pid != c);
        }
        let argv = chain.first().map(|c| c.argv.clone()).unwrap_or_default();
        chain.reverse();
        Some(ProcessInfo {
            pid: p.pid,
            process_id: id,
            argv,
            chain,
        })
    }
}
