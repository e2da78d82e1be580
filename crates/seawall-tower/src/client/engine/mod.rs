//! What both layers do around each attempt: the core policy decides, this adapter stamps,
//! classifies and keeps the call's state between attempts ([`Ctx`]), the call's request among it.
//! The sending itself is in `attempt.rs`, the future that drives a call in `retry/future.rs`.
//! Every clock read goes through the layer's clock (`Shared::clock`).

pub(crate) mod attempt;
pub(crate) mod body;
pub(crate) mod breaker_open;
pub(crate) mod classify;
pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod overload;
pub(crate) mod timer;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Request, Response};
use seawall::budget::Budget;
use seawall::classify::{Class, HttpClassifier, Transient};
use seawall::deadline::{Deadline, encode_grpc_timeout, parse_grpc_timeout};
use seawall::hint::Hint;
use seawall::policy::{
    Attempt, Call, Decision, GiveUp, GiveUpReason, RequestInfo, RetryPolicy, Role,
};
use seawall::time::{Clock, Instant};

use crate::client::engine::attempt::Sending;
use crate::client::engine::body::{ReplayBody, replay_head};
use crate::client::engine::classify::{
    Protocol, RequestHeaders, classify_error, classify_response,
};
use crate::client::metrics::ClientMetrics;
use crate::wire::{
    GRPC_PREVIOUS_RPC_ATTEMPTS, GRPC_TIMEOUT, IDEMPOTENCY_KEY, REQUEST_ATTEMPT, REQUEST_TIMEOUT_MS,
    RequestDeadline,
};
use error::{BoxError, GaveUpError, LastOutcome};

/// Settings shared by every call through one layer.
#[derive(Debug)]
pub(crate) struct Shared<Bu, C> {
    pub(crate) policy: Arc<RetryPolicy<Bu>>,
    /// Fixed by the layer's type: a `RetryLayer` owns retries, a `FailFastLayer` fails fast.
    pub(crate) role: Role,
    /// The most attempts a call may make in this role (the policy's cap, or 1 failing fast),
    /// worked out once for the layer.
    pub(crate) max_attempts: u32,
    pub(crate) clock: C,
    pub(crate) classifier: HttpClassifier,
    pub(crate) default_timeout: Option<Duration>,
    pub(crate) timeout_header: TimeoutHeader,
    pub(crate) stamp_keys: bool,
    pub(crate) metrics: Option<Arc<ClientMetrics>>,
}

impl<Bu, C: Clone> Clone for Shared<Bu, C> {
    fn clone(&self) -> Self {
        self.with_clock(self.clock.clone())
    }
}

impl<Bu, C> Shared<Bu, C> {
    /// The same settings on another clock.
    pub(crate) fn with_clock<C2>(&self, clock: C2) -> Shared<Bu, C2> {
        Shared {
            policy: self.policy.clone(),
            role: self.role,
            max_attempts: self.max_attempts,
            clock,
            classifier: self.classifier,
            default_timeout: self.default_timeout,
            timeout_header: self.timeout_header.clone(),
            stamp_keys: self.stamp_keys,
            metrics: self.metrics.clone(),
        }
    }
}

/// One logical call between attempts: the policy's per-call state and the call's request. Built,
/// and started, when the service is called ([`new`](Self::new)): the deadline's clock runs
/// from then, as with `tower::timeout`.
///
/// The request stays here, as the caller gave it but for the attempt headers seawall stamps
/// (each attempt's replace the last's), and each attempt is sent a copy of it, made when the
/// service is ready and carrying that attempt's headers; the last attempt the call may make
/// (and a request whose body cannot be replayed) is sent the request itself. So a
/// retry's copy is the one a success needed anyway, as with `tower::retry`, and nothing is moved
/// out of the future but what the service takes. Dropping a call before it has ended abandons
/// it, which returns what it held to the budget and breaker.
pub(crate) struct Ctx<S, B, RB, Bu: Budget, C: Clock> {
    svc: S,
    shared: Arc<Shared<Bu, C>>,
    call: Call,
    /// `None` once an attempt was sent the request itself; the policy is then told that the
    /// call cannot retry ([`RetryPolicy::cancel_retry`]) before any further attempt.
    req: Option<Request<B>>,
    protocol: Protocol,
    /// Attempts may be sent copies of `req` (its body can be replayed and a retry is allowed).
    replayable: bool,
    started: Instant,
    _response: std::marker::PhantomData<fn() -> RB>,
}

