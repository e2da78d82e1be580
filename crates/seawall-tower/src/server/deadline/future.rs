//! [`ResponseFuture`] of [`DeadlineService`](super::DeadlineService): the handler, raced against
//! the deadline.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Response, StatusCode};
use pin_project_lite::pin_project;
use tokio::time::Sleep;

use crate::propagate::Scoped;
use crate::server::metrics::{RejectReason, ServerMetrics};
use crate::server::{problem, response};

pin_project! {
    #[project = KindProj]
    enum Kind<F, B> {
        Immediate { res: Option<Response<B>> },
        Running { #[pin] fut: Scoped<F>, #[pin] sleep: Sleep, metrics: Option<ServerMetrics>, grpc: bool },
    }
}

pin_project! {
    /// The future [`DeadlineService`](super::DeadlineService) returns: the handler's, polled
    /// inside the request's [`propagate::scope`](crate::propagate::scope). Dropping the handler
    /// future when the deadline passes is what cancels the work.
    pub struct ResponseFuture<F, B> {
        #[pin]
        kind: Kind<F, B>,
    }
}

impl<F, B> fmt::Debug for ResponseFuture<F, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, B> ResponseFuture<F, B> {
    pub(super) fn immediate(res: Response<B>) -> Self {
        ResponseFuture { kind: Kind::Immediate { res: Some(res) } }
    }

    pub(super) fn running(
        fut: Scoped<F>,
        left: std::time::Duration,
        metrics: Option<ServerMetrics>,
        grpc: bool,
    ) -> Self {
        ResponseFuture {
            kind: Kind::Running { fut, sleep: tokio::time::sleep(left), metrics, grpc },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: From<&'static str>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Immediate { res } => {
                Poll::Ready(Ok(res.take().expect("ResponseFuture polled after completion")))
            }
            KindProj::Running { fut, sleep, metrics, grpc } => {
                if let Poll::Ready(res) = fut.poll(cx) {
                    return Poll::Ready(res);
                }
                if sleep.poll(cx).is_ready() {
                    if let Some(m) = metrics {
                        m.reject(RejectReason::DeadlineExpired);
                    }
                    return Poll::Ready(Ok(response::refuse(
                        StatusCode::GATEWAY_TIMEOUT,
                        *grpc,
                        "4",
                        problem::DEADLINE_RUNNING,
                    )));
                }
                Poll::Pending
            }
        }
    }
}
