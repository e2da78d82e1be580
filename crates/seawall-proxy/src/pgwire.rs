//! Just enough of PostgreSQL's wire protocol (v3) to see statements pass: which query each
//! connection runs, and when the server says it is done (`ReadyForQuery`).
//!
//! The proxy never changes a byte; it reads along. Simple queries (`Q`) and the extended
//! protocol (`Parse`, `Bind`, `Execute`, `Sync`) are followed; a statement is in flight from its
//! `Q` or `Execute` until the `ReadyForQuery` answering its `Sync`. Anything unexpected — TLS
//! negotiated, a length out of range, more pipelining than the bounds — and the tracker stops
//! for that connection (the bytes still flow): it reads along, it never gets in the way.

use std::collections::HashMap;

use super::stats::key_of;

/// Bytes of a message body kept to key it (a longer query is keyed by its first 4 KiB).
pub const MAX_KEPT: usize = 4096;
/// Prepared statement names remembered per connection.
pub const MAX_STATEMENTS: usize = 256;
/// The largest message length believed (PostgreSQL's own limit is 1 GiB).
const MAX_LEN: u32 = 1 << 30;

/// What the client's bytes started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A statement starts executing; the key is a hash of its SQL text.
    Statement(u64),
    /// A `Sync` (or the end of a simple `Q`): one `ReadyForQuery` will answer it.
    Sync,
}

#[derive(Debug, Default)]
struct Framer {
    header: Vec<u8>,
    kind: u8,
    remaining: usize,
    body: Vec<u8>,
}

impl Framer {
    /// Feeds bytes; calls `done(kind, kept body)` per complete message. `typed` = the message
    /// has a type byte (everything but the startup family). `Err` on a bad length.
    fn feed(
        &mut self,
        mut buf: &[u8],
        typed: &mut dyn FnMut() -> bool,
        done: &mut dyn FnMut(u8, &[u8]),
    ) -> Result<(), ()> {
        while !buf.is_empty() {
            let hlen = if typed() { 5 } else { 4 };
            if self.header.len() < hlen {
                let n = (hlen - self.header.len()).min(buf.len());
                self.header.extend_from_slice(&buf[..n]);
                buf = &buf[n..];
                if self.header.len() < hlen {
                    return Ok(());
                }
                let (kind, len) = if hlen == 5 {
                    (self.header[0], &self.header[1..5])
                } else {
                    (0, &self.header[..4])
                };
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]);
                if !(4..=MAX_LEN).contains(&len) {
                    return Err(());
                }
                self.kind = kind;
                self.remaining = len as usize - 4;
            }
            let n = self.remaining.min(buf.len());
            let keep = n.min(MAX_KEPT.saturating_sub(self.body.len()));
            self.body.extend_from_slice(&buf[..keep]);
            self.remaining -= n;
            buf = &buf[n..];
            if self.remaining == 0 {
                done(self.kind, &self.body);
                self.header.clear();
                self.body.clear();
            }
        }
        Ok(())
    }
}

/// One connection's reading of the protocol.
#[derive(Debug, Default)]
pub struct Tracker {
    front: Framer,
    back: Framer,
    started: bool,
    /// Bytes of the server's one-byte answer to an SSL/GSS request still to skip.
    answer_pending: bool,
    statements: HashMap<Vec<u8>, u64>,
    portal: Option<u64>,
    broken: bool,
}

fn cstr(b: &[u8]) -> (&[u8], &[u8]) {
    match b.iter().position(|&c| c == 0) {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &[]),
    }
}

impl Tracker {
    /// Whether the tracker gave up on this connection.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Stops tracking this connection (the caller's own bound was reached).
    pub fn stop(&mut self) {
        self.broken = true;
    }

