//! Native evidence and the joins stored in a capture: the parsed sessions its
//! processes were bound to, raw copies of their transcripts, the process
//! trees with their bindings, and correlation rows.
//!
//! The two evidence layers stay apart: `sessions`/`transcript_files` hold what
//! the agents wrote, `processes`/`events` what the kernel saw. `trees`,
//! `bindings` and `correlations` only reference rows of both, never copy or
//! merge them. Columns are documented in `docs/capture-schema.md` and
//! `docs/correlate.md`.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Capture, StoreError};
use crate::sessions::AgentSession;

/// Tables added in schema version 2. Created with every new capture; a
/// version 1 capture simply has none of them (read as "nothing stored").
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    session_id TEXT NOT NULL,
    source_path TEXT NOT NULL,
    cwd TEXT,
    start_ms INTEGER,
    end_ms INTEGER,
    model TEXT NOT NULL,
    UNIQUE (provider, session_id)
);
CREATE TABLE IF NOT EXISTS transcript_files (
    id INTEGER PRIMARY KEY,
    session_row INTEGER NOT NULL REFERENCES sessions(id),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    stored_bytes INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    content BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS trees (
    id INTEGER PRIMARY KEY,
    root_process_id INTEGER NOT NULL REFERENCES processes(id),
    root_pid INTEGER NOT NULL,
    root_start_mono_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    note TEXT
);
CREATE TABLE IF NOT EXISTS bindings (
    id INTEGER PRIMARY KEY,
    tree_id INTEGER NOT NULL REFERENCES trees(id),
    session_row INTEGER NOT NULL REFERENCES sessions(id),
    evidence TEXT NOT NULL,
    evidence_count INTEGER NOT NULL,
    evidence_process_id INTEGER REFERENCES processes(id),
    evidence_path TEXT,
    first_evidence_mono_ns INTEGER,
    from_mono_ns INTEGER NOT NULL,
    to_mono_ns INTEGER
);
CREATE TABLE IF NOT EXISTS proc_fd_evidence (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_mono_ns INTEGER NOT NULL,
    mono_ns INTEGER NOT NULL,
    path TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS correlations (
    id INTEGER PRIMARY KEY,
    session_row INTEGER NOT NULL REFERENCES sessions(id),
    tool_index INTEGER,
    call_id TEXT,
    -- an `events` id; no REFERENCES: `events` is a view in captures with
    -- interned text (store::layout), and a foreign key cannot name a view
    event_id INTEGER,
    process_id INTEGER REFERENCES processes(id),
    role TEXT NOT NULL,
    reason TEXT,
    late INTEGER NOT NULL DEFAULT 0
);
"#;

/// One stored session with its row id.
#[derive(Debug, Clone)]
pub struct StoredSession {
    pub row: i64,
    pub session: AgentSession,
}

/// A process tree as matched: bound, unmatched or ambiguous.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TreeRow {
    pub id: i64,
    pub root_process_id: i64,
    pub root_pid: i64,
    pub root_start_mono_ns: i64,
    pub status: String,
    pub note: Option<String>,
}

/// A binding of a tree to a session over a time span.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BindingRow {
    pub tree_id: i64,
    pub session_row: i64,
    pub evidence: String,
    pub evidence_count: i64,
    pub evidence_process_id: Option<i64>,
    pub evidence_path: Option<String>,
    pub first_evidence_mono_ns: Option<i64>,
    pub from_mono_ns: i64,
    pub to_mono_ns: Option<i64>,
}

crate::vocabulary::vocabulary! {
    /// What a correlation row says of its event or call (`correlations.role`,
    /// written by `correlate::store_all`, read by `audit`).
    Role {
        /// Activity attributed to a tool call.
        Attributed => "attributed",
        ObservedNotClaimed => "observed_not_claimed",
        ClaimedNotObserved => "claimed_not_observed",
        Mismatch => "mismatch",
    }
}

