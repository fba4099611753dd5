use super::*;

fn piece(ns: u64, data: &[u8]) -> Piece<'_> {
    Piece { ns, data, cut: 0 }
}

fn msg(head: &[u8], body: &[u8], first_ns: u64, last_ns: u64, reads: &[(u64, u64)]) -> RawMessage {
    RawMessage {
        head: head.to_vec(),
        body: body.to_vec(),
        body_dropped: 0,
        first_ns,
        last_ns,
        reads: reads.to_vec(),
    }
}

fn ex(seq: u32, upstream: &str, request: RawMessage, response: Option<RawMessage>) -> RawExchange {
    RawExchange {
        via: Via::Tls,
        conn: 0,
        seq,
        route: "tls".into(),
        upstream: upstream.into(),
        client_port: 0,
        request,
        response,
        error: None,
    }
}

const LIMIT: usize = 1 << 20;

#[test]
fn keep_alive_carries_two_exchanges() {
    let h1 = b"POST /v1/messages HTTP/1.1\r\nHost: api.example\r\nContent-Length: 5\r\n\r\n";
    let r1 = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
    let h2 = b"GET /models HTTP/1.1\r\nHost: api.example:8443\r\n\r\n";
    let r2 = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let req1 = [&h1[..], b"hello"].concat();
    let resp1 = [&r1[..], b"ok"].concat();
    let resp2 = [&r2[..], b"3\r\nabc\r\n0\r\n\r\n"].concat();
    let split = split(
        &[piece(10, &req1), piece(30, h2)],
        &[piece(20, &resp1), piece(40, &resp2)],
        LIMIT,
    );
    assert_eq!(
        split,
        Split {
            exchanges: vec![
                ex(
                    0,
                    "https://api.example",
                    msg(h1, b"hello", 10, 10, &[(0, 10)]),
                    Some(msg(r1, b"ok", 20, 20, &[(0, 20)])),
                ),
                ex(
                    1,
                    "https://api.example:8443",
                    msg(h2, b"", 30, 30, &[]),
                    Some(msg(r2, b"3\r\nabc\r\n0\r\n\r\n", 40, 40, &[(0, 40)])),
                ),
            ],
            notes: vec![],
        }
    );
}

#[test]
fn chunked_response_split_over_pieces() {
    let req = b"GET / HTTP/1.1\r\n\r\n";
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let p1 = [&head[..], b"4\r\nWi"].concat();
    let split = split(
        &[piece(1, req)],
        &[
            piece(20, &p1),
            piece(21, b"ki\r\n5\r\npedia\r\n"),
            piece(22, b"0\r\n\r\n"),
        ],
        LIMIT,
    );
    assert_eq!(
        split.exchanges,
        vec![ex(
            0,
            "",
            msg(req, b"", 1, 1, &[]),
            Some(msg(
                head,
                b"4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n",
                20,
                22,
                &[(0, 20), (5, 21), (19, 22)]
            )),
        )]
    );
    assert_eq!(split.notes, Vec::<String>::new());
}

#[test]
fn interim_100_continue_is_kept_before_the_final_head() {
    let head = b"POST /up HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
    let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
    let fin = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    let split = split(
        &[piece(1, head), piece(3, b"data")],
        &[piece(2, cont), piece(4, fin)],
        LIMIT,
    );
    let both = [&cont[..], fin].concat();
    assert_eq!(
        split.exchanges,
        vec![ex(
            0,
            "https://h",
            msg(head, b"data", 1, 3, &[(0, 3)]),
            Some(msg(&both, b"", 2, 4, &[])),
        )]
    );
    assert!(split.notes.is_empty());
}

#[test]
fn truncated_last_response_is_an_error() {
    let req = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    let r1 = b"HTTP/1.1 204 No Content\r\n\r\n";
    let r2 = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    let resp2 = [&r2[..], b"abcd"].concat();
    let split = split(
        &[piece(1, req), piece(3, req)],
        &[piece(2, r1), piece(4, &resp2)],
        LIMIT,
    );
    let mut second = ex(
        1,
        "https://h",
        msg(req, b"", 3, 3, &[]),
        Some(msg(r2, b"abcd", 4, 4, &[(0, 4)])),
    );
    second.error =
        Some("the captured stream ended inside the response body (4 of 10 bytes)".into());
    assert_eq!(
        split.exchanges,
        vec![
            ex(
                0,
                "https://h",
                msg(req, b"", 1, 1, &[]),
                Some(msg(r1, b"", 2, 2, &[]))
            ),
            second
        ]
    );
    assert!(split.notes.is_empty());
    // No response at all.
    let none = super::split(&[piece(1, req)], &[], LIMIT);
    assert_eq!(
        none.exchanges[0].error.as_deref(),
        Some("the captured stream ended before the response")
    );
    assert_eq!(none.exchanges[0].response, None);
}

