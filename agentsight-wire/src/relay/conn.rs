//! One agent connection: its exchanges one after the other (HTTP/1.1
//! keep-alive), each forwarded as it arrives and recorded in the
//! connection's slot until it is handed to the sink.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use super::framing::{
    self, BodyEnd, BodyKind, FramingError, RequestInfo, ResponseInfo, request_head_len,
    response_head_len,
};
use super::upstream::{self, UpStream};
use super::{ConnState, ENDED_MID_EXCHANGE, Shared, Sock, lock};
use crate::{RawExchange, RawMessage, Via, monotonic_ns};

/// Size of one read: one forwarded piece at most.
const READ_BUF: usize = 64 * 1024;
/// Most `reads` entries kept per message (16 bytes each).
const MAX_READS: usize = 256 * 1024;
/// How long the relay waits for an upstream's `100 Continue`.
const EXPECT_WAIT_MS: i32 = 1000;
/// The error of an exchange after a `101 Switching Protocols`.
const UPGRADED: &str = "upgraded to websocket: frames kept raw";

/// A stream and the bytes read from it that belong to what comes next.
struct Side<S> {
    s: S,
    pending: Vec<u8>,
}

impl<S> Side<S> {
    fn new(s: S) -> Side<S> {
        Side {
            s,
            pending: Vec::new(),
        }
    }
}

/// What happens after an exchange.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    KeepAlive,
    Close,
}

/// The message a body read belongs to.
#[derive(Clone, Copy)]
enum Dir {
    Request,
    Response,
}

/// Where an exchange's record lives (copied into closures).
#[derive(Clone, Copy)]
struct Rec<'a> {
    shared: &'a Shared,
    state: &'a ConnState,
    id: u64,
    client_port: u16,
}

impl Rec<'_> {
    fn begin(&self, seq: u32, now: u64) {
        *lock(&self.state.slot) = Some(RawExchange {
            via: Via::Relay,
            conn: self.id,
            seq,
            route: String::new(),
            upstream: String::new(),
            client_port: self.client_port,
            request: RawMessage {
                first_ns: now,
                last_ns: now,
                ..RawMessage::default()
            },
            response: None,
            error: None,
        });
    }

    fn with(&self, f: impl FnOnce(&mut RawExchange)) {
        if let Some(ex) = lock(&self.state.slot).as_mut() {
            f(ex);
        }
    }

    fn message(ex: &mut RawExchange, dir: Dir, now: u64) -> &mut RawMessage {
        match dir {
            Dir::Request => &mut ex.request,
            Dir::Response => ex.response.get_or_insert_with(|| RawMessage {
                first_ns: now,
                ..RawMessage::default()
            }),
        }
    }

    /// A head (or an interim one) of `dir`, complete.
    fn head(&self, dir: Dir, head: &[u8]) {
        let now = monotonic_ns();
        self.with(|ex| {
            let m = Self::message(ex, dir, now);
            m.head.extend_from_slice(head);
            m.last_ns = now;
        });
    }

    /// One forwarded read of a body.
    fn body(&self, dir: Dir, bytes: &[u8]) {
        let now = monotonic_ns();
        let limit = self.shared.body_limit;
        let counter = match dir {
            Dir::Request => &self.shared.bytes_up,
            Dir::Response => &self.shared.bytes_down,
        };
        counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.with(|ex| {
            let m = Self::message(ex, dir, now);
            let offset = m.body.len() as u64 + m.body_dropped;
            if m.reads.len() < MAX_READS {
                m.reads.push((offset, now));
            }
            let keep = limit.saturating_sub(m.body.len()).min(bytes.len());
            m.body.extend_from_slice(&bytes[..keep]);
            m.body_dropped += (bytes.len() - keep) as u64;
            m.last_ns = now;
        });
    }

    /// Hands the exchange to the sink (unless `stop` already did).
    fn finish(&self, error: Option<String>) {
        let ex = lock(&self.state.slot).take();
        if let Some(mut ex) = ex {
            if error.is_some() && self.shared.stopping.load(Ordering::SeqCst) {
                ex.error = Some(ENDED_MID_EXCHANGE.to_string());
            } else if error.is_some() {
                ex.error = error;
            }
            self.shared.deliver(ex);
        }
    }
}

