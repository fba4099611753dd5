//! System evidence: the kernel programs' records, from loading to decoding,
//! and the process model that turns decoded events into the rows to store.
//! Capture never touches SQLite: it hands raw batches to a [`Sink`] (the
//! store's writer implements it), and [`model`] says what to store.

pub mod btf;
pub mod container;
pub mod decode;
pub mod loader;
pub mod model;
pub mod reader;
pub mod syscalls;
pub mod tls;
pub mod tracked;

pub use model::{ProcessOrigin, ProcessSeed};

/// Where the reader hands its batches of raw ring records.
pub trait Sink: Send + 'static {
    /// May block while the receiver is a full queue behind (pressure then
    /// shows up as counted kernel loss, never as a stalled agent).
    fn send(&self, batch: reader::RecordBatch) -> Result<(), SinkClosed>;
}

/// The receiver of a [`Sink`] has stopped.
#[derive(Debug, thiserror::Error)]
#[error("the store writer has stopped")]
pub struct SinkClosed;
