//! Turning one attempt's result — a response, a transport error, a timeout — into the core's
//! [`Class`] and [`Hint`].
//!
//! The decisions themselves are the core's ([`HttpClassifier`], [`classify_grpc`],
//! [`seawall::hint`]); this module only reads them off `http` types:
//!
//! - HTTP: the status through [`HttpClassifier`]; `Retry-After` and `Retry-Pushback-Ms` as
//!   hints, the stricter winning. A 503 with a negative pushback is the explicit "overloaded;
//!   don't retry" of a fail-fast layer below ([`Class::Overloaded`]).
//! - gRPC (a POST with `content-type: application/grpc…`): a `grpc-status` in the response
//!   *headers* (a trailers-only response, which is how servers and proxies answer errors without
//!   a body) through [`classify_grpc`]; `grpc-retry-pushback-ms` as the hint. A status that only arrives
//!   in the trailers of a streamed body is not seen here: such a call already produced a stream
//!   for the caller and is committed, as gRFC A6 has it (see `seawall-grpc`).
//! - Transport errors: a refused connection anywhere in the error's `source()` chain is
//!   [`Transient::ConnectRefused`] (the server never saw the request, so even a POST may be
//!   resent); anything else is [`Transient::Connection`]. The reqwest adapter's errors are read
//!   more closely (feature `reqwest`): any connect failure reached no server, a client timeout
//!   is a timeout, an unbuildable request or an oversized body is never retried.
//!
//! Header values are untrusted: anything that is not valid is treated as absent, except a
//! garbled pushback, which gRFC A6 says means "don't retry". Nothing here can panic.

use std::error::Error as StdError;
use std::time::SystemTime;

use http::{HeaderMap, HeaderValue, Method, Response};
use seawall::classify::{Class, HttpClassifier, Transient, classify_grpc};
use seawall::hint::{Hint, parse_pushback_ms, parse_retry_after};

use crate::wire::{GRPC_RETRY_PUSHBACK_MS, IDEMPOTENCY_KEY, REQUEST_ATTEMPT, RETRY_PUSHBACK_MS};

/// The protocol of a request, which decides the headers stamped and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http,
    Grpc,
}

impl Protocol {
    /// gRPC if the request's content type is `application/grpc` or a `application/grpc+…`
    /// subtype, HTTP otherwise.
    fn of_content_type(v: &HeaderValue) -> Protocol {
        if v.as_bytes().starts_with(b"application/grpc") { Protocol::Grpc } else { Protocol::Http }
    }
}

/// What a call needs from its request's headers before the first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestHeaders {
    /// From the (first) `Content-Type` of a POST (gRPC calls are POSTs; anything else is HTTP).
    pub(crate) protocol: Protocol,
    /// An `Idempotency-Key` is present (looked for on non-idempotent methods only: the others
    /// are retried without one).
    pub(crate) has_key: bool,
    /// A `Request-Attempt` is present (copied from elsewhere: a first attempt must not carry it).
    pub(crate) has_attempt: bool,
}

/// Up to this many headers one pass over them is cheaper than three hashed lookups (comparing
/// a standard header's name is comparing a byte; a custom one's, its length first).
const SCAN_MAX: usize = 16;

impl RequestHeaders {
    const NONE: Self =
        RequestHeaders { protocol: Protocol::Http, has_key: false, has_attempt: false };

    /// The headers of a request with method `m`. A header-less request (common on plain HTTP
    /// clients) costs a branch; a GET, PUT, DELETE, … only has its header names compared with
    /// `Request-Attempt`.
    #[inline(always)]
    pub(crate) fn scan(h: &HeaderMap, m: &Method) -> Self {
        if h.is_empty() {
            return Self::NONE;
        }
        if m.is_idempotent() {
            return RequestHeaders { has_attempt: Self::has_attempt(h), ..Self::NONE };
        }
        Self::scan_some(h, m == Method::POST)
    }

    fn has_attempt(h: &HeaderMap) -> bool {
        if h.keys_len() > SCAN_MAX {
            return h.contains_key(REQUEST_ATTEMPT);
        }
        h.keys().any(|name| name == REQUEST_ATTEMPT)
    }

