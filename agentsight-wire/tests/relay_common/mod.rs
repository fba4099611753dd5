//! Helpers of the relay tests: loopback upstreams and a collecting sink.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentsight_wire::RawExchange;
use agentsight_wire::relay::{Relay, RelayConfig};
use agentsight_wire::routes::{Route, Upstream};

/// The exchanges the sink got, in order.
#[derive(Clone, Default)]
pub struct Collected(pub Arc<Mutex<Vec<RawExchange>>>);

impl Collected {
    pub fn sink(&self) -> Box<dyn Fn(RawExchange) + Send + Sync> {
        let v = Arc::clone(&self.0);
        Box::new(move |ex| v.lock().unwrap().push(ex))
    }

    pub fn take(&self) -> Vec<RawExchange> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Waits until `n` exchanges arrived (the sink runs on connection threads).
    pub fn wait(&self, n: usize) -> Vec<RawExchange> {
        for _ in 0..500 {
            if self.0.lock().unwrap().len() >= n {
                return self.take();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "{n} exchanges expected, got {}",
            self.0.lock().unwrap().len()
        );
    }
}

pub fn route(index: usize, url: &str) -> Route {
    Route {
        name: format!("TEST_BASE_URL_{index}"),
        upstream: Upstream::parse(url).unwrap(),
        index,
    }
}

/// A relay with one route to `url`.
pub fn relay(url: &str, body_limit: usize) -> (Relay, Collected) {
    let got = Collected::default();
    let mut config = RelayConfig::new(vec![route(0, url)]);
    config.body_limit = body_limit;
    let relay = Relay::start(config, got.sink()).unwrap();
    (relay, got)
}

/// A listener on loopback and its port.
pub fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// Reads from `s` until `buf` ends with `end` (or the peer closes).
pub fn read_until(s: &mut impl Read, end: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(end) {
        match s.read(&mut byte) {
            Ok(0) | Err(_) => break,
            Ok(_) => buf.push(byte[0]),
        }
    }
    buf
}

/// Reads exactly `n` bytes.
pub fn read_n(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).unwrap();
    buf
}

pub fn read_to_end(s: &mut impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

pub fn send(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).unwrap();
    s.flush().unwrap();
}
