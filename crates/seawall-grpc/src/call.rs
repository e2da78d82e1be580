//! One call through [`GrpcRetry`](super::GrpcRetry): look up the method's policy, buffer the
//! request, and drive the core's retry or hedging state over real attempts.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Request, Response};
use http_body_util::Full;
use seawall::deadline::{Deadline, encode_grpc_timeout, parse_grpc_timeout};
use seawall::grpc::{
    Code, CodeSet, HedgeState, HedgeVerdict, HedgingConfig, Policy, Pushback, RetryConfig,
    RetryDecision, RetryState, StopReason,
};
use seawall::metrics::Metrics;
use seawall::policy::GiveUpReason;
use seawall::time::{Clock, Instant};
use tokio::task::JoinSet;
use tower_service::Service;

use seawall_tower::client::BoxError;
use seawall_tower::wire::{GRPC_PREVIOUS_RPC_ATTEMPTS, GRPC_TIMEOUT};

use crate::body::{Collected, Observed, collect, settle, status_of};
use crate::{GrpcEvent, Shared};

type Body = tonic::body::Body;
type Resp = Response<Body>;

/// How one attempt ended.
enum Outcome {
    /// Response headers without a status: the call is committed (A6) and this is its answer.
    Committed(Resp),
    /// A status in the headers (trailers-only), or an HTTP error mapped to one.
    Status(Code, Pushback, Resp),
    /// The attempt failed before any response: counted as `UNAVAILABLE`.
    Failed(BoxError),
    /// `perAttemptRecvTimeout` cut the attempt off: `CANCELLED`, as grpc-core reports it.
    TimedOut,
    /// The call's deadline passed.
    Deadline,
}

impl Outcome {
    fn code(&self) -> (Code, Pushback) {
        match self {
            Outcome::Status(c, p, _) => (*c, *p),
            Outcome::Failed(_) => (Code::UNAVAILABLE, Pushback::Absent),
            Outcome::TimedOut => (Code::CANCELLED, Pushback::Absent),
            Outcome::Committed(_) | Outcome::Deadline => (Code::OK, Pushback::Absent),
        }
    }

    /// What the caller gets if this is the last attempt.
    fn into_result(self) -> Result<Resp, BoxError> {
        match self {
            Outcome::Committed(r) | Outcome::Status(_, _, r) => Ok(r),
            Outcome::Failed(e) => Err(e),
            Outcome::TimedOut => {
                Ok(tonic::Status::cancelled("seawall: perAttemptRecvTimeout exceeded").into_http())
            }
            Outcome::Deadline => Ok(deadline_exceeded()),
        }
    }
}

fn deadline_exceeded() -> Resp {
    tonic::Status::deadline_exceeded("seawall: the call's deadline passed").into_http()
}

/// The gRPC code for an HTTP status without `grpc-status` (gRPC's
/// `http-grpc-status-mapping.md`): what a proxy's error page means to a gRPC client.
fn code_of_http(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::INTERNAL,
        401 => Code::UNAUTHENTICATED,
        403 => Code::PERMISSION_DENIED,
        404 => Code::UNIMPLEMENTED,
        429 | 502..=504 => Code::UNAVAILABLE,
        _ => Code::UNKNOWN,
    }
}

/// Everything an attempt needs, cloneable into a spawned hedge.
#[derive(Clone)]
struct Attempt<S, C> {
    svc: S,
    clock: C,
    parts: Parts,
    body: Bytes,
    deadline: Option<Deadline>,
    per_attempt: Option<Duration>,
}

