//! Codex's state database (`state_<N>.sqlite` in `$CODEX_SQLITE_HOME` or
//! `$CODEX_HOME`): the recent threads with their titles, previews, models
//! and token totals, so the session list reads a row and a rollout tail
//! instead of parsing the rollout. Opened read-only; a path it stores is
//! never trusted (only a rollout under the Codex roots is opened).

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::discovery::{Candidate, MAX_LIST, SessionSummary, SummarySource, mtime_ms};
use crate::error::{Result, SessionError};
use crate::util::{self, env_abs};
use crate::{Provider, TokenUsage};

use super::TailSummary;

/// A thread row from `state_*.sqlite`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadRow {
    pub(crate) id: String,
    pub(crate) rollout: PathBuf,
    created_ms: Option<i64>,
    pub(crate) updated_ms: Option<i64>,
    cwd: Option<String>,
    title: Option<String>,
    preview: Option<String>,
    model: Option<String>,
    tokens_used: Option<i64>,
    parent: Option<String>,
}

/// Recent threads from the highest-numbered readable `state_*.sqlite`
/// (`use_env`: honour `CODEX_SQLITE_HOME` and `CODEX_HOME`).
pub(crate) fn recent_rows(home: &Path, use_env: bool) -> Result<Vec<ThreadRow>> {
    let ch = super::layout::home(home, use_env);
    let dir = if use_env {
        env_abs("CODEX_SQLITE_HOME").unwrap_or_else(|| ch.clone())
    } else {
        ch.clone()
    };
    let Some(db) = state_db(&dir) else {
        return Ok(Vec::new());
    };
    read_rows(&db, &ch, 4 * MAX_LIST)
}

/// The state database's threads, keyed by rollout file name: rollout file
/// names embed the thread id, so they key rows without resolving every path
/// (a realpath per candidate costs more than the whole scan).
#[derive(Default)]
pub(crate) struct StateRows(HashMap<OsString, ThreadRow>);

impl StateRows {
    /// The recent rows ([`recent_rows`]); a database that cannot be read is
    /// a note, and the rollouts are scanned instead.
    pub(crate) fn load(home: &Path, use_env: bool, notes: &mut Vec<String>) -> StateRows {
        let rows = recent_rows(home, use_env).unwrap_or_else(|e| {
            notes.push(format!(
                "codex state database not used, scanning rollouts: {e}"
            ));
            Vec::new()
        });
        StateRows(
            rows.into_iter()
                .filter_map(|r| Some((r.rollout.file_name()?.to_os_string(), r)))
                .collect(),
        )
    }

    /// The row of a scanned Codex rollout.
    pub(crate) fn row_of(&self, c: &Candidate) -> Option<&ThreadRow> {
        if c.provider == Provider::Codex {
            self.0.get(c.path.file_name()?)
        } else {
            None
        }
    }

    /// Merges the rows into the scanned candidates: rows whose rollout lies
    /// outside the scanned roots become candidates, and rollouts known to
    /// the database sort by the thread's updated time.
    pub(crate) fn merge(&self, cands: &mut Vec<Candidate>) {
        let scanned: HashSet<&OsStr> = cands
            .iter()
            .filter(|c| c.provider == Provider::Codex)
            .filter_map(|c| c.path.file_name())
            .collect();
        let mut extra = Vec::new();
        for (name, r) in &self.0 {
            if !scanned.contains(name.as_os_str())
                && let Ok(m) = std::fs::metadata(&r.rollout)
                && m.is_file()
            {
                extra.push(Candidate {
                    provider: Provider::Codex,
                    path: r.rollout.clone(),
                    updated_ms: mtime_ms(&m),
                    size: m.len(),
                    empty_window: false,
                });
            }
        }
        cands.extend(extra);
        for c in cands.iter_mut() {
            if let Some(u) = self.row_of(c).and_then(|r| r.updated_ms) {
                c.updated_ms = u;
            }
        }
    }
}

/// Bound of the rollout-tail cache (issue: 64 entries).
const TAIL_CACHE_MAX: usize = 64;

/// Latest usage/plan of rollouts, cached by (path, length, mtime).
#[derive(Default)]
pub(crate) struct TailCache(HashMap<(PathBuf, u64, i64), TailSummary>);

impl TailCache {
    /// Latest usage/plan from the final 1 MiB of a rollout, cached in a
    /// cache bounded to 64 entries.
    fn get(&mut self, path: &Path) -> Option<TailSummary> {
        let m = std::fs::metadata(path).ok()?;
        let key = (path.to_path_buf(), m.len(), mtime_ms(&m));
        if let Some(t) = self.0.get(&key) {
            return Some(t.clone());
        }
        let t = super::tail_summary(path).ok()?;
        if self.0.len() >= TAIL_CACHE_MAX {
            self.0.clear();
        }
        self.0.insert(key, t.clone());
        Some(t)
    }
}

/// The list row of a thread known to the database: the row plus the
/// rollout's tail.
pub(crate) fn row_summary(
    cache: &mut TailCache,
    r: &ThreadRow,
    c: &Candidate,
    id: &str,
) -> SessionSummary {
    let tail = cache.get(&c.path);
    let usage = tail.as_ref().and_then(|t| t.total).or_else(|| {
        // Without a tail, `tokens_used` is Codex's cumulative total
        // (input incl. cached + output); it has no split.
        r.tokens_used
            .and_then(|t| u64::try_from(t).ok())
            .map(|t| TokenUsage {
                total: t,
                ..TokenUsage::default()
            })
    });
    SessionSummary {
        provider: Provider::Codex,
        session_id: id.to_string(),
        path: c.path.clone(),
        updated_ms: c.updated_ms,
        start_ms: r.created_ms,
        cwd: r.cwd.clone(),
        model: r
            .model
            .clone()
            .or_else(|| tail.as_ref().and_then(|t| t.model.clone())),
        title: r.title.clone(),
        preview: r.preview.as_deref().map(|p| util::preview(p, 180)),
        parent_session_id: r.parent.clone(),
        prompts: None,
        tools: None,
        usage,
        source: SummarySource::CodexSqlite,
        error: None,
    }
}

