//! The in-container side: answers requests read from `input` on `output`,
//! one at a time, until end of input. Only protocol frames are written to
//! `output`; diagnostics go to `tracing` (stderr).

use std::io::{BufRead, Write};
use std::path::PathBuf;

use crate::sessions::{self, DiscoveryOptions};

use super::protocol::{
    ErrorCode, Frame, GetParams, ListParams, MAX_FRAME, MessageParams, PROTOCOL, Payload, Request,
    Response, WireError, check_message, read_frame,
};

/// Continues sessions for `session/message` (the CLI provides it when the
/// bridge was started with `--allow-messaging`; the messaging runtime lives
/// above this module).
pub trait Messenger {
    /// Delivers `message` (already within bounds) to the session; the
    /// provider acknowledged it: `(agent_type, transport)`.
    fn deliver(
        &self,
        session: &sessions::SessionRef,
        message: &str,
    ) -> Result<(String, String), WireError>;
    /// Waits for the turns still running (end of input: the host is gone,
    /// the turns it started finish here).
    fn drain(&self);
}

/// The bridge server's state.
pub struct Server {
    /// The home whose transcripts are served, or why there is none (every
    /// session request then fails rather than guessing another home).
    pub home: Result<PathBuf, String>,
    /// This binary's version, compared with the host's in `bridge/hello`.
    pub version: String,
    /// Frame bound in both directions (the protocol's 8 MiB; tests lower it).
    pub max_frame: usize,
    /// `None`: `session/message` answers `failed` "messaging is not enabled".
    pub messenger: Option<Box<dyn Messenger>>,
}

impl Server {
    pub fn new(home: Result<PathBuf, String>) -> Self {
        Server {
            home,
            version: env!("CARGO_PKG_VERSION").to_string(),
            max_frame: MAX_FRAME,
            messenger: None,
        }
    }

    /// Serves until end of input (then `Ok`). An I/O error on either stream
    /// ends the loop with that error. Either way the turns still running
    /// finish first (the host may be gone; its messages were acknowledged).
    pub fn serve(&self, input: &mut impl BufRead, output: &mut impl Write) -> std::io::Result<()> {
        let served = self.serve_lines(input, output);
        if let Some(m) = &self.messenger {
            m.drain();
        }
        served
    }

    fn serve_lines(
        &self,
        input: &mut impl BufRead,
        output: &mut impl Write,
    ) -> std::io::Result<()> {
        loop {
            let response = match read_frame(input, self.max_frame)? {
                Frame::Eof => return Ok(()),
                Frame::TooLarge { bytes } => {
                    tracing::warn!("bridge: request of {bytes} bytes refused");
                    Err(WireError::new(
                        ErrorCode::RequestTooLarge,
                        format!(
                            "request of {bytes} bytes exceeds the {} byte frame limit",
                            self.max_frame
                        ),
                    ))
                }
                Frame::Line(line) => self.answer(&line),
            };
            let bytes = self.encode(&response);
            output.write_all(&bytes)?;
            output.flush()?;
        }
    }

    /// The response line, `\n` included; one that would exceed the frame
    /// bound is replaced by `response_too_large`.
    pub fn encode(&self, response: &Response) -> Vec<u8> {
        let mut bytes = match serde_json::to_vec(response) {
            Ok(b) => b,
            Err(e) => serialized_error(&WireError::new(
                ErrorCode::Failed,
                format!("cannot encode the response: {e}"),
            )),
        };
        if bytes.len() + 1 > self.max_frame {
            tracing::warn!("bridge: response of {} bytes replaced", bytes.len() + 1);
            bytes = serialized_error(&WireError::new(
                ErrorCode::ResponseTooLarge,
                format!(
                    "response of {} bytes exceeds the {} byte frame limit",
                    bytes.len() + 1,
                    self.max_frame
                ),
            ));
        }
        bytes.push(b'\n');
        bytes
    }

    /// The response to one request line.
    pub fn answer(&self, line: &[u8]) -> Response {
        let req: Request = serde_json::from_slice(line).map_err(|e| {
            WireError::new(ErrorCode::InvalidRequest, format!("invalid request: {e}"))
        })?;
        match req {
            Request::Hello(h) if h.version == self.version => Ok(Payload::Hello {
                version: self.version.clone(),
                protocol: PROTOCOL,
            }),
            Request::Hello(h) => Err(WireError::new(
                ErrorCode::Failed,
                version_mismatch(&h.version, &self.version),
            )),
            Request::SessionsList(p) => self.list(&p),
            Request::SessionGet(p) => self.get(&p),
            Request::SessionMessage(p) => self.message(&p),
        }
    }

    fn options(&self, limit: usize) -> Result<DiscoveryOptions, WireError> {
        let home = self.home.as_ref().map_err(|e| {
            WireError::new(ErrorCode::Failed, format!("no home to read sessions: {e}"))
        })?;
        Ok(DiscoveryOptions {
            home: Some(home.clone()),
            limit,
            ..DiscoveryOptions::default()
        })
    }

    fn list(&self, p: &ListParams) -> Response {
        let opts = DiscoveryOptions {
            providers: p.provider.into_iter().collect(),
            max_age: p.max_age_secs.map(std::time::Duration::from_secs),
            ..self.options(p.limit)?
        };
        let sessions = sessions::discover(&opts).map_err(|e| {
            WireError::new(
                ErrorCode::Failed,
                format!("discovering agent sessions: {e}"),
            )
        })?;
        Ok(Payload::Sessions { sessions })
    }

