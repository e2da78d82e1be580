//! The audited call graph: services, the calls between them, and every place that retries a call.

use std::fmt;
use std::time::Duration;

use seawall::budget::{AwsRetryCosts, RetryCause};
use serde::Serialize;

/// A call graph ready to analyse: what [`crate::graph::load`] builds from a graph file and its imports.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Services, in file order.
    pub services: Vec<Service>,
    /// Calls between services (hops), in file order.
    pub hops: Vec<Hop>,
}

impl Graph {
    /// The service named `name`.
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }

    /// Entry points: services marked `entry`, or, when none is, every service nobody calls.
    pub fn entries(&self) -> Vec<&Service> {
        let marked: Vec<&Service> = self.services.iter().filter(|s| s.entry).collect();
        if !marked.is_empty() {
            return marked;
        }
        self.services.iter().filter(|s| !self.hops.iter().any(|h| h.to == s.name)).collect()
    }
}

/// One service, with the load and capacity figures the peak-load check needs.
#[derive(Debug, Clone, Default)]
pub struct Service {
    /// Its name, unique in the graph.
    pub name: String,
    /// Whether traffic enters the graph here.
    pub entry: bool,
    /// Normal request rate entering here (entry points only), requests per second.
    pub rps: Option<f64>,
    /// What it can serve warm, requests per second.
    pub capacity_rps: Option<f64>,
    /// What it can serve cold (after a restart, with empty caches), requests per second.
    pub cold_capacity_rps: Option<f64>,
    /// Median latency.
    pub p50: Option<Duration>,
    /// 99th-percentile latency.
    pub p99: Option<Duration>,
    /// Where it is declared, `file:line`.
    pub location: String,
}

/// One call from a service to a dependency, with every place that may retry it.
#[derive(Debug, Clone, Default)]
pub struct Hop {
    /// The caller.
    pub from: String,
    /// The callee.
    pub to: String,
    /// Whether the operation is safe to repeat.
    pub idempotent: bool,
    /// Whether the caller sends an idempotency key reused across attempts.
    pub idempotency_key: bool,
    /// The caller's overall timeout for this call, if any.
    pub timeout: Option<Duration>,
    /// Whether the remaining time travels with the call (`grpc-timeout`, `Request-Timeout-Ms`).
    pub deadline_propagated: bool,
    /// A circuit breaker on the call, if any.
    pub breaker: Option<BreakerSpec>,
    /// Every place that retries this call, outermost (application) first.
    pub layers: Vec<RetryLayer>,
    /// Where it is declared, `file:line`.
    pub location: String,
}

impl Hop {
    /// `from → to`.
    pub fn name(&self) -> String {
        format!("{} → {}", self.from, self.to)
    }

    /// Worst-case attempts reaching the callee per call: the product of every layer's attempts,
    /// because stacked layers nest (each application attempt goes through the SDK, which makes
    /// its own attempts through the sidecar, which makes its own).
    pub fn worst_case(&self) -> u64 {
        self.layers.iter().fold(1u64, |acc, l| acc.saturating_mul(u64::from(l.attempts)))
    }

    /// Attempts per call when budgets hold: the product of [`RetryLayer::bounded`].
    pub fn bounded(&self) -> f64 {
        self.layers.iter().map(RetryLayer::bounded).product()
    }

    /// Whether any retrying layer on this hop spends from a budget.
    pub fn has_budget(&self) -> bool {
        self.layers.iter().any(|l| l.retries() && l.budget.is_some())
    }

    /// The layers that actually retry (more than one attempt).
    pub fn retrying(&self) -> impl Iterator<Item = &RetryLayer> {
        self.layers.iter().filter(|l| l.retries())
    }
}

/// A circuit breaker as declared on a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BreakerSpec {
    /// How many calls half-open lets through; `None` means unbounded (every waiting caller).
    pub half_open_max: Option<u32>,
}

/// Where on a hop a retry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Place {
    /// The calling service's own code.
    App,
    /// A client SDK (AWS SDK, a database driver).
    Sdk,
    /// An RPC library's built-in retries (gRPC service config).
    Rpc,
    /// A mesh sidecar (Istio).
    Mesh,
    /// A proxy or gateway (Envoy, a load balancer).
    Proxy,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Place::App => "app",
            Place::Sdk => "sdk",
            Place::Rpc => "rpc",
            Place::Mesh => "mesh",
            Place::Proxy => "proxy",
        })
    }
}

/// One place that retries a call: its cap, its budget, its timeouts.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryLayer {
    /// Where it lives.
    pub place: Place,
    /// Attempts per call including the first (1 = no retries).
    pub attempts: u32,
    /// True when nobody wrote it: a mesh, SDK or library default.
    pub implicit: bool,
    /// Whether waits between attempts are randomised.
    pub jitter: bool,
    /// The budget retries spend from, if any.
    pub budget: Option<Budget>,
    /// Whether it retries 4xx answers other than 408 and 429.
    pub retries_4xx: bool,
    /// Timeout of each attempt.
    pub per_try_timeout: Option<Duration>,
    /// Overall timeout this layer enforces on the call.
    pub timeout: Option<Duration>,
    /// Where it comes from, `file:line`.
    pub source: String,
    /// What the audit assumed or noticed, e.g. which default applied.
    pub note: Option<String>,
}

