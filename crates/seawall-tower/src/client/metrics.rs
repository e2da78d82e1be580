//! Prometheus metrics for the client layers, named the OpenTelemetry way.
//!
//! # The one number to watch
//!
//! The signal to watch is *attempts per logical call*: a healthy client sits at
//! ≈ 1.0; a storm pushes it toward the attempt cap long before the dependency's dashboards say
//! why. gRPC's OpenTelemetry metrics make it the ratio of two counters; seawall does the same:
//!
//! ```promql
//! # Attempts per logical call, per dependency; alert above 1.5 for 2 minutes.
//! sum by (dependency) (rate(seawall_client_attempt_started_total[1m]))
//!   /
//! sum by (dependency) (rate(seawall_client_call_started_total[1m]))
//! ```
//!
//! ```yaml
//! groups:
//!   - name: seawall-client
//!     rules:
//!       - alert: RetryAmplification
//!         expr: |
//!           sum by (dependency) (rate(seawall_client_attempt_started_total[1m]))
//!             / sum by (dependency) (rate(seawall_client_call_started_total[1m])) > 1.5
//!         for: 2m
//!         annotations:
//!           summary: "{{ $labels.dependency }}: {{ $value }} attempts per call (retry storm?)"
//!       - alert: RetryBudgetExhausted
//!         expr: sum by (dependency) (rate(seawall_client_retry_overflow_total[1m])) > 0
//!         for: 2m
//! ```
//!
//! | metric (Prometheus name) | OpenTelemetry name | type | labels |
//! |---|---|---|---|
//! | `seawall_client_call_started_total` | `seawall.client.call.started` | counter | |
//! | `seawall_client_attempt_started_total` | `seawall.client.attempt.started` | counter | `attempt` (1, 2, …, `10+`) |
//! | `seawall_client_retries_total` | `seawall.client.retries` | counter | |
//! | `seawall_client_give_up_total` | `seawall.client.give_up` | counter | `reason` ([`GiveUpReason::as_str`]) |
//! | `seawall_client_retry_overflow_total` | `seawall.client.retry_overflow` | counter | |
//! | `seawall_client_breaker_state` | `seawall.client.breaker.state` | gauge | 0 closed, 1 open, 2 half-open |
//! | `seawall_client_call_duration_seconds` | `seawall.client.call.duration` | histogram | successful calls only |
//!
//! Durations of failed calls are kept out of the histogram: fast failures would otherwise make
//! latency look better exactly when things are worst. Label several dependencies with
//! `Registry::sub_registry_with_label(("dependency".into(), "orders".into()))`.
//!
//! Recording is a handful of relaxed atomic increments per call; nothing is locked.

use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};
use seawall::breaker::BreakerState;
use seawall::policy::{GiveUpReason, MAX_ATTEMPTS};

type Labels = [(&'static str, &'static str); 1];

const ATTEMPT_LABELS: [&str; MAX_ATTEMPTS as usize] =
    ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10+"];

/// The client layers' Prometheus metrics. Create one per dependency, register it, and hand it
/// to the layers with `with_metrics`.
///
/// ```
/// use prometheus_client::registry::Registry;
/// use seawall_tower::client::{ClientMetrics, RetryLayer};
/// use std::sync::Arc;
///
/// let mut registry = Registry::default();
/// let metrics = Arc::new(ClientMetrics::new());
/// metrics.register(&mut registry);
/// let _layer = RetryLayer::new().with_metrics(metrics.clone());
/// let text = seawall_tower::client::metrics_text(&registry);
/// assert!(text.contains("seawall_client_call_started_total"));
/// ```
#[derive(Debug)]
pub struct ClientMetrics {
    calls: Counter,
    attempts_family: Family<Labels, Counter>,
    attempts: [Counter; MAX_ATTEMPTS as usize],
    retries: Counter,
    give_ups_family: Family<Labels, Counter>,
    give_ups: [Counter; GiveUpReason::COUNT],
    retry_overflow: Counter,
    breaker: Gauge,
    duration: Durations,
    /// The OpenTelemetry duration histogram, once [`register_otel`](Self::register_otel)ed.
    #[cfg(feature = "otel")]
    pub(crate) otel_duration: std::sync::OnceLock<OtelDuration>,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The OpenTelemetry duration histogram of one registered [`ClientMetrics`], with its
/// attributes: fed here on each success, built by `client::otel` (which reads these metrics, so
/// the type lives on this side).
#[cfg(feature = "otel")]
#[derive(Debug)]
pub(crate) struct OtelDuration {
    pub(crate) histogram: opentelemetry::metrics::Histogram<f64>,
    pub(crate) attributes: Box<[opentelemetry::KeyValue]>,
}

#[cfg(feature = "otel")]
impl OtelDuration {
    fn record(&self, took: Duration) {
        self.histogram.record(took.as_secs_f64(), &self.attributes);
    }
}

impl ClientMetrics {
    /// Fresh metrics. Duration buckets run from 1 ms to ~16 s, doubling.
    pub fn new() -> Self {
        let attempts_family = Family::<Labels, Counter>::default();
        let attempts =
            ATTEMPT_LABELS.map(|n| attempts_family.get_or_create(&[("attempt", n)]).clone());
        let give_ups_family = Family::<Labels, Counter>::default();
        let give_ups = GiveUpReason::ALL
            .map(|r| give_ups_family.get_or_create(&[("reason", r.as_str())]).clone());
        ClientMetrics {
            calls: Counter::default(),
            attempts_family,
            attempts,
            retries: Counter::default(),
            give_ups_family,
            give_ups,
            retry_overflow: Counter::default(),
            breaker: Gauge::default(),
            duration: Durations::default(),
            #[cfg(feature = "otel")]
            otel_duration: std::sync::OnceLock::new(),
        }
    }

