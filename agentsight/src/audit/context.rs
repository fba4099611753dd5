//! Phase 1, the capture's context: what the rules read besides the events —
//! processes (for argv chains), the workspace, the run-as user's home, the
//! recorded TMPDIRs, and the correlations `record` stored — and the event
//! rows the rules look at.

use std::collections::HashMap;

use super::{
    AuditError,
    policy::Policy,
    report::{ContainerRef, Role, Strategy, ToolRef},
};
use crate::store::{Capture, audit_reads::FullEvent, meta::RunMeta};

/// What the phases read from the capture before the pass over the events.
pub(in crate::audit) struct Context {
    pub procs: HashMap<i64, Proc>,
    /// The policy's workspace, else the recorded root's cwd.
    pub workspace: Option<String>,
    pub home: Option<String>,
    pub tmpdirs: Vec<String>,
    /// Whether the capture holds bindings (correlations to check).
    pub correlations: bool,
    pub corr_rows: Vec<CorrRow>,
    /// The events the flagged correlation rows name, read once.
    pub flagged_events: HashMap<i64, Ev>,
    /// Per event, the tool call that names it.
    pub tool_of: HashMap<i64, ToolRef>,
    /// Per process row, the one tool call its attributed rows name.
    pub tool_of_process: HashMap<i64, ToolRef>,
}

impl Context {
    pub fn load(cap: &Capture, policy: &Policy) -> Result<Self, AuditError> {
        let (procs, root_cwd) = load_processes(cap)?;
        let meta = cap.run_meta().map_err(AuditError::Store)?;
        let home = home_of(&meta, policy);
        let tmpdirs = tmpdirs_of(&meta);
        let Correlations {
            correlations,
            corr_rows,
            flagged_events,
            tool_of,
        } = load_correlations(cap)?;
        let tool_of_process = calls_of_processes(&corr_rows);
        Ok(Context {
            procs,
            workspace: policy.workspace.clone().or(root_cwd),
            home,
            tmpdirs,
            correlations,
            corr_rows,
            flagged_events,
            tool_of,
            tool_of_process,
        })
    }
}

/// Per process row, the tool call its attributed correlation rows name, when
/// they name exactly one: `record` stores a row per exec, not per open, so
/// the read of `~/.ssh/id_rsa` by the `cat` a shell call ran is that call's
/// through its process (reason `process`). A process whose rows name two
/// calls (an MCP server serving several) names none.
fn calls_of_processes(rows: &[CorrRow]) -> HashMap<i64, ToolRef> {
    let mut out: HashMap<i64, Option<ToolRef>> = HashMap::new();
    for r in rows.iter().filter(|r| r.tool.role == Role::Attributed) {
        let Some(pid) = r.process_id else { continue };
        let same = |t: &ToolRef| {
            (&t.provider, &t.session_id, t.tool_index, &t.call_id)
                == (
                    &r.tool.provider,
                    &r.tool.session_id,
                    r.tool.tool_index,
                    &r.tool.call_id,
                )
        };
        match out.get(&pid) {
            None => {
                out.insert(
                    pid,
                    Some(ToolRef {
                        reason: Some("process".to_owned()),
                        ..r.tool.clone()
                    }),
                );
            }
            Some(Some(t)) if !same(t) => {
                out.insert(pid, None);
            }
            Some(_) => {}
        }
    }
    out.into_iter().filter_map(|(p, t)| Some((p, t?))).collect()
}

pub(in crate::audit) struct Proc {
    pub pid: i64,
    pub parent_id: Option<i64>,
    pub argv: Vec<String>,
    /// Its container; None for a host process. Decides which path rules
    /// judge its events (`[container]`'s or the host's).
    pub container: Option<ContainerRef>,
}

/// An event row with every column the rules look at.
pub type Ev = FullEvent;

/// What the pass over the events saw besides findings: each process's exec
/// argv in time order, and `tcp_state` changes by (process, addr, port).
#[derive(Default)]
pub(in crate::audit) struct History {
    pub execs: HashMap<i64, Vec<(i64, String)>>,
    pub tcp: HashMap<(i64, String, i64), Vec<(i64, String)>>,
    /// Each denied or `never_send` file read successfully (its policy path
    /// → the first reading process row and time, and why it counts): whose
    /// content the wire rules look for in what was sent to the model. A
    /// cell: the file rules judge through `&Ctx`.
    pub sensitive_reads: std::cell::RefCell<std::collections::BTreeMap<String, SensitiveRead>>,
}

