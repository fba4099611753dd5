//! HTTP/2 connections read from TLS plaintext (RFC 9113): the frames of
//! each direction, the header blocks decoded by HPACK (`loona-hpack`, one
//! decoder per direction, every block decoded in order so the dynamic
//! tables stay in step), and one [`RawExchange`] per client stream.
//!
//! A message is stored in the text form the HTTP/1.1 path stores
//! (`decode::http1` reads both): its start line says `HTTP/2`, its fields
//! are the decoded header block (`:authority` as `host`, the other pseudo
//! fields in the start line), its body the DATA frames' payloads without
//! padding. The frames themselves (binary, HPACK-compressed) are not kept.
//! A direction whose bytes were not all captured (a call over the probes'
//! record bound) cannot be followed past the gap: what it ends is said.

use std::collections::BTreeMap;

use super::{Split, Stream, new_exchange};
use crate::RawMessage;
use crate::decode::http1::HTTP2_VERSION;

/// The client connection preface (RFC 9113 §3.4).
pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
/// HPACK's initial table size (RFC 7541 §4.2).
const DEFAULT_TABLE: usize = 4096;

/// One frame as it lies in a stream.
struct Frame<'a> {
    /// Offset of its first byte in the stream.
    at: u64,
    kind: u8,
    flags: u8,
    stream: u32,
    payload: &'a [u8],
}

/// The frames of one direction from `start`, and why they end early.
fn frames<'s>(s: &'s Stream, start: u64, what: &str) -> (Vec<Frame<'s>>, Option<String>) {
    let Some(run) = s.run(start) else {
        return (
            Vec::new(),
            Some(format!("HTTP/2: {what} bytes from {start} not captured")),
        );
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    let bytes = run.bytes;
    while at < bytes.len() {
        let Some(h) = bytes.get(at..at + 9) else {
            break;
        };
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let Some(payload) = bytes.get(at + 9..at + 9 + len) else {
            break;
        };
        out.push(Frame {
            at: start + at as u64,
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
            payload,
        });
        at += 9 + len;
    }
    let end = start + at as u64;
    let why = if end < s.len {
        Some(if run.gap {
            format!(
                "HTTP/2: {what} bytes {end}..{} not decoded (a call over the record bound broke the framing)",
                s.len
            )
        } else {
            format!(
                "HTTP/2: the captured {what} stream ends inside a frame ({} bytes)",
                s.len - end
            )
        })
    } else {
        None
    };
    (out, why)
}

/// One message of a stream, as its frames arrive.
#[derive(Default)]
struct Message {
    /// The final header block's fields (interim 1xx heads skipped).
    fields: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    body: Vec<u8>,
    body_len: u64,
    ended: bool,
    first_ns: u64,
    last_ns: u64,
    reads: Vec<(u64, u64)>,
    errors: Vec<String>,
}

/// A header block being gathered over HEADERS and CONTINUATION frames.
struct Pending {
    stream: u32,
    block: Vec<u8>,
    end_stream: bool,
    /// A PUSH_PROMISE's block: decoded for the table, otherwise unused.
    promise: bool,
}

/// One direction's messages by stream id.
struct Side<'s> {
    stream: &'s Stream,
    decoder: loona_hpack::Decoder<'static>,
    messages: BTreeMap<u32, Message>,
    pending: Option<Pending>,
    notes: Vec<String>,
    what: &'static str,
}

