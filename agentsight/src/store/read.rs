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
    /// Its container and namespaces (`record --container`); all None for a
    /// host process and in captures made before these columns existed.
    pub identity: ProcessIdentity,
    /// The agent `record --agent` recognised it as (`claude`, `codex`, …);
    /// None otherwise and in captures made before the column existed.
    pub agent: Option<String>,
}

/// The container a process ran in and its namespaces, as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub container_id: Option<String>,
    pub container_name: Option<String>,
    pub container_image: Option<String>,
    /// Inodes of its pid and mount namespaces.
    pub pid_ns: Option<i64>,
    pub mnt_ns: Option<i64>,
    /// Its pid inside its pid namespace.
    pub ns_pid: Option<i64>,
}

impl ProcessIdentity {
    /// The identity columns of `processes`, in [`ProcessIdentity`]'s order.
    pub const COLUMNS: [&str; 6] = [
        "container_id",
        "container_name",
        "container_image",
        "pid_ns",
        "mnt_ns",
        "ns_pid",
    ];

    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// The container a process ran in (`record --container`): its name and
/// its id's first 12 hex digits, as `docker ps` shows them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ContainerRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub id: String,
}

impl ContainerRef {
    /// The container of a process row, if it has one.
    pub fn of(id: &ProcessIdentity) -> Option<Self> {
        let cid = id.container_id.as_deref()?;
        Some(Self {
            name: id.container_name.clone(),
            id: cid.chars().take(12).collect(),
        })
    }

    /// `NAME (ID12)`, or the id alone.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{n} ({})", self.id),
            None => self.id.clone(),
        }
    }
}

/// Whether `table` has `column` (captures made before a column was added
/// lack it: readers treat it as absent).
pub(super) fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let mut st = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
    let names = st
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names.iter().any(|n| n == column))
}

/// Every process, by start time (then row id).
pub(super) fn processes(conn: &Connection) -> rusqlite::Result<Vec<ProcessRecord>> {
    let identity = if has_column(conn, "processes", "container_id")? {
        ProcessIdentity::COLUMNS.join(", ")
    } else {
        "NULL, NULL, NULL, NULL, NULL, NULL".to_owned()
    };
    let agent = if has_column(conn, "processes", "agent")? {
        "agent"
    } else {
        "NULL"
    };
    let mut st = conn.prepare(&format!(
        "SELECT id, pid, start_mono_ns, parent_id, origin, comm, argv, cwd, uid, exec_count,
                end_mono_ns, exit_code, signal, {identity}, {agent}
         FROM processes ORDER BY start_mono_ns, id"
    ))?;
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
            identity: ProcessIdentity {
                container_id: r.get(13)?,
                container_name: r.get(14)?,
                container_image: r.get(15)?,
                pid_ns: r.get(16)?,
                mnt_ns: r.get(17)?,
                ns_pid: r.get(18)?,
            },
            agent: r.get(19)?,
        })
    })?
    .collect()
}

