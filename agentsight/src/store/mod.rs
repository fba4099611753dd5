//! The SQLite capture: the store owns its schema (one column list for the
//! events, `layout`), the writer thread, the read API (`read`), read-only
//! access (`Capture`) and the one read-write handle (`CaptureRw`).
//!
//! One file holds one recording. The writer batches events into
//! transactions; readers open the file read-only and never modify it.
//! Columns are documented in `docs/capture-schema.md`.

pub mod audit_reads;
pub mod enforcement;
pub mod events;
#[cfg(test)]
pub(crate) mod foreign_for_tests;
mod intern;
mod layout;
mod live;
pub mod mcp;
pub(crate) mod messages;
pub mod meta;
mod private_copy;
pub mod read;
mod reader;
pub mod run;
pub mod sessions;
pub mod summary;
#[cfg(test)]
pub(crate) mod synthetic;
pub mod tls;
pub mod wire;
mod writer;

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

pub use layout::EventsLayout;
pub(crate) use layout::{ColumnType, exported_columns};
pub use live::LiveCapture;
pub use messages::NOTE_META as SESSION_MESSAGES_NOTE_META;
pub use reader::CaptureReader;
pub(crate) use writer::put_meta;
#[cfg(test)]
pub(crate) use writer::write_every_kind;
pub use writer::{
    DISK_FULL_LOSS_PREFIX, DiskFull, EventSender, MAX_SIZE_LOSS_PREFIX, STORING_STOPPED_META,
    StoreMsg, Writer, WriterStopped, WriterSummary,
};

/// Written to `meta.format`; a file without it is not a capture.
pub const FORMAT: &str = "agentsight-capture";
/// Version 2 adds the session tables (`store::sessions`); version 1 captures
/// still open and read as having no stored sessions.
pub const SCHEMA_VERSION: &str = "2";
/// Older versions this build still reads.
const READABLE_VERSIONS: [&str; 2] = ["1", SCHEMA_VERSION];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {reason}")]
    Open { path: String, reason: String },
    #[error("{path}: not an agentsight capture ({reason})")]
    NotCapture { path: String, reason: String },
    #[error(
        "{path}: capture schema version {found} is not supported (this build reads 1 and {SCHEMA_VERSION})"
    )]
    Version { path: String, found: String },
    #[error("{path}: {reason}")]
    Query { path: String, reason: String },
}

pub(crate) const SCHEMA: &str = r#"
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE clock_anchors (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    mono_ns INTEGER NOT NULL,
    wall_ns INTEGER NOT NULL
);
CREATE TABLE programs (
    name TEXT PRIMARY KEY,
    hook TEXT NOT NULL,
    attached INTEGER NOT NULL,
    error TEXT
);
CREATE TABLE loss (kind TEXT PRIMARY KEY, lost INTEGER NOT NULL);
CREATE TABLE gaps (
    id INTEGER PRIMARY KEY,
    stream INTEGER NOT NULL DEFAULT 0,
    cpu INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    missing INTEGER NOT NULL,
    from_mono_ns INTEGER NOT NULL,
    to_mono_ns INTEGER NOT NULL
);
CREATE TABLE processes (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_mono_ns INTEGER NOT NULL,
    parent_id INTEGER REFERENCES processes(id),
    ppid INTEGER,
    origin TEXT NOT NULL,
    comm TEXT,
    argv TEXT,
    argv_truncated INTEGER NOT NULL DEFAULT 0,
    cwd TEXT,
    exe TEXT,
    uid INTEGER,
    gid INTEGER,
    exec_count INTEGER NOT NULL DEFAULT 0,
    end_mono_ns INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    core_dumped INTEGER,
    container_id TEXT,
    container_name TEXT,
    container_image TEXT,
    pid_ns INTEGER,
    mnt_ns INTEGER,
    ns_pid INTEGER,
    agent TEXT,
    UNIQUE (pid, start_mono_ns)
);
CREATE TABLE strings (id INTEGER PRIMARY KEY, s TEXT NOT NULL, prefix INTEGER);
"#;

