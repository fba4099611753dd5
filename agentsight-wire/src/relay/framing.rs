//! HTTP/1.1 framing as the relay needs it: where a head ends, what it says
//! about its body, where that body ends. Bytes are never changed here: the
//! relay forwards them as they came, framing included.

use std::ops::Range;

/// Most bytes of one head (request or response).
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// Most header fields of one head (httparse needs a fixed array).
const MAX_FIELDS: usize = 256;
/// Most bytes of a chunked body's trailer section.
const MAX_TRAILER: usize = 64 * 1024;

/// Why a head or a body's framing cannot be relayed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum FramingError {
    #[error("head over 64 KiB or over 256 fields")]
    TooBig,
    #[error("malformed head: {0}")]
    Head(String),
    #[error("malformed Content-Length")]
    Length,
    #[error("malformed chunked framing")]
    Chunked,
}

/// How a message's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    Empty,
    Length(u64),
    Chunked,
    /// Until the upstream closes (a response without length or chunking).
    Close,
}

/// What the relay reads from a request head.
#[derive(Debug)]
pub(crate) struct RequestInfo {
    pub method: String,
    /// Byte range of the request target in the head.
    pub target: Range<usize>,
    pub body: BodyKind,
    pub expect_continue: bool,
    pub close: bool,
}

/// What the relay reads from a response head.
#[derive(Debug)]
pub(crate) struct ResponseInfo {
    pub status: u16,
    pub transfer_chunked: bool,
    pub length: Option<u64>,
    pub close: bool,
}

fn map_parse_error(e: httparse::Error) -> FramingError {
    match e {
        httparse::Error::TooManyHeaders => FramingError::TooBig,
        e => FramingError::Head(e.to_string()),
    }
}

/// The length of a complete request head at the start of `buf`, `None` while partial.
pub(crate) fn request_head_len(buf: &[u8]) -> Result<Option<usize>, FramingError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(buf).map_err(map_parse_error)? {
        httparse::Status::Complete(n) if n > MAX_HEAD => Err(FramingError::TooBig),
        httparse::Status::Complete(n) => Ok(Some(n)),
        httparse::Status::Partial if buf.len() > MAX_HEAD => Err(FramingError::TooBig),
        httparse::Status::Partial => Ok(None),
    }
}

/// The length of a complete response head at the start of `buf`, `None` while partial.
pub(crate) fn response_head_len(buf: &[u8]) -> Result<Option<usize>, FramingError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(buf).map_err(map_parse_error)? {
        httparse::Status::Complete(n) if n > MAX_HEAD => Err(FramingError::TooBig),
        httparse::Status::Complete(n) => Ok(Some(n)),
        httparse::Status::Partial if buf.len() > MAX_HEAD => Err(FramingError::TooBig),
        httparse::Status::Partial => Ok(None),
    }
}

/// Facts of the header fields the relay acts on.
#[derive(Default)]
struct Fields {
    chunked: bool,
    length: Option<u64>,
    expect_continue: bool,
    close: bool,
    keep_alive: bool,
}

fn fields(headers: &[httparse::Header<'_>]) -> Result<Fields, FramingError> {
    let mut f = Fields::default();
    for h in headers {
        let value = String::from_utf8_lossy(h.value);
        let tokens = || value.split(',').map(|t| t.trim().to_ascii_lowercase());
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding decides whether the body is chunked (RFC 9112 6.1).
            f.chunked = tokens().rfind(|t| !t.is_empty()).as_deref() == Some("chunked");
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = value
                .trim()
                .parse::<u64>()
                .map_err(|_| FramingError::Length)?;
            if f.length.is_some_and(|l| l != n) {
                return Err(FramingError::Length);
            }
            f.length = Some(n);
        } else if h.name.eq_ignore_ascii_case("expect") {
            f.expect_continue |= tokens().any(|t| t == "100-continue");
        } else if h.name.eq_ignore_ascii_case("connection") {
            f.close |= tokens().any(|t| t == "close");
            f.keep_alive |= tokens().any(|t| t == "keep-alive");
        }
    }
    Ok(f)
}

/// Parses a complete request head.
pub(crate) fn parse_request(head: &[u8]) -> Result<RequestInfo, FramingError> {
    let mut buf = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut buf);
    req.parse(head).map_err(map_parse_error)?;
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(FramingError::Head("incomplete request line".into()));
    };
    let f = fields(req.headers)?;
    // httparse hands back a slice of `head`: its position is the target's range.
    let start = target.as_ptr() as usize - head.as_ptr() as usize;
    let body = if f.chunked {
        BodyKind::Chunked
    } else {
        match f.length {
            Some(0) | None => BodyKind::Empty,
            Some(n) => BodyKind::Length(n),
        }
    };
    Ok(RequestInfo {
        method: method.to_string(),
        target: start..start + target.len(),
        body,
        expect_continue: f.expect_continue,
        close: f.close || (version == 0 && !f.keep_alive),
    })
}

