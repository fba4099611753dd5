//! Small synthetic captures with the real schema, for the unit tests of the
//! modules that read captures (correlate, matching, enrichment): they build
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

    pub fn tree(&self, t: &TreeRow) -> i64 {
        super::sessions::insert_tree(&self.conn, &self.name, t).unwrap()
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
pub(crate) fn clear_external_messages(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("DELETE FROM external_messages").unwrap();
}
