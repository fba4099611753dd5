//! One read handle for every open capture: the read-only [`Capture`], the
//! read-write [`CaptureRw`] (record's correlate pass after binding) and the
//! live capture `top` reads while recording ([`super::LiveCapture`]).
//! Correlate, matching and enrichment read through it, so they hold no
//! connection of their own; each query error names the capture.

use rusqlite::Connection;

use super::{
    Capture, CaptureRw, StoreError,
    read::{self, EventFilter, EventRecord, FileWrite, ProcessRecord, SessionMessage},
};
use crate::clock::Anchors;

/// A borrowed read handle on an open capture (cheap to copy).
#[derive(Clone, Copy)]
pub struct CaptureReader<'a> {
    pub(super) conn: &'a Connection,
    path: &'a str,
}

impl Capture {
    pub fn reader(&self) -> CaptureReader<'_> {
        CaptureReader::new(&self.conn, &self.path)
    }
}

impl CaptureRw {
    pub fn reader(&self) -> CaptureReader<'_> {
        CaptureReader::new(&self.conn, &self.path)
    }
}

impl<'a> CaptureReader<'a> {
    pub(super) fn new(conn: &'a Connection, path: &'a str) -> Self {
        Self { conn, path }
    }

    /// How errors name the capture: its path as opened.
    pub fn path(&self) -> &'a str {
        self.path
    }

    pub(super) fn query_err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::Query {
            path: self.path.to_string(),
            reason: e.to_string(),
        }
    }

    /// A `meta` key's value.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row("SELECT value FROM meta WHERE key=?1", [key], |r| r.get(0))
            .optional()
            .map_err(|e| self.query_err(e))
    }

    /// Every process, by start time (then row id).
    pub fn processes(&self) -> Result<Vec<ProcessRecord>, StoreError> {
        read::processes(self.conn).map_err(|e| self.query_err(e))
    }

    /// The capture's clock anchors.
    pub fn anchors(&self) -> Result<Anchors, StoreError> {
        Anchors::load(self.conn).map_err(|e| self.query_err(e))
    }

    /// [`read::transcript_like_writes`].
    pub fn transcript_like_writes(&self) -> Result<Vec<FileWrite>, StoreError> {
        read::transcript_like_writes(self.conn).map_err(|e| self.query_err(e))
    }

    /// [`read::database_like_writes`].
    pub fn database_like_writes(&self) -> Result<Vec<FileWrite>, StoreError> {
        read::database_like_writes(self.conn).map_err(|e| self.query_err(e))
    }

    /// [`read::paths_written_ending`].
    pub fn paths_written_ending(&self, suffix: &str) -> Result<Vec<String>, StoreError> {
        read::paths_written_ending(self.conn, suffix).map_err(|e| self.query_err(e))
    }

    /// [`read::events_in_window`].
    pub fn events_in_window(
        &self,
        from_mono_ns: u64,
        to_mono_ns: u64,
        filter: &EventFilter,
        visit: impl FnMut(EventRecord) -> bool,
    ) -> Result<(), StoreError> {
        read::events_in_window(self.conn, from_mono_ns, to_mono_ns, filter, visit)
            .map_err(|e| self.query_err(e))
    }

    /// The stored `session message` submissions, by time.
    pub fn session_messages(&self) -> Result<Vec<SessionMessage>, StoreError> {
        read::session_messages(self.conn).map_err(|e| self.query_err(e))
    }
}
