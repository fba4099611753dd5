//! TLS plaintext into exchanges: the two byte streams of one TLS connection
//! (what the process sent, what it received), as the TLS probes stored them
//! one library call at a time, split into HTTP/1.1 [`RawExchange`]s
//! (`via: Tls`) shaped exactly as the relay records its own: keep-alive
//! connections carry several.
//!
//! Bytes a call moved but the probes did not keep (a call over their 16 KiB
//! record bound) are never joined silently: the message that covers them gets
//! an `error`; a `Content-Length` body is still followed past them (its length
//! says where it ends), chunked framing is not. What is not HTTP/1.1 (any
//! other bytes) becomes a note, never a dropped stream. A connection that
//! starts with the HTTP/2 preface is read by [`h2`].

use crate::relay::framing::{self, BodyEnd, BodyKind};
use crate::{RawExchange, RawMessage, Via};

/// The route every TLS exchange is stored under.
pub const ROUTE: &str = "tls";
/// Most `reads` entries kept per message, as the relay.
const MAX_READS: usize = 256 * 1024;

/// One library call's bytes, in the order of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    /// CLOCK_MONOTONIC ns when the call returned (its bytes had crossed).
    pub ns: u64,
    /// The bytes kept.
    pub data: &'a [u8],
    /// Bytes the call moved after `data` that were not kept.
    pub cut: u64,
}

/// What one connection's streams hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// The exchanges in order, `seq` from 0; `conn` is 0 (the caller numbers
    /// connections), `route` [`ROUTE`], `upstream` `https://` + the request's
    /// `Host` (empty when it has none), `client_port` 0.
    pub exchanges: Vec<RawExchange>,
    /// What was not read: bytes that are no HTTP/1.1 or HTTP/2, bytes
    /// after the last exchange, HTTP/2 frames that could not be followed.
    pub notes: Vec<String>,
}

/// One piece placed in the stream.
struct Span {
    /// Offset of its first byte in the stream (kept and missing bytes count).
    start: u64,
    /// Offset of its kept bytes in [`Stream::data`].
    at: usize,
    kept: usize,
    cut: u64,
    ns: u64,
}

impl Span {
    fn end(&self) -> u64 {
        self.start + self.kept as u64 + self.cut
    }
}

/// One direction of a connection: offsets count every byte that crossed,
/// kept or not.
struct Stream {
    data: Vec<u8>,
    spans: Vec<Span>,
    len: u64,
}

/// The kept bytes from an offset up to the next missing byte.
struct Run<'a> {
    bytes: &'a [u8],
    /// Bytes are missing right after `bytes` (else the stream ends there).
    gap: bool,
}

impl Stream {
    fn new(pieces: &[Piece<'_>]) -> Stream {
        let mut s = Stream {
            data: Vec::new(),
            spans: Vec::new(),
            len: 0,
        };
        for p in pieces.iter().filter(|p| !p.data.is_empty() || p.cut > 0) {
            s.spans.push(Span {
                start: s.len,
                at: s.data.len(),
                kept: p.data.len(),
                cut: p.cut,
                ns: p.ns,
            });
            s.data.extend_from_slice(p.data);
            s.len += p.data.len() as u64 + p.cut;
        }
        s
    }

    fn span_of(&self, pos: u64) -> Option<&Span> {
        self.spans
            .get(self.spans.partition_point(|s| s.end() <= pos))
    }

    /// `None` when the byte at `pos` was not kept; empty at the end.
    fn run(&self, pos: u64) -> Option<Run<'_>> {
        let i = self.spans.partition_point(|s| s.end() <= pos);
        if i == self.spans.len() {
            return Some(Run {
                bytes: &[],
                gap: false,
            });
        }
        let off = (pos - self.spans[i].start) as usize;
        if off >= self.spans[i].kept {
            return None;
        }
        let last = self.spans[i..]
            .iter()
            .find(|s| s.cut > 0)
            .unwrap_or(&self.spans[self.spans.len() - 1]);
        let bytes = self.data.get(self.spans[i].at + off..last.at + last.kept)?;
        Some(Run {
            bytes,
            gap: last.cut > 0,
        })
    }

    /// Bytes of `[a, b)` that were not kept.
    fn missing(&self, a: u64, b: u64) -> u64 {
        self.spans
            .iter()
            .map(|s| {
                let m0 = s.start + s.kept as u64;
                b.min(s.end()).saturating_sub(a.max(m0))
            })
            .sum()
    }