/// Indexes for readers, created when the recording finishes (maintaining
/// them per insert halves the writer's throughput). A capture cut short has
/// none; readers work without them, only slower. `events_by_time` holds the
/// whole export order (`mono_ns, cpu, seq`): on `mono_ns` alone SQLite
/// sorted each run of equal times in a temporary B-tree (jsonl export of 2M
/// events 17 % slower); a capture made before keeps its index.
pub(crate) const INDEXES: &str = "
CREATE INDEX IF NOT EXISTS events_by_time ON event_rows (mono_ns, cpu, seq);
CREATE INDEX IF NOT EXISTS events_by_process ON event_rows (process_id);
";

/// A capture opened read-only.
pub struct Capture {
    conn: Connection,
    pub path: String,
    /// Said once to the reader: the capture was not closed cleanly and was
    /// read from a private copy together with its sidecar.
    pub note: Option<String>,
    /// The capture as opened and type-checked, or its replayed private copy
    /// (unlinked: see `private_copy`). SQLite reads it through
    /// `/proc/self/fd`, so a file swapped in since is never read.
    _file: Option<std::fs::File>,
    /// Detected once at open; readers query `events` either way.
    pub layout: EventsLayout,
    /// Read every summary by scanning the events, even where the writer
    /// kept them (`summary`): the baseline `show --scan` measures.
    scan_only: bool,
}

/// A sidecar SQLite would need to read a capture that was not closed
/// cleanly: a `-wal` with frames, or a `-journal` (a hot rollback journal).
fn pending_sidecar(path: &Path) -> Option<(&'static str, std::fs::File, u64)> {
    for suffix in ["-wal", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(f) = crate::safefs::open_regular(Path::new(&p), true)
            && let Ok(m) = f.metadata()
            && m.len() > 0
        {
            return Some((suffix, f, m.len()));
        }
    }
    None
}

