//! What both layers do around each attempt: the core policy decides, this adapter stamps,
//! classifies and keeps the call's state between attempts ([`Ctx`]). The sending itself (and the
//! request of the attempt, until the service takes it) is in `attempt.rs`, the future that drives
//! a call in `retry/future.rs`.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request, Response};
use seawall::budget::Budget;
use seawall::classify::{Class, HttpClassifier, Transient};
use seawall::deadline::{Deadline, encode_grpc_timeout, parse_grpc_timeout};
use seawall::hint::Hint;
use seawall::policy::{Attempt, Call, Decision, GiveUp, GiveUpReason, RequestInfo, RetryPolicy};
use seawall::time::{Clock, Instant, SystemClock};

use crate::client::body::{ReplayBody, replay_into};
use crate::client::classify::{Protocol, RequestHeaders, classify_error, classify_response};
use crate::client::metrics::ClientMetrics;
use crate::client::retry::error::{BoxError, GaveUpError, LastOutcome};
use crate::wire::{
    GRPC_PREVIOUS_RPC_ATTEMPTS, GRPC_TIMEOUT, IDEMPOTENCY_KEY, REQUEST_ATTEMPT, REQUEST_TIMEOUT_MS,
    RequestDeadline,
};

/// Settings shared by every call through one layer.
#[derive(Debug)]
pub(crate) struct Shared<Bu> {
    pub(crate) policy: Arc<RetryPolicy<Bu>>,
    pub(crate) classifier: HttpClassifier,
    pub(crate) default_timeout: Option<Duration>,
    pub(crate) timeout_header: TimeoutHeader,
    pub(crate) stamp_keys: bool,
    pub(crate) metrics: Option<Arc<ClientMetrics>>,
}

impl<Bu> Clone for Shared<Bu> {
    fn clone(&self) -> Self {
        Shared {
            policy: self.policy.clone(),
            classifier: self.classifier,
            default_timeout: self.default_timeout,
            timeout_header: self.timeout_header.clone(),
            stamp_keys: self.stamp_keys,
            metrics: self.metrics.clone(),
        }
    }
}

/// One logical call between attempts: the policy's per-call state and the spare copy of the
/// request for a retry. Built when the service is called ([`new`](Self::new)) and started, in
/// place, on the future's first poll ([`start`](Self::start)): it is a large part of the call's
/// future, and every move of the future is a copy. The request of the attempt in flight lives
/// with the attempt (`attempt::Sending`), where the service's future takes its place. Dropping a
/// started call before it has ended abandons it, which returns what it held to the budget and
/// breaker.
pub(crate) struct Ctx<S, B, RB, Bu: Budget> {
    pub(crate) svc: S,
    shared: Arc<Shared<Bu>>,
    /// `None` until the call starts.
    call: Option<Call>,
    spare: Option<Request<B>>,
    protocol: Protocol,
    /// The request came with a `Request-Attempt` of its own (removed from the first attempt).
    carries_attempt: bool,
    started: Instant,
    max_attempts: u32,
    _response: std::marker::PhantomData<fn() -> RB>,
}

impl<S, B, RB, Bu: Budget> Drop for Ctx<S, B, RB, Bu> {
    fn drop(&mut self) {
        if let Some(call) = &mut self.call
            && !call.is_finished()
        {
            self.shared.policy.abandon(call, SystemClock.now());
        }
    }
}

/// What comes after an attempt. Returned and matched at once, never stored: the size of the
/// retry's request costs no copy on the success path (boxing it would cost a retry an allocation).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Step<RB, B> {
    /// The call is over.
    Done(Result<Response<RB>, GaveUpError<RB>>),
    /// Wait `after`, then send `next`; `last` is what the failed attempt produced.
    Retry { after: Duration, last: LastOutcome<RB>, next: Request<B> },
}

/// An attempt's result: the response or transport error (boxed: the failure path), `None` if it
/// timed out.
pub(crate) type Sent<RB> = Option<Result<Response<RB>, BoxError>>;