/// Parses a complete response head.
pub(crate) fn parse_response(head: &[u8]) -> Result<ResponseInfo, FramingError> {
    let mut buf = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut resp = httparse::Response::new(&mut buf);
    resp.parse(head).map_err(map_parse_error)?;
    let (Some(status), Some(version)) = (resp.code, resp.version) else {
        return Err(FramingError::Head("incomplete status line".into()));
    };
    let f = fields(resp.headers)?;
    Ok(ResponseInfo {
        status,
        transfer_chunked: f.chunked,
        length: f.length,
        close: f.close || (version == 0 && !f.keep_alive),
    })
}

impl ResponseInfo {
    /// The body's framing (RFC 9112 6.3), given the request's method.
    pub(crate) fn body(&self, method: &str) -> BodyKind {
        if method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&self.status)
            || self.status == 204
            || self.status == 304
        {
            BodyKind::Empty
        } else if self.transfer_chunked {
            BodyKind::Chunked
        } else {
            match self.length {
                Some(0) => BodyKind::Empty,
                Some(n) => BodyKind::Length(n),
                None => BodyKind::Close,
            }
        }
    }
}

/// The head the upstream gets: the agent's, with the target replaced and
/// every `Host` field's value set to `authority`; every other byte kept.
pub(crate) fn forwarded_head(
    head: &[u8],
    target: Range<usize>,
    new_target: &[u8],
    authority: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len() + authority.len());
    out.extend_from_slice(&head[..target.start]);
    out.extend_from_slice(new_target);
    let rest = &head[target.end..];
    // The request line's end, then one field line at a time (LF ends a line;
    // a CR before it is part of the line's bytes and kept).
    let first_end = rest
        .iter()
        .position(|&b| b == b'\n')
        .map_or(rest.len(), |i| i + 1);
    out.extend_from_slice(&rest[..first_end]);
    let mut host_seen = false;
    let mut lines = rest[first_end..]
        .split_inclusive(|&b| b == b'\n')
        .peekable();
    while let Some(line) = lines.next() {
        let is_last = lines.peek().is_none();
        let colon = line.iter().position(|&b| b == b':');
        let is_host = colon.is_some_and(|c| line[..c].eq_ignore_ascii_case(b"host"));
        if is_last && !host_seen {
            // No Host field (HTTP/1.0): one is added before the blank line.
            out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
        }
        match colon {
            Some(c) if is_host => {
                host_seen = true;
                let eol: &[u8] = if line.ends_with(b"\r\n") {
                    b"\r\n"
                } else {
                    b"\n"
                };
                out.extend_from_slice(&line[..=c]);
                out.push(b' ');
                out.extend_from_slice(authority.as_bytes());
                out.extend_from_slice(eol);
            }
            _ => out.extend_from_slice(line),
        }
    }
    out
}

/// Finds where a body ends, fed its bytes as they arrive.
///
/// Hand-written rather than httparse's `parse_chunk_size`: that one needs the
/// whole size line in one buffer and stops there, while the relay must follow
/// chunk sizes, data and trailers across any read boundary without copying.
#[derive(Debug)]
pub(crate) struct BodyEnd {
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Bytes left of a `Content-Length` body.
    Length(u64),
    /// Until the peer closes.
    Close,
    /// Chunked: reading the size's hex digits (how many so far, the size).
    Size(u8, u64),
    /// Chunked: a chunk extension, up to the line's end.
    Ext(u64),
    /// Chunked: CR seen after the size line.
    SizeLf(u64),
    /// Chunked: data bytes left of the chunk.
    Data(u64),
    DataCr,
    DataLf,
    /// Chunked: the trailer section (bytes so far, at a line's start).
    Trailer(usize, bool),
    TrailerLf,
    Done,
}