impl Capture {
    /// Opens a capture read-only and checks it is one. A missing, truncated,
    /// corrupt or foreign file gets an error that names it.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_checked(path, true)
    }

    /// [`Capture::open`] without the whole-file page walk: for views that
    /// read only a slice of a large capture (`correlate`, `pid`) and must stay
    /// fast. The header, format and version are still checked; corruption in
    /// pages they read surfaces as a query error naming the file.
    pub fn open_quick(path: &Path) -> Result<Self, StoreError> {
        Self::open_checked(path, false)
    }

    fn open_checked(path: &Path, full_check: bool) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        // Only a regular file, opened without blocking: a FIFO or a device
        // named like a capture must fail at once, not hang SQLite's open.
        let open_err = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let file = crate::safefs::open_regular(path, false).map_err(|e| {
            open_err(match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".into(),
                _ => e.to_string(),
            })
        })?;
        // Reading never writes next to the capture: a clean capture is opened
        // immutable (no locks, no -shm, no journal lookups); one with a
        // pending -wal or hot journal is replayed in a private copy, which is
        // then read the same way.
        let (copy, note) = match pending_sidecar(path) {
            None => (None, None),
            Some((suffix, side, len)) => {
                let copy =
                    private_copy::replayed_copy(&file, suffix, &side).map_err(|e| match e {
                        private_copy::CopyError::Sqlite(e) => StoreError::NotCapture {
                            path: shown.clone(),
                            reason: e.to_string(),
                        },
                        e => open_err(e.to_string()),
                    })?;
                let note = if suffix == "-wal" {
                    format!(
                        "{shown} was not closed cleanly (still recording, or the recorder was killed): read together with its {len}-byte -wal from a private copy; nothing next to it was changed"
                    )
                } else {
                    format!(
                        "{shown} has a rollback journal left by an interrupted write: read as rolled back, from a private copy; nothing next to it was changed"
                    )
                };
                (Some(copy), Some(note))
            }
        };
        let conn = {
            use std::os::fd::AsRawFd;
            let fd = copy.as_ref().map_or(&file, |c| c.file()).as_raw_fd();
            let uri = format!("file:/proc/self/fd/{fd}?immutable=1");
            Connection::open_with_flags(
                uri,
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| open_err(e.to_string()))?
        };
        // Immutable, SQLite reads only through the descriptor it opened: the
        // copy's names can go now, before any row is read.
        let file = match copy {
            Some(c) => c.unlink().map_err(|e| open_err(e.to_string()))?,
            None => file,
        };
        let _ = conn.busy_timeout(std::time::Duration::from_secs(2));
        let not_capture = |reason: String| StoreError::NotCapture {
            path: shown.clone(),
            reason,
        };
        // Reading the schema forces SQLite to parse the header: a non-database
        // or truncated file fails here.
        let has_meta: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| not_capture(e.to_string()))?;
        if has_meta.is_none() {
            return Err(not_capture("no meta table".into()));
        }
        let format: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key=?1",
                [meta::key::FORMAT],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| not_capture(e.to_string()))?;
        if format.as_deref() != Some(FORMAT) {
            return Err(not_capture("meta.format is not agentsight-capture".into()));
        }
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key=?1",
                [meta::key::SCHEMA_VERSION],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| not_capture(e.to_string()))?;
        if !version
            .as_deref()
            .is_some_and(|v| READABLE_VERSIONS.contains(&v))
        {
            return Err(StoreError::Version {
                path: shown,
                found: version.unwrap_or_else(|| "(none)".into()),
            });
        }
        // Walk every page once so corruption past the header is reported now,
        // with the file's name, rather than halfway through a listing.
        let check: String = if full_check {
            conn.query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(|e| not_capture(e.to_string()))?
        } else {
            "ok".to_string()
        };
        if check != "ok" {
            return Err(StoreError::Open {
                path: shown,
                reason: format!("database is corrupt: {check}"),
            });
        }
        let layout = EventsLayout::detect(&conn).map_err(|e| not_capture(e.to_string()))?;
        Ok(Self {
            conn,
            path: path.display().to_string(),
            note,
            _file: Some(file),
            layout,
            scan_only: false,
        })
    }

    /// Ignores the kept summaries: every count is read by scanning the
    /// events (older captures are always read that way).
    pub fn scan_only(mut self) -> Self {
        self.scan_only = true;
        self
    }

    /// Whether the summaries the writer kept can be read instead of a scan.
    pub(crate) fn use_summaries(&self) -> Result<bool, StoreError> {
        if self.scan_only {
            return Ok(false);
        }
        summary::valid(&self.conn).map_err(|e| self.query_err(e))
    }

    pub fn query_err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::Query {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.reader().meta(key)
    }

    pub fn loss(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT kind, lost FROM loss ORDER BY kind")
            .map_err(|e| self.query_err(e))?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.query_err(e))
    }

    /// Wall time (ns since the epoch) of the newest stored event, by the
    /// newest clock anchor at or before it (the first one for earlier
    /// times); None when no event was stored. What an unfinished capture
    /// holds ends there.
    pub fn last_event_wall_ns(&self) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT m + COALESCE(
                    (SELECT wall_ns - mono_ns FROM clock_anchors WHERE mono_ns <= m ORDER BY mono_ns DESC LIMIT 1),
                    (SELECT wall_ns - mono_ns FROM clock_anchors ORDER BY mono_ns LIMIT 1))
                 FROM (SELECT MAX(mono_ns) AS m FROM events) WHERE m IS NOT NULL",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.query_err(e))
    }

    pub fn gap_missing(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COALESCE(SUM(missing), 0) FROM gaps", [], |r| {
                r.get(0)
            })
            .map_err(|e| self.query_err(e))
    }
}

/// Which agent (if any) a process with this last argv and executable is:
/// `record --agent`'s rules, handed to [`CaptureRw::label_agents`].
pub type RecogniseAgent<'a> = dyn Fn(&[String], Option<&str>) -> Option<&'static str> + 'a;

/// A capture opened for writing: the recorder's writer (a new file), and
/// the enrichment after it (sessions, transcripts, trees, bindings,
/// correlations). Everything that writes a capture goes through one.
pub struct CaptureRw {
    conn: Connection,
    pub path: String,
}

