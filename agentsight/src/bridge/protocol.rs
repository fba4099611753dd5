//! The bridge protocol: one JSON object per line in each direction.
//!
//! Requests are adjacently tagged (`{"method": …, "params": {…}}`); responses
//! are `{"Ok": payload}` or `{"Err": {"code", "message"}}`, with untagged
//! payloads whose keys identify them.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::sessions::{AgentSession, SessionSummary};

/// Largest frame in either direction, the trailing `\n` included.
pub const MAX_FRAME: usize = 8 * 1024 * 1024;
/// Largest `session/message` text, measured before trimming.
pub const MAX_MESSAGE: usize = 65_536;
/// A message's bounds: at most [`MAX_MESSAGE`] bytes measured before
/// trimming, non-empty after. Returns the trimmed text, which is what is sent.
pub fn check_message(message: &str) -> Result<&str, String> {
    if message.len() > MAX_MESSAGE {
        return Err(format!(
            "message of {} bytes exceeds {MAX_MESSAGE} bytes",
            message.len()
        ));
    }
    let text = message.trim();
    if text.is_empty() {
        return Err("message is empty".into());
    }
    Ok(text)
}
/// The protocol revision `bridge/hello` reports; a change of a shape bumps it.
pub const PROTOCOL: u32 = 1;

/// A request from the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", content = "params", deny_unknown_fields)]
pub enum Request {
    #[serde(rename = "sessions/list")]
    SessionsList(ListParams),
    #[serde(rename = "session/get")]
    SessionGet(GetParams),
    #[serde(rename = "session/message")]
    SessionMessage(MessageParams),
    /// agentsight's addition: the host's first request, so that host and
    /// container binaries of different versions never talk past each other.
    #[serde(rename = "bridge/hello")]
    Hello(HelloParams),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    pub limit: usize,
    /// Only this provider (`sessions --provider`), applied before the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<crate::sessions::Provider>,
    /// Only sessions updated within this many seconds (`--max-age`),
    /// applied before the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_secs: Option<u64>,
}

impl ListParams {
    /// The newest `limit` sessions, unfiltered.
    pub fn newest(limit: usize) -> Self {
        ListParams {
            limit,
            provider: None,
            max_age_secs: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    pub session_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageParams {
    pub session_id: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloParams {
    pub version: String,
}

/// The Ok payloads. Untagged: `sessions`, `session`, `agent_type` and
/// `protocol` tell them apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Payload {
    Sessions {
        sessions: Vec<SessionSummary>,
    },
    Session {
        session: Box<AgentSession>,
    },
    Message {
        agent_type: String,
        transport: String,
    },
    Hello {
        version: String,
        protocol: u32,
    },
}

/// Exactly the seven codes of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    NotFound,
    Conflict,
    Failed,
    InvalidRequest,
    InvalidParams,
    RequestTooLarge,
    ResponseTooLarge,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Failed => "failed",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::RequestTooLarge => "request_too_large",
            ErrorCode::ResponseTooLarge => "response_too_large",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `Err` side of a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
}

impl WireError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            code,
            message: message.into(),
        }
    }
}

/// One response line: serde writes `Result` as `{"Ok": …}` / `{"Err": …}`.
pub type Response = Result<Payload, WireError>;

/// What [`read_frame`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One line, without its `\n`.
    Line(Vec<u8>),
    /// A line longer than the limit: it was read to its end and dropped.
    TooLarge { bytes: u64 },
    /// End of input before any byte of a new line.
    Eof,
}