impl Anchors {
    /// The capture's clock anchors.
    pub(super) fn load(conn: &Connection) -> rusqlite::Result<Self> {
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
pub(super) fn transcript_like_writes(conn: &Connection) -> rusqlite::Result<Vec<FileWrite>> {
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

/// Successful writes of SQLite database files (`.db`, `.db-wal`) per
/// process and path, as [`transcript_like_writes`] counts them: a session
/// store shared by many sessions (opencode's `opencode.db`) is written there.
pub(super) fn database_like_writes(conn: &Connection) -> rusqlite::Result<Vec<FileWrite>> {
    let mut st = conn.prepare(
        "SELECT process_id, path, MIN(mono_ns), COUNT(*) FROM events
         WHERE kind IN ('open','openat','openat2','creat','rename','renameat','renameat2','link','linkat','truncate')
           AND result >= 0 AND process_id IS NOT NULL
           AND (path LIKE '%.db' OR path LIKE '%.db-wal')
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

/// Distinct paths ending in `suffix` (compared exactly, no pattern) that a
/// process of the capture opened for writing or created, successfully; by
/// path.
pub(super) fn paths_written_ending(
    conn: &Connection,
    suffix: &str,
) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare(
        "SELECT DISTINCT path FROM events
         WHERE kind IN ('open','openat','openat2','creat') AND result >= 0
           AND path IS NOT NULL AND substr(path, -length(?1)) = ?1
           AND (kind = 'creat' OR flags LIKE '%write%' OR flags LIKE '%create%')
         ORDER BY path",
    )?;
    st.query_map([suffix], |r| r.get(0))?.collect()
}

/// The columns of one event that correlation and audit look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventRecord {
    pub id: i64,
    pub mono_ns: i64,
    pub wall_ns: i64,
    pub kind: String,
    pub pid: i64,
    pub process_id: Option<i64>,
    pub comm: Option<String>,
    /// The stored JSON array (an exec's).
    pub argv: Option<String>,
    pub path: Option<String>,
    pub old_path: Option<String>,
    pub flags: Option<String>,
    pub result: Option<i64>,
    pub errno: Option<String>,
    pub family: Option<String>,
    pub addr: Option<String>,
    pub port: Option<i64>,
    pub real_path: Option<String>,
    /// The DNS name a query asked for.
    pub query: Option<String>,
}

/// Which events [`events_in_window`] hands out.
#[derive(Clone, Copy, Debug, Default)]
pub struct EventFilter<'a> {
    /// Only these `events.kind`s.
    pub kinds: &'a [&'a str],
    /// Plain reads (opens whose flags show no write, create, truncate or
    /// append) of paths under these prefixes are left out by the query
    /// itself: library and pseudo-file reads are most of a capture. An open
    /// refused with `EPERM` (what `record --enforce` answers) is kept.
    pub skip_reads_under: &'a [&'a str],
}

/// The SQL and parameters of [`events_in_window`] (parameters bound, never
/// spliced into the text).
fn window_query(filter: &EventFilter) -> String {
    let n = filter.kinds.len();
    let kinds: Vec<String> = (0..n).map(|i| format!("?{}", i + 3)).collect();
    let skip = if filter.skip_reads_under.is_empty() {
        String::new()
    } else {
        let under: Vec<String> = (0..filter.skip_reads_under.len())
            .map(|i| format!("path LIKE ?{} || '%'", i + 3 + n))
            .collect();
        // A plain read as `events::EventKind::access` has it: flags shown,
        // none of them writing (an open without flags is a write, hence the
        // IFNULL). Each mention of an interned column in `events` is a
        // string lookup per row: `flags` is named as few times as that
        // rule allows, and `errno` last (only rows skipped otherwise reach
        // it).
        format!(
            "AND NOT (kind IN ('open','openat','openat2') \
             AND IFNULL(flags, 'write') NOT LIKE '%write%' AND flags NOT LIKE '%create%' \
             AND flags NOT LIKE '%trunc%' AND flags NOT LIKE '%append%' AND ({}) \
             AND IFNULL(errno, '') != 'EPERM')",
            under.join(" OR ")
        )
    };
    format!(
        "SELECT {} FROM events
         WHERE mono_ns BETWEEN ?1 AND ?2 AND kind IN ({}) {skip} ORDER BY mono_ns, id",
        RecordColumns::All.select_list(&[]),
        kinds.join(", ")
    )
}

/// The columns [`event_record`] reads, in its order (the one list of them:
/// `store::audit_reads` selects these and more, through [`RecordColumns`]).
const RECORD_COLUMNS: &str = "id, mono_ns, wall_ns, kind, pid, process_id, comm, \
     argv, path, old_path, flags, result, errno, family, addr, port, real_path, query";

/// Which of the [`RECORD_COLUMNS`] a query reads; the others are selected
/// empty (`pid` 0, the rest NULL), so [`event_record`] reads every query
/// alike. A pass over a whole capture reads only what its reader uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RecordColumns {
    /// Every column.
    All,
    /// All but the event's own process identity (`pid`, and `comm`: a
    /// string lookup per row): for readers that take a process from its
    /// row in `processes` (audit).
    WithoutProcessIdentity,
}

