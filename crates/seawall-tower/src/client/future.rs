//! The response future of both client layers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future a [`FailFast`](crate::client::FailFast) service (and the gRPC `Buffer`) returns:
/// one logical call.
///
/// It is boxed, which costs one allocation per call; the [`Retry`](crate::client::Retry)
/// service, whose success path is benchmarked against tower's, returns the unboxed
/// [`RetryFuture`](crate::client::RetryFuture) instead. Dropping it abandons the call and
/// returns what it held to the budget and breaker.
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
