//! [`RetryMiddleware`]: the [`RetryLayer`](crate::client::RetryLayer)'s policy as a
//! [reqwest-middleware](https://docs.rs/reqwest-middleware) `Middleware` (feature
//! `reqwest-middleware`), so a reqwest user keeps `client.get(url).send()`, `.json()` and
//! streaming bodies.
//!
//! # Why a middleware as well as a layer
//!
//! Most reqwest users who retry do it with `reqwest-middleware` and `reqwest-retry`: a
//! `ClientWithMiddleware` that still speaks reqwest's API. Asking them to rebuild their calls as
//! `http::Request`s for a tower stack, and to take buffered bodies back, is asking them not to
//! adopt. So the same engine runs here: every decision is the core
//! [`RetryPolicy`]'s — attempt cap (3), budget (gRPC retry throttling by default), full-jitter
//! backoff, `Retry-After` / `Retry-Pushback-Ms` honoured and jittered, the deadline, the
//! idempotency rules — and every attempt carries `Request-Timeout-Ms` and, from the first retry
//! on, `Request-Attempt`, exactly as through [`Retry`](crate::client::Retry). The middleware
//! only carries reqwest's request and response through that engine unchanged.
//!
//! # Adopting it: the lines, side by side with reqwest-retry's
//!
//! On an existing `reqwest::Client`, the lines that differ (reqwest-retry's from its crate
//! documentation, <https://docs.rs/reqwest-retry/0.9>):
//!
//! | | reqwest-retry 0.9 | seawall |
//! |---|---|---|
//! | import | `use reqwest_retry::{RetryTransientMiddleware, policies::ExponentialBackoff};` | `use seawall_tower::client::middleware::RetryMiddleware;` |
//! | policy | `let retry_policy = ExponentialBackoff::builder().build_with_max_retries(3);` | none: the defaults are safe untuned (3 attempts, a budget, full jitter) |
//! | attach | `.with(RetryTransientMiddleware::new_with_policy(retry_policy))` | `.with(RetryMiddleware::new())` |
//!
//! Whole, both on reqwest-middleware's `ClientBuilder`:
//!
//! ```ignore
//! // reqwest-retry
//! let retry_policy = ExponentialBackoff::builder().build_with_max_retries(3);
//! let client = ClientBuilder::new(reqwest::Client::new())
//!     .with(RetryTransientMiddleware::new_with_policy(retry_policy))
//!     .build();
//! ```
//!
//! ```
//! // seawall
//! use reqwest_middleware::ClientBuilder;
//! use seawall_tower::client::middleware::RetryMiddleware;
//!
//! let client = ClientBuilder::new(reqwest::Client::new())
//!     .with(RetryMiddleware::new())
//!     .build();
//! # let _ = client;
//! ```
//!
//! Calls are unchanged: `client.get(url).send().await?`, then `.text()`, `.json()` (reqwest's
//! `json` feature), `.chunk()` or `.bytes_stream()` (its `stream` feature) on the response as
//! before.
//!
//! What differs from reqwest-retry, on purpose:
//! - **a budget**: retries stop by themselves when the dependency is sick (reqwest-retry retries
//!   every transient failure up to its cap, whatever the rest of the fleet is doing);
//! - **idempotency**: a POST or PATCH is retried only with an `Idempotency-Key` header (or
//!   [`with_idempotency_keys`](RetryMiddleware::with_idempotency_keys)), or when the connection
//!   was refused and the server never saw it; reqwest-retry retries them like a GET;
//! - **server hints**: `Retry-After` (seconds or an HTTP date) and `Retry-Pushback-Ms` set the
//!   least wait, and a negative pushback stops the retries; 500 is not retried, 408, 429 and
//!   502–504 are (reqwest-retry 0.9 reads neither header and retries every 5xx);
//! - **bodies that cannot be cloned are sent once** (a stream: `Request::try_clone` is `None`),
//!   where reqwest-retry fails the request before sending it;
//! - **the deadline**: a call never waits past it, and each attempt is cut off at the time left.
//!
//! # Deadlines
//!
//! The first of: a [`RequestDeadline`] in the request's middleware extensions
//! (`.with_extension(RequestDeadline::after(&clock, timeout))` on reqwest-middleware's
//! `RequestBuilder`); the deadline of the request the current task is serving
//! ([`propagate::current`](crate::propagate::current), set by the server `DeadlineLayer`); the
//! middleware's [`with_default_timeout`](RetryMiddleware::with_default_timeout). A deadline
//! made on another clock than the middleware's ([`with_clock`](RetryMiddleware::with_clock))
//! is read as its time left ([`RequestDeadline::for_clock`]).
//!
//! # What `send` returns
//!
//! - a response, as reqwest's `send` does, whatever its status — including the last response
//!   of a call the policy gave up on (a 503 after three attempts, a 429 the budget would not
//!   retry). Such a response carries a [`GaveUp`] in its
//!   [`extensions`](reqwest::Response::extensions): read it with [`GaveUp::of`] to pass
//!   "overloaded; don't retry" upward ([`GaveUp::is_overloaded`]);
//! - [`reqwest_middleware::Error::Middleware`] holding a [`GaveUpError`] when the call ended
//!   without a response (the transport failed, the attempt timed out, or the policy refused to
//!   send); [`gave_up`] finds it, and the transport error is its
//!   [`source`](std::error::Error::source).
//!
//! Where it goes among other middlewares: first (outermost), so a tracing middleware added after
//! it sees each attempt. Each attempt is passed a copy of the call's extensions, and the
//! extensions of the attempt whose response is returned are merged back into them.
//!
//! In application state the client is reqwest-middleware's `ClientWithMiddleware`: the
//! middleware's type does not show in it.
//!
//! ```
//! use reqwest_middleware::ClientWithMiddleware;
//! use seawall_tower::client::middleware::RetryMiddleware;
//! use std::time::Duration;
//!
//! /// What handlers share: one client, one budget for the dependency.
//! struct AppState {
//!     orders: ClientWithMiddleware,
//! }
//!
//! let retry = RetryMiddleware::new().with_default_timeout(Duration::from_secs(2));
//! let orders = reqwest_middleware::ClientBuilder::new(reqwest::Client::new()).with(retry).build();
//! let state = AppState { orders };
//! # let _ = state.orders;
//! ```