impl RecordColumns {
    fn reads_process_identity(self) -> bool {
        self == RecordColumns::All
    }

    /// The select list, in [`RECORD_COLUMNS`]' order; `absent`: columns an
    /// older capture lacks, selected empty.
    pub(super) fn select_list(self, absent: &[&str]) -> String {
        let left_out: &[&str] = if self.reads_process_identity() {
            &[]
        } else {
            &["pid", "comm"]
        };
        RECORD_COLUMNS
            .split(',')
            .map(str::trim)
            .map(|c| match c {
                _ if !left_out.contains(&c) && !absent.contains(&c) => c,
                "pid" => "0",
                _ => "NULL",
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How many columns [`event_record`] reads: a query's further columns
/// start at this index.
pub(super) const RECORD_COLUMN_COUNT: usize = 18;

/// The record of a row selected with `columns`' select list (a column
/// left out is not even converted).
pub(super) fn event_record(
    r: &rusqlite::Row,
    columns: RecordColumns,
) -> rusqlite::Result<EventRecord> {
    let identity = columns.reads_process_identity();
    Ok(EventRecord {
        id: r.get(0)?,
        mono_ns: r.get(1)?,
        wall_ns: r.get(2)?,
        kind: r.get(3)?,
        pid: if identity { r.get(4)? } else { 0 },
        process_id: r.get(5)?,
        comm: if identity { r.get(6)? } else { None },
        argv: r.get(7)?,
        path: r.get(8)?,
        old_path: r.get(9)?,
        flags: r.get(10)?,
        result: r.get(11)?,
        errno: r.get(12)?,
        family: r.get(13)?,
        addr: r.get(14)?,
        port: r.get(15)?,
        real_path: r.get(16)?,
        query: r.get(17)?,
    })
}

/// Events passing `filter` with `mono_ns` in `from..=to`, by time then id,
/// each handed to `visit` as it is read (a window of a large capture is
/// never held whole); `visit` returns false to stop.
pub(super) fn events_in_window(
    conn: &Connection,
    from_mono_ns: u64,
    to_mono_ns: u64,
    filter: &EventFilter,
    mut visit: impl FnMut(EventRecord) -> bool,
) -> rusqlite::Result<()> {
    let mut st = conn.prepare(&window_query(filter))?;
    let clamp = |v: u64| v.min(i64::MAX as u64) as i64;
    let (lo, hi) = (clamp(from_mono_ns), clamp(to_mono_ns));
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&lo, &hi];
    params.extend(filter.kinds.iter().map(|k| k as &dyn rusqlite::ToSql));
    params.extend(
        filter
            .skip_reads_under
            .iter()
            .map(|p| p as &dyn rusqlite::ToSql),
    );
    let mut rows = st.query(params.as_slice())?;
    while let Some(r) = rows.next()? {
        if !visit(event_record(r, RecordColumns::All)?) {
            break;
        }
    }
    Ok(())
}

/// What a set of processes did up to a time (the kernel columns of `top`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeCounts {
    /// Execs in `(as_of − window, as_of]`.
    pub execs_in_window: u64,
    /// Distinct paths successfully opened for writing, created or
    /// truncated, outside /dev, /proc and /sys.
    pub files_written: u64,
    /// IPv4/IPv6 connects that succeeded or are in progress.
    pub connections: u64,
}

/// [`TreeCounts`] of the processes with these row ids, over the events up to
/// `as_of` (monotonic ns). The definitions are the documented ones of
/// docs/top-kernel.md; the root test recomputes them on the finished capture.
pub(super) fn tree_counts(
    conn: &Connection,
    process_ids: &[i64],
    as_of: u64,
    window_ns: u64,
) -> rusqlite::Result<TreeCounts> {
    if process_ids.is_empty() {
        return Ok(TreeCounts::default());
    }
    // Row ids are integers we hold: listed inline, no injection possible.
    let ids = process_ids
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let sql = format!(
        "SELECT
           COALESCE(SUM(kind = 'exec' AND mono_ns > ?2), 0),
           COUNT(DISTINCT CASE WHEN result >= 0
                 AND (kind IN ('creat','truncate','ftruncate')
                      OR (kind IN ('open','openat','openat2')
                          AND (flags LIKE '%write%' OR flags LIKE '%create%' OR flags LIKE '%trunc%')))
                 AND path NOT LIKE '/dev/%' AND path NOT LIKE '/proc/%' AND path NOT LIKE '/sys/%'
                 THEN path END),
           COALESCE(SUM(kind = 'connect' AND family IN ('ipv4','ipv6')
                        AND (result >= 0 OR errno = 'EINPROGRESS')), 0)
         FROM events WHERE process_id IN ({ids}) AND mono_ns <= ?1"
    );
    let lo = as_of.saturating_sub(window_ns) as i64;
    conn.query_row(&sql, rusqlite::params![as_of as i64, lo], |r| {
        Ok(TreeCounts {
            execs_in_window: r.get::<_, i64>(0)?.max(0) as u64,
            files_written: r.get::<_, i64>(1)?.max(0) as u64,
            connections: r.get::<_, i64>(2)?.max(0) as u64,
        })
    })
}

/// The newest stored event's monotonic time (among the last 1000 stored:
/// rows are stored in ring order, which is time order within a few ms).
pub(super) fn newest_event_mono_ns(conn: &Connection) -> rusqlite::Result<Option<u64>> {
    conn.query_row(
        "SELECT MAX(mono_ns) FROM (SELECT mono_ns FROM events ORDER BY id DESC LIMIT 1000)",
        [],
        |r| r.get::<_, Option<i64>>(0),
    )
    .map(|v| v.map(|n| n.max(0) as u64))
}

/// Kernel loss so far, all kinds together (the `loss` table).
pub(super) fn loss_total(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COALESCE(SUM(lost), 0) FROM loss", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
}

/// Every event, in the order `export --format jsonl` writes them (monotonic
/// time, then CPU and sequence number), each handed to `visit` as it is
/// read: a large capture is never held whole.
pub(super) fn events_by_time(
    conn: &Connection,
    mut visit: impl FnMut(EventRecord) -> std::io::Result<()>,
) -> Result<(), EventsError> {
    let mut st = conn.prepare(&format!(
        "SELECT {} FROM events ORDER BY mono_ns, cpu, seq",
        RecordColumns::All.select_list(&[])
    ))?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        visit(event_record(r, RecordColumns::All)?)?;
    }
    Ok(())
}

/// Why [`events_by_time`] stopped: the query failed, or the visitor did.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error(transparent)]
    Query(#[from] rusqlite::Error),
    #[error(transparent)]
    Visit(#[from] std::io::Error),
}

/// One per-CPU sequence gap: records that never arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gap {
    pub stream: i64,
    pub cpu: i64,
    pub missing: i64,
    pub from_mono_ns: i64,
    pub to_mono_ns: i64,
}

/// The capture's sequence gaps, by time.
pub(super) fn gaps(conn: &Connection) -> rusqlite::Result<Vec<Gap>> {
    let mut st = conn.prepare(
        "SELECT stream, cpu, missing, from_mono_ns, to_mono_ns FROM gaps ORDER BY from_mono_ns, id",
    )?;
    st.query_map([], |r| {
        Ok(Gap {
            stream: r.get(0)?,
            cpu: r.get(1)?,
            missing: r.get(2)?,
            from_mono_ns: r.get(3)?,
            to_mono_ns: r.get(4)?,
        })
    })?
    .collect()
}

/// DNS names a process asked, once per (process, name), in the order first asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsQuery {
    pub process_id: i64,
    pub name: String,
    pub count: i64,
}

