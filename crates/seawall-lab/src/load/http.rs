//! The HTTP/1.1 transport: a pool of keep-alive connections to one loopback address, and a
//! client of its own.
//!
//! HTTP/1.1 carries one request at a time per connection, so the pool opens a connection when
//! a request finds none idle and keeps it for the next. The number of connections is bounded
//! by construction: each one is either idle or carrying one of the driver's in-flight requests,
//! so there are never more than `max_in_flight` of them. A connection whose request was
//! abandoned at its deadline is closed (its response may still be on the way) and so is one
//! that broke; a fresh one replaces it on demand, its connect time charged to that request.
//!
//! The request never changes but for its `Request-Timeout-Ms`, so its head is serialized once
//! and each send is one write of that head, the header's value and the body (wrk does the
//! same); the response is read into the connection's buffer and parsed in place with
//! `httparse`, strictly ([`parse_head`], [`BodyReader`]): a malformed or ambiguous response
//! (conflicting `Content-Length`s, a bad chunk size, a head over [`MAX_HEAD`] bytes) counts as
//! [`Outcome::Other`] and closes its connection. No task, channel or header map per request.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use http::Method;
use seawall_tower::wire::REQUEST_TIMEOUT_MS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::drive::Transport;
use super::spec::LoadSpec;
use super::stats::Outcome;

/// Longest response head accepted (status line and headers; also a chunk-size line or the
/// trailers), bytes.
pub const MAX_HEAD: usize = 64 * 1024;
/// Most response headers accepted.
pub const MAX_RESPONSE_HEADERS: usize = 100;

/// A response the client will not accept (the connection is closed after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// How a response's body ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (a `HEAD` request, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// A parsed response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// Bytes the head took, up to and including its blank line.
    pub len: usize,
    /// How the body ends.
    pub framing: Framing,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
}

fn has_token(v: &[u8], token: &str) -> bool {
    v.split(|b| *b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// A `Content-Length` value: one or more comma-separated copies of the same decimal number.
fn content_length(v: &[u8]) -> Result<u64, Malformed> {
    let mut out = None;
    for part in v.split(|b| *b == b',') {
        let part = part.trim_ascii();
        if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
            return Err(Malformed);
        }
        let n = part.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        if out.is_some_and(|o| o != n) {
            return Err(Malformed);
        }
        out = Some(n);
    }
    out.ok_or(Malformed)
}

/// Parses the response head at the start of `buf`: `Ok(None)` while it is incomplete (and
/// under [`MAX_HEAD`] bytes). `head_request`: the request was `HEAD` (no body follows).
pub fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, Malformed> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Ok(None),
        _ => return Err(Malformed),
    };
    let status = resp.code.ok_or(Malformed)?;
    let mut keep_alive = resp.version == Some(1);
    let (mut length, mut chunked, mut encoded) = (None, false, false);
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = content_length(h.value)?;
            if length.is_some_and(|l| l != n) {
                return Err(Malformed);
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            encoded = true;
            // Only the last coding decides (RFC 9112 §6.3 item 4).
            chunked = h
                .value
                .rsplit(|b| *b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                keep_alive = false;
            } else if has_token(h.value, "keep-alive") && resp.version == Some(0) {
                keep_alive = true;
            }
        }
    }
    let framing = if head_request || status == 204 || status == 304 || (100..200).contains(&status)
    {
        Framing::Empty
    } else if encoded {
        // Transfer-Encoding overrides Content-Length, and the connection is not reused after
        // such a message (RFC 9112 §6.3 item 3).
        if length.is_some() {
            keep_alive = false;
        }
        if chunked { Framing::Chunked } else { Framing::Close }
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::Close
    };
    if framing == Framing::Close {
        keep_alive = false;
    }
    Ok(Some(Head { status, len, framing, keep_alive }))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size,
    Data(u64),
    DataEnd,
    Trailers(usize),
}

