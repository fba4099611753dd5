//! The relay's connection to an upstream: TCP, TLS (rustls, verified) on it
//! unless the upstream is a loopback plain-http one.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use crate::routes::Upstream;

/// How long a TCP connect (each resolved address) and the TLS handshake may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) enum UpStream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl UpStream {
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            UpStream::Plain(s) => s,
            UpStream::Tls(s) => &s.sock,
        }
    }

    /// Whether TLS holds decrypted bytes not read yet (poll(2) cannot see them).
    pub(crate) fn buffered(&mut self) -> bool {
        match self {
            UpStream::Plain(_) => false,
            UpStream::Tls(s) => s
                .conn
                .process_new_packets()
                .is_ok_and(|st| st.plaintext_bytes_to_read() > 0),
        }
    }

    /// Whether a kept-alive connection was closed (or sent something
    /// unasked) while idle: then it is not reused.
    pub(crate) fn stale(&self) -> bool {
        readable(self.tcp(), 0)
    }
}

impl Read for UpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            UpStream::Plain(s) => s.read(buf),
            // A TLS peer closing without close_notify ends a to-close body the
            // same way a TCP close does; a framed body that stops short is
            // still seen short by the caller.
            UpStream::Tls(s) => match s.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }
}

impl Write for UpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            UpStream::Plain(s) => s.write(buf),
            UpStream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            UpStream::Plain(s) => s.flush(),
            UpStream::Tls(s) => s.flush(),
        }
    }
}

/// Whether the socket has something to read (or hung up) within `timeout_ms`.
pub(crate) fn readable(sock: &TcpStream, timeout_ms: i32) -> bool {
    let mut fd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, timeout_ms) };
    n > 0 && fd.revents != 0
}

/// Connects to the upstream; the error is one line naming the cause.
pub(crate) fn connect(up: &Upstream, tls: Option<&Arc<ClientConfig>>) -> Result<UpStream, String> {
    let addrs = (up.host.as_str(), up.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", up.host))?;
    let mut last = None;
    let mut tcp = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let tcp = tcp.ok_or_else(|| match last {
        Some(e) => format!("cannot connect to {}: {e}", up.authority()),
        None => format!("cannot resolve {}: no address", up.host),
    })?;
    // Each forwarded read is written at once: Nagle would hold small SSE pieces.
    let _ = tcp.set_nodelay(true);
    if !up.tls {
        return Ok(UpStream::Plain(tcp));
    }
    let config = tls.ok_or_else(|| "no TLS configuration".to_string())?;
    let name = ServerName::try_from(up.host.clone())
        .map_err(|e| format!("TLS to {}: bad server name: {e}", up.host))?;
    let conn = ClientConnection::new(Arc::clone(config), name)
        .map_err(|e| format!("TLS to {}: {e}", up.authority()))?;
    let mut stream = StreamOwned::new(conn, tcp);
    handshake(&mut stream).map_err(|e| format!("TLS to {}: {e}", up.authority()))?;
    Ok(UpStream::Tls(Box::new(stream)))
}

/// Completes the handshake now, so a refused certificate is this
/// connection's error (not a failed write later), bounded by the connect timeout.
fn handshake(stream: &mut StreamOwned<ClientConnection, TcpStream>) -> io::Result<()> {
    stream.sock.set_read_timeout(Some(CONNECT_TIMEOUT))?;
    stream.sock.set_write_timeout(Some(CONNECT_TIMEOUT))?;
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    stream.sock.set_read_timeout(None)?;
    stream.sock.set_write_timeout(None)?;
    Ok(())
}
