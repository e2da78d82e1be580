//! [`ReqwestService`]: reqwest's [`Client`](reqwest::Client) as the
//! `tower::Service<http::Request<B>>` the client layers wrap (feature `reqwest`).
//!
//! # Why the response body is buffered
//!
//! The adapter answers `http::Response<Bytes>`: it reads the whole body before it returns. The
//! layers need that for two reasons. A retry decision is made on the *whole* answer — a 503 is
//! only a 503 once the server has finished saying so, and a body that breaks off half-way is a
//! transport failure that belongs to this attempt, not to the caller reading a stream after the
//! layer has already reported success. And [`GaveUpError`](crate::client::GaveUpError) hands
//! the last response back to the caller, which a half-read stream tied to a dropped connection
//! could not be.
//!
//! Buffering an unbounded body is how a misbehaving dependency exhausts a client's memory, so
//! the body is capped: [`DEFAULT_MAX_BODY_SIZE`] (16 MiB) unless
//! [`with_max_body_size`](ReqwestService::with_max_body_size) says otherwise. A response with a
//! `Content-Length` over the cap fails before its body is read; one without fails as soon as the
//! cap is passed. Either way the error is [`ReqwestError::BodyTooLarge`], and the connection is
//! dropped rather than drained. For streaming downloads, call reqwest directly (or give the
//! layers a service that answers with a streaming body: a failure while it streams is then the
//! caller's to handle, after the layer has returned).
//!
//! To keep reqwest's own API (`client.get(url).send()`, `.json()`, streamed bodies) instead,
//! use the same policy as a reqwest-middleware middleware: `client::middleware::RetryMiddleware`
//! (feature `reqwest-middleware`), which buffers nothing.
//!
//! # How errors are classified
//!
//! The layers recognise [`ReqwestError`]:
//! - [`Request`](ReqwestError::Request) and [`BodyTooLarge`](ReqwestError::BodyTooLarge) are
//!   never retried: nothing was sent, or the same answer would come back.
//! - a [`Send`](ReqwestError::Send) error reqwest reports with `is_connect()` (refused, a DNS
//!   error, a TCP or TLS handshake that failed or timed out) reached no server: it is retried
//!   even for a POST.
//! - a timeout set on the reqwest client is a timeout, like the layers' own per-attempt
//!   timeout (prefer that one: it also stops at the call's deadline).
//!
//! Every other error is a transport failure, retried only for idempotent requests (or requests
//! with an `Idempotency-Key`). [`ReqwestError`] keeps reqwest's error as its
//! [`source`](std::error::Error::source), and reqwest keeps hyper's and the operating system's
//! below it.
//!
//! Stored in application state, the stack is a [`RetryingReqwest`]:
//!
//! ```no_run
//! use bytes::Bytes;
//! use seawall_tower::client::RetryLayer;
//! use seawall_tower::client::reqwest::{ReqwestService, RetryingReqwest};
//! use std::time::Duration;
//! use tower::{Layer, ServiceExt};
//!
//! # async fn run() -> Result<(), seawall_tower::client::BoxError> {
//! struct AppState {
//!     orders: RetryingReqwest,
//! }
//!
//! let client = ReqwestService::new(reqwest::Client::new()).with_max_body_size(1 << 20);
//! let orders = RetryLayer::new().with_default_timeout(Duration::from_secs(2)).layer(client);
//! let state = AppState { orders };
//! let service = state.orders.clone();
//! let req = http::Request::get("http://orders.internal/1").body(Bytes::new())?;
//! let resp = service.oneshot(req).await?;
//! println!("{} {} bytes", resp.status(), resp.body().len());
//! # Ok(()) }
//! ```

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::Body as _;
use http_body_util::BodyExt;
use tower_service::Service;

/// [`RetryLayer`](crate::client::RetryLayer) over a [`ReqwestService`], as a type to keep in a
/// struct (the defaults: [`AnyBudget`](seawall::budget::AnyBudget), the
/// [`SystemClock`](seawall::time::SystemClock)).
pub type RetryingReqwest<Bu = seawall::budget::AnyBudget, C = seawall::time::SystemClock> =
    crate::client::Retry<ReqwestService, Bu, C>;

/// The response body cap of a new [`ReqwestService`]: 16 MiB. Large enough for any API
/// response; small enough that a few hundred concurrent calls cannot exhaust a service's memory.
pub const DEFAULT_MAX_BODY_SIZE: usize = 16 << 20;

/// reqwest's [`Client`](reqwest::Client) as a `tower::Service<http::Request<B>>` answering
/// `http::Response<Bytes>` (status, version, headers and extensions kept; the body read whole,
/// up to a cap: see the [module docs](self)).
///
/// Request bodies are anything reqwest takes: `Bytes`, `String`, `Vec<u8>`, `&'static str`,
/// `&'static [u8]`. The URI must be absolute (`http://host/path`). The client's connection pool
/// is shared by clones; the service is always ready.
#[derive(Clone, Debug)]
pub struct ReqwestService {
    client: reqwest::Client,
    max_body_size: usize,
}

