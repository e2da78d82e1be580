//! The carriers that take reqwest's request and response through the engine unchanged, and the
//! rest of the middleware chain as the `tower::Service` the engine sends attempts through.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Extensions;
use reqwest_middleware::Next;
use tower_service::Service;

use crate::client::ReplayBody;
use crate::wire::RequestDeadline;

/// A `reqwest::Request` through the engine: the engine's `http::Request` holds its method and
/// headers (which the engine reads and stamps) and, as its body, the request itself, headers
/// moved out. Its URI is not filled in: the engine never reads it, and the URL sent is the
/// carried request's.
pub(super) struct Outgoing(reqwest::Request);

impl ReplayBody for Outgoing {
    /// reqwest's own `try_clone`: a reference count for a `Bytes`-backed body, `None` for a
    /// stream. The carried request has no headers, so nothing else of size is copied.
    fn try_replay(&self) -> Option<Self> {
        self.0.try_clone().map(Outgoing)
    }

    fn can_replay(&self) -> bool {
        self.0.body().is_none_or(|b| b.as_bytes().is_some())
    }
}

pub(super) fn outgoing(
    mut req: reqwest::Request,
    deadline: Option<RequestDeadline>,
) -> http::Request<Outgoing> {
    let method = req.method().clone();
    let headers = std::mem::take(req.headers_mut());
    let mut out = http::Request::new(Outgoing(req));
    *out.method_mut() = method;
    *out.headers_mut() = headers;
    if let Some(d) = deadline {
        out.extensions_mut().insert(d);
    }
    out
}

/// A `reqwest::Response` through the engine, the other way round: status and headers (which the
/// engine classifies) in the `http::Response`, the response itself, unread, as its body, with
/// the extensions its attempt ended with.
pub(super) struct Incoming {
    resp: reqwest::Response,
    extensions: Extensions,
}

/// The response for the caller: headers back in place, the attempt's extensions merged into the
/// call's.
pub(super) fn incoming(resp: http::Response<Incoming>, call: &mut Extensions) -> reqwest::Response {
    let (parts, Incoming { mut resp, extensions }) = resp.into_parts();
    *resp.headers_mut() = parts.headers;
    call.extend(extensions);
    resp
}

/// The rest of the middleware chain as the `tower::Service` the engine sends attempts through.
/// Each attempt gets its own copy of the call's extensions.
pub(super) struct NextService<'a> {
    pub(super) next: Next<'a>,
    pub(super) extensions: Extensions,
}

type NextFuture<'a> = Pin<
    Box<
        dyn Future<Output = Result<http::Response<Incoming>, reqwest_middleware::Error>>
            + Send
            + 'a,
    >,
>;

impl<'a> Service<http::Request<Outgoing>> for NextService<'a> {
    type Response = http::Response<Incoming>;
    type Error = reqwest_middleware::Error;
    type Future = NextFuture<'a>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Outgoing>) -> Self::Future {
        let (parts, Outgoing(mut req)) = req.into_parts();
        *req.headers_mut() = parts.headers;
        let next = self.next.clone();
        let mut extensions = self.extensions.clone();
        Box::pin(async move {
            let mut resp = next.run(req, &mut extensions).await?;
            let headers = std::mem::take(resp.headers_mut());
            let status = resp.status();
            let mut out = http::Response::new(Incoming { resp, extensions });
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok(out)
        })
    }
}