impl CaptureRw {
    /// Creates a new capture file with the schema, mode 0600. Fails if it
    /// exists.
    pub fn create(path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            conn: create(path)?,
            path: path.display().to_string(),
        })
    }

    /// Opens an existing capture read-write.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|e| {
                StoreError::Open {
                    path: shown.clone(),
                    reason: e.to_string(),
                }
            })?;
        Ok(Self { conn, path: shown })
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Labels every process row that `recognise` (given its last argv and
    /// executable) names an agent: `processes.agent` (`record --agent`).
    /// A fork that never exec'd is not: it shows its parent's argv without
    /// having run anything of its own (e.g. a child whose exec failed).
    /// One transaction; returns how many rows were labelled.
    pub fn label_agents(&self, recognise: &RecogniseAgent<'_>) -> Result<usize, StoreError> {
        let qe = |e: rusqlite::Error| StoreError::Query {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        let rows: Vec<(i64, Option<String>, Option<String>)> = self
            .conn
            .prepare("SELECT id, argv, exe FROM processes WHERE NOT (origin = 'fork' AND exec_count = 0)")
            .and_then(|mut st| {
                st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .map_err(qe)?;
        let t = self.conn.unchecked_transaction().map_err(qe)?;
        let mut n = 0;
        for (id, argv, exe) in rows {
            let argv: Vec<String> = argv
                .and_then(|a| serde_json::from_str(&a).ok())
                .unwrap_or_default();
            if let Some(agent) = recognise(&argv, exe.as_deref()) {
                t.execute(
                    "UPDATE processes SET agent = ?1 WHERE id = ?2",
                    rusqlite::params![agent, id],
                )
                .map_err(qe)?;
                n += 1;
            }
        }
        t.commit().map_err(qe)?;
        Ok(n)
    }

    /// Creates the readers' indexes, as the writer does when a recording
    /// finishes (for captures written in one go, such as the benchmarks').
    pub fn create_indexes(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch(INDEXES)
            .map_err(|e| self.query_err(e))
    }

    /// Sets a `meta` key (the recorder's usage, added after it finished).
    pub fn put_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        put_meta(&self.conn, key, value).map_err(|e| self.query_err(e))
    }

    pub(crate) fn into_conn(self) -> Connection {
        self.conn
    }

    pub fn query_err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::Query {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }
}

/// The files SQLite keeps next to a database: a new capture must have
/// none, since SQLite would take a stray one as the capture's own.
const SIDECARS: [&str; 3] = ["-wal", "-shm", "-journal"];

fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    p.into()
}

/// Creates a new capture file with the schema, mode 0600. Fails if it
/// exists or if any of its sidecars does (checked before anything is
/// created); a failure after the file was created removes what this call
/// created, so a retry finds the directory as it was.
pub(crate) fn create(path: &Path) -> Result<Connection, StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display().to_string();
    for suffix in SIDECARS {
        let side = with_suffix(path, suffix);
        // Any kind of entry, a dangling link included.
        if std::fs::symlink_metadata(&side).is_ok() {
            return Err(StoreError::Open {
                path: side.display().to_string(),
                reason: "exists already (SQLite would take it as the new capture's own): remove it or choose another output".into(),
            });
        }
    }
    // Create the file ourselves first so its mode is 0600 from the start.
    // O_EXCL: never an existing file; O_NOFOLLOW: never through a link.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| StoreError::Open {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
    let made = Connection::open(path).and_then(|conn| {
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF;",
        )?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(&layout::schema())?;
        conn.execute_batch(sessions::SCHEMA)?;
        conn.execute_batch(messages::SCHEMA)?;
        conn.execute_batch(mcp::SCHEMA)?;
        conn.execute_batch(wire::SCHEMA)?;
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2), (?3, ?4)",
            [
                meta::key::FORMAT,
                FORMAT,
                meta::key::SCHEMA_VERSION,
                SCHEMA_VERSION,
            ],
        )?;
        Ok(conn)
    });
    match made {
        Ok(conn) => Ok(conn),
        Err(e) => {
            // None of these existed before this call (checked above), so
            // whatever is there now is its own.
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let p = with_suffix(path, suffix);
                if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                    let _ = std::fs::remove_file(&p);
                }
            }
            Err(StoreError::Open {
                path: shown,
                reason: e.to_string(),
            })
        }
    }
}
