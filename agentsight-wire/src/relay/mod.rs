//! The loopback relay `record --wire` points each agent at.
//!
//! The agent's base URL becomes `http://127.0.0.1:<port>/w<N>…` ([`Route`]);
//! the relay strips the prefix, rewrites `Host`, forwards every other byte to
//! the real upstream (TLS verified as any client would) and every byte of the
//! answer back at once, and hands each exchange, bounded, to a sink.
//!
//! One thread per agent connection with blocking I/O: agents open a handful of
//! connections, each carrying one exchange at a time, so threads are simpler
//! than an event loop and cost little.

mod conn;
pub(crate) mod framing;
mod upstream;

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::RawExchange;
use crate::routes::Route;

/// The error an exchange gets when the recording stops before it ends.
pub const ENDED_MID_EXCHANGE: &str = "recording ended mid-exchange";

/// What the relay forwards and how much of it it keeps.
#[derive(Clone)]
pub struct RelayConfig {
    pub routes: Vec<Route>,
    /// Most body bytes kept per message (the rest forwarded and counted): default 8 MiB.
    pub body_limit: usize,
    /// TLS client config for https upstreams; None = rustls with the system roots
    /// (rustls-native-certs; honours SSL_CERT_FILE / SSL_CERT_DIR).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl RelayConfig {
    /// A configuration with the default body limit and the system's roots.
    pub fn new(routes: Vec<Route>) -> RelayConfig {
        RelayConfig {
            routes,
            body_limit: DEFAULT_BODY_LIMIT,
            tls: None,
        }
    }
}

/// The default [`RelayConfig::body_limit`].
pub const DEFAULT_BODY_LIMIT: usize = 8 * 1024 * 1024;

/// Why the relay cannot start.
#[derive(Debug, Error)]
pub enum RelayError {
    #[error("cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    #[error("cannot start the relay thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("no usable TLS root certificate found on this system ({0})")]
    NoRoots(String),
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// What went through the relay, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Exchanges handed to the sink, and how many of them with an error.
    pub exchanges: u64,
    pub errors: u64,
    /// Bytes forwarded to upstreams (heads as forwarded, bodies) and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Agent connections accepted.
    pub connections: u64,
}

type Sink = Box<dyn Fn(RawExchange) + Send + Sync>;

/// State shared by the accept thread, the connection threads and `stop`.
pub(crate) struct Shared {
    pub(crate) routes: Vec<Route>,
    pub(crate) body_limit: usize,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    sink: Sink,
    pub(crate) stopping: AtomicBool,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    exchanges: AtomicU64,
    errors: AtomicU64,
    pub(crate) bytes_up: AtomicU64,
    pub(crate) bytes_down: AtomicU64,
    connections: AtomicU64,
}

/// Locks, ignoring poisoning: the data behind these locks stays consistent
/// between statements, and a panicking thread must not stop the recording.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Hands an exchange to the sink, counted.
    pub(crate) fn deliver(&self, ex: RawExchange) {
        self.exchanges.fetch_add(1, Ordering::Relaxed);
        if ex.error.is_some() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(
            conn = ex.conn,
            seq = ex.seq,
            route = %ex.route,
            status = ex.response.as_ref().and_then(|r| status_of(&r.head)),
            up = ex.request.body.len() as u64 + ex.request.body_dropped,
            down = ex.response.as_ref().map(|r| r.body.len() as u64 + r.body_dropped),
            error = ex.error.as_deref(),
            "wire exchange"
        );
        (self.sink)(ex);
    }

    fn stats(&self) -> RelayStats {
        RelayStats {
            exchanges: self.exchanges.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            bytes_up: self.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.bytes_down.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
        }
    }
}