impl ReqwestService {
    /// Sends requests through `client`, with the [`DEFAULT_MAX_BODY_SIZE`] cap.
    pub fn new(client: reqwest::Client) -> Self {
        ReqwestService { client, max_body_size: DEFAULT_MAX_BODY_SIZE }
    }

    /// Caps response bodies at `bytes` (default [`DEFAULT_MAX_BODY_SIZE`]); a longer body is
    /// [`ReqwestError::BodyTooLarge`].
    pub fn with_max_body_size(self, bytes: usize) -> Self {
        ReqwestService { max_body_size: bytes, ..self }
    }

    /// The response body cap, in bytes.
    pub fn max_body_size(&self) -> usize {
        self.max_body_size
    }

    /// The reqwest client.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

impl From<reqwest::Client> for ReqwestService {
    fn from(client: reqwest::Client) -> Self {
        ReqwestService::new(client)
    }
}

impl<B> Service<http::Request<B>> for ReqwestService
where
    B: Into<reqwest::Body>,
{
    type Response = http::Response<Bytes>;
    type Error = ReqwestError;
    type Future = ReqwestFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let (client, max) = (self.client.clone(), self.max_body_size);
        // Converted before the future, so the future does not hold `B` (which need not be Send).
        let req = reqwest::Request::try_from(req).map_err(ReqwestError::Request);
        ReqwestFuture {
            inner: Box::pin(async move {
                let resp = client.execute(req?).await.map_err(ReqwestError::Send)?;
                read_capped(http::Response::from(resp), max).await
            }),
        }
    }
}

/// Reads `resp`'s body into one `Bytes`, failing once it passes `max` bytes.
async fn read_capped(
    resp: http::Response<reqwest::Body>,
    max: usize,
) -> Result<http::Response<Bytes>, ReqwestError> {
    let (parts, mut body) = resp.into_parts();
    let too_large = |status| ReqwestError::BodyTooLarge { limit: max, status };
    let hint = body.size_hint();
    if usize::try_from(hint.lower()).map_or(true, |n| n > max) {
        return Err(too_large(parts.status));
    }
    let mut buf = BytesMut::with_capacity(usize::try_from(hint.lower()).unwrap_or(0));
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(ReqwestError::Body)?.into_data() else {
            continue; // trailers: HTTP/1.1 chunked responses rarely have them; not kept
        };
        if data.len() > max - buf.len() {
            return Err(too_large(parts.status));
        }
        buf.extend_from_slice(&data);
    }
    Ok(http::Response::from_parts(parts, buf.freeze()))
}

/// The future of [`ReqwestService::call`].
pub struct ReqwestFuture {
    inner: Pin<Box<dyn Future<Output = Result<http::Response<Bytes>, ReqwestError>> + Send>>,
}

impl fmt::Debug for ReqwestFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReqwestFuture").finish_non_exhaustive()
    }
}

impl Future for ReqwestFuture {
    type Output = Result<http::Response<Bytes>, ReqwestError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

/// Why a [`ReqwestService`] call produced no response.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReqwestError {
    /// The `http::Request` could not become a reqwest request (a relative or non-HTTP URI);
    /// nothing was sent.
    Request(reqwest::Error),
    /// Connecting, sending the request or reading the response head failed. A refused
    /// connection is found in its [`source`](StdError::source) chain as an
    /// [`io::ErrorKind::ConnectionRefused`](std::io::ErrorKind::ConnectionRefused).
    Send(reqwest::Error),
    /// The response head arrived but reading its body failed.
    Body(reqwest::Error),
    /// The response body is longer than the service's cap
    /// ([`ReqwestService::with_max_body_size`]); it was not read further.
    BodyTooLarge {
        /// The cap, in bytes.
        limit: usize,
        /// The status of the response whose body was too large.
        status: http::StatusCode,
    },
}

impl ReqwestError {
    /// reqwest's error, for the variants that have one.
    pub fn reqwest(&self) -> Option<&reqwest::Error> {
        match self {
            ReqwestError::Request(e) | ReqwestError::Send(e) | ReqwestError::Body(e) => Some(e),
            ReqwestError::BodyTooLarge { .. } => None,
        }
    }
}

impl fmt::Display for ReqwestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReqwestError::Request(_) => f.write_str("invalid request for reqwest"),
            ReqwestError::Send(_) => f.write_str("sending the request failed"),
            ReqwestError::Body(_) => f.write_str("reading the response body failed"),
            ReqwestError::BodyTooLarge { limit, status } => write!(
                f,
                "response body ({status}) exceeds the {limit}-byte cap \
                 (ReqwestService::with_max_body_size)"
            ),
        }
    }
}

impl StdError for ReqwestError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.reqwest().map(|e| e as _)
    }
}
