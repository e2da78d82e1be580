//! Bodies: a request collected for replay (or, over the limit, sent once as it came), and a
//! response that settles the throttle when its trailers arrive.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use seawall::budget::GrpcThrottle;
use seawall::grpc::{Code, CodeSet, Pushback};

use seawall_tower::client::BoxError;
use seawall_tower::wire::GRPC_RETRY_PUSHBACK_MS;

/// A request body after [`collect`].
pub(super) enum Collected {
    /// The whole body, replayable.
    Whole(Bytes),
    /// Larger than the limit: what was read, then the rest; sendable once (A6: committed).
    Over(tonic::body::Body),
}

/// Reads `body` up to `limit` bytes. Request trailers (gRPC clients send none) are dropped.
pub(super) async fn collect(
    mut body: tonic::body::Body,
    limit: usize,
) -> Result<Collected, BoxError> {
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else { continue };
        buf.extend_from_slice(&data);
        if buf.len() > limit {
            let prefix = Some(buf.freeze());
            return Ok(Collected::Over(tonic::body::Body::new(Prefixed { prefix, rest: body })));
        }
    }
    Ok(Collected::Whole(buf.freeze()))
}

/// The bytes already read, then the rest of the original body.
struct Prefixed {
    prefix: Option<Bytes>,
    rest: tonic::body::Body,
}

impl Body for Prefixed {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        if let Some(p) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(p))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }
}

/// A committed response's body: when its trailers arrive, `OK` gives the throttle
/// `tokenRatio`, a charged code or a "don't retry" pushback takes a token (gRFC A6 counts every
/// RPC, including those that failed after their headers).
pub(super) struct Observed {
    inner: tonic::body::Body,
    throttle: Option<Arc<GrpcThrottle>>,
    charged: Option<CodeSet>,
}

impl Observed {
    pub(super) fn wrap(
        resp: http::Response<tonic::body::Body>,
        throttle: Option<Arc<GrpcThrottle>>,
        charged: Option<CodeSet>,
    ) -> http::Response<tonic::body::Body> {
        if throttle.is_none() {
            return resp;
        }
        resp.map(|inner| tonic::body::Body::new(Observed { inner, throttle, charged }))
    }
}

/// Settles the throttle for one RPC's status (gRFC A6): `OK` +`tokenRatio`; under a policy
/// (`charged` = its retryable or non-fatal codes) a charged code or a "don't retry" pushback −1;
/// anything else, and any failure of a method without a policy, nothing.
pub(super) fn settle(t: &GrpcThrottle, code: Code, pushback: Pushback, charged: Option<CodeSet>) {
    if code == Code::OK {
        t.record_success();
    } else if charged.is_some_and(|c| pushback == Pushback::DontRetry || c.contains(code)) {
        t.record_failure();
    }
}

/// The status and pushback in a header map (response headers or trailers).
pub(super) fn status_of(headers: &http::HeaderMap) -> Option<(Code, Pushback)> {
    let code = Code::from_wire(headers.get("grpc-status")?.as_bytes()).unwrap_or(Code::UNKNOWN);
    let pushback =
        Pushback::from_values(headers.get_all(GRPC_RETRY_PUSHBACK_MS).iter().map(|v| v.as_bytes()));
    Some((code, pushback))
}

impl Body for Observed {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let trailers = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame.trailers_ref().and_then(status_of),
            _ => None,
        };
        // Settled once, at the trailers (data frames leave the throttle in place).
        if let Some(((code, pushback), t)) = trailers.and_then(|s| Some((s, self.throttle.take()?)))
        {
            settle(&t, code, pushback, self.charged);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