/// Why a head could not be read.
enum HeadError {
    Eof,
    Io(io::Error),
    Framing(FramingError),
}

/// Reads one head; `Ok(None)` when the peer closed before sending a byte.
/// `on_first` gets the time its first byte was there.
fn read_head<S: Read>(
    side: &mut Side<S>,
    buf: &mut [u8],
    request: bool,
    on_first: &mut dyn FnMut(u64),
) -> Result<Option<Vec<u8>>, (HeadError, Vec<u8>)> {
    let mut started = !side.pending.is_empty();
    if started {
        on_first(monotonic_ns());
    }
    loop {
        if started {
            let len = if request {
                request_head_len(&side.pending)
            } else {
                response_head_len(&side.pending)
            };
            match len {
                Ok(Some(n)) => {
                    let rest = side.pending.split_off(n);
                    return Ok(Some(std::mem::replace(&mut side.pending, rest)));
                }
                Ok(None) => {}
                Err(e) => return Err((HeadError::Framing(e), std::mem::take(&mut side.pending))),
            }
        }
        let n = match side.s.read(buf) {
            Ok(0) if !started => return Ok(None),
            Ok(0) => return Err((HeadError::Eof, std::mem::take(&mut side.pending))),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err((HeadError::Io(e), std::mem::take(&mut side.pending))),
        };
        if !started {
            started = true;
            on_first(monotonic_ns());
        }
        side.pending.extend_from_slice(&buf[..n]);
    }
}

/// Why a body could not be forwarded whole.
enum PumpError {
    Eof,
    Read(io::Error),
    Write(io::Error),
    Framing(FramingError),
}

/// Forwards one body from `from` to `to`, each read at once (written and
/// flushed before the next read); `on_read` sees each forwarded piece.
fn pump<R: Read, W: Write>(
    from: &mut Side<R>,
    to: &mut W,
    buf: &mut [u8],
    end: &mut BodyEnd,
    on_read: &mut dyn FnMut(&[u8]),
) -> Result<(), PumpError> {
    let mut forward = |bytes: &[u8]| -> Result<(), PumpError> {
        to.write_all(bytes).map_err(PumpError::Write)?;
        to.flush().map_err(PumpError::Write)?;
        on_read(bytes);
        Ok(())
    };
    if !from.pending.is_empty() && !end.done() {
        let data = std::mem::take(&mut from.pending);
        let n = end.feed(&data).map_err(PumpError::Framing)?;
        from.pending = data[n..].to_vec();
        forward(&data[..n])?;
    }
    while !end.done() {
        let n = match from.s.read(buf) {
            Ok(0) if end.until_close() => return Ok(()),
            Ok(0) => return Err(PumpError::Eof),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(PumpError::Read(e)),
        };
        let used = end.feed(&buf[..n]).map_err(PumpError::Framing)?;
        from.pending.extend_from_slice(&buf[used..n]);
        forward(&buf[..used])?;
    }
    Ok(())
}

/// The final response head, or the 100 the relay waited for.
enum Heads {
    Continue,
    Final(ResponseInfo),
}

struct Conn<'a> {
    rec: Rec<'a>,
    client: Side<TcpStream>,
    /// The upstream connection and the index of its route in the routes.
    up: Option<(usize, Side<UpStream>)>,
    buf: Vec<u8>,
    /// Whether the agent got a byte of this exchange's response (else a
    /// failure is answered with 502).
    answered: bool,
}

/// Serves one agent connection until it closes.
pub(super) fn serve(shared: &Shared, id: u64, state: &ConnState, client: TcpStream) {
    let client_port = client.peer_addr().map_or(0, |a| a.port());
    // Each forwarded read is written at once: Nagle would hold small SSE pieces.
    let _ = client.set_nodelay(true);
    let mut c = Conn {
        rec: Rec {
            shared,
            state,
            id,
            client_port,
        },
        client: Side::new(client),
        up: None,
        buf: vec![0; READ_BUF],
        answered: false,
    };
    let mut seq = 0u32;
    while c.exchange(seq) == Next::KeepAlive {
        seq += 1;
    }
    state.register(shared, Sock::Upstream, None);
    tracing::debug!(
        conn = id,
        exchanges = seq + 1,
        "wire relay connection closed"
    );
}

