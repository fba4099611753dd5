//! Small synthetic captures with the real schema, for the unit tests of the
//! modules that read captures (correlate, matching, enrichment, audit): they build
//! rows through these typed helpers, so every SQL statement stays here.

use std::path::Path;

use rusqlite::{Connection, params};

use super::{CaptureReader, sessions::TreeRow};

/// A process row; `Default` is a root process with nothing known.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessRow<'a> {
    pub id: i64,
    pub pid: i64,
    pub start_mono_ns: i64,
    /// (row id, pid) of the parent.
    pub parent: Option<(i64, i64)>,
    /// `root` when empty and without a parent, `fork` with one.
    pub origin: &'a str,
    pub comm: &'a str,
    pub argv: &'a [&'a str],
    pub cwd: Option<&'a str>,
    pub exec_count: i64,
    pub exit_code: Option<i64>,
    /// (id, name) of its container.
    pub container: Option<(&'a str, &'a str)>,
}

/// An event row of a process; `comm` defaults to the process row's,
/// `tid` to the pid.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventRow<'a> {
    pub mono_ns: i64,
    pub wall_ns: i64,
    pub kind: &'a str,
    pub pid: i64,
    pub ppid: i64,
    pub process_id: Option<i64>,
    pub comm: Option<&'a str>,
    pub argv: Option<&'a [&'a str]>,
    pub path: Option<&'a str>,
    pub old_path: Option<&'a str>,
    pub flags: Option<&'a str>,
    pub result: i64,
    pub family: Option<&'a str>,
    pub addr: Option<&'a str>,
    pub port: Option<i64>,
}

/// The columns of an event the audit rules judge besides [`EventRow`]'s.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventDetail<'a> {
    pub errno: Option<&'a str>,
    /// An exec's binary.
    pub exe: Option<&'a str>,
    /// The DNS name a query asked for.
    pub query: Option<&'a str>,
    /// The file the kernel opened.
    pub real_path: Option<&'a str>,
}

/// A capture file being built (`store::create`: the schema of a new one).
pub(crate) struct SyntheticCapture {
    conn: Connection,
    /// How the reader names it in errors.
    name: String,
    seq: i64,
}

impl SyntheticCapture {
    pub fn create(path: &Path, name: &str) -> Self {
        Self {
            conn: super::create(path).unwrap(),
            name: name.to_string(),
            seq: 0,
        }
    }

