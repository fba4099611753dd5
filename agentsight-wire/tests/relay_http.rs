//! The relay over plain loopback HTTP: forwarding, streaming, its own answers, stop.

mod relay_common;

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use agentsight_wire::relay::ENDED_MID_EXCHANGE;
use agentsight_wire::{RawMessage, Via};
use relay_common::*;

#[test]
fn keep_alive_exchanges_forwarded_byte_for_byte() {
    let (l, port) = listener();
    let resp1: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Up: 1\r\n\r\nok";
    let resp2: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nyes";
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let head1 = read_until(&mut s, b"\r\n\r\n");
        let body1 = read_n(&mut s, 5);
        s.write_all(resp1).unwrap();
        let head2 = read_until(&mut s, b"\r\n\r\n");
        s.write_all(resp2).unwrap();
        (head1, body1, head2)
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}/v1"), 1 << 20);
    let mut c = connect(relay.addr());
    let rp = relay.addr().port();
    let req1 = format!(
        "POST /w0/v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:{rp}\r\nAuthorization: Bearer test-not-a-key\r\nAccept-Encoding: gzip, br\r\nContent-Length: 5\r\n\r\nhello"
    );
    send(&mut c, req1.as_bytes());
    assert_eq!(read_n(&mut c, resp1.len()), resp1);
    let req2 = format!("GET /w0/v1/models HTTP/1.1\r\nHost: 127.0.0.1:{rp}\r\n\r\n");
    send(&mut c, req2.as_bytes());
    assert_eq!(read_n(&mut c, resp2.len()), resp2);

    let (head1, body1, head2) = upstream.join().unwrap();
    assert_eq!(
        String::from_utf8(head1).unwrap(),
        format!(
            "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer test-not-a-key\r\nAccept-Encoding: gzip, br\r\nContent-Length: 5\r\n\r\n"
        )
    );
    assert_eq!(body1, b"hello");
    assert_eq!(
        String::from_utf8(head2).unwrap(),
        format!("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
    );

    let ex = got.wait(2);
    let client_port = c.local_addr().unwrap().port();
    assert_eq!(
        ex.iter().map(|e| (e.conn, e.seq)).collect::<Vec<_>>(),
        [(1, 0), (1, 1)]
    );
    for e in &ex {
        assert_eq!(e.via, Via::Relay);
        assert_eq!(e.route, "TEST_BASE_URL_0");
        assert_eq!(e.upstream, format!("http://127.0.0.1:{port}/v1"));
        assert_eq!(e.client_port, client_port);
        assert_eq!(e.error, None);
    }
    assert_eq!(ex[0].request.head, &req1.as_bytes()[..req1.len() - 5]);
    assert_eq!(ex[0].request.body, b"hello");
    let r = ex[0].response.as_ref().unwrap();
    assert_eq!(
        (r.head.as_slice(), r.body.as_slice()),
        resp1.split_at(resp1.len() - 2)
    );
    assert_eq!(r.reads.len(), 1);
    assert!(r.first_ns <= r.last_ns && ex[0].request.last_ns <= r.first_ns);
    assert_eq!(ex[1].request.head, req2.as_bytes());
    assert_eq!(ex[1].request.body, b"");
    assert_eq!(ex[1].response.as_ref().unwrap().body, b"yes");

    let stats = relay.stop(Duration::from_secs(1));
    assert_eq!(
        (stats.exchanges, stats.errors, stats.connections),
        (2, 0, 1)
    );
    assert_eq!(stats.bytes_down, (resp1.len() + resp2.len()) as u64);
}

/// One SSE event framed as one chunk.
fn sse_chunk(k: usize) -> Vec<u8> {
    let data = format!("data: {{\"k\":{k}}}\n\n");
    let mut c = format!("{:x}\r\n{data}\r\n", data.len()).into_bytes();
    if k == 4 {
        c.extend_from_slice(b"0\r\n\r\n");
    }
    c
}

