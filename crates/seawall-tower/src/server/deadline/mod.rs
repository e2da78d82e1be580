//! [`DeadlineLayer`]: the caller's remaining time, enforced on the server.
//!
//! # Why deadlines on the server
//!
//! A caller that timed out has gone, but a server that does not know keeps building its answer: in
//! a retry storm most of the work a server does is for callers that already left (the Google SRE
//! book, "Addressing Cascading Failures"). So the caller sends the time it has left
//! (`Request-Timeout-Ms` or `grpc-timeout`), and this layer:
//!
//! 1. parses it strictly ([`seawall::deadline`]), clamps it to the server's maximum (a caller
//!    cannot make a server work longer than it allows) and uses the server's default when the
//!    header is absent;
//! 2. puts a [`RequestDeadline`] into the request extensions, so the `ShedLayer` drops the request
//!    if it expires while queued, and runs the handler inside the deadline's
//!    [`propagate::scope`], so the client layers read it for every
//!    outgoing call the handler makes and send the time remaining further down — the handler
//!    does not copy it (see [Propagation](#propagation));
//! 3. answers `504 Gateway Timeout` (gRPC `DEADLINE_EXCEEDED`) at the deadline and **drops the
//!    handler future**, which cancels the work at its next `.await`. A caller that disconnects is
//!    handled the same way by hyper, which drops the future of a closed connection.
//!
//! # Malformed and extreme values
//!
//! Values are untrusted. The documented behaviour, tested below (`resolves_clamps_and_defaults`)
//! and in `tests/server_parsers_proptest.rs`:
//!
//! | header value | result |
//! |---|---|
//! | absent | the server default (15 s unless configured) |
//! | `250` | 250 ms (clamped to the server maximum) |
//! | `0` | already expired: 504 at once, the handler never runs |
//! | more than 10 digits | longer than any server maximum: clamped to the maximum |
//! | `-5`, `+5`, `5 5`, `5.0`, `1e3`, empty, non-ASCII, the header twice | [`MalformedTimeout::Reject`] (default): `400 Bad Request`; [`MalformedTimeout::Ignore`]: treated as absent |
//!
//! Whitespace around a value is not part of it (RFC 9110 §5.5: HTTP parsers, hyper's included,
//! strip it), so ` 5` arrives as `5`: 5 ms.
//!
//! A malformed header is rejected by default because a caller that sends one has a bug that
//! silently dropping its deadline would hide, and a 400 is never retried.
//!
//! # Propagation
//!
//! The handler's future — and the inner service's `call`, for services that build their future
//! eagerly — runs inside [`propagate::scope`] with the request's
//! deadline. `RetryLayer`, `FailFastLayer` (and so the reqwest and gRPC adapters, which sit under
//! them) use it for an outgoing request that carries no [`RequestDeadline`] of its own: the
//! edge stamps one deadline and every hop below gets the time remaining, with nothing for a
//! handler to copy. A `RequestDeadline` put on an outgoing request by hand wins over the scope.
//! The deadline keeps this layer's clock: a client layer built on another clock reads its time
//! left rather than its instant (see [`RequestDeadline`]'s docs for why).
//!
//! The scope follows the handler's future, not its thread: work handed to `tokio::spawn` leaves
//! it. Carry it along when the spawned work makes calls on the request's behalf:
//!
//! ```
//! use seawall_tower::propagate;
//!
//! # async fn outgoing_call() {}
//! async fn handler() {
//!     let work = async { outgoing_call().await };
//!     match propagate::current() {
//!         Some(deadline) => tokio::spawn(propagate::scope(deadline, work)),
//!         None => tokio::spawn(work),
//!     };
//! }
//! ```
//!
//! Cancellation follows the same path: at the deadline (or when hyper drops the future of a
//! closed connection) the handler future is dropped, and with it every outgoing call it was
//! awaiting — which closes their connections, so the tier below drops its work in turn. A
//! spawned task is not dropped with the handler; keep its `JoinHandle` and abort it, or don't
//! spawn work that belongs to the request.
//!
//! Handlers read the time left with [`time_left`] (or the [`TimeLeft`] axum extractor, feature
//! `axum`).
//!
//! The deadline timer needs a tokio runtime with the time driver enabled. The layer reads the
//! time from its clock ([`DeadlineLayer::with_clock`]; `time::TokioClock` for virtual time).

mod future;
mod layer;
mod time_left;

use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use seawall::deadline::{self, Deadline, TimeoutParseError};
use seawall::time::{Clock, Instant, SystemClock};
use tower_service::Service;

pub use future::ResponseFuture;
pub use layer::{DEFAULT_MAX, DEFAULT_TIMEOUT, DeadlineLayer, MalformedTimeout};
#[cfg(feature = "axum")]
pub use time_left::MissingDeadline;
pub use time_left::{TimeLeft, time_left};