/// One correlation row to store.
#[derive(Debug, Clone)]
pub struct CorrelationRow {
    pub session_row: i64,
    pub tool_index: Option<i64>,
    pub call_id: Option<String>,
    pub event_id: Option<i64>,
    pub process_id: Option<i64>,
    pub role: Role,
    pub reason: Option<String>,
    pub late: bool,
}

fn q(path: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Query {
        path: path.to_string(),
        reason: e.to_string(),
    }
}

/// Creates the session tables in an existing capture (a version 1 file gets
/// them and is marked version 2).
pub(super) fn ensure_schema(conn: &Connection, path: &str) -> Result<(), StoreError> {
    conn.execute_batch(SCHEMA).map_err(q(path))?;
    conn.execute_batch(super::mcp::SCHEMA).map_err(q(path))?;
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
        [super::meta::key::SCHEMA_VERSION, super::SCHEMA_VERSION],
    )
    .map_err(q(path))?;
    Ok(())
}

/// Replaces what a previous matching run stored (matching is re-runnable).
pub(super) fn clear(conn: &Connection, path: &str) -> Result<(), StoreError> {
    conn.execute_batch(
        "DELETE FROM correlations; DELETE FROM bindings; DELETE FROM trees;
         DELETE FROM mcp_servers; DELETE FROM transcript_files; DELETE FROM sessions;",
    )
    .map_err(q(path))
}

pub(super) fn insert_session(
    conn: &Connection,
    path: &str,
    s: &AgentSession,
) -> Result<i64, StoreError> {
    let model = serde_json::to_string(s).map_err(|e| StoreError::Query {
        path: path.to_string(),
        reason: format!("cannot serialize session {}: {e}", s.session_id),
    })?;
    conn.execute(
        "INSERT OR REPLACE INTO sessions (provider, session_id, source_path, cwd, start_ms, end_ms, model)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            s.provider.as_str(),
            s.session_id,
            s.source_path.to_string_lossy(),
            s.cwd,
            s.start_ms,
            s.end_ms,
            model
        ],
    )
    .map_err(q(path))?;
    Ok(conn.last_insert_rowid())
}

pub(super) fn insert_transcript(
    conn: &Connection,
    path: &str,
    session_row: i64,
    file: &str,
    size: u64,
    content: &[u8],
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO transcript_files (session_row, path, size, stored_bytes, truncated, content)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            session_row,
            file,
            size as i64,
            content.len() as i64,
            (content.len() as u64) < size,
            content
        ],
    )
    .map_err(q(path))?;
    Ok(())
}

pub(super) fn insert_tree(conn: &Connection, path: &str, t: &TreeRow) -> Result<i64, StoreError> {
    conn.execute(
        "INSERT INTO trees (root_process_id, root_pid, root_start_mono_ns, status, note)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            t.root_process_id,
            t.root_pid,
            t.root_start_mono_ns,
            t.status,
            t.note
        ],
    )
    .map_err(q(path))?;
    Ok(conn.last_insert_rowid())
}

pub(super) fn insert_binding(
    conn: &Connection,
    path: &str,
    b: &BindingRow,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO bindings (tree_id, session_row, evidence, evidence_count, evidence_process_id,
             evidence_path, first_evidence_mono_ns, from_mono_ns, to_mono_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            b.tree_id,
            b.session_row,
            b.evidence,
            b.evidence_count,
            b.evidence_process_id,
            b.evidence_path,
            b.first_evidence_mono_ns,
            b.from_mono_ns,
            b.to_mono_ns
        ],
    )
    .map_err(q(path))?;
    Ok(())
}

pub(super) fn insert_proc_fd(
    conn: &Connection,
    path: &str,
    pid: u32,
    start_mono_ns: u64,
    mono_ns: u64,
    file: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO proc_fd_evidence (pid, start_mono_ns, mono_ns, path) VALUES (?1, ?2, ?3, ?4)",
        params![pid, start_mono_ns as i64, mono_ns as i64, file],
    )
    .map_err(q(path))?;
    Ok(())
}

