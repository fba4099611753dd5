//! Reads the views draw a run from: the activity summary `show` and the
//! report print, the events in time order, the DNS names asked.

use rusqlite::types::ValueRef;

use super::{
    Capture, StoreError,
    layout::exported_columns,
    read::{self, DnsQuery, EventRecord, EventsError},
};

/// One section of [`Capture::activity_sections`].
#[derive(Debug, Clone)]
pub struct ActivitySection {
    /// The title, naming the two counts in parentheses.
    pub title: &'static str,
    pub rows: Vec<CountRow>,
}

/// `(what, a, b)` of an activity section; a count is `None` when the
/// capture did not say it (an `io` row without its count).
pub type CountRow = (String, Option<i64>, Option<i64>);

/// The summary's activity sections: title and query (each bounded by LIMIT).
const ACTIVITY_SECTIONS: [(&str, &str); 6] = [
    (
        "files written (bytes, writes)",
        "SELECT path, SUM(bytes), SUM(count) FROM events
         WHERE kind = 'io' AND path IS NOT NULL AND bytes > 0
         GROUP BY path ORDER BY SUM(bytes) DESC, path LIMIT 10",
    ),
    (
        "files read (bytes, reads)",
        "SELECT path, SUM(read_bytes), SUM(read_count) FROM events
         WHERE kind = 'io' AND path IS NOT NULL AND read_bytes > 0
         GROUP BY path ORDER BY SUM(read_bytes) DESC, path LIMIT 10",
    ),
    (
        "files changed (created/deleted/renamed; operations, failed)",
        "SELECT kind || ' ' || COALESCE(path, path_as_given, '?'), COUNT(*), SUM(result < 0) FROM events
         WHERE kind IN ('unlink','unlinkat','rmdir','rename','renameat','renameat2','mkdir','mkdirat',
                        'truncate','ftruncate','symlink','symlinkat','link','linkat','creat')
            OR (kind IN ('open','openat','openat2') AND flags LIKE '%create%')
         GROUP BY 1 ORDER BY MIN(mono_ns), 1 LIMIT 15",
    ),
    (
        "opened under another name (path as resolved → file the kernel opened; opens, 0)",
        "SELECT path || ' → ' || real_path, COUNT(*), 0 FROM events
         WHERE real_path IS NOT NULL AND path IS NOT NULL AND real_path != path
           AND path NOT LIKE '/proc/self/%' AND path NOT LIKE '/proc/thread-self/%'
         GROUP BY 1 ORDER BY MIN(mono_ns), 1 LIMIT 10",
    ),
    (
        "network destinations (connects, failed)",
        "SELECT family || ' ' || addr || COALESCE(':' || port, ''), COUNT(*),
                SUM(result < 0 AND errno != 'EINPROGRESS') FROM events
         WHERE kind IN ('connect','sendto','sendmsg','sendmmsg') AND addr IS NOT NULL
         GROUP BY 1 ORDER BY COUNT(*) DESC, 1 LIMIT 10",
    ),
    (
        "DNS names queried (queries)",
        "SELECT query, COUNT(*), 0 FROM events WHERE query IS NOT NULL
         GROUP BY query ORDER BY COUNT(*) DESC, query LIMIT 10",
    ),
];

impl Capture {
    /// Top files written and read, files changed, files opened under
    /// another name, network destinations and DNS names: each section's
    /// title and its rows `(what, a, b)`, the two counts the title names.
    pub fn activity_sections(&self) -> Result<Vec<ActivitySection>, StoreError> {
        let rows = |sql: &str| -> Result<Vec<CountRow>, StoreError> {
            let mut st = self.conn.prepare(sql).map_err(|e| self.query_err(e))?;
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .and_then(|r| r.collect())
                .map_err(|e| self.query_err(e))
        };
        let kept = self.use_summaries()?;
        ACTIVITY_SECTIONS
            .iter()
            .enumerate()
            .map(|(i, &(title, sql))| {
                let rows = if kept {
                    super::summary::activity(&self.conn, i).map_err(|e| self.query_err(e))?
                } else {
                    rows(sql)?
                };
                Ok(ActivitySection { title, rows })
            })
            .collect()
    }

