//! Rule evaluation, in phases: the capture's context (processes, workspace,
//! home, TMPDIR, correlations), completeness, one pass over the relevant
//! events in time order (`scan`), the correlate-derived rules, then the
//! findings kept are completed (process chains and TCP outcomes, from what
//! the pass collected: no query per finding) and folded (`fold`).

use std::collections::HashMap;

use rusqlite::OptionalExtension;
use serde::Serialize;

use super::{
    AuditError,
    fold::{Collector, Folded, Pending, TcpRef},
    policy::{Policy, RuleMeta, Severity},
    scan,
};
use crate::{clock, store::Capture};

#[derive(Debug, Clone, Serialize)]
pub struct ChainEntry {
    pub pid: i64,
    pub process_id: i64,
    pub argv: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessInfo {
    pub pid: i64,
    pub process_id: i64,
    pub argv: Vec<String>,
    /// From the recorded root (or the oldest known ancestor) down to this process.
    pub chain: Vec<ChainEntry>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolRef {
    pub provider: String,
    pub session_id: String,
    pub tool_index: Option<i64>,
    pub call_id: Option<String>,
    pub role: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Evidence {
    /// `events.id` of the occurrences folded into this finding (the first
    /// `fold::MAX_EVENT_IDS`; a folded group: each example's first).
    pub event_ids: Vec<i64>,
    /// How many syscalls it stands for (a stored row may repeat).
    pub count: u64,
    pub result: Option<i64>,
    pub errno: Option<String>,
    pub flags: Option<String>,
    /// The policy entry that decided, when one did.
    pub matched: Option<String>,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub message: String,
    /// The event kind (`openat`, `exec`, `connect`, …) or `loss`/`gap`/`incomplete`.
    pub kind: String,
    /// `read`, `write`, `delete`, `exec`, `connect`, `send`, `dns`, …
    pub access: Option<String>,
    pub path: Option<String>,
    pub addr: Option<String>,
    pub port: Option<u16>,
    pub query: Option<String>,
    pub argv: Option<Vec<String>>,
    /// RFC 3339 UTC of the first occurrence.
    pub time: Option<String>,
    pub process: Option<ProcessInfo>,
    pub session: Option<ToolRef>,
    pub evidence: Evidence,
    /// Set when this finding stands for a group of many (see `fold`).
    pub folded: Option<Folded>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleInfo {
    pub id: String,
    pub severity: Severity,
    pub description: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub capture: String,
    pub policy: String,
    pub workspace: Option<String>,
    pub home: Option<String>,
    /// The recorded command's TMPDIR(s), allowed by `${tmpdir}/**`.
    pub tmpdirs: Vec<String>,
    /// Whether the capture holds bindings/correlations to attribute findings with.
    pub correlations: bool,
    pub rules: Vec<RuleInfo>,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
    }

    pub fn passed(&self) -> bool {
        self.count(Severity::Error) == 0
    }
}

/// How process chains and TCP outcomes are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// From what the single pass over the events collected (exec argv and
    /// `tcp_state` history), for the findings kept; findings folded per
    /// group. What `audit` does.
    #[default]
    Streaming,
    /// The approach before: two SQL queries per finding occurrence and chain
    /// entry (`events` by process, no fitting index), every finding and
    /// event id kept. Only for `cargo xtask bench audit`'s baseline.
    PerFindingQueries,
}

pub(super) struct Proc {
    pid: i64,
    parent_id: Option<i64>,
    argv: Vec<String>,
}

/// An event row, as far as the rules look at it.
pub struct Ev {
    pub id: i64,
    pub mono_ns: i64,
    pub wall_ns: i64,
    pub kind: String,
    pub process_id: Option<i64>,
    pub path: Option<String>,
    pub old_path: Option<String>,
    pub flags: Option<String>,
    pub result: Option<i64>,
    pub errno: Option<String>,
    pub family: Option<String>,
    pub addr: Option<String>,
    pub port: Option<i64>,
    pub query: Option<String>,
    pub argv: Option<String>,
    pub exe: Option<String>,
    pub filename: Option<String>,
    pub repeat: Option<i64>,
    pub tcp_state: Option<String>,
    /// A successful open: the file the kernel opened (see capture-schema),
    /// its device (kernel encoding) and inode.
    pub real_path: Option<String>,
    pub dev: Option<i64>,
    pub ino: Option<i64>,
}

/// What the pass over the events saw besides findings: each process's exec
/// argv in time order, and `tcp_state` changes by (process, addr, port).
#[derive(Default)]
pub(super) struct History {
    pub execs: HashMap<i64, Vec<(i64, String)>>,
    pub tcp: HashMap<(i64, String, i64), Vec<(i64, String)>>,
}

/// Everything the phases share.
pub(super) struct Ctx<'a> {
    pub cap: &'a Capture,
    pub strategy: Strategy,
    procs: HashMap<i64, Proc>,
    pub tool_of: HashMap<i64, ToolRef>,
    pub history: History,
}

pub(super) fn q(cap: &Capture, e: rusqlite::Error) -> AuditError {
    AuditError::Store(cap.query_err(e))
}

fn table_exists(cap: &Capture, name: &str) -> Result<bool, AuditError> {
    cap.conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1",
            [name],
            |_| Ok(()),
        )
        .optional()
        .map(|o| o.is_some())
        .map_err(|e| q(cap, e))
}