    /// Reads the client's bytes; returns what they started, in order.
    pub fn client(&mut self, buf: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        if self.broken {
            return events;
        }
        let (started, mut encryption, mut not_pg) = (&mut self.started, None::<bool>, false);
        let (statements, portal) = (&mut self.statements, &mut self.portal);
        let started_now = *started;
        let typed_flag = std::cell::Cell::new(started_now);
        let r = self.front.feed(buf, &mut || typed_flag.get(), &mut |kind, body| {
            if !typed_flag.get() {
                // Startup family: protocol 3.0 startup, or an SSL / GSS / cancel request.
                let code =
                    body.get(..4).map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                match code {
                    80_877_103 | 80_877_104 => encryption = Some(true),
                    196_608 => typed_flag.set(true),
                    _ => not_pg = true, // a cancel request, or not PostgreSQL at all
                }
                return;
            }
            match kind {
                b'Q' => {
                    events.push(Event::Statement(key_of(&[cstr(body).0])));
                    events.push(Event::Sync);
                }
                b'P' => {
                    let (name, rest) = cstr(body);
                    if statements.len() < MAX_STATEMENTS || statements.contains_key(name) {
                        statements.insert(name.to_vec(), key_of(&[cstr(rest).0]));
                    }
                }
                b'B' => *portal = statements.get(cstr(cstr(body).1).0).copied(),
                b'E' => events.extend(portal.map(Event::Statement)),
                b'S' => events.push(Event::Sync),
                _ => {}
            }
        });
        *started = typed_flag.get();
        if encryption.is_some() {
            self.answer_pending = true;
        }
        if r.is_err() || not_pg {
            self.broken = true;
            events.clear();
        }
        events
    }

    /// Reads the server's bytes; returns how many `ReadyForQuery` they held (`None` once the
    /// tracker has given up: the caller forgets what it held for this connection).
    pub fn server(&mut self, mut buf: &[u8]) -> Option<usize> {
        if self.broken {
            return None;
        }
        if self.answer_pending && !buf.is_empty() {
            self.answer_pending = false;
            if buf[0] != b'N' {
                self.broken = true; // TLS or GSS encryption from here on: opaque.
                return None;
            }
            buf = &buf[1..];
        }
        let mut ready = 0;
        let r =
            self.back.feed(buf, &mut || true, &mut |kind, _| ready += usize::from(kind == b'Z'));
        if r.is_err() {
            self.broken = true;
            return None;
        }
        Some(ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![kind];
        v.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn startup() -> Vec<u8> {
        let body = [&196_608u32.to_be_bytes()[..], b"user\0postgres\0\0"].concat();
        [&(body.len() as u32 + 4).to_be_bytes()[..], &body].concat()
    }

    #[test]
    fn follows_simple_and_extended_queries_byte_by_byte() {
        let mut t = Tracker::default();
        let mut stream = startup();
        stream.extend(msg(b'Q', b"SELECT 1\0"));
        stream.extend(msg(b'P', b"s1\0SELECT 1\0\0\0"));
        stream.extend(msg(b'S', b""));
        stream.extend(msg(b'B', b"\0s1\0\0\0\0\0\0\0"));
        stream.extend(msg(b'E', b"\0\0\0\0\0"));
        stream.extend(msg(b'S', b""));
        // One byte at a time: framing must not depend on how TCP cuts the stream.
        let events: Vec<Event> =
            stream.iter().flat_map(|b| t.client(std::slice::from_ref(b))).collect();
        let q = key_of(&[b"SELECT 1"]);
        assert_eq!(
            events,
            [Event::Statement(q), Event::Sync, Event::Sync, Event::Statement(q), Event::Sync]
        );
        let reply = [msg(b'R', &[0; 4]), msg(b'Z', b"I"), msg(b'1', b""), msg(b'Z', b"I")].concat();
        assert_eq!(t.server(&reply), Some(2));
        assert!(!t.is_broken());
    }

    #[test]
    fn ssl_refused_then_startup_and_garbage_stops_tracking() {
        let mut t = Tracker::default();
        let ssl = [8u32.to_be_bytes(), 80_877_103u32.to_be_bytes()].concat();
        assert!(t.client(&ssl).is_empty());
        assert_eq!(t.server(b"N"), Some(0));
        let mut rest = startup();
        rest.extend(msg(b'Q', b"SELECT 2\0"));
        assert_eq!(t.client(&rest).len(), 2);
        assert_eq!(t.client(&[b'Q', 0, 0, 0, 1]), vec![]); // length 1 < 4
        assert!(t.is_broken());
        let mut tls = Tracker::default();
        tls.client(&ssl);
        assert_eq!(tls.server(b"S\x16\x03"), None);
        let mut http = Tracker::default();
        assert!(http.client(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").is_empty());
        assert!(http.is_broken());
    }
}
