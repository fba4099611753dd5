//! Rule evaluation: one pass over the capture's relevant events, each checked
//! against the policy; repeated identical findings (same rule, process,
//! access and target) are folded into one with a count.

use std::collections::HashMap;

use rusqlite::OptionalExtension;
use serde::Serialize;

use super::{
    AuditError,
    policy::{
        Destination, ExePattern, PathPattern, Policy, RuleMeta, Severity, is_loopback, parse_addr,
    },
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
    /// `events.id` of every occurrence folded into this finding.
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

struct Proc {
    pid: i64,
    parent_id: Option<i64>,
    argv: Vec<String>,
}

/// An event row, as far as the rules look at it.
struct Ev {
    id: i64,
    mono_ns: i64,
    wall_ns: i64,
    kind: String,
    process_id: Option<i64>,
    path: Option<String>,
    old_path: Option<String>,
    flags: Option<String>,
    result: Option<i64>,
    errno: Option<String>,
    family: Option<String>,
    addr: Option<String>,
    port: Option<i64>,
    query: Option<String>,
    argv: Option<String>,
    exe: Option<String>,
    filename: Option<String>,
    repeat: Option<i64>,
}

const EVENT_KINDS: &str = "'open','openat','openat2','creat','unlink','unlinkat','rmdir','mkdir','mkdirat',\
'truncate','ftruncate','rename','renameat','renameat2','link','linkat','symlink','symlinkat',\
'exec','exec_failed','connect','sendto','sendmsg','sendmmsg','dns_write'";

/// A compiled path list, remembering which entry matched for the evidence.
struct PathSet {
    set: globset::GlobSet,
    texts: Vec<String>,
}

impl PathSet {
    fn new(
        pats: &[PathPattern],
        ws: Option<&str>,
        home: Option<&str>,
    ) -> Result<(Self, Vec<String>), AuditError> {
        let mut b = globset::GlobSetBuilder::new();
        let mut texts = Vec::new();
        let mut skipped = Vec::new();
        for p in pats {
            let expanded = if let Some(rest) = p.text.strip_prefix("${workspace}") {
                match ws {
                    Some(w) => format!("{}{rest}", globset::escape(w.trim_end_matches('/'))),
                    None => {
                        return Err(AuditError::NoWorkspace {
                            pattern: p.text.clone(),
                        });
                    }
                }
            } else if let Some(rest) = p.text.strip_prefix('~') {
                match home {
                    Some(h) => format!("{}{rest}", globset::escape(h.trim_end_matches('/'))),
                    // Without a home, `~` patterns cannot be placed: said in a
                    // note, never guessed.
                    None => {
                        skipped.push(p.text.clone());
                        continue;
                    }
                }
            } else {
                p.text.clone()
            };
            let m = globset::GlobBuilder::new(&expanded)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| AuditError::Pattern {
                    pattern: p.text.clone(),
                    reason: e.kind().to_string(),
                })?;
            b.add(m);
            texts.push(p.text.clone());
        }
        let set = b.build().map_err(|e| AuditError::Pattern {
            pattern: String::new(),
            reason: e.to_string(),
        })?;
        Ok((Self { set, texts }, skipped))
    }

    fn first_match(&self, path: &str) -> Option<&str> {
        self.set
            .matches(path)
            .first()
            .map(|&i| self.texts[i].as_str())
    }
}

struct Collector {
    findings: Vec<Finding>,
    index: HashMap<(String, Option<i64>, String, String), usize>,
}

impl Collector {
    /// Adds a finding, or folds it into an earlier one with the same rule,
    /// process, access and target.
    fn add(&mut self, f: Finding, ev: Option<&Ev>) {
        let target = [&f.path, &f.addr, &f.query]
            .iter()
            .filter_map(|s| s.as_deref())
            .collect::<Vec<_>>()
            .join("|")
            + &f.port.map(|p| format!(":{p}")).unwrap_or_default()
            + &f.argv.as_ref().map(|a| a.join(" ")).unwrap_or_default()
            // Findings without an event (loss, gaps, notes) differ by what they say.
            + "|" + &f.kind
            + &ev.map_or_else(|| format!("|{}", f.message), |_| String::new());
        let key = (
            f.rule.clone(),
            f.process.as_ref().map(|p| p.process_id),
            f.access.clone().unwrap_or_default(),
            target,
        );
        let n = ev.map(|e| e.repeat.unwrap_or(1).max(1) as u64).unwrap_or(1);
        if let Some(&i) = self.index.get(&key) {
            let e = &mut self.findings[i].evidence;
            e.count += n;
            if let Some(ev) = ev {
                e.event_ids.push(ev.id);
            }
            return;
        }
        let mut f = f;
        f.evidence.count = n;
        self.index.insert(key, self.findings.len());
        self.findings.push(f);
    }
}

