//! [`RetryFuture`]: one logical call through a [`Retry`](super::Retry) service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use seawall::budget::Budget;
use seawall::time::Clock;
use tower_service::Service;

use super::{BoxError, GaveUpError, LastOutcome};
use crate::client::ReplayBody;
use crate::client::engine::attempt::Sending;
use crate::client::engine::timer::{self, Timer};
use crate::client::engine::{Ctx, Shared, Step};

type Output<RB> = Result<Response<RB>, GaveUpError<RB>>;

pin_project! {
    /// The future a [`Retry`](super::Retry) service returns: one logical call, all of its
    /// attempts and waits.
    ///
    /// One state machine, like tower's `retry::ResponseFuture`, whose states carry their data:
    /// the first attempt is asked for, then an attempt is in flight, then (after a failure the
    /// policy retries) the wait with what the failed attempt produced, then the next attempt.
    /// Nothing allocates on the success path; the first wait (an attempt's timeout or the wait
    /// before a retry) allocates the call's one timer, which later waits reuse. Dropping it
    /// abandons the call and returns what it held to the budget and breaker.
    pub struct RetryFuture<S, B, RB, Bu, C>
    where
        S: Service<Request<B>>,
        Bu: Budget,
        C: Clock,
    {
        // The call, started when the service was called. Dropped in this order: the call
        // (abandoned if it has not ended), then the attempt in flight.
        ctx: Ctx<S, B, RB, Bu, C>,
        #[pin]
        state: State<S, B, RB>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateOwned]
    enum State<S, B, RB>
    where
        S: Service<Request<B>>,
    {
        // Not polled yet: the first attempt is asked for on the first poll.
        Start,
        // An attempt in flight.
        Sending { #[pin] sending: Sending<S, B> },
        // The policy's wait before the next attempt, and what the failed attempt produced
        // (the error's content if the next attempt is refused).
        Waiting { timer: Timer, last: LastOutcome<RB> },
        Done,
    }
}

impl<S, B, RB, Bu, C> RetryFuture<S, B, RB, Bu, C>
where
    S: Service<Request<B>>,
    B: ReplayBody,
    Bu: Budget,
    C: Clock,
{
    /// A call of `req` through `svc`, started now: its deadline runs from here.
    pub(crate) fn new(svc: S, shared: Arc<Shared<Bu, C>>, req: Request<B>) -> Self {
        RetryFuture { ctx: Ctx::new(svc, shared, req), state: State::Start }
    }
}

// No `Send` or `'static` bounds: the reqwest middleware drives it through a service that
// borrows the rest of the middleware chain.
impl<S, B, RB, Bu, C> Future for RetryFuture<S, B, RB, Bu, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    B: ReplayBody,
    Bu: Budget,
    C: Clock,
{
    type Output = Output<RB>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let ctx = this.ctx;
        // When the attempt started, if it was sent in this poll.
        let mut sent_at = None;
        loop {
            match this.state.as_mut().project() {
                StateProj::Start => {
                    let at = ctx.started();
                    match ctx.begin(at) {
                        Ok(attempt) => {
                            // Replaced, not `set`: leaving `Start` has nothing to drop.
                            let sending = Sending::new(attempt, at, None);
                            this.state.as_mut().project_replace(State::Sending { sending });
                            sent_at = Some(at);
                        }
                        Err(g) => {
                            this.state.set(State::Done);
                            return Poll::Ready(Err(ctx.give_up(g, LastOutcome::NotSent)));
                        }
                    }
                }
                StateProj::Sending { mut sending } => {
                    let polled = ctx.poll_attempt(sending.as_mut(), cx);
                    // The success path: the response goes straight out, as the service gave it.
                    if let Poll::Ready(Ok(resp)) = &polled
                        && ctx.is_success(resp)
                    {
                        ctx.succeeded(sent_at);
                        this.state.set(State::Done);
                        let Poll::Ready(Ok(resp)) = polled else { unreachable!("matched above") };
                        return Poll::Ready(Ok(resp));
                    }
                    let sent = match polled {
                        Poll::Ready(r) => Some(r.map_err(Into::into)),
                        Poll::Pending => {
                            ready!(sending.as_mut().poll_timeout(|| ctx.now(), cx));
                            None
                        }
                    };
                    match ctx.failed(sent) {
                        Step::Done(r) => {
                            this.state.set(State::Done);
                            return Poll::Ready(r);
                        }
                        Step::Retry { after, last } => {
                            let timer = timer::after(sending.take_timer(), after);
                            this.state.set(State::Waiting { timer, last });
                        }
                    }
                }
                StateProj::Waiting { timer, .. } => {
                    ready!(timer.as_mut().poll(cx));
                    let at = ctx.now();
                    let next = ctx.begin(at);
                    // The wait is over: its timer goes to the next attempt, its outcome to the
                    // error if that attempt is refused.
                    let StateOwned::Waiting { timer, last } =
                        this.state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!("in the Waiting state")
                    };
                    match next {
                        Ok(attempt) => {
                            let sending = Sending::new(attempt, at, Some(timer));
                            this.state.set(State::Sending { sending });
                        }
                        Err(g) => return Poll::Ready(Err(ctx.give_up(g, last))),
                    }
                }
                StateProj::Done => panic!("seawall RetryFuture polled after completion"),
            }
        }
    }
}

impl<S, B, RB, Bu, C> fmt::Debug for RetryFuture<S, B, RB, Bu, C>
where
    S: Service<Request<B>>,
    Bu: Budget,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryFuture(..)")
    }
}

#[cfg(test)]
#[path = "future_tests.rs"]
mod tests;
