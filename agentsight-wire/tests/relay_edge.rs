//! The relay's edges: 100-continue, an upgrade, a side leaving early, garbage.

mod relay_common;

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

use relay_common::*;

#[test]
fn expect_continue_passes_through() {
    let (l, port) = listener();
    let cont: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let fin: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        s.write_all(cont).unwrap();
        let body = read_n(&mut s, 3);
        s.write_all(fin).unwrap();
        body
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(
        &mut c,
        b"POST /w0/up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    );
    // The body is sent only once the 100 came through.
    assert_eq!(read_n(&mut c, cont.len()), cont);
    send(&mut c, b"abc");
    assert_eq!(read_n(&mut c, fin.len()), fin);
    assert_eq!(upstream.join().unwrap(), b"abc");
    let ex = got.wait(1);
    let r = ex[0].response.as_ref().unwrap();
    assert_eq!(r.head, [cont, &fin[..fin.len() - 2]].concat());
    assert_eq!(
        (r.body.as_slice(), ex[0].request.body.as_slice()),
        (&b"ok"[..], &b"abc"[..])
    );
    assert_eq!(ex[0].error, None);
    relay.stop(Duration::from_secs(1));
}

#[test]
fn upgrade_tunnelled_and_kept_raw() {
    let (l, port) = listener();
    let switch: &[u8] =
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        s.write_all(&[switch, b"srv1"].concat()).unwrap();
        read_n(&mut s, 4)
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(
        &mut c,
        b"GET /w0/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    );
    assert_eq!(read_n(&mut c, switch.len() + 4), [switch, b"srv1"].concat());
    send(&mut c, b"cli1");
    assert_eq!(upstream.join().unwrap(), b"cli1");
    assert_eq!(read_to_end(&mut c), b"");
    let ex = got.wait(1);
    assert_eq!(
        ex[0].error.as_deref(),
        Some("upgraded to websocket: frames kept raw")
    );
    assert_eq!(ex[0].request.body, b"cli1");
    let r = ex[0].response.as_ref().unwrap();
    assert_eq!(
        (r.head.as_slice(), r.body.as_slice()),
        (switch, &b"srv1"[..])
    );
    relay.stop(Duration::from_secs(1));
}

#[test]
fn upstream_closing_mid_body_recorded() {
    let (l, port) = listener();
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd")
            .unwrap();
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(&mut c, b"GET /w0/ HTTP/1.1\r\nHost: x\r\n\r\n");
    upstream.join().unwrap();
    assert_eq!(
        read_to_end(&mut c),
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd"
    );
    let ex = got.wait(1);
    assert_eq!(
        ex[0].error.as_deref(),
        Some("upstream closed mid-response body")
    );
    assert_eq!(ex[0].response.as_ref().unwrap().body, b"abcd");
    relay.stop(Duration::from_secs(1));
}

#[test]
fn client_leaving_mid_stream_recorded() {
    let (l, port) = listener();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n")
            .unwrap();
        go_rx.recv().unwrap();
        // Keeps streaming until the relay closes this side.
        for _ in 0..500 {
            if s.write_all(b"2\r\nhi\r\n").is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(&mut c, b"GET /w0/ HTTP/1.1\r\nHost: x\r\n\r\n");
    read_until(&mut c, b"hi\r\n");
    drop(c);
    go_tx.send(()).unwrap();
    assert!(upstream.join().unwrap(), "the relay closed the upstream");
    let ex = got.wait(1);
    let error = ex[0].error.clone().unwrap();
    assert!(
        error.starts_with("client went away mid-response: "),
        "{error}"
    );
    relay.stop(Duration::from_secs(1));
}

#[test]
fn garbage_never_kills_the_relay() {
    let (relay, got) = relay("http://127.0.0.1:9", 1 << 20);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for round in 0..40 {
        let mut bytes = Vec::new();
        if round % 2 == 0 {
            bytes.extend_from_slice(b"POST /w0/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n");
        }
        for _ in 0..(64 + round * 37) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push(x as u8);
        }
        let mut c = connect(relay.addr());
        let _ = c.write_all(&bytes);
        let _ = c.shutdown(std::net::Shutdown::Write);
        read_to_end(&mut c);
    }
    let mut c = connect(relay.addr());
    send(&mut c, b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n");
    let answer = read_to_end(&mut c);
    assert!(answer.starts_with(b"HTTP/1.1 404 Not Found\r\n"));
    let stats = relay.stop(Duration::from_secs(1));
    assert_eq!(stats.connections, 41);
    assert_eq!(stats.exchanges, got.take().len() as u64);
}

#[test]
fn upstream_closing_before_answering_gets_502() {
    let (l, port) = listener();
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        s.write_all(b"HTTP/1.1 200").unwrap();
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(&mut c, b"GET /w0/ HTTP/1.1\r\nHost: x\r\n\r\n");
    upstream.join().unwrap();
    let answer = String::from_utf8(read_to_end(&mut c)).unwrap();
    let cause = "upstream closed before the response head ended";
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(answer.ends_with(&format!("\r\n\r\n{cause}\n")), "{answer}");
    let ex = got.wait(1);
    assert_eq!(ex[0].error.as_deref(), Some(cause));
    assert_eq!(ex[0].response.as_ref().unwrap().head, b"HTTP/1.1 200");
    relay.stop(Duration::from_secs(1));
}

#[test]
fn expect_continue_ignored_by_the_upstream_still_sends_the_body() {
    let (l, port) = listener();
    let fin: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_until(&mut s, b"\r\n\r\n");
        let body = read_n(&mut s, 3);
        s.write_all(fin).unwrap();
        body
    });
    let (relay, got) = relay(&format!("http://127.0.0.1:{port}"), 1 << 20);
    let mut c = connect(relay.addr());
    send(
        &mut c,
        b"POST /w0/up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert_eq!(read_n(&mut c, fin.len()), fin);
    assert_eq!(upstream.join().unwrap(), b"abc");
    let ex = got.wait(1);
    assert_eq!(ex[0].error, None);
    assert_eq!(ex[0].request.body, b"abc");
    relay.stop(Duration::from_secs(1));
}