    /// Every event in time order, each handed to `visit` as it is read
    /// ([`read::events_by_time`]): a large capture is never held whole.
    pub fn events_by_time(
        &self,
        visit: impl FnMut(EventRecord) -> std::io::Result<()>,
    ) -> Result<(), VisitError> {
        read::events_by_time(&self.conn, visit).map_err(|e| match e {
            EventsError::Query(e) => VisitError::Store(self.query_err(e)),
            EventsError::Visit(e) => VisitError::Visit(e),
        })
    }

    /// Every event as `export --format jsonl` writes it, in its order
    /// (monotonic time, then CPU and sequence number), each handed to
    /// `visit` as it is read: a large capture is never held whole. Interned
    /// text is resolved through the `strings` table read once into memory
    /// and `wall_ns` from the clock anchors, not per row by the `events`
    /// view ([`Capture::export_rows_by_view`], the baseline, reads the view).
    pub fn export_rows<E: From<StoreError>>(
        &self,
        visit: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.layout != super::EventsLayout::Interned {
            return self.export_rows_by_view(visit);
        }
        let qe = |e| self.query_err(e);
        let strings = load_strings(&self.conn).map_err(qe)?;
        let Some(strings) = strings else {
            return self.export_rows_by_view(visit);
        };
        let offsets = anchor_offsets(&self.conn).map_err(qe)?;
        let cols: Vec<String> = exported_columns().map(super::layout::raw_expr).collect();
        let sql = format!(
            "SELECT r.wall_ns, r.process_id, r.mono_ns, {}, r.anchor FROM event_rows r
             ORDER BY r.mono_ns, r.cpu, r.seq",
            cols.join(", ")
        );
        let fast = Resolve {
            strings: &strings,
            offsets: &offsets,
            text: exported_columns().map(|c| c.ty.is_text()).collect(),
            anchor_at: cols.len() + 3,
        };
        self.visit_rows(&sql, Some(&fast), visit)
    }

    /// [`Capture::export_rows`] through the `events` view (every text and
    /// wall time looked up per row by SQLite): older captures, and the
    /// baseline of `cargo xtask bench export`.
    pub fn export_rows_by_view<E: From<StoreError>>(
        &self,
        visit: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<(), E> {
        // `wall_ns`, `process_id` and `mono_ns` first, then the exported
        // columns (`ExportRow::value` counts from there).
        let names: Vec<&str> = exported_columns().map(|c| c.name).collect();
        let sql = format!(
            "SELECT wall_ns, process_id, mono_ns, {} FROM events ORDER BY mono_ns, cpu, seq",
            names.join(", ")
        );
        self.visit_rows(&sql, None, visit)
    }

    fn visit_rows<E: From<StoreError>>(
        &self,
        sql: &str,
        fast: Option<&Resolve>,
        mut visit: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<(), E> {
        let qe = |e| self.query_err(e);
        let mut st = self.conn.prepare(sql).map_err(qe)?;
        let mut rows = st.query([]).map_err(qe)?;
        while let Some(row) = rows.next().map_err(qe)? {
            visit(&ExportRow {
                row,
                cap: self,
                fast,
            })?;
        }
        Ok(())
    }

    /// The newest monotonic time of any stored event, None when there is none.
    pub fn last_event_mono_ns(&self) -> Result<Option<i64>, StoreError> {
        read::last_event_mono_ns(&self.conn).map_err(|e| self.query_err(e))
    }

    /// Every DNS name asked, per process ([`read::dns_queries`]).
    pub fn dns_queries(&self) -> Result<Vec<DnsQuery>, StoreError> {
        read::dns_queries(&self.conn).map_err(|e| self.query_err(e))
    }
}

/// Why a visit of the events stopped: the read failed, or the visitor did.
#[derive(Debug, thiserror::Error)]
pub enum VisitError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Visit(#[from] std::io::Error),
}

/// One stored value, borrowed from the row being read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'r> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'r str),
    Blob(&'r [u8]),
}

/// How the fast export resolves a raw `event_rows` row.
struct Resolve<'a> {
    /// Each `strings` id's text as the view shows it (its prefix's text
    /// first); None: no such id.
    strings: &'a [Option<Box<str>>],
    /// Each clock anchor's `wall_ns - mono_ns`, by id.
    offsets: &'a std::collections::HashMap<i64, i64>,
    /// Whether exported column `i` is text.
    text: Vec<bool>,
    /// The row's `anchor` column.
    anchor_at: usize,
}

/// More ids than this in `strings` (a sparse table) are read through the view.
const MAX_STRING_ID: i64 = 1 << 26;

/// The `strings` table in memory, by id, each text as the view resolves it
/// (its prefix's `s`, then its own); None when the ids are too sparse.
#[allow(clippy::type_complexity)]
fn load_strings(conn: &rusqlite::Connection) -> rusqlite::Result<Option<Vec<Option<Box<str>>>>> {
    let (max, n): (Option<i64>, i64) =
        conn.query_row("SELECT MAX(id), COUNT(*) FROM strings", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let max = max.unwrap_or(0).max(0);
    if max > MAX_STRING_ID || max > 4 * n + 4096 {
        return Ok(None);
    }
    let mut raw: Vec<Option<(String, Option<i64>)>> = vec![None; max as usize + 1];
    let mut st = conn.prepare("SELECT id, s, prefix FROM strings")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        if let Some(slot) = usize::try_from(id).ok().and_then(|i| raw.get_mut(i)) {
            *slot = Some((r.get(1)?, r.get(2)?));
        }
    }
    let own = |id: i64| -> Option<&str> {
        usize::try_from(id)
            .ok()
            .and_then(|i| raw.get(i))
            .and_then(|e| e.as_ref())
            .map(|(s, _)| s.as_str())
    };
    let full = raw
        .iter()
        .map(|e| {
            e.as_ref().and_then(|(s, prefix)| match prefix {
                None => Some(s.clone().into_boxed_str()),
                // The view's `q.s || p.s`: NULL when the prefix row is missing.
                Some(p) => own(*p).map(|q| format!("{q}{s}").into_boxed_str()),
            })
        })
        .collect();
    Ok(Some(full))
}

fn anchor_offsets(
    conn: &rusqlite::Connection,
) -> rusqlite::Result<std::collections::HashMap<i64, i64>> {
    let mut st = conn.prepare("SELECT id, wall_ns - mono_ns FROM clock_anchors")?;
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
}

/// One event row of [`Capture::export_rows`].
pub struct ExportRow<'r> {
    row: &'r rusqlite::Row<'r>,
    cap: &'r Capture,
    fast: Option<&'r Resolve<'r>>,
}

