//! Summaries kept while storing: what `show` prints of the events (counts
//! per kind, per process, the activity sections of `run`) and the
//! stored rows' id and time range, maintained by the writer in the same
//! transaction as the rows, so they are never out of step with them.
//!
//! Invariant: `summary_state.max_id` is the largest `event_rows.id` the
//! summaries count; they are used only while it equals `MAX(id)` of
//! `event_rows` (O(1)). A capture without the tables (older captures,
//! captures written through the `events` view) or whose rows changed after
//! the writer (a larger id) is read by the old scan. Only the writer and
//! [`rebuild`] create the tables.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS summary_kinds (kind TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summary_processes (process_id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS summary_activity (
    section INTEGER NOT NULL,
    what TEXT NOT NULL,
    a INTEGER,
    b INTEGER,
    first_mono INTEGER NOT NULL,
    PRIMARY KEY (section, what)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summary_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    events INTEGER NOT NULL,
    max_id INTEGER,
    min_mono INTEGER,
    max_mono INTEGER
);
";

/// The columns of one event the summaries count (text as the `events` view
/// shows it).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SummaryInput<'a> {
    pub kind: &'a str,
    pub mono_ns: i64,
    pub process_id: Option<i64>,
    pub path: Option<&'a str>,
    pub path_as_given: Option<&'a str>,
    pub real_path: Option<&'a str>,
    pub flags: Option<&'a str>,
    pub result: Option<i64>,
    pub errno: Option<&'a str>,
    pub bytes: Option<i64>,
    pub count: Option<i64>,
    pub read_bytes: Option<i64>,
    pub read_count: Option<i64>,
    pub family: Option<&'a str>,
    pub addr: Option<&'a str>,
    pub port: Option<i64>,
    pub query: Option<&'a str>,
}

/// The sums of one activity row: SQL's SUM (NULL when every value was).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sums {
    a: Option<i64>,
    b: Option<i64>,
    first_mono: i64,
}

