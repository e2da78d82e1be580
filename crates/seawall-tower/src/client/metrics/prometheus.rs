//! The Prometheus export of [`ClientMetrics`] (feature `client-prometheus`): a scrape-time
//! collector over the core counters, under the names in [`seawall::metrics::names`].

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};
use seawall::metrics::DURATION_BOUNDS_NS;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::client::metrics::{ClientMetrics, Sources, attempts_by_number, give_ups_by_reason};

/// Reads one [`ClientMetrics`]' counters at each scrape.
#[derive(Debug)]
struct ClientCollector {
    sources: Sources,
    breaker: Arc<AtomicI64>,
}

impl Collector for ClientCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.sources.snapshot();
        let counter = |enc: &mut DescriptorEncoder, name, help, v: u64| {
            let c = ConstCounter::new(v);
            c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
        };
        let family = |enc: &mut DescriptorEncoder,
                      name,
                      help,
                      key: &'static str,
                      values: &mut dyn Iterator<Item = (&'static str, u64)>| {
            let mut f = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (label, v) in values {
                ConstCounter::new(v).encode(f.encode_family(&[(key, label)])?)?;
            }
            Ok(())
        };
        counter(&mut enc, "call_started", "Logical calls started", s.calls)?;
        family(
            &mut enc,
            "attempt_started",
            "Attempts sent, by attempt number",
            "attempt",
            &mut attempts_by_number(&s),
        )?;
        counter(&mut enc, "retries", "Attempts after the first", s.retries)?;
        family(
            &mut enc,
            "give_up",
            "Calls given up, by reason",
            "reason",
            &mut give_ups_by_reason(&s),
        )?;
        counter(
            &mut enc,
            "retry_overflow",
            "Retries refused by the budget or local throttling",
            s.retry_overflow(),
        )?;
        let g = ConstGauge::new(self.breaker.load(Ordering::Relaxed));
        g.encode(enc.encode_descriptor(
            "breaker_state",
            "Circuit breaker state: 0 closed, 1 open, 2 half-open",
            None,
            g.metric_type(),
        )?)?;
        let bounds = DURATION_BOUNDS_NS.iter().map(|&b| b as f64 / 1e9).chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> = bounds.zip(s.durations).collect();
        enc.encode_descriptor(
            "call_duration",
            "Duration of successful logical calls, all attempts and waits included",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?
        .encode_histogram::<NoLabelSet>(
            s.duration_sum.as_secs_f64(),
            s.durations.iter().sum(),
            &buckets,
            None,
        )
    }
}

impl ClientMetrics {
    /// Registers every metric in `registry` under the names in the
    /// [module docs](crate::client::metrics), read from the core counters at each scrape.
    #[cfg_attr(docsrs, doc(cfg(feature = "client-prometheus")))]
    pub fn register(&self, registry: &mut Registry) {
        let collector =
            ClientCollector { sources: self.sources.clone(), breaker: self.breaker.clone() };
        registry.sub_registry_with_prefix("seawall_client").register_collector(Box::new(collector));
    }
}

/// The registry in the Prometheus text exposition format.
pub fn metrics_text(registry: &Registry) -> String {
    crate::exposition::encode(registry)
}

/// An HTTP response with the registry's text exposition: mount it on axum with
/// `get(move || { let r = registry.clone(); async move { metrics_response(&r) } })`.
pub fn metrics_response(registry: &Registry) -> http::Response<String> {
    crate::exposition::response(registry)
}

#[cfg(test)]
mod tests {
    use seawall::budget::GrpcThrottle;
    use seawall::classify::{Class, Transient};
    use seawall::hint::Hint;
    use seawall::metrics::names;
    use seawall::policy::{PolicyConfig, RequestInfo, RetryPolicy};
    use seawall::time::Instant;

    use super::*;

    /// The export reads the policy's own counters: one count per event, whatever the number of
    /// layers the view is attached through, under the names `seawall::metrics::names` defines.
    #[test]
    fn the_export_is_a_view_over_the_core_counters() {
        let policy =
            RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default()).with_seed(1);
        let metrics = ClientMetrics::over(policy.metrics().clone());
        // Attached again (a second layer on the same policy): still counted once.
        metrics.attach(policy.metrics());
        let mut registry = Registry::default();
        metrics.register(&mut registry);

        let t0 = Instant::ZERO;
        let mut call = policy.start(t0, RequestInfo::idempotent(), None);
        policy.before_attempt(&mut call, t0).unwrap();
        let retry = Class::Retryable(Transient::ServerError);
        let _ = policy.after_attempt(&mut call, t0, retry, Hint::None);
        let t1 = t0 + std::time::Duration::from_secs(1);
        policy.before_attempt(&mut call, t1).unwrap();
        let _ = policy.after_attempt(&mut call, t1, Class::Success, Hint::None);
        metrics.succeeded(policy.metrics(), std::time::Duration::from_millis(3));

        assert_eq!(metrics.snapshot(), policy.metrics().snapshot());
        let text = metrics_text(&registry);
        for needle in [
            format!("{} 1", names::CLIENT_CALLS),
            format!("{}{{attempt=\"1\"}} 1", names::CLIENT_ATTEMPTS),
            format!("{}{{attempt=\"2\"}} 1", names::CLIENT_ATTEMPTS),
            format!("{} 1", names::CLIENT_RETRIES),
            format!("{}{{reason=\"budget_exhausted\"}} 0", names::CLIENT_GIVE_UPS),
            format!("{} 0", names::CLIENT_RETRY_OVERFLOW),
            format!("{} 0", names::CLIENT_BREAKER_STATE),
            format!("{} 1", names::CLIENT_CALL_SUCCESSES),
            format!("{}_bucket{{le=\"0.004\"}} 1", names::CLIENT_CALL_DURATION),
        ] {
            assert!(text.contains(&needle), "{needle} missing from\n{text}");
        }
    }
}