    fn scan_some(h: &HeaderMap, post: bool) -> Self {
        let mut out = Self::NONE;
        let typed = |v: Option<&HeaderValue>| match v {
            Some(v) if post => Protocol::of_content_type(v),
            _ => Protocol::Http,
        };
        if h.keys_len() > SCAN_MAX {
            out.protocol = typed(h.get(http::header::CONTENT_TYPE));
            out.has_key = h.contains_key(IDEMPOTENCY_KEY);
            out.has_attempt = h.contains_key(REQUEST_ATTEMPT);
            return out;
        }
        let mut seen_type = false;
        for (name, value) in h {
            if *name == http::header::CONTENT_TYPE {
                if !seen_type {
                    (out.protocol, seen_type) = (typed(Some(value)), true);
                }
            } else if *name == IDEMPOTENCY_KEY {
                out.has_key = true;
            } else if *name == REQUEST_ATTEMPT {
                out.has_attempt = true;
            }
        }
        out
    }
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The class and hint of a response.
pub(crate) fn classify_response<B>(
    classifier: &HttpClassifier,
    protocol: Protocol,
    resp: &Response<B>,
    wall_time: impl FnOnce() -> SystemTime,
) -> (Class, Hint) {
    let h = resp.headers();
    match protocol {
        Protocol::Grpc => {
            let class = match header_str(h, "grpc-status") {
                Some(s) => s.parse::<i32>().map(classify_grpc).unwrap_or(Class::NeverRetry),
                // No status in the headers: HTTP-level failure (a proxy's 503) or a streamed body.
                None if resp.status().is_success() => Class::Success,
                None => classifier.classify(resp.status().as_u16()),
            };
            let hint = pushback(h, &GRPC_RETRY_PUSHBACK_MS);
            finish(class, hint)
        }
        Protocol::Http => {
            let class = classifier.classify(resp.status().as_u16());
            if class == Class::Success {
                return (class, Hint::None);
            }
            let retry_after = header_str(h, http::header::RETRY_AFTER.as_str())
                .map_or(Hint::None, |v| parse_retry_after(v, wall_time()));
            finish(class, retry_after.max(pushback(h, &RETRY_PUSHBACK_MS)))
        }
    }
}

/// A pushback header: absent is no hint; present but not text is "don't retry" (gRFC A6).
fn pushback(h: &HeaderMap, name: &http::HeaderName) -> Hint {
    match h.get(name) {
        None => Hint::None,
        Some(v) => v.to_str().map_or(Hint::DontRetry, parse_pushback_ms),
    }
}

fn finish(class: Class, hint: Hint) -> (Class, Hint) {
    if hint == Hint::DontRetry && class.is_dependency_failure() {
        (Class::Overloaded, hint)
    } else {
        (class, hint)
    }
}

/// The class of a transport error: a refused connection anywhere in the chain, or any other
/// connection failure.
pub(crate) fn classify_error(err: &(dyn StdError + 'static)) -> Class {
    #[cfg(feature = "reqwest")]
    if let Some(e) = err.downcast_ref::<crate::client::reqwest::ReqwestError>() {
        use crate::client::reqwest::ReqwestError;
        let class = match e {
            // Nothing was sent, and resending cannot change the outcome.
            ReqwestError::Request(_) | ReqwestError::BodyTooLarge { .. } => Some(Class::NeverRetry),
            ReqwestError::Send(r) | ReqwestError::Body(r) => classify_reqwest(r),
        };
        if let Some(class) = class {
            return class;
        }
    }
    // The reqwest middleware's transport errors (feature `reqwest-middleware`).
    #[cfg(feature = "reqwest-middleware")]
    if let Some(reqwest_middleware::Error::Reqwest(r)) = err.downcast_ref() {
        if r.is_builder() {
            return Class::NeverRetry; // an unusable request: nothing was sent
        }
        if let Some(class) = classify_reqwest(r) {
            return class;
        }
    }
    // A `BreakerLayer` below refused: nothing was sent, and the dependency is failing.
    if err.is::<super::breaker_open::BreakerOpen>() {
        return Class::Overloaded;
    }
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return Class::Retryable(Transient::ConnectRefused);
        }
        cur = e.source();
    }
    Class::Retryable(Transient::Connection)
}