mod chain;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chain::{Incoming, NextService, incoming, outgoing};
use http::Extensions;
use reqwest_middleware::{Middleware, Next};
use seawall::budget::{AnyBudget, Budget, GrpcThrottle};
use seawall::classify::HttpClassifier;
use seawall::policy::{GiveUp, GiveUpReason, PolicyConfig, RetryPolicy, Role};
use seawall::time::{Clock, SystemClock};

use crate::client::engine::config::LayerConfig;
use crate::client::metrics::ClientMetrics;
use crate::client::retry::RetryFuture;
use crate::client::{GaveUpError, LastOutcome};
use crate::wire::RequestDeadline;

/// The core [`RetryPolicy`] as a reqwest-middleware `Middleware` (see the [module docs](self)).
///
/// Defaults are [`RetryLayer`](crate::client::RetryLayer)'s: 3 attempts, gRPC retry throttling
/// (10 tokens, 0.1 per success), full jitter from 50 ms capped at 20 s, server hints honoured
/// with up to +50 % jitter, no deadline unless the request has one, 500 not retried, no
/// idempotency keys stamped, the monotonic clock.
pub struct RetryMiddleware<Bu = AnyBudget, C = SystemClock> {
    config: LayerConfig<Bu, C>,
}

impl<Bu: fmt::Debug, C: fmt::Debug> fmt::Debug for RetryMiddleware<Bu, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryMiddleware").field("config", &self.config).finish()
    }
}

impl<Bu, C> Clone for RetryMiddleware<Bu, C> {
    fn clone(&self) -> Self {
        RetryMiddleware { config: self.config.clone() }
    }
}

impl Default for RetryMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryMiddleware {
    /// The default policy with its own budget, control and metrics.
    pub fn new() -> Self {
        let budget = AnyBudget::Grpc(GrpcThrottle::default());
        Self::from_shared_policy(Arc::new(RetryPolicy::new(PolicyConfig::default(), budget)))
    }
}

impl<Bu: Budget> RetryMiddleware<Bu> {
    /// A middleware running `policy`; it owns retries whatever the policy's role says.
    pub fn from_policy(policy: RetryPolicy<Bu>) -> Self {
        Self::from_shared_policy(Arc::new(policy))
    }

    /// A middleware running a policy shared with other clients or layers (budget, breaker,
    /// control and metrics shared too: one policy per dependency).
    pub fn from_shared_policy(policy: Arc<RetryPolicy<Bu>>) -> Self {
        RetryMiddleware { config: LayerConfig::new(policy, Role::Owner, SystemClock) }
    }
}