pub(super) fn insert_correlations(
    conn: &Connection,
    path: &str,
    rows: &[CorrelationRow],
) -> Result<(), StoreError> {
    let mut st = conn
        .prepare(
            "INSERT INTO correlations (session_row, tool_index, call_id, event_id, process_id, role, reason, late)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(q(path))?;
    for r in rows {
        st.execute(params![
            r.session_row,
            r.tool_index,
            r.call_id,
            r.event_id,
            r.process_id,
            r.role.as_str(),
            r.reason,
            r.late
        ])
        .map_err(q(path))?;
    }
    Ok(())
}

impl Capture {
    /// Whether this capture has the session tables (schema version 2+).
    pub fn has_session_tables(&self) -> Result<bool, StoreError> {
        let n: Option<String> = self
            .conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type='table' AND name='bindings'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.query_err(e))?;
        Ok(n.is_some())
    }

    /// Stored sessions whose id equals or starts with `id` (all when empty).
    pub fn stored_sessions(&self, id: &str) -> Result<Vec<StoredSession>, StoreError> {
        if !self.has_session_tables()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT id, model FROM sessions WHERE substr(session_id, 1, length(?1)) = ?1 ORDER BY id",
            )
            .map_err(|e| self.query_err(e))?;
        let rows: Vec<(i64, String)> = st
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.query_err(e))?;
        rows.into_iter()
            .map(|(row, model)| {
                let session: AgentSession =
                    serde_json::from_str(&model).map_err(|e| StoreError::Query {
                        path: self.path.clone(),
                        reason: format!("stored session row {row} is unreadable: {e}"),
                    })?;
                Ok(StoredSession { row, session })
            })
            .collect()
    }

    pub fn trees(&self) -> Result<Vec<TreeRow>, StoreError> {
        if !self.has_session_tables()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare("SELECT id, root_process_id, root_pid, root_start_mono_ns, status, note FROM trees ORDER BY id")
            .map_err(|e| self.query_err(e))?;
        st.query_map([], |r| {
            Ok(TreeRow {
                id: r.get(0)?,
                root_process_id: r.get(1)?,
                root_pid: r.get(2)?,
                root_start_mono_ns: r.get(3)?,
                status: r.get(4)?,
                note: r.get(5)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.query_err(e))
    }

    pub fn bindings(&self) -> Result<Vec<BindingRow>, StoreError> {
        if !self.has_session_tables()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT tree_id, session_row, evidence, evidence_count, evidence_process_id, evidence_path,
                        first_evidence_mono_ns, from_mono_ns, to_mono_ns FROM bindings ORDER BY id",
            )
            .map_err(|e| self.query_err(e))?;
        st.query_map([], |r| {
            Ok(BindingRow {
                tree_id: r.get(0)?,
                session_row: r.get(1)?,
                evidence: r.get(2)?,
                evidence_count: r.get(3)?,
                evidence_process_id: r.get(4)?,
                evidence_path: r.get(5)?,
                first_evidence_mono_ns: r.get(6)?,
                from_mono_ns: r.get(7)?,
                to_mono_ns: r.get(8)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.query_err(e))
    }

    /// `/proc/PID/fd` observations made while recording: (pid, start, mono, path).
    pub fn proc_fd_evidence(&self) -> Result<Vec<(u32, u64, u64, String)>, StoreError> {
        if !self.has_session_tables()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare("SELECT pid, start_mono_ns, mono_ns, path FROM proc_fd_evidence ORDER BY id")
            .map_err(|e| self.query_err(e))?;
        st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)? as u32,
                r.get::<_, i64>(1)? as u64,
                r.get::<_, i64>(2)? as u64,
                r.get(3)?,
            ))
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.query_err(e))
    }
}

/// A binding of a session as correlate reads it: the bound tree's root and
/// the binding's evidence and span (words as stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionBinding {
    pub root_process_id: i64,
    pub evidence: String,
    pub evidence_count: i64,
    pub evidence_path: Option<String>,
    pub from_mono_ns: i64,
    pub to_mono_ns: Option<i64>,
}

/// A tree bound to no session: its root, status word (as stored) and note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnboundTree {
    pub root_process_id: i64,
    pub status: String,
    pub note: Option<String>,
}

