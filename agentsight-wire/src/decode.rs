//! Decoding a [`RawExchange`] into an [`Exchange`]. (Being written: see the brief.)

use crate::{Exchange, RawExchange};

/// Output bounds of decoding.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most bytes a decoded (de-chunked, decompressed) body may take; past it
    /// the body is cut and a note says how much was dropped.
    pub body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body: 16 * 1024 * 1024,
        }
    }
}

/// A decoded exchange and its decoded bodies (bounded by [`Limits::body`]).
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    pub exchange: Exchange,
    /// The request body after de-chunking and content decoding.
    pub request_body: Vec<u8>,
    /// The response body after de-chunking and content decoding (the SSE text
    /// for a streamed answer).
    pub response_body: Vec<u8>,
}

/// Decodes one exchange; never fails: what cannot be decoded is noted.
pub fn decode(raw: &RawExchange, limits: &Limits) -> Decoded {
    let _ = (raw, limits);
    Decoded::default()
}
