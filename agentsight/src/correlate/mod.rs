//! `agentsight correlate`: line up what a session's transcript says each tool
//! call did with what the bound process trees really did, per tool call, and
//! flag the differences.
//!
//! Attribution of an activity (exec, file change, connection) to a call, by
//! reason, strongest first:
//! - `argv_match`: a process exec'd the call's command (shell wrappers on both
//!   sides understood, see [`shell`]); that process's own activity;
//! - `descendant`: activity of a process descended from an attributed one;
//! - `path_match`: a file event on a path the call names, inside its window;
//! - `via_rename`: a file event on a temp path that the same process then
//!   renames onto a path the call names, inside its window (atomic writes:
//!   Claude Code's Write writes `NAME.tmp.PID.HEX`, then renames it to NAME);
//! - `time_window`: a process the agent started inside the call's window
//!   whose argv does not match (e.g. a hook or a helper), and its activity.
//!
//! Times are compared on one clock: events carry wall times derived from the
//! capture's monotonic↔UTC anchors; transcripts carry UTC milliseconds. An
//! argv match is searched in `[call − ARGV_SEARCH_MS, result + ARGV_SEARCH_MS]`
//! (the argv is the evidence); every weaker attribution (`time_window`,
//! `path_match`, `via_rename`) needs the activity inside the call's own window
//! widened only by a tolerance measured from the argv matches' clock skew
//! ([`window_tolerance`]), so the runtime's start-up and bookkeeping just
//! before a call stay with the runtime.
//! The JSON shape is documented in `docs/correlate.md`.

pub mod bench;
pub mod render;
pub mod shell;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use rusqlite::Connection;
use serde::Serialize;

use crate::{
    clock::rfc3339_ns,
    matching::{self, Anchors, ProcTable},
    sessions::{AgentSession, PathAccess, ToolCategory, ToolPath, ToolStatus},
    store::{
        StoreError,
        sessions::{self as stored, CorrelationRow},
    },
};

/// Slack on both ends of a call's window when looking for the exec of its
/// own command (ms): the argv is strong evidence, the window only a bound.
pub const ARGV_SEARCH_MS: i64 = 1000;
/// Margin added to the measured skew for the call's window (ms): transcript
/// timestamps are whole milliseconds. Kept small on purpose: Codex prepares
/// each command (its shell snapshot, git probes) 80–100 ms before the call's
/// timestamp, and that is the runtime's work, not the call's.
pub const WINDOW_MARGIN_MS: i64 = 1;
/// The window tolerance when no argv match measures the skew (ms).
pub const WINDOW_DEFAULT_MS: i64 = 100;