    /// The kept bytes of `[a, b)` up to the first missing one, at most `limit`.
    fn kept(&self, a: u64, b: u64, limit: usize) -> Vec<u8> {
        let n = (b.saturating_sub(a)).min(limit as u64) as usize;
        self.run(a)
            .map(|r| r.bytes[..n.min(r.bytes.len())].to_vec())
            .unwrap_or_default()
    }

    fn ns_at(&self, pos: u64) -> u64 {
        self.span_of(pos).or(self.spans.last()).map_or(0, |s| s.ns)
    }

    /// (offset in `[a, b)`, ns) of every piece that carries bytes of it.
    fn reads(&self, a: u64, b: u64) -> Vec<(u64, u64)> {
        self.spans
            .iter()
            .filter(|s| s.start < b && s.end() > a)
            .take(MAX_READS)
            .map(|s| (s.start.max(a) - a, s.ns))
            .collect()
    }

    /// A message: its head `[h, b0)` and body `[b0, b1)`, the body kept up to `limit`.
    fn message(&self, h: u64, b0: u64, b1: u64, limit: usize) -> RawMessage {
        let body = self.kept(b0, b1, limit);
        RawMessage {
            head: self.kept(h, b0, usize::MAX),
            body_dropped: (b1 - b0) - body.len() as u64,
            body,
            first_ns: self.ns_at(h),
            last_ns: self.ns_at(b1.max(h + 1) - 1),
            reads: self.reads(b0, b1),
        }
    }
}

/// Splits one connection's streams into exchanges; never fails: what it
/// cannot read is an exchange's `error` or a note. Bodies are kept up to
/// `body_limit` bytes each, the rest counted in `body_dropped`.
pub fn split(sent: &[Piece<'_>], received: &[Piece<'_>], body_limit: usize) -> Split {
    let up = Stream::new(sent);
    let down = Stream::new(received);
    let mut out = Split::default();
    if up.run(0).is_some_and(|r| r.bytes.starts_with(h2::PREFACE)) {
        return h2::split(&up, &down, body_limit);
    }
    let (mut p_up, mut p_down) = (0u64, 0u64);
    while p_up < up.len {
        match exchange(&up, &down, p_up, p_down, body_limit) {
            Err(note) => {
                out.notes.push(note);
                break;
            }
            Ok(step) => {
                let mut ex = step.exchange;
                ex.seq = out.exchanges.len() as u32;
                out.exchanges.push(ex);
                (p_up, p_down) = (step.up, step.down);
                if !step.go_on {
                    break;
                }
            }
        }
    }
    if p_up < up.len && out.notes.is_empty() {
        out.notes.push(format!(
            "{} bytes sent after exchange {} not decoded",
            up.len - p_up,
            out.exchanges.len()
        ));
    }
    if p_down < down.len {
        out.notes.push(format!(
            "{} bytes received after the last response not decoded",
            down.len - p_down
        ));
    }
    out
}

/// One exchange and where the streams go on.
struct Step {
    exchange: RawExchange,
    up: u64,
    down: u64,
    /// Whether another exchange may follow (keep-alive, nothing cut off).
    go_on: bool,
}

/// The exchange whose request starts at `p` of `up` and whose response
/// starts at `q` of `down`; `Err` (a note) when no request starts there.
fn exchange(up: &Stream, down: &Stream, p: u64, q: u64, limit: usize) -> Result<Step, String> {
    let not_http = |why: String| {
        format!(
            "sent bytes {p}..{} not HTTP/1.1 ({why}): not decoded",
            up.len
        )
    };
    let run = up
        .run(p)
        .ok_or_else(|| not_http("not captured: a call over the record bound".into()))?;
    let mut errors = Vec::new();
    let head_len = match framing::request_head_len(run.bytes) {
        Err(e) => return Err(not_http(e.to_string())),
        Ok(Some(n)) => n as u64,
        Ok(None) => {
            // A head that never ended: kept as it is, with why.
            errors.push(if run.gap {
                "request head not wholly captured (a call over the record bound)"
            } else {
                "the captured stream ended inside the request head"
            });
            let request = up.message(p, up.len, up.len, limit);
            return Ok(Step {
                exchange: new_exchange(request, None, &errors),
                up: up.len,
                down: q,
                go_on: false,
            });
        }
    };
    let head = &run.bytes[..head_len as usize];
    let info = framing::parse_request(head).map_err(|e| not_http(e.to_string()))?;
    let b0 = p + head_len;
    let (b1, body_error) = body_end(up, b0, info.body, "request");
    let mut go_on = body_error.is_none() && !info.close;
    errors.extend(body_error.as_deref());
    let cut_note = missing_note(up.missing(p, b1), "request");
    errors.extend(cut_note.as_deref());
    let request = up.message(p, b0, b1, limit);
    let (response, down_end, resp_errors, resp_go_on) = response(down, q, &info.method, limit);
    go_on &= resp_go_on;
    errors.extend(resp_errors.iter().map(String::as_str));
    Ok(Step {
        exchange: new_exchange(request, response, &errors),
        up: b1,
        down: down_end,
        go_on,
    })
}

