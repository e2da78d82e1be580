//! The loop both layers run: the core policy decides, this adapter sends, stamps and sleeps.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request, Response};
use seawall::budget::Budget;
use seawall::classify::{Class, HttpClassifier, Transient, is_idempotent_method};
use seawall::deadline::{Deadline, encode_grpc_timeout, parse_grpc_timeout};
use seawall::hint::Hint;
use seawall::policy::{Attempt, Call, Decision, GiveUp, GiveUpReason, RequestInfo, RetryPolicy};
use seawall::time::{Clock, SystemClock};
use tower_service::Service;
use tracing::Instrument;

use crate::client::body::{ReplayBody, replay_request};
use crate::client::classify::{Protocol, classify_error, classify_response};
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
    pub(crate) stamp_keys: bool,
    pub(crate) metrics: Option<Arc<ClientMetrics>>,
}

impl<Bu> Clone for Shared<Bu> {
    fn clone(&self) -> Self {
        Shared {
            policy: self.policy.clone(),
            classifier: self.classifier,
            default_timeout: self.default_timeout,
            stamp_keys: self.stamp_keys,
            metrics: self.metrics.clone(),
        }
    }
}

/// Releases what an unfinished call holds if the caller drops the future mid-call.
struct Guard<'a, Bu: Budget> {
    policy: &'a RetryPolicy<Bu>,
    call: Call,
}

impl<Bu: Budget> Drop for Guard<'_, Bu> {
    fn drop(&mut self) {
        if !self.call.is_finished() {
            self.policy.abandon(&mut self.call, SystemClock.now());
        }
    }
}