pub(super) fn argv_of(json: Option<&str>) -> Vec<String> {
    json.and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default()
}

/// The run-as user's home: the policy's `home`, else the user named in the
/// capture's `run_as` meta (`NAME (uid N, gid N)`) looked up on this machine.
fn home_of(cap: &Capture, policy: &Policy) -> Result<Option<String>, AuditError> {
    if let Some(h) = &policy.home {
        return Ok(Some(h.clone()));
    }
    let Some(run_as) = cap.meta("run_as").map_err(AuditError::Store)? else {
        return Ok(None);
    };
    let name = run_as.split(" (").next().unwrap_or(&run_as);
    Ok(nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.dir.display().to_string()))
}

/// The recorded command's `TMPDIR`s (meta `tmpdirs`, a JSON array written by
/// `record`): absolute, normalised, never `/` (record drops anything else;
/// checked again here, the capture is input).
fn tmpdirs_of(cap: &Capture) -> Result<Vec<String>, AuditError> {
    let raw = cap.meta("tmpdirs").map_err(AuditError::Store)?;
    let list: Vec<String> = raw
        .and_then(|r| serde_json::from_str(&r).ok())
        .unwrap_or_default();
    Ok(list
        .into_iter()
        .filter_map(|t| crate::envreset::usable_tmpdir(&t))
        .collect())
}

/// The processes table (for argv chains) and the root's cwd.
fn load_processes(cap: &Capture) -> Result<(HashMap<i64, Proc>, Option<String>), AuditError> {
    let mut procs = HashMap::new();
    let mut root_cwd: Option<String> = None;
    let mut st = cap
        .conn
        .prepare("SELECT id, pid, parent_id, argv, origin, cwd FROM processes ORDER BY id")
        .map_err(|e| q(cap, e))?;
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<i64>>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })
        .map_err(|e| q(cap, e))?;
    for row in rows {
        let (id, pid, parent_id, argv, origin, cwd) = row.map_err(|e| q(cap, e))?;
        if origin == "root" && root_cwd.is_none() {
            root_cwd = cwd;
        }
        procs.insert(
            id,
            Proc {
                pid,
                parent_id,
                argv: argv_of(argv.as_deref()),
            },
        );
    }
    Ok((procs, root_cwd))
}

pub(super) struct CorrRow {
    pub event_id: Option<i64>,
    pub process_id: Option<i64>,
    pub tool: ToolRef,
}

/// Whether the capture holds bindings, its correlation rows and, per event,
/// the tool call that names it.
type Correlations = (bool, Vec<CorrRow>, HashMap<i64, ToolRef>);

