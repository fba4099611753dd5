use super::super::{Piece, split};
use super::PREFACE;
use crate::decode::http1;

const LIMIT: usize = 1 << 20;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn piece(ns: u64, data: &[u8]) -> Piece<'_> {
    Piece { ns, data, cut: 0 }
}

fn block(enc: &mut loona_hpack::Encoder<'_>, fields: &[(&str, &str)]) -> Vec<u8> {
    enc.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
}

/// Two requests on streams 1 and 3, their frames interleaved both ways; a
/// header block continued in a CONTINUATION frame, padded DATA, an
/// interim 100 head, trailers, a larger header table in SETTINGS, and the
/// dynamic table reused by the second block of each side.
#[test]
fn streams_become_exchanges_with_decoded_heads() {
    let mut cenc = loona_hpack::Encoder::new();
    let mut senc = loona_hpack::Encoder::new();
    fn req(path: &str) -> Vec<(&str, &str)> {
        vec![
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "api.example.test"),
            (":path", path),
            ("content-type", "application/json"),
            ("x-api-key", "k"),
        ]
    }
    let b1 = block(&mut cenc, &req("/v1/messages"));
    let b3 = block(&mut cenc, &req("/v1/other"));
    let (b1a, b1b) = b1.split_at(5);
    let mut up = PREFACE.to_vec();
    // SETTINGS_HEADER_TABLE_SIZE = 65536.
    up.extend(frame(0x4, 0, 0, &[0, 1, 0, 1, 0, 0]));
    up.extend(frame(0x1, 0, 1, b1a));
    up.extend(frame(0x9, 0x4, 1, b1b));
    up.extend(frame(0x1, 0x4, 3, &b3));
    let mut padded = vec![3u8];
    padded.extend_from_slice(b"{\"a\":");
    padded.extend_from_slice(&[0, 0, 0]);
    up.extend(frame(0x0, 0x8, 1, &padded));
    up.extend(frame(0x0, 0x1, 3, b"{}"));
    let split_at = up.len();
    up.extend(frame(0x0, 0x1, 1, b"1}"));
    let mut down = frame(0x4, 0, 0, &[]);
    let h100 = block(&mut senc, &[(":status", "100")]);
    down.extend(frame(0x1, 0x4, 1, &h100));
    let h1 = block(
        &mut senc,
        &[(":status", "200"), ("content-type", "text/event-stream")],
    );
    down.extend(frame(0x1, 0x4, 1, &h1));
    let h3 = block(
        &mut senc,
        &[(":status", "200"), ("content-type", "text/event-stream")],
    );
    down.extend(frame(0x1, 0x4, 3, &h3));
    down.extend(frame(0x0, 0, 1, b"data: one\n\n"));
    down.extend(frame(0x0, 0x1, 3, b"data: three\n\n"));
    let d1_at = down.len();
    down.extend(frame(0x0, 0, 1, b"data: two\n\n"));
    let trailers = block(&mut senc, &[("grpc-status", "0")]);
    down.extend(frame(0x1, 0x5, 1, &trailers));
    let got = split(
        &[piece(10, &up[..split_at]), piece(30, &up[split_at..])],
        &[piece(20, &down[..d1_at]), piece(40, &down[d1_at..])],
        LIMIT,
    );
    assert_eq!(got.notes, Vec::<String>::new());
    assert_eq!(got.exchanges.len(), 2);
    let e1 = &got.exchanges[0];
    assert_eq!(
        String::from_utf8_lossy(&e1.request.head),
        "POST /v1/messages HTTP/2\r\nhost: api.example.test\r\ncontent-type: application/json\r\nx-api-key: k\r\n\r\n"
    );
    assert_eq!(e1.request.body, b"{\"a\":1}");
    assert_eq!(
        (
            e1.request.first_ns,
            e1.request.last_ns,
            &e1.request.reads[..]
        ),
        (10, 30, &[(0, 10), (5, 30)][..])
    );
    let r1 = e1.response.as_ref().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&r1.head),
        "HTTP/2 200\r\ncontent-type: text/event-stream\r\n\r\n"
    );
    assert_eq!(r1.body, b"data: one\n\ndata: two\n\n");
    assert_eq!((r1.first_ns, r1.last_ns), (20, 40));
    assert_eq!(
        (e1.upstream.as_str(), e1.seq, e1.error.as_deref()),
        ("https://api.example.test", 0, None)
    );
    let e3 = &got.exchanges[1];
    assert_eq!(e3.seq, 1);
    assert_eq!(e3.request.body, b"{}");
    assert_eq!(e3.response.as_ref().unwrap().body, b"data: three\n\n");
    // The decoders read the text form: path, status, framing by stream.
    let head = http1::parse_request(&e1.request.head).unwrap();
    assert_eq!(
        (head.method.as_deref(), head.target.as_deref(), head.http2),
        (Some("POST"), Some("/v1/messages"), true)
    );
    assert_eq!(http1::request_framing(&head), http1::Framing::ToEnd);
    let (resp, interim) = http1::parse_response(&r1.head).unwrap();
    assert_eq!((resp.status, resp.http2, interim), (Some(200), true, 0));
}

/// A reset stream, a request whose frames were cut by the record bound, a
/// body over the limit, and a preface with nothing after it.
#[test]
fn what_cannot_be_followed_is_said() {
    let mut cenc = loona_hpack::Encoder::new();
    let b = block(
        &mut cenc,
        &[(":method", "GET"), (":path", "/x"), (":authority", "h")],
    );
    let mut up = PREFACE.to_vec();
    up.extend(frame(0x1, 0x5, 1, &b));
    let b3 = block(
        &mut cenc,
        &[(":method", "POST"), (":path", "/y"), (":authority", "h")],
    );
    up.extend(frame(0x1, 0x4, 3, &b3));
    up.extend(frame(0x0, 0x1, 3, &[b'z'; 10]));
    let mut senc = loona_hpack::Encoder::new();
    let mut down = frame(0x3, 0, 1, &8u32.to_be_bytes());
    down.extend(frame(0x1, 0x4, 3, &block(&mut senc, &[(":status", "200")])));
    let cut = Piece {
        ns: 5,
        data: &[0, 0, 9],
        cut: 100,
    };
    let got = split(&[piece(1, &up)], &[piece(2, &down), cut], 4);
    assert_eq!(got.exchanges.len(), 2);
    assert_eq!(
        got.exchanges[0].error.as_deref(),
        Some(
            "stream reset by the server (error code 8); stream 1: no response header block captured"
        )
    );
    let e3 = &got.exchanges[1];
    assert_eq!(
        (e3.request.body.as_slice(), e3.request.body_dropped),
        (&b"zzzz"[..], 6)
    );
    assert_eq!(
        e3.error.as_deref(),
        Some("stream 3: the captured response never ended")
    );
    assert_eq!(
        got.notes,
        vec![format!(
            "HTTP/2: received bytes {}..{} not decoded (a call over the record bound broke the framing)",
            down.len(),
            down.len() + 103
        )]
    );
    let bare = split(&[piece(1, PREFACE)], &[], LIMIT);
    assert_eq!(
        (bare.exchanges.len(), bare.notes),
        (
            0,
            vec!["HTTP/2: no request captured (24 bytes sent, 0 received)".to_owned()]
        )
    );
}