use crate::propagate;
use crate::server::metrics::{RejectReason, ServerMetrics};
use crate::server::{problem, response};
use crate::wire::{self, DeadlineClock, RequestDeadline};

/// Reads the deadline of a request from its headers at `now`: the smaller of `Request-Timeout-Ms`
/// and `grpc-timeout` when present, else `default`; clamped to `max`. A header that is present but
/// malformed (or repeated) is an error (the caller decides whether to reject or ignore it). The
/// rule is the core's, [`seawall::deadline::resolve`], on the headers' values.
pub fn resolve(
    headers: &HeaderMap,
    now: Instant,
    default: Duration,
    max: Duration,
) -> Result<Deadline, TimeoutParseError> {
    let values = |name| headers.get_all(name).into_iter().map(HeaderValue::as_bytes);
    deadline::resolve(
        values(wire::REQUEST_TIMEOUT_MS),
        values(wire::GRPC_TIMEOUT),
        now,
        default,
        max,
    )
}

/// The service [`DeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct DeadlineService<S, C = SystemClock> {
    inner: S,
    default: Duration,
    max: Duration,
    malformed: MalformedTimeout,
    metrics: Option<ServerMetrics>,
    clock: C,
    /// The same clock, as each request's [`RequestDeadline`] carries it (for [`time_left`] in
    /// the handler, and client layers on other clocks).
    stamp: DeadlineClock,
}

impl<S, C, ReqB, ResB> Service<Request<ReqB>> for DeadlineService<S, C>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    C: Clock,
    ResB: From<&'static str>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqB>) -> Self::Future {
        let grpc = response::is_grpc(req.headers());
        let now = self.clock.now();
        let deadline = match resolve(req.headers(), now, self.default, self.max) {
            Ok(d) => d,
            Err(_) if self.malformed == MalformedTimeout::Ignore => {
                Deadline::from_header_timeout(now, self.default, self.max)
            }
            Err(_) => {
                return ResponseFuture::immediate(response::refuse(
                    StatusCode::BAD_REQUEST,
                    grpc,
                    "3",
                    problem::BAD_TIMEOUT,
                ));
            }
        };
        if deadline.is_expired(now) {
            if let Some(m) = &self.metrics {
                m.reject(RejectReason::DeadlineExpired);
            }
            return ResponseFuture::immediate(response::refuse(
                StatusCode::GATEWAY_TIMEOUT,
                grpc,
                "4",
                problem::DEADLINE,
            ));
        }
        let stamped: RequestDeadline = self.stamp.stamp(deadline);
        req.extensions_mut().insert(stamped.clone());
        // The time left by the layer's clock, on tokio's timer (which a `TokioClock` shares).
        let left = deadline.remaining(now);
        // `call` in the scope too: some services make their outgoing requests while building
        // their future.
        let fut = propagate::sync_scope(stamped.clone(), || self.inner.call(req));
        ResponseFuture::running(propagate::scope(stamped, fut), left, self.metrics.clone(), grpc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn h(name: &'static str, v: &[u8]) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(name, HeaderValue::from_bytes(v).unwrap());
        m
    }

    #[test]
    fn resolves_clamps_and_defaults() {
        let now = Instant::ZERO;
        let r = |m: &HeaderMap| resolve(m, now, 15 * S, 60 * S).map(|d| d.remaining(now));
        assert_eq!(r(&HeaderMap::new()), Ok(15 * S));
        assert_eq!(r(&h("request-timeout-ms", b"250")), Ok(Duration::from_millis(250)));
        let mut twice = h("request-timeout-ms", b"250");
        twice.append("request-timeout-ms", http::HeaderValue::from_static("9000"));
        assert_eq!(r(&twice), Err(TimeoutParseError::Repeated));
        let mut twice = h("grpc-timeout", b"2S");
        twice.append("grpc-timeout", http::HeaderValue::from_static("1S"));
        assert_eq!(r(&twice), Err(TimeoutParseError::Repeated));
        assert_eq!(r(&h("request-timeout-ms", b"9999999999")), Ok(60 * S));
        assert_eq!(r(&h("request-timeout-ms", b"99999999999999999999")), Ok(60 * S));
        assert_eq!(r(&h("grpc-timeout", b"2S")), Ok(2 * S));
        assert_eq!(r(&h("request-timeout-ms", b"0")), Ok(Duration::ZERO));
        let mut both = h("request-timeout-ms", b"900");
        both.insert("grpc-timeout", HeaderValue::from_static("300m"));
        assert_eq!(r(&both), Ok(Duration::from_millis(300)));
        for bad in [&b"-5"[..], b"+5", b" 5", b"5.0", b"", b"1e3", b"\xff"] {
            assert!(r(&h("request-timeout-ms", bad)).is_err(), "{bad:?}");
        }
        assert!(r(&h("grpc-timeout", b"5")).is_err());
    }
}