/// Whether the capture holds bindings; the correlation rows and, per event,
/// the tool call that names it (an attributed row over a flag).
fn load_correlations(cap: &Capture) -> Result<Correlations, AuditError> {
    let mut tool_of: HashMap<i64, ToolRef> = HashMap::new();
    let has_tables = table_exists(cap, "correlations")? && table_exists(cap, "bindings")?;
    let bindings: i64 = if has_tables {
        cap.conn
            .query_row("SELECT COUNT(*) FROM bindings", [], |r| r.get(0))
            .map_err(|e| q(cap, e))?
    } else {
        0
    };
    let mut rows_out = Vec::new();
    if bindings == 0 {
        return Ok((false, rows_out, tool_of));
    }
    let mut st = cap
        .conn
        .prepare(
            "SELECT c.event_id, c.process_id, s.provider, s.session_id, c.tool_index, c.call_id, c.role, c.reason
             FROM correlations c JOIN sessions s ON s.id = c.session_row ORDER BY c.id",
        )
        .map_err(|e| q(cap, e))?;
    let rows = st
        .query_map([], |r| {
            Ok(CorrRow {
                event_id: r.get(0)?,
                process_id: r.get(1)?,
                tool: ToolRef {
                    provider: r.get(2)?,
                    session_id: r.get(3)?,
                    tool_index: r.get(4)?,
                    call_id: r.get(5)?,
                    role: r.get(6)?,
                    reason: r.get(7)?,
                },
            })
        })
        .map_err(|e| q(cap, e))?;
    for row in rows {
        let row = row.map_err(|e| q(cap, e))?;
        if let Some(eid) = row.event_id {
            let better = row.tool.role == "attributed" || !tool_of.contains_key(&eid);
            if better {
                tool_of.insert(eid, row.tool.clone());
            }
        }
        rows_out.push(row);
    }
    Ok((true, rows_out, tool_of))
}

/// The rules as reported, and the metas the phases fire under.
pub(super) struct Rules {
    pub infos: Vec<RuleInfo>,
    pub denied: RuleMeta,
    pub loss_severity: Severity,
    pub unexplained: RuleMeta,
    pub claims: RuleMeta,
    pub notes: RuleMeta,
}

impl Rules {
    fn new(policy: &Policy) -> Self {
        let mut infos: Vec<RuleInfo> = Vec::new();
        let mut add = |m: &RuleMeta, sev: Severity, description: &str| {
            if m.enabled && !infos.iter().any(|r| r.id == m.id) {
                infos.push(RuleInfo {
                    id: m.id.clone(),
                    severity: sev,
                    description: description.to_string(),
                });
            }
        };
        let (w, d, x, n) = (
            &policy.writes,
            &policy.denied_paths,
            &policy.executables,
            &policy.network,
        );
        add(
            &w.meta,
            w.meta.severity,
            "File writes and deletes only under the allowed roots",
        );
        add(
            &d.meta,
            d.meta.severity,
            "Paths never to be read or written",
        );
        add(
            &x.meta,
            x.meta.severity,
            "Executables denied (or not in the allow list)",
        );
        add(
            &n.meta,
            n.meta.severity,
            "Network destinations and DNS names not declared in the policy",
        );
        let denied = RuleMeta {
            id: n.denied_id.clone(),
            severity: n.meta.severity,
            enabled: n.meta.enabled,
        };
        add(
            &denied,
            n.meta.severity,
            "Network destinations the policy denies",
        );
        let loss_severity = if policy.require_no_loss {
            policy.loss.severity
        } else {
            Severity::Note
        };
        add(
            &policy.loss,
            loss_severity,
            "The capture is complete: no lost events, no sequence gaps",
        );
        let mode_meta = |id: &str, mode: &super::policy::Mode| RuleMeta {
            id: id.into(),
            severity: mode.severity().unwrap_or(Severity::Note),
            enabled: mode.severity().is_some(),
        };
        let unexplained = mode_meta("unexplained-activity", &policy.unexplained_activity);
        let claims = mode_meta("claims-mismatch", &policy.claims_mismatch);
        add(
            &unexplained,
            unexplained.severity,
            "Activity no tool call explains (from correlate)",
        );
        add(
            &claims,
            claims.severity,
            "Tool calls claimed but not observed, or with mismatched outcomes (from correlate)",
        );
        let notes = RuleMeta {
            id: "audit-note".into(),
            severity: Severity::Note,
            enabled: true,
        };
        add(&notes, Severity::Note, "What the audit could not check");
        Self {
            infos,
            denied,
            loss_severity,
            unexplained,
            claims,
            notes,
        }
    }
}

