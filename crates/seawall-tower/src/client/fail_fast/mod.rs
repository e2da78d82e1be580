//! [`FailFast`]: one attempt, and a dependency's overload passed upward as "don't retry".
//!
//! # Why every other layer must fail fast
//!
//! Attempts never multiply across layers. A middle tier that retries turns the edge's 3
//! attempts into 9 at the tier below and 27 at the database. A fail-fast layer sends one
//! attempt. When the dependency is *overloaded* or something refused — a 429 or
//! RESOURCE_EXHAUSTED, a pushback, an open breaker, a spent budget, the kill switch — it answers
//! its own caller with the explicit overload signal: HTTP 503 + `Retry-Pushback-Ms: -1`, or gRPC
//! UNAVAILABLE + `grpc-retry-pushback-ms: -1`. A [`RetryLayer`](crate::client::RetryLayer) above
//! never retries that answer, and a caller that ignores it still gets a plain 503.
//!
//! A *transient* failure — a 502, 503 or 504, a reset, a timeout (answered as 504) — is passed
//! up as it is: the one owner of the path may retry it once within its own budget, which is
//! what keeps a fleet near 1.1 attempts per request rather than 27 (or 1.0 with nothing ever
//! retried). The core decides which is which ([`seawall::policy::GiveUp::overloaded`]).
//!
//! Answers that belong to the caller (200, 404, …) pass through untouched. The deadline and
//! attempt headers are stamped exactly as the retry layer does.

mod future;
mod layer;

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use seawall::budget::{Budget, Unlimited};
use seawall::time::{Clock, SystemClock};
use tower_service::Service;

pub use future::FailFastFuture;
pub use layer::FailFastLayer;

use crate::client::ReplayBody;
use crate::client::engine::Shared;
use crate::client::retry::{BoxError, RetryFuture};

/// One attempt per call; overload below becomes "overloaded; don't retry" above. Built by
/// [`FailFastLayer`].
#[derive(Debug)]
pub struct FailFast<S, Bu = Unlimited, C = SystemClock> {
    inner: S,
    shared: Arc<Shared<Bu, C>>,
}

impl<S: Clone, Bu, C> Clone for FailFast<S, Bu, C> {
    fn clone(&self) -> Self {
        FailFast { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

impl<S, B, RB, Bu, C> Service<Request<B>> for FailFast<S, Bu, C>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayBody + Send + 'static,
    RB: Default + Send + 'static,
    Bu: Budget + 'static,
    C: Clock + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = FailFastFuture<S, B, RB, Bu, C>;

    /// Always ready; the inner service's readiness is awaited inside the call.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        FailFastFuture::new(RetryFuture::new(self.inner.clone(), self.shared.clone(), req))
    }
}