/// Reads one `\n`-terminated frame of at most `max` bytes (the `\n`
/// counted). A longer line is consumed chunk by chunk and never held whole,
/// so a hostile peer cannot make the reader allocate more than `max`. A last
/// line without `\n` counts as a line.
pub fn read_frame(r: &mut impl BufRead, max: usize) -> std::io::Result<Frame> {
    let mut line = Vec::new();
    let mut seen: u64 = 0;
    let mut oversized = false;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(match (seen, oversized) {
                (0, _) => Frame::Eof,
                (bytes, true) => Frame::TooLarge { bytes },
                // Without its `\n` the line would still need one more byte.
                (bytes, false) if bytes as usize + 1 > max => Frame::TooLarge { bytes },
                _ => Frame::Line(line),
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        seen += chunk as u64;
        if !oversized {
            if seen as usize > max {
                oversized = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&buf[..chunk]);
            }
        }
        r.consume(chunk);
        if done {
            if oversized {
                return Ok(Frame::TooLarge { bytes: seen });
            }
            line.pop();
            return Ok(Frame::Line(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_the_documented_shapes() {
        let cases = [
            (
                Request::SessionsList(ListParams::newest(5)),
                r#"{"method":"sessions/list","params":{"limit":5}}"#,
            ),
            (
                Request::SessionGet(GetParams {
                    session_id: "s1".into(),
                }),
                r#"{"method":"session/get","params":{"session_id":"s1"}}"#,
            ),
            (
                Request::SessionMessage(MessageParams {
                    session_id: "s1".into(),
                    message: "hi".into(),
                }),
                r#"{"method":"session/message","params":{"session_id":"s1","message":"hi"}}"#,
            ),
            (
                Request::Hello(HelloParams {
                    version: "0.1.0".into(),
                }),
                r#"{"method":"bridge/hello","params":{"version":"0.1.0"}}"#,
            ),
        ];
        for (req, text) in cases {
            assert_eq!(serde_json::to_string(&req).expect("serialize"), text);
            assert_eq!(
                serde_json::from_str::<Request>(text).expect("parse"),
                req,
                "{text}"
            );
        }
    }

    #[test]
    fn wrong_params_and_unknown_methods_do_not_parse() {
        for bad in [
            r#"{"method":"sessions/list","params":{}}"#,
            r#"{"method":"sessions/list","params":{"limit":"5"}}"#,
            r#"{"method":"session/get","params":{"session_id":"a","x":1}}"#,
            r#"{"method":"session/delete","params":{"session_id":"a"}}"#,
            r#"{"params":{"limit":1}}"#,
            r#"[1,2]"#,
        ] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn responses_are_externally_tagged_results() {
        let ok: Response = Ok(Payload::Message {
            agent_type: "codex".into(),
            transport: "codex-app-server".into(),
        });
        assert_eq!(
            serde_json::to_string(&ok).expect("serialize"),
            r#"{"Ok":{"agent_type":"codex","transport":"codex-app-server"}}"#
        );
        let hello: Response = Ok(Payload::Hello {
            version: "1.2.3".into(),
            protocol: 1,
        });
        assert_eq!(
            serde_json::to_string(&hello).expect("serialize"),
            r#"{"Ok":{"version":"1.2.3","protocol":1}}"#
        );
        let err: Response = Err(WireError::new(ErrorCode::RequestTooLarge, "too big"));
        assert_eq!(
            serde_json::to_string(&err).expect("serialize"),
            r#"{"Err":{"code":"request_too_large","message":"too big"}}"#
        );
        for text in [
            r#"{"Ok":{"sessions":[]}}"#,
            r#"{"Ok":{"version":"1.2.3","protocol":1}}"#,
            r#"{"Err":{"code":"not_found","message":"m"}}"#,
        ] {
            let r: Response = serde_json::from_str(text).expect(text);
            assert_eq!(serde_json::to_string(&r).expect("serialize"), text);
        }
        assert_eq!(
            serde_json::from_str::<Response>(r#"{"Ok":{"sessions":[]}}"#).expect("parse"),
            Ok(Payload::Sessions { sessions: vec![] })
        );
    }

    #[test]
    fn the_seven_codes_are_spelled_as_documented() {
        let all = [
            ErrorCode::NotFound,
            ErrorCode::Conflict,
            ErrorCode::Failed,
            ErrorCode::InvalidRequest,
            ErrorCode::InvalidParams,
            ErrorCode::RequestTooLarge,
            ErrorCode::ResponseTooLarge,
        ];
        let words: Vec<String> = all
            .iter()
            .map(|c| serde_json::to_string(c).expect("serialize"))
            .collect();
        assert_eq!(
            words,
            [
                "\"not_found\"",
                "\"conflict\"",
                "\"failed\"",
                "\"invalid_request\"",
                "\"invalid_params\"",
                "\"request_too_large\"",
                "\"response_too_large\""
            ]
        );
        for c in all {
            assert_eq!(format!("\"{c}\""), serde_json::to_string(&c).expect("s"));
        }
    }

    #[test]
    fn frames_are_bounded_and_oversized_lines_are_consumed() {
        // Limit 8: "1234567\n" (8 bytes) fits, "12345678\n" (9) does not.
        let input = b"1234567\n12345678\nabc\n\nlast";
        let mut r = std::io::BufReader::with_capacity(3, &input[..]);
        assert_eq!(
            read_frame(&mut r, 8).expect("read"),
            Frame::Line(b"1234567".to_vec())
        );
        assert_eq!(
            read_frame(&mut r, 8).expect("read"),
            Frame::TooLarge { bytes: 9 }
        );
        assert_eq!(
            read_frame(&mut r, 8).expect("read"),
            Frame::Line(b"abc".to_vec())
        );
        assert_eq!(read_frame(&mut r, 8).expect("read"), Frame::Line(vec![]));
        assert_eq!(
            read_frame(&mut r, 8).expect("read"),
            Frame::Line(b"last".to_vec())
        );
        assert_eq!(read_frame(&mut r, 8).expect("read"), Frame::Eof);
        // A last line without `\n` that would need a ninth byte is too large.
        let mut r = std::io::BufReader::new(&b"12345678"[..]);
        assert_eq!(
            read_frame(&mut r, 8).expect("read"),
            Frame::TooLarge { bytes: 8 }
        );
        assert_eq!(read_frame(&mut r, 8).expect("read"), Frame::Eof);
    }
}
