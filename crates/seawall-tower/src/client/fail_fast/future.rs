//! [`FailFastFuture`]: one attempt through a [`FailFast`](super::FailFast) service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use seawall::budget::Budget;
use seawall::policy::{Upstream, upstream};
use seawall::time::Clock;
use tower_service::Service;

use crate::client::ReplayBody;
use crate::client::engine::overload::{overloaded_response, timed_out_response};
use crate::client::retry::{BoxError, GaveUpError, LastOutcome, RetryFuture};

pin_project! {
    /// The future a [`FailFast`](super::FailFast) service returns: the call's one attempt, with
    /// the give-up turned into what the caller above must see. Unboxed, like
    /// [`RetryFuture`](crate::client::RetryFuture), which it wraps.
    pub struct FailFastFuture<S, B, RB, Bu, C>
    where
        S: Service<Request<B>>,
        Bu: Budget,
        C: Clock,
    {
        #[pin]
        inner: RetryFuture<S, B, RB, Bu, C>,
    }
}

impl<S, B, RB, Bu, C> FailFastFuture<S, B, RB, Bu, C>
where
    S: Service<Request<B>>,
    Bu: Budget,
    C: Clock,
{
    pub(crate) fn new(inner: RetryFuture<S, B, RB, Bu, C>) -> Self {
        FailFastFuture { inner }
    }
}

/// What a fail-fast layer answers when its policy gave up, by the core's rule
/// ([`seawall::policy::upstream`]): the explicit overload signal, or the failure as it is, for
/// the owner above to retry within its own budget.
fn answer<RB: Default>(e: GaveUpError<RB>) -> Result<Response<RB>, BoxError> {
    let grpc = e.is_grpc();
    match upstream(Err(e.give_up()), e.last_attempt()) {
        Upstream::DontRetry => Ok(overloaded_response(grpc)),
        Upstream::TimedOut => Ok(timed_out_response(grpc)),
        Upstream::Last | Upstream::Success => match e.into_last() {
            LastOutcome::Response(r) => Ok(r),
            LastOutcome::Error(err) => Err(err),
            // `upstream` passes the last outcome only when there is one.
            LastOutcome::TimedOut => Ok(timed_out_response(grpc)),
            LastOutcome::NotSent => Ok(overloaded_response(grpc)),
        },
    }
}

impl<S, B, RB, Bu, C> Future for FailFastFuture<S, B, RB, Bu, C>
where
    S: Service<Request<B>, Response = Response<RB>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayBody + Send + 'static,
    RB: Default + Send + 'static,
    Bu: Budget + 'static,
    C: Clock + 'static,
{
    type Output = Result<Response<RB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().inner.poll(cx)) {
            Ok(resp) => Ok(resp),
            Err(e) => answer(e),
        })
    }
}

impl<S, B, RB, Bu, C> fmt::Debug for FailFastFuture<S, B, RB, Bu, C>
where
    S: Service<Request<B>>,
    Bu: Budget,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FailFastFuture(..)")
    }
}
