//! [`BufferBodyLayer`]: read the whole request body, within a size and a time bound, *before* the
//! request asks for an admission slot.
//!
//! # Why
//!
//! A handler that reads its body inside a [`ShedLayer`](crate::server::ShedLayer) slot holds the
//! slot for as long as the client takes to send it. A client trickling a byte a second holds it
//! for minutes; a few dozen such clients hold every slot, and every other request is shed with
//! `503` (the slow-body attack known as Slowloris's POST variant, "R.U.D.Y."). Reading the body
//! first, outside admission, turns a slow body into a held *connection*, which costs a socket and
//! a buffer but no capacity.
//!
//! Put it outside admission, next to the `DeadlineLayer`:
//! `DeadlineLayer` → `BufferBodyLayer` → `IdempotencyLayer` → `ShedLayer` → handler.
//!
//! | request | answer |
//! |---|---|
//! | `Content-Length` over [`max`](BufferBodyLayer::with_max) | `413` at once, nothing read, no slot taken |
//! | body longer than `max` while reading | `413` |
//! | body not complete within [`timeout`](BufferBodyLayer::with_timeout) | `408` |
//! | body broken (the transport failed) | `400` |
//! | gRPC (`content-type: application/grpc…`) | passed on unread: gRPC bodies are message streams (bound them with tonic's message size limits) |
//!
//! The refusals carry the problem bodies of [`crate::server::problem`]. Memory is bounded by
//! `max` × the connections the server accepts: size `max` for the route (the default, 1 MiB, is
//! the `IdempotencyLayer`'s).
//!
//! ```
//! use seawall_tower::server::{BufferBodyLayer, DeadlineLayer, ShedLayer};
//! use std::num::NonZeroUsize;
//! use std::time::Duration;
//! use tower::ServiceBuilder;
//!
//! let layers = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new())
//!     .layer(BufferBodyLayer::new().with_max(64 * 1024).with_timeout(Duration::from_secs(5)))
//!     .layer(ShedLayer::new(NonZeroUsize::new(64).unwrap()));
//! # let _ = layers;
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use tower_layer::Layer;
use tower_service::Service;

use crate::server::{problem as p, response};

/// Largest body read: 1 MiB (local choice).
pub const DEFAULT_MAX_BODY: usize = 1 << 20;
/// Bound on reading the whole body: 10 s — a full [`DEFAULT_MAX_BODY`] at 1 Mbit/s takes 8.4 s,
/// so honest slow links fit; a client trickling bytes is cut off (`408`).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a body was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    TooLarge,
    Timeout,
    Broken,
}

impl Refused {
    /// The status and problem body of this refusal, and its gRPC status.
    pub(crate) fn answer(self) -> (StatusCode, &'static str) {
        match self {
            Refused::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, p::TOO_LARGE),
            Refused::Timeout => (StatusCode::REQUEST_TIMEOUT, p::BODY_TIMEOUT),
            Refused::Broken => (StatusCode::BAD_REQUEST, p::BAD_BODY),
        }
    }
}

/// The declared body length, if the header is one well-formed decimal number.
pub(crate) fn declared_len(headers: &http::HeaderMap) -> Option<u64> {
    let v = headers.get(header::CONTENT_LENGTH)?.to_str().ok()?;
    (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())).then(|| v.parse().ok())?
}

/// Whether `headers` declare a body over `max` (refuse before reading a byte).
pub(crate) fn declared_over(headers: &http::HeaderMap, max: usize) -> bool {
    declared_len(headers).is_some_and(|n| n > max as u64)
}

/// Reads all of `body`: at most `max` bytes, within `timeout`.
pub(crate) async fn read<B>(body: B, max: usize, timeout: Duration) -> Result<Bytes, Refused>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match tokio::time::timeout(timeout, Limited::new(body, max).collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(Refused::TooLarge),
        Ok(Err(_)) => Err(Refused::Broken),
        Err(_) => Err(Refused::Timeout),
    }
}

/// Reads each request's whole body (bounded) before passing the request on; see the
/// [module docs](self).
#[derive(Debug, Clone, Copy)]
pub struct BufferBodyLayer {
    max: usize,
    timeout: Duration,
}

impl Default for BufferBodyLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl BufferBodyLayer {
    /// [`DEFAULT_MAX_BODY`] within [`DEFAULT_BODY_TIMEOUT`].
    pub fn new() -> Self {
        BufferBodyLayer { max: DEFAULT_MAX_BODY, timeout: DEFAULT_BODY_TIMEOUT }
    }

    /// At most `bytes` per body (`413` over it).
    pub fn with_max(mut self, bytes: usize) -> Self {
        self.max = bytes;
        self
    }

    /// The whole body within `timeout` (`408` after it).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<S> Layer<S> for BufferBodyLayer {
    type Service = BufferBody<S>;

    fn layer(&self, inner: S) -> BufferBody<S> {
        BufferBody { inner, max: self.max, timeout: self.timeout }
    }
}

/// The service [`BufferBodyLayer`] makes.
#[derive(Debug, Clone)]
pub struct BufferBody<S> {
    inner: S,
    max: usize,
    timeout: Duration,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqB, ResB> Service<Request<ReqB>> for BufferBody<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    ReqB: Body + From<Bytes> + Send + 'static,
    ReqB::Data: Send,
    ReqB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResB: From<&'static str> + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<ResB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        if response::is_grpc(req.headers()) {
            return Box::pin(self.inner.call(req));
        }
        if declared_over(req.headers(), self.max) {
            return Box::pin(std::future::ready(Ok(refusal(Refused::TooLarge))));
        }
        // The clone that was made ready serves this request; the fresh clone stays behind.
        let clone = self.inner.clone();
        let mut ready = std::mem::replace(&mut self.inner, clone);
        let (max, timeout) = (self.max, self.timeout);
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            match read(body, max, timeout).await {
                Ok(bytes) => ready.call(Request::from_parts(parts, ReqB::from(bytes))).await,
                Err(r) => Ok(refusal(r)),
            }
        })
    }
}

fn refusal<B: From<&'static str>>(r: Refused) -> Response<B> {
    let (status, body) = r.answer();
    response::refuse(status, false, "", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_lengths_are_strict() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert(header::CONTENT_LENGTH, v.parse().unwrap());
            m
        };
        assert_eq!(declared_len(&h("10")), Some(10));
        for bad in ["", "+1", "-1", "1 0", "0x10", "99999999999999999999999"] {
            assert_eq!(declared_len(&h(bad)), None, "{bad:?}");
        }
        assert!(declared_over(&h("11"), 10));
        assert!(!declared_over(&h("10"), 10));
        assert!(!declared_over(&http::HeaderMap::new(), 0));
    }
}