/// Every DNS name asked, per process (one grouped pass over the events).
pub(super) fn dns_queries(conn: &Connection) -> rusqlite::Result<Vec<DnsQuery>> {
    let mut st = conn.prepare(
        "SELECT process_id, query, COUNT(*) FROM events
         WHERE query IS NOT NULL AND process_id IS NOT NULL
         GROUP BY process_id, query ORDER BY MIN(mono_ns), process_id",
    )?;
    st.query_map([], |r| {
        Ok(DnsQuery {
            process_id: r.get(0)?,
            name: r.get(1)?,
            count: r.get(2)?,
        })
    })?
    .collect()
}

/// The newest monotonic time of any stored event, None when there is none.
pub(super) fn last_event_mono_ns(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT MAX(mono_ns) FROM events", [], |r| r.get(0))
}

impl Capture {
    /// The stored `session message` submissions, by time.
    pub fn session_messages(&self) -> Result<Vec<SessionMessage>, StoreError> {
        session_messages(&self.conn).map_err(|e| self.query_err(e))
    }

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
        if self.use_summaries()? {
            return super::summary::kind_counts(&self.conn).map_err(|e| self.query_err(e));
        }
        let mut st = self
            .conn
            .prepare("SELECT kind, COUNT(*) FROM events GROUP BY kind ORDER BY kind")
            .map_err(|e| self.query_err(e))?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|r| r.collect())
            .map_err(|e| self.query_err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(crate::store::SCHEMA).unwrap();
        c.execute_batch(&super::super::layout::schema()).unwrap();
        c.execute_batch(
            "INSERT INTO clock_anchors (id, label, mono_ns, wall_ns) VALUES (1, 'start', 0, 1000);
             INSERT INTO processes (id, pid, start_mono_ns, parent_id, origin, argv, exec_count)
                 VALUES (1, 10, 5, NULL, 'root', '[\"sh\"]', 1),
                        (2, 11, 3, 1, 'fork', NULL, 0);
             INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, ppid, uid, gid, comm,
                 process_id, path, result)
             VALUES (10, 1010, 'openat', 0, 1, 10, 1, 0, 0, 'sh', 1, '/a.json', 3),
                    (20, 1020, 'connect', 0, 2, 10, 1, 0, 0, 'sh', 1, NULL, 0),
                    (30, 1030, 'openat', 0, 3, 11, 10, 0, 0, 'sh', 2, '/b', 3),
                    (40, 1040, 'openat', 0, 4, 11, 10, 0, 0, 'sh', 2, '/c', 3);",
        )
        .unwrap();
        c
    }

    #[test]
    fn identity_columns_read_when_present_and_absent_in_older_captures() {
        let c = capture();
        c.execute(
            "UPDATE processes SET container_id = 'abc', container_name = 'dev',
                container_image = 'img', pid_ns = 7, mnt_ns = 8, ns_pid = 1 WHERE id = 1",
            [],
        )
        .unwrap();
        let p = processes(&c).unwrap();
        assert_eq!(
            p.iter().map(|p| p.identity.clone()).collect::<Vec<_>>(),
            vec![
                ProcessIdentity::default(),
                ProcessIdentity {
                    container_id: Some("abc".into()),
                    container_name: Some("dev".into()),
                    container_image: Some("img".into()),
                    pid_ns: Some(7),
                    mnt_ns: Some(8),
                    ns_pid: Some(1),
                }
            ]
        );
        // A capture from before the columns: the same rows, no identity.
        let old = Connection::open_in_memory().unwrap();
        old.execute_batch(
            "CREATE TABLE processes (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL,
                start_mono_ns INTEGER NOT NULL, parent_id INTEGER, origin TEXT NOT NULL,
                comm TEXT, argv TEXT, cwd TEXT, uid INTEGER,
                exec_count INTEGER NOT NULL DEFAULT 0, end_mono_ns INTEGER, exit_code INTEGER,
                signal INTEGER);
             INSERT INTO processes (id, pid, start_mono_ns, origin) VALUES (1, 10, 5, 'root');",
        )
        .unwrap();
        assert!(!has_column(&old, "processes", "container_id").unwrap());
        let p = processes(&old).unwrap();
        assert_eq!((p.len(), p[0].identity.is_empty()), (1, true));
    }

    #[test]
    fn agents_are_labelled_by_their_last_argv_and_exe_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let rw = crate::store::CaptureRw::create(&path).unwrap();
        rw.conn()
            .execute_batch(
                "INSERT INTO processes (id, pid, start_mono_ns, origin, argv, exe)
                 VALUES (1, 10, 1, 'seeded', '[\"codex\",\"exec\"]', '/opt/codex/bin/codex'),
                        (2, 11, 2, 'fork', '[\"bash\",\"-c\",\"codex\"]', '/usr/bin/bash'),
                        (3, 12, 3, 'fork', NULL, NULL),
                        (4, 13, 4, 'fork', '[\"codex\",\"exec\"]', '/opt/codex/bin/codex');",
            )
            .unwrap();
        // What `record --agent codex` gives: its rules on argv[0] and exe.
        let recognise = |argv: &[String], exe: Option<&str>| {
            (argv.first().map(String::as_str) == Some("codex")
                || exe.is_some_and(|e| e.ends_with("/codex")))
            .then_some("codex")
        };
        assert_eq!(rw.label_agents(&recognise).unwrap(), 1);
        let p = processes(rw.conn()).unwrap();
        assert_eq!(
            p.iter()
                .map(|p| (p.id, p.agent.as_deref()))
                .collect::<Vec<_>>(),
            vec![(1, Some("codex")), (2, None), (3, None), (4, None)]
        );
    }

    #[test]
    fn processes_come_by_start_time_with_argv_parsed() {
        let c = capture();
        let p = processes(&c).unwrap();
        assert_eq!(
            p.iter()
                .map(|p| (p.id, p.parent_id, p.origin.as_str(), p.argv.clone()))
                .collect::<Vec<_>>(),
            vec![
                (2, Some(1), "fork", vec![]),
                (1, None, "root", vec!["sh".to_string()])
            ]
        );
    }

    #[test]
    fn a_window_holds_the_kinds_asked_for_between_its_ends() {
        let c = capture();
        let mut seen = Vec::new();
        let openat = EventFilter {
            kinds: &["openat"],
            ..Default::default()
        };
        events_in_window(&c, 10, 30, &openat, |e| {
            seen.push((e.mono_ns, e.wall_ns, e.path));
            true
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (10, 1010, Some("/a.json".to_string())),
                (30, 1030, Some("/b".to_string()))
            ]
        );
        let mut first = 0;
        let both = EventFilter {
            kinds: &["openat", "connect"],
            ..Default::default()
        };
        events_in_window(&c, 0, u64::MAX, &both, |e| {
            first = e.mono_ns;
            false
        })
        .unwrap();
        assert_eq!(first, 10);
    }

    #[test]
    fn plain_reads_under_the_skipped_prefixes_are_left_out() {
        let c = capture();
        c.execute_batch(
            "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, ppid, uid, gid, comm,
                 process_id, path, flags, result)
             VALUES (50, 1050, 'openat', 0, 5, 10, 1, 0, 0, 'sh', 1, '/usr/lib/libc.so', 'read,cloexec', 3),
                    (60, 1060, 'openat', 0, 6, 10, 1, 0, 0, 'sh', 1, '/usr/local/x', 'write,create', 3),
                    (70, 1070, 'openat', 0, 7, 10, 1, 0, 0, 'sh', 1, '/work/r', 'read', 3),
                    (80, 1080, 'openat', 0, 8, 10, 1, 0, 0, 'sh', 1, '/usr/local/log', 'read,append', 3),
                    (90, 1090, 'openat', 0, 9, 10, 1, 0, 0, 'sh', 1, '/etc/old', NULL, 3);
             INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, ppid, uid, gid, comm,
                 process_id, path, flags, result, errno)
             VALUES (52, 1052, 'openat', 0, 10, 10, 1, 0, 0, 'sh', 1, '/etc/shadow', 'read', -1, 'EPERM'),
                    (54, 1054, 'openat', 0, 11, 10, 1, 0, 0, 'sh', 1, '/usr/lib/nope.so', 'read', -1, 'ENOENT');",
        )
        .unwrap();
        let filter = EventFilter {
            kinds: &["openat"],
            skip_reads_under: &["/usr/", "/etc/"],
        };
        let mut seen = Vec::new();
        events_in_window(&c, 50, 90, &filter, |e| {
            seen.push(e.path.unwrap_or_default());
            true
        })
        .unwrap();
        // An append and an open without flags are writes (store::events):
        // never skipped as reads; a read refused with EPERM (`record
        // --enforce`) is kept, a failed probe (ENOENT) is not.
        assert_eq!(
            seen,
            [
                "/etc/shadow",
                "/usr/local/x",
                "/work/r",
                "/usr/local/log",
                "/etc/old"
            ]
        );
    }
}

