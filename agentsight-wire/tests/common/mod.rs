//! Loading recorded exchanges (`fixtures/wire/NAME.req` / `.resp`, exact
//! bytes) and hand-made ones into `RawExchange`s.
#![allow(dead_code)]

use std::path::PathBuf;

use agentsight_wire::{RawExchange, RawMessage, Via};

pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/wire")
}

/// The recorded exchange NAME.
pub fn fixture(name: &str) -> RawExchange {
    let dir = fixture_dir();
    let req = std::fs::read(dir.join(format!("{name}.req"))).expect("fixture request");
    let resp = std::fs::read(dir.join(format!("{name}.resp"))).expect("fixture response");
    exchange(&req, Some(&resp))
}

/// Splits a message's bytes into head (through the blank line; interim
/// `1xx` heads stay in the head, as the relay stores them) and body.
pub fn message(bytes: &[u8]) -> RawMessage {
    let mut at = 0;
    loop {
        let end = bytes[at..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| at + i + 4)
            .unwrap_or(bytes.len());
        let interim =
            bytes[at..].starts_with(b"HTTP/1.1 1") && !bytes[at..].starts_with(b"HTTP/1.1 101");
        if interim && end < bytes.len() {
            at = end;
            continue;
        }
        return RawMessage {
            head: bytes[..end].to_vec(),
            body: bytes[end..].to_vec(),
            ..RawMessage::default()
        };
    }
}

pub fn exchange(req: &[u8], resp: Option<&[u8]>) -> RawExchange {
    RawExchange {
        via: Via::Relay,
        conn: 1,
        seq: 0,
        route: "test".to_string(),
        upstream: "http://127.0.0.1:9".to_string(),
        client_port: 40000,
        request: message(req),
        response: resp.map(message),
        error: None,
    }
}

/// Chunked framing of `pieces`, one chunk each.
pub fn chunked(pieces: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pieces {
        out.extend_from_slice(format!("{:x}\r\n", p.len()).as_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}
