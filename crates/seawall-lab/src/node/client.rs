//! The tiers' outgoing calls: the seawall core's [`RetryPolicy`] driven over a hyper client.
//!
//! Both configurations run this same loop; only the policy's knobs differ (see
//! [`policy_for`]). The decisions — attempt or not, retry after how long, give up why — are
//! all the core's: this module only sends, times and sleeps.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use seawall::backoff::{Backoff, Jitter};
use seawall::budget::{AnyBudget, GrpcThrottle, Unlimited};
use seawall::classify::{Class, HttpClassifier, Transient};
use seawall::deadline::{Deadline, encode_timeout_ms};
use seawall::hint::{Hint, parse_pushback_ms};
use seawall::policy::{Decision, GiveUp, PolicyConfig, RequestInfo, RetryPolicy};
use seawall::time::{Clock, SystemClock};
use seawall_tower::wire::{REQUEST_ATTEMPT, REQUEST_TIMEOUT_MS, RETRY_PUSHBACK_MS};

use super::Role;
use crate::config::Stack;

/// The per-try timeout of the baseline's teams (seed 000: "client timeout 250 ms").
pub const BASELINE_TIMEOUT: Duration = Duration::from_millis(250);
/// The baseline's flat delay between attempts (seed 000: "3 retries, flat 100 ms").
pub const BASELINE_DELAY: Duration = Duration::from_millis(100);

/// The retry policy of `role` in `stack`, from the core's knobs only.
///
/// - Baseline, every tier: owner, 3 attempts, flat 100 ms with [`Jitter::None`], an
///   [`Unlimited`] budget, a 250 ms per-try timeout, 500s retried, no deadline.
/// - Seawall: the edge owns retries (3 attempts, full jitter from 50 ms, a gRPC-style token
///   budget of 10 tokens refilled 0.1 per success); every other tier is fail-fast.
pub fn policy_for(role: Role, stack: Stack, seed: u64) -> RetryPolicy<AnyBudget> {
    let (cfg, budget) = match (stack, role) {
        (Stack::Baseline, _) => (
            PolicyConfig::default()
                .with_backoff(Backoff::constant(BASELINE_DELAY).expect("valid"))
                .with_per_try_timeout(BASELINE_TIMEOUT)
                .expect("valid"),
            AnyBudget::Unlimited(Unlimited),
        ),
        (Stack::Seawall, Role::Edge) => (
            PolicyConfig::default().with_backoff(
                Backoff::new(Jitter::Full, Duration::from_millis(50), Duration::from_secs(1), 2.0)
                    .expect("valid"),
            ),
            AnyBudget::Grpc(GrpcThrottle::default()),
        ),
        (Stack::Seawall, _) => (PolicyConfig::fail_fast(), AnyBudget::Unlimited(Unlimited)),
    };
    RetryPolicy::new(cfg, budget).with_seed(seed)
}

/// How one logical downstream call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx/3xx from downstream.
    Ok,
    /// The policy gave up.
    GaveUp(GiveUp),
}

/// A tier's client of the next tier.
#[derive(Debug, Clone)]
pub struct Downstream {
    url: http::Uri,
    http: Client<HttpConnector, Empty<Bytes>>,
    policy: Arc<RetryPolicy<AnyBudget>>,
    classifier: HttpClassifier,
}

impl Downstream {
    /// A client of `url` with the policy of `role` in `stack`.
    pub fn new(url: &str, role: Role, stack: Stack, seed: u64) -> Result<Self, crate::LabError> {
        let url = url
            .parse()
            .map_err(|e| crate::LabError::bad_input("downstream", format!("{url}: {e}")))?;
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(512).build(conn);
        Ok(Downstream {
            url,
            http,
            policy: Arc::new(policy_for(role, stack, seed)),
            classifier: HttpClassifier::new().retry_500(stack == Stack::Baseline),
        })
    }

    /// The policy (for its metrics).
    pub fn policy(&self) -> &RetryPolicy<AnyBudget> {
        &self.policy
    }

    /// One logical call: attempts, waits and give-up as the policy decides.
    pub async fn call(&self, deadline: Option<Deadline>) -> Outcome {
        let clock = SystemClock;
        let mut call = self.policy.start(clock.now(), RequestInfo::idempotent(), deadline);
        loop {
            let attempt = match self.policy.before_attempt(&mut call, clock.now()) {
                Ok(a) => a,
                Err(g) => return Outcome::GaveUp(g),
            };
            let mut req = Request::get(self.url.clone())
                .header(REQUEST_ATTEMPT, attempt.number())
                .body(Empty::new())
                .expect("valid request");
            if let Some(left) = attempt.time_left() {
                let v = encode_timeout_ms(left).parse().expect("digits are a header value");
                req.headers_mut().insert(REQUEST_TIMEOUT_MS, v);
            }
            let sent = self.http.request(req);
            let result = match attempt.timeout() {
                Some(t) => tokio::time::timeout(t, sent).await.ok(),
                None => Some(sent.await),
            };
            let (class, hint) = match result {
                None => (Class::Retryable(Transient::Timeout), Hint::None),
                Some(Err(e)) if e.is_connect() => {
                    (Class::Retryable(Transient::ConnectRefused), Hint::None)
                }
                Some(Err(_)) => (Class::Retryable(Transient::Connection), Hint::None),
                Some(Ok(resp)) => {
                    let hint = resp
                        .headers()
                        .get(RETRY_PUSHBACK_MS)
                        .and_then(|v| v.to_str().ok())
                        .map_or(Hint::None, parse_pushback_ms);
                    (self.classifier.classify(resp.status().as_u16()), hint)
                }
            };
            match self.policy.after_attempt(&mut call, clock.now(), class, hint) {
                Decision::Success => return Outcome::Ok,
                Decision::Retry { after } => tokio::time::sleep(after).await,
                Decision::GiveUp(g) => return Outcome::GaveUp(g),
            }
        }
    }
}

/// The status a tier answers upward when its downstream call ended with `outcome`, and whether
/// to add `Retry-Pushback-Ms: -1` ("overloaded; don't retry": seawall's fail-fast tiers only).
pub fn upward(outcome: Outcome, stack: Stack) -> (StatusCode, bool) {
    match outcome {
        Outcome::Ok => (StatusCode::OK, false),
        Outcome::GaveUp(g) => {
            (StatusCode::SERVICE_UNAVAILABLE, stack == Stack::Seawall && g.overloaded)
        }
    }
}