#[test]
fn pieces_split_inside_the_head() {
    let split = split(
        &[
            piece(1, b"POST /v1/messages HT"),
            piece(2, b"TP/1.1\r\nHost: api.example\r\nContent-"),
            piece(3, b"Length: 2\r\n\r\n{}"),
        ],
        &[
            piece(4, b"HTTP/1.1 200 OK\r"),
            piece(5, b"\nConnection: close\r\n\r\nall"),
        ],
        LIMIT,
    );
    assert_eq!(
        split,
        Split {
            exchanges: vec![ex(
                0,
                "https://api.example",
                msg(
                    b"POST /v1/messages HTTP/1.1\r\nHost: api.example\r\nContent-Length: 2\r\n\r\n",
                    b"{}",
                    1,
                    3,
                    &[(0, 3)]
                ),
                // Close-delimited: the body runs to the stream's end.
                Some(msg(
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
                    b"all",
                    4,
                    5,
                    &[(0, 5)]
                )),
            )],
            notes: vec![],
        }
    );
}

#[test]
fn http2_and_garbage_are_notes() {
    let h2 = split(
        &[piece(1, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0")],
        &[piece(2, b"\0\0\x12\x04")],
        LIMIT,
    );
    assert_eq!(
        h2,
        Split {
            exchanges: vec![],
            notes: vec![
                "HTTP/2: the captured sent stream ends inside a frame (2 bytes)".into(),
                "HTTP/2: the captured received stream ends inside a frame (4 bytes)".into()
            ],
        }
    );
    let junk = split(&[piece(1, b"\x16\x03\x01junk\r\n")], &[], LIMIT);
    assert_eq!(
        junk,
        Split {
            exchanges: vec![],
            notes: vec![
                "sent bytes 0..9 not HTTP/1.1 (malformed head: invalid token): not decoded".into()
            ],
        }
    );
}

#[test]
fn bytes_not_captured_are_an_error_and_length_framing_goes_on() {
    let head = b"POST /big HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
    let first = [&head[..], b"abc"].concat();
    let req2 = b"GET /next HTTP/1.1\r\n\r\n";
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let split = split(
        &[
            Piece {
                ns: 1,
                data: &first,
                cut: 4,
            },
            piece(2, b"def"),
            piece(3, req2),
        ],
        &[piece(4, ok), piece(5, ok)],
        LIMIT,
    );
    let mut big = ex(
        0,
        "",
        RawMessage {
            body_dropped: 7,
            ..msg(head, b"abc", 1, 2, &[(0, 1), (7, 2)])
        },
        Some(msg(ok, b"", 4, 4, &[])),
    );
    big.error = Some(
        "4 bytes of the request not captured (calls over the 16 KiB record bound): its body is kept up to them"
            .into(),
    );
    let next = ex(
        1,
        "",
        msg(req2, b"", 3, 3, &[]),
        Some(msg(ok, b"", 5, 5, &[])),
    );
    assert_eq!(split.exchanges, vec![big, next]);
    assert!(split.notes.is_empty());
}

#[test]
fn body_limit_counts_dropped_bytes_and_leftovers_are_noted() {
    let head = b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
    let req = [&head[..], b"hello"].concat();
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let split = split(
        &[piece(1, &req), piece(3, b"GET / HTTP/1.1\r\n\r\n")],
        &[piece(2, resp), piece(4, b"extra")],
        3,
    );
    let mut request = msg(head, b"hel", 1, 1, &[(0, 1)]);
    request.body_dropped = 2;
    assert_eq!(
        split.exchanges,
        vec![ex(0, "", request, Some(msg(resp, b"", 2, 2, &[])))]
    );
    assert_eq!(
        split.notes,
        vec![
            "18 bytes sent after exchange 1 not decoded".to_string(),
            "5 bytes received after the last response not decoded".to_string(),
        ]
    );
}

#[test]
fn head_request_response_has_no_body() {
    let req = b"HEAD /x HTTP/1.1\r\n\r\n";
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
    let split = split(
        &[piece(1, req), piece(3, req)],
        &[piece(2, resp), piece(4, resp)],
        LIMIT,
    );
    assert_eq!(split.exchanges.len(), 2);
    assert_eq!(split.exchanges[1].response, Some(msg(resp, b"", 4, 4, &[])));
    assert_eq!(split.exchanges[1].error, None);
}