/// Consumes a response body from a buffer as it arrives (the bytes are discarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyReader {
    framing: Framing,
    left: u64,
    chunk: Chunk,
}

impl BodyReader {
    /// A reader for a body framed as `framing`.
    pub fn new(framing: Framing) -> Self {
        let left = if let Framing::Length(n) = framing { n } else { 0 };
        Self { framing, left, chunk: Chunk::Size }
    }

    /// Consumes what `buf` holds of the body: `Ok(true)` once the body has ended (what follows
    /// stays in `buf`).
    pub fn feed(&mut self, buf: &mut BytesMut) -> Result<bool, Malformed> {
        match self.framing {
            Framing::Empty => Ok(true),
            Framing::Close => {
                buf.clear();
                Ok(false)
            }
            Framing::Length(_) => {
                let n = self.left.min(buf.len() as u64);
                buf.advance(n as usize);
                self.left -= n;
                Ok(self.left == 0)
            }
            Framing::Chunked => self.chunked(buf),
        }
    }

    /// The server closed the connection: `Ok` if that ends the body.
    pub fn eof(&self) -> Result<(), Malformed> {
        if self.framing == Framing::Close { Ok(()) } else { Err(Malformed) }
    }

    fn chunked(&mut self, buf: &mut BytesMut) -> Result<bool, Malformed> {
        loop {
            match self.chunk {
                Chunk::Size => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        buf.advance(n);
                        self.chunk = if size == 0 { Chunk::Trailers(0) } else { Chunk::Data(size) };
                    }
                    Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Ok(false),
                    _ => return Err(Malformed),
                },
                Chunk::Data(left) => {
                    let n = left.min(buf.len() as u64);
                    buf.advance(n as usize);
                    if n < left {
                        self.chunk = Chunk::Data(left - n);
                        return Ok(false);
                    }
                    self.chunk = Chunk::DataEnd;
                }
                Chunk::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(false);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(Malformed);
                    }
                    buf.advance(2);
                    self.chunk = Chunk::Size;
                }
                Chunk::Trailers(seen) => {
                    let Some(i) = buf.windows(2).position(|w| w == b"\r\n") else {
                        return if seen + buf.len() <= MAX_HEAD {
                            Ok(false)
                        } else {
                            Err(Malformed)
                        };
                    };
                    buf.advance(i + 2);
                    if i == 0 {
                        return Ok(true);
                    }
                    if seen + i + 2 > MAX_HEAD {
                        return Err(Malformed);
                    }
                    self.chunk = Chunk::Trailers(seen + i + 2);
                }
            }
        }
    }
}

/// Counts a connection as open for as long as it lives.
#[derive(Debug)]
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug)]
struct Conn {
    tcp: TcpStream,
    /// Received, not yet parsed.
    buf: BytesMut,
    /// The request being written.
    out: Vec<u8>,
    _open: Open,
}

/// Sends the spec's request over pooled HTTP/1.1 connections.
#[derive(Debug)]
pub struct HttpTransport {
    addr: SocketAddr,
    /// Request line and headers, up to the value of `Request-Timeout-Ms`.
    head: Vec<u8>,
    body: bytes::Bytes,
    head_request: bool,
    idle: Mutex<Vec<Conn>>,
    open: Arc<AtomicUsize>,
    peak: AtomicUsize,
}