/// One row of `external_messages`: a submission of `agentsight session
/// message` made while the capture was recording (see `store::messages`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionMessage {
    pub id: String,
    /// When it was submitted: wall time, ms since the epoch.
    pub time_ms: i64,
    pub session_id: String,
    pub provider: String,
    pub transport: String,
    /// The container the session lives in; None on the host.
    pub container: Option<String>,
    pub invoking_uid: i64,
    pub invoking_user: String,
    pub run_as_uid: i64,
    /// The agentsight process that submitted it.
    pub pid: i64,
    /// The provider process it started; None when none was started.
    pub provider_pid: Option<i64>,
    pub message_bytes: i64,
    /// `completed`, `acknowledged`, `failed`, `timeout` or `refused`; None
    /// when the log has no `finished` line for it (it never said).
    pub outcome: Option<String>,
    pub detail: Option<String>,
    /// When it finished (wall, ms); None with `outcome`.
    pub finished_ms: Option<i64>,
}

/// Wall ns of a wall time in ms as a log or capture gives it: negative is
/// the epoch, and a time past what ns can hold is the largest (the input
/// never makes the conversion overflow).
pub fn ms_to_ns(ms: i64) -> u64 {
    (ms.max(0) as u64).saturating_mul(1_000_000)
}

/// Every stored submission, by time (none in a capture made before the
/// table existed).
pub(super) fn session_messages(conn: &Connection) -> rusqlite::Result<Vec<SessionMessage>> {
    let exists: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='external_messages'",
        [],
        |r| r.get(0),
    )?;
    if exists == 0 {
        return Ok(Vec::new());
    }
    let mut st = conn.prepare(
        "SELECT id, time_ms, session_id, provider, transport, container, invoking_uid,
                invoking_user, run_as_uid, pid, provider_pid, message_bytes, outcome, detail,
                finished_ms
         FROM external_messages ORDER BY time_ms, id",
    )?;
    st.query_map([], |r| {
        Ok(SessionMessage {
            id: r.get(0)?,
            time_ms: r.get(1)?,
            session_id: r.get(2)?,
            provider: r.get(3)?,
            transport: r.get(4)?,
            container: r.get(5)?,
            invoking_uid: r.get(6)?,
            invoking_user: r.get(7)?,
            run_as_uid: r.get(8)?,
            pid: r.get(9)?,
            provider_pid: r.get(10)?,
            message_bytes: r.get(11)?,
            outcome: r.get(12)?,
            detail: r.get(13)?,
            finished_ms: r.get(14)?,
        })
    })?
    .collect()
}

impl SessionMessage {
    /// The provider process of this submission among the capture's
    /// processes: the one with `provider_pid` alive during the submission
    /// (from its time to its end, or the capture's end when it has none),
    /// the latest started if pids were reused. None when the capture has
    /// no such process (it was not recorded, or none was started).
    pub fn provider_process<'a>(
        &self,
        procs: &'a [ProcessRecord],
        anchors: &Anchors,
    ) -> Option<&'a ProcessRecord> {
        let pid = self.provider_pid?;
        let from = anchors.mono_of_ms(self.time_ms) as i64;
        // Wall ms → mono rounds down: a process started within the
        // submission's millisecond still counts.
        let from = from.saturating_sub(1_000_000);
        let to = self
            .finished_ms
            .map(|t| (anchors.mono_of_ms(t) as i64).saturating_add(1_000_000))
            .unwrap_or(i64::MAX);
        procs
            .iter()
            .filter(|p| p.pid == pid && p.start_mono_ns <= to)
            .filter(|p| p.end_mono_ns.is_none_or(|end| end >= from))
            .max_by_key(|p| (p.start_mono_ns, p.id))
    }
}