/// The tolerance of a call's window: the transcript clock's measured lead
/// over the capture's (the largest amount by which a matched exec preceded
/// its call) plus [`WINDOW_MARGIN_MS`], at most [`ARGV_SEARCH_MS`]; with no
/// sample, [`WINDOW_DEFAULT_MS`]. `delays` are exec − call start (ms).
pub fn window_tolerance(delays: &[i64]) -> (i64, &'static str) {
    match delays.iter().min() {
        Some(&min) => (
            ((-min).max(0) + WINDOW_MARGIN_MS).min(ARGV_SEARCH_MS),
            "measured skew + 1 ms",
        ),
        None => (
            WINDOW_DEFAULT_MS,
            "default (no argv match to measure the skew)",
        ),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CorrelateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {reason}")]
    Query { path: String, reason: String },
}

/// One observed activity.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Activity {
    pub event_id: i64,
    pub ts: String,
    pub mono_ns: u64,
    pub pid: u32,
    pub process_id: i64,
    pub comm: String,
    /// `exec`, `write`, `read`, `delete`, `rename`, `mkdir`, `link`,
    /// `connect`, `bind`, `listen`.
    pub op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// The file the kernel opened, when it is not `path` (a symlink, a
    /// bind mount, `/proc/self/fd/N`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub result: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// For execs: how the process ended (`None` while running at the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Why it is attributed: `argv_match`, `descendant`, `path_match`,
    /// `via_rename`, `time_window`; `None` when unclaimed.
    pub reason: Option<&'static str>,
    /// Happened after the call's result (+ tolerance).
    pub late: bool,
    /// For unclaimed activity: `runtime` (the agent's own process) or
    /// `child` (another process of the tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<&'static str>,
    #[serde(skip)]
    wall_ms: i64,
    #[serde(skip)]
    proc_ix: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub name: String,
    pub category: ToolCategory,
    pub command: Option<String>,
    pub paths: Vec<ToolPath>,
    pub status: ToolStatus,
    /// The exit code the transcript states (`None`: it says none).
    pub exit_code: Option<i32>,
    pub start: Option<String>,
    pub end: Option<String>,
    pub duration_ms: Option<i64>,
    /// Exit codes of the argv-matched processes, in order.
    pub exit_codes: Vec<Option<i64>>,
    pub activity: Vec<Activity>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PromptReport {
    pub index: Option<usize>,
    pub ts: Option<String>,
    pub text: String,
    pub tools: Vec<ToolReport>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Claimed {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub name: String,
    /// `exec` (a command with no matching exec) or the path access claimed
    /// (`write`, `create`, `delete`, `rename`…) with no such event seen.
    pub what: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Mismatch {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub name: String,
    /// `read_wrote`, `exit_status` (non-zero exit, transcript says ok),
    /// `failed_but_exit_zero`, or `exit_code` (a matched process exited with
    /// another code than the one the transcript states).
    pub kind: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Late {
    pub tool_index: usize,
    pub call_id: Option<String>,
    pub event_id: i64,
    pub op: &'static str,
    pub ts: String,
    pub after_end_ms: i64,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Flags {
    pub claimed_not_observed: Vec<Claimed>,
    pub observed_not_claimed: Vec<Activity>,
    pub mismatches: Vec<Mismatch>,
    pub late: Vec<Late>,
}

/// Writes by the agent to its own state (transcripts, caches under its
/// provider directory): listed as counts, not flagged.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Bookkeeping {
    pub path: String,
    pub op: &'static str,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClockInfo {
    pub basis: &'static str,
    /// Slack on both ends of a call's own window (every attribution but
    /// argv_match, and "late").
    pub tolerance_ms: i64,
    /// How `tolerance_ms` was set.
    pub tolerance_basis: &'static str,
    /// Slack on both ends when looking for a call's own command's exec.
    pub argv_search_ms: i64,
    pub anchors: usize,
    /// How far the transcript clock appears ahead of the capture's (ms):
    /// the largest amount by which a matched exec preceded its call; 0
    /// when every exec followed its call.
    pub skew_ms: i64,
    /// Matched execs used for the estimate.
    pub skew_samples: usize,
    /// Median delay from a call's timestamp to its matched exec (ms).
    pub median_exec_delay_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BindingInfo {
    pub root_pid: u32,
    pub root_process_id: i64,
    pub root_argv: Vec<String>,
    pub evidence: String,
    pub evidence_count: i64,
    pub evidence_path: Option<String>,
    pub from: String,
    pub to: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TreeInfo {
    pub root_pid: u32,
    pub root_process_id: i64,
    pub root_argv: Vec<String>,
    pub status: String,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    pub provider: String,
    pub session_id: String,
    pub cwd: Option<String>,
    pub source_path: String,
    pub start: Option<String>,
    pub end: Option<String>,
    pub models: Vec<String>,
    pub tool_count: usize,
}

/// The whole correlation of one session with one capture.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub session: SessionInfo,
    pub capture: String,
    /// Where the session model came from: `capture` or `home`.
    pub session_source: String,
    pub clock: ClockInfo,
    pub bindings: Vec<BindingInfo>,
    pub prompts: Vec<PromptReport>,
    pub flags: Flags,
    pub agent_bookkeeping: Vec<Bookkeeping>,
    /// Trees of the capture bound to no session (or left ambiguous).
    pub unmatched_trees: Vec<TreeInfo>,
}

fn ts_ms(ms: i64) -> String {
    rfc3339_ns((ms.max(0) as u64).saturating_mul(1_000_000))
}

/// Lexical normalisation (`.`/`..`) of `p`, joined to `base` when relative.
fn absolute(p: &str, base: Option<&str>) -> String {
    let joined = match base {
        Some(b) if !p.starts_with('/') => PathBuf::from(b).join(p),
        _ => PathBuf::from(p),
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out.display().to_string()
}

/// The directory an agent keeps its own state in, from its transcript path
/// (`~/.claude`, `~/.codex`, `~/.gemini`, `~/.cursor`).
fn agent_state_dir(source: &Path) -> Option<PathBuf> {
    let mut cur = source.parent();
    while let Some(d) = cur {
        if d.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| matches!(n, ".claude" | ".codex" | ".gemini" | ".cursor" | "claude"))
        {
            return Some(d.to_path_buf());
        }
        cur = d.parent();
    }
    None
}

/// A bound tree as correlate uses it.
#[derive(Debug, Clone)]
pub struct BoundTree {
    pub root: usize,
    pub evidence: String,
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
            procs: ProcTable::load(conn).map_err(qe)?,
            anchors: Anchors::load(conn).map_err(qe)?,
        })
    }

    fn qe(&self, e: rusqlite::Error) -> CorrelateError {
        CorrelateError::Query {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// Trees bound to `session_row` and the trees bound to nothing, from the
    /// stored tables.
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
            let mine: Vec<_> = t
                .bindings
                .iter()
                .filter(|b| b.key.0 == session.provider && b.key.1 == session.session_id)
                .collect();
            for b in &mine {
                bound.push(BoundTree {
                    root: t.root,
                    evidence: b.evidence.as_str().to_string(),
                    evidence_count: b.evidence_count,
                    evidence_path: b.evidence_path.clone(),
                    from_mono_ns: b.from_mono_ns,
                    to_mono_ns: b.to_mono_ns,
                });
            }
            if t.status != "bound" {
                unmatched.push(self.tree_info(t.root, t.status.to_string(), t.note.clone()));
            }
        }
        Ok((bound, unmatched))
    }

    fn tree_info(&self, i: usize, status: String, note: Option<String>) -> TreeInfo {
        let p = &self.procs.procs[i];
        TreeInfo {
            root_pid: p.pid,
            root_process_id: p.id,
            root_argv: p.argv.clone(),
            status,
            note,
        }
    }
}

/// Event kinds correlate looks at; everything else (io, close, dup…) is
/// detail that `export` still shows.
const KINDS: &str = "'exec','open','openat','openat2','creat','unlink','unlinkat','rmdir','mkdir','mkdirat',\
'rename','renameat','renameat2','link','linkat','symlink','symlinkat','truncate','ftruncate','connect','bind','listen'";

/// Where system libraries and pseudo-files live.
const SYSTEM_PREFIXES: [&str; 7] = [
    "/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/", "/opt/",
];

fn op_of(kind: &str, flags: Option<&str>) -> Option<&'static str> {
    Some(match kind {
        "exec" => "exec",
        "open" | "openat" | "openat2" => {
            let f = flags.unwrap_or("");
            if f.contains("write") || f.contains("create") || f.contains("trunc") {
                "write"
            } else {
                "read"
            }
        }
        "creat" | "truncate" | "ftruncate" => "write",
        "unlink" | "unlinkat" | "rmdir" => "delete",
        "mkdir" | "mkdirat" => "mkdir",
        "rename" | "renameat" | "renameat2" => "rename",
        "link" | "linkat" | "symlink" | "symlinkat" => "link",
        "connect" => "connect",
        "bind" => "bind",
        "listen" => "listen",
        _ => return None,
    })
}

/// Pseudo-files and devices are never activity worth listing.
fn noise_path(p: &str) -> bool {
    p.starts_with("/proc/") || p.starts_with("/sys/") || p.starts_with("/dev/") || p == "/dev"
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Own {
    Argv,
    Descendant,
    Window,
}

struct Call {
    idx: usize,
    /// Where the exec of its own command is looked for (± ARGV_SEARCH_MS).
    lo_mono: u64,
    hi_mono: u64,
    /// Its window ± the measured tolerance: every weaker attribution.
    win_lo: u64,
    win_hi: u64,
    start_ms: i64,
    end_ms: Option<i64>,
    script: Option<String>,
    paths: Vec<(String, PathAccess)>,
}

/// Correlates `session` with the trees bound to it in `view`.
pub fn correlate(
    view: &CaptureView,
    session: &AgentSession,
    session_source: &str,
    bound: &[BoundTree],
    unmatched: Vec<TreeInfo>,
) -> Result<Report, CorrelateError> {
    let procs = &view.procs;
    let anchors = &view.anchors;
    // Members of the bound trees, each limited to its binding's span.
    let mut span_of: HashMap<usize, (u64, u64)> = HashMap::new();
    let mut root_of: HashMap<usize, usize> = HashMap::new();
    for b in bound {
        for m in procs.subtree(b.root) {
            let e = span_of
                .entry(m)
                .or_insert((b.from_mono_ns, b.to_mono_ns.unwrap_or(u64::MAX)));
            e.0 = e.0.min(b.from_mono_ns);
            e.1 = e.1.max(b.to_mono_ns.unwrap_or(u64::MAX));
            root_of.insert(m, b.root);
        }
    }
    let base_cwd = session.cwd.as_deref();
    // Calls with their windows on the capture's clock.
    let tools = &session.tools;
    let session_end = session.end_ms;
    let mut calls: Vec<Call> = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let Some(start) = t.start_ms else { continue };
        let end = t.end_ms.or_else(|| {
            tools[i + 1..]
                .iter()
                .find_map(|n| n.start_ms)
                .or(session_end)
        });
        let cwd = t.cwd.as_deref().or(base_cwd);
        calls.push(Call {
            idx: i,
            lo_mono: anchors.mono_of_ms(start - ARGV_SEARCH_MS),
            hi_mono: end
                .map(|e| anchors.mono_of_ms(e + ARGV_SEARCH_MS))
                .unwrap_or(u64::MAX),
            // Set once the argv matches have measured the skew.
            win_lo: 0,
            win_hi: u64::MAX,
            start_ms: start,
            end_ms: t.end_ms,
            script: (t.category == ToolCategory::Shell)
                .then(|| t.command.as_deref().map(shell::claimed_script))
                .flatten()
                .filter(|s| !s.is_empty()),
            paths: t
                .paths
                .iter()
                .map(|p| (absolute(&p.path, cwd), p.access))
                .collect(),
        });
    }
    let claimed_paths: HashSet<&str> = calls
        .iter()
        .flat_map(|c| c.paths.iter().map(|(p, _)| p.as_str()))
        .collect();

    // Activity of the bound trees inside their spans.
    let lo = span_of.values().map(|s| s.0).min().unwrap_or(0);
    let hi = span_of.values().map(|s| s.1).max().unwrap_or(0);
    let mut acts: Vec<Activity> = Vec::new();
    if !span_of.is_empty() {
        // Library and pseudo-file reads are most of a capture and never
        // activity: skip them in SQL unless a call names such a path.
        let system_claimed = claimed_paths
            .iter()
            .any(|p| SYSTEM_PREFIXES.iter().any(|s| p.starts_with(s)));
        let skip_reads = if system_claimed {
            String::new()
        } else {
            let prefixes: Vec<String> = SYSTEM_PREFIXES
                .iter()
                .map(|s| format!("path LIKE '{s}%'"))
                .collect();
            format!(
                "AND NOT (kind IN ('open','openat','openat2') AND flags NOT LIKE '%write%' \
                 AND flags NOT LIKE '%create%' AND flags NOT LIKE '%trunc%' AND ({}))",
                prefixes.join(" OR ")
            )
        };
        let sql = format!(
            "SELECT id, mono_ns, wall_ns, kind, pid, process_id, comm, argv, path, old_path, flags, result, errno, family, addr, port, real_path
             FROM events WHERE mono_ns BETWEEN ?1 AND ?2 AND kind IN ({KINDS}) {skip_reads} ORDER BY mono_ns, id"
        );
        let mut st = view.conn.prepare(&sql).map_err(|e| view.qe(e))?;
        let mut rows = st
            .query([
                lo.min(i64::MAX as u64) as i64,
                hi.min(i64::MAX as u64) as i64,
            ])
            .map_err(|e| view.qe(e))?;
        while let Some(r) = rows.next().map_err(|e| view.qe(e))? {
            let get = |e: rusqlite::Error| view.qe(e);
            let Some(pid_row) = r.get::<_, Option<i64>>(5).map_err(get)? else {
                continue;
            };
            let Some(&pi) = procs.by_id.get(&pid_row) else {
                continue;
            };
            let Some(&(from, to)) = span_of.get(&pi) else {
                continue;
            };
            let mono = r.get::<_, i64>(1).map_err(get)?.max(0) as u64;
            if mono < from || mono > to {
                continue;
            }
            let kind: String = r.get(3).map_err(get)?;
            let flags: Option<String> = r.get(10).map_err(get)?;
            let Some(op) = op_of(&kind, flags.as_deref()) else {
                continue;
            };
            let result: Option<i64> = r.get(11).map_err(get)?;
            let family: Option<String> = r.get(13).map_err(get)?;
            let path: Option<String> = r.get(8).map_err(get)?;
            match op {
                "connect" | "bind" | "listen" => {
                    if family.as_deref() == Some("unix") || family.is_none() {
                        continue;
                    }
                }
                "exec" => {}
                _ => {
                    // Failed file calls changed nothing.
                    if result.is_some_and(|r| r < 0) {
                        continue;
                    }
                    let Some(p) = path.as_deref() else { continue };
                    if noise_path(p) || (op == "read" && !claimed_paths.contains(p)) {
                        continue;
                    }
                }
            }
            let wall_ns: i64 = r.get(2).map_err(get)?;
            let argv: Option<String> = r.get(7).map_err(get)?;
            let real_path: Option<String> = r.get(16).map_err(get)?;
            let real_path = real_path.filter(|rp| path.as_deref() != Some(rp.as_str()));
            acts.push(Activity {
                event_id: r.get(0).map_err(get)?,
                ts: rfc3339_ns(wall_ns.max(0) as u64),
                mono_ns: mono,
                pid: r.get::<_, i64>(4).map_err(get)? as u32,
                process_id: pid_row,
                comm: r.get(6).map_err(get)?,
                op,
                argv: argv.and_then(|a| serde_json::from_str(&a).ok()),
                path,
                old_path: r.get(9).map_err(get)?,
                real_path,
                addr: r.get(14).map_err(get)?,
                port: r.get::<_, Option<i64>>(15).map_err(get)?.map(|p| p as u16),
                result,
                errno: r.get(12).map_err(get)?,
                exit_code: None,
                reason: None,
                late: false,
                by: None,
                wall_ms: wall_ns.div_euclid(1_000_000),
                proc_ix: pi,
            });
        }
    }

    // 1. argv matches: the first exec of each process that runs a call's
    //    command inside the call's window.
    let mut first_exec: HashMap<usize, u64> = HashMap::new();
    let mut matched: HashMap<usize, (usize, u64)> = HashMap::new();
    let mut used_call: Vec<bool> = vec![false; calls.len()];
    for a in acts.iter().filter(|a| a.op == "exec") {
        first_exec.entry(a.proc_ix).or_insert(a.mono_ns);
        if matched.contains_key(&a.proc_ix) {
            continue;
        }
        let Some(argv) = &a.argv else { continue };
        // Prefer a call not yet matched, then the latest started.
        let best = calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.lo_mono <= a.mono_ns && a.mono_ns <= c.hi_mono)
            .filter(|(_, c)| {
                c.script
                    .as_deref()
                    .is_some_and(|s| shell::argv_matches(argv, s).is_some())
            })
            .max_by_key(|(ci, c)| (!used_call[*ci], c.start_ms));
        if let Some((ci, _)) = best {
            used_call[ci] = true;
            matched.insert(a.proc_ix, (ci, a.mono_ns));
        }
    }
    // The skew the argv matches show sets every call's own window.
    let mut delays: Vec<i64> = matched
        .values()
        .map(|&(ci, at)| anchors.wall_ms(at) - calls[ci].start_ms)
        .collect();
    let (tolerance_ms, tolerance_basis) = window_tolerance(&delays);
    for c in calls.iter_mut() {
        let t = &tools[c.idx];
        let end = t.end_ms.or_else(|| {
            tools[c.idx + 1..]
                .iter()
                .find_map(|n| n.start_ms)
                .or(session_end)
        });
        c.win_lo = anchors.mono_of_ms(c.start_ms - tolerance_ms);
        c.win_hi = end
            .map(|e| anchors.mono_of_ms(e + tolerance_ms))
            .unwrap_or(u64::MAX);
    }
    // 2. Ownership in start order (parents before children).
    // The agent itself: each tree's root and every process that wrote the
    // transcript, with its ancestors (a launcher such as Codex's node shim or
    // Gemini CLI's relaunch parent sits above the writer). These are never
    // owned by a call's window, or every tool process they start later would
    // become that call's descendant.
    let transcript_path = session.source_path.display().to_string();
    let mut roots: HashSet<usize> = bound.iter().map(|b| b.root).collect();
    for a in &acts {
        if a.op != "exec" && a.path.as_deref() == Some(transcript_path.as_str()) {
            let mut p = Some(a.proc_ix);
            while let Some(i) = p {
                if !roots.insert(i) {
                    break;
                }
                p = procs.procs[i].parent;
            }
        }
    }
    let mut order: Vec<usize> = span_of.keys().copied().collect();
    order.sort_by_key(|&i| (procs.procs[i].start_mono_ns, i));
    let mut owner: HashMap<usize, (usize, Own, u64)> = HashMap::new();
    for &p in &order {
        let parent_owner = procs.procs[p]
            .parent
            .and_then(|pp| owner.get(&pp).copied())
            .filter(|(_, _, since)| procs.procs[p].start_mono_ns >= *since);
        if let Some((c, _, _)) = parent_owner {
            owner.insert(p, (c, Own::Descendant, procs.procs[p].start_mono_ns));
        } else if let Some(&(c, at)) = matched.get(&p) {
            owner.insert(p, (c, Own::Argv, at));
        } else if !roots.contains(&p)
            && let Some(&at) = first_exec.get(&p)
            && let Some((ci, _)) = calls
                .iter()
                .enumerate()
                .filter(|(_, c)| c.win_lo <= at && at <= c.win_hi)
                .max_by_key(|(_, c)| c.start_ms)
        {
            owner.insert(p, (ci, Own::Window, at));
        }
    }
    // 3. Attribute each activity.
    // Renames onto a path a call names, inside its window, by source path:
    // (process, rename time, call). A file event on that source path by the
    // same process before the rename is the call's too (`via_rename`).
    let mut renamed_onto: HashMap<String, Vec<(usize, u64, usize)>> = HashMap::new();
    for a in acts.iter().filter(|a| a.op == "rename") {
        if let (Some(from), Some(to)) = (a.old_path.as_deref(), a.path.as_deref())
            && let Some(ci) = claiming_call(&calls, a.mono_ns, to, a.op)
        {
            renamed_onto
                .entry(from.to_string())
                .or_default()
                .push((a.proc_ix, a.mono_ns, ci));
        }
    }
    let state_dir = agent_state_dir(&session.source_path);
    let transcript = session.source_path.display().to_string();
    let mut per_call: Vec<Vec<Activity>> = vec![Vec::new(); calls.len()];
    let mut unclaimed: Vec<Activity> = Vec::new();
    let mut books: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    for mut a in acts {
        let own = owner
            .get(&a.proc_ix)
            .copied()
            .filter(|(_, _, since)| a.mono_ns >= *since);
        if let Some((ci, how, _)) = own {
            a.reason = Some(match how {
                Own::Argv => "argv_match",
                Own::Descendant => "descendant",
                Own::Window => "time_window",
            });
            if a.op == "exec" {
                let p = &procs.procs[a.proc_ix];
                a.exit_code = p.exit_code.or(p.signal.map(|s| 128 + s));
            }
            a.late = calls[ci]
                .end_ms
                .is_some_and(|e| a.wall_ms > e + ARGV_SEARCH_MS);
            per_call[ci].push(a);
            continue;
        }
        if let Some(p) = a.path.as_deref()
            && let Some(ci) = claiming_call(&calls, a.mono_ns, p, a.op)
        {
            a.reason = Some("path_match");
            per_call[ci].push(a);
            continue;
        }
        if a.op != "exec"
            && let Some(p) = a.path.as_deref()
            && let Some(&(_, _, ci)) = renamed_onto.get(p).and_then(|v| {
                v.iter().find(|&&(proc_ix, at, ci)| {
                    proc_ix == a.proc_ix && a.mono_ns <= at && calls[ci].win_lo <= a.mono_ns
                })
            })
        {
            a.reason = Some("via_rename");
            per_call[ci].push(a);
            continue;
        }
        if a.op == "read" {
            continue;
        }
        if let Some(p) = a.path.as_deref()
            && (p == transcript
                || state_dir
                    .as_deref()
                    .is_some_and(|d| Path::new(p).starts_with(d)))
        {
            *books.entry((p.to_string(), a.op)).or_default() += 1;
            continue;
        }
        // The agent's own start (the exec of the tree's root) is not news.
        if a.op == "exec" && roots.contains(&a.proc_ix) {
            continue;
        }
        a.by = Some(if roots.contains(&a.proc_ix) {
            "runtime"
        } else {
            "child"
        });
        unclaimed.push(a);
    }

    // 4. Flags and per-call reports.
    let mut flags = Flags {
        observed_not_claimed: unclaimed,
        ..Default::default()
    };
    let mut call_reports: HashMap<usize, ToolReport> = HashMap::new();
    for (ci, c) in calls.iter().enumerate() {
        let t = &tools[c.idx];
        let acts = std::mem::take(&mut per_call[ci]);
        let argv_execs: Vec<&Activity> = acts
            .iter()
            .filter(|a| a.op == "exec" && a.reason == Some("argv_match"))
            .collect();
        let mut seen_proc: HashSet<usize> = HashSet::new();
        let exit_codes: Vec<Option<i64>> = argv_execs
            .iter()
            .filter(|a| seen_proc.insert(a.proc_ix))
            .map(|a| a.exit_code)
            .collect();
        let mk_claim = |what: &str, detail: String| Claimed {
            tool_index: c.idx,
            call_id: t.call_id.clone(),
            name: t.name.clone(),
            what: what.to_string(),
            detail,
        };
        if let Some(s) = &c.script
            && argv_execs.is_empty()
        {
            flags
                .claimed_not_observed
                .push(mk_claim("exec", format!("no exec of `{s}` seen")));
        }
        for (p, access) in &c.paths {
            let wanted: &[&str] = match access {
                PathAccess::Write | PathAccess::Create => &["write", "rename", "link"],
                PathAccess::Delete | PathAccess::RenameFrom => &["delete", "rename"],
                PathAccess::Rename => &["rename", "write", "link"],
                PathAccess::Read => continue,
            };
            let seen = acts.iter().any(|a| {
                wanted.contains(&a.op)
                    && (a.path.as_deref() == Some(p.as_str())
                        || a.old_path.as_deref() == Some(p.as_str()))
            });
            if !seen {
                flags.claimed_not_observed.push(mk_claim(
                    access.as_str(),
                    format!("no {} of {p} seen", access.as_str()),
                ));
            }
        }
        let mk_mis = |kind: &'static str, detail: String| Mismatch {
            tool_index: c.idx,
            call_id: t.call_id.clone(),
            name: t.name.clone(),
            kind,
            detail,
        };
        if t.category == ToolCategory::Read {
            for a in acts.iter().filter(|a| {
                matches!(a.op, "write" | "delete" | "rename")
                    && c.paths.iter().any(|(p, _)| a.path.as_deref() == Some(p))
            }) {
                flags.mismatches.push(mk_mis(
                    "read_wrote",
                    format!(
                        "a {} call, but pid {} did {} {}",
                        t.name,
                        a.pid,
                        a.op,
                        a.path.as_deref().unwrap_or("")
                    ),
                ));
            }
        }
        if !argv_execs.is_empty() {
            let bad = exit_codes.iter().flatten().find(|c| **c != 0);
            match (t.status, bad) {
                (ToolStatus::Ok, Some(code)) => flags.mismatches.push(mk_mis(
                    "exit_status",
                    format!("exited with status {code}, transcript says ok"),
                )),
                (ToolStatus::Failed, None) if exit_codes.iter().all(|c| *c == Some(0)) => {
                    flags.mismatches.push(mk_mis(
                        "failed_but_exit_zero",
                        "transcript says failed, every matched process exited 0".into(),
                    ))
                }
                _ => {
                    if let Some(want) = t.exit_code
                        && let Some(got) =
                            exit_codes.iter().flatten().find(|c| **c != i64::from(want))
                    {
                        flags.mismatches.push(mk_mis(
                            "exit_code",
                            format!("exited with status {got}, transcript says exit code {want}"),
                        ))
                    }
                }
            }
        }
        for a in acts.iter().filter(|a| a.late) {
            flags.late.push(Late {
                tool_index: c.idx,
                call_id: t.call_id.clone(),
                event_id: a.event_id,
                op: a.op,
                ts: a.ts.clone(),
                after_end_ms: a.wall_ms - c.end_ms.unwrap_or(a.wall_ms),
                detail: describe(a),
            });
        }
        call_reports.insert(
            c.idx,
            ToolReport {
                tool_index: c.idx,
                call_id: t.call_id.clone(),
                name: t.name.clone(),
                category: t.category,
                command: t.command.clone(),
                paths: t.paths.clone(),
                status: t.status,
                exit_code: t.exit_code,
                start: t.start_ms.map(ts_ms),
                end: t.end_ms.map(ts_ms),
                duration_ms: t.start_ms.zip(t.end_ms).map(|(s, e)| e - s),
                exit_codes,
                activity: acts,
            },
        );
    }
    // Calls without a timestamp are listed with no activity.
    for (i, t) in tools.iter().enumerate() {
        call_reports.entry(i).or_insert_with(|| ToolReport {
            tool_index: i,
            call_id: t.call_id.clone(),
            name: t.name.clone(),
            category: t.category,
            command: t.command.clone(),
            paths: t.paths.clone(),
            status: t.status,
            exit_code: t.exit_code,
            start: None,
            end: t.end_ms.map(ts_ms),
            duration_ms: None,
            exit_codes: Vec::new(),
            activity: Vec::new(),
        });
    }
    // Prompts in order, each with its calls; calls before any prompt first.
    let mut prompts: Vec<PromptReport> = Vec::new();
    let mut by_prompt: BTreeMap<Option<usize>, Vec<ToolReport>> = BTreeMap::new();
    let mut reports: Vec<(usize, ToolReport)> = call_reports.into_iter().collect();
    reports.sort_by_key(|(i, _)| *i);
    for (i, r) in reports {
        by_prompt.entry(tools[i].prompt_index).or_default().push(r);
    }
    if let Some(before) = by_prompt.remove(&None) {
        prompts.push(PromptReport {
            index: None,
            ts: None,
            text: String::new(),
            tools: before,
        });
    }
    for p in &session.prompts {
        prompts.push(PromptReport {
            index: Some(p.index),
            ts: p.ts_ms.map(ts_ms),
            text: p.text.clone(),
            tools: by_prompt.remove(&Some(p.index)).unwrap_or_default(),
        });
    }
    for (idx, tools) in by_prompt {
        prompts.push(PromptReport {
            index: idx,
            ts: None,
            text: String::new(),
            tools,
        });
    }

    delays.sort_unstable();
    let clock = ClockInfo {
        basis: "capture clock_anchors (CLOCK_MONOTONIC to UTC) vs transcript UTC timestamps",
        tolerance_ms,
        tolerance_basis,
        argv_search_ms: ARGV_SEARCH_MS,
        anchors: anchors.0.len(),
        skew_ms: delays.first().map(|d| (-d).max(0)).unwrap_or(0),
        skew_samples: delays.len(),
        median_exec_delay_ms: delays.get(delays.len() / 2).copied(),
    };
    let bindings = bound
        .iter()
        .map(|b| {
            let p = &procs.procs[b.root];
            BindingInfo {
                root_pid: p.pid,
                root_process_id: p.id,
                root_argv: p.argv.clone(),
                evidence: b.evidence.clone(),
                evidence_count: b.evidence_count,
                evidence_path: b.evidence_path.clone(),
                from: rfc3339_ns(anchors.wall_ns(b.from_mono_ns).max(0) as u64),
                to: b
                    .to_mono_ns
                    .map(|t| rfc3339_ns(anchors.wall_ns(t).max(0) as u64)),
            }
        })
        .collect();
    Ok(Report {
        session: SessionInfo {
            provider: session.provider.as_str().to_string(),
            session_id: session.session_id.clone(),
            cwd: session.cwd.clone(),
            source_path: session.source_path.display().to_string(),
            start: session.start_ms.map(ts_ms),
            end: session.end_ms.map(ts_ms),
            models: session.models.clone(),
            tool_count: session.tool_count,
        },
        capture: view.path.clone(),
        session_source: session_source.to_string(),
        clock,
        bindings,
        prompts,
        flags,
        agent_bookkeeping: books
            .into_iter()
            .map(|((path, op), count)| Bookkeeping { path, op, count })
            .collect(),
        unmatched_trees: unmatched,
    })
}

