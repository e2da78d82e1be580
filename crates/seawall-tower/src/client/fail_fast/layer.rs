//! [`FailFastLayer`]: configuration of a layer that must not retry.

use std::sync::Arc;
use std::time::Duration;

use seawall::ConfigError;
use seawall::budget::{Budget, Unlimited};
use seawall::classify::HttpClassifier;
use seawall::policy::{PolicyConfig, RetryPolicy, Role};
use tower_layer::Layer;

use super::FailFast;
use crate::client::config::LayerConfig;
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
pub struct FailFastLayer<Bu = Unlimited> {
    shared: LayerConfig<Bu>,
}

impl<Bu> Clone for FailFastLayer<Bu> {
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
            .unwrap_or_else(|_| unreachable!("fail_fast() has the FailFast role"))
    }
}

impl<Bu: Budget> FailFastLayer<Bu> {
    /// A layer running `policy`, which must have the [`Role::FailFast`] role.
    pub fn from_policy(policy: RetryPolicy<Bu>) -> Result<Self, ConfigError> {
        Self::from_shared_policy(Arc::new(policy))
    }

    /// A layer running a shared policy, which must have the [`Role::FailFast`] role.
    pub fn from_shared_policy(policy: Arc<RetryPolicy<Bu>>) -> Result<Self, ConfigError> {
        let config = LayerConfig::new(policy, Role::FailFast, "fail_fast_layer.policy.role")?;
        Ok(FailFastLayer { shared: config })
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

impl<S, Bu> Layer<S> for FailFastLayer<Bu> {
    type Service = FailFast<S, Bu>;

    fn layer(&self, inner: S) -> Self::Service {
        FailFast { inner, shared: self.shared.for_service() }
    }
}
