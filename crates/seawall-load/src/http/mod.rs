//! The HTTP/1.1 transport: keep-alive connections to one loopback address, shared by the
//! driver's workers through a pool, and a small client of its own.
//!
//! HTTP/1.1 carries one request at a time per connection. A request takes the connection that
//! came free most recently (as hyper's pool does), or opens one when none is idle, and puts it
//! back once its answer is read to the end. So there are never more connections than requests
//! in flight at once (`max_in_flight` at most), and a low rate keeps a few warm connections busy
//! instead of opening one per request: the driver's workers take arrivals in turn, and a
//! connection of each worker's own would carry a request only every `max_in_flight / rate`
//! seconds. A connection whose request was abandoned at its deadline is closed (its response
//! may still be on the way), and so is one that broke, sent something it should not have, or
//! said it would close; a fresh one replaces it on demand, its connect time charged to that
//! request.
//!
//! # Why not hyper's client
//!
//! A load generator sends the same request over and over, and what it spends on each one is
//! capacity it does not have for the load. hyper's client is general: a `Request` and a
//! `HeaderMap` built per request, a dispatch channel and a oneshot between the caller and the
//! connection, a state machine for every case HTTP/1.1 allows. Here the request never changes
//! but for its `Request-Timeout-Ms`, so its head is serialized once and each send is a single
//! `write` of that head, the header's value and the body (wrk does the same); the answer is
//! read into the connection's buffer and parsed in place with `httparse`, strictly
//! ([`parse`]): a malformed or ambiguous response counts as [`Outcome::Other`] and closes its
//! connection, never a panic. What is measured in `BENCHMARKS.md` ("`seawall load` vs wrk")
//! is why this is worth its lines.

pub mod parse;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::Method;
use seawall_tower::wire::REQUEST_TIMEOUT_MS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use self::parse::{BodyReader, Malformed, parse_head};
use super::drive::Transport;
use super::spec::LoadSpec;
use super::stats::Outcome;

/// Counts a connection as open for as long as it lives.
#[derive(Debug)]
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One keep-alive connection.
#[derive(Debug)]
pub struct Conn {
    tcp: TcpStream,
    /// Received, not yet parsed.
    buf: BytesMut,
    /// The request being written.
    out: Vec<u8>,
    _open: Open,
}

impl Conn {
    /// Whether an idle connection can carry the next request: nothing may have arrived on it.
    /// End of stream (the server closed it) or stray bytes mean it cannot. tokio tracks the
    /// socket's readiness, so while nothing has arrived this costs no system call.
    fn still_idle(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.tcp.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// Reads more of the response into the buffer: `Ok(false)` at the end of the stream.
    async fn fill(&mut self) -> Result<bool, Malformed> {
        if self.buf.capacity() - self.buf.len() < 1024 {
            self.buf.reserve(4096);
        }
        match self.tcp.read_buf(&mut self.buf).await {
            Ok(n) => Ok(n > 0),
            Err(_) => Err(Malformed),
        }
    }
}

/// Writes `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// What a run did with its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Connections {
    /// Most open at once.
    pub peak: usize,
    /// Opened in all (attempts, successful or not).
    pub opened: usize,
}

/// Sends the spec's request over pooled HTTP/1.1 keep-alive connections.
#[derive(Debug)]
pub struct HttpTransport {
    addr: SocketAddr,
    /// Request line and headers, up to the value of `Request-Timeout-Ms`.
    head: Vec<u8>,
    body: Bytes,
    head_request: bool,
    open: Arc<AtomicUsize>,
    peak: AtomicUsize,
    opened: AtomicUsize,
    /// Connections with nothing in flight, the one that came free last on top.
    idle: Mutex<Vec<Conn>>,
}

