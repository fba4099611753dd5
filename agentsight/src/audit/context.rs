//! Phase 1, the capture's context: what the rules read besides the events —
//! processes (for argv chains), the workspace, the run-as user's home, the
//! recorded TMPDIRs, and the correlations `record` stored — and the event
//! rows the rules look at.

use std::collections::HashMap;

use rusqlite::OptionalExtension;

use super::{
    AuditError,
    policy::Policy,
    report::{ContainerRef, Role, Strategy, ToolRef},
};
use crate::store::Capture;

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
    /// Per event, the tool call that names it.
    pub tool_of: HashMap<i64, ToolRef>,
}

impl Context {
    pub fn load(cap: &Capture, policy: &Policy) -> Result<Self, AuditError> {
        let (procs, root_cwd) = load_processes(cap)?;
        let home = home_of(cap, policy)?;
        let tmpdirs = tmpdirs_of(cap)?;
        let (correlations, corr_rows, tool_of) = load_correlations(cap)?;
        Ok(Context {
            procs,
            workspace: policy.workspace.clone().or(root_cwd),
            home,
            tmpdirs,
            correlations,
            corr_rows,
            tool_of,
        })
    }
}

pub(in crate::audit) struct Proc {
    pub pid: i64,
    pub parent_id: Option<i64>,
    pub argv: Vec<String>,
    /// Its container; None for a host process. Decides which path rules
    /// judge its events (`[container]`'s or the host's).
    pub container: Option<ContainerRef>,
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
pub(in crate::audit) struct History {
    pub execs: HashMap<i64, Vec<(i64, String)>>,
    pub tcp: HashMap<(i64, String, i64), Vec<(i64, String)>>,
}

/// Everything the phases share.
pub(in crate::audit) struct Ctx<'a> {
    pub cap: &'a Capture,
    pub strategy: Strategy,
    pub procs: HashMap<i64, Proc>,
    pub tool_of: HashMap<i64, ToolRef>,
    pub history: History,
}

impl Ctx<'_> {
    /// The container of a process row, if it ran in one.
    pub fn container_of(&self, id: Option<i64>) -> Option<&ContainerRef> {
        self.procs.get(&id?)?.container.as_ref()
    }
}

pub(in crate::audit) fn q(cap: &Capture, e: rusqlite::Error) -> AuditError {
    AuditError::Store(cap.query_err(e))
}

pub(in crate::audit) fn table_exists(cap: &Capture, name: &str) -> Result<bool, AuditError> {
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

pub(in crate::audit) fn argv_of(json: Option<&str>) -> Vec<String> {
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
            let role: String = r.get(6)?;
            let Some(role) = Role::from_word(&role) else {
                tracing::warn!(%role, "{}: unknown correlation role, row skipped", cap.path);
                return Ok(None);
            };
            Ok(Some(CorrRow {
                event_id: r.get(0)?,
                process_id: r.get(1)?,
                tool: ToolRef {
                    provider: r.get(2)?,
                    session_id: r.get(3)?,
                    tool_index: r.get(4)?,
                    call_id: r.get(5)?,
                    role,
                    reason: r.get(7)?,
                },
            }))
        })
        .map_err(|e| q(cap, e))?;
    for row in rows {
        let Some(row) = row.map_err(|e| q(cap, e))? else {
            continue;
        };
        if let Some(eid) = row.event_id {
            let better = row.tool.role == Role::Attributed || !tool_of.contains_key(&eid);
            if better {
                tool_of.insert(eid, row.tool.clone());
            }
        }
        rows_out.push(row);
    }
    Ok((true, rows_out, tool_of))
}

pub(in crate::audit) fn load_event(cap: &Capture, id: i64) -> Result<Option<Ev>, AuditError> {
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
pub(in crate::audit) fn ev_columns(cap: &Capture) -> Result<String, AuditError> {
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

pub(in crate::audit) fn ev_from_row(r: &rusqlite::Row) -> rusqlite::Result<Ev> {
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