impl super::CaptureReader<'_> {
    /// The bindings of session row `session_row`, by binding id.
    pub fn session_bindings(&self, session_row: i64) -> Result<Vec<SessionBinding>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT t.root_process_id, b.evidence, b.evidence_count, b.evidence_path, b.from_mono_ns, b.to_mono_ns
                 FROM bindings b JOIN trees t ON t.id = b.tree_id WHERE b.session_row = ?1 ORDER BY b.id",
            )
            .map_err(|e| self.query_err(e))?;
        st.query_map([session_row], |r| {
            Ok(SessionBinding {
                root_process_id: r.get(0)?,
                evidence: r.get(1)?,
                evidence_count: r.get(2)?,
                evidence_path: r.get(3)?,
                from_mono_ns: r.get(4)?,
                to_mono_ns: r.get(5)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.query_err(e))
    }

    /// The stored trees bound to no session (status other than `bound`),
    /// by tree id.
    pub fn unbound_trees(&self) -> Result<Vec<UnboundTree>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT root_process_id, status, note FROM trees WHERE status != 'bound' ORDER BY id")
            .map_err(|e| self.query_err(e))?;
        st.query_map([], |r| {
            Ok(UnboundTree {
                root_process_id: r.get(0)?,
                status: r.get(1)?,
                note: r.get(2)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.query_err(e))
    }

    /// Every stored session that this build can read, by row; a row whose
    /// stored model does not parse is left out (record's correlate pass
    /// skips it rather than failing the others).
    pub fn readable_sessions(&self) -> Result<Vec<StoredSession>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT id, model FROM sessions ORDER BY id")
            .map_err(|e| self.query_err(e))?;
        let rows: Vec<(i64, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.query_err(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(row, model)| {
                let session = serde_json::from_str::<AgentSession>(&model).ok()?;
                Some(StoredSession { row, session })
            })
            .collect())
    }
}

/// Enrichment's writes: the session tables, each through the one
/// read-write handle.
impl super::CaptureRw {
    /// Starts the transaction [`CaptureRw::commit`] ends (uncommitted work
    /// is rolled back when the handle is dropped).
    pub fn begin(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("BEGIN")
            .map_err(|e| self.query_err(e))
    }

    pub fn commit(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("COMMIT")
            .map_err(|e| self.query_err(e))
    }

    /// [`ensure_schema`] on this capture.
    pub fn ensure_session_schema(&self) -> Result<(), StoreError> {
        ensure_schema(&self.conn, &self.path)
    }

    /// [`clear`]: what a previous matching run stored.
    pub fn clear_matching(&self) -> Result<(), StoreError> {
        clear(&self.conn, &self.path)
    }

    pub fn insert_session(&self, s: &AgentSession) -> Result<i64, StoreError> {
        insert_session(&self.conn, &self.path, s)
    }

    pub fn insert_transcript(
        &self,
        session_row: i64,
        file: &str,
        size: u64,
        content: &[u8],
    ) -> Result<(), StoreError> {
        insert_transcript(&self.conn, &self.path, session_row, file, size, content)
    }

    pub fn insert_tree(&self, t: &TreeRow) -> Result<i64, StoreError> {
        insert_tree(&self.conn, &self.path, t)
    }

    pub fn insert_binding(&self, b: &BindingRow) -> Result<(), StoreError> {
        insert_binding(&self.conn, &self.path, b)
    }

    pub fn insert_proc_fd(
        &self,
        pid: u32,
        start_mono_ns: u64,
        mono_ns: u64,
        file: &str,
    ) -> Result<(), StoreError> {
        insert_proc_fd(&self.conn, &self.path, pid, start_mono_ns, mono_ns, file)
    }

    /// Stores correlation rows in one transaction.
    pub fn put_correlations(&self, rows: &[CorrelationRow]) -> Result<(), StoreError> {
        self.begin()?;
        insert_correlations(&self.conn, &self.path, rows)?;
        self.commit()
    }
}
