//! [`FailFastLayer`]: configuration of a layer that must not retry.

use std::sync::Arc;
use std::time::Duration;

use seawall::budget::{Budget, Unlimited};
use seawall::classify::HttpClassifier;
use seawall::policy::{PolicyConfig, RetryPolicy, Role};
use seawall::time::{Clock, SystemClock};
use tower_layer::Layer;

use super::FailFast;
use crate::client::engine::config::LayerConfig;
use crate::client::metrics::ClientMetrics;

/// Wraps a service in [`FailFast`]: one attempt, overload passed upward as "don't retry".
///
/// The default policy is [`PolicyConfig::fail_fast`] with no budget (one attempt spends none)
/// and no breaker; give it one with [`FailFastLayer::from_policy`] and
/// [`RetryPolicy::with_breaker`] to refuse instantly while the dependency is down.
///
/// ```
/// use seawall_tower::client::FailFastLayer;
/// use tower::{Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// // An overloaded dependency: it throttles with a 429.
/// let sick = tower::service_fn(|_req: http::Request<String>| async {
///     Ok::<_, std::convert::Infallible>(
///         http::Response::builder().status(429).body(String::new()).unwrap(),
///     )
/// });
/// let mut hop = FailFastLayer::new().layer(sick);
/// let resp = hop.ready().await.unwrap().call(http::Request::new(String::new())).await.unwrap();
/// assert_eq!(resp.status(), 503);
/// assert_eq!(resp.headers()["retry-pushback-ms"], "-1"); // the caller above must not retry
/// // (A transient 502/503/504 is passed up as it is: the one owner above may retry it.)
/// # }
/// ```
#[derive(Debug)]
pub struct FailFastLayer<Bu = Unlimited, C = SystemClock> {
    shared: LayerConfig<Bu, C>,
}

impl<Bu, C> Clone for FailFastLayer<Bu, C> {
    fn clone(&self) -> Self {
        FailFastLayer { shared: self.shared.clone() }
    }
}

impl Default for FailFastLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl FailFastLayer {
    /// One attempt, no breaker.
    pub fn new() -> Self {
        Self::from_shared_policy(Arc::new(RetryPolicy::new(PolicyConfig::fail_fast(), Unlimited)))
    }
}

impl<Bu: Budget> FailFastLayer<Bu> {
    /// A layer running `policy`. The layer fails fast whatever the policy's
    /// [`PolicyConfig::role`] says: its calls start as [`Role::FailFast`], one attempt each.
    pub fn from_policy(policy: RetryPolicy<Bu>) -> Self {
        Self::from_shared_policy(Arc::new(policy))
    }

    /// A layer running a shared policy (its budget, breaker, control and metrics shared).
    pub fn from_shared_policy(policy: Arc<RetryPolicy<Bu>>) -> Self {
        FailFastLayer { shared: LayerConfig::new(policy, Role::FailFast, SystemClock) }
    }
}

impl<Bu: Budget, C: Clock + Clone> FailFastLayer<Bu, C> {
    /// Reads the time from `clock` (see [`RetryLayer::with_clock`](crate::client::RetryLayer::with_clock)).
    pub fn with_clock<C2: Clock + Clone>(self, clock: C2) -> FailFastLayer<Bu, C2> {
        FailFastLayer { shared: self.shared.with_clock(clock) }
    }

    /// The policy.
    pub fn policy(&self) -> &Arc<RetryPolicy<Bu>> {
        self.shared.policy()
    }

    /// The deadline for requests that carry no [`RequestDeadline`](crate::wire::RequestDeadline).
    pub fn with_default_timeout(self, timeout: Duration) -> Self {
        FailFastLayer { shared: self.shared.with_default_timeout(timeout) }
    }

    /// The HTTP status classifier.
    pub fn with_classifier(self, classifier: HttpClassifier) -> Self {
        FailFastLayer { shared: self.shared.with_classifier(classifier) }
    }

    /// Records every call into `metrics`.
    pub fn with_metrics(self, metrics: Arc<ClientMetrics>) -> Self {
        FailFastLayer { shared: self.shared.with_metrics(metrics) }
    }
}

impl<S, Bu, C> Layer<S> for FailFastLayer<Bu, C> {
    type Service = FailFast<S, Bu, C>;

    fn layer(&self, inner: S) -> Self::Service {
        FailFast { inner, shared: self.shared.for_service() }
    }
}