/// Highest-numbered `state_<N>.sqlite` (or legacy `state.sqlite`) in `dir`.
pub fn state_db(dir: &Path) -> Option<PathBuf> {
    let mut best: Option<(u32, PathBuf)> = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        let num = if n == "state.sqlite" {
            Some(0)
        } else {
            n.strip_prefix("state_")
                .and_then(|r| r.strip_suffix(".sqlite"))
                .and_then(|d| d.parse::<u32>().ok())
        };
        if let Some(num) = num
            && best.as_ref().is_none_or(|(b, _)| num > *b)
        {
            best = Some((num, e.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// `path` is a `rollout-*.jsonl` under `codex_home`'s `sessions/` or
/// `archived_sessions/`, without `..` or `.` components (checked lexically;
/// the file itself is then opened without following a link).
pub(crate) fn in_roots(path: &Path, codex_home: &Path) -> bool {
    use std::path::Component;
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return false;
    }
    let name_ok = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"));
    name_ok
        && ["sessions", "archived_sessions"]
            .iter()
            .any(|r| path.starts_with(codex_home.join(r)))
}

fn read_rows(db: &Path, codex_home: &Path, limit: usize) -> Result<Vec<ThreadRow>> {
    let c = crate::cursor::open_ro(db)?;
    let err = |e| SessionError::Sqlite {
        path: db.to_path_buf(),
        source: e,
    };
    let mut cols: HashSet<String> = HashSet::new();
    {
        let mut st = c.prepare("PRAGMA table_info(threads)").map_err(err)?;
        let mut rows = st.query([]).map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            let name: String = r.get(1).map_err(err)?;
            cols.insert(name);
        }
    }
    if !cols.contains("id") || !cols.contains("rollout_path") {
        return Err(SessionError::Format {
            path: db.to_path_buf(),
            provider: "codex",
            reason: "no threads(id, rollout_path) table".into(),
        });
    }
    let col = |name: &str| -> String {
        if cols.contains(name) {
            name.to_string()
        } else {
            "NULL".to_string()
        }
    };
    let updated = if cols.contains("updated_at_ms") {
        "updated_at_ms".to_string()
    } else if cols.contains("updated_at") {
        "updated_at * 1000".to_string()
    } else {
        "NULL".to_string()
    };
    let created = if cols.contains("created_at_ms") {
        "created_at_ms".to_string()
    } else if cols.contains("created_at") {
        "created_at * 1000".to_string()
    } else {
        "NULL".to_string()
    };
    let preview = match (
        cols.contains("preview"),
        cols.contains("first_user_message"),
    ) {
        (true, true) => "COALESCE(preview, first_user_message)".to_string(),
        (true, false) => "preview".to_string(),
        (false, true) => "first_user_message".to_string(),
        _ => "NULL".to_string(),
    };
    let sql = format!(
        "SELECT id, rollout_path, {created}, {updated}, {}, {}, {preview}, {}, {}, {}, {} \
         FROM threads ORDER BY {updated} DESC LIMIT {limit}",
        col("cwd"),
        col("title"),
        col("model"),
        col("tokens_used"),
        col("source"),
        col("parent_thread_id"),
    );
    let mut st = c.prepare(&sql).map_err(err)?;
    let mut rows = st.query([]).map_err(err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(err)? {
        let text = |i: usize| -> Option<String> {
            match r.get_ref(i).ok()? {
                rusqlite::types::ValueRef::Text(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            }
        };
        let int = |i: usize| -> Option<i64> {
            match r.get_ref(i).ok()? {
                rusqlite::types::ValueRef::Integer(v) => Some(v),
                rusqlite::types::ValueRef::Real(v) => Some(v as i64),
                _ => None,
            }
        };
        let (Some(id), Some(rollout)) = (text(0), text(1)) else {
            continue;
        };
        let rollout = PathBuf::from(rollout);
        let rollout = if rollout.is_absolute() {
            rollout
        } else {
            codex_home.join(rollout)
        };
        // A path from a database is not trusted: only a rollout under the
        // Codex roots is ever opened (in every command).
        if !in_roots(&rollout, codex_home) {
            tracing::info!(
                "codex state row {id}: rollout_path {} is outside the Codex roots; ignored",
                rollout.display()
            );
            continue;
        }
        let source = text(9);
        let parent = text(10).or_else(|| {
            let v: serde_json::Value = serde_json::from_str(source.as_deref()?).ok()?;
            v.get("subagent")?
                .get("thread_spawn")?
                .get("parent_thread_id")?
                .as_str()
                .map(str::to_string)
        });
        out.push(ThreadRow {
            id,
            rollout,
            created_ms: int(2),
            updated_ms: int(3),
            cwd: text(4),
            title: text(5).filter(|t| !t.is_empty()),
            preview: text(6).filter(|t| !t.is_empty()),
            model: text(7),
            tokens_used: int(8),
            parent,
        });
    }
    Ok(out)
}
