//! Strict, in-place parsing of HTTP/1.1 responses (RFC 9112): the head with `httparse`, the
//! body by its framing, nothing copied.
//!
//! Anything ambiguous is refused rather than guessed: conflicting `Content-Length`s, a
//! malformed chunk size or chunk end, a head (or chunk-size line, or trailer section) over
//! [`MAX_HEAD`] bytes, more than [`MAX_RESPONSE_HEADERS`] headers, a status outside
//! 100–999, a protocol switch nobody asked for. The caller closes a connection that sent such
//! a response: once the framing is in doubt, so is everything after it.

use std::mem::MaybeUninit;

use bytes::{Buf, BytesMut};

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
    /// No body (the answer to a `HEAD`, a 1xx, 204 or 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding` ending in `chunked`.
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

fn has_token(v: &[u8], token: &[u8]) -> bool {
    v.split(|b| *b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// A `Content-Length` value: one or more comma-separated copies of the same decimal number
/// (RFC 9110 §8.6 lets a recipient accept such a list).
fn content_length(v: &[u8]) -> Result<u64, Malformed> {
    let mut out = None;
    for part in v.split(|b| *b == b',') {
        let part = part.trim_ascii();
        // 19 digits always fit a u64.
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
    // Left uninitialized (httparse's API for it, no unsafe here): zeroing 100 headers costs
    // more than parsing the five a typical answer has.
    let mut headers =
        [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_RESPONSE_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Ok(None),
        _ => return Err(Malformed),
    };
    let status = resp.code.filter(|c| *c >= 100).ok_or(Malformed)?;
    if status == 101 {
        // A protocol switch answers an Upgrade, which this client never sends.
        return Err(Malformed);
    }
    let http11 = resp.version == Some(1);
    let mut keep_alive = http11;
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
            // Only the last coding of the last field decides (RFC 9112 §6.3 item 4).
            chunked = h
                .value
                .rsplit(|b| *b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, b"close") {
                keep_alive = false;
            } else if has_token(h.value, b"keep-alive") && !http11 {
                keep_alive = true;
            }
        }
    }
    let bodyless = head_request || status == 204 || status == 304 || status < 200;
    let framing = if bodyless {
        Framing::Empty
    } else if encoded {
        // Transfer-Encoding overrides Content-Length, and a connection that carried both is
        // not reused (RFC 9112 §6.3 item 3).
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

/// Where a chunked body's reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// In the trailer section, this many bytes of it seen.
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
    /// it stays in `buf`).
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
                        return if buf.first().is_none_or(|b| *b == b'\r') {
                            Ok(false)
                        } else {
                            Err(Malformed)
                        };
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
                    if seen + i + 2 > MAX_HEAD {
                        return Err(Malformed);
                    }
                    buf.advance(i + 2);
                    if i == 0 {
                        return Ok(true);
                    }
                    self.chunk = Chunk::Trailers(seen + i + 2);
                }
            }
        }
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
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n").unwrap();
        assert_eq!(h.unwrap().framing, Framing::Close, "chunked not last: read to the close");
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n");
        let h = h.unwrap().unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, false), "TE and CL: not reused");
        let h = head("HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.unwrap().unwrap().keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive, "1.0 closes by default");
        let h = head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
        assert!(h.unwrap().unwrap().keep_alive);
        let h = head("HTTP/1.1 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
        let h = head("HTTP/1.1 204 No Content\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Empty, true));
        let h = head("HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.framing, Framing::Empty);
        let h = head("HTTP/1.1 100 Continue\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.status, h.framing), (100, Framing::Empty));
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true).unwrap();
        assert_eq!(h.unwrap().framing, Framing::Empty, "a HEAD response has no body");
        assert_eq!(head("HTTP/1.1 200 OK\r\nContent-Len"), Ok(None));
        assert_eq!(head(""), Ok(None));
    }

    #[test]
    fn ambiguous_or_oversized_heads_are_refused() {
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
            "HTTP/1.1 099 Odd\r\n\r\n",
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
        let many: String = (0..=MAX_RESPONSE_HEADERS).map(|i| format!("h{i}: 1\r\n")).collect();
        assert_eq!(head(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")), Err(Malformed));
    }

    #[test]
    fn bodies_end_where_their_framing_says() {
        assert_eq!(body(Framing::Length(3), b"ok\nHTTP"), Ok((true, 4)));
        assert_eq!(body(Framing::Length(5), b"ok\n"), Ok((false, 0)));
        assert_eq!(body(Framing::Empty, b"rest"), Ok((true, 4)));
        let wire = b"3;x=y\r\nok\n\r\n0\r\nTrailer: 1\r\n\r\nrest";
        assert_eq!(body(Framing::Chunked, wire), Ok((true, 4)));
        assert_eq!(body(Framing::Chunked, b"3\r\nok\n"), Ok((false, 0)));
        assert_eq!(body(Framing::Chunked, b"3\r\nok\n\r"), Ok((false, 1)));
        assert_eq!(body(Framing::Chunked, b"3\r\nok\nX"), Err(Malformed));
        assert_eq!(body(Framing::Chunked, b"3\r\nok\nXX"), Err(Malformed));
        assert_eq!(body(Framing::Chunked, b"zz\r\n"), Err(Malformed));
        assert_eq!(body(Framing::Chunked, b"ffffffffffffffffff\r\n"), Err(Malformed));
        let trailers = format!("0\r\nx: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(body(Framing::Chunked, trailers.as_bytes()), Err(Malformed));
        assert_eq!(body(Framing::Close, b"anything"), Ok((false, 0)));
        assert!(BodyReader::new(Framing::Close).eof().is_ok());
        assert!(BodyReader::new(Framing::Chunked).eof().is_err());
        assert!(BodyReader::new(Framing::Length(1)).eof().is_err());
    }

    /// Feeds `wire` to a fresh reader in pieces cut at `cuts`: the verdict once all is in.
    fn feed_in_pieces(
        framing: Framing,
        wire: &[u8],
        cuts: &[usize],
    ) -> Result<(bool, Vec<u8>), Malformed> {
        let mut r = BodyReader::new(framing);
        let mut buf = BytesMut::new();
        let mut at = 0;
        let mut done = false;
        let mut ends: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
        ends.sort_unstable();
        ends.push(wire.len());
        for end in ends {
            buf.extend_from_slice(&wire[at..end.max(at)]);
            at = end.max(at);
            if !done {
                done = r.feed(&mut buf)?;
            }
        }
        Ok((done, buf.to_vec()))
    }

    proptest::proptest! {
        /// Any bytes: a verdict, never a panic, and a complete head never longer than the input.
        #[test]
        fn any_head_parses_to_a_verdict(wire in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            if let Ok(Some(h)) = parse_head(&wire, false) {
                proptest::prop_assert!(h.len <= wire.len());
                proptest::prop_assert!(h.status >= 100 && h.status != 101);
            }
            for framing in [Framing::Chunked, Framing::Length(17), Framing::Close] {
                let mut buf = BytesMut::from(&wire[..]);
                let _ = BodyReader::new(framing).feed(&mut buf);
            }
        }

        /// A chunked body split at any points reads the same as in one piece, and leaves
        /// exactly what follows it.
        #[test]
        fn chunked_bodies_read_the_same_however_split(
            chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 1..40), 0..6),
            trailer in proptest::option::of("[a-z]{1,8}: [a-z0-9]{0,8}"),
            cuts in proptest::collection::vec(0usize..400, 0..4),
        ) {
            let mut wire = Vec::new();
            for c in &chunks {
                wire.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                wire.extend_from_slice(c);
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"0\r\n");
            if let Some(t) = &trailer {
                wire.extend_from_slice(t.as_bytes());
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"\r\nNEXT");
            let (done, rest) = feed_in_pieces(Framing::Chunked, &wire, &cuts).unwrap();
            proptest::prop_assert!(done);
            proptest::prop_assert_eq!(&rest[..], b"NEXT");
        }

        /// A Content-Length body ends after exactly that many bytes, however it arrives.
        #[test]
        fn length_bodies_end_at_their_length(
            len in 0usize..200,
            extra in 0usize..50,
            cuts in proptest::collection::vec(0usize..300, 0..4),
        ) {
            let wire = vec![b'x'; len + extra];
            let (done, rest) = feed_in_pieces(Framing::Length(len as u64), &wire, &cuts).unwrap();
            proptest::prop_assert!(done);
            proptest::prop_assert_eq!(rest.len(), extra);
        }

        /// A head's verdict does not depend on how much of what follows it has arrived.
        #[test]
        fn a_complete_head_is_the_same_with_any_tail(
            cl in 0u64..10_000,
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let text = format!("HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: {cl}\r\n\r\n");
            let alone = parse_head(text.as_bytes(), false).unwrap().unwrap();
            let mut wire = text.into_bytes();
            wire.extend_from_slice(&tail);
            proptest::prop_assert_eq!(parse_head(&wire, false).unwrap().unwrap(), alone);
            proptest::prop_assert_eq!(alone.framing, Framing::Length(cl));
        }
    }
}