impl RetryLayer {
    /// A layer at `place` making `attempts` attempts, declared at `source`; no jitter, no budget.
    pub fn new(place: Place, attempts: u32, source: impl Into<String>) -> Self {
        RetryLayer {
            place,
            attempts: attempts.max(1),
            implicit: false,
            jitter: false,
            budget: None,
            retries_4xx: false,
            per_try_timeout: None,
            timeout: None,
            source: source.into(),
            note: None,
        }
    }

    /// Whether it makes more than one attempt.
    pub fn retries(&self) -> bool {
        self.attempts > 1
    }

    /// Attempts per call when its budget holds: `min(attempts, 1 + share)` where `share` is the
    /// budget's sustained retry share ([`Budget::retry_share`]); `attempts` without a budget.
    pub fn bounded(&self) -> f64 {
        let cap = f64::from(self.attempts);
        match &self.budget {
            Some(b) if self.retries() => cap.min(1.0 + b.retry_share()),
            _ => cap,
        }
    }

    /// The longest this layer keeps trying: attempts × per-try timeout, capped by its overall
    /// timeout. `None` when neither is known.
    pub fn total_time(&self) -> Option<Duration> {
        let tries = self.per_try_timeout.map(|t| t.saturating_mul(self.attempts));
        match (tries, self.timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A retry budget, as each tool defines it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Budget {
    /// Retries at most `ratio` of requests over a window (Finagle, Google SRE's 10 %).
    Ratio {
        /// Allowed retries per request, e.g. 0.1.
        ratio: f64,
    },
    /// gRPC `retryThrottling` (gRFC A6): a token bucket per server.
    GrpcThrottle {
        /// `maxTokens`.
        max_tokens: f64,
        /// `tokenRatio`: tokens a success gives back.
        token_ratio: f64,
    },
    /// Envoy cluster circuit breaker `retry_budget`: concurrent retries at most `percent` % of
    /// active and pending requests, never fewer than `min_concurrency`.
    Envoy {
        /// `budget_percent` (default 20).
        percent: f64,
        /// `min_retry_concurrency` (default 3).
        min_concurrency: u32,
    },
    /// AWS SDK retry quota (standard and adaptive modes), as the core's
    /// [`AwsRetryQuota`](seawall::budget::AwsRetryQuota) runs it: 500 tokens, a retry after an
    /// error costs 14 (the updated 2026 costs), a first-try success earns 1.
    AwsQuota,
}

impl Budget {
    /// The sustained share of retries per request the budget allows while failures persist —
    /// the `x` in the bound `1 + x`.
    ///
    /// - ratio: `ratio` (Google SRE: 10 % → 1.1);
    /// - gRPC throttle: `tokenRatio` — tokens stay above `maxTokens/2` only while failures are at
    ///   most `tokenRatio` × successes, so retries settle near that share (10/0.1 → 1.1);
    /// - Envoy: `percent`/100 of requests in flight may be retries (20 % → 1.2); the
    ///   `min_retry_concurrency` floor is ignored at fleet scale;
    /// - AWS quota: a retry after an error costs the core's
    ///   [`AwsRetryCosts`] price (14 tokens) and a first-try
    ///   success earns 1, so once the initial 500 are spent retries are at most 1/14 of
    ///   successes (→ 1.07).
    pub fn retry_share(&self) -> f64 {
        match *self {
            Budget::Ratio { ratio } => ratio,
            Budget::GrpcThrottle { token_ratio, .. } => token_ratio,
            Budget::Envoy { percent, .. } => percent / 100.0,
            Budget::AwsQuota => {
                let cost = AwsRetryCosts::default().cost(RetryCause::Transient);
                1.0 / f64::from(cost)
            }
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Ratio { ratio } => write!(f, "ratio {}%", ratio * 100.0),
            Budget::GrpcThrottle { max_tokens, token_ratio } => {
                write!(f, "gRPC throttle {max_tokens}/{token_ratio}")
            }
            Budget::Envoy { percent, min_concurrency } => {
                write!(f, "Envoy retry budget {percent}% (min {min_concurrency})")
            }
            Budget::AwsQuota => f.write_str("AWS retry quota"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacked_layers_multiply_and_budgets_bound() {
        let mut hop = Hop::default();
        for place in [Place::App, Place::Sdk, Place::Mesh] {
            hop.layers.push(RetryLayer::new(place, 3, "t"));
        }
        assert_eq!(hop.worst_case(), 27);
        hop.layers[0].budget = Some(Budget::Ratio { ratio: 0.1 });
        assert!((hop.bounded() - 1.1 * 9.0).abs() < 1e-9);
    }

    #[test]
    fn a_budget_never_raises_the_cap() {
        let mut l = RetryLayer::new(Place::App, 2, "t");
        l.budget = Some(Budget::GrpcThrottle { max_tokens: 10.0, token_ratio: 5.0 });
        assert_eq!(l.bounded(), 2.0);
        let one =
            RetryLayer { budget: Some(Budget::AwsQuota), ..RetryLayer::new(Place::Sdk, 1, "t") };
        assert_eq!(one.bounded(), 1.0);
    }
}