/// The response at `q` of `down` to a request of `method`: the message (if
/// any byte came), where it ends, its errors, whether the connection goes on.
fn response(
    down: &Stream,
    q: u64,
    method: &str,
    limit: usize,
) -> (Option<RawMessage>, u64, Vec<String>, bool) {
    let mut at = q;
    loop {
        let Some(run) = down.run(at) else {
            let e = "response head not wholly captured (a call over the record bound)";
            return (None, q, vec![e.into()], false);
        };
        if run.bytes.is_empty() && at == q {
            let e = "the captured stream ended before the response";
            return (None, q, vec![e.into()], false);
        }
        let n = match framing::response_head_len(run.bytes) {
            Err(e) => return (None, q, vec![format!("response not HTTP/1.1: {e}")], false),
            Ok(Some(n)) => n as u64,
            Ok(None) => {
                let e = if run.gap {
                    "response head not wholly captured (a call over the record bound)"
                } else {
                    "the captured stream ended inside the response head"
                };
                let m = down.message(q, down.len, down.len, limit);
                return (Some(m), down.len, vec![e.into()], false);
            }
        };
        let info = match framing::parse_response(&run.bytes[..n as usize]) {
            Ok(info) => info,
            Err(e) => return (None, q, vec![format!("response not HTTP/1.1: {e}")], false),
        };
        let r0 = at + n;
        if (100..200).contains(&info.status) && info.status != 101 {
            // Interim (`100 Continue`): kept before the final head, as the relay does.
            at = r0;
            continue;
        }
        if info.status == 101 {
            let m = down.message(q, r0, r0, limit);
            let e = "upgraded (101 Switching Protocols): later bytes not decoded";
            return (Some(m), r0, vec![e.into()], false);
        }
        let kind = info.body(method);
        let (r1, body_error) = body_end(down, r0, kind, "response");
        let mut errors: Vec<String> = body_error.into_iter().collect();
        errors.extend(missing_note(down.missing(q, r1), "response"));
        let go_on = errors.is_empty() && !info.close && kind != BodyKind::Close;
        return (Some(down.message(q, r0, r1, limit)), r1, errors, go_on);
    }
}

/// Where a body starting at `start` ends, and why it is not whole (the
/// stream then goes no further).
fn body_end(s: &Stream, start: u64, kind: BodyKind, what: &str) -> (u64, Option<String>) {
    match kind {
        BodyKind::Empty => (start, None),
        BodyKind::Close => (s.len, None),
        BodyKind::Length(n) => match start.checked_add(n) {
            Some(end) if end <= s.len => (end, None),
            _ => (
                s.len,
                Some(format!(
                    "the captured stream ended inside the {what} body ({} of {n} bytes)",
                    s.len - start
                )),
            ),
        },
        BodyKind::Chunked => {
            let mut end = BodyEnd::new(kind);
            let Some(run) = s.run(start) else {
                let e = format!("chunked {what} body not followed past bytes not captured");
                return (s.len, Some(e));
            };
            match end.feed(run.bytes) {
                Ok(n) if end.done() => (start + n as u64, None),
                Ok(_) if run.gap => (
                    s.len,
                    Some(format!(
                        "chunked {what} body not followed past bytes not captured"
                    )),
                ),
                Ok(_) => (
                    s.len,
                    Some(format!(
                        "the captured stream ended inside the chunked {what} body"
                    )),
                ),
                Err(e) => (s.len, Some(format!("{what} body: {e}"))),
            }
        }
    }
}

fn missing_note(missing: u64, what: &str) -> Option<String> {
    (missing > 0).then(|| {
        format!(
            "{missing} bytes of the {what} not captured (calls over the 16 KiB record bound): its body is kept up to them"
        )
    })
}

fn new_exchange(request: RawMessage, response: Option<RawMessage>, errors: &[&str]) -> RawExchange {
    let upstream = crate::decode::http1::parse_request(&request.head)
        .ok()
        .and_then(|h| h.header("host").map(|host| format!("https://{host}")))
        .unwrap_or_default();
    RawExchange {
        via: Via::Tls,
        conn: 0,
        seq: 0,
        route: ROUTE.to_string(),
        upstream,
        client_port: 0,
        request,
        response,
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

mod h2;
#[cfg(test)]
mod tests;