impl<S, B, RB, Bu: Budget> Ctx<S, B, RB, Bu> {
    /// A call through `svc`, not started yet.
    #[inline]
    pub(crate) fn new(svc: S, shared: Arc<Shared<Bu>>) -> Self {
        Ctx {
            svc,
            shared,
            call: None,
            spare: None,
            protocol: Protocol::Http,
            carries_attempt: false,
            started: Instant::ZERO,
            max_attempts: 1,
            _response: std::marker::PhantomData,
        }
    }
}

impl<S, B: ReplayBody, RB, Bu: Budget> Ctx<S, B, RB, Bu> {
    /// Starts the logical call for `req` (stamping an idempotency key on it if configured) and
    /// returns when: the call's first attempt starts then too, one clock read serves both.
    #[inline]
    pub(crate) fn start(&mut self, req: &mut Request<B>) -> Instant {
        let shared = &*self.shared;
        let policy = &*shared.policy;
        let started = SystemClock.now();
        // One pass over the headers (none for a header-less request) instead of a hashed lookup
        // for each thing the call needs to know.
        let headers = RequestHeaders::scan(req.headers());
        let protocol = headers.protocol;
        let deadline = req
            .extensions()
            .get::<RequestDeadline>()
            .map(|d| d.0)
            .or_else(|| shared.default_timeout.map(|t| Deadline::after(started, t)));

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
        let max_attempts = policy.config().max_attempts();
        // The copy for a retry is taken before the first attempt consumes the request; for
        // `Bytes`-like bodies it is reference counts, plus the header map when there is one.
        // Written where it lies: the copy is as large as the request.
        let replayable = max_attempts > 1 && replay_into(req, &mut self.spare);
        // A body that cannot be replayed is sent once: tell the policy it is not safe to resend.
        let info = if max_attempts > 1 && !replayable {
            RequestInfo::send_once()
        } else if idempotent || has_key {
            RequestInfo::idempotent()
        } else {
            RequestInfo::non_idempotent()
        };
        self.call = Some(policy.start(started, info, deadline));
        if let Some(m) = &shared.metrics {
            m.call_started();
        }
        (self.protocol, self.started, self.max_attempts) = (protocol, started, max_attempts);
        self.carries_attempt = headers.has_attempt;
        started
    }

    /// The error for a call the policy gave up on, with what the last attempt produced.
    pub(crate) fn give_up(&self, g: GiveUp, last: LastOutcome<RB>) -> GaveUpError<RB> {
        if let Some(m) = &self.shared.metrics {
            m.gave_up(g.reason);
            if let Some(b) = self.shared.policy.breaker() {
                m.breaker_state(b.state(SystemClock.now()));
            }
        }
        tracing::debug!(reason = g.reason.as_str(), overloaded = g.overloaded, "seawall: gave up");
        let attempts = self.call.as_ref().map_or(0, Call::attempts);
        GaveUpError::new(g, attempts, self.protocol == Protocol::Grpc, last)
    }

    /// Asks the policy whether the attempt with request `req` (`None` only by a bug) may start
    /// `at`; if so, keeps a spare copy of the request when another retry may follow and stamps
    /// the attempt's headers on it. On a refusal the call is over: report it with
    /// [`give_up`](Self::give_up).
    #[inline(always)]
    pub(crate) fn begin(
        &mut self,
        at: Instant,
        req: Option<&mut Request<B>>,
    ) -> Result<Attempt, GiveUp> {
        let policy = &*self.shared.policy;
        let call = self.call.as_mut().expect("the call has started");
        let attempt = policy.before_attempt(call, at)?;
        let Some(req) = req else {
            // Unreachable by construction (an attempt only begins with a request in hand);
            // fail closed.
            policy.abandon(call, at);
            return Err(GiveUp { reason: GiveUpReason::NotReplayable, overloaded: true });
        };
        if attempt.number() < self.max_attempts && attempt.number() > 1 {
            replay_into(req, &mut self.spare);
        }
        stamp(req, self.protocol, self.carries_attempt, &attempt, &self.shared.timeout_header);
        if let Some(m) = &self.shared.metrics {
            m.attempt_started(attempt.number());
        }
        Ok(attempt)
    }