    /// A capture built before, reopened to add to it; events continue its
    /// sequence numbers.
    pub fn open(path: &Path, name: &str) -> Self {
        let conn = Connection::open(path).unwrap();
        let seq = conn
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))
            .unwrap();
        Self {
            conn,
            name: name.to_string(),
            seq,
        }
    }

    /// Sets a `meta` value.
    pub fn meta(&self, key: &str, value: &str) {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![key, value],
            )
            .unwrap();
    }

    /// Records `lost` of `kind` lost in the kernel.
    pub fn loss(&self, kind: &str, lost: i64) {
        self.conn
            .execute(
                "INSERT INTO loss (kind, lost) VALUES (?1, ?2)",
                params![kind, lost],
            )
            .unwrap();
    }

    /// Sets the namespace columns of a process row (a container process:
    /// its pid and mount namespaces and its pid inside).
    pub fn put_in_namespaces(&self, id: i64, pid_ns: i64, mnt_ns: i64, ns_pid: i64) {
        self.conn
            .execute(
                "UPDATE processes SET pid_ns = ?1, mnt_ns = ?2, ns_pid = ?3 WHERE id = ?4",
                params![pid_ns, mnt_ns, ns_pid, id],
            )
            .unwrap();
    }

    pub fn reader(&self) -> CaptureReader<'_> {
        CaptureReader::new(&self.conn, &self.name)
    }

    pub fn anchor(&self, label: &str, mono_ns: i64, wall_ns: i64) {
        self.conn
            .execute(
                "INSERT INTO clock_anchors (label, mono_ns, wall_ns) VALUES (?1, ?2, ?3)",
                params![label, mono_ns, wall_ns],
            )
            .unwrap();
    }

    pub fn process(&self, p: &ProcessRow) {
        let origin = match (p.origin, p.parent) {
            ("", None) => "root",
            ("", Some(_)) => "fork",
            (o, _) => o,
        };
        self.conn
            .execute(
                "INSERT INTO processes (id, pid, start_mono_ns, parent_id, ppid, origin, comm, argv,
                     cwd, exec_count, exit_code, container_id, container_name)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    p.id,
                    p.pid,
                    p.start_mono_ns,
                    p.parent.map(|p| p.0),
                    p.parent.map(|p| p.1),
                    origin,
                    p.comm,
                    serde_json::to_string(p.argv).unwrap(),
                    p.cwd,
                    p.exec_count,
                    p.exit_code,
                    p.container.map(|c| c.0),
                    p.container.map(|c| c.1),
                ],
            )
            .unwrap();
    }

    /// Sets the container columns of these process rows.
    pub fn put_in_container(&self, ids: &[i64], id: &str, name: &str, image: &str) {
        for pid in ids {
            self.conn
                .execute(
                    "UPDATE processes SET container_id = ?1, container_name = ?2,
                         container_image = ?3 WHERE id = ?4",
                    params![id, name, image, pid],
                )
                .unwrap();
        }
    }

    /// Stores an event; its sequence number is the next one on CPU 0.
    pub fn event(&mut self, e: &EventRow) {
        self.seq += 1;
        self.conn
            .execute(
                "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm,
                     process_id, argv, path, old_path, flags, result, family, addr, port)
                 VALUES (?1, ?2, ?3, 0, ?4, ?5, ?5, ?6, 1000, 1000,
                     COALESCE(?7, (SELECT comm FROM processes WHERE id = ?8)), ?8, ?9, ?10, ?11,
                     ?12, ?13, ?14, ?15, ?16)",
                params![
                    e.mono_ns,
                    e.wall_ns,
                    e.kind,
                    self.seq,
                    e.pid,
                    e.ppid,
                    e.comm,
                    e.process_id,
                    e.argv.map(|a| serde_json::to_string(a).unwrap()),
                    e.path,
                    e.old_path,
                    e.flags,
                    e.result,
                    e.family,
                    e.addr,
                    e.port,
                ],
            )
            .unwrap();
    }

    /// Stores an event with the further columns of `detail`; returns its
    /// row id.
    pub fn event_with(&mut self, e: &EventRow, detail: &EventDetail) -> i64 {
        self.event(e);
        let id = self
            .conn
            .query_row("SELECT MAX(id) FROM events", [], |r| r.get(0))
            .unwrap();
        self.conn
            .execute(
                "UPDATE events SET errno = ?1, exe = ?2, query = ?3, real_path = ?4 WHERE id = ?5",
                params![detail.errno, detail.exe, detail.query, detail.real_path, id],
            )
            .unwrap();
        id
    }

    /// Moves the events with ids in `ids` to another process row.
    pub fn set_event_process(&self, ids: std::ops::RangeInclusive<i64>, process_id: i64) {
        self.conn
            .execute(
                "UPDATE events SET process_id = ?1 WHERE id BETWEEN ?2 AND ?3",
                params![process_id, ids.start(), ids.end()],
            )
            .unwrap();
    }

    /// Sets the file the kernel opened for event `id`.
    pub fn set_real_path(&self, id: i64, real_path: &str) {
        self.conn
            .execute(
                "UPDATE events SET real_path = ?1 WHERE id = ?2",
                params![real_path, id],
            )
            .unwrap();
    }

    pub fn tree(&self, t: &TreeRow) -> i64 {
        super::sessions::insert_tree(&self.conn, &self.name, t).unwrap()
    }

    /// Marks process row `id` ended at `end_mono_ns`.
    pub fn end_process(&self, id: i64, end_mono_ns: i64) {
        self.conn
            .execute(
                "UPDATE processes SET end_mono_ns = ?1 WHERE id = ?2",
                params![end_mono_ns, id],
            )
            .unwrap();
    }

    /// Stores an `io` event: `bytes` written in `count` calls (`None`: a
    /// row that does not say its count).
    pub fn io_event(&mut self, e: &EventRow, bytes: i64, count: Option<i64>) {
        self.event(e);
        self.conn
            .execute(
                "UPDATE events SET bytes = ?1, count = ?2 WHERE id = (SELECT MAX(id) FROM events)",
                params![bytes, count],
            )
            .unwrap();
    }

    /// Records a sequence gap of `stream` on `cpu`: the numbers `seqs`
    /// missing between the records at `from_mono_ns` and `to_mono_ns`.
    pub fn gap(
        &self,
        stream: i64,
        cpu: i64,
        seqs: std::ops::RangeInclusive<i64>,
        from_mono_ns: i64,
        to_mono_ns: i64,
    ) {
        self.conn
            .execute(
                "INSERT INTO gaps (stream, cpu, first_seq, last_seq, missing, from_mono_ns, to_mono_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    stream,
                    cpu,
                    seqs.start(),
                    seqs.end(),
                    seqs.end() - seqs.start() + 1,
                    from_mono_ns,
                    to_mono_ns
                ],
            )
            .unwrap();
    }

    /// Stores a transcript's session; returns its row.
    pub fn session(&self, s: &crate::sessions::AgentSession) -> i64 {
        super::sessions::insert_session(&self.conn, &self.name, s).unwrap()
    }

    pub fn binding(&self, b: &super::sessions::BindingRow) {
        super::sessions::insert_binding(&self.conn, &self.name, b).unwrap()
    }

    /// Drops the `mcp_servers` table: a capture made before MCP servers
    /// were stored.
    pub fn without_mcp_servers(&self) {
        self.conn.execute_batch("DROP TABLE mcp_servers").unwrap();
    }

    /// Creates the readers' indexes, as a finished recording has them.
    pub fn create_indexes(&self) {
        self.conn.execute_batch(super::INDEXES).unwrap();
    }
}

/// The paths of the transcript copies stored in the capture at `path`.
pub(crate) fn transcript_paths(path: &Path) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let mut st = conn
        .prepare("SELECT path FROM transcript_files ORDER BY id")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Removes the stored `session message` submissions of the capture at
/// `path` (a test storing them again).
pub(crate) fn clear_session_messages(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("DELETE FROM external_messages").unwrap();
}