/// The status code of the last head in `head` (for logs only).
fn status_of(head: &[u8]) -> Option<u16> {
    let last = head
        .windows(5)
        .rposition(|w| w == b"HTTP/")
        .map_or(head, |i| &head[i..]);
    let code = last.get(9..12)?;
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// One agent connection as `stop` sees it: its exchange in flight, its sockets.
#[derive(Default)]
pub(crate) struct ConnState {
    pub(crate) slot: Mutex<Option<RawExchange>>,
    /// The agent's socket and the current upstream's (clones of the thread's).
    sockets: Mutex<[Option<TcpStream>; 2]>,
}

/// Which socket of a connection.
#[derive(Clone, Copy)]
pub(crate) enum Sock {
    Client = 0,
    Upstream = 1,
}

impl ConnState {
    /// Keeps a handle on a socket so `stop` can wake a thread blocked on it
    /// (`None` forgets it, so a dropped upstream connection really closes).
    pub(crate) fn register(&self, shared: &Shared, which: Sock, sock: Option<&TcpStream>) {
        let clone = sock.and_then(|s| s.try_clone().ok());
        if let Some(s) = &clone
            && shared.stopping.load(Ordering::SeqCst)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        lock(&self.sockets)[which as usize] = clone;
    }

    fn shutdown(&self) {
        for s in lock(&self.sockets).iter_mut().filter_map(Option::take) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// The running relay.
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Relay {
    /// Binds 127.0.0.1:0, starts the accept thread; each finished (or failed) exchange goes to `sink`.
    pub fn start(
        config: RelayConfig,
        sink: Box<dyn Fn(RawExchange) + Send + Sync>,
    ) -> Result<Relay, RelayError> {
        let tls = match config.tls {
            Some(c) => Some(c),
            None if config.routes.iter().any(|r| r.upstream.tls) => Some(system_tls()?),
            None => None,
        };
        let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(RelayError::Bind)?;
        let addr = listener.local_addr().map_err(RelayError::Bind)?;
        let shared = Arc::new(Shared {
            routes: config.routes,
            body_limit: config.body_limit,
            tls,
            sink,
            stopping: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            exchanges: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
            connections: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("wire-relay".into())
            .spawn(move || accept_loop(listener, s))
            .map_err(RelayError::Thread)?;
        tracing::debug!(%addr, "wire relay listening");
        Ok(Relay {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets in-flight exchanges finish for up to `grace`, then hands every
    /// unfinished one to the sink with `error = Some("recording ended mid-exchange")` (never lost).
    pub fn stop(mut self, grace: Duration) -> RelayStats {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // The accept thread blocks in accept(2): one connection wakes it.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        let deadline = Instant::now() + grace;
        while self.in_flight() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let conns: Vec<Arc<ConnState>> = lock(&self.shared.conns).values().cloned().collect();
        for c in &conns {
            // Taken under the slot's lock: the connection's thread finds it
            // empty afterwards, so each exchange reaches the sink once.
            let ex = lock(&c.slot).take();
            if let Some(mut ex) = ex {
                ex.error = Some(ENDED_MID_EXCHANGE.to_string());
                self.shared.deliver(ex);
            }
            c.shutdown();
        }
        // Woken threads end on their own; wait a little so the counts are final.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !lock(&self.shared.conns).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stats = self.shared.stats();
        tracing::debug!(?stats, "wire relay stopped");
        stats
    }

    fn in_flight(&self) -> usize {
        lock(&self.shared.conns)
            .values()
            .filter(|c| lock(&c.slot).is_some())
            .count()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Dropped without `stop`: at least stop accepting.
        if self.accept.is_some() {
            self.shared.stopping.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(self.addr);
        }
    }
}

/// rustls with the system's roots.
fn system_tls() -> Result<Arc<rustls::ClientConfig>, RelayError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none in the usual places".to_string(), |e| e.to_string());
        return Err(RelayError::NoRoots(why));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut next_id = 1u64;
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let client = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "wire relay accept failed");
                // Out of descriptors, say: no busy loop while it lasts.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let id = next_id;
        next_id += 1;
        shared.connections.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState::default());
        state.register(&shared, Sock::Client, Some(&client));
        lock(&shared.conns).insert(id, Arc::clone(&state));
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(format!("wire-relay-{id}"))
            .spawn(move || {
                conn::serve(&s, id, &state, client);
                lock(&s.conns).remove(&id);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "wire relay: cannot start a connection thread");
            lock(&shared.conns).remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn status_of_last_head() {
        assert_eq!(
            super::status_of(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"),
            Some(200)
        );
        assert_eq!(super::status_of(b"garbage"), None);
    }
}
