//! [`Retry`]: the one layer of a call path that owns retries.
//!
//! # Why one layer, and why this one
//!
//! Three layers that each try three times send 27 attempts to the bottom of the stack for one
//! user action; five layers send 243. A retry only helps at the layer immediately
//! above the failure, and only while the failure is rare. So exactly one layer per call path
//! retries — usually the edge client — and every other hop uses
//! [`FailFastLayer`](crate::client::FailFastLayer).
//!
//! Each logical call runs the core [`RetryPolicy`](seawall::policy::RetryPolicy): the attempt
//! cap (3), the per-client budget (gRPC retry throttling by default: retries stop once failures
//! pass ~10 % of successes), full-jitter backoff, server hints (`Retry-After`,
//! `Retry-Pushback-Ms`, `grpc-retry-pushback-ms`) honoured and jittered, and the deadline — from
//! the request's [`RequestDeadline`](crate::wire::RequestDeadline) extension, else the layer's
//! default timeout. Each attempt carries `Request-Timeout-Ms` (gRPC: `grpc-timeout`) and each
//! retry `Request-Attempt: 2`, 3, … (gRPC: `grpc-previous-rpc-attempts`; a first attempt carries
//! no number, which servers read as 1); each attempt is cut off at its timeout.
//!
//! What the service returns:
//! - `Ok(response)` for a success **and** for answers that belong to the caller (404, 400, gRPC
//!   `NOT_FOUND`, …: retrying them would fail the same way);
//! - `Err(`[`GaveUpError`]`)` when the dependency failed or was refused: the core's reason, the
//!   overload flag, and the last response when there was one.
//!
//! Bodies: see [`ReplayBody`](crate::client::ReplayBody) — a body that cannot be replayed is
//! sent once.

mod future;
mod layer;

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use seawall::budget::{AnyBudget, Budget};
use seawall::time::{Clock, SystemClock};
use tower_service::Service;

pub use crate::client::engine::error::{BoxError, GaveUpError, LastOutcome};
pub use future::RetryFuture;
pub use layer::RetryLayer;

use crate::client::ReplayBody;
use crate::client::engine::Shared;

/// Retries a wrapped HTTP or gRPC service by the core policy. Built by [`RetryLayer`].
#[derive(Debug)]
pub struct Retry<S, Bu = AnyBudget, C = SystemClock> {
    inner: S,
    shared: Arc<Shared<Bu, C>>,
}

impl<S: Clone, Bu, C> Clone for Retry<S, Bu, C> {
    fn clone(&self) -> Self {
        Retry { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

impl<S, Bu, C> Retry<S, Bu, C> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, B, RB, Bu, C> Service<Request<B>> for Retry<S, Bu, C>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayBody + Send + 'static,
    RB: Send + 'static,
    Bu: Budget + 'static,
    C: Clock + 'static,
{
    type Response = Response<RB>;
    type Error = GaveUpError<RB>;
    type Future = RetryFuture<S, B, RB, Bu, C>;

    /// Always ready: readiness of the inner service is awaited before each attempt, inside the
    /// call, so a retry never holds a slot it is not using.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        RetryFuture::new(self.inner.clone(), self.shared.clone(), req)
    }
}
