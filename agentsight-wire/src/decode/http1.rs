//! HTTP/1.1 heads (through `httparse`) and body framing. An HTTP/2
//! message read from TLS plaintext (`tls::h2`) is stored with a head of the
//! same text form whose version is `HTTP/2`, its header block as HPACK
//! decoded it; it is parsed here too, and its body is its DATA frames'.

use thiserror::Error;

/// Most header fields a head may carry; more is refused as malformed.
const MAX_HEADERS: usize = 256;

/// Why a head could not be parsed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HeadError {
    #[error("head incomplete")]
    Partial,
    #[error("head malformed: {0}")]
    Invalid(httparse::Error),
}

/// A parsed request or response head.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    pub method: Option<String>,
    pub target: Option<String>,
    pub status: Option<u16>,
    /// Header fields in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// An HTTP/2 message (`HTTP/2` in its start line): its body is framed
    /// by the stream, never by a length or chunks.
    pub http2: bool,
}

/// The version token of the heads `tls::h2` writes.
pub const HTTP2_VERSION: &str = "HTTP/2";

/// An HTTP/2 head in its HTTP/1.1 form for `httparse` (which knows only
/// 1.x): the version in its start line replaced, nothing else.
fn h1_form(head: &[u8], request: bool) -> Option<Vec<u8>> {
    let eol = head.iter().position(|&b| b == b'\r')?;
    let line = &head[..eol];
    let v = HTTP2_VERSION.as_bytes();
    let mut out = Vec::with_capacity(head.len() + 2);
    if request && line.ends_with(&[b" ".as_slice(), v].concat()) {
        out.extend_from_slice(&line[..line.len() - v.len()]);
        out.extend_from_slice(b"HTTP/1.1");
    } else if !request && line.starts_with(&[v, b" ".as_slice()].concat()) {
        out.extend_from_slice(b"HTTP/1.1");
        out.extend_from_slice(&line[v.len()..]);
    } else {
        return None;
    }
    out.extend_from_slice(&head[eol..]);
    Some(out)
}

impl Head {
    /// The first field of that name (case-insensitive), value trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }

    /// Comma-separated list values of every field of that name, lowercased.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

fn headers_of(raw: &[httparse::Header<'_>]) -> Vec<(String, String)> {
    raw.iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect()
}

/// Parses a request head.
pub fn parse_request(head: &[u8]) -> Result<Head, HeadError> {
    if let Some(h1) = h1_form(head, true) {
        return parse_request(&h1).map(|h| Head { http2: true, ..h });
    }
    let mut buf = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut buf);
    match req.parse(head).map_err(HeadError::Invalid)? {
        httparse::Status::Complete(_) => Ok(Head {
            method: req.method.map(str::to_string),
            target: req.path.map(str::to_string),
            status: None,
            headers: headers_of(req.headers),
            http2: false,
        }),
        httparse::Status::Partial => Err(HeadError::Partial),
    }
}

/// Parses a response head, skipping interim `1xx` heads (`100 Continue`)
/// that precede the final one in the same buffer; returns how many were skipped.
pub fn parse_response(head: &[u8]) -> Result<(Head, u32), HeadError> {
    if let Some(h1) = h1_form(head, false) {
        return parse_response(&h1).map(|(h, n)| (Head { http2: true, ..h }, n));
    }
    let mut at = 0;
    let mut interim = 0;
    loop {
        let mut buf = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut buf);
        let rest = head.get(at..).unwrap_or_default();
        match resp.parse(rest).map_err(HeadError::Invalid)? {
            httparse::Status::Complete(n) => {
                let code = resp.code.unwrap_or_default();
                // 101 switches protocols: final. Other 1xx are interim.
                if (100..200).contains(&code) && code != 101 && at + n < head.len() {
                    at += n;
                    interim += 1;
                    continue;
                }
                return Ok((
                    Head {
                        method: None,
                        target: None,
                        status: resp.code,
                        headers: headers_of(resp.headers),
                        http2: false,
                    },
                    interim,
                ));
            }
            httparse::Status::Partial => return Err(HeadError::Partial),
        }
    }
}