impl<S, C> Attempt<S, C>
where
    S: Service<Request<Body>, Response = Resp> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    C: Clock + Clone + 'static,
{
    async fn send(mut self, previous: u32) -> Outcome {
        let now = self.clock.now();
        let mut parts = self.parts;
        if previous > 0 {
            parts.headers.insert(GRPC_PREVIOUS_RPC_ATTEMPTS, HeaderValue::from(previous));
        }
        let mut limit = self.per_attempt;
        if let Some(d) = self.deadline {
            let left = d.remaining(now);
            if left.is_zero() {
                return Outcome::Deadline;
            }
            let wire = HeaderValue::from_str(&encode_grpc_timeout(left)).expect("ASCII");
            parts.headers.insert(GRPC_TIMEOUT, wire);
            limit = Some(limit.map_or(left, |l| l.min(left)));
        }
        let req = Request::from_parts(parts, Body::new(Full::new(self.body)));
        let call = async {
            std::future::poll_fn(|cx| self.svc.poll_ready(cx)).await.map_err(Into::into)?;
            self.svc.call(req).await.map_err(Into::into)
        };
        let answered = match limit {
            None => call.await,
            Some(limit) => match tokio::time::timeout(limit, call).await {
                Ok(r) => r,
                Err(_) if self.deadline.is_some_and(|d| d.is_expired(self.clock.now())) => {
                    return Outcome::Deadline;
                }
                Err(_) => return Outcome::TimedOut,
            },
        };
        classify(answered)
    }

    /// One attempt with the body as it is (no policy, or too large to replay).
    async fn once(
        shared: &Shared<C>,
        tally: &mut Tally,
        mut svc: S,
        mut parts: Parts,
        body: Body,
        deadline: Option<Deadline>,
        charged: Option<CodeSet>,
    ) -> Result<Resp, BoxError> {
        let mut left = None;
        if let Some(d) = deadline {
            let l = d.remaining(shared.clock.now());
            if l.is_zero() {
                tally.stop = Some(GiveUpReason::DeadlineTooClose);
                return Ok(deadline_exceeded());
            }
            let wire = HeaderValue::from_str(&encode_grpc_timeout(l)).expect("ASCII");
            parts.headers.insert(GRPC_TIMEOUT, wire);
            left = Some(l);
        }
        tally.sent(shared, 0);
        let call = async {
            std::future::poll_fn(|cx| svc.poll_ready(cx)).await.map_err(Into::into)?;
            svc.call(Request::from_parts(parts, body)).await.map_err(Into::into)
        };
        let answered = match left {
            None => call.await,
            Some(l) => match tokio::time::timeout(l, call).await {
                Ok(r) => r,
                Err(_) => {
                    tally.stop = Some(GiveUpReason::DeadlineTooClose);
                    return Ok(deadline_exceeded());
                }
            },
        };
        finish(shared, classify(answered), charged)
    }

    async fn retry(
        shared: &Shared<C>,
        tally: &mut Tally,
        attempt: Attempt<S, C>,
        policy: &RetryConfig,
        throttle: Option<Arc<seawall::budget::GrpcThrottle>>,
    ) -> Result<Resp, BoxError> {
        let mut state = RetryState::new();
        let mut rng = shared.seeds.stream();
        let throttle = throttle.as_deref();
        loop {
            let previous = state.attempts() - 1;
            tally.sent(shared, previous);
            let out = attempt.clone().send(previous).await;
            let (code, pushback) = match &out {
                Outcome::Committed(_) => return finish(shared, out, Some(policy.retryable)),
                Outcome::Deadline => {
                    tally.stop = Some(GiveUpReason::DeadlineTooClose);
                    return out.into_result();
                }
                Outcome::Status(Code::OK, ..) => {
                    state.on_success(throttle);
                    return out.into_result();
                }
                other => other.code(),
            };
            match state.on_failure(policy, code, pushback, throttle, &mut rng) {
                RetryDecision::Retry { after, .. } => {
                    let late =
                        attempt.deadline.is_some_and(|d| d.remaining(shared.clock.now()) <= after);
                    if late {
                        tally.stopped(shared, StopReason::Deadline);
                        return out.into_result();
                    }
                    shared.emit(GrpcEvent::Backoff { after });
                    tokio::time::sleep(after).await;
                }
                RetryDecision::Stop(reason) => {
                    tally.stopped(shared, reason);
                    return out.into_result();
                }
            }
        }
    }

    async fn hedge(
        shared: &Shared<C>,
        tally: &mut Tally,
        attempt: Attempt<S, C>,
        policy: &HedgingConfig,
        throttle: Option<Arc<seawall::budget::GrpcThrottle>>,
    ) -> Result<Resp, BoxError> {
        let throttle = throttle.as_deref();
        let mut state = HedgeState::new(policy, shared.clock.now());
        // Each copy is a task: dropping or aborting the set cancels the losers (their HTTP/2
        // streams are reset), whichever way this function returns.
        let mut copies = JoinSet::new();
        tally.sent(shared, 0);
        copies.spawn(attempt.clone().send(0));
        let mut last: Option<Outcome> = None;
        let cancel = |copies: &mut JoinSet<Outcome>| {
            if !copies.is_empty() {
                shared.emit(GrpcEvent::Cancelled { copies: copies.len() });
                copies.abort_all();
            }
        };
        loop {
            let now = shared.clock.now();
            let next = state.next_at().map(|at| at.saturating_duration_since(now));
            let deadline = attempt.deadline.map(|d| d.remaining(now));
            tokio::select! {
                biased;
                joined = copies.join_next(), if !copies.is_empty() => {
                    let out = match joined.expect("set not empty") {
                        Ok(out) => out,
                        Err(e) => Outcome::Failed(Box::new(e)),
                    };
                    let (code, pushback) = match &out {
                        Outcome::Committed(_) => {
                            cancel(&mut copies);
                            return finish(shared, out, Some(policy.non_fatal));
                        }
                        Outcome::Deadline => {
                            cancel(&mut copies);
                            tally.stop = Some(GiveUpReason::DeadlineTooClose);
                            return out.into_result();
                        }
                        Outcome::Status(Code::OK, ..) => {
                            state.on_success(throttle);
                            cancel(&mut copies);
                            return out.into_result();
                        }
                        other => other.code(),
                    };
                    let verdict = state.on_failure(policy, code, pushback, shared.clock.now(), throttle);
                    if verdict == HedgeVerdict::Fatal {
                        tally.stopped(shared, StopReason::NotRetryable);
                        cancel(&mut copies);
                        return out.into_result();
                    }
                    last = Some(out);
                }
                () = sleep_or_never(next) => {
                    if let Some(previous) = state.send_due(policy, shared.clock.now(), throttle) {
                        tally.sent(shared, previous);
                        copies.spawn(attempt.clone().send(previous));
                    } else if state.next_at().is_none() {
                        tally.stopped(shared, StopReason::Throttled);
                    }
                }
                () = sleep_or_never(deadline) => {
                    cancel(&mut copies);
                    tally.stop = Some(GiveUpReason::DeadlineTooClose);
                    return Ok(deadline_exceeded());
                }
            }
            if copies.is_empty() && state.next_at().is_none() {
                let out = last.take().expect("a copy has failed");
                return out.into_result();
            }
        }
    }
}

