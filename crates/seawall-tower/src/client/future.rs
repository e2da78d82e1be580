//! The response future of both client layers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A boxed response future, as the gRPC layer's `GrpcRetry` returns (its call
/// is an `async` block that reads the request body first).
///
/// The [`Retry`](crate::client::Retry) and [`FailFast`](crate::client::FailFast) services return
/// the unboxed [`RetryFuture`](crate::client::RetryFuture) and
/// [`FailFastFuture`](crate::client::FailFastFuture) instead: no allocation per call.
pub struct ResponseFuture<T, E> {
    inner: Pin<Box<dyn Future<Output = Result<T, E>> + Send>>,
}

impl<T, E> ResponseFuture<T, E> {
    pub(crate) fn new(f: impl Future<Output = Result<T, E>> + Send + 'static) -> Self {
        ResponseFuture { inner: Box::pin(f) }
    }
}

impl<T, E> Future for ResponseFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T, E> fmt::Debug for ResponseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture(..)")
    }
}