impl<S, B, RB, Bu: Budget, C: Clock> Drop for Ctx<S, B, RB, Bu, C> {
    fn drop(&mut self) {
        if !self.call.is_finished() {
            self.shared.policy.abandon(&mut self.call, self.shared.clock.now());
        }
    }
}

/// What comes after an attempt. Returned and matched at once, never stored.
pub(crate) enum Step<RB> {
    /// The call is over.
    Done(Result<Response<RB>, GaveUpError<RB>>),
    /// Wait `after`, then send the next attempt; `last` is what the failed attempt produced.
    Retry { after: Duration, last: LastOutcome<RB> },
}

/// An attempt's result: the response or transport error (boxed: the failure path), `None` if it
/// timed out.
pub(crate) type Sent<RB> = Option<Result<Response<RB>, BoxError>>;

impl<S, B: ReplayBody, RB, Bu: Budget, C: Clock> Ctx<S, B, RB, Bu, C> {
    /// Starts the logical call of `req` through `svc` (stamping an idempotency key on its
    /// request if configured). The call's first attempt is asked for at the same instant
    /// ([`started`](Self::started)): one clock read serves both.
    #[inline]
    pub(crate) fn new(svc: S, shared: Arc<Shared<Bu, C>>, mut req: Request<B>) -> Self {
        let policy = &*shared.policy;
        let started = shared.clock.now();
        // The request's own deadline, else the one of the request the task is serving; as an
        // instant of this layer's clock (the time left, if it was made on another).
        let clock = &shared.clock;
        let inherited = req
            .extensions()
            .get::<RequestDeadline>()
            .map(|d| d.for_clock(clock, started))
            .or_else(|| crate::propagate::current_for(clock, started));
        let deadline =
            inherited.or_else(|| shared.default_timeout.map(|t| Deadline::after(started, t)));
        // One pass over the headers (none for a header-less request) instead of a hashed lookup
        // for each thing the call needs to know.
        let headers = RequestHeaders::scan(req.headers(), req.method());
        let protocol = headers.protocol;

        // `http::Method::is_idempotent` is seawall's list (GET, HEAD, PUT, DELETE, OPTIONS,
        // TRACE) as an enum match; only other methods need the key, and the header lookup.
        let idempotent = req.method().is_idempotent();
        let mut has_key = !idempotent && headers.has_key;
        if shared.stamp_keys && !idempotent && !has_key {
            let key = uuid::Uuid::new_v4().hyphenated().to_string();
            if let Ok(v) = HeaderValue::try_from(key) {
                req.headers_mut().insert(IDEMPOTENCY_KEY, v);
                has_key = true;
            }
        }
        // A number the request already carries (copied from an incoming request, say) is not
        // this call's: it goes, and retries stamp their own.
        if headers.has_attempt && protocol == Protocol::Http {
            req.headers_mut().remove(REQUEST_ATTEMPT);
        }
        let max_attempts = shared.max_attempts;
        // For `Bytes`-like bodies the copies are reference counts, plus the header map when
        // there is one.
        let replayable = max_attempts > 1 && req.body().can_replay();
        // A body that cannot be replayed is sent once: tell the policy it is not safe to resend.
        let info = if max_attempts > 1 && !replayable {
            RequestInfo::send_once()
        } else if idempotent || has_key {
            RequestInfo::idempotent()
        } else {
            RequestInfo::non_idempotent()
        };
        let call = policy.start_as(shared.role, started, info, deadline);
        Ctx {
            svc,
            shared,
            call,
            req: Some(req),
            protocol,
            replayable,
            started,
            _response: std::marker::PhantomData,
        }
    }

    /// When the call started.
    #[inline(always)]
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The layer's clock, read now.
    #[inline(always)]
    pub(crate) fn now(&self) -> Instant {
        self.shared.clock.now()
    }

    /// The error for a call the policy gave up on, with what the last attempt produced.
    pub(crate) fn give_up(&self, g: GiveUp, last: LastOutcome<RB>) -> GaveUpError<RB> {
        // The policy counted the give-up; the view's breaker gauge is set here.
        if let Some(m) = &self.shared.metrics
            && let Some(b) = self.shared.policy.breaker()
        {
            m.breaker_state(b.state(self.now()));
        }
        let (reason, overloaded) = (g.reason().as_str(), g.is_overloaded());
        tracing::debug!(reason, overloaded, "seawall: gave up");
        GaveUpError::new(g, self.call.attempts(), self.protocol == Protocol::Grpc, last)
    }

