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
         GROUP BY 1 ORDER BY MIN(mono_ns) LIMIT 15",
    ),
    (
        "opened under another name (path as resolved → file the kernel opened; opens, 0)",
        "SELECT path || ' → ' || real_path, COUNT(*), 0 FROM events
         WHERE real_path IS NOT NULL AND path IS NOT NULL AND real_path != path
           AND path NOT LIKE '/proc/self/%' AND path NOT LIKE '/proc/thread-self/%'
         GROUP BY 1 ORDER BY MIN(mono_ns) LIMIT 10",
    ),
    (
        "network destinations (connects, failed)",
        "SELECT family || ' ' || addr || COALESCE(':' || port, ''), COUNT(*),
                SUM(result < 0 AND errno != 'EINPROGRESS') FROM events
         WHERE kind IN ('connect','sendto','sendmsg','sendmmsg') AND addr IS NOT NULL
         GROUP BY 1 ORDER BY COUNT(*) DESC LIMIT 10",
    ),
    (
        "DNS names queried (queries)",
        "SELECT query, COUNT(*), 0 FROM events WHERE query IS NOT NULL
         GROUP BY query ORDER BY COUNT(*) DESC LIMIT 10",
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
        ACTIVITY_SECTIONS
            .iter()
            .map(|&(title, sql)| {
                Ok(ActivitySection {
                    title,
                    rows: rows(sql)?,
                })
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
    /// `visit` as it is read: a large capture is never held whole.
    pub fn export_rows<E: From<StoreError>>(
        &self,
        mut visit: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<(), E> {
        // `wall_ns`, `process_id` and `mono_ns` first, then the exported
        // columns (`ExportRow::value` counts from there).
        let names: Vec<&str> = exported_columns().map(|c| c.name).collect();
        let sql = format!(
            "SELECT wall_ns, process_id, mono_ns, {} FROM events ORDER BY mono_ns, cpu, seq",
            names.join(", ")
        );
        let qe = |e| self.query_err(e);
        let mut st = self.conn.prepare(&sql).map_err(qe)?;
        let mut rows = st.query([]).map_err(qe)?;
        while let Some(row) = rows.next().map_err(qe)? {
            visit(&ExportRow { row, cap: self })?;
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

/// One event row of [`Capture::export_rows`].
pub struct ExportRow<'r> {
    row: &'r rusqlite::Row<'r>,
    cap: &'r Capture,
}

impl ExportRow<'_> {
    fn get<T: rusqlite::types::FromSql>(&self, i: usize) -> Result<T, StoreError> {
        self.row.get(i).map_err(|e| self.cap.query_err(e))
    }

    pub fn wall_ns(&self) -> Result<i64, StoreError> {
        self.get(0)
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
            ValueRef::Integer(n) => Cell::Integer(n),
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
