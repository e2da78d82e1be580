//! Retrying tonic calls: make a unary request's body replayable (feature `grpc`).
//!
//! # Why an adapter
//!
//! A tonic channel is a `Service<http::Request<tonic::body::Body>>`, and tonic's body is a
//! stream: it cannot be replayed, so a [`RetryLayer`](crate::client::RetryLayer) sitting directly
//! on a channel classifies, stamps `grpc-timeout` / `grpc-previous-rpc-attempts` and fails fast
//! correctly, but sends each call once. A unary request is one small message, so it is worth
//! buffering: [`BufferLayer`] collects it (up to a limit) into a replayable `Full<Bytes>`, and
//! [`IntoTonicLayer`] turns it back into tonic's body just above the channel. Streaming calls
//! should not go through the buffer (the limit refuses them rather than holding them in memory).
//!
//! # Which gRPC failures are retried
//!
//! The layers decide on the response head, as gRPC's own retry does (gRFC A6): a failure a
//! server sends as a *trailers-only* response — `grpc-status` in the headers, no message, which
//! is how servers (tonic's included) answer a call they reject, throttle or cannot serve — is
//! classified and retried like any other (`UNAVAILABLE` retried, `RESOURCE_EXHAUSTED`
//! throttled, `grpc-retry-pushback-ms` honoured). Once a server has sent response headers
//! without a status, the call is *committed*: A6 never retries it, and neither do these layers
//! — the response goes to the caller, and a status that arrives later in the trailers is the
//! caller's. Classifying it would mean holding the whole response back until its trailers came,
//! which a streaming call cannot do and a unary one would pay for on every success. A proxy's
//! HTTP-level failure (a 503 with no `grpc-status`) is classified by its HTTP status.
//!
//! ```no_run
//! use seawall_tower::client::RetryLayer;
//! use seawall_tower::client::grpc::{BufferLayer, IntoTonicLayer};
//! use tower::ServiceBuilder;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
//! let svc = ServiceBuilder::new()
//!     .layer(BufferLayer::new(64 * 1024))
//!     .layer(RetryLayer::new())
//!     .layer(IntoTonicLayer)
//!     .service(channel);
//! let _client = tonic::client::Grpc::new(svc);
//! # Ok(()) }
//! ```

use std::task::{Context, Poll};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full, Limited};
use tower_layer::Layer;
use tower_service::Service;

use crate::client::future::ResponseFuture;
use crate::client::retry::BoxError;

/// Collects each request body (at most `limit` bytes) into a replayable `Full<Bytes>`.
#[derive(Debug, Clone, Copy)]
pub struct BufferLayer {
    limit: usize,
}

impl BufferLayer {
    /// Buffers bodies of at most `limit` bytes; larger ones fail the call without sending it.
    pub fn new(limit: usize) -> Self {
        BufferLayer { limit }
    }
}

impl<S> Layer<S> for BufferLayer {
    type Service = Buffer<S>;

    fn layer(&self, inner: S) -> Buffer<S> {
        Buffer { inner, limit: self.limit }
    }
}

/// See [`BufferLayer`].
#[derive(Debug, Clone)]
pub struct Buffer<S> {
    inner: S,
    limit: usize,
}

impl<S, RB> Service<Request<tonic::body::Body>> for Buffer<S>
where
    S: Service<Request<Full<Bytes>>, Response = http::Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: Send + 'static,
{
    type Response = http::Response<RB>;
    type Error = BoxError;
    type Future = ResponseFuture<http::Response<RB>, BoxError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<tonic::body::Body>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limit = self.limit;
        ResponseFuture::new(async move {
            let (parts, body) = req.into_parts();
            let bytes = Limited::new(body, limit).collect().await?.to_bytes();
            inner.call(Request::from_parts(parts, Full::new(bytes))).await.map_err(Into::into)
        })
    }
}

/// Turns a replayable `Full<Bytes>` request back into tonic's body, for the channel below.
#[derive(Debug, Clone, Copy, Default)]
pub struct IntoTonicLayer;

impl<S> Layer<S> for IntoTonicLayer {
    type Service = IntoTonic<S>;

    fn layer(&self, inner: S) -> IntoTonic<S> {
        IntoTonic { inner }
    }
}

/// See [`IntoTonicLayer`].
#[derive(Debug, Clone)]
pub struct IntoTonic<S> {
    inner: S,
}

impl<S> Service<Request<Full<Bytes>>> for IntoTonic<S>
where
    S: Service<Request<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Full<Bytes>>) -> S::Future {
        self.inner.call(req.map(tonic::body::Body::new))
    }
}