#[test]
fn chunked_request_and_sse_pieces_forwarded_unbuffered() {
    let (l, port) = listener();
    let (got_piece_tx, got_piece_rx) = mpsc::channel::<usize>();
    let head: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let req_head = read_until(&mut s, b"\r\n\r\n");
        let req_body = read_until(&mut s, b"Trailer: t\r\n\r\n");
        s.write_all(head).unwrap();
        for k in 0..5 {
            std::thread::sleep(Duration::from_millis(100));
            s.write_all(&sse_chunk(k)).unwrap();
            // The next piece only once the client holds this one: a relay that
            // buffered would never let the client see it.
            assert_eq!(got_piece_rx.recv_timeout(Duration::from_secs(10)), Ok(k));
        }
        (req_head, req_body)
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(
        &mut c,
        b"POST /w0/v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    send(&mut c, b"4;ext=1\r\nabcd\r\n");
    std::thread::sleep(Duration::from_millis(20));
    send(&mut c, b"3\r\nefg\r\n0\r\nTrailer: t\r\n\r\n");
    assert_eq!(read_n(&mut c, head.len()), head);
    for k in 0..5 {
        let piece = sse_chunk(k);
        assert_eq!(read_n(&mut c, piece.len()), piece);
        got_piece_tx.send(k).unwrap();
    }
    let (req_head, req_body) = upstream.join().unwrap();
    assert_eq!(
        req_head,
        format!("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n\r\n").as_bytes()
    );
    assert_eq!(
        req_body,
        b"4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nTrailer: t\r\n\r\n"
    );

    let ex = got.wait(1);
    assert_eq!(ex[0].error, None);
    assert_eq!(ex[0].request.body, req_body);
    let r: &RawMessage = ex[0].response.as_ref().unwrap();
    let all: Vec<u8> = (0..5).flat_map(sse_chunk).collect();
    assert_eq!(r.body, all);
    let mut offsets = vec![0u64];
    for k in 0..4 {
        offsets.push(offsets[k] + sse_chunk(k).len() as u64);
    }
    assert_eq!(r.reads.iter().map(|&(o, _)| o).collect::<Vec<_>>(), offsets);
    assert!(r.reads.windows(2).all(|w| w[0].1 < w[1].1));
    assert_eq!(r.last_ns, r.reads[4].1);
    drop(c);
    relay.stop(Duration::from_secs(1));
}

#[test]
fn unknown_prefix_answered_404_and_recorded() {
    let (relay, got) = relay("http://127.0.0.1:9", 1 << 20);
    let mut c = connect(relay.addr());
    let req: &[u8] = b"GET /w7/v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
    send(&mut c, req);
    let answer = String::from_utf8(read_to_end(&mut c)).unwrap();
    assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
    assert!(
        answer.ends_with("\r\n\r\nno relay route for this path\n"),
        "{answer}"
    );
    let ex = got.wait(1);
    assert_eq!(ex[0].error.as_deref(), Some("no relay route for this path"));
    assert_eq!(
        (ex[0].request.head.as_slice(), &ex[0].response),
        (req, &None)
    );
    assert_eq!(ex[0].route, "");
    relay.stop(Duration::from_secs(1));
}

#[test]
fn head_over_64k_answered_431() {
    let (relay, got) = relay("http://127.0.0.1:9", 1 << 20);
    let mut c = connect(relay.addr());
    let big = format!(
        "GET /w0/ HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(70 * 1024)
    );
    let _ = c.write_all(big.as_bytes());
    let answer = String::from_utf8(read_to_end(&mut c)).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{answer}"
    );
    let ex = got.wait(1);
    assert_eq!(ex[0].error.as_deref(), Some("request head over 64 KiB"));
    assert_eq!(ex[0].response, None);
    relay.stop(Duration::from_secs(1));
}

