//! A message body: framing removed, then its `Content-Encoding` undone,
//! every step bounded by the output limit.

use std::io::Read;

use super::http1::{self, Framing, Head};
use crate::RawMessage;

/// The body of `msg` (whose head is `head`, framed as `framing`), decoded,
/// at most `limit` bytes; `what` ("request", "response") starts each note.
pub fn decode(
    msg: &RawMessage,
    head: &Head,
    framing: Framing,
    limit: usize,
    what: &str,
) -> (Vec<u8>, Vec<String>) {
    let mut notes = Vec::new();
    if msg.body_dropped > 0 {
        notes.push(format!(
            "{what} body cut by the relay at {} bytes, {} dropped",
            msg.body.len(),
            msg.body_dropped
        ));
    }
    let (framed, frame_notes) = unframe(&msg.body, framing, limit, msg.body_dropped > 0);
    notes.extend(frame_notes.into_iter().map(|n| format!("{what} {n}")));
    let (body, enc_notes) = undo_encodings(framed, &head.list("content-encoding"), limit);
    notes.extend(enc_notes.into_iter().map(|n| format!("{what} {n}")));
    (body, notes)
}

fn unframe(body: &[u8], framing: Framing, limit: usize, dropped: bool) -> (Vec<u8>, Vec<String>) {
    let mut notes = Vec::new();
    let bounded = |bytes: &[u8], notes: &mut Vec<String>| {
        if bytes.len() > limit {
            notes.push(format!("body cut at {limit} bytes"));
        }
        bytes[..bytes.len().min(limit)].to_vec()
    };
    match framing {
        Framing::Empty => {
            if !body.is_empty() {
                notes.push(format!("{} body bytes without framing kept", body.len()));
            }
            (bounded(body, &mut notes), notes)
        }
        Framing::Chunked => http1::dechunk(body, limit),
        Framing::Length(n) => {
            let len = body.len() as u64;
            if len < n && !dropped {
                notes.push(format!("body cut at {len} of {n} bytes"));
            } else if len > n {
                notes.push(format!("{} bytes past content-length ignored", len - n));
            }
            let end = len.min(n) as usize;
            (bounded(&body[..end], &mut notes), notes)
        }
        Framing::ToEnd => (bounded(body, &mut notes), notes),
    }
}

/// Undoes the codings, last applied first. An unknown coding stops there:
/// the body is kept as it is at that step, noted.
pub fn undo_encodings(
    mut body: Vec<u8>,
    codings: &[String],
    limit: usize,
) -> (Vec<u8>, Vec<String>) {
    let mut notes = Vec::new();
    for coding in codings.iter().rev() {
        let input = std::mem::take(&mut body);
        body = match coding.as_str() {
            "identity" => input,
            "gzip" | "x-gzip" => bounded_read(
                flate2::read::MultiGzDecoder::new(&input[..]),
                limit,
                "gzip",
                &mut notes,
            ),
            "deflate" => inflate(&input, limit, &mut notes),
            "br" => bounded_read(
                brotli_decompressor::Decompressor::new(&input[..], 4096),
                limit,
                "br",
                &mut notes,
            ),
            "zstd" => match zstd::stream::read::Decoder::new(&input[..]) {
                Ok(d) => bounded_read(d, limit, "zstd", &mut notes),
                Err(e) => {
                    notes.push(format!("zstd decoder failed ({e}): body kept encoded"));
                    return (input, notes);
                }
            },
            other => {
                notes.push(format!(
                    "content-encoding {other:?} not known: body kept encoded"
                ));
                return (input, notes);
            }
        };
    }
    (body, notes)
}

/// HTTP's "deflate" is zlib-wrapped (RFC 9110 §8.4.1.2), but some servers
/// send raw deflate: the zlib header decides.
fn inflate(input: &[u8], limit: usize, notes: &mut Vec<String>) -> Vec<u8> {
    let zlib = input.len() >= 2
        && input[0] & 0x0f == 8
        && (u16::from(input[0]) << 8 | u16::from(input[1])) % 31 == 0;
    if zlib {
        bounded_read(
            flate2::read::ZlibDecoder::new(input),
            limit,
            "deflate",
            notes,
        )
    } else {
        bounded_read(
            flate2::read::DeflateDecoder::new(input),
            limit,
            "deflate",
            notes,
        )
    }
}

/// Reads a decoder to its end or to `limit` bytes, whichever comes first: a
/// compression bomb never inflates past the limit in memory. A broken or
/// cut stream keeps what came before the break.
fn bounded_read(mut r: impl Read, limit: usize, name: &str, notes: &mut Vec<String>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = limit - out.len();
                if n > room {
                    out.extend_from_slice(&buf[..room]);
                    notes.push(format!("{name} output cut at {limit} bytes"));
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                notes.push(format!(
                    "{name} stream broken after {} bytes: {e}",
                    out.len()
                ));
                break;
            }
        }
    }
    out
}