/// A finding without an event (loss, gaps, notes).
fn plain(meta_id: &str, severity: Severity, kind: &str, message: String) -> Finding {
    Finding {
        rule: meta_id.to_string(),
        severity,
        message,
        kind: kind.into(),
        access: None,
        path: None,
        addr: None,
        port: None,
        query: None,
        argv: None,
        time: None,
        process: None,
        session: None,
        evidence: Evidence::default(),
        folded: None,
    }
}

pub(super) fn add_plain(out: &mut Collector, f: Finding) {
    out.add(
        Pending {
            finding: f,
            process: None,
            tcp: None,
        },
        None,
    );
}

pub(super) fn note(out: &mut Collector, rules: &Rules, message: String) {
    add_plain(out, plain(&rules.notes.id, Severity::Note, "note", message));
}

/// `capture-loss`: lost records, sequence gaps, an unfinished capture.
fn completeness(
    cap: &Capture,
    policy: &Policy,
    rules: &Rules,
    out: &mut Collector,
) -> Result<(), AuditError> {
    if !policy.loss.enabled {
        return Ok(());
    }
    let mk = |kind: &str, message: String, detail: String| {
        let mut f = plain(&policy.loss.id, rules.loss_severity, kind, message);
        f.evidence.detail = Some(detail);
        f
    };
    for (kind, lost) in cap.loss().map_err(AuditError::Store)? {
        if lost > 0 {
            let f = mk(
                "loss",
                format!("{lost} {kind} record(s) lost in the kernel (loss table)"),
                format!("loss.kind = {kind}, lost = {lost}"),
            );
            add_plain(out, f);
        }
    }
    let missing = cap.gap_missing().map_err(AuditError::Store)?;
    if missing > 0 {
        let cpus: i64 = cap
            .conn
            .query_row("SELECT COUNT(DISTINCT cpu) FROM gaps", [], |r| r.get(0))
            .map_err(|e| q(cap, e))?;
        let f = mk(
            "gap",
            format!("{missing} record(s) missing in per-CPU sequence gaps"),
            format!("gaps on {cpus} CPU(s), {missing} sequence numbers"),
        );
        add_plain(out, f);
    }
    let complete = cap.meta("complete").map_err(AuditError::Store)?;
    if complete.as_deref() != Some("true") {
        let reason = cap.meta("end_reason").map_err(AuditError::Store)?;
        let f = mk(
            "incomplete",
            "the capture is not complete (the recorder was killed or crashed)".into(),
            format!(
                "meta.complete = {}, end_reason = {}",
                complete.as_deref().unwrap_or("(none)"),
                reason.as_deref().unwrap_or("(none)")
            ),
        );
        add_plain(out, f);
    }
    Ok(())
}

/// Runs every enabled rule of `policy` over `cap`.
pub fn audit(cap: &Capture, policy: &Policy) -> Result<Report, AuditError> {
    audit_with(cap, policy, Strategy::default())
}

/// [`audit`] with a chosen [`Strategy`] (the benchmark times both).
pub fn audit_with(
    cap: &Capture,
    policy: &Policy,
    strategy: Strategy,
) -> Result<Report, AuditError> {
    let (procs, root_cwd) = load_processes(cap)?;
    let workspace = policy.workspace.clone().or(root_cwd);
    let home = home_of(cap, policy)?;
    let tmpdirs = tmpdirs_of(cap)?;
    let (correlations, corr_rows, tool_of) = load_correlations(cap)?;
    let rules = Rules::new(policy);
    let mut out = Collector::new(strategy == Strategy::Streaming);
    completeness(cap, policy, &rules, &mut out)?;
    let mut sets = scan::PathSets::new(
        policy,
        workspace.as_deref(),
        home.as_deref(),
        &tmpdirs,
        &rules,
        &mut out,
    )?;
    sets.denied_inodes = super::inodes::from_capture(cap)?;
    sets.denied_exe_inodes = super::inodes::executables_from_capture(cap)?;
    let mut ctx = Ctx {
        cap,
        strategy,
        procs,
        tool_of,
        history: History::default(),
    };
    scan::events(&mut ctx, policy, &rules, &sets, &mut out)?;
    correlated(&ctx, &rules, correlations, &corr_rows, &mut out)?;
    let mut findings = out.finish(|p| ctx.complete(p))?;
    // Most severe first, then by time; notes last.
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.time.cmp(&b.time)));
    Ok(Report {
        capture: cap.path.clone(),
        policy: policy.source.clone(),
        workspace,
        home,
        tmpdirs,
        correlations,
        rules: rules.infos,
        findings,
    })
}