impl ExportRow<'_> {
    fn get<T: rusqlite::types::FromSql>(&self, i: usize) -> Result<T, StoreError> {
        self.row.get(i).map_err(|e| self.cap.query_err(e))
    }

    pub fn wall_ns(&self) -> Result<i64, StoreError> {
        let Some(fast) = self.fast else {
            return self.get(0);
        };
        if let Some(w) = self.get::<Option<i64>>(0)? {
            return Ok(w);
        }
        // The view's `mono_ns + (wall_ns - mono_ns of the row's anchor)`.
        let anchor: Option<i64> = self.get(fast.anchor_at)?;
        match anchor.and_then(|a| fast.offsets.get(&a)) {
            Some(off) => Ok(self.mono_ns()?.wrapping_add(*off)),
            None => Err(StoreError::Query {
                path: self.cap.path.clone(),
                reason: "event row without a wall time (no clock anchor)".into(),
            }),
        }
    }

    /// The event's process row, when it has one.
    pub fn process_id(&self) -> Result<Option<i64>, StoreError> {
        self.get(1)
    }

    pub fn mono_ns(&self) -> Result<i64, StoreError> {
        self.get(2)
    }

    /// The value of exported column `i` (in `exported_columns()` order).
    pub fn value(&self, i: usize) -> Result<Cell<'_>, StoreError> {
        let v = self.row.get_ref(i + 3).map_err(|e| self.cap.query_err(e))?;
        Ok(match v {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(n) => match self.fast {
                Some(f) if f.text.get(i).copied().unwrap_or(false) => {
                    match usize::try_from(n).ok().and_then(|n| f.strings.get(n)) {
                        Some(Some(t)) => Cell::Text(t),
                        _ => Cell::Null,
                    }
                }
                _ => Cell::Integer(n),
            },
            ValueRef::Real(x) => Cell::Real(x),
            // Stored text is always UTF-8 (bytes that were not are mapped
            // by `rawtext`); a row that is not fails like any bad row.
            ValueRef::Text(t) => {
                Cell::Text(std::str::from_utf8(t).map_err(|e| StoreError::Query {
                    path: self.cap.path.clone(),
                    reason: format!("event column {}: {e}", i + 3),
                })?)
            }
            ValueRef::Blob(b) => Cell::Blob(b),
        })
    }
}