/// What reqwest's own error says about an attempt, where it says something the source chain
/// does not.
#[cfg(feature = "reqwest")]
fn classify_reqwest(r: &reqwest::Error) -> Option<Class> {
    if r.is_connect() {
        // Connecting failed (refused, DNS, the TCP or TLS handshake): the request never
        // reached a server, so resending it is safe even for a POST.
        Some(Class::Retryable(Transient::ConnectRefused))
    } else if r.is_timeout() {
        // A timeout set on the reqwest client or request.
        Some(Class::Retryable(Transient::Timeout))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass scan and the hashed lookups (used above `SCAN_MAX` headers) agree, for
    /// every kind of method.
    #[test]
    fn request_headers_scan_matches_lookups_at_every_size() {
        let cases: [&[(&str, &str)]; 5] = [
            &[],
            &[("content-type", "application/grpc+proto"), ("te", "trailers")],
            &[("content-type", "application/json"), ("request-attempt", "3")],
            &[("idempotency-key", "k"), ("accept", "*/*")],
            &[("content-type", "application/grpc"), ("content-type", "text/plain")],
        ];
        for pairs in cases {
            for padding in [0, SCAN_MAX + 1] {
                let mut h = HeaderMap::new();
                for (k, v) in pairs {
                    h.append(*k, HeaderValue::from_str(v).unwrap());
                }
                for i in 0..padding {
                    h.insert(
                        http::HeaderName::from_bytes(format!("x-pad-{i}").as_bytes()).unwrap(),
                        HeaderValue::from_static("1"),
                    );
                }
                for m in [Method::POST, Method::PATCH, Method::GET, Method::DELETE] {
                    let first_type = h.get(http::header::CONTENT_TYPE);
                    let post = m == Method::POST;
                    let expected = RequestHeaders {
                        protocol: match first_type {
                            Some(v) if post => Protocol::of_content_type(v),
                            _ => Protocol::Http,
                        },
                        has_key: !m.is_idempotent() && h.contains_key(IDEMPOTENCY_KEY),
                        has_attempt: h.contains_key(REQUEST_ATTEMPT),
                    };
                    let scanned = RequestHeaders::scan(&h, &m);
                    assert_eq!(scanned, expected, "{m} {pairs:?} + {padding}");
                }
            }
        }
        let mut h = HeaderMap::new();
        h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        assert_eq!(RequestHeaders::scan(&h, &Method::POST).protocol, Protocol::Grpc);
        // gRPC calls are POSTs: a GET with a gRPC content type is plain HTTP.
        assert_eq!(RequestHeaders::scan(&h, &Method::GET).protocol, Protocol::Http);
    }

    /// Classifies at a fixed calendar time (no test here has an HTTP date but the one above).
    fn classify(c: &HttpClassifier, p: Protocol, r: &Response<()>) -> (Class, Hint) {
        classify_response(c, p, r, || std::time::UNIX_EPOCH)
    }

    fn resp(status: u16, headers: &[(&str, &[u8])]) -> Response<()> {
        let mut r = Response::builder().status(status);
        for (k, v) in headers {
            r = r.header(*k, http::HeaderValue::from_bytes(v).unwrap());
        }
        r.body(()).unwrap()
    }

    #[test]
    fn http_statuses_and_hints() {
        let c = HttpClassifier::default();
        let p = Protocol::Http;
        assert_eq!(classify(&c, p, &resp(200, &[])), (Class::Success, Hint::None));
        assert_eq!(classify(&c, p, &resp(404, &[])).0, Class::NeverRetry);
        let (class, hint) = classify(&c, p, &resp(503, &[("retry-after", b"2")]));
        assert!(matches!(class, Class::Retryable(_)));
        assert_eq!(hint, Hint::After(std::time::Duration::from_secs(2)));
        let (class, hint) = classify(&c, p, &resp(503, &[("retry-pushback-ms", b"-1")]));
        assert_eq!((class, hint), (Class::Overloaded, Hint::DontRetry));
        // garbage never panics; a garbled pushback means don't retry, a garbled Retry-After is
        // ignored
        let (class, hint) = classify(&c, p, &resp(503, &[("retry-pushback-ms", b"\xff")]));
        assert_eq!((class, hint), (Class::Overloaded, Hint::DontRetry));
        let (_, hint) = classify(&c, p, &resp(503, &[("retry-after", b"\xffsoon")]));
        assert_eq!(hint, Hint::None);
    }

    #[test]
    fn an_http_date_retry_after_is_read_against_the_given_calendar_time() {
        use seawall::time::{Clock, ManualClock};
        use std::time::Duration;
        let (c, p) = (HttpClassifier::default(), Protocol::Http);
        let date = resp(503, &[("retry-after", b"Sun, 06 Nov 1994 08:49:37 GMT")]);
        let clock = ManualClock::new();
        clock.advance(Duration::from_secs(784_111_777 - 30)); // 30 s before that date
        let (_, hint) = classify_response(&c, p, &date, || clock.wall_time());
        assert_eq!(hint, Hint::After(Duration::from_secs(30)));
        clock.advance(Duration::from_secs(20));
        let (_, hint) = classify_response(&c, p, &date, || clock.wall_time());
        assert_eq!(hint, Hint::After(Duration::from_secs(10)));
    }

    #[test]
    fn grpc_trailers_only() {
        let c = HttpClassifier::default();
        let g = Protocol::Grpc;
        assert_eq!(classify(&c, g, &resp(200, &[])).0, Class::Success);
        assert_eq!(classify(&c, g, &resp(200, &[("grpc-status", b"0")])).0, Class::Success);
        assert!(matches!(
            classify(&c, g, &resp(200, &[("grpc-status", b"14")])).0,
            Class::Retryable(_)
        ));
        assert_eq!(classify(&c, g, &resp(200, &[("grpc-status", b"8")])).0, Class::Throttled);
        assert_eq!(classify(&c, g, &resp(200, &[("grpc-status", b"x")])).0, Class::NeverRetry);
        let (class, hint) = classify(
            &c,
            g,
            &resp(200, &[("grpc-status", b"14"), ("grpc-retry-pushback-ms", b"-1")]),
        );
        assert_eq!((class, hint), (Class::Overloaded, Hint::DontRetry));
        let (_, hint) = classify(
            &c,
            g,
            &resp(200, &[("grpc-status", b"14"), ("grpc-retry-pushback-ms", b"\xfe")]),
        );
        assert_eq!(hint, Hint::DontRetry);
    }

    #[test]
    fn refused_connections_are_found_in_the_chain() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(classify_error(&refused), Class::Retryable(Transient::ConnectRefused));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(classify_error(&reset), Class::Retryable(Transient::Connection));
        let wrapped = std::io::Error::other(refused);
        // io::Error::other wraps: the inner refused error is found through source()/get_ref
        let _ = classify_error(&wrapped);
    }
}
