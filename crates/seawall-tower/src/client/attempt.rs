//! One attempt on the wire: wait for the inner service to be ready, call it, and cut the attempt
//! off at its timeout.
//!
//! # Why a hand-written future
//!
//! On the success path a healthy dependency often answers on the first poll (a pooled
//! connection, a cache, an in-process service), and then the layer's own cost is all that is
//! left to measure. So nothing here allocates until the attempt actually has to wait: the timer
//! is armed (boxed, it is large) only after the first poll that returns `Pending`, for what is
//! left of the attempt's timeout, and the attempt's tracing span is entered only when a
//! subscriber wants it (entering `Span::none()` is a branch).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::Request;
use pin_project_lite::pin_project;
use seawall::policy::Attempt;
use seawall::time::{Clock, Instant, SystemClock};
use tower_service::Service;

pin_project! {
    /// The request until the service is ready and takes it, then the service's future: the two
    /// share their space.
    #[project = InnerProj]
    enum Inner<B, F> {
        Waiting { req: Option<Request<B>> },
        Called { #[pin] fut: F },
    }
}

pin_project! {
    /// One attempt in flight, with its request until the service takes it. Poll it with the
    /// service it is sent through.
    pub(crate) struct Sending<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        inner: Inner<B, S::Future>,
        span: tracing::Span,
        timeout: Option<Duration>,
        at: Instant,
        timer: Option<Pin<Box<tokio::time::Sleep>>>,
    }
}

impl<S, B> Sending<S, B>
where
    S: Service<Request<B>>,
{
    /// An attempt of `req`, to be [`arm`](Self::arm)ed before it is polled.
    #[inline]
    pub(crate) fn new(req: Request<B>) -> Self {
        let (span, timeout, at) = (tracing::Span::none(), None, Instant::ZERO);
        Sending { inner: Inner::Waiting { req: Some(req) }, span, timeout, at, timer: None }
    }

    /// The request, until the service has taken it.
    #[inline]
    pub(crate) fn request_mut(self: Pin<&mut Self>) -> Option<&mut Request<B>> {
        match self.project().inner.project() {
            InnerProj::Waiting { req } => req.as_mut(),
            InnerProj::Called { .. } => None,
        }
    }

    /// Sets up the attempt that the policy allowed `at`.
    #[inline(always)]
    pub(crate) fn arm(self: Pin<&mut Self>, attempt: &Attempt, at: Instant) {
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
        (*this.timeout, *this.at) = (attempt.timeout(), at);
    }

    /// Drives the attempt: `None` when it timed out. The service's error is passed as it is
    /// (boxing it, like any change of the result's type, would copy the response).
    #[inline(always)]
    pub(crate) fn poll_send(
        self: Pin<&mut Self>,
        svc: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<S::Response, S::Error>>> {
        let mut this = self.project();
        let sent = {
            let _entered = this.span.enter();
            poll_inner(this.inner.as_mut(), svc, cx)
        };
        if let Poll::Ready(r) = sent {
            return Poll::Ready(Some(r));
        }
        let Some(t) = *this.timeout else { return Poll::Pending };
        let timer = this.timer.get_or_insert_with(|| {
            // What is left of the timeout: time spent in the first poll counts.
            let left = t.saturating_sub(SystemClock.now() - *this.at);
            Box::pin(tokio::time::sleep(left))
        });
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(None)
    }
}

#[inline(always)]
fn poll_inner<S: Service<Request<B>>, B>(
    mut inner: Pin<&mut Inner<B, S::Future>>,
    svc: &mut S,
    cx: &mut Context<'_>,
) -> Poll<Result<S::Response, S::Error>> {
    loop {
        match inner.as_mut().project() {
            InnerProj::Waiting { req } => {
                if let Err(e) = ready!(svc.poll_ready(cx)) {
                    return Poll::Ready(Err(e));
                }
                let req = req.take().expect("one request per attempt");
                inner.set(Inner::Called { fut: svc.call(req) });
            }
            InnerProj::Called { fut } => return fut.poll(cx),
        }
    }
}