impl<'s> Side<'s> {
    fn new(stream: &'s Stream, what: &'static str, table: usize) -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(table);
        Side {
            stream,
            decoder,
            messages: BTreeMap::new(),
            pending: None,
            notes: Vec::new(),
            what,
        }
    }

    fn message(&mut self, id: u32, ns: u64) -> &mut Message {
        let m = self.messages.entry(id).or_default();
        if m.first_ns == 0 {
            m.first_ns = ns;
        }
        m.last_ns = ns;
        m
    }

    fn frame(&mut self, f: &Frame<'_>, limit: usize) {
        let ns = self.stream.ns_at(f.at);
        if let Some(p) = self.pending.as_mut() {
            if f.kind == CONTINUATION && f.stream == p.stream {
                p.block.extend_from_slice(f.payload);
                if f.flags & END_HEADERS != 0 {
                    self.block_done(ns);
                }
                return;
            }
            self.notes.push(format!(
                "HTTP/2: {} header block of stream {} not ended by CONTINUATION",
                self.what, p.stream
            ));
            self.pending = None;
        }
        match f.kind {
            HEADERS | PUSH_PROMISE => {
                let Some(block) = header_block(f) else {
                    self.notes.push(format!(
                        "HTTP/2: a malformed {} HEADERS frame on stream {}",
                        self.what, f.stream
                    ));
                    return;
                };
                self.pending = Some(Pending {
                    stream: f.stream,
                    block: block.to_vec(),
                    end_stream: f.kind == HEADERS && f.flags & END_STREAM != 0,
                    promise: f.kind == PUSH_PROMISE,
                });
                if f.flags & END_HEADERS != 0 {
                    self.block_done(ns);
                }
            }
            DATA => {
                let data = unpadded(f).unwrap_or_default();
                let m = self.message(f.stream, ns);
                m.reads.push((m.body_len, ns));
                let room = limit.saturating_sub(m.body.len());
                m.body.extend_from_slice(&data[..data.len().min(room)]);
                m.body_len += data.len() as u64;
                m.ended |= f.flags & END_STREAM != 0;
            }
            RST_STREAM => {
                let code = f
                    .payload
                    .get(..4)
                    .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                let what = self.what;
                let m = self.message(f.stream, ns);
                m.errors
                    .push(format!("stream reset by the {what} (error code {code})"));
                m.ended = true;
            }
            _ => {}
        }
    }

    /// A whole header block: decoded (always: the table depends on it).
    fn block_done(&mut self, ns: u64) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let fields = match self.decoder.decode(&p.block) {
            Ok(f) => f,
            Err(e) => {
                self.notes.push(format!(
                    "HTTP/2: {} header block of stream {} not decoded by HPACK ({e:?}): the rest of the {} headers cannot be read",
                    self.what, p.stream, self.what
                ));
                return;
            }
        };
        if p.promise {
            self.notes.push(format!(
                "HTTP/2: a server push on stream {} not kept",
                p.stream
            ));
            return;
        }
        let m = self.message(p.stream, ns);
        let interim = fields
            .iter()
            .any(|(n, v)| n == b":status" && v.first() == Some(&b'1'));
        if m.fields.is_none() && !interim {
            m.fields = Some(fields);
        }
        // A block after the first (trailers) only ends the stream.
        m.ended |= p.end_stream;
    }
}

/// A HEADERS or PUSH_PROMISE frame's header block fragment, without
/// padding, priority or promised stream id.
fn header_block<'a>(f: &Frame<'a>) -> Option<&'a [u8]> {
    let (pad, mut at) = if f.flags & PADDED != 0 {
        (usize::from(*f.payload.first()?), 1)
    } else {
        (0, 0)
    };
    if f.kind == HEADERS && f.flags & PRIORITY != 0 {
        at += 5;
    }
    if f.kind == PUSH_PROMISE {
        at += 4;
    }
    f.payload.get(at..f.payload.len().checked_sub(pad)?)
}

/// A DATA frame's data without padding.
fn unpadded<'a>(f: &Frame<'a>) -> Option<&'a [u8]> {
    if f.flags & PADDED == 0 {
        return Some(f.payload);
    }
    let pad = usize::from(*f.payload.first()?);
    f.payload.get(1..f.payload.len().checked_sub(pad)?)
}

/// The largest header table either side allows the other (SETTINGS): a
/// decoder refuses a size update beyond what it allows.
fn table_size(frames: &[&[Frame<'_>]]) -> usize {
    let mut size = DEFAULT_TABLE;
    for f in frames.iter().flat_map(|f| f.iter()) {
        if f.kind != SETTINGS || f.stream != 0 {
            continue;
        }
        for s in f.payload.chunks_exact(6) {
            if u16::from_be_bytes([s[0], s[1]]) == SETTINGS_HEADER_TABLE_SIZE {
                let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]) as usize;
                size = size.max(v);
            }
        }
    }
    size
}