    /// Asks the policy whether the next attempt may start `at`. On a refusal the call is over:
    /// report it with [`give_up`](Self::give_up).
    #[inline(always)]
    pub(crate) fn begin(&mut self, at: Instant) -> Result<Attempt, GiveUp> {
        self.shared.policy.before_attempt(&mut self.call, at)
    }

    /// Drives the attempt `sending` (see [`Sending::poll_send`]). Its request is made when the
    /// service is ready: a copy of the call's request, or the request itself for the last
    /// attempt the call may make, stamped with the attempt's headers.
    #[inline(always)]
    pub(crate) fn poll_attempt(
        &mut self,
        sending: Pin<&mut Sending<S, B>>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response<RB>, S::Error>>
    where
        S: tower_service::Service<Request<B>, Response = Response<RB>>,
    {
        let Ctx { svc, shared, req, protocol, replayable, .. } = self;
        sending.poll_send(svc, cx, |svc, attempt| {
            let cached = &shared.timeout_header;
            // Each request is built, stamped and handed over in one place (no copies of it).
            if *replayable
                && attempt.number() < shared.max_attempts
                && let Some(original) = req.as_mut()
                && let Some(body) = original.body().try_replay()
            {
                // The attempt's headers go where there is room for them. A cloned header map
                // has exactly as many entries as the original, so stamping the copy would grow
                // it (a reallocation and a copy of the entries, ~650 instructions, on every
                // attempt of a call with a deadline); stamped first, the call's request (whose
                // map has room, or grows once for the whole call) is cloned with the attempt's
                // headers in it. Stamping replaces values, so a later attempt's numbers
                // overwrite an earlier one's. A header-less request is stamped after it is
                // copied: its map would be allocated only to be cloned.
                let in_place = !original.headers().is_empty();
                if in_place {
                    stamp(original, *protocol, attempt, cached);
                }
                let mut r = Request::new(body);
                replay_head(original, &mut r);
                if !in_place {
                    stamp(&mut r, *protocol, attempt, cached);
                }
                return svc.call(r);
            }
            let mut r = req.take().expect("the request is kept until the last attempt");
            stamp(&mut r, *protocol, attempt, cached);
            svc.call(r)
        })
    }

    /// The class and hint of a response.
    #[inline]
    pub(crate) fn classify(&self, resp: &Response<RB>) -> (Class, Hint) {
        let clock = &self.shared.clock;
        classify_response(&self.shared.classifier, self.protocol, resp, || clock.wall_time())
    }

    /// Whether [`classify`](Self::classify) calls `resp` a success: for HTTP the status alone
    /// says so, without looking at the headers.
    #[inline(always)]
    pub(crate) fn is_success(&self, resp: &Response<RB>) -> bool {
        match self.protocol {
            Protocol::Http => {
                self.shared.classifier.classify(resp.status().as_u16()) == Class::Success
            }
            Protocol::Grpc => self.classify(resp).0 == Class::Success,
        }
    }

    /// Reports a successful attempt (a response [`classify`](Self::classify) calls
    /// [`Class::Success`]): the call is over.
    /// `sent_at` is when the attempt started if the response came within the very poll that
    /// sent it.
    #[inline]
    pub(crate) fn succeeded(&mut self, sent_at: Option<Instant>) {
        let shared = &*self.shared;
        // A success that came back within the poll that sent it is recorded at the attempt's
        // start, which differs from its end by the service's synchronous work only: one clock
        // read for the whole call. Failures (their deadline and backoff) and the duration
        // histogram get the real end.
        let now = match sent_at {
            Some(at) if shared.metrics.is_none() => at,
            _ => shared.clock.now(),
        };
        let decision = shared.policy.after_attempt(&mut self.call, now, Class::Success, Hint::None);
        // An attempt in flight that succeeded always ends the call with a success.
        debug_assert_eq!(decision, Decision::Success);
        if let Some(m) = &shared.metrics {
            m.succeeded(shared.policy.metrics(), now - self.started);
        }
    }

    /// Reports an attempt that did not succeed (anything but a response
    /// [`classify`](Self::classify) calls a success): the call's end, or the wait and the
    /// request for the next attempt.
    pub(crate) fn failed(&mut self, result: Sent<RB>) -> Step<RB> {
        let (class, hint) = match &result {
            Some(Ok(resp)) => self.classify(resp),
            Some(Err(e)) => (classify_error(&**e), Hint::None),
            None => (Class::Retryable(Transient::Timeout), Hint::None),
        };
        let shared = &*self.shared;
        let call = &mut self.call;
        let outcome = match result {
            Some(Ok(resp)) => LastOutcome::Response(resp),
            Some(Err(e)) => LastOutcome::Error(e),
            None => LastOutcome::TimedOut,
        };
        let now = shared.clock.now();
        let policy = &*shared.policy;
        match policy.after_attempt(call, now, class, hint) {
            Decision::Success => match outcome {
                // A response the classifier calls a success (the fast path, `succeeded`,
                // takes most of them).
                LastOutcome::Response(resp) => Step::Done(Ok(resp)),
                // The policy answers `Success` only to `Class::Success`, which `classify_error`
                // and a timeout never are.
                _ => unreachable!("a transport failure classed as a success"),
            },
            Decision::GiveUp(g) => match outcome {
                // A 404 or 400 is the caller's answer, not a failure of the dependency.
                LastOutcome::Response(resp) if g.reason() == GiveUpReason::NotRetryable => {
                    Step::Done(Ok(resp))
                }
                other => Step::Done(Err(self.give_up(g, other))),
            },
            Decision::Retry { after } => {
                if self.req.is_none() {
                    // The request went with an attempt (a body whose copy failed although it
                    // said it could be replayed): it cannot be resent. The policy ends the
                    // call as not replayable, and every counter says so.
                    let g = policy.cancel_retry(call, now);
                    return Step::Done(Err(self.give_up(g, outcome)));
                }
                tracing::debug!(wait_ms = after.as_millis() as u64, "seawall: retrying");
                Step::Retry { after, last: outcome }
            }
        }
    }
}

/// `HeaderValue`s for small counts, built without allocating (`HeaderValue::from(n)` allocates).
static SMALL: [HeaderValue; 11] = [
    HeaderValue::from_static("0"),
    HeaderValue::from_static("1"),
    HeaderValue::from_static("2"),
    HeaderValue::from_static("3"),
    HeaderValue::from_static("4"),
    HeaderValue::from_static("5"),
    HeaderValue::from_static("6"),
    HeaderValue::from_static("7"),
    HeaderValue::from_static("8"),
    HeaderValue::from_static("9"),
    HeaderValue::from_static("10"),
];

fn small(n: u32) -> HeaderValue {
    match SMALL.get(n as usize) {
        Some(v) => v.clone(),
        None => HeaderValue::from(n),
    }
}

#[inline(always)]
fn stamp<B>(req: &mut Request<B>, protocol: Protocol, attempt: &Attempt, cached: &TimeoutHeader) {
    let n = attempt.number();
    let h = req.headers_mut();
    match protocol {
        Protocol::Http => {
            // An absent `Request-Attempt` is a first attempt (wire convention; every seawall
            // server reads it so): stamping "1" would allocate the header map of a header-less
            // request for nothing.
            if n > 1 {
                h.insert(REQUEST_ATTEMPT, small(n));
            }
            if let Some(left) = attempt.time_left() {
                let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).min(9_999_999_999);
                h.insert(REQUEST_TIMEOUT_MS, cached.value(ms));
            }
        }
        Protocol::Grpc => {
            if n > 1 {
                h.insert(GRPC_PREVIOUS_RPC_ATTEMPTS, small(n - 1));
            }
            if let Some(left) = attempt.time_left() {
                let theirs = h
                    .get(GRPC_TIMEOUT)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_grpc_timeout(v).ok());
                let left = theirs.map_or(left, |t| t.min(left));
                if let Ok(v) = HeaderValue::try_from(encode_grpc_timeout(left)) {
                    h.insert(GRPC_TIMEOUT, v);
                }
            }
        }
    }
}

/// The `Request-Timeout-Ms` value of the layer's default timeout, built once: the first attempt
/// of a call that inherits no deadline carries exactly it (the call's start and the attempt's
/// share one clock read), so the common case clones a shared value instead of allocating one.
#[derive(Debug, Clone, Default)]
pub(crate) struct TimeoutHeader(Option<(u64, HeaderValue)>);

impl TimeoutHeader {
    pub(crate) fn new(timeout: Option<Duration>) -> Self {
        TimeoutHeader(timeout.map(|t| {
            let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX).min(9_999_999_999);
            (ms, HeaderValue::from(ms))
        }))
    }

    fn value(&self, ms: u64) -> HeaderValue {
        match &self.0 {
            Some((cached, v)) if *cached == ms => v.clone(),
            _ => HeaderValue::from(ms),
        }
    }
}