/// Why a read file's content must not reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::audit) enum ReadKind {
    /// The policy denies reading it (`[denied_paths]`).
    Denied,
    /// `[wire] never_send` names it.
    NeverSend,
}

impl ReadKind {
    /// The file's description in a finding ("content of denied file …").
    pub fn label(self) -> &'static str {
        match self {
            ReadKind::Denied => "denied",
            ReadKind::NeverSend => "never_send",
        }
    }
}

/// The first successful read of a sensitive file.
#[derive(Debug, Clone, Copy)]
pub(in crate::audit) struct SensitiveRead {
    pub process_id: Option<i64>,
    pub mono_ns: i64,
    pub kind: ReadKind,
}

impl History {
    /// Notes a successful read of a sensitive file (the first one kept; a
    /// denied file stays denied when `never_send` names it too).
    pub fn note_sensitive_read(&self, path: &str, ev: &Ev, kind: ReadKind) {
        let mut reads = self.sensitive_reads.borrow_mut();
        let e = reads.entry(path.to_string()).or_insert(SensitiveRead {
            process_id: ev.process_id,
            mono_ns: ev.mono_ns,
            kind,
        });
        if kind == ReadKind::Denied {
            e.kind = kind;
        }
    }
}

/// Everything the phases share.
pub(in crate::audit) struct Ctx<'a> {
    pub cap: &'a Capture,
    pub strategy: Strategy,
    pub procs: HashMap<i64, Proc>,
    pub tool_of: HashMap<i64, ToolRef>,
    /// [`Context::tool_of_process`]: the fallback of an event without a row.
    pub tool_of_process: HashMap<i64, ToolRef>,
    pub history: History,
}

impl Ctx<'_> {
    /// The container of a process row, if it ran in one.
    pub fn container_of(&self, id: Option<i64>) -> Option<&ContainerRef> {
        self.procs.get(&id?)?.container.as_ref()
    }
}

pub(in crate::audit) fn argv_of(json: Option<&str>) -> Vec<String> {
    json.and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default()
}

/// The run-as user's home: the policy's `home`, else the user named in the
/// capture's `run_as` meta (`NAME (uid N, gid N)`) looked up on this machine.
fn home_of(meta: &RunMeta, policy: &Policy) -> Option<String> {
    if let Some(h) = &policy.home {
        return Some(h.clone());
    }
    let run_as = meta.run_as.as_deref()?;
    let name = run_as.split(" (").next().unwrap_or(run_as);
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.dir.display().to_string())
}

/// The recorded command's `TMPDIR`s (meta `tmpdirs`, a JSON array written by
/// `record`): absolute, normalised, never `/` (record drops anything else;
/// checked again here, the capture is input).
fn tmpdirs_of(meta: &RunMeta) -> Vec<String> {
    meta.tmpdirs
        .iter()
        .filter_map(|t| crate::envreset::usable_tmpdir(t))
        .collect()
}

/// The processes table (for argv chains) and the root's cwd: the one
/// place audit loads processes.
fn load_processes(cap: &Capture) -> Result<(HashMap<i64, Proc>, Option<String>), AuditError> {
    let rows = cap.processes().map_err(AuditError::Store)?;
    // The command `record` started; its cwd is the default workspace.
    let root_cwd = rows
        .iter()
        .filter(|p| p.origin == "root" && p.cwd.is_some())
        .min_by_key(|p| p.id)
        .and_then(|p| p.cwd.clone());
    let procs = rows
        .into_iter()
        .map(|p| {
            let proc = Proc {
                pid: p.pid,
                parent_id: p.parent_id,
                argv: p.argv,
                container: ContainerRef::of(&p.identity),
            };
            (p.id, proc)
        })
        .collect();
    Ok((procs, root_cwd))
}

pub(in crate::audit) struct CorrRow {
    pub event_id: Option<i64>,
    pub process_id: Option<i64>,
    pub tool: ToolRef,
}

