//! What `audit` reads of a capture besides processes, meta and loss: its
//! events in full ([`FullEvent`], one time-ordered pass), the flags
//! correlate stored ([`Correlations`]), the gaps' CPUs, and the benchmark
//! baseline's per-finding lookups.

use std::collections::HashMap;

use rusqlite::OptionalExtension;

use super::{
    Capture, StoreError,
    events::EventKind,
    read::{self, EventRecord, RECORD_COLUMN_COUNT, RecordColumns, event_record},
    sessions::Role,
};

/// An event with every column a policy rule judges: the [`EventRecord`]
/// columns plus the exec's binary, the failed call's repeat count, a
/// connect's TCP outcome and the opened file's device and inode. The
/// record's own process identity is not read (`pid` 0, `comm` None):
/// audit takes a process from its row ([`RecordColumns::WithoutProcessIdentity`]).
pub struct FullEvent {
    pub record: EventRecord,
    /// `record.kind`, parsed.
    pub kind: EventKind,
    pub exe: Option<String>,
    pub filename: Option<String>,
    pub repeat: Option<i64>,
    pub tcp_state: Option<String>,
    /// A successful open or exec: the file's device (kernel encoding) and
    /// inode.
    pub dev: Option<i64>,
    pub ino: Option<i64>,
}

impl std::ops::Deref for FullEvent {
    type Target = EventRecord;
    fn deref(&self) -> &EventRecord {
        &self.record
    }
}

/// The further columns of a [`FullEvent`], after the record's.
const FULL_COLUMNS: &str = "exe, filename, repeat, tcp_state, dev, ino";

/// How audit reads the [`EventRecord`] columns.
const AUDIT_RECORD: RecordColumns = RecordColumns::WithoutProcessIdentity;

fn full_event(r: &rusqlite::Row) -> rusqlite::Result<FullEvent> {
    let record = event_record(r, AUDIT_RECORD)?;
    let n = RECORD_COLUMN_COUNT;
    Ok(FullEvent {
        kind: EventKind::from_word(&record.kind),
        record,
        exe: r.get(n)?,
        filename: r.get(n + 1)?,
        repeat: r.get(n + 2)?,
        tcp_state: r.get(n + 3)?,
        dev: r.get(n + 4)?,
        ino: r.get(n + 5)?,
    })
}

/// One correlation row as audit reads it, with its session.
pub struct CorrelationFlag {
    pub event_id: Option<i64>,
    pub process_id: Option<i64>,
    pub provider: String,
    pub session_id: String,
    pub tool_index: Option<i64>,
    pub call_id: Option<String>,
    pub role: Role,
    pub reason: Option<String>,
}

/// The correlations of a capture that holds bindings, and the events the
/// flagged ones (every role but `attributed`) name, read in one query.
pub struct Correlations {
    pub rows: Vec<CorrelationFlag>,
    pub flagged_events: HashMap<i64, FullEvent>,
}

impl Capture {
    /// The select list of [`FullEvent`] for this capture (one made before
    /// kernel paths has no `real_path`, `dev`, `ino`: NULL).
    fn full_columns(&self) -> Result<String, StoreError> {
        let has_real =
            read::has_column(&self.conn, "events", "real_path").map_err(|e| self.query_err(e))?;
        Ok(if has_real {
            format!("{}, {FULL_COLUMNS}", AUDIT_RECORD.select_list(&[]))
        } else {
            format!(
                "{}, {}",
                AUDIT_RECORD.select_list(&["real_path"]),
                FULL_COLUMNS.replace("dev, ino", "NULL, NULL")
            )
        })
    }

