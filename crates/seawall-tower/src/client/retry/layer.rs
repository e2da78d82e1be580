//! [`RetryLayer`]: configuration of the owning layer.

use std::sync::Arc;
use std::time::Duration;

use seawall::budget::{AnyBudget, Budget, GrpcThrottle};
use seawall::classify::HttpClassifier;
use seawall::policy::{PolicyConfig, RetryPolicy, Role};
use seawall::time::{Clock, SystemClock};
use tower_layer::Layer;

use super::Retry;
use crate::client::engine::config::LayerConfig;
use crate::client::metrics::ClientMetrics;

/// Wraps a service in [`Retry`]: the one layer of a call path that retries.
///
/// Defaults are safe without tuning: 3 attempts, gRPC retry throttling (10 tokens, 0.1 per
/// success), full jitter from 50 ms (1 s after throttling) capped at 20 s, server hints honoured
/// with up to +50 % jitter, no deadline unless the request carries one (set
/// [`with_default_timeout`](Self::with_default_timeout) at the edge), 500 not retried, no
/// idempotency keys stamped, the monotonic clock ([`SystemClock`]; see
/// [`with_clock`](Self::with_clock)).
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use seawall_tower::client::RetryLayer;
/// use std::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let c = calls.clone();
/// // A dependency that fails once with a 503, then answers.
/// let dependency = tower::service_fn(move |req: http::Request<Full<Bytes>>| {
///     let n = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
///     // `Request-Attempt` from the first retry on: 2, 3, … (absent means a first attempt).
///     let attempt = req.headers().get("request-attempt").map(|v| v.to_str().unwrap().to_owned());
///     assert_eq!(attempt, (n > 0).then(|| (n + 1).to_string()));
///     async move {
///         let status = if n == 0 { 503 } else { 200 };
///         Ok::<_, std::convert::Infallible>(http::Response::builder().status(status).body(()).unwrap())
///     }
/// });
/// let mut client = RetryLayer::new()
///     .with_default_timeout(Duration::from_secs(2))
///     .layer(dependency);
/// let req = http::Request::get("http://orders/1").body(Full::new(Bytes::new())).unwrap();
/// let resp = client.ready().await.unwrap().call(req).await.unwrap();
/// assert_eq!(resp.status(), 200);
/// assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
/// # }
/// ```
#[derive(Debug)]
pub struct RetryLayer<Bu = AnyBudget, C = SystemClock> {
    shared: LayerConfig<Bu, C>,
}

impl<Bu, C> Clone for RetryLayer<Bu, C> {
    fn clone(&self) -> Self {
        RetryLayer { shared: self.shared.clone() }
    }
}

impl Default for RetryLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryLayer {
    /// The default policy (see the type docs) with its own budget, control and metrics.
    pub fn new() -> Self {
        let budget = AnyBudget::Grpc(GrpcThrottle::default());
        Self::from_shared_policy(Arc::new(RetryPolicy::new(PolicyConfig::default(), budget)))
    }
}

impl<Bu: Budget> RetryLayer<Bu> {
    /// A layer running `policy`. The layer owns retries whatever the policy's
    /// [`PolicyConfig::role`] says: its calls start as [`Role::Owner`].
    pub fn from_policy(policy: RetryPolicy<Bu>) -> Self {
        Self::from_shared_policy(Arc::new(policy))
    }

    /// A layer running a policy shared with other layers or code (its budget, breaker, control
    /// and metrics are then shared too — one per dependency is the intended use).
    pub fn from_shared_policy(policy: Arc<RetryPolicy<Bu>>) -> Self {
        RetryLayer { shared: LayerConfig::new(policy, Role::Owner, SystemClock) }
    }
}

impl<Bu: Budget, C: Clock + Clone> RetryLayer<Bu, C> {
    /// Reads the time from `clock`: deadlines, attempt timeouts, the budget's and breaker's
    /// windows and HTTP-date hints. The waits themselves are tokio timers, so a clock other
    /// than tokio's own must move with them: [`TokioClock`](crate::time::TokioClock) runs the
    /// layer on a paused runtime's virtual time. A [`RequestDeadline`](crate::wire::RequestDeadline)
    /// made on another clock is read as its time left, from this clock's now
    /// ([`for_clock`](crate::wire::RequestDeadline::for_clock)).
    pub fn with_clock<C2: Clock + Clone>(self, clock: C2) -> RetryLayer<Bu, C2> {
        RetryLayer { shared: self.shared.with_clock(clock) }
    }

    /// The policy (its control, budget, breaker and core metrics).
    pub fn policy(&self) -> &Arc<RetryPolicy<Bu>> {
        self.shared.policy()
    }

    /// The deadline for requests that carry no [`RequestDeadline`](crate::wire::RequestDeadline):
    /// `timeout` from the start of the call. Set it at the edge; hops below inherit the edge's.
    pub fn with_default_timeout(self, timeout: Duration) -> Self {
        RetryLayer { shared: self.shared.with_default_timeout(timeout) }
    }

    /// Stamps a fresh `Idempotency-Key` (UUID v4, the same on every attempt of a call) on
    /// non-idempotent requests that have none, which makes them retryable. Only turn it on when
    /// the server deduplicates by key (seawall's server `IdempotencyLayer` does).
    pub fn with_idempotency_keys(self, yes: bool) -> Self {
        RetryLayer { shared: self.shared.with_idempotency_keys(yes) }
    }

    /// The HTTP status classifier (default: 408, 502–504 retried, 429 throttling, 500 not).
    pub fn with_classifier(self, classifier: HttpClassifier) -> Self {
        RetryLayer { shared: self.shared.with_classifier(classifier) }
    }

    /// Records every call into `metrics` (see [`ClientMetrics`]).
    pub fn with_metrics(self, metrics: Arc<ClientMetrics>) -> Self {
        RetryLayer { shared: self.shared.with_metrics(metrics) }
    }
}

impl<S, Bu, C> Layer<S> for RetryLayer<Bu, C> {
    type Service = Retry<S, Bu, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry { inner, shared: self.shared.for_service() }
    }
}
