//! [`BreakerFuture`]: the inner service's future, its outcome recorded by the breaker.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;
use seawall::time::Clock;

use super::{BreakerOpen, Permit};
use crate::client::engine::classify::{Protocol, classify_error, classify_response};
use crate::client::retry::BoxError;

pin_project! {
    #[project = KindProj]
    enum Kind<F, C: Clock> {
        Refused { err: Option<BreakerOpen> },
        Running { #[pin] fut: F, permit: Permit<C>, protocol: Protocol },
    }
}

pin_project! {
    /// The future [`BreakerService`] returns.
    pub struct BreakerFuture<F, C: Clock> {
        #[pin]
        kind: Kind<F, C>,
    }
}

impl<F, C: Clock> fmt::Debug for BreakerFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerFuture").finish_non_exhaustive()
    }
}

impl<F, C: Clock> BreakerFuture<F, C> {
    pub(super) fn refused(err: BreakerOpen) -> Self {
        BreakerFuture { kind: Kind::Refused { err: Some(err) } }
    }

    pub(super) fn running(fut: F, permit: Permit<C>, protocol: Protocol) -> Self {
        BreakerFuture { kind: Kind::Running { fut, permit, protocol } }
    }
}

impl<F, RB, E, C> Future for BreakerFuture<F, C>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
    C: Clock,
{
    type Output = Result<Response<RB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Refused { err } => Poll::Ready(Err(Box::new(
                err.take().expect("BreakerFuture polled after completion"),
            ))),
            KindProj::Running { fut, permit, protocol } => {
                let res = std::task::ready!(fut.poll(cx)).map_err(Into::into);
                // No permit: forced closed, nothing to record.
                let Some(p) = permit.permit.take() else { return Poll::Ready(res) };
                let sh = &permit.shared;
                let class = match &res {
                    Ok(resp) => {
                        classify_response(&sh.classifier, *protocol, resp, || sh.clock.wall_time())
                            .0
                    }
                    Err(e) => classify_error(&**e),
                };
                sh.record(p, !class.is_dependency_failure());
                Poll::Ready(res)
            }
        }
    }
}