fn classify(answered: Result<Resp, BoxError>) -> Outcome {
    match answered {
        Err(e) => Outcome::Failed(e),
        Ok(resp) => match status_of(resp.headers()) {
            Some((code, pushback)) => Outcome::Status(code, pushback, resp),
            None if resp.status() == http::StatusCode::OK => Outcome::Committed(resp),
            None => Outcome::Status(code_of_http(resp.status()), Pushback::Absent, resp),
        },
    }
}

/// The call's deadline: the earliest of the request's `grpc-timeout` (tonic's
/// `Request::set_timeout`), the method config's `timeout`, and the task's propagated deadline.
fn deadline_of(
    parts: &Parts,
    timeout: Option<Duration>,
    clock: &impl Clock,
    now: Instant,
) -> Option<Deadline> {
    let header = parts.headers.get(GRPC_TIMEOUT).and_then(|v| v.to_str().ok());
    let header = header.and_then(|v| parse_grpc_timeout(v).ok());
    [header, timeout]
        .into_iter()
        .flatten()
        .map(|t| Deadline::after(now, t))
        .chain(seawall_tower::propagate::current_for(clock, now))
        .reduce(Deadline::min)
}

pub(super) async fn run<S, C>(
    shared: Arc<Shared<C>>,
    svc: S,
    req: Request<Body>,
) -> Result<Resp, BoxError>
where
    S: Service<Request<Body>, Response = Resp> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    C: Clock + Clone + 'static,
{
    let now = shared.clock.now();
    let mut tally = Tally { core: shared.core.clone(), attempts: 0, stop: None, ended: false };
    let result = call(&shared, &mut tally, svc, req, now).await;
    tally.end(&shared, &result, now);
    result
}