#[test]
fn refused_upstream_answered_502_and_recorded() {
    let (l, port) = listener();
    drop(l);
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(&mut c, b"GET /w0/v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    let answer = String::from_utf8(read_to_end(&mut c)).unwrap();
    let cause = format!("cannot connect to 127.0.0.1:{port}: Connection refused (os error 111)");
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(answer.ends_with(&format!("\r\n\r\n{cause}\n")), "{answer}");
    let ex = got.wait(1);
    assert_eq!(ex[0].error.as_deref(), Some(cause.as_str()));
    assert_eq!(ex[0].response, None);
    let stats = relay.stop(Duration::from_secs(1));
    assert_eq!((stats.exchanges, stats.errors), (1, 1));
}

#[test]
fn stop_records_a_stalled_stream() {
    let (l, port) = listener();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let first: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n";
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        s.write_all(first).unwrap();
        // Stalls until the test ends; then sees the relay close.
        let _ = release_rx.recv_timeout(Duration::from_secs(20));
        read_to_end(&mut s)
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(
        &mut c,
        b"POST /w0/v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(read_n(&mut c, first.len()), first);
    let stats = relay.stop(Duration::from_millis(200));
    assert_eq!((stats.exchanges, stats.errors), (1, 1));
    let ex = got.take();
    assert_eq!(ex.len(), 1);
    assert_eq!(ex[0].error.as_deref(), Some(ENDED_MID_EXCHANGE));
    assert_eq!(ex[0].response.as_ref().unwrap().body, b"5\r\nfirst\r\n");
    // The agent's side is closed.
    let mut rest = Vec::new();
    assert_eq!(c.read_to_end(&mut rest).map(|_| rest.len()).unwrap_or(0), 0);
    release_tx.send(()).unwrap();
    assert_eq!(upstream.join().unwrap(), b"");
    assert!(got.take().is_empty(), "delivered once");
}

#[test]
fn bodies_over_the_limit_cut_and_counted() {
    let (l, port) = listener();
    let down: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let up: Vec<u8> = (0..3000u32).map(|i| (i % 241) as u8).collect();
    let (down2, up_len) = (down.clone(), up.len());
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        let body = read_n(&mut s, up_len);
        s.write_all(
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", down2.len()).as_bytes(),
        )
        .unwrap();
        for part in down2.chunks(700) {
            s.write_all(part).unwrap();
        }
        body
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1000);
    let mut c = connect(relay.addr());
    let head = format!(
        "PUT /w0/x HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        up.len()
    );
    send(&mut c, head.as_bytes());
    send(&mut c, &up);
    let resp_head = read_until(&mut c, b"\r\n\r\n");
    assert_eq!(
        resp_head,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n"
    );
    assert_eq!(read_n(&mut c, down.len()), down);
    assert_eq!(upstream.join().unwrap(), up);
    let ex = got.wait(1);
    let (req, resp) = (&ex[0].request, ex[0].response.as_ref().unwrap());
    assert_eq!((req.body.as_slice(), req.body_dropped), (&up[..1000], 2000));
    assert_eq!(
        (resp.body.as_slice(), resp.body_dropped),
        (&down[..1000], 4000)
    );
    assert_eq!(resp.reads.first().map(|r| r.0), Some(0));
    relay.stop(Duration::from_secs(1));
}

#[test]
fn stop_does_not_wait_for_idle_keep_alive_connections() {
    let (l, port) = listener();
    let answer: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        s.write_all(answer).unwrap();
        read_to_end(&mut s)
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(&mut c, b"GET /w0/ping HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(read_n(&mut c, answer.len()), answer);
    got.wait(1);
    // Both connections stay open and idle: nothing is in flight.
    let started = std::time::Instant::now();
    let stats = relay.stop(Duration::from_secs(30));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        (stats.exchanges, stats.errors, stats.connections),
        (1, 0, 1)
    );
    assert!(got.take().is_empty());
    assert_eq!(
        upstream.join().unwrap(),
        b"",
        "the upstream saw the relay close"
    );
    assert_eq!(read_to_end(&mut c), b"");
}
