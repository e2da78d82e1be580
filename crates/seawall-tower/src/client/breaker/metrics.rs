//! [`BreakerMetrics`]: what the breaker layer reports, as Prometheus metrics.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use seawall::breaker::BreakerState;

type Labels = [(&'static str, &'static str); 1];

/// The breaker layer's Prometheus metrics; [`register`](Self::register) them, then hand them to
/// [`BreakerLayer::with_metrics`](super::BreakerLayer::with_metrics).
///
/// | metric (Prometheus name) | type | labels |
/// |---|---|---|
/// | `seawall_client_breaker_layer_opened_total` | counter | |
/// | `seawall_client_breaker_layer_rejected_total` | counter | `reason` (`open`, `forced`) |
/// | `seawall_client_breaker_layer_probes_total` | counter | |
/// | `seawall_client_breaker_layer_state` | gauge | 0 closed, 1 open, 2 half-open |
///
/// (The policy's own breaker reports `seawall_client_breaker_state` through
/// [`ClientMetrics`](crate::client::ClientMetrics).)
///
/// ```
/// use prometheus_client::registry::Registry;
/// use seawall_tower::client::{BreakerMetrics, metrics_text};
///
/// let mut registry = Registry::default();
/// BreakerMetrics::new().register(&mut registry);
/// assert!(metrics_text(&registry).contains("seawall_client_breaker_layer_opened_total 0"));
/// ```
#[derive(Debug)]
pub struct BreakerMetrics {
    pub(super) opened: Counter,
    rejected_family: Family<Labels, Counter>,
    pub(super) rejected_open: Counter,
    pub(super) rejected_forced: Counter,
    pub(super) probes: Counter,
    state: Gauge,
}

impl Default for BreakerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl BreakerMetrics {
    /// Fresh metrics, all zero.
    pub fn new() -> Self {
        let rejected_family = Family::<Labels, Counter>::default();
        let rejected_open = rejected_family.get_or_create(&[("reason", "open")]).clone();
        let rejected_forced = rejected_family.get_or_create(&[("reason", "forced")]).clone();
        BreakerMetrics {
            opened: Counter::default(),
            rejected_family,
            rejected_open,
            rejected_forced,
            probes: Counter::default(),
            state: Gauge::default(),
        }
    }

    /// Registers every metric in `registry` under the names in the [table](BreakerMetrics).
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("seawall_client_breaker_layer");
        r.register("opened", "Times the breaker opened", self.opened.clone());
        r.register("rejected", "Requests refused, by reason", self.rejected_family.clone());
        r.register("probes", "Half-open probes let through", self.probes.clone());
        r.register("state", "Breaker state: 0 closed, 1 open, 2 half-open", self.state.clone());
    }

    /// Times the breaker opened (a failed probe re-opening it included).
    pub fn opened(&self) -> u64 {
        self.opened.get()
    }

    /// Requests refused: by the breaker, and forced by the operator's switch.
    pub fn rejected(&self) -> (u64, u64) {
        (self.rejected_open.get(), self.rejected_forced.get())
    }

    /// Probes let through half-open.
    pub fn probes(&self) -> u64 {
        self.probes.get()
    }

    pub(super) fn set_state(&self, s: BreakerState) {
        self.state.set(match s {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        });
    }
}