    /// An exact lookup: a prefix that discovery would accept is not the id.
    fn lookup(&self, id: &str) -> Result<sessions::SessionRef, WireError> {
        let opts = self.options(0)?;
        let found = sessions::find_by_id(&opts, id).map_err(|e| {
            WireError::new(ErrorCode::Failed, format!("looking up session {id}: {e}"))
        })?;
        match found {
            Some(r) if r.session_id == id => Ok(r),
            _ => Err(WireError::new(
                ErrorCode::NotFound,
                format!("session {id} not found"),
            )),
        }
    }

    fn get(&self, p: &GetParams) -> Response {
        let r = self.lookup(&p.session_id)?;
        let session = sessions::parse_session(&r).map_err(|e| {
            WireError::new(
                ErrorCode::Failed,
                format!("parsing session {}: {e}", p.session_id),
            )
        })?;
        Ok(Payload::Session {
            session: Box::new(session),
        })
    }

    fn message(&self, p: &MessageParams) -> Response {
        let text =
            check_message(&p.message).map_err(|e| WireError::new(ErrorCode::InvalidParams, e))?;
        let Some(messenger) = &self.messenger else {
            return Err(WireError::new(
                ErrorCode::Failed,
                "messaging is not enabled",
            ));
        };
        let found = self.lookup(&p.session_id)?;
        let (agent_type, transport) = messenger.deliver(&found, text)?;
        Ok(Payload::Message {
            agent_type,
            transport,
        })
    }
}

/// The one wording of a version mismatch, on both sides.
pub fn version_mismatch(host: &str, bridge: &str) -> String {
    format!(
        "version mismatch: host agentsight {host}, container agentsight {bridge}; install the same version in both"
    )
}

fn serialized_error(e: &WireError) -> Vec<u8> {
    let r: Response = Err(e.clone());
    // A `WireError` is a code and a string: serializing it cannot fail.
    serde_json::to_vec(&r).unwrap_or_else(|_| br#"{"Err":{"code":"failed","message":""}}"#.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::protocol::MAX_MESSAGE;

    fn server() -> Server {
        Server::new(Err("HOME is not set".into()))
    }

    fn run(s: &Server, input: &[u8]) -> String {
        let mut out = Vec::new();
        s.serve(&mut std::io::BufReader::new(input), &mut out)
            .expect("serve");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn answers_each_line_and_stops_at_eof() {
        let v = env!("CARGO_PKG_VERSION");
        let input = format!(
            "{{\"method\":\"bridge/hello\",\"params\":{{\"version\":\"{v}\"}}}}\nnot json\n{{\"method\":\"bridge/hello\",\"params\":{{\"version\":\"9.9.9\"}}}}\n{{\"method\":\"sessions/list\",\"params\":{{\"limit\":3}}}}\n"
        );
        let out = run(&server(), input.as_bytes());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert_eq!(
            lines[0],
            format!("{{\"Ok\":{{\"version\":\"{v}\",\"protocol\":1}}}}")
        );
        assert!(
            lines[1]
                .starts_with(r#"{"Err":{"code":"invalid_request","message":"invalid request: "#),
            "{}",
            lines[1]
        );
        assert_eq!(
            lines[2],
            format!(
                "{{\"Err\":{{\"code\":\"failed\",\"message\":\"version mismatch: host agentsight 9.9.9, container agentsight {v}; install the same version in both\"}}}}"
            )
        );
        assert_eq!(
            lines[3],
            r#"{"Err":{"code":"failed","message":"no home to read sessions: HOME is not set"}}"#
        );
    }

    #[test]
    fn messages_are_validated_before_anything_else() {
        let s = server();
        let long = "x".repeat(MAX_MESSAGE + 1);
        let cases = [
            (
                " \n\t ".to_string(),
                ErrorCode::InvalidParams,
                "message is empty".to_string(),
            ),
            (
                long,
                ErrorCode::InvalidParams,
                format!("message of {} bytes exceeds 65536 bytes", MAX_MESSAGE + 1),
            ),
            // Valid, but this bridge was not started with --allow-messaging:
            // refused before any lookup.
            (
                format!("{} ", "y".repeat(MAX_MESSAGE - 1)),
                ErrorCode::Failed,
                "messaging is not enabled".to_string(),
            ),
        ];
        for (message, code, text) in cases {
            let line = serde_json::to_vec(&Request::SessionMessage(MessageParams {
                session_id: "s".into(),
                message,
            }))
            .expect("serialize");
            assert_eq!(s.answer(&line), Err(WireError::new(code, text)));
        }
    }

    #[test]
    fn oversized_responses_are_replaced() {
        let s = Server {
            max_frame: 64,
            ..server()
        };
        let fits: Response = Ok(Payload::Message {
            agent_type: "a".into(),
            transport: "b".into(),
        });
        assert_eq!(
            s.encode(&fits),
            b"{\"Ok\":{\"agent_type\":\"a\",\"transport\":\"b\"}}\n".to_vec()
        );
        let big: Response = Ok(Payload::Message {
            agent_type: "a".repeat(64),
            transport: "b".into(),
        });
        assert_eq!(
            String::from_utf8(s.encode(&big)).expect("utf-8"),
            "{\"Err\":{\"code\":\"response_too_large\",\"message\":\"response of 105 bytes exceeds the 64 byte frame limit\"}}\n"
        );
    }
}