impl HttpTransport {
    /// A transport for `spec`'s target and request.
    pub fn new(spec: &LoadSpec) -> Self {
        let path = spec.target.path.path_and_query().map_or("/", |p| p.as_str());
        let mut head = format!("{} {path} HTTP/1.1\r\n", spec.method).into_bytes();
        for (k, v) in &spec.headers {
            head.extend_from_slice(k.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(v.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        // A body is announced by its length (the spec refuses a user's Content-Length and
        // Transfer-Encoding); methods that usually carry one announce an empty one too.
        let bodyless = [Method::GET, Method::HEAD, Method::DELETE, Method::OPTIONS, Method::TRACE];
        if !spec.body.is_empty() || !bodyless.contains(&spec.method) {
            head.extend_from_slice(b"content-length: ");
            push_decimal(&mut head, spec.body.len() as u64);
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(REQUEST_TIMEOUT_MS.as_str().as_bytes());
        head.extend_from_slice(b": ");
        Self {
            addr: spec.target.addr,
            head,
            body: spec.body.clone(),
            head_request: spec.method == Method::HEAD,
            open: Arc::new(AtomicUsize::new(0)),
            peak: AtomicUsize::new(0),
            opened: AtomicUsize::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Most connections open at once so far, and how many were opened in all.
    pub fn connections(&self) -> Connections {
        Connections {
            peak: self.peak.load(Ordering::Relaxed),
            opened: self.opened.load(Ordering::Relaxed),
        }
    }

    async fn connect(&self) -> Option<Conn> {
        let n = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let open = Open(self.open.clone());
        self.peak.fetch_max(n, Ordering::Relaxed);
        self.opened.fetch_add(1, Ordering::Relaxed);
        let tcp = TcpStream::connect(self.addr).await.ok()?;
        tcp.set_nodelay(true).ok()?;
        Some(Conn {
            tcp,
            buf: BytesMut::with_capacity(4096),
            out: Vec::with_capacity(self.head.len() + 16 + self.body.len()),
            _open: open,
        })
    }

    /// One request and its response on `c`: the final status, and whether `c` can carry the
    /// next request.
    async fn exchange(&self, c: &mut Conn, remaining: Duration) -> Result<(u16, bool), Malformed> {
        let ms = remaining.as_millis().clamp(1, u128::from(u32::MAX)) as u64;
        c.out.clear();
        c.out.extend_from_slice(&self.head);
        push_decimal(&mut c.out, ms);
        c.out.extend_from_slice(b"\r\n\r\n");
        c.out.extend_from_slice(&self.body);
        c.tcp.write_all(&c.out).await.map_err(|_| Malformed)?;
        let head = loop {
            // Nothing to parse before the first read (the buffer is empty after each answer).
            let parsed =
                if c.buf.is_empty() { None } else { parse_head(&c.buf, self.head_request)? };
            match parsed {
                // An interim response (100 Continue, 103 Early Hints): the final one follows.
                Some(h) if h.status < 200 => c.buf.advance(h.len),
                Some(h) => {
                    c.buf.advance(h.len);
                    break h;
                }
                None => {
                    if !c.fill().await? {
                        return Err(Malformed);
                    }
                }
            }
        };
        let mut body = BodyReader::new(head.framing);
        while !body.feed(&mut c.buf)? {
            if !c.fill().await? {
                body.eof()?;
                return Ok((head.status, false));
            }
        }
        // Bytes after the response were not asked for: the connection is out of step.
        Ok((head.status, head.keep_alive && c.buf.is_empty()))
    }

    /// The most recently freed idle connection that can still carry a request (the others on
    /// the way are closed).
    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(c) = idle.pop() {
            if c.still_idle() {
                return Some(c);
            }
        }
        None
    }

    /// The connection is taken out of the pool for the request and put back only once its
    /// answer has been read to the end: a request abandoned at its deadline drops (closes) it.
    async fn send(&self, remaining: Duration) -> Outcome {
        let mut c = match self.take_idle() {
            Some(c) => c,
            None => match self.connect().await {
                Some(c) => c,
                None => return Outcome::Connect,
            },
        };
        match self.exchange(&mut c, remaining).await {
            Ok((status, reuse)) => {
                if reuse {
                    self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(c);
                }
                Outcome::Status(status)
            }
            Err(Malformed) => Outcome::Other,
        }
    }
}

impl Transport for HttpTransport {
    fn call(&self, remaining: Duration) -> impl Future<Output = Outcome> + Send {
        self.send(remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_in_full() {
        for n in [0, 7, 10, 999, 1000, u64::from(u32::MAX), u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }
}
