//! One exchange as it crossed, before any decoding.

use serde::{Deserialize, Serialize};

/// How an exchange was captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The loopback relay of `record --wire`.
    Relay,
    /// TLS plaintext read by uprobes on the process's TLS library.
    Tls,
}

/// A request and its response exactly as they crossed, bounded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawExchange {
    pub via: Via,
    /// The relay's connection number (unique within a run, from 1) and the
    /// exchange's position on that connection (from 0): keep-alive
    /// connections carry several.
    pub conn: u64,
    pub seq: u32,
    /// The route's name: the knob that pointed the agent at the relay
    /// (`ANTHROPIC_BASE_URL`, `codex:model_providers.ID.base_url`, …).
    pub route: String,
    /// The upstream base URL the exchange was forwarded to
    /// (`https://api.anthropic.com`, `http://127.0.0.1:8080/v1`).
    pub upstream: String,
    /// The agent's side of the connection (its local port on loopback): the
    /// kernel layer's socket records name the process that owns it.
    pub client_port: u16,
    /// The request as the agent sent it (head unchanged: the relay rewrites
    /// `Host` and the route prefix only on the copy it forwards).
    pub request: RawMessage,
    /// The response as the upstream sent it; `None` when none came.
    pub response: Option<RawMessage>,
    /// Why the exchange ended abnormally (upstream unreachable or refused
    /// its certificate, a side closed early, a timeout); `None` when whole.
    pub error: Option<String>,
}

/// One HTTP message as bytes: head, body as framed on the wire (chunked
/// framing and content encoding kept), the times of its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawMessage {
    /// Start line and header fields through the blank line, exactly as received.
    pub head: Vec<u8>,
    /// The body bytes as framed on the wire, up to the body limit.
    pub body: Vec<u8>,
    /// Bytes of the body past the limit: forwarded, counted, not stored.
    pub body_dropped: u64,
    /// CLOCK_MONOTONIC ns ([`crate::monotonic_ns`]) of the message's first and
    /// last byte.
    pub first_ns: u64,
    pub last_ns: u64,
    /// For each read forwarded as one piece: (offset of its first byte in the
    /// body as framed — counting dropped bytes too, monotonic ns when it was
    /// forwarded). Streamed answers get one entry per chunk; a request gets
    /// one per read of its body.
    pub reads: Vec<(u64, u64)>,
}
