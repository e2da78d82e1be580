//! [`ResponseFuture`] of [`Shed`](super::Shed): wait for a slot, run, release the slot.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use seawall::admission::{Reason, Ticket};
use seawall::time::{Clock, Instant};
use tokio::sync::oneshot;
use tower_service::Service;

use super::{Grant, Shared};
use crate::server::Dispatch;
use crate::server::metrics::is_success;

/// A slot in the handler; released when the response is ready or the future is dropped.
struct Permit<C: Clock> {
    shared: Arc<Shared<C>>,
    arrived: Instant,
    started: Instant,
    deadline: Option<Instant>,
    done: bool,
}

impl<C: Clock> Permit<C> {
    fn complete(&mut self, status: Option<http::StatusCode>) {
        let now = self.shared.clock.now();
        let in_time = self.deadline.is_none_or(|d| now <= d);
        let good = in_time && status.is_some_and(is_success);
        self.shared.metrics.response(good, now - self.arrived);
        self.done = true;
        self.shared.release(good.then(|| now - self.started));
    }
}

impl<C: Clock> Drop for Permit<C> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.release(None);
        }
    }
}

/// A queued request's place; leaving the queue (dropped while waiting) gives it up cleanly.
struct Queued<C: Clock> {
    shared: Arc<Shared<C>>,
    ticket: Ticket,
    rx: Option<oneshot::Receiver<Grant>>,
}

impl<C: Clock> Drop for Queued<C> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        let now = self.shared.clock.now();
        let mut adm = self.shared.lock();
        if adm.cancel(self.ticket).is_none() {
            // Not queued any more: grants are sent under the lock, so if it was granted the
            // message is already in the channel. Hand the slot on.
            if let Ok(Grant::Run) = rx.try_recv() {
                adm.finish(None);
                self.shared.dispatch(&mut adm, now);
                return;
            }
        }
        self.shared.gauges(&adm, now);
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S: Service<Request<B>>, B, C: Clock> {
        Waiting { queued: Queued<C>, req: Option<Request<B>>, inner: Option<S>, grpc: bool },
        Running { #[pin] fut: S::Future, permit: Permit<C> },
        Done { res: Option<S::Response> },
    }
}

pin_project! {
    /// The future [`Shed`](super::Shed) returns.
    pub struct ResponseFuture<S: Service<Request<B>>, B, C: Clock> {
        #[pin]
        state: State<S, B, C>,
        arrived: Instant,
        deadline: Option<Instant>,
    }
}

impl<S: Service<Request<B>>, B, C: Clock> fmt::Debug for ResponseFuture<S, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S: Service<Request<B>>, B, C: Clock> ResponseFuture<S, B, C> {
    pub(super) fn running(
        fut: S::Future,
        shared: Arc<Shared<C>>,
        now: Instant,
        deadline: Option<Instant>,
    ) -> Self {
        let permit = Permit { shared, arrived: now, started: now, deadline, done: false };
        ResponseFuture { state: State::Running { fut, permit }, arrived: now, deadline }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn waiting(
        shared: Arc<Shared<C>>,
        ticket: Ticket,
        rx: Option<oneshot::Receiver<Grant>>,
        req: Request<B>,
        inner: S,
        now: Instant,
        deadline: Option<Instant>,
        grpc: bool,
    ) -> Self {
        let queued = Queued { shared, ticket, rx };
        let state = State::Waiting { queued, req: Some(req), inner: Some(inner), grpc };
        ResponseFuture { state, arrived: now, deadline }
    }

    pub(super) fn rejected(res: S::Response) -> Self {
        let state = State::Done { res: Some(res) };
        ResponseFuture { state, arrived: Instant::ZERO, deadline: None }
    }
}

impl<S, B, C, ResB> Future for ResponseFuture<S, B, C>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    ResB: From<&'static str>,
    C: Clock,
{
    type Output = Result<Response<ResB>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Waiting { queued, req, inner, grpc } => {
                    let grant = match queued.rx.as_mut() {
                        Some(rx) => ready!(Pin::new(rx).poll(cx)),
                        None => Ok(Grant::Shed(Reason::QueueFull)),
                    };
                    queued.rx = None;
                    let shared = queued.shared.clone();
                    match grant {
                        Ok(Grant::Run) => {
                            let permit = Permit {
                                shared: shared.clone(),
                                arrived: *this.arrived,
                                started: shared.clock.now(),
                                deadline: *this.deadline,
                                done: false,
                            };
                            let (Some(req), Some(mut svc)) = (req.take(), inner.take()) else {
                                // Unreachable in practice (the grant arrives once); the permit's
                                // drop hands the slot on.
                                drop(permit);
                                return Poll::Ready(Ok(shared.reject(Reason::QueueFull, *grpc)));
                            };
                            if let Some(d) = req.extensions().get::<Dispatch>() {
                                d.admitted();
                            }
                            let fut = svc.call(req);
                            this.state.set(State::Running { fut, permit });
                        }
                        Ok(Grant::Shed(reason)) => {
                            return Poll::Ready(Ok(shared.reject(reason, *grpc)));
                        }
                        Err(_) => {
                            return Poll::Ready(Ok(shared.reject(Reason::QueueFull, *grpc)));
                        }
                    }
                }
                StateProj::Running { fut, permit } => {
                    let res = ready!(fut.poll(cx));
                    permit.complete(res.as_ref().ok().map(|r| r.status()));
                    return Poll::Ready(res);
                }
                StateProj::Done { res } => {
                    let res = res.take().expect("ResponseFuture polled after completion");
                    return Poll::Ready(Ok(res));
                }
            }
        }
    }
}