/// The call that names `path` and whose window holds `mono` (the latest
/// started, if several do). A directory made (`mkdir`) is the call's too
/// when the call names a path inside it: an edit tool creating
/// `data/numbers.txt` makes `data/` first.
fn claiming_call(calls: &[Call], mono: u64, path: &str, op: &str) -> Option<usize> {
    let names = |cp: &str| {
        cp == path
            || (op == "mkdir"
                && cp.len() > path.len()
                && cp.starts_with(path)
                && cp.as_bytes()[path.len()] == b'/')
    };
    calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.win_lo <= mono && mono <= c.win_hi)
        .filter(|(_, c)| c.paths.iter().any(|(cp, _)| names(cp)))
        .max_by_key(|(_, c)| c.start_ms)
        .map(|(ci, _)| ci)
}

/// One line describing an activity (for text output and flag details).
pub fn describe(a: &Activity) -> String {
    match a.op {
        "exec" => a
            .argv
            .as_ref()
            .map(|v| crate::sessions::util::join_argv(v))
            .unwrap_or_default(),
        "connect" | "bind" | "listen" => format!(
            "{}:{}{}",
            a.addr.as_deref().unwrap_or("?"),
            a.port.map(|p| p.to_string()).unwrap_or_default(),
            a.errno
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ),
        "rename" => format!(
            "{} → {}",
            a.old_path.as_deref().unwrap_or("?"),
            a.path.as_deref().unwrap_or("?")
        ),
        _ => match &a.real_path {
            Some(real) => format!("{} (opened {real})", a.path.as_deref().unwrap_or("?")),
            None => a.path.clone().unwrap_or_default(),
        },
    }
}

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
        let report = correlate(&view, &session, "capture", &bound, unmatched)?;
        for p in &report.prompts {
            for t in &p.tools {
                for a in &t.activity {
                    out.push(CorrelationRow {
                        session_row: row,
                        tool_index: Some(t.tool_index as i64),
                        call_id: t.call_id.clone(),
                        event_id: Some(a.event_id),
                        process_id: Some(a.process_id),
                        role: "attributed",
                        reason: a.reason.map(str::to_string),
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
                role: "observed_not_claimed",
                reason: a.by.map(str::to_string),
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
                role: "claimed_not_observed",
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
                role: "mismatch",
                reason: Some(format!("{}: {}", m.kind, m.detail)),
                late: false,
            });
        }
    }
    conn.execute_batch("BEGIN").map_err(|e| view.qe(e))?;
    stored::insert_correlations(conn, path, &out)?;
    conn.execute_batch("COMMIT").map_err(|e| view.qe(e))?;
    Ok(())
}