/// Whether the capture holds bindings; its correlation rows, the events
/// the flagged ones name and, per event, the tool call that names it.
struct Correlations {
    correlations: bool,
    corr_rows: Vec<CorrRow>,
    flagged_events: HashMap<i64, Ev>,
    tool_of: HashMap<i64, ToolRef>,
}

/// Names the MCP calls among the rows' calls (a finding then says which
/// MCP tool acted). Only a capture that stored MCP servers can have
/// correlations of MCP calls, so no other reads its sessions for this.
fn name_mcp_calls(
    cap: &Capture,
    rows: &mut [CorrRow],
    tool_of: &mut HashMap<i64, ToolRef>,
) -> Result<(), AuditError> {
    let reader = cap.reader();
    if reader.all_mcp_servers()?.is_empty() {
        return Ok(());
    }
    let mut names: HashMap<(String, String, i64), String> = HashMap::new();
    for stored in reader.readable_sessions()? {
        let s = &stored.session;
        for (i, t) in s.tools.iter().enumerate() {
            if t.mcp.is_some() {
                let key = (
                    s.provider.as_str().to_string(),
                    s.session_id.clone(),
                    i as i64,
                );
                names.insert(key, t.name.clone());
            }
        }
    }
    let name_of = |t: &ToolRef| {
        let key = (t.provider.clone(), t.session_id.clone(), t.tool_index?);
        names.get(&key).cloned()
    };
    for r in rows.iter_mut() {
        r.tool.tool = name_of(&r.tool);
    }
    for t in tool_of.values_mut() {
        t.tool = name_of(t);
    }
    Ok(())
}

/// The correlations `record` stored, and per event the tool call that
/// names it (an attributed row over a flag).
fn load_correlations(cap: &Capture) -> Result<Correlations, AuditError> {
    let mut tool_of: HashMap<i64, ToolRef> = HashMap::new();
    let Some(stored) = cap.correlations()? else {
        return Ok(Correlations {
            correlations: false,
            corr_rows: Vec::new(),
            flagged_events: HashMap::new(),
            tool_of,
        });
    };
    let mut corr_rows = Vec::with_capacity(stored.rows.len());
    for row in stored.rows {
        let row = CorrRow {
            event_id: row.event_id,
            process_id: row.process_id,
            tool: ToolRef {
                provider: row.provider,
                session_id: row.session_id,
                tool_index: row.tool_index,
                tool: None,
                call_id: row.call_id,
                role: row.role,
                reason: row.reason,
            },
        };
        if let Some(eid) = row.event_id {
            let better = row.tool.role == Role::Attributed || !tool_of.contains_key(&eid);
            if better {
                tool_of.insert(eid, row.tool.clone());
            }
        }
        corr_rows.push(row);
    }
    name_mcp_calls(cap, &mut corr_rows, &mut tool_of)?;
    Ok(Correlations {
        correlations: true,
        corr_rows,
        flagged_events: stored.flagged_events,
        tool_of,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(process_id: i64, call: &str, role: Role) -> CorrRow {
        CorrRow {
            event_id: None,
            process_id: Some(process_id),
            tool: ToolRef {
                provider: "claude".into(),
                session_id: "s1".into(),
                tool_index: Some(if call == "c1" { 0 } else { 1 }),
                tool: None,
                call_id: Some(call.into()),
                role,
                reason: Some("argv_match".into()),
            },
        }
    }

    /// A process whose attributed rows name one call (its two execs, say)
    /// names it through the process; one naming two calls, or only flagged
    /// rows, names none.
    #[test]
    fn a_process_names_its_one_attributed_call() {
        let rows = vec![
            row(1, "c1", Role::Attributed),
            row(1, "c1", Role::Attributed),
            row(2, "c1", Role::Attributed),
            row(2, "c2", Role::Attributed),
            row(3, "c2", Role::ObservedNotClaimed),
        ];
        let got = calls_of_processes(&rows);
        let mut keys: Vec<_> = got
            .iter()
            .map(|(p, t)| (*p, t.call_id.clone(), t.reason.clone()))
            .collect();
        keys.sort();
        assert_eq!(keys, vec![(1, Some("c1".into()), Some("process".into()))]);
    }
}
