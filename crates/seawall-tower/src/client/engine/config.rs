//! [`LayerConfig`]: the configuration both client layers build, held once for
//! [`RetryLayer`](crate::client::RetryLayer) and [`FailFastLayer`](crate::client::FailFastLayer).

use std::sync::Arc;
use std::time::Duration;

use seawall::classify::HttpClassifier;
use seawall::policy::{RetryPolicy, Role};

use crate::client::engine::{Shared, TimeoutHeader};
use crate::client::metrics::ClientMetrics;

/// A layer's settings, shared by every service it builds: the policy, the role the layer's type
/// fixes, the clock and the builder's edits, copy-on-write so services already built keep
/// theirs.
pub(crate) struct LayerConfig<Bu, C> {
    shared: Arc<Shared<Bu, C>>,
}

/// Transparent: a layer prints its settings as it did when it held them directly.
impl<Bu: std::fmt::Debug, C: std::fmt::Debug> std::fmt::Debug for LayerConfig<Bu, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.fmt(f)
    }
}

impl<Bu, C> Clone for LayerConfig<Bu, C> {
    fn clone(&self) -> Self {
        LayerConfig { shared: self.shared.clone() }
    }
}

impl<Bu, C> LayerConfig<Bu, C> {
    /// Settings running `policy` in `role` on `clock`: the default classifier, no default
    /// timeout, no idempotency keys, no metrics.
    pub(crate) fn new(policy: Arc<RetryPolicy<Bu>>, role: Role, clock: C) -> Self
    where
        Bu: seawall::budget::Budget,
    {
        let max_attempts = match role {
            Role::Owner => policy.config().max_attempts(),
            Role::FailFast => 1,
        };
        let shared = Shared {
            policy,
            role,
            max_attempts,
            clock,
            classifier: HttpClassifier::default(),
            default_timeout: None,
            timeout_header: TimeoutHeader::default(),
            stamp_keys: false,
            metrics: None,
        };
        LayerConfig { shared: Arc::new(shared) }
    }

    /// What each service built by the layer holds.
    pub(crate) fn for_service(&self) -> Arc<Shared<Bu, C>> {
        self.shared.clone()
    }

    pub(crate) fn policy(&self) -> &Arc<RetryPolicy<Bu>> {
        &self.shared.policy
    }

    /// The same settings on `clock`.
    pub(crate) fn with_clock<C2>(self, clock: C2) -> LayerConfig<Bu, C2> {
        LayerConfig { shared: Arc::new(self.shared.with_clock(clock)) }
    }
}

impl<Bu, C: Clone> LayerConfig<Bu, C> {
    /// Applies one builder edit.
    fn edit(mut self, f: impl FnOnce(&mut Shared<Bu, C>)) -> Self {
        f(Arc::make_mut(&mut self.shared));
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

    pub(crate) fn with_metrics(self, metrics: Arc<ClientMetrics>) -> Self
    where
        Bu: seawall::budget::Budget,
    {
        // The view reports this layer's policy's counters.
        metrics.attach(self.shared.policy.metrics());
        self.edit(|s| s.metrics = Some(metrics))
    }
}