impl HttpTransport {
    /// A pool for `spec`'s target and request.
    pub fn new(spec: &LoadSpec) -> Self {
        let path = spec.target.path.path_and_query().map_or("/", |p| p.as_str());
        let mut head = format!("{} {path} HTTP/1.1\r\n", spec.method).into_bytes();
        for (k, v) in &spec.headers {
            head.extend_from_slice(k.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(v.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        let bodyless = [Method::GET, Method::HEAD, Method::DELETE, Method::OPTIONS, Method::TRACE];
        if !spec.body.is_empty() || !bodyless.contains(&spec.method) {
            head.extend_from_slice(format!("content-length: {}\r\n", spec.body.len()).as_bytes());
        }
        head.extend_from_slice(REQUEST_TIMEOUT_MS.as_str().as_bytes());
        head.extend_from_slice(b": ");
        Self {
            addr: spec.target.addr,
            head,
            body: spec.body.clone(),
            head_request: spec.method == Method::HEAD,
            idle: Mutex::new(Vec::new()),
            open: Arc::new(AtomicUsize::new(0)),
            peak: AtomicUsize::new(0),
        }
    }

    /// Most connections open at once so far.
    pub fn peak_connections(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(c) = idle.pop() {
            // Nothing may arrive on an idle connection: EOF (the server closed it) or stray
            // bytes mean it cannot carry the next request.
            let mut probe = [0u8; 1];
            if matches!(c.tcp.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            {
                return Some(c);
            }
        }
        None
    }

    async fn connect(&self) -> Option<Conn> {
        let n = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let open = Open(self.open.clone());
        self.peak.fetch_max(n, Ordering::Relaxed);
        let tcp = TcpStream::connect(self.addr).await.ok()?;
        tcp.set_nodelay(true).ok()?;
        Some(Conn {
            tcp,
            buf: BytesMut::with_capacity(4096),
            out: Vec::with_capacity(self.head.len() + 32 + self.body.len()),
            _open: open,
        })
    }

    /// Reads more of the response into `c.buf`: `Ok(false)` at EOF.
    async fn fill(c: &mut Conn) -> Result<bool, Malformed> {
        if c.buf.capacity() - c.buf.len() < 1024 {
            c.buf.reserve(4096);
        }
        match c.tcp.read_buf(&mut c.buf).await {
            Ok(n) => Ok(n > 0),
            Err(_) => Err(Malformed),
        }
    }

    /// One request and its response on `c`: the status, and whether `c` can be reused.
    async fn exchange(&self, c: &mut Conn, remaining: Duration) -> Result<(u16, bool), Malformed> {
        let ms = remaining.as_millis().clamp(1, u128::from(u32::MAX)) as u64;
        c.out.clear();
        c.out.extend_from_slice(&self.head);
        let _ = write!(c.out, "{ms}\r\n\r\n");
        c.out.extend_from_slice(&self.body);
        c.tcp.write_all(&c.out).await.map_err(|_| Malformed)?;
        let head = loop {
            match parse_head(&c.buf, self.head_request)? {
                // An interim response (100 Continue, 103 Early Hints): the final one follows.
                Some(h) if (100..200).contains(&h.status) && h.status != 101 => {
                    c.buf.advance(h.len);
                }
                Some(h) if h.status == 101 => return Err(Malformed),
                Some(h) => {
                    c.buf.advance(h.len);
                    break h;
                }
                None => {
                    if !Self::fill(c).await? {
                        return Err(Malformed);
                    }
                }
            }
        };
        let mut body = BodyReader::new(head.framing);
        while !body.feed(&mut c.buf)? {
            if !Self::fill(c).await? {
                body.eof()?;
                return Ok((head.status, false));
            }
        }
        // Bytes after the response were not asked for: the connection is out of step.
        Ok((head.status, head.keep_alive && c.buf.is_empty()))
    }

    async fn send(&self, remaining: Duration) -> Outcome {
        let mut conn = match self.take_idle() {
            Some(c) => c,
            None => match self.connect().await {
                Some(c) => c,
                None => return Outcome::Connect,
            },
        };
        match self.exchange(&mut conn, remaining).await {
            Ok((status, reuse)) => {
                if reuse {
                    self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
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

    fn head(s: &str) -> Result<Option<Head>, Malformed> {
        parse_head(s.as_bytes(), false)
    }

    fn body(framing: Framing, wire: &[u8]) -> Result<(bool, usize), Malformed> {
        let mut r = BodyReader::new(framing);
        let mut buf = BytesMut::from(wire);
        let done = r.feed(&mut buf)?;
        Ok((done, buf.len()))
    }

    #[test]
    fn heads_are_framed_per_rfc_9112() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n").unwrap().unwrap();
        assert_eq!((h.status, h.len, h.framing, h.keep_alive), (200, 38, Framing::Length(3), true));
        let h = head("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n").unwrap();
        assert_eq!(h.unwrap().framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n");
        assert!(!h.unwrap().unwrap().keep_alive, "TE and CL: not reused");
        let h = head("HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.unwrap().unwrap().keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive, "1.0 closes by default");
        let h = head("HTTP/1.1 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
        let h = head("HTTP/1.1 204 No Content\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Empty, true));
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true).unwrap();
        assert_eq!(h.unwrap().framing, Framing::Empty, "a HEAD response has no body");
        assert_eq!(head("HTTP/1.1 200 OK\r\nContent-Len"), Ok(None));
    }

    #[test]
    fn ambiguous_or_oversized_heads_are_refused() {
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
            "HTTP/2 200\r\n\r\n",
            "garbage\r\n\r\n",
        ] {
            assert_eq!(head(bad), Err(Malformed), "{bad:?}");
        }
        assert_eq!(
            head("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n").unwrap().unwrap().framing,
            Framing::Length(3)
        );
        let long = format!("HTTP/1.1 200 OK\r\nx: {}", "a".repeat(MAX_HEAD));
        assert_eq!(head(&long), Err(Malformed), "an endless head is refused, not buffered");
    }

    #[test]
    fn bodies_end_where_their_framing_says() {
        assert_eq!(body(Framing::Length(3), b"ok\nHTTP"), Ok((true, 4)));
        assert_eq!(body(Framing::Length(5), b"ok\n"), Ok((false, 0)));
        let wire = b"3;x=y\r\nok\n\r\n0\r\nTrailer: 1\r\n\r\nrest";
        assert_eq!(body(Framing::Chunked, wire), Ok((true, 4)));
        assert_eq!(body(Framing::Chunked, b"3\r\nok\n"), Ok((false, 0)));
        assert_eq!(body(Framing::Chunked, b"3\r\nok\nXX"), Err(Malformed));
        assert_eq!(body(Framing::Chunked, b"zz\r\n"), Err(Malformed));
        assert_eq!(body(Framing::Close, b"anything"), Ok((false, 0)));
        assert!(BodyReader::new(Framing::Close).eof().is_ok());
        assert!(BodyReader::new(Framing::Chunked).eof().is_err());
    }

    proptest::proptest! {
        /// Any bytes: a verdict, never a panic, and a complete head never longer than the input.
        #[test]
        fn any_head_parses_to_a_verdict(wire in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            if let Ok(Some(h)) = parse_head(&wire, false) {
                proptest::prop_assert!(h.len <= wire.len());
            }
            let mut buf = BytesMut::from(&wire[..]);
            let _ = BodyReader::new(Framing::Chunked).feed(&mut buf);
        }

        /// A chunked body split at any point reads the same as in one piece.
        #[test]
        fn chunked_bodies_read_the_same_however_split(
            chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 1..40), 0..6),
            cut in 0usize..400,
        ) {
            let mut wire = Vec::new();
            for c in &chunks {
                wire.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                wire.extend_from_slice(c);
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"0\r\n\r\nNEXT");
            let cut = cut.min(wire.len());
            let mut r = BodyReader::new(Framing::Chunked);
            let mut buf = BytesMut::from(&wire[..cut]);
            let early = r.feed(&mut buf).unwrap();
            buf.extend_from_slice(&wire[cut..]);
            let done = early || r.feed(&mut buf).unwrap();
            proptest::prop_assert!(done);
            proptest::prop_assert_eq!(&buf[..], b"NEXT");
        }
    }
}