fn add(x: Option<i64>, y: Option<i64>) -> Option<i64> {
    match (x, y) {
        (Some(x), Some(y)) => Some(x.wrapping_add(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `kind IN (…)` of the "files changed" section.
const CHANGE_KINDS: [&str; 15] = [
    "unlink",
    "unlinkat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "truncate",
    "ftruncate",
    "symlink",
    "symlinkat",
    "link",
    "linkat",
    "creat",
];

/// SQLite's `LIKE`: ASCII letters match either case.
fn like_contains(s: &str, needle: &str) -> bool {
    s.to_ascii_lowercase().contains(needle)
}

fn like_starts(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// SQL's `x < 0 AND errno != 'EINPROGRESS'` (three-valued).
fn failed_connect(result: Option<i64>, errno: Option<&str>) -> Option<i64> {
    let r = result.map(|r| r < 0);
    let e = errno.map(|e| e != "EINPROGRESS");
    match (r, e) {
        (Some(false), _) | (_, Some(false)) => Some(0),
        (Some(true), Some(true)) => Some(1),
        _ => None,
    }
}

/// Each activity section's row for one event: `(section, what, a, b)`,
/// exactly the `WHERE` and `GROUP BY` of the scan's queries.
fn activity_rows(e: &SummaryInput) -> Vec<(u8, String, Option<i64>, Option<i64>)> {
    let mut rows = Vec::new();
    if e.kind == "io"
        && let Some(path) = e.path
    {
        if e.bytes.is_some_and(|b| b > 0) {
            rows.push((0, path.to_owned(), e.bytes, e.count));
        }
        if e.read_bytes.is_some_and(|b| b > 0) {
            rows.push((1, path.to_owned(), e.read_bytes, e.read_count));
        }
    }
    let opened_to_create = matches!(e.kind, "open" | "openat" | "openat2")
        && e.flags.is_some_and(|f| like_contains(f, "create"));
    if CHANGE_KINDS.contains(&e.kind) || opened_to_create {
        let what = format!("{} {}", e.kind, e.path.or(e.path_as_given).unwrap_or("?"));
        rows.push((2, what, Some(1), e.result.map(|r| i64::from(r < 0))));
    }
    if let (Some(real), Some(path)) = (e.real_path, e.path)
        && real != path
        && !like_starts(path, "/proc/self/")
        && !like_starts(path, "/proc/thread-self/")
    {
        rows.push((3, format!("{path} → {real}"), Some(1), Some(0)));
    }
    if matches!(e.kind, "connect" | "sendto" | "sendmsg" | "sendmmsg")
        && let (Some(addr), Some(family)) = (e.addr, e.family)
    {
        let port = e.port.map(|p| format!(":{p}")).unwrap_or_default();
        let failed = failed_connect(e.result, e.errno);
        rows.push((4, format!("{family} {addr}{port}"), Some(1), failed));
    }
    if let Some(q) = e.query {
        rows.push((5, q.to_owned(), Some(1), Some(0)));
    }
    rows
}

/// What one transaction adds to the summaries.
#[derive(Debug, Default)]
pub(crate) struct SummaryDelta {
    kinds: HashMap<String, i64>,
    processes: HashMap<i64, i64>,
    activity: HashMap<(u8, String), Sums>,
    events: i64,
    mono: Option<(i64, i64)>,
}

impl SummaryDelta {
    pub fn add(&mut self, e: &SummaryInput) {
        self.events += 1;
        match self.kinds.get_mut(e.kind) {
            Some(n) => *n += 1,
            None => {
                self.kinds.insert(e.kind.to_owned(), 1);
            }
        }
        if let Some(p) = e.process_id {
            *self.processes.entry(p).or_default() += 1;
        }
        self.mono = Some(match self.mono {
            None => (e.mono_ns, e.mono_ns),
            Some((lo, hi)) => (lo.min(e.mono_ns), hi.max(e.mono_ns)),
        });
        for (section, what, a, b) in activity_rows(e) {
            let s = self.activity.entry((section, what)).or_insert(Sums {
                a: None,
                b: None,
                first_mono: e.mono_ns,
            });
            s.a = add(s.a, a);
            s.b = add(s.b, b);
            s.first_mono = s.first_mono.min(e.mono_ns);
        }
    }

    /// Adds the delta to the tables (in the caller's transaction) and
    /// records `max_id`, the largest event row id now counted.
    pub fn store(&mut self, t: &Connection, max_id: Option<i64>) -> rusqlite::Result<()> {
        let mut st = t.prepare_cached(
            "INSERT INTO summary_kinds (kind, n) VALUES (?1, ?2)
             ON CONFLICT (kind) DO UPDATE SET n = n + excluded.n",
        )?;
        for (k, n) in self.kinds.drain() {
            st.execute(params![k, n])?;
        }
        let mut st = t.prepare_cached(
            "INSERT INTO summary_processes (process_id, n) VALUES (?1, ?2)
             ON CONFLICT (process_id) DO UPDATE SET n = n + excluded.n",
        )?;
        for (p, n) in self.processes.drain() {
            st.execute(params![p, n])?;
        }
        let mut st = t.prepare_cached(
            "INSERT INTO summary_activity (section, what, a, b, first_mono) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (section, what) DO UPDATE SET
                a = CASE WHEN a IS NULL THEN excluded.a WHEN excluded.a IS NULL THEN a ELSE a + excluded.a END,
                b = CASE WHEN b IS NULL THEN excluded.b WHEN excluded.b IS NULL THEN b ELSE b + excluded.b END,
                first_mono = MIN(first_mono, excluded.first_mono)",
        )?;
        for ((section, what), s) in self.activity.drain() {
            st.execute(params![section, what, s.a, s.b, s.first_mono])?;
        }
        let (lo, hi) = self.mono.take().unzip();
        t.prepare_cached(
            "INSERT INTO summary_state (id, events, max_id, min_mono, max_mono) VALUES (1, ?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET events = events + excluded.events,
                max_id = COALESCE(excluded.max_id, max_id),
                min_mono = MIN(COALESCE(min_mono, excluded.min_mono), COALESCE(excluded.min_mono, min_mono)),
                max_mono = MAX(COALESCE(max_mono, excluded.max_mono), COALESCE(excluded.max_mono, max_mono))",
        )?
        .execute(params![self.events, max_id, lo, hi])?;
        self.events = 0;
        Ok(())
    }
}

/// Whether the summaries count exactly the stored rows (see the module's
/// invariant).
pub(crate) fn valid(conn: &Connection) -> rusqlite::Result<bool> {
    let has: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN
         ('summary_kinds', 'summary_processes', 'summary_activity', 'summary_state', 'event_rows')",
        [],
        |r| r.get(0),
    )?;
    if has != 5 {
        return Ok(false);
    }
    let kept: Option<Option<i64>> = conn
        .query_row("SELECT max_id FROM summary_state WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    let stored: Option<i64> = conn.query_row("SELECT MAX(id) FROM event_rows", [], |r| r.get(0))?;
    Ok(kept.unwrap_or(None) == stored)
}

/// `(what, a, b)` of an activity section (`run::CountRow`).
pub(crate) type SectionRow = (String, Option<i64>, Option<i64>);

/// The kept counts per kind, by kind.
pub(crate) fn kind_counts(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut st = conn.prepare("SELECT kind, n FROM summary_kinds ORDER BY kind")?;
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
}

/// The kept rows of activity section `section`, ordered as its scan
/// query orders them.
pub(crate) fn activity(conn: &Connection, section: usize) -> rusqlite::Result<Vec<SectionRow>> {
    let (order, limit) = match section {
        0 | 1 => ("a DESC, what", 10),
        2 => ("first_mono, what", 15),
        3 => ("first_mono, what", 10),
        _ => ("a DESC, what", 10),
    };
    let mut st = conn.prepare(&format!(
        "SELECT what, a, b FROM summary_activity WHERE section = ?1 ORDER BY {order} LIMIT {limit}"
    ))?;
    st.query_map([section as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// Recomputes the summaries of a capture from its rows (for captures whose
/// rows were written through the `events` view, e.g. synthetic ones): every
/// row read once, in id order, in the caller's connection.
pub fn rebuild(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch(
        "DELETE FROM summary_kinds; DELETE FROM summary_processes;
         DELETE FROM summary_activity; DELETE FROM summary_state;",
    )?;
    let mut delta = SummaryDelta::default();
    let mut st = conn.prepare(
        "SELECT kind, mono_ns, process_id, path, path_as_given, real_path, flags, result, errno,
                bytes, count, read_bytes, read_count, family, addr, port, query
         FROM events ORDER BY id",
    )?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let kind: String = r.get(0)?;
        let texts: Vec<Option<String>> = [3, 4, 5, 6, 8, 13, 14, 16]
            .iter()
            .map(|&i| r.get(i))
            .collect::<rusqlite::Result<_>>()?;
        delta.add(&SummaryInput {
            kind: &kind,
            mono_ns: r.get(1)?,
            process_id: r.get(2)?,
            path: texts[0].as_deref(),
            path_as_given: texts[1].as_deref(),
            real_path: texts[2].as_deref(),
            flags: texts[3].as_deref(),
            result: r.get(7)?,
            errno: texts[4].as_deref(),
            bytes: r.get(9)?,
            count: r.get(10)?,
            read_bytes: r.get(11)?,
            read_count: r.get(12)?,
            family: texts[5].as_deref(),
            addr: texts[6].as_deref(),
            port: r.get(15)?,
            query: texts[7].as_deref(),
        });
    }
    let max_id: Option<i64> = conn.query_row("SELECT MAX(id) FROM event_rows", [], |r| r.get(0))?;
    delta.store(conn, max_id)
}

/// Which [`SummaryInput`] field a recorder column fills.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot {
    Kind,
    Mono,
    Process,
    Path,
    PathAsGiven,
    RealPath,
    Flags,
    Result,
    Errno,
    Bytes,
    Count,
    ReadBytes,
    ReadCount,
    Family,
    Addr,
    Port,
    Query,
}

impl Slot {
    pub fn of(column: &str) -> Option<Self> {
        Some(match column {
            "kind" => Self::Kind,
            "mono_ns" => Self::Mono,
            "process_id" => Self::Process,
            "path" => Self::Path,
            "path_as_given" => Self::PathAsGiven,
            "real_path" => Self::RealPath,
            "flags" => Self::Flags,
            "result" => Self::Result,
            "errno" => Self::Errno,
            "bytes" => Self::Bytes,
            "count" => Self::Count,
            "read_bytes" => Self::ReadBytes,
            "read_count" => Self::ReadCount,
            "family" => Self::Family,
            "addr" => Self::Addr,
            "port" => Self::Port,
            "query" => Self::Query,
            _ => return None,
        })
    }
}

impl<'a> SummaryInput<'a> {
    /// Sets the field of `slot` from the value the recorder binds (an
    /// integer or a text).
    pub fn set(&mut self, slot: Slot, int: Option<i64>, text: Option<&'a str>) {
        match slot {
            Slot::Kind => self.kind = text.unwrap_or_default(),
            Slot::Mono => self.mono_ns = int.unwrap_or_default(),
            Slot::Process => self.process_id = int,
            Slot::Path => self.path = text,
            Slot::PathAsGiven => self.path_as_given = text,
            Slot::RealPath => self.real_path = text,
            Slot::Flags => self.flags = text,
            Slot::Result => self.result = int,
            Slot::Errno => self.errno = text,
            Slot::Bytes => self.bytes = int,
            Slot::Count => self.count = int,
            Slot::ReadBytes => self.read_bytes = int,
            Slot::ReadCount => self.read_count = int,
            Slot::Family => self.family = text,
            Slot::Addr => self.addr = text,
            Slot::Port => self.port = int,
            Slot::Query => self.query = text,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Capture, CaptureRw, write_every_kind};

    type Rows = Vec<(String, Option<i64>, Option<i64>)>;

    fn sections(cap: &Capture) -> Vec<(&'static str, Rows)> {
        cap.activity_sections()
            .unwrap()
            .into_iter()
            .map(|s| (s.title, s.rows))
            .collect()
    }

    #[test]
    fn the_writers_summaries_answer_exactly_as_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        write_every_kind(&db);
        let kept = Capture::open(&db).unwrap();
        assert!(kept.use_summaries().unwrap());
        let scan = Capture::open(&db).unwrap().scan_only();
        assert!(!scan.use_summaries().unwrap());
        assert_eq!(kept.event_counts().unwrap(), scan.event_counts().unwrap());
        assert_eq!(sections(&kept), sections(&scan));
        let total: i64 = kept.event_counts().unwrap().iter().map(|(_, n)| n).sum();
        assert_eq!(
            total,
            crate::store::events::EventKind::KNOWN.len() as i64 + 8
        );
        assert_eq!(
            sections(&kept)[0].1,
            [
                ("/workspace/project/src/f1".to_string(), Some(830), Some(4)),
                ("/workspace/project/src/f0".to_string(), Some(420), Some(2))
            ]
        );
        assert_eq!(
            sections(&kept)[5].1,
            [("a.example".to_string(), Some(1), Some(0))]
        );
    }

    #[test]
    fn rows_stored_after_the_writer_or_without_it_are_scanned() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        write_every_kind(&db);
        let before = Capture::open(&db).unwrap().event_counts().unwrap();
        let rw = CaptureRw::open(&db).unwrap();
        rw.conn()
            .execute_batch(
                "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, ppid, uid, gid, comm, query)
                 VALUES (5000, 1, 'dns', 0, 999, 1, 1, 0, 0, 'x', 'c.example')",
            )
            .unwrap();
        drop(rw);
        let cap = Capture::open(&db).unwrap();
        assert!(!cap.use_summaries().unwrap());
        let after = cap.event_counts().unwrap();
        let dns = |c: &[(String, i64)]| c.iter().find(|(k, _)| k == "dns").map(|(_, n)| *n);
        assert_eq!(dns(&after), dns(&before).map(|n| n + 1));
        drop(cap);
        // Counted again from the rows, the summaries are read again.
        let rw = CaptureRw::open(&db).unwrap();
        super::rebuild(rw.conn()).unwrap();
        drop(rw);
        let kept = Capture::open(&db).unwrap();
        assert!(kept.use_summaries().unwrap());
        assert_eq!(kept.event_counts().unwrap(), after);
        let scan = Capture::open(&db).unwrap().scan_only();
        assert_eq!(sections(&kept), sections(&scan));
    }

    #[test]
    fn a_capture_without_the_tables_is_scanned() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let c = crate::store::create(&db).unwrap();
        c.execute_batch(
            "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, ppid, uid, gid, comm)
             VALUES (1, 1, 'fork', 0, 1, 1, 1, 0, 0, 'x'), (2, 2, 'fork', 0, 2, 1, 1, 0, 0, 'x')",
        )
        .unwrap();
        drop(c);
        let cap = Capture::open(&db).unwrap();
        assert!(!cap.use_summaries().unwrap());
        assert_eq!(cap.event_counts().unwrap(), vec![("fork".to_string(), 2)]);
    }
}