impl<Bu: Budget, C: Clock + Clone> RetryMiddleware<Bu, C> {
    /// Reads the time from `clock` (see [`RetryLayer::with_clock`](crate::client::RetryLayer::with_clock):
    /// [`TokioClock`](crate::time::TokioClock) runs the middleware on a paused runtime's
    /// virtual time).
    pub fn with_clock<C2: Clock + Clone>(self, clock: C2) -> RetryMiddleware<Bu, C2> {
        RetryMiddleware { config: self.config.with_clock(clock) }
    }

    /// The policy (its control, budget, breaker and core metrics).
    pub fn policy(&self) -> &Arc<RetryPolicy<Bu>> {
        self.config.policy()
    }

    /// The deadline of requests that have none (see [Deadlines](self#deadlines)): `timeout`
    /// from the start of the call.
    pub fn with_default_timeout(self, timeout: Duration) -> Self {
        RetryMiddleware { config: self.config.with_default_timeout(timeout) }
    }

    /// Stamps a fresh `Idempotency-Key` (UUID v4, the same on every attempt of a call) on
    /// non-idempotent requests that have none, which makes them retryable. Only when the server
    /// deduplicates by key.
    pub fn with_idempotency_keys(self, yes: bool) -> Self {
        RetryMiddleware { config: self.config.with_idempotency_keys(yes) }
    }

    /// The HTTP status classifier (default: 408, 502–504 retried, 429 throttling, 500 not).
    pub fn with_classifier(self, classifier: HttpClassifier) -> Self {
        RetryMiddleware { config: self.config.with_classifier(classifier) }
    }

    /// Records every call into `metrics` (see [`ClientMetrics`]).
    pub fn with_metrics(self, metrics: Arc<ClientMetrics>) -> Self {
        RetryMiddleware { config: self.config.with_metrics(metrics) }
    }
}

#[async_trait::async_trait]
impl<Bu, C> Middleware for RetryMiddleware<Bu, C>
where
    Bu: Budget + Send + Sync + 'static,
    C: Clock + Send + Sync + 'static,
{
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        // The engine falls back to the deadline of the request the task serves
        // (`propagate::current`), as for every client layer.
        let deadline = extensions.get::<RequestDeadline>().cloned();
        let req = outgoing(req, deadline);
        let next = NextService { next, extensions: extensions.clone() };
        match RetryFuture::new(next, self.config.for_service(), req).await {
            Ok(resp) => Ok(incoming(resp, extensions)),
            Err(e) => gave_up_into_result(e, extensions),
        }
    }
}

/// The end of a call the policy gave up on: its last response if it had one (with a [`GaveUp`]
/// in its extensions), else the error.
fn gave_up_into_result(
    e: GaveUpError<Incoming>,
    extensions: &mut Extensions,
) -> reqwest_middleware::Result<reqwest::Response> {
    let record = GaveUp { give_up: e.give_up(), attempts: e.attempts() };
    let last = match e.into_last() {
        LastOutcome::Response(resp) => {
            let mut resp = incoming(resp, extensions);
            resp.extensions_mut().insert(record);
            return Ok(resp);
        }
        LastOutcome::Error(err) => LastOutcome::Error(err),
        LastOutcome::TimedOut => LastOutcome::TimedOut,
        _ => LastOutcome::NotSent,
    };
    let err: MiddlewareGaveUp = GaveUpError::new(record.give_up, record.attempts, false, last);
    Err(reqwest_middleware::Error::middleware(err))
}

/// The error inside [`reqwest_middleware::Error::Middleware`] when a call ended without a
/// response (it never holds one).
pub type MiddlewareGaveUp = GaveUpError<reqwest::Body>;

/// The [`GaveUpError`] of a call that ended without a response, if `err` is one.
pub fn gave_up(err: &reqwest_middleware::Error) -> Option<&MiddlewareGaveUp> {
    match err {
        reqwest_middleware::Error::Middleware(e) => e.downcast_ref(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// On a response the policy gave up on (found in its extensions): why, and after how many
/// attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GaveUp {
    give_up: GiveUp,
    attempts: u32,
}

impl GaveUp {
    /// The record on `resp`, if the policy gave up on the call that returned it (absent on a
    /// success and on an answer that is the caller's, such as a 404).
    pub fn of(resp: &reqwest::Response) -> Option<&GaveUp> {
        resp.extensions().get()
    }

    /// Why the call stopped.
    pub fn reason(&self) -> GiveUpReason {
        self.give_up.reason()
    }

    /// True when the caller must not retry (see [`GiveUp::is_overloaded`]).
    pub fn is_overloaded(&self) -> bool {
        self.give_up.is_overloaded()
    }

    /// The core's give-up.
    pub fn give_up(&self) -> GiveUp {
        self.give_up
    }

    /// Attempts sent.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}