    /// Every event of `kinds`, by time then id, each handed to `visit` as it
    /// is read (a capture is never held whole, and a row is not moved: it is
    /// lent); the first error of `visit` stops the pass and is returned.
    pub fn full_events_of_kinds<E: From<StoreError>>(
        &self,
        kinds: &[EventKind],
        mut visit: impl FnMut(&FullEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        let marks: Vec<String> = (1..=kinds.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "SELECT {} FROM events WHERE kind IN ({}) ORDER BY mono_ns, id",
            self.full_columns()?,
            marks.join(",")
        );
        let q = |e| E::from(self.query_err(e));
        let mut st = self.conn.prepare(&sql).map_err(q)?;
        let words: Vec<&str> = kinds.iter().map(EventKind::as_str).collect();
        let mut rows = st
            .query(rusqlite::params_from_iter(words.iter()))
            .map_err(q)?;
        while let Some(r) = rows.next().map_err(q)? {
            visit(&full_event(r).map_err(q)?)?;
        }
        Ok(())
    }

    fn has_table(&self, name: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1",
                [name],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
            .map_err(|e| self.query_err(e))
    }

    /// The correlation rows (in row order) and the events the flagged ones
    /// name; None when the capture holds no bindings (nothing was
    /// correlated). A row of a role this version does not know is skipped
    /// with a warning.
    pub fn correlations(&self) -> Result<Option<Correlations>, StoreError> {
        let q = |e| self.query_err(e);
        if !self.has_table("correlations")? || !self.has_table("bindings")? {
            return Ok(None);
        }
        let bindings: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM bindings", [], |r| r.get(0))
            .map_err(q)?;
        if bindings == 0 {
            return Ok(None);
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT c.event_id, c.process_id, s.provider, s.session_id, c.tool_index, c.call_id, c.role, c.reason
                 FROM correlations c JOIN sessions s ON s.id = c.session_row ORDER BY c.id",
            )
            .map_err(q)?;
        let mut rows = Vec::new();
        let mut read = st.query([]).map_err(q)?;
        while let Some(r) = read.next().map_err(q)? {
            let role: String = r.get(6).map_err(q)?;
            let Some(role) = Role::from_word(&role) else {
                tracing::warn!(%role, "{}: unknown correlation role, row skipped", self.path);
                continue;
            };
            rows.push(CorrelationFlag {
                event_id: r.get(0).map_err(q)?,
                process_id: r.get(1).map_err(q)?,
                provider: r.get(2).map_err(q)?,
                session_id: r.get(3).map_err(q)?,
                tool_index: r.get(4).map_err(q)?,
                call_id: r.get(5).map_err(q)?,
                role,
                reason: r.get(7).map_err(q)?,
            });
        }
        let flagged_events = self.flagged_events()?;
        Ok(Some(Correlations {
            rows,
            flagged_events,
        }))
    }

    /// The events of every correlation row but `attributed` ones, by id:
    /// one query, however many flags there are.
    fn flagged_events(&self) -> Result<HashMap<i64, FullEvent>, StoreError> {
        let q = |e| self.query_err(e);
        let sql = format!(
            "SELECT {} FROM events WHERE id IN
             (SELECT event_id FROM correlations WHERE event_id IS NOT NULL AND role <> ?1)",
            self.full_columns()?
        );
        let mut st = self.conn.prepare(&sql).map_err(q)?;
        let mut rows = st.query([Role::Attributed.as_str()]).map_err(q)?;
        let mut out = HashMap::new();
        while let Some(r) = rows.next().map_err(q)? {
            let ev = full_event(r).map_err(q)?;
            out.insert(ev.id, ev);
        }
        Ok(out)
    }

    /// On how many CPUs sequence gaps were found.
    pub fn gap_cpus(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(DISTINCT cpu) FROM gaps", [], |r| r.get(0))
            .map_err(|e| self.query_err(e))
    }

    /// The argv (stored JSON) of a process's last exec at or before `at`:
    /// the benchmark baseline's per-chain-entry query (by process, then
    /// filtered: there is no index on (process_id, kind, mono_ns)). None
    /// also when the query fails, as the baseline always did.
    pub fn exec_argv_at(&self, process_id: i64, at: i64) -> Option<String> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT argv FROM events WHERE process_id = ?1 AND kind = 'exec' AND mono_ns <= ?2
                 ORDER BY mono_ns DESC LIMIT 1",
            )
            .ok()?;
        st.query_row(rusqlite::params![process_id, at], |r| {
            r.get::<_, Option<String>>(0)
        })
        .optional()
        .ok()
        .flatten()
        .flatten()
    }

    /// The `tcp_state` of a process's connection to `addr:port` nearest to
    /// `mono_ns`: the benchmark baseline's per-finding query.
    pub fn tcp_state_nearest(
        &self,
        process_id: i64,
        addr: &str,
        port: i64,
        mono_ns: i64,
    ) -> Result<Option<String>, StoreError> {
        let q = |e| self.query_err(e);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT tcp_state FROM events WHERE kind = 'tcp_state' AND process_id = ?1
                 AND addr = ?2 AND port = ?3 ORDER BY ABS(mono_ns - ?4) LIMIT 1",
            )
            .map_err(q)?;
        st.query_row(rusqlite::params![process_id, addr, port, mono_ns], |r| {
            r.get::<_, Option<String>>(0)
        })
        .optional()
        .map(Option::flatten)
        .map_err(q)
    }
}
