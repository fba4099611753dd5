//! The read API of a capture: what matching, `show`, correlate and audit
//! load, queried in one place. Readers query the `events` view, never
//! `event_rows`/`strings` (see `layout`).

use rusqlite::Connection;

use super::{Capture, StoreError};
use crate::clock::Anchors;

/// One row of `processes`, as stored (integers as SQLite holds them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessRecord {
    pub id: i64,
    pub pid: i64,
    pub start_mono_ns: i64,
    pub parent_id: Option<i64>,
    /// `root`, `seeded`, `fork` or `unseen_start` (`capture::ProcessOrigin`);
    /// kept as text: synthetic captures may hold other words.
    pub origin: String,
    pub comm: Option<String>,
    /// The stored JSON array, parsed (empty when absent or not an array).
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub uid: Option<i64>,
    pub exec_count: i64,
    pub end_mono_ns: Option<i64>,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
}

/// Every process, by start time (then row id).
pub fn processes(conn: &Connection) -> rusqlite::Result<Vec<ProcessRecord>> {
    let mut st = conn.prepare(
        "SELECT id, pid, start_mono_ns, parent_id, origin, comm, argv, cwd, uid, exec_count,
                end_mono_ns, exit_code, signal
         FROM processes ORDER BY start_mono_ns, id",
    )?;
    st.query_map([], |r| {
        let argv: Option<String> = r.get(6)?;
        Ok(ProcessRecord {
            id: r.get(0)?,
            pid: r.get(1)?,
            start_mono_ns: r.get(2)?,
            parent_id: r.get(3)?,
            origin: r.get(4)?,
            comm: r.get(5)?,
            argv: argv
                .and_then(|a| serde_json::from_str(&a).ok())
                .unwrap_or_default(),
            cwd: r.get(7)?,
            uid: r.get(8)?,
            exec_count: r.get(9)?,
            end_mono_ns: r.get(10)?,
            exit_code: r.get(11)?,
            signal: r.get(12)?,
        })
    })?
    .collect()
}

impl Anchors {
    /// The capture's clock anchors.
    pub fn load(conn: &Connection) -> rusqlite::Result<Self> {
        let mut st = conn.prepare("SELECT mono_ns, wall_ns FROM clock_anchors ORDER BY mono_ns")?;
        let v = st
            .query_map([], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Anchors(v))
    }
}

/// Successful writes of one path by one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileWrite {
    pub process_id: i64,
    pub path: String,
    pub first_mono_ns: i64,
    pub count: i64,
}

/// Successful writes (an open for writing, create or truncate; a rename
/// or link to it; a truncate) of `.json`/`.jsonl` paths, the shapes of
/// session transcripts, per process and path. The LIKE filters keep this
/// to a handful of rows on large captures.
pub fn transcript_like_writes(conn: &Connection) -> rusqlite::Result<Vec<FileWrite>> {
    let mut st = conn.prepare(
        "SELECT process_id, path, MIN(mono_ns), COUNT(*) FROM events
         WHERE kind IN ('open','openat','openat2','creat','rename','renameat','renameat2','link','linkat','truncate')
           AND result >= 0 AND process_id IS NOT NULL
           AND (path LIKE '%.jsonl' OR path LIKE '%.json')
           AND (kind NOT IN ('open','openat','openat2')
                OR flags LIKE '%write%' OR flags LIKE '%create%' OR flags LIKE '%trunc%')
         GROUP BY process_id, path",
    )?;
    st.query_map([], |r| {
        Ok(FileWrite {
            process_id: r.get(0)?,
            path: r.get(1)?,
            first_mono_ns: r.get(2)?,
            count: r.get(3)?,
        })
    })?
    .collect()
}

impl Capture {
    /// Every process, by start time (then row id).
    pub fn processes(&self) -> Result<Vec<ProcessRecord>, StoreError> {
        processes(&self.conn).map_err(|e| self.query_err(e))
    }

    /// The capture's clock anchors.
    pub fn anchors(&self) -> Result<Anchors, StoreError> {
        Anchors::load(&self.conn).map_err(|e| self.query_err(e))
    }

    /// Events per kind, by kind.
    pub fn event_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT kind, COUNT(*) FROM events GROUP BY kind ORDER BY kind")
            .map_err(|e| self.query_err(e))?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|r| r.collect())
            .map_err(|e| self.query_err(e))
    }
}
