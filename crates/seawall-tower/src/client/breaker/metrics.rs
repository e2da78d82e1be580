//! [`BreakerMetrics`]: what the breaker layer counts, exported to Prometheus (feature
//! `client-prometheus`) by a scrape-time collector over its atomics.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use seawall::breaker::BreakerState;

/// The breaker layer's metrics; [`register`](Self::register) them (feature
/// `client-prometheus`), then hand them to
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
/// # #[cfg(feature = "client-prometheus")] {
/// use prometheus_client::registry::Registry;
/// use seawall_tower::client::{BreakerMetrics, metrics_text};
///
/// let mut registry = Registry::default();
/// BreakerMetrics::new().register(&mut registry);
/// assert!(metrics_text(&registry).contains("seawall_client_breaker_layer_opened_total 0"));
/// # }
/// ```
#[derive(Debug, Default)]
pub struct BreakerMetrics {
    // The layer increments these as it did prometheus-client's `Counter`s; the exporter holds
    // clones of them.
    pub(super) opened: Count,
    pub(super) rejected_open: Count,
    pub(super) rejected_forced: Count,
    pub(super) probes: Count,
    state: Arc<AtomicI64>,
}

/// One counter of a [`BreakerMetrics`]: a shared relaxed atomic.
#[derive(Debug, Default, Clone)]
pub(super) struct Count(Arc<AtomicU64>);

impl Count {
    pub(super) fn inc(&self) {
        self.0.fetch_add(1, Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

impl BreakerMetrics {
    /// Fresh metrics, all zero.
    pub fn new() -> Self {
        Self::default()
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
        let v = match s {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        };
        self.state.store(v, Relaxed);
    }
}

#[cfg(feature = "client-prometheus")]
mod export {
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::MetricType;
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use prometheus_client::registry::Registry;

    use super::*;

    /// Reads a [`BreakerMetrics`]' atomics at each scrape.
    #[derive(Debug)]
    struct BreakerCollector {
        opened: Count,
        rejected_open: Count,
        rejected_forced: Count,
        probes: Count,
        state: Arc<AtomicI64>,
    }

    impl Collector for BreakerCollector {
        fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let counter = |enc: &mut DescriptorEncoder, name, help, v: u64| {
                let c = ConstCounter::new(v);
                c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
            };
            counter(&mut enc, "opened", "Times the breaker opened", self.opened.get())?;
            let mut f = enc.encode_descriptor(
                "rejected",
                "Requests refused, by reason",
                None,
                MetricType::Counter,
            )?;
            for (reason, c) in [("open", &self.rejected_open), ("forced", &self.rejected_forced)] {
                ConstCounter::new(c.get()).encode(f.encode_family(&[("reason", reason)])?)?;
            }
            counter(&mut enc, "probes", "Half-open probes let through", self.probes.get())?;
            let g = ConstGauge::new(self.state.load(Relaxed));
            g.encode(enc.encode_descriptor(
                "state",
                "Breaker state: 0 closed, 1 open, 2 half-open",
                None,
                g.metric_type(),
            )?)
        }
    }

    impl BreakerMetrics {
        /// Registers every metric in `registry` under the names in the [table](BreakerMetrics),
        /// read at each scrape.
        #[cfg_attr(docsrs, doc(cfg(feature = "client-prometheus")))]
        pub fn register(&self, registry: &mut Registry) {
            let collector = BreakerCollector {
                opened: self.opened.clone(),
                rejected_open: self.rejected_open.clone(),
                rejected_forced: self.rejected_forced.clone(),
                probes: self.probes.clone(),
                state: self.state.clone(),
            };
            registry
                .sub_registry_with_prefix("seawall_client_breaker_layer")
                .register_collector(Box::new(collector));
        }
    }
}