/// The head in text form: start line, then fields (pseudo fields other
/// than `:authority` only in the start line), then the blank line.
fn head_text(fields: &[(Vec<u8>, Vec<u8>)], request: bool) -> Vec<u8> {
    let get = |name: &[u8]| -> String {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| one_line(v))
            .unwrap_or_default()
    };
    let mut out = if request {
        format!("{} {} {HTTP2_VERSION}\r\n", get(b":method"), get(b":path"))
    } else {
        format!("{HTTP2_VERSION} {}\r\n", get(b":status"))
    };
    if request {
        let authority = get(b":authority");
        if !authority.is_empty() {
            out += &format!("host: {authority}\r\n");
        }
    }
    for (n, v) in fields.iter().filter(|(n, _)| !n.starts_with(b":")) {
        out += &format!("{}: {}\r\n", one_line(n), one_line(v));
    }
    out += "\r\n";
    out.into_bytes()
}

/// A field's octets as one line of text (CR and LF, invalid in HTTP/2
/// fields too, become spaces).
fn one_line(v: &[u8]) -> String {
    String::from_utf8_lossy(v).replace(['\r', '\n'], " ")
}

fn raw_message(m: Message, request: bool) -> RawMessage {
    let head = m
        .fields
        .as_deref()
        .map(|f| head_text(f, request))
        .unwrap_or_default();
    RawMessage {
        head,
        body_dropped: m.body_len - m.body.len() as u64,
        body: m.body,
        first_ns: m.first_ns,
        last_ns: m.last_ns,
        reads: m.reads,
    }
}

/// Splits an HTTP/2 connection (its client stream starts with the
/// preface) into one exchange per client stream, in stream order.
pub(super) fn split(up: &Stream, down: &Stream, limit: usize) -> Split {
    let (up_frames, up_end) = frames(up, PREFACE.len() as u64, "sent");
    let (down_frames, down_end) = frames(down, 0, "received");
    let table = table_size(&[&up_frames, &down_frames]);
    let mut client = Side::new(up, "client", table);
    for f in &up_frames {
        client.frame(f, limit);
    }
    let mut server = Side::new(down, "server", table);
    for f in &down_frames {
        server.frame(f, limit);
    }
    let mut out = Split::default();
    out.notes.extend(up_end.clone());
    out.notes.extend(down_end.clone());
    let mut responses = std::mem::take(&mut server.messages);
    for (id, req) in std::mem::take(&mut client.messages) {
        let resp = responses.remove(&id);
        let mut errors: Vec<String> = req.errors.clone();
        if req.fields.is_none() {
            errors.push(format!("stream {id}: no request header block captured"));
        } else if !req.ended {
            errors.push(format!("stream {id}: the captured request never ended"));
        }
        if let Some(r) = &resp {
            errors.extend(r.errors.iter().cloned());
            if r.fields.is_none() {
                errors.push(format!("stream {id}: no response header block captured"));
            } else if !r.ended {
                errors.push(format!("stream {id}: the captured response never ended"));
            }
        }
        let errs: Vec<&str> = errors.iter().map(String::as_str).collect();
        let mut ex = new_exchange(
            raw_message(req, true),
            resp.map(|r| raw_message(r, false)),
            &errs,
        );
        ex.seq = out.exchanges.len() as u32;
        out.exchanges.push(ex);
    }
    if out.exchanges.is_empty() && out.notes.is_empty() {
        out.notes.push(format!(
            "HTTP/2: no request captured ({} bytes sent, {} received)",
            up.len, down.len
        ));
    }
    for id in responses.keys() {
        out.notes.push(format!(
            "HTTP/2: a response on stream {id} without a captured request"
        ));
    }
    out.notes.append(&mut client.notes);
    out.notes.append(&mut server.notes);
    out
}

#[cfg(test)]
mod tests;
