//! One attempt on the wire: wait for the inner service to be ready, call it, and cut the attempt
//! off at its timeout.
//!
//! # Why a hand-written future
//!
//! On the success path a healthy dependency often answers on the first poll (a pooled
//! connection, a cache, an in-process service), and then the layer's own cost is all that is
//! left to measure. So nothing here allocates until the attempt actually has to wait: the call's
//! timer (`timer.rs`) is set only after the first poll that returns `Pending`, for what is left
//! of the attempt's timeout, and the attempt's tracing span is entered only when a subscriber
//! wants it (entering `Span::none()` is a branch).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Request;
use pin_project_lite::pin_project;
use seawall::policy::Attempt;
use seawall::time::Instant;
use tower_service::Service;

use crate::client::engine::timer::{self, Timer};

pin_project! {
    /// Not sent yet (waiting for the service to be ready), then the service's future.
    #[project = InnerProj]
    enum Inner<F> {
        Unsent,
        Called { #[pin] fut: F },
    }
}

/// The attempt's timeout: not set yet (with the timer a previous wait left, if any), or set.
enum Timeout {
    Unset(Option<Timer>),
    Set(Timer),
}

pin_project! {
    /// One attempt in flight. Poll it with the service it is sent through and what calls the
    /// service: the request is made only once the service is ready to take it.
    pub(crate) struct Sending<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        inner: Inner<S::Future>,
        span: tracing::Span,
        attempt: Attempt,
        at: Instant,
        timeout: Timeout,
    }
}

impl<S, B> Sending<S, B>
where
    S: Service<Request<B>>,
{
    /// The attempt that the policy allowed `at`; `spare` is the call's timer, if an earlier
    /// wait allocated it.
    #[inline(always)]
    pub(crate) fn new(attempt: Attempt, at: Instant, spare: Option<Timer>) -> Self {
        let span = tracing::debug_span!(
            "seawall.client.attempt",
            seawall.attempt = attempt.number(),
            http.request.resend_count = tracing::field::Empty,
        );
        if attempt.is_retry() {
            span.record("http.request.resend_count", attempt.number() - 1);
        }
        Sending { inner: Inner::Unsent, span, attempt, at, timeout: Timeout::Unset(spare) }
    }

    /// The call's timer, for the wait after this attempt (`None` if it never had to wait).
    pub(crate) fn take_timer(self: Pin<&mut Self>) -> Option<Timer> {
        match std::mem::replace(self.project().timeout, Timeout::Unset(None)) {
            Timeout::Unset(spare) => spare,
            Timeout::Set(timer) => Some(timer),
        }
    }

    /// Drives the attempt. Once `svc` is ready, `call` builds the attempt's request and calls it
    /// (the request is built where the call takes it: a request is a few hundred bytes, and
    /// returning it would copy it). The service's result is passed as it is (wrapping it, like
    /// any change of its type, would copy the response); when this is pending, ask
    /// [`poll_timeout`](Self::poll_timeout).
    #[inline(always)]
    pub(crate) fn poll_send(
        self: Pin<&mut Self>,
        svc: &mut S,
        cx: &mut Context<'_>,
        call: impl FnOnce(&mut S, &Attempt) -> S::Future,
    ) -> Poll<Result<S::Response, S::Error>> {
        let this = self.project();
        let _entered = this.span.enter();
        let attempt = this.attempt;
        poll_inner(this.inner, svc, cx, |svc| call(svc, attempt))
    }

    /// Whether the attempt has run out of time (never, without a timeout). The timer is set
    /// the first time it is asked, for what is left of the timeout at `now` (a clock read:
    /// time spent in the first poll counts).
    pub(crate) fn poll_timeout(
        self: Pin<&mut Self>,
        now: impl FnOnce() -> Instant,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let this = self.project();
        let Some(t) = this.attempt.timeout() else { return Poll::Pending };
        if let Timeout::Unset(spare) = this.timeout {
            let left = t.saturating_sub(now() - *this.at);
            *this.timeout = Timeout::Set(timer::after(spare.take(), left));
        }
        match this.timeout {
            Timeout::Set(timer) => timer.as_mut().poll(cx),
            Timeout::Unset(_) => Poll::Pending,
        }
    }
}

#[inline(always)]
fn poll_inner<S: Service<Request<B>>, B>(
    mut inner: Pin<&mut Inner<S::Future>>,
    svc: &mut S,
    cx: &mut Context<'_>,
    call: impl FnOnce(&mut S) -> S::Future,
) -> Poll<Result<S::Response, S::Error>> {
    if let InnerProj::Unsent = inner.as_mut().project() {
        if let Err(e) = ready!(svc.poll_ready(cx)) {
            return Poll::Ready(Err(e));
        }
        inner.set(Inner::Called { fut: call(svc) });
    }
    match inner.project() {
        InnerProj::Called { fut } => fut.poll(cx),
        InnerProj::Unsent => unreachable!("called above"),
    }
}