    /// The class and hint of a response.
    #[inline]
    pub(crate) fn classify(&self, resp: &Response<RB>) -> (Class, Hint) {
        classify_response(&self.shared.classifier, self.protocol, resp)
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
        let call = self.call.as_mut().expect("the call has started");
        // A success that came back within the poll that sent it is recorded at the attempt's
        // start, which differs from its end by the service's synchronous work only: one clock
        // read for the whole call. Failures (their deadline and backoff) and the duration
        // histogram get the real end.
        let now = match sent_at {
            Some(at) if shared.metrics.is_none() => at,
            _ => SystemClock.now(),
        };
        let decision = shared.policy.after_attempt(call, now, Class::Success, Hint::None);
        // An attempt in flight that succeeded always ends the call with a success.
        debug_assert_eq!(decision, Decision::Success);
        if let Some(m) = &shared.metrics {
            m.succeeded(now - self.started);
        }
    }

    /// Reports an attempt that did not succeed (anything but a response
    /// [`classify`](Self::classify) calls a success): the call's end, or the wait and the
    /// request for the next attempt.
    pub(crate) fn failed(&mut self, result: Sent<RB>) -> Step<RB, B> {
        let (class, hint) = match &result {
            Some(Ok(resp)) => self.classify(resp),
            Some(Err(e)) => (classify_error(&**e), Hint::None),
            None => (Class::Retryable(Transient::Timeout), Hint::None),
        };
        let shared = &*self.shared;
        let call = self.call.as_mut().expect("the call has started");
        let outcome = match result {
            Some(Ok(resp)) => LastOutcome::Response(resp),
            Some(Err(e)) => LastOutcome::Error(e),
            None => LastOutcome::TimedOut,
        };
        let now = SystemClock.now();
        let policy = &*shared.policy;
        match policy.after_attempt(call, now, class, hint) {
            Decision::Success => {
                // Only `succeeded` reports successes; keep the type system honest anyway.
                if let LastOutcome::Response(resp) = outcome {
                    return Step::Done(Ok(resp));
                }
                let g = GiveUp { reason: GiveUpReason::NotRetryable, overloaded: false };
                Step::Done(Err(self.give_up(g, outcome)))
            }
            Decision::GiveUp(g) => match outcome {
                // A 404 or 400 is the caller's answer, not a failure of the dependency.
                LastOutcome::Response(resp) if g.reason == GiveUpReason::NotRetryable => {
                    if let Some(m) = &shared.metrics {
                        m.gave_up(g.reason);
                    }
                    Step::Done(Ok(resp))
                }
                other => Step::Done(Err(self.give_up(g, other))),
            },
            Decision::Retry { after } => {
                let Some(next) = self.spare.take() else {
                    // A streaming body, refused before it was sent: it cannot be resent.
                    policy.abandon(call, now);
                    let g = GiveUp { reason: GiveUpReason::NotReplayable, overloaded: true };
                    return Step::Done(Err(self.give_up(g, outcome)));
                };
                tracing::debug!(wait_ms = after.as_millis() as u64, "seawall: retrying");
                Step::Retry { after, last: outcome, next }
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
fn stamp<B>(
    req: &mut Request<B>,
    protocol: Protocol,
    carries_attempt: bool,
    attempt: &Attempt,
    cached: &TimeoutHeader,
) {
    let n = attempt.number();
    let h = req.headers_mut();
    match protocol {
        Protocol::Http => {
            // An absent `Request-Attempt` is a first attempt (wire convention; every seawall
            // server reads it so): stamping "1" would allocate the header map of a header-less
            // request for nothing. A number the request already carries (copied from an incoming
            // request, say) is not this call's: it goes.
            if n > 1 {
                h.insert(REQUEST_ATTEMPT, small(n));
            } else if carries_attempt {
                h.remove(REQUEST_ATTEMPT);
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