impl Conn<'_> {
    fn exchange(&mut self, seq: u32) -> Next {
        let rec = self.rec;
        let head = match read_head(&mut self.client, &mut self.buf, true, &mut |t| {
            rec.begin(seq, t)
        }) {
            Ok(Some(head)) => head,
            Ok(None) => return Next::Close,
            Err((e, partial)) => return self.bad_request_head(e, &partial),
        };
        rec.head(Dir::Request, &head);
        let info = match framing::parse_request(&head) {
            Ok(info) => info,
            Err(e) => return self.refuse(400, "Bad Request", &format!("request: {e}")),
        };
        let Some((route, target)) = self.route_for(&head[info.target.clone()]) else {
            return self.refuse(404, "Not Found", "no relay route for this path");
        };
        let r = &rec.shared.routes[route];
        rec.with(|ex| {
            ex.route = r.name.clone();
            ex.upstream = r.upstream.url();
        });
        if let Err(cause) = self.connect(route) {
            return self.refuse(502, "Bad Gateway", &cause);
        }
        let fwd =
            framing::forwarded_head(&head, info.target.clone(), &target, &r.upstream.authority());
        self.answered = false;
        match self.forward(&info, &fwd) {
            Ok(next) => next,
            Err(cause) if !self.answered => {
                self.drop_upstream();
                self.refuse(502, "Bad Gateway", &cause)
            }
            Err(cause) => {
                self.drop_upstream();
                rec.finish(Some(cause));
                Next::Close
            }
        }
    }

    /// Sends the request, relays the response; `Err` is the exchange's error.
    fn forward(&mut self, info: &RequestInfo, fwd: &[u8]) -> Result<Next, String> {
        let rec = self.rec;
        let up = self.upstream()?;
        up.s.write_all(fwd)
            .and_then(|()| up.s.flush())
            .map_err(|e| format!("upstream write failed: {e}"))?;
        rec.shared
            .bytes_up
            .fetch_add(fwd.len() as u64, Ordering::Relaxed);
        let mut body_sent = false;
        let mut heads = Heads::Continue;
        if info.expect_continue && info.body != BodyKind::Empty && self.upstream_answers()? {
            heads = self.response_heads(true)?;
        }
        if matches!(heads, Heads::Continue) {
            self.request_body(info.body)?;
            body_sent = true;
            heads = self.response_heads(false)?;
        }
        let Heads::Final(resp) = heads else {
            return Err("upstream sent a second 100 Continue".into());
        };
        if resp.status == 101 {
            return Ok(self.tunnel());
        }
        let kind = resp.body(&info.method);
        self.response_body(kind)?;
        self.rec.finish(None);
        let reusable = !info.close && !resp.close && kind != BodyKind::Close;
        if reusable && (body_sent || info.body == BodyKind::Empty) {
            Ok(Next::KeepAlive)
        } else {
            // The agent's unsent body (after an early final answer) would be
            // read as the next request: the connection ends here.
            self.drop_upstream();
            Ok(Next::Close)
        }
    }

    fn upstream(&mut self) -> Result<&mut Side<UpStream>, String> {
        self.up
            .as_mut()
            .map(|(_, s)| s)
            .ok_or_else(|| "no upstream connection".to_string())
    }

    /// Whether the upstream starts answering an `Expect: 100-continue`
    /// request within a second; one that ignores the expectation gets the
    /// body then (as curl does), rather than both sides waiting forever.
    fn upstream_answers(&mut self) -> Result<bool, String> {
        let up = self.upstream()?;
        Ok(!up.pending.is_empty()
            || up.s.buffered()
            || upstream::readable(up.s.tcp(), EXPECT_WAIT_MS))
    }

    fn drop_upstream(&mut self) {
        self.up = None;
        self.rec
            .state
            .register(self.rec.shared, Sock::Upstream, None);
    }

    /// The route whose prefix starts `target`, and the target without it.
    fn route_for(&self, target: &[u8]) -> Option<(usize, Vec<u8>)> {
        self.rec
            .shared
            .routes
            .iter()
            .enumerate()
            .find_map(|(i, r)| {
                let rest = target.strip_prefix(r.prefix().as_bytes())?;
                match rest.first() {
                    Some(b'/') => Some((i, rest.to_vec())),
                    None | Some(b'?') => Some((i, [b"/", rest].concat())),
                    Some(_) => None,
                }
            })
    }

    /// Makes sure the upstream connection of `route` is open (a kept-alive
    /// one is reused unless the upstream closed it meanwhile).
    fn connect(&mut self, route: usize) -> Result<(), String> {
        if let Some((r, up)) = &self.up
            && *r == route
            && up.pending.is_empty()
            && !up.s.stale()
        {
            return Ok(());
        }
        self.drop_upstream();
        let shared = self.rec.shared;
        let up = upstream::connect(&shared.routes[route].upstream, shared.tls.as_ref())?;
        self.rec
            .state
            .register(shared, Sock::Upstream, Some(up.tcp()));
        self.up = Some((route, Side::new(up)));
        Ok(())
    }

    /// The relay's own answer (the exchange is recorded with `cause`, no
    /// response); the connection ends.
    fn refuse(&mut self, code: u16, reason: &str, cause: &str) -> Next {
        let body = format!("{cause}\n");
        let answer = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = self
            .client
            .s
            .write_all(answer.as_bytes())
            .and_then(|()| self.client.s.flush());
        self.rec.finish(Some(cause.to_string()));
        self.linger();
        self.drop_upstream();
        Next::Close
    }

    /// Closing with unread bytes from the agent would reset the connection
    /// and could destroy the answer before the agent reads it: the relay
    /// ends its side, then reads what is left for a moment.
    fn linger(&mut self) {
        if self.rec.shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let s = &mut self.client.s;
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(1)));
        let mut left = 1 << 20;
        while left > 0 {
            match s.read(&mut self.buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => left -= n.min(left),
            }
        }
    }

    fn bad_request_head(&mut self, e: HeadError, partial: &[u8]) -> Next {
        self.rec.with(|ex| ex.request.head = partial.to_vec());
        match e {
            HeadError::Framing(FramingError::TooBig) => self.refuse(
                431,
                "Request Header Fields Too Large",
                "request head over 64 KiB",
            ),
            HeadError::Framing(e) => self.refuse(400, "Bad Request", &format!("request: {e}")),
            HeadError::Eof => {
                self.rec
                    .finish(Some("client closed mid-request head".into()));
                Next::Close
            }
            HeadError::Io(e) => {
                self.rec
                    .finish(Some(format!("client read failed mid-request head: {e}")));
                Next::Close
            }
        }
    }

    fn request_body(&mut self, kind: BodyKind) -> Result<(), String> {
        let rec = self.rec;
        let Some((_, up)) = self.up.as_mut() else {
            return Err("no upstream connection".into());
        };
        let mut end = BodyEnd::new(kind);
        pump(
            &mut self.client,
            &mut up.s,
            &mut self.buf,
            &mut end,
            &mut |b| rec.body(Dir::Request, b),
        )
        .map_err(|e| match e {
            PumpError::Eof => "client closed mid-request body".to_string(),
            PumpError::Read(e) => format!("client read failed mid-request body: {e}"),
            PumpError::Write(e) => format!("upstream write failed mid-request body: {e}"),
            PumpError::Framing(e) => format!("request body: {e}"),
        })
    }

    /// Reads response heads, each forwarded at once; interim (1xx) heads are
    /// kept before the final one. With `until_continue`, a 100 ends the wait.
    fn response_heads(&mut self, until_continue: bool) -> Result<Heads, String> {
        let rec = self.rec;
        let Some((_, up)) = self.up.as_mut() else {
            return Err("no upstream connection".into());
        };
        loop {
            let head = match read_head(up, &mut self.buf, false, &mut |t| {
                rec.with(|ex| {
                    Rec::message(ex, Dir::Response, t);
                })
            }) {
                Ok(Some(h)) => h,
                Ok(None) => return Err("upstream closed before the response head ended".into()),
                Err((e, partial)) => {
                    // What came of the head is kept, though not forwarded.
                    rec.head(Dir::Response, &partial);
                    return Err(match e {
                        HeadError::Eof => "upstream closed before the response head ended".into(),
                        HeadError::Io(e) => format!("upstream read failed mid-response head: {e}"),
                        HeadError::Framing(e) => format!("response: {e}"),
                    });
                }
            };
            rec.head(Dir::Response, &head);
            let info = framing::parse_response(&head).map_err(|e| format!("response: {e}"))?;
            self.client
                .s
                .write_all(&head)
                .and_then(|()| self.client.s.flush())
                .map_err(|e| format!("client went away mid-response: {e}"))?;
            self.answered = true;
            rec.shared
                .bytes_down
                .fetch_add(head.len() as u64, Ordering::Relaxed);
            match info.status {
                100 if until_continue => return Ok(Heads::Continue),
                101 => return Ok(Heads::Final(info)),
                100..=199 => {
                    tracing::debug!(conn = rec.id, status = info.status, "interim response");
                }
                _ => return Ok(Heads::Final(info)),
            }
        }
    }

    fn response_body(&mut self, kind: BodyKind) -> Result<(), String> {
        let rec = self.rec;
        let Some((_, up)) = self.up.as_mut() else {
            return Err("no upstream connection".into());
        };
        let mut end = BodyEnd::new(kind);
        pump(up, &mut self.client.s, &mut self.buf, &mut end, &mut |b| {
            rec.body(Dir::Response, b)
        })
        .map_err(|e| match e {
            PumpError::Eof => "upstream closed mid-response body".to_string(),
            PumpError::Read(e) => format!("upstream read failed mid-response body: {e}"),
            PumpError::Write(e) => format!("client went away mid-response: {e}"),
            PumpError::Framing(e) => format!("response body: {e}"),
        })
    }

    /// After `101 Switching Protocols`: bytes both ways, raw, until either
    /// side closes; what passes is kept (bounded) as the two bodies.
    fn tunnel(&mut self) -> Next {
        let rec = self.rec;
        if let Some((_, up)) = self.up.as_mut() {
            let client = &mut self.client;
            for (from, dir) in [
                (&mut client.pending, Dir::Request),
                (&mut up.pending, Dir::Response),
            ] {
                let bytes = std::mem::take(from);
                let ok = match dir {
                    Dir::Request => up.s.write_all(&bytes).and_then(|()| up.s.flush()),
                    Dir::Response => client.s.write_all(&bytes).and_then(|()| client.s.flush()),
                };
                if ok.is_err() {
                    break;
                }
                if !bytes.is_empty() {
                    rec.body(dir, &bytes);
                }
            }
            tunnel_loop(&mut client.s, &mut up.s, &mut self.buf, rec);
        }
        rec.finish(Some(UPGRADED.into()));
        self.drop_upstream();
        Next::Close
    }
}

/// Copies whichever side is readable to the other until one closes or fails.
fn tunnel_loop(client: &mut TcpStream, up: &mut UpStream, buf: &mut [u8], rec: Rec<'_>) {
    loop {
        let buffered = up.buffered();
        let mut fds = [
            libc::pollfd {
                fd: client.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: up.tcp().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, if buffered { 0 } else { -1 }) };
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
        if fds[0].revents != 0 {
            match client.read(buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if up.write_all(&buf[..n]).and_then(|()| up.flush()).is_err() {
                        return;
                    }
                    rec.body(Dir::Request, &buf[..n]);
                }
            }
        }
        if buffered || fds[1].revents != 0 {
            match up.read(buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if client
                        .write_all(&buf[..n])
                        .and_then(|()| client.flush())
                        .is_err()
                    {
                        return;
                    }
                    rec.body(Dir::Response, &buf[..n]);
                }
            }
        }
    }
}