/// Correlate-derived rules: `observed_not_claimed` rows are unexplained
/// activity; `claimed_not_observed` and `mismatch` rows are claims mismatches.
fn correlated(
    ctx: &Ctx,
    rules: &Rules,
    correlations: bool,
    rows: &[CorrRow],
    out: &mut Collector,
) -> Result<(), AuditError> {
    let (unexplained, claims) = (&rules.unexplained, &rules.claims);
    if (unexplained.enabled || claims.enabled) && !correlations {
        note(
            out,
            rules,
            "the capture holds no session bindings or correlations: unexplained-activity and claims-mismatch were not checked".into(),
        );
    }
    for row in rows {
        let meta = match row.tool.role.as_str() {
            "observed_not_claimed" if unexplained.enabled => unexplained,
            "claimed_not_observed" | "mismatch" if claims.enabled => claims,
            _ => continue,
        };
        let ev = match row.event_id {
            Some(id) => load_event(ctx.cap, id)?,
            None => None,
        };
        let what = row.tool.reason.clone().unwrap_or_default();
        let message = match row.tool.role.as_str() {
            "observed_not_claimed" => format!(
                "activity no tool call explains: {}",
                ev.as_ref().map(describe).unwrap_or_else(|| what.clone())
            ),
            "claimed_not_observed" => format!(
                "tool call #{} claimed but not observed: {what}",
                row.tool.tool_index.unwrap_or(-1)
            ),
            _ => format!(
                "tool call #{} outcome does not match: {what}",
                row.tool.tool_index.unwrap_or(-1)
            ),
        };
        let mut p = match &ev {
            Some(ev) => {
                let mut p = ctx.base(ev, meta, message, &ev.kind);
                let f = &mut p.finding;
                f.path = ev.path.clone();
                f.addr = ev.addr.clone();
                f.port = ev.port.and_then(|p| u16::try_from(p).ok());
                f.argv = ev.argv.as_deref().map(|a| argv_of(Some(a)));
                p
            }
            None => {
                let mut f = plain(&meta.id, meta.severity, &row.tool.role, message);
                f.process = ctx.process_info(row.process_id, None);
                Pending {
                    finding: f,
                    process: None,
                    tcp: None,
                }
            }
        };
        p.finding.session = Some(row.tool.clone());
        p.finding.evidence.detail = row.tool.reason.clone();
        ctx.prepare(&mut p)?;
        out.add(p, ev.as_ref());
    }
    Ok(())
}

