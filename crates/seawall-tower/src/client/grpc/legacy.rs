//! The two adapters that make a tonic body replayable for the HTTP [`RetryLayer`](crate::client::RetryLayer)
//! (kept for existing users; prefer [`GrpcRetryLayer`](super::GrpcRetryLayer)).
//!
//! Stacked `BufferLayer → RetryLayer → IntoTonicLayer` they let seawall's *HTTP* rules retry a
//! tonic call. Those rules treat every gRPC call as the `POST` it is, so nothing is retried
//! unless `RetryLayer::with_idempotency_keys(true)` is set, and the three layers must be stacked
//! in that order, which the types do not enforce: a wrong order compiles and sends each call
//! once. [`GrpcRetryLayer`](super::GrpcRetryLayer) is one layer with gRFC A6's rules instead.
//!
//! With these layers, failures a server sends *trailers-only* (`grpc-status` in the headers)
//! are classified like HTTP failures (`UNAVAILABLE` retryable, `RESOURCE_EXHAUSTED` throttled);
//! a response with headers and no status is committed and goes to the caller.
//!
//! ```no_run
//! use seawall_tower::client::RetryLayer;
//! use seawall_tower::client::grpc::{BufferLayer, IntoTonicLayer};
//! use tower::ServiceBuilder;
//!
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
//! let svc = ServiceBuilder::new()
//!     .layer(BufferLayer::new(64 * 1024))
//!     .layer(RetryLayer::new().with_idempotency_keys(true))
//!     .layer(IntoTonicLayer)
//!     .service(channel);
//! let _client = tonic::client::Grpc::new(svc);
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
