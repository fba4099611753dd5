//! The capture `top` reads while `record` still writes it: a plain
//! read-only connection beside the writer (the capture is in WAL mode while
//! it records, and WAL readers see each committed batch without blocking
//! it), read one transaction at a time, and the reads only the live view
//! needs.

use std::{path::Path, time::Duration};

use rusqlite::{Connection, OpenFlags};

use super::{
    CaptureReader, StoreError,
    read::{self, TreeCounts},
};

/// How query errors of a live read name the capture (its file is a
/// temporary one unless `top --record` keeps it).
const LIVE_NAME: &str = "live capture";

/// A capture being recorded, opened read-only.
pub struct LiveCapture {
    conn: Connection,
    /// The file, as errors of the connection itself name it.
    shown: String,
}

impl LiveCapture {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::Open {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        let _ = conn.busy_timeout(Duration::from_secs(2));
        Ok(Self { conn, shown })
    }

    /// Runs `f` in one read transaction: every query of it sees the same
    /// committed batches.
    pub fn read<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(CaptureReader) -> Result<T, E>,
    ) -> Result<T, E> {
        self.conn
            .execute_batch("BEGIN")
            .map_err(|e| StoreError::Query {
                path: self.shown.clone(),
                reason: e.to_string(),
            })?;
        let out = f(CaptureReader::new(&self.conn, LIVE_NAME));
        let _ = self.conn.execute_batch("COMMIT");
        out
    }
}

impl CaptureReader<'_> {
    /// [`read::tree_counts`].
    pub fn tree_counts(
        &self,
        process_ids: &[i64],
        as_of: u64,
        window_ns: u64,
    ) -> Result<TreeCounts, StoreError> {
        read::tree_counts(self.conn, process_ids, as_of, window_ns).map_err(|e| self.query_err(e))
    }

    /// [`read::newest_event_mono_ns`].
    pub fn newest_event_mono_ns(&self) -> Result<Option<u64>, StoreError> {
        read::newest_event_mono_ns(self.conn).map_err(|e| self.query_err(e))
    }

    /// [`read::loss_total`].
    pub fn loss_total(&self) -> Result<u64, StoreError> {
        read::loss_total(self.conn).map_err(|e| self.query_err(e))
    }
}