impl Ctx<'_> {
    /// A finding for `ev` under `meta`; its process chain (and a connect's
    /// TCP outcome) is filled in by [`Ctx::complete`] if it is kept.
    pub fn base(&self, ev: &Ev, meta: &RuleMeta, message: String, access: &str) -> Pending {
        Pending {
            finding: Finding {
                rule: meta.id.clone(),
                severity: meta.severity,
                message,
                kind: ev.kind.clone(),
                access: Some(access.to_string()),
                path: None,
                addr: None,
                port: None,
                query: None,
                argv: None,
                time: Some(clock::rfc3339_ns(ev.wall_ns.max(0) as u64)),
                process: None,
                session: self.tool_of.get(&ev.id).cloned(),
                evidence: Evidence {
                    event_ids: vec![ev.id],
                    result: ev.result,
                    errno: ev.errno.clone(),
                    flags: ev.flags.clone(),
                    ..Evidence::default()
                },
                folded: None,
            },
            process: ev.process_id.map(|id| (id, Some(ev.mono_ns))),
            tcp: None,
        }
    }

    /// With [`Strategy::PerFindingQueries`], completes a finding at once, for
    /// every occurrence, as the audit did before (the benchmark's baseline).
    pub fn prepare(&self, p: &mut Pending) -> Result<(), AuditError> {
        if self.strategy == Strategy::PerFindingQueries {
            self.complete(p)?;
        }
        Ok(())
    }

    /// Fills in the process chain and a non-blocking connect's outcome.
    pub fn complete(&self, p: &mut Pending) -> Result<(), AuditError> {
        if let Some((id, at)) = p.process.take() {
            p.finding.process = self.process_info(Some(id), at);
        }
        if let Some(t) = p.tcp.take() {
            let state = match self.strategy {
                Strategy::Streaming => self.tcp_nearest(&t),
                Strategy::PerFindingQueries => tcp_outcome(self.cap, &t)?,
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
            Strategy::PerFindingQueries => exec_argv_sql(self.cap, id, t),
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

/// The baseline's per-chain-entry query (by process, then filtered: the
/// capture has no index on (process_id, kind, mono_ns)).
fn exec_argv_sql(cap: &Capture, id: i64, at: i64) -> Option<String> {
    let mut st = cap
        .conn
        .prepare_cached(
            "SELECT argv FROM events WHERE process_id = ?1 AND kind = 'exec' AND mono_ns <= ?2
             ORDER BY mono_ns DESC LIMIT 1",
        )
        .ok()?;
    st.query_row(rusqlite::params![id, at], |r| r.get::<_, Option<String>>(0))
        .optional()
        .ok()
        .flatten()
        .flatten()
}

fn describe(ev: &Ev) -> String {
    if let Some(p) = &ev.path {
        format!("{} {p}", ev.kind)
    } else if let Some(a) = &ev.addr {
        format!("{} {a}:{}", ev.kind, ev.port.unwrap_or(0))
    } else {
        format!("{} {}", ev.kind, argv_of(ev.argv.as_deref()).join(" "))
    }
}

/// The baseline's per-finding query.
fn tcp_outcome(cap: &Capture, t: &TcpRef) -> Result<Option<String>, AuditError> {
    let mut st = cap
        .conn
        .prepare_cached(
            "SELECT tcp_state FROM events WHERE kind = 'tcp_state' AND process_id = ?1
             AND addr = ?2 AND port = ?3 ORDER BY ABS(mono_ns - ?4) LIMIT 1",
        )
        .map_err(|e| q(cap, e))?;
    st.query_row(
        rusqlite::params![t.process_id, t.addr, t.port, t.mono_ns],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()
    .map(Option::flatten)
    .map_err(|e| q(cap, e))
}

fn load_event(cap: &Capture, id: i64) -> Result<Option<Ev>, AuditError> {
    cap.conn
        .query_row(
            &format!("SELECT {} FROM events WHERE id = ?1", ev_columns(cap)?),
            [id],
            ev_from_row,
        )
        .optional()
        .map_err(|e| q(cap, e))
}

/// Columns read into [`Ev`], in the order [`ev_from_row`] expects (a
/// capture made before kernel paths has no `real_path`: NULL).
pub(super) fn ev_columns(cap: &Capture) -> Result<String, AuditError> {
    let has_real: bool = cap
        .conn
        .query_row(
            "SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'real_path'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(|e| q(cap, e))?;
    Ok(format!(
        "id, wall_ns, kind, process_id, path, old_path, flags, result, errno, \
         family, addr, port, query, argv, exe, filename, repeat, mono_ns, tcp_state, {}",
        if has_real {
            "real_path, dev, ino"
        } else {
            "NULL, NULL, NULL"
        }
    ))
}

pub(super) fn ev_from_row(r: &rusqlite::Row) -> rusqlite::Result<Ev> {
    Ok(Ev {
        id: r.get(0)?,
        wall_ns: r.get(1)?,
        kind: r.get(2)?,
        process_id: r.get(3)?,
        path: r.get(4)?,
        old_path: r.get(5)?,
        flags: r.get(6)?,
        result: r.get(7)?,
        errno: r.get(8)?,
        family: r.get(9)?,
        addr: r.get(10)?,
        port: r.get(11)?,
        query: r.get(12)?,
        argv: r.get(13)?,
        exe: r.get(14)?,
        filename: r.get(15)?,
        repeat: r.get(16)?,
        mono_ns: r.get(17)?,
        tcp_state: r.get(18)?,
        real_path: r.get(19)?,
        dev: r.get(20)?,
        ino: r.get(21)?,
    })
}