async fn call<S, C>(
    shared: &Shared<C>,
    tally: &mut Tally,
    svc: S,
    req: Request<Body>,
    now: Instant,
) -> Result<Resp, BoxError>
where
    S: Service<Request<Body>, Response = Resp> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    C: Clock + Clone + 'static,
{
    let method = shared.config.lookup_path(req.uri().path());
    let policy = method.and_then(|m| m.policy.clone());
    let (parts, body) = req.into_parts();
    let deadline = deadline_of(&parts, method.and_then(|m| m.timeout), &shared.clock, now);
    let throttle = shared.throttle.clone();
    let Some(policy) = policy else {
        // No policy: one attempt; a success still refills the throttle, failures cost nothing.
        return Attempt::once(shared, tally, svc, parts, body, deadline, None).await;
    };
    let (charged, per_attempt) = match &policy {
        Policy::Retry(p) => (p.retryable, p.per_attempt_recv_timeout),
        Policy::Hedging(p) => (p.non_fatal, None),
    };
    let body = match collect(body, shared.buffer_limit).await? {
        Collected::Whole(bytes) => bytes,
        Collected::Over(body) => {
            // A6: a message too large to buffer is sent once, committed.
            shared.emit(GrpcEvent::Unbuffered);
            tally.stop = Some(GiveUpReason::NotReplayable);
            return Attempt::once(shared, tally, svc, parts, body, deadline, Some(charged)).await;
        }
    };
    let clock = shared.clock.clone();
    let attempt = Attempt { svc, clock, parts, body, deadline, per_attempt };
    match policy {
        Policy::Retry(p) => Attempt::retry(shared, tally, attempt, &p, throttle).await,
        Policy::Hedging(p) => Attempt::hedge(shared, tally, attempt, &p, throttle).await,
    }
}

/// One call's count in the layer's [`Metrics`], by the HTTP layers' rules: each attempt as it
/// is sent, the end once — a success (`OK`, or a response committed with its headers), else
/// given up for the reason the call stopped (the cap when it ran out of attempts). A call
/// dropped before its end counts as abandoned.
struct Tally {
    core: Arc<Metrics>,
    attempts: u32,
    stop: Option<GiveUpReason>,
    ended: bool,
}

impl Tally {
    /// An attempt (or hedged copy) with `previous` attempts before it is sent.
    fn sent<C>(&mut self, shared: &Shared<C>, previous: u32) {
        shared.emit(GrpcEvent::Attempt { previous });
        self.attempts += 1;
        self.core.attempt_sent(previous + 1);
    }

    /// The call makes no more attempts, for `reason`.
    fn stopped<C>(&mut self, shared: &Shared<C>, reason: StopReason) {
        shared.emit(GrpcEvent::Stopped { reason });
        self.stop = Some(reason.into());
    }

    /// The call ended with `result`; it started at `started`.
    fn end<C: Clock>(
        &mut self,
        shared: &Shared<C>,
        result: &Result<Resp, BoxError>,
        started: Instant,
    ) {
        let ok = result.as_ref().is_ok_and(|r| match status_of(r.headers()) {
            Some((code, _)) => code == Code::OK,
            None => r.status() == http::StatusCode::OK,
        });
        let outcome =
            if ok { Ok(()) } else { Err(self.stop.unwrap_or(GiveUpReason::AttemptsExhausted)) };
        self.core.call_ended(self.attempts, outcome);
        self.ended = true;
        if let (true, Some(m)) = (ok, &shared.metrics) {
            m.succeeded(&self.core, shared.clock.now() - started);
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if !self.ended {
            self.core.call_ended(self.attempts, Err(GiveUpReason::Abandoned));
        }
    }
}

/// The caller's answer from a final outcome, with the throttle settled.
fn finish<C>(shared: &Shared<C>, out: Outcome, charged: Option<CodeSet>) -> Result<Resp, BoxError> {
    match out {
        Outcome::Committed(r) => Ok(Observed::wrap(r, shared.throttle.clone(), charged)),
        Outcome::Status(code, pushback, r) => {
            if let Some(t) = &shared.throttle {
                settle(t, code, pushback, charged);
            }
            Ok(r)
        }
        other => other.into_result(),
    }
}

async fn sleep_or_never(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
