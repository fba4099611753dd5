//! For the `agentsight-bench` crate only (`cargo xtask bench correlate` and
//! `bench audit` synthesize captures with the real schema): the store's
//! internals it needs, exposed here so the store keeps them crate-private.
//! Nothing in agentsight uses this module.

use std::path::Path;

use rusqlite::Connection;

use crate::store::StoreError;

/// The reader indexes a finished capture has (for the benchmark only).
pub const CAPTURE_INDEXES: &str = crate::store::INDEXES;

/// A new, empty capture with the real schema, opened read-write (for the
/// benchmark only).
pub fn create_capture(path: &Path) -> Result<Connection, StoreError> {
    crate::store::create(path)
}