    /// Registers every metric in `registry` under the names in the [module docs](self).
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("seawall_client");
        r.register("call_started", "Logical calls started", self.calls.clone());
        r.register(
            "attempt_started",
            "Attempts sent, by attempt number",
            self.attempts_family.clone(),
        );
        r.register("retries", "Attempts after the first", self.retries.clone());
        r.register("give_up", "Calls given up, by reason", self.give_ups_family.clone());
        r.register(
            "retry_overflow",
            "Retries refused by the budget or local throttling",
            self.retry_overflow.clone(),
        );
        r.register(
            "breaker_state",
            "Circuit breaker state: 0 closed, 1 open, 2 half-open",
            self.breaker.clone(),
        );
        r.register_with_unit(
            "call_duration",
            "Duration of successful logical calls, all attempts and waits included",
            Unit::Seconds,
            self.duration.clone(),
        );
    }

    pub(crate) fn call_started(&self) {
        self.calls.inc();
    }

    pub(crate) fn attempt_started(&self, number: u32) {
        let i = (number.max(1) as usize).min(ATTEMPT_LABELS.len()) - 1;
        self.attempts[i].inc();
        if number > 1 {
            self.retries.inc();
        }
    }

    pub(crate) fn succeeded(&self, took: Duration) {
        self.duration.observe(took);
        #[cfg(feature = "otel")]
        if let Some(d) = self.otel_duration.get() {
            d.record(took);
        }
    }

    pub(crate) fn gave_up(&self, reason: GiveUpReason) {
        self.give_ups[reason.index()].inc();
        if matches!(reason, GiveUpReason::BudgetExhausted | GiveUpReason::ThrottledLocally) {
            self.retry_overflow.inc();
        }
    }

    pub(crate) fn breaker_state(&self, state: BreakerState) {
        self.breaker.set(match state {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        });
    }

    // Read-only views for the OpenTelemetry callbacks (`client::otel`), called at collection
    // time only: recording stays as it is.

    #[cfg(feature = "otel")]
    pub(crate) fn calls_started(&self) -> u64 {
        self.calls.get()
    }

    /// Attempts by number label (`"1"`, …, `"10+"`), every label, zeros included.
    #[cfg(feature = "otel")]
    pub(crate) fn attempts_by_number(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        ATTEMPT_LABELS.iter().zip(&self.attempts).map(|(l, c)| (*l, c.get()))
    }

    #[cfg(feature = "otel")]
    pub(crate) fn retries_started(&self) -> u64 {
        self.retries.get()
    }

    /// Give-ups by reason label ([`GiveUpReason::as_str`]), every reason, zeros included.
    #[cfg(feature = "otel")]
    pub(crate) fn give_ups_by_reason(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        GiveUpReason::ALL.iter().zip(&self.give_ups).map(|(r, c)| (r.as_str(), c.get()))
    }

    #[cfg(feature = "otel")]
    pub(crate) fn retry_overflows(&self) -> u64 {
        self.retry_overflow.get()
    }