impl BodyEnd {
    pub(crate) fn new(kind: BodyKind) -> BodyEnd {
        let state = match kind {
            BodyKind::Empty | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) => State::Length(n),
            BodyKind::Chunked => State::Size(0, 0),
            BodyKind::Close => State::Close,
        };
        BodyEnd { state }
    }

    pub(crate) fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether the body runs until the peer closes.
    pub(crate) fn until_close(&self) -> bool {
        self.state == State::Close
    }

    /// Feeds the next bytes; returns how many of them belong to the body
    /// (the rest follow it).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<usize, FramingError> {
        let mut i = 0;
        while i < bytes.len() && self.state != State::Done {
            match self.state {
                State::Close => return Ok(bytes.len()),
                State::Length(n) | State::Data(n) => {
                    let take = n.min((bytes.len() - i) as u64);
                    i += take as usize;
                    let left = n - take;
                    self.state = match (self.state, left) {
                        (State::Length(_), 0) => State::Done,
                        (State::Length(_), l) => State::Length(l),
                        (_, 0) => State::DataCr,
                        (_, l) => State::Data(l),
                    };
                }
                _ => {
                    self.state = self.step(bytes[i])?;
                    i += 1;
                }
            }
        }
        Ok(i)
    }

    /// One byte of chunked framing outside chunk data.
    fn step(&self, b: u8) -> Result<State, FramingError> {
        let after_size = |size: u64| {
            if size == 0 {
                State::Trailer(0, true)
            } else {
                State::Data(size)
            }
        };
        Ok(match (self.state, b) {
            (State::Size(digits, size), b) if b.is_ascii_hexdigit() => {
                // 15 hex digits stay below u64's bound.
                if digits >= 15 {
                    return Err(FramingError::Chunked);
                }
                let v = (b as char).to_digit(16).unwrap_or(0) as u64;
                State::Size(digits + 1, size * 16 + v)
            }
            (State::Size(d, size), b';' | b' ' | b'\t') if d > 0 => State::Ext(size),
            (State::Size(d, size), b'\r') if d > 0 => State::SizeLf(size),
            (State::Ext(size), b'\r') => State::SizeLf(size),
            (State::Size(d, size), b'\n') if d > 0 => after_size(size),
            (State::Ext(size), b'\n') | (State::SizeLf(size), b'\n') => after_size(size),
            (State::Ext(size), _) => State::Ext(size),
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataCr | State::DataLf, b'\n') => State::Size(0, 0),
            (State::Trailer(n, _), _) if n >= MAX_TRAILER => return Err(FramingError::Chunked),
            (State::Trailer(_, true), b'\r') => State::TrailerLf,
            (State::Trailer(_, true), b'\n') | (State::TrailerLf, b'\n') => State::Done,
            (State::Trailer(n, _), b'\n') => State::Trailer(n + 1, true),
            (State::Trailer(n, _), _) => State::Trailer(n + 1, false),
            _ => return Err(FramingError::Chunked),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(kind: BodyKind, pieces: &[&[u8]]) -> (Vec<usize>, bool) {
        let mut end = BodyEnd::new(kind);
        let used = pieces.iter().map(|p| end.feed(p).unwrap()).collect();
        (used, end.done())
    }

    #[test]
    fn chunked_end_across_any_split() {
        let body = b"5;x=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nT: v\r\n\r\nNEXT";
        let end_at = body.len() - 4;
        for cut in 0..body.len() {
            let (a, b) = body.split_at(cut);
            let mut end = BodyEnd::new(BodyKind::Chunked);
            let n1 = end.feed(a).unwrap();
            let n2 = if end.done() { 0 } else { end.feed(b).unwrap() };
            assert!(end.done(), "cut {cut}");
            assert_eq!(n1 + n2, end_at, "cut {cut}");
        }
        assert_eq!(
            feed_all(BodyKind::Chunked, &[b"0\r\n\r\n"]),
            (vec![5], true)
        );
        assert_eq!(feed_all(BodyKind::Chunked, &[b"3\r\nab"]), (vec![5], false));
        let mut bad = BodyEnd::new(BodyKind::Chunked);
        assert_eq!(bad.feed(b"zz\r\n"), Err(FramingError::Chunked));
        let mut huge = BodyEnd::new(BodyKind::Chunked);
        assert_eq!(
            huge.feed(b"FFFFFFFFFFFFFFFF\r\n"),
            Err(FramingError::Chunked)
        );
        assert_eq!(
            feed_all(BodyKind::Length(3), &[b"ab", b"cdef"]),
            (vec![2, 1], true)
        );
        assert_eq!(feed_all(BodyKind::Close, &[b"abc"]), (vec![3], false));
    }

    #[test]
    fn heads_parsed_and_rewritten() {
        let head = b"POST /w0/v1/messages?beta=true HTTP/1.1\r\nhost: 127.0.0.1:9\r\nX: a\r\nTransfer-Encoding: gzip, chunked\r\nExpect: 100-continue\r\n\r\n";
        let info = parse_request(head).unwrap();
        assert_eq!(&head[info.target.clone()], b"/w0/v1/messages?beta=true");
        assert_eq!(
            (
                info.method.as_str(),
                info.body,
                info.expect_continue,
                info.close
            ),
            ("POST", BodyKind::Chunked, true, false)
        );
        let fwd = forwarded_head(
            head,
            info.target,
            b"/v1/messages?beta=true",
            "api.example:443",
        );
        assert_eq!(
            fwd,
            b"POST /v1/messages?beta=true HTTP/1.1\r\nhost: api.example:443\r\nX: a\r\nTransfer-Encoding: gzip, chunked\r\nExpect: 100-continue\r\n\r\n"
        );
        let h10 = b"GET /w1 HTTP/1.0\r\nA: b\r\n\r\n";
        let info = parse_request(h10).unwrap();
        assert!(info.close);
        assert_eq!(
            forwarded_head(h10, info.target, b"/", "h"),
            b"GET / HTTP/1.0\r\nA: b\r\nHost: h\r\n\r\n"
        );
        assert_eq!(
            parse_request(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
                .unwrap_err(),
            FramingError::Length
        );
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n").unwrap();
        assert_eq!(
            (r.body("GET"), r.body("HEAD")),
            (BodyKind::Length(7), BodyKind::Empty)
        );
        let r = parse_response(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
        assert_eq!(r.body("POST"), BodyKind::Close);
        assert_eq!(request_head_len(b"GET / HTTP/1.1\r\nA:"), Ok(None));
        assert_eq!(request_head_len(b"GET / HTTP/1.1\r\n\r\nxx"), Ok(Some(18)));
    }
}