fn q(cap: &Capture, e: rusqlite::Error) -> AuditError {
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

fn argv_of(json: Option<&str>) -> Vec<String> {
    json.and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default()
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
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

/// Runs every enabled rule of `policy` over `cap`.
pub fn audit(cap: &Capture, policy: &Policy) -> Result<Report, AuditError> {
    // Processes, for argv chains up to the root.
    let mut procs: HashMap<i64, Proc> = HashMap::new();
    let mut root_cwd: Option<String> = None;
    {
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
    }
    // The argv a process had at a moment: its last exec before then (a
    // shell that later execs its last command in place must still show as
    // the shell that did the earlier work), else the stored argv.
    let argv_at = |id: i64, at: Option<i64>, stored: &[String]| -> Vec<String> {
        at.and_then(|t| {
            // Cached: one compiled statement for every chain entry.
            let mut st = cap
                .conn
                .prepare_cached(
                    "SELECT argv FROM events WHERE process_id = ?1 AND kind = 'exec' AND mono_ns <= ?2
                     ORDER BY mono_ns DESC LIMIT 1",
                )
                .ok()?;
            st.query_row(rusqlite::params![id, t], |r| r.get::<_, Option<String>>(0))
                .optional()
                .ok()
                .flatten()
                .flatten()
        })
        .map(|a| argv_of(Some(&a)))
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| stored.to_vec())
    };
    let process_info = |id: Option<i64>, at: Option<i64>| -> Option<ProcessInfo> {
        let id = id?;
        let p = procs.get(&id)?;
        let mut chain = Vec::new();
        let mut cur = Some(id);
        // Bounded: a corrupt parent_id cycle must not hang the audit.
        while let Some(c) = cur {
            if chain.len() > 256 {
                break;
            }
            let Some(pp) = procs.get(&c) else { break };
            chain.push(ChainEntry {
                pid: pp.pid,
                process_id: c,
                argv: argv_at(c, at, &pp.argv),
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
    };

    let workspace = policy.workspace.clone().or(root_cwd);
    let home = home_of(cap, policy)?;

    // Correlations, when the capture stored any.
    let mut tool_of: HashMap<i64, ToolRef> = HashMap::new();
    let has_corr_tables = table_exists(cap, "correlations")? && table_exists(cap, "bindings")?;
    let bindings: i64 = if has_corr_tables {
        cap.conn
            .query_row("SELECT COUNT(*) FROM bindings", [], |r| r.get(0))
            .map_err(|e| q(cap, e))?
    } else {
        0
    };
    let correlations = bindings > 0;
    struct CorrRow {
        event_id: Option<i64>,
        process_id: Option<i64>,
        tool: ToolRef,
    }
    let mut corr_rows: Vec<CorrRow> = Vec::new();
    if correlations {
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
                // An attributed row names the call; prefer it over a flag.
                let better = row.tool.role == "attributed" || !tool_of.contains_key(&eid);
                if better {
                    tool_of.insert(eid, row.tool.clone());
                }
            }
            corr_rows.push(row);
        }
    }

    let mut rules: Vec<RuleInfo> = Vec::new();
    let mut add_rule = |m: &RuleMeta, sev: Severity, description: &str| {
        if m.enabled && !rules.iter().any(|r| r.id == m.id) {
            rules.push(RuleInfo {
                id: m.id.clone(),
                severity: sev,
                description: description.to_string(),
            });
        }
    };
    let w = &policy.writes;
    let d = &policy.denied_paths;
    let x = &policy.executables;
    let n = &policy.network;
    add_rule(
        &w.meta,
        w.meta.severity,
        "File writes and deletes only under the allowed roots",
    );
    add_rule(
        &d.meta,
        d.meta.severity,
        "Paths never to be read or written",
    );
    add_rule(
        &x.meta,
        x.meta.severity,
        "Executables denied (or not in the allow list)",
    );
    add_rule(
        &n.meta,
        n.meta.severity,
        "Network destinations and DNS names not declared in the policy",
    );
    let denied_meta = RuleMeta {
        id: n.denied_id.clone(),
        severity: n.meta.severity,
        enabled: n.meta.enabled,
    };
    add_rule(
        &denied_meta,
        n.meta.severity,
        "Network destinations the policy denies",
    );
    let loss_sev = if policy.require_no_loss {
        policy.loss.severity
    } else {
        Severity::Note
    };
    add_rule(
        &policy.loss,
        loss_sev,
        "The capture is complete: no lost events, no sequence gaps",
    );
    let unexplained = RuleMeta {
        id: "unexplained-activity".into(),
        severity: policy
            .unexplained_activity
            .severity()
            .unwrap_or(Severity::Note),
        enabled: policy.unexplained_activity.severity().is_some(),
    };
    let claims = RuleMeta {
        id: "claims-mismatch".into(),
        severity: policy.claims_mismatch.severity().unwrap_or(Severity::Note),
        enabled: policy.claims_mismatch.severity().is_some(),
    };
    add_rule(
        &unexplained,
        unexplained.severity,
        "Activity no tool call explains (from correlate)",
    );
    add_rule(
        &claims,
        claims.severity,
        "Tool calls claimed but not observed, or with mismatched outcomes (from correlate)",
    );
    let notes_meta = RuleMeta {
        id: "audit-note".into(),
        severity: Severity::Note,
        enabled: true,
    };
    add_rule(
        &notes_meta,
        Severity::Note,
        "What the audit could not check",
    );

    let mut out = Collector {
        findings: Vec::new(),
        index: HashMap::new(),
    };
    let note = |out: &mut Collector, message: String| {
        out.add(
            Finding {
                rule: notes_meta.id.clone(),
                severity: Severity::Note,
                message,
                kind: "note".into(),
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
            },
            None,
        )
    };

    // --- completeness -----------------------------------------------------
    if policy.loss.enabled {
        let mk = |kind: &str, message: String, detail: Option<String>| Finding {
            rule: policy.loss.id.clone(),
            severity: loss_sev,
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
            evidence: Evidence {
                detail,
                ..Evidence::default()
            },
        };
        for (kind, lost) in cap.loss().map_err(AuditError::Store)? {
            if lost > 0 {
                out.add(
                    mk(
                        "loss",
                        format!("{lost} {kind} record(s) lost in the kernel (loss table)"),
                        Some(format!("loss.kind = {kind}, lost = {lost}")),
                    ),
                    None,
                );
            }
        }
        let missing = cap.gap_missing().map_err(AuditError::Store)?;
        if missing > 0 {
            let cpus: i64 = cap
                .conn
                .query_row("SELECT COUNT(DISTINCT cpu) FROM gaps", [], |r| r.get(0))
                .map_err(|e| q(cap, e))?;
            out.add(
                mk(
                    "gap",
                    format!("{missing} record(s) missing in per-CPU sequence gaps"),
                    Some(format!("gaps on {cpus} CPU(s), {missing} sequence numbers")),
                ),
                None,
            );
        }
        let complete = cap.meta("complete").map_err(AuditError::Store)?;
        if complete.as_deref() != Some("true") {
            let reason = cap.meta("end_reason").map_err(AuditError::Store)?;
            out.add(
                mk(
                    "incomplete",
                    "the capture is not complete (the recorder was killed or crashed)".into(),
                    Some(format!(
                        "meta.complete = {}, end_reason = {}",
                        complete.as_deref().unwrap_or("(none)"),
                        reason.as_deref().unwrap_or("(none)")
                    )),
                ),
                None,
            );
        }
    }

    // --- path sets ----------------------------------------------------------
    let (write_allow, s1) = PathSet::new(&w.allow, workspace.as_deref(), home.as_deref())?;
    let (deny_read, s2) = PathSet::new(&d.read, workspace.as_deref(), home.as_deref())?;
    let (deny_write, s3) = PathSet::new(&d.write, workspace.as_deref(), home.as_deref())?;
    let skipped: Vec<String> = s1.into_iter().chain(s2).chain(s3).collect();
    if !skipped.is_empty() {
        note(
            &mut out,
            format!(
                "the run-as user's home is unknown (no run_as in the capture, or no such user here; set `home` in the policy): not checked: {}",
                skipped.join(", ")
            ),
        );
    }

    // --- events -------------------------------------------------------------
    let sql = format!(
        "SELECT {EV_COLUMNS} FROM events WHERE kind IN ({EVENT_KINDS}) ORDER BY mono_ns, id"
    );
    let mut st = cap.conn.prepare(&sql).map_err(|e| q(cap, e))?;
    let rows = st.query_map([], ev_from_row).map_err(|e| q(cap, e))?;

    let base = |ev: &Ev, meta: &RuleMeta, message: String, access: &str| Finding {
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
        process: process_info(ev.process_id, Some(ev.mono_ns)),
        session: tool_of.get(&ev.id).cloned(),
        evidence: Evidence {
            event_ids: vec![ev.id],
            result: ev.result,
            errno: ev.errno.clone(),
            flags: ev.flags.clone(),
            ..Evidence::default()
        },
    };

    for ev in rows {
        let ev = ev.map_err(|e| q(cap, e))?;
        let failed = ev.result.is_some_and(|r| r < 0);
        match ev.kind.as_str() {
            "exec" | "exec_failed" => {
                // A shell trying each $PATH entry gets ENOENT for all but
                // one: those tries are not runs.
                if ev.kind == "exec_failed" && ev.errno.as_deref() == Some("ENOENT") {
                    continue;
                }
                if !x.meta.enabled {
                    continue;
                }
                let argv = argv_of(ev.argv.as_deref());
                let verdict = exe_verdict(x, &ev, &argv);
                if let Some((message, matched)) = verdict {
                    let mut f = base(&ev, &x.meta, message, "exec");
                    f.path = ev.exe.clone().or(ev.filename.clone());
                    f.argv = Some(argv);
                    f.evidence.matched = matched;
                    out.add(f, Some(&ev));
                }
            }
            "connect" | "sendto" | "sendmsg" | "sendmmsg" | "dns_write" => {
                if !n.meta.enabled {
                    continue;
                }
                for (meta, message, matched, is_dns_name) in net_verdicts(n, &denied_meta, &ev) {
                    let access = if is_dns_name {
                        "dns"
                    } else if ev.kind == "connect" {
                        "connect"
                    } else {
                        "send"
                    };
                    let mut message = message;
                    // A non-blocking connect's outcome is a later tcp_state
                    // event: say whether the connection was made.
                    let tcp = if !is_dns_name && ev.errno.as_deref() == Some("EINPROGRESS") {
                        tcp_outcome(cap, &ev)?
                    } else {
                        None
                    };
                    if let Some(t) = &tcp {
                        message += &format!(" (TCP {t})");
                    }
                    let mut f = base(&ev, &meta, message, access);
                    if let Some(t) = tcp {
                        f.evidence.detail = Some(format!("tcp_state = {t}"));
                    }
                    if is_dns_name {
                        f.query = ev.query.clone();
                    } else {
                        f.addr = ev.addr.clone();
                        f.port = ev.port.and_then(|p| u16::try_from(p).ok());
                    }
                    f.evidence.matched = matched;
                    out.add(f, Some(&ev));
                }
            }
            _ => {
                // File syscalls: (access, path) pairs; a rename deletes its
                // old name and writes its new one.
                let mut acc: Vec<(&str, &str)> = Vec::new();
                let p = ev.path.as_deref();
                match ev.kind.as_str() {
                    "open" | "openat" | "openat2" => {
                        let fl = ev.flags.as_deref().unwrap_or("");
                        let writes = fl
                            .split(',')
                            .any(|f| matches!(f, "write" | "create" | "truncate" | "append"));
                        if let Some(p) = p {
                            acc.push((if writes { "write" } else { "read" }, p));
                        }
                    }
                    "unlink" | "unlinkat" | "rmdir" => acc.extend(p.map(|p| ("delete", p))),
                    "rename" | "renameat" | "renameat2" => {
                        acc.extend(ev.old_path.as_deref().map(|p| ("delete", p)));
                        acc.extend(p.map(|p| ("write", p)));
                    }
                    _ => acc.extend(p.map(|p| ("write", p))),
                }
                for (access, path) in acc {
                    // A cut path cannot be judged as a whole; `…` marks it.
                    if !path.starts_with('/') {
                        continue;
                    }
                    // Nothing was there to read or change.
                    if failed && ev.errno.as_deref() == Some("ENOENT") {
                        continue;
                    }
                    let is_write = access != "read";
                    if d.meta.enabled && (!failed || d.include_failed) {
                        let hit = if is_write {
                            deny_write.first_match(path)
                        } else {
                            deny_read.first_match(path)
                        };
                        if let Some(m) = hit {
                            let verb = if failed { "attempted " } else { "" };
                            let mut f = base(
                                &ev,
                                &d.meta,
                                format!("{verb}{access} of denied path {path}"),
                                access,
                            );
                            f.path = Some(path.to_string());
                            f.evidence.matched = Some(m.to_string());
                            out.add(f, Some(&ev));
                            continue;
                        }
                    }
                    if is_write
                        && w.meta.enabled
                        && (!failed || w.include_failed)
                        && write_allow.first_match(path).is_none()
                    {
                        let verb = if failed { "attempted " } else { "" };
                        let mut f = base(
                            &ev,
                            &w.meta,
                            format!("{verb}{access} outside the allowed roots: {path}"),
                            access,
                        );
                        f.path = Some(path.to_string());
                        out.add(f, Some(&ev));
                    }
                }
            }
        }
    }
    drop(st);

    // --- correlate-derived rules ------------------------------------------
    let wants_corr = unexplained.enabled || claims.enabled;
    if wants_corr && !correlations {
        note(
            &mut out,
            "the capture holds no session bindings or correlations: unexplained-activity and claims-mismatch were not checked".into(),
        );
    }
    if correlations {
        for row in &corr_rows {
            let meta = match row.tool.role.as_str() {
                "observed_not_claimed" if unexplained.enabled => &unexplained,
                "claimed_not_observed" | "mismatch" if claims.enabled => &claims,
                _ => continue,
            };
            let ev = match row.event_id {
                Some(id) => load_event(cap, id)?,
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
            let mut f = match &ev {
                Some(ev) => {
                    let mut f = base(ev, meta, message, &ev.kind);
                    f.path = ev.path.clone();
                    f.addr = ev.addr.clone();
                    f.port = ev.port.and_then(|p| u16::try_from(p).ok());
                    f.argv = ev.argv.as_deref().map(|a| argv_of(Some(a)));
                    f
                }
                None => Finding {
                    rule: meta.id.clone(),
                    severity: meta.severity,
                    message,
                    kind: row.tool.role.clone(),
                    access: None,
                    path: None,
                    addr: None,
                    port: None,
                    query: None,
                    argv: None,
                    time: None,
                    process: process_info(row.process_id, None),
                    session: None,
                    evidence: Evidence::default(),
                },
            };
            f.session = Some(row.tool.clone());
            f.evidence.detail = row.tool.reason.clone();
            out.add(f, ev.as_ref());
        }
    }

    let mut findings = out.findings;
    // Most severe first, then by time; notes last.
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.time.cmp(&b.time)));
    Ok(Report {
        capture: cap.path.clone(),
        policy: policy.source.clone(),
        workspace,
        home,
        correlations,
        rules,
        findings,
    })
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

/// The `tcp_state` of the same process and destination nearest in time to
/// `ev` (the state change is stamped in the kernel before the connect
/// syscall returns, so it may precede the connect row).
fn tcp_outcome(cap: &Capture, ev: &Ev) -> Result<Option<String>, AuditError> {
    let mut st = cap
        .conn
        .prepare_cached(
            "SELECT tcp_state FROM events WHERE kind = 'tcp_state' AND process_id = ?1
             AND addr = ?2 AND port = ?3 ORDER BY ABS(mono_ns - ?4) LIMIT 1",
        )
        .map_err(|e| q(cap, e))?;
    st.query_row(
        rusqlite::params![ev.process_id, ev.addr, ev.port, ev.mono_ns],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()
    .map(Option::flatten)
    .map_err(|e| q(cap, e))
}

fn load_event(cap: &Capture, id: i64) -> Result<Option<Ev>, AuditError> {
    cap.conn
        .query_row(
            &format!("SELECT {EV_COLUMNS} FROM events WHERE id = ?1"),
            [id],
            ev_from_row,
        )
        .optional()
        .map_err(|e| q(cap, e))
}

/// Columns read into [`Ev`], in the order [`ev_from_row`] expects.
const EV_COLUMNS: &str = "id, wall_ns, kind, process_id, path, old_path, flags, result, errno, \
    family, addr, port, query, argv, exe, filename, repeat, mono_ns";

fn ev_from_row(r: &rusqlite::Row) -> rusqlite::Result<Ev> {
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
    })
}

fn exe_matches(p: &ExePattern, ev: &Ev, argv: &[String]) -> bool {
    if p.by_path {
        [ev.exe.as_deref(), ev.filename.as_deref()]
            .into_iter()
            .flatten()
            .any(|s| p.matcher.is_match(s))
    } else {
        // A symlinked tool (`nc` → `nc.openbsd`) is known by the name it was
        // run as as well as by the binary the kernel resolved.
        [
            ev.exe.as_deref(),
            ev.filename.as_deref(),
            argv.first().map(String::as_str),
        ]
        .into_iter()
        .flatten()
        .any(|s| p.matcher.is_match(basename(s)))
    }
}

fn exe_verdict(
    x: &super::policy::ExecutablesRule,
    ev: &Ev,
    argv: &[String],
) -> Option<(String, Option<String>)> {
    let shown = ev
        .exe
        .clone()
        .or(ev.filename.clone())
        .unwrap_or_else(|| "?".into());
    let attempted = if ev.kind == "exec_failed" {
        "attempted "
    } else {
        ""
    };
    if let Some(p) = x.deny.iter().find(|p| exe_matches(p, ev, argv)) {
        return Some((
            format!("{attempted}exec of denied executable {shown}"),
            Some(p.text.clone()),
        ));
    }
    if !x.allow.is_empty() && !x.allow.iter().any(|p| exe_matches(p, ev, argv)) {
        return Some((
            format!("{attempted}exec of {shown}, not in the allowed executables"),
            None,
        ));
    }
    None
}

/// (rule, message, matched entry, is a DNS name finding)
fn net_verdicts(
    n: &super::policy::NetworkRule,
    denied: &RuleMeta,
    ev: &Ev,
) -> Vec<(RuleMeta, String, Option<String>, bool)> {
    let mut out = Vec::new();
    // DNS names asked: checked against the name entries.
    if let Some(qs) = &ev.query {
        let names: Vec<Destination> = n
            .allow
            .iter()
            .filter(|d| matches!(d, Destination::Name { .. }))
            .cloned()
            .collect();
        for name in qs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(d) = n.deny.iter().find(|d| d.matches_name(name)) {
                out.push((
                    denied.clone(),
                    format!("DNS query for denied name {name}"),
                    Some(d.text().to_string()),
                    true,
                ));
            } else if !names.iter().any(|d| d.matches_name(name)) {
                out.push((
                    n.meta.clone(),
                    format!("DNS query for undeclared name {name}"),
                    None,
                    true,
                ));
            }
        }
    }
    if !matches!(ev.family.as_deref(), Some("ipv4" | "ipv6")) {
        return out;
    }
    let Some(ip) = ev.addr.as_deref().and_then(parse_addr) else {
        return out;
    };
    let port = ev.port.and_then(|p| u16::try_from(p).ok());
    let dest = format!(
        "{}:{}",
        ev.addr.as_deref().unwrap_or("?"),
        port.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
    );
    let failed = match (&ev.errno, ev.result) {
        (Some(e), Some(r)) if r < 0 && e != "EINPROGRESS" => format!(" (failed: {e})"),
        _ => String::new(),
    };
    if let Some(d) = n.deny.iter().find(|d| d.matches_addr(ip, port)) {
        out.push((
            denied.clone(),
            format!("{} to denied destination {dest}{failed}", ev.kind),
            Some(d.text().to_string()),
            false,
        ));
        return out;
    }
    // Port 53 is the resolver: the names asked are what the policy checks.
    if n.allow_dns && port == Some(53) {
        return out;
    }
    if n.allow_loopback && is_loopback(ip) {
        return out;
    }
    if !n.allow.iter().any(|d| d.matches_addr(ip, port)) {
        let lo = if is_loopback(ip) { "loopback " } else { "" };
        out.push((
            n.meta.clone(),
            format!("{} to undeclared {lo}destination {dest}{failed}", ev.kind),
            None,
            false,
        ));
    }
    out
}