    /// The breaker gauge: 0 closed, 1 open, 2 half-open.
    #[cfg(feature = "otel")]
    pub(crate) fn breaker_value(&self) -> i64 {
        self.breaker.get()
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

/// Upper bounds of the duration buckets, in nanoseconds: 1 ms doubling to 16.4 s (15 buckets, as
/// `exponential_buckets(0.001, 2.0, 15)`), then `+Inf`.
const DURATION_BOUNDS_NS: [u64; 15] = {
    let mut b = [0; 15];
    let mut i = 0;
    while i < 15 {
        b[i] = 1_000_000 << i;
        i += 1;
    }
    b
};

/// The call-duration histogram: recording is three relaxed atomic adds. (prometheus-client's
/// `Histogram` takes a write lock per observation, which every successful call through a layer
/// would contend for.) Its exposition is prometheus-client's, bucket for bucket.
#[derive(Debug, Clone, Default)]
struct Durations(std::sync::Arc<DurationCells>);

#[derive(Debug, Default)]
struct DurationCells {
    /// Per bucket, not cumulative; the last is `+Inf`.
    buckets: [std::sync::atomic::AtomicU64; DURATION_BOUNDS_NS.len() + 1],
    count: std::sync::atomic::AtomicU64,
    sum_ns: std::sync::atomic::AtomicU64,
}

impl Durations {
    fn observe(&self, took: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let i =
            DURATION_BOUNDS_NS.iter().position(|&b| ns <= b).unwrap_or(DURATION_BOUNDS_NS.len());
        let c = &self.0;
        c.buckets[i].fetch_add(1, Relaxed);
        c.sum_ns.fetch_add(ns, Relaxed);
        c.count.fetch_add(1, Relaxed);
    }
}

impl TypedMetric for Durations {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Durations {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.0;
        // Read separately (not one snapshot): a scrape racing a call may see it in one field
        // and not yet in another, as with any set of Prometheus counters.
        let bounds = DURATION_BOUNDS_NS.iter().map(|&b| b as f64 / 1e9).chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> =
            bounds.zip(c.buckets.iter().map(|b| b.load(Relaxed))).collect();
        let sum = c.sum_ns.load(Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, c.count.load(Relaxed), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock-free histogram exposes what prometheus-client's `Histogram` with the same
    /// buckets does, line for line (the sum to rounding).
    #[test]
    fn durations_expose_like_prometheus_client_histogram() {
        use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
        let ours = Durations::default();
        let theirs = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        for ms in [0.5, 1.0, 1.000_001, 3.0, 250.0, 1_500.0, 16_384.0, 20_000.0, 0.0] {
            let d = Duration::from_nanos((ms * 1e6) as u64);
            ours.observe(d);
            theirs.observe(d.as_secs_f64());
        }
        let text = |m: &dyn Fn(&mut Registry)| {
            let mut r = Registry::default();
            m(&mut r);
            metrics_text(&r)
        };
        let a = text(&|r| r.register_with_unit("d", "d", Unit::Seconds, ours.clone()));
        let b = text(&|r| r.register_with_unit("d", "d", Unit::Seconds, theirs.clone()));
        let (sums_a, rest_a): (Vec<&str>, Vec<&str>) = a.lines().partition(|l| l.contains("_sum"));
        let (sums_b, rest_b): (Vec<&str>, Vec<&str>) = b.lines().partition(|l| l.contains("_sum"));
        assert_eq!(rest_a, rest_b);
        let sum = |l: &[&str]| l[0].rsplit_once(' ').unwrap().1.parse::<f64>().unwrap();
        assert!((sum(&sums_a) - sum(&sums_b)).abs() < 1e-6, "{sums_a:?} {sums_b:?}");
        assert!(a.contains("d_seconds_bucket{le=\"+Inf\"} 9"), "{a}");
    }

    #[test]
    fn names_and_labels_are_exported() {
        let mut reg = Registry::default();
        let m = ClientMetrics::new();
        m.register(&mut reg);
        m.call_started();
        m.attempt_started(1);
        m.attempt_started(2);
        m.attempt_started(42);
        m.gave_up(GiveUpReason::BudgetExhausted);
        m.succeeded(Duration::from_millis(3));
        let text = metrics_text(&reg);
        for needle in [
            "seawall_client_call_started_total 1",
            "seawall_client_attempt_started_total{attempt=\"2\"} 1",
            "seawall_client_attempt_started_total{attempt=\"10+\"} 1",
            "seawall_client_retries_total 2",
            "seawall_client_give_up_total{reason=\"budget_exhausted\"} 1",
            "seawall_client_retry_overflow_total 1",
            "seawall_client_call_duration_seconds_count 1",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
    }
}
