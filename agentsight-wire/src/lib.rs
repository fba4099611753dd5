//! Wire evidence: what an agent sent to its model and what came back.
//!
//! The third evidence layer, kept beside the kernel's and the transcript's and
//! never merged into them. This crate knows nothing of captures (like
//! `agentsight-sessions`): it produces values, `agentsight`'s store keeps them.
//!
//! - [`raw`]: one request and its response exactly as they crossed
//!   ([`RawExchange`]), bounded, with the time of every forwarded read.
//! - [`relay`]: the loopback HTTP relay `record --wire` points each agent at
//!   (through the agent's own base-URL setting, [`routes`]); it forwards every
//!   byte to the real upstream at once and hands each finished exchange to a sink.
//! - [`decode`]: HTTP/1.1 framing, chunked and gzip/br/zstd bodies (bounded
//!   output), server-sent events, and the model APIs (Anthropic Messages, OpenAI
//!   Responses and Chat Completions, Gemini generateContent) into one
//!   [`Exchange`]. Nothing is dropped: what cannot be decoded stays raw with a
//!   note.
//! - [`tls`]: the two plaintext streams of one TLS connection (as the TLS
//!   probes stored them, one library call at a time) split into the same
//!   [`RawExchange`]s (`via: Tls`); what is not HTTP/1.1 becomes a note.

pub mod decode;
pub mod exchange;
pub mod raw;
pub mod relay;
pub mod routes;
pub mod tls;

pub use exchange::{Api, ApiError, Exchange, RequestedCall, SentMessage, Usage};
pub use raw::{RawExchange, RawMessage, Via};

/// CLOCK_MONOTONIC in nanoseconds: the clock of the kernel's records
/// (`bpf_ktime_get_ns`), so wire times line up with them through the capture's
/// anchors.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}
