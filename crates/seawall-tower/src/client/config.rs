//! [`LayerConfig`]: the configuration both client layers build, held once for
//! [`RetryLayer`](crate::client::RetryLayer) and [`FailFastLayer`](crate::client::FailFastLayer).

use std::sync::Arc;
use std::time::Duration;

use seawall::ConfigError;
use seawall::budget::Budget;
use seawall::classify::HttpClassifier;
use seawall::policy::{RetryPolicy, Role};

use crate::client::engine::{Shared, TimeoutHeader};
use crate::client::metrics::ClientMetrics;

/// A layer's settings, shared by every service it builds: the policy (checked for the layer's
/// role) and the builder's edits, copy-on-write so services already built keep theirs.
pub(crate) struct LayerConfig<Bu> {
    shared: Arc<Shared<Bu>>,
}

/// Transparent: a layer prints its settings as it did when it held them directly.
impl<Bu: std::fmt::Debug> std::fmt::Debug for LayerConfig<Bu> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.fmt(f)
    }
}

impl<Bu> Clone for LayerConfig<Bu> {
    fn clone(&self) -> Self {
        LayerConfig { shared: self.shared.clone() }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Owner => "Owner",
        Role::FailFast => "FailFast",
    }
}

impl<Bu> LayerConfig<Bu> {
    /// What each service built by the layer holds.
    pub(crate) fn for_service(&self) -> Arc<Shared<Bu>> {
        self.shared.clone()
    }

    pub(crate) fn policy(&self) -> &Arc<RetryPolicy<Bu>> {
        &self.shared.policy
    }
}

impl<Bu: Budget> LayerConfig<Bu> {
    /// Settings running `policy`, which must have `role` (`field` names the setting in the
    /// error): the default classifier, no default timeout, no idempotency keys, no metrics.
    pub(crate) fn new(
        policy: Arc<RetryPolicy<Bu>>,
        role: Role,
        field: &'static str,
    ) -> Result<Self, ConfigError> {
        let got = policy.config().role();
        if got != role {
            return Err(ConfigError::new(field, role_name(role), role_name(got)));
        }
        let mut shared = Shared {
            policy,
            classifier: HttpClassifier::default(),
            default_timeout: None,
            timeout_header: TimeoutHeader::default(),
            stamp_keys: false,
            metrics: None,
            clock_free: false,
        };
        shared.clock_free = shared.calls_need_no_clock();
        Ok(LayerConfig { shared: Arc::new(shared) })
    }

    /// Applies one builder edit, then derives again what depends on all the settings.
    fn edit(mut self, f: impl FnOnce(&mut Shared<Bu>)) -> Self {
        let s = Arc::make_mut(&mut self.shared);
        f(s);
        s.clock_free = s.calls_need_no_clock();
        self
    }

    pub(crate) fn with_default_timeout(self, timeout: Duration) -> Self {
        self.edit(|s| {
            s.default_timeout = Some(timeout);
            s.timeout_header = TimeoutHeader::new(Some(timeout));
        })
    }

    pub(crate) fn with_idempotency_keys(self, yes: bool) -> Self {
        self.edit(|s| s.stamp_keys = yes)
    }

    pub(crate) fn with_classifier(self, classifier: HttpClassifier) -> Self {
        self.edit(|s| s.classifier = classifier)
    }

    pub(crate) fn with_metrics(self, metrics: Arc<ClientMetrics>) -> Self {
        self.edit(|s| s.metrics = Some(metrics))
    }
}

#[cfg(test)]
mod tests {
    use seawall::breaker::{Breaker, BreakerConfig};
    use seawall::budget::{AnyBudget, GrpcThrottle, RatioBudget};
    use seawall::policy::PolicyConfig;

    use super::*;

    fn config(policy: RetryPolicy<AnyBudget>) -> LayerConfig<AnyBudget> {
        LayerConfig::new(Arc::new(policy), Role::Owner, "policy").unwrap()
    }

    fn grpc() -> RetryPolicy<AnyBudget> {
        RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default().into())
    }

    #[test]
    fn calls_skip_the_clock_only_when_nothing_needs_the_time() {
        let free = |c: &LayerConfig<AnyBudget>| c.for_service().clock_free;
        assert!(free(&config(grpc())), "defaults: no deadline, no metrics, a token bucket");
        assert!(!free(&config(grpc()).with_default_timeout(Duration::from_secs(1))));
        assert!(!free(&config(grpc()).with_metrics(Arc::new(ClientMetrics::new()))));
        let per_try = PolicyConfig::default().with_per_try_timeout(Duration::from_secs(1));
        let per_try = RetryPolicy::new(per_try.unwrap(), GrpcThrottle::default().into());
        assert!(!free(&config(per_try)));
        assert!(!free(&config(grpc().with_breaker(Breaker::new(BreakerConfig::default())))));
        let ratio = RetryPolicy::new(PolicyConfig::default(), RatioBudget::default().into());
        assert!(!free(&config(ratio)));
        // Settings that do not need the time leave calls clock-free.
        assert!(free(&config(grpc()).with_idempotency_keys(true)));
    }
}
