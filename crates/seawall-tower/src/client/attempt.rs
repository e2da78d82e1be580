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
use seawall::time::{Clock, Instant, SystemClock};
use tower_service::Service;

use crate::client::timer;

pin_project! {
    /// Not sent yet (waiting for the service to be ready), then the service's future.
    #[project = InnerProj]
    enum Inner<F> {
        Unsent,
        Called { #[pin] fut: F },
    }
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
        // The call's timer has been set to this attempt's timeout.
        timing: bool,
    }
}

impl<S, B> Sending<S, B>
where
    S: Service<Request<B>>,
{
    /// An attempt, to be [`arm`](Self::arm)ed before it is polled.
    #[inline]
    pub(crate) fn new() -> Self {
        let (span, attempt, at) = (tracing::Span::none(), Attempt::default(), Instant::ZERO);
        Sending { inner: Inner::Unsent, span, attempt, at, timing: false }
    }

    /// Sets up the attempt that the policy allowed `at`.
    #[inline(always)]
    pub(crate) fn arm(self: Pin<&mut Self>, attempt: Attempt, at: Instant) {
        let span = tracing::debug_span!(
            "seawall.client.attempt",
            seawall.attempt = attempt.number(),
            http.request.resend_count = tracing::field::Empty,
        );
        if attempt.is_retry() {
            span.record("http.request.resend_count", attempt.number() - 1);
        }
        let this = self.project();
        // A new attempt's span is none already: with no subscriber there is nothing to store.
        debug_assert!(this.span.is_none(), "armed once, after `new`");
        if !span.is_none() {
            *this.span = span;
        }
        (*this.attempt, *this.at) = (attempt, at);
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

    /// Whether the attempt has run out of time (never, without a timeout), on the call's
    /// `timer`: set, holding `idle`, the first time it is asked, for what is left of the
    /// timeout (time spent in the first poll counts).
    pub(crate) fn poll_timeout<T>(
        self: Pin<&mut Self>,
        timer: &mut timer::Slot<T>,
        idle: impl FnOnce() -> T,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let this = self.project();
        let Some(t) = this.attempt.timeout() else { return Poll::Pending };
        if !*this.timing {
            let left = t.saturating_sub(SystemClock.now() - *this.at);
            timer::set(timer, left, idle());
            *this.timing = true;
        }
        match timer {
            Some(timer) => timer.as_mut().poll_fired(cx),
            None => Poll::Pending,
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