fn stamp<B>(req: &mut Request<B>, protocol: Protocol, attempt: &Attempt) {
    let n = attempt.number();
    let h = req.headers_mut();
    match protocol {
        Protocol::Http => {
            h.insert(REQUEST_ATTEMPT, HeaderValue::from(n));
            if let Some(left) = attempt.time_left() {
                let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).min(9_999_999_999);
                h.insert(REQUEST_TIMEOUT_MS, HeaderValue::from(ms));
            }
        }
        Protocol::Grpc => {
            if n > 1 {
                h.insert(GRPC_PREVIOUS_RPC_ATTEMPTS, HeaderValue::from(n - 1));
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

/// Runs one logical call to the end.
pub(crate) async fn run<S, B, RB, Bu>(
    mut svc: S,
    shared: Arc<Shared<Bu>>,
    mut req: Request<B>,
) -> Result<Response<RB>, GaveUpError<RB>>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    B: ReplayBody,
    Bu: Budget,
{
    let policy = &*shared.policy;
    let clock = SystemClock;
    let started = clock.now();
    let protocol = Protocol::of(req.headers());
    let deadline = req
        .extensions()
        .get::<RequestDeadline>()
        .map(|d| d.0)
        .or_else(|| shared.default_timeout.map(|t| Deadline::after(started, t)));

    let mut has_key = req.headers().contains_key(IDEMPOTENCY_KEY);
    if shared.stamp_keys && !has_key && !is_idempotent_method(req.method().as_str()) {
        let key = uuid::Uuid::new_v4().hyphenated().to_string();
        if let Ok(v) = HeaderValue::try_from(key) {
            req.headers_mut().insert(IDEMPOTENCY_KEY, v);
            has_key = true;
        }
    }
    let max_attempts = policy.config().max_attempts();
    let mut spare = if max_attempts > 1 { replay_request(&req) } else { None };
    // A body that cannot be replayed is sent once: tell the policy it is not safe to resend.
    let info = if max_attempts > 1 && spare.is_none() {
        RequestInfo::send_once()
    } else {
        RequestInfo::http(req.method().as_str(), has_key)
    };
    let mut next = Some(req);
    let mut guard = Guard { policy, call: policy.start(started, info, deadline) };
    if let Some(m) = &shared.metrics {
        m.call_started();
    }
    let mut last = LastOutcome::NotSent;

    let give_up = |guard: &Guard<'_, Bu>, g: GiveUp, last| {
        if let Some(m) = &shared.metrics {
            m.gave_up(g.reason);
            if let Some(b) = policy.breaker() {
                m.breaker_state(b.state(SystemClock.now()));
            }
        }
        tracing::debug!(reason = g.reason.as_str(), overloaded = g.overloaded, "seawall: gave up");
        GaveUpError::new(g, guard.call.attempts(), protocol == Protocol::Grpc, last)
    };

    loop {
        let attempt = match policy.before_attempt(&mut guard.call, clock.now()) {
            Ok(a) => a,
            Err(g) => return Err(give_up(&guard, g, last)),
        };
        let Some(mut req) = next.take() else {
            // Unreachable by construction (we only loop with a copy in hand); fail closed.
            policy.abandon(&mut guard.call, clock.now());
            let g = GiveUp { reason: GiveUpReason::NotIdempotent, overloaded: true };
            return Err(give_up(&guard, g, last));
        };
        if attempt.number() < max_attempts && attempt.number() > 1 {
            spare = replay_request(&req);
        }
        stamp(&mut req, protocol, &attempt);
        if let Some(m) = &shared.metrics {
            m.attempt_started(attempt.number());
        }
        let span = tracing::debug_span!(
            "seawall.client.attempt",
            seawall.attempt = attempt.number(),
            http.request.resend_count = tracing::field::Empty,
        );
        if attempt.is_retry() {
            span.record("http.request.resend_count", attempt.number() - 1);
        }
        let sent = async {
            std::future::poll_fn(|cx| svc.poll_ready(cx)).await.map_err(Into::into)?;
            svc.call(req).await.map_err(Into::<BoxError>::into)
        };
        let result = match attempt.timeout() {
            Some(t) => tokio::time::timeout(t, sent.instrument(span)).await.ok(),
            None => Some(sent.instrument(span).await),
        };
        let (class, hint, outcome) = match result {
            Some(Ok(resp)) => {
                let (class, hint) = classify_response(&shared.classifier, protocol, &resp);
                (class, hint, LastOutcome::Response(resp))
            }
            Some(Err(e)) => (classify_error(&*e), Hint::None, LastOutcome::Error(e)),
            None => (Class::Retryable(Transient::Timeout), Hint::None, LastOutcome::TimedOut),
        };
        let now = clock.now();
        match policy.after_attempt(&mut guard.call, now, class, hint) {
            Decision::Success => {
                if let Some(m) = &shared.metrics {
                    m.succeeded(now - started);
                }
                if let LastOutcome::Response(resp) = outcome {
                    return Ok(resp);
                }
                // Only responses classify as success; keep the type system honest anyway.
                let g = GiveUp { reason: GiveUpReason::NotRetryable, overloaded: false };
                return Err(give_up(&guard, g, outcome));
            }
            Decision::GiveUp(g) => match outcome {
                // A 404 or 400 is the caller's answer, not a failure of the dependency.
                LastOutcome::Response(resp) if g.reason == GiveUpReason::NotRetryable => {
                    if let Some(m) = &shared.metrics {
                        m.gave_up(g.reason);
                    }
                    return Ok(resp);
                }
                other => return Err(give_up(&guard, g, other)),
            },
            Decision::Retry { after } => {
                last = outcome;
                let Some(copy) = spare.take() else {
                    // A streaming body, refused before it was sent: it cannot be resent.
                    policy.abandon(&mut guard.call, now);
                    let g = GiveUp { reason: GiveUpReason::NotReplayable, overloaded: true };
                    return Err(give_up(&guard, g, last));
                };
                next = Some(copy);
                tracing::debug!(wait_ms = after.as_millis() as u64, "seawall: retrying");
                tokio::time::sleep(after).await;
            }
        }
    }
}