/// How a message's body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (a request without length, `204`, `304`, `1xx`).
    Empty,
    Chunked,
    Length(u64),
    /// Until the connection closed.
    ToEnd,
}

/// The request's framing (RFC 9112 §6.3: chunked wins over a length).
pub fn request_framing(head: &Head) -> Framing {
    if head.http2 {
        return Framing::ToEnd;
    }
    if head.list("transfer-encoding").last().map(String::as_str) == Some("chunked") {
        return Framing::Chunked;
    }
    match head.header("content-length") {
        Some(v) => v.parse().map(Framing::Length).unwrap_or(Framing::ToEnd),
        None => Framing::Empty,
    }
}

/// The response's framing; `head_request` when the request was `HEAD`.
pub fn response_framing(head: &Head, head_request: bool) -> Framing {
    let status = head.status.unwrap_or_default();
    if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        return Framing::Empty;
    }
    if head.http2 {
        return Framing::ToEnd;
    }
    if head.list("transfer-encoding").last().map(String::as_str) == Some("chunked") {
        return Framing::Chunked;
    }
    match head.header("content-length").map(str::parse::<u64>) {
        Some(Ok(n)) => Framing::Length(n),
        _ => Framing::ToEnd,
    }
}

/// Removes chunked framing, up to `limit` bytes of output. Extensions and
/// trailers are tolerated (skipped); a body cut anywhere decodes as far as
/// it goes, with a note. Hand-written: no crate decodes chunked framing from
/// a byte slice that may be cut anywhere and still gives what it had.
pub fn dechunk(input: &[u8], limit: usize) -> (Vec<u8>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut at = 0usize;
    let mut chunk = 0u32;
    loop {
        let Some(eol) = find_eol(input, at) else {
            notes.push(format!(
                "chunked body cut after {chunk} chunks (no last chunk)"
            ));
            break;
        };
        let line = String::from_utf8_lossy(&input[at..eol.0]);
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let Ok(size) = u64::from_str_radix(size_text, 16) else {
            notes.push(format!("chunk {chunk}: size line not hex: body cut there"));
            break;
        };
        at = eol.1;
        if size == 0 {
            skip_trailers(input, at, &mut notes);
            break;
        }
        let avail = (input.len() - at) as u64;
        let take = size.min(avail) as usize;
        let room = limit.saturating_sub(out.len());
        out.extend_from_slice(&input[at..at + take.min(room)]);
        if take > room {
            notes.push(format!("decoded body cut at {limit} bytes"));
            break;
        }
        if (take as u64) < size {
            notes.push(format!(
                "chunked body cut in chunk {chunk} ({take} of {size} bytes)"
            ));
            break;
        }
        at += take;
        // The CRLF after the data; tolerate a bare LF.
        if input[at..].starts_with(b"\r\n") {
            at += 2;
        } else if input[at..].starts_with(b"\n") {
            at += 1;
        }
        chunk += 1;
    }
    (out, notes)
}

/// Skips trailer fields through the blank line ending them.
fn skip_trailers(input: &[u8], mut at: usize, notes: &mut Vec<String>) {
    loop {
        match find_eol(input, at) {
            Some((end, next)) if end == at => {
                if next < input.len() {
                    notes.push(format!(
                        "{} bytes after the last chunk ignored",
                        input.len() - next
                    ));
                }
                return;
            }
            Some((_, next)) => at = next,
            None => {
                if at < input.len() {
                    notes.push("chunked body cut in its trailers".to_string());
                }
                // A last chunk without its final CRLF: the body is whole.
                return;
            }
        }
    }
}

/// The end of the line starting at `at` (LF or CRLF): (line end, next line start).
fn find_eol(input: &[u8], at: usize) -> Option<(usize, usize)> {
    let rel = input.get(at..)?.iter().position(|&b| b == b'\n')?;
    let nl = at + rel;
    let end = if nl > at && input[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    Some((end, nl + 1))
}
