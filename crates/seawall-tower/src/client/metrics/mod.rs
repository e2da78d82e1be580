//! The client layers' metrics: a view over the policy's core counters
//! ([`seawall::metrics::Metrics`]), exported to Prometheus (feature `client-prometheus`, on by
//! default) and OpenTelemetry (feature `otel`), named the OpenTelemetry way.
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
//! | `seawall_client_give_up_total` | `seawall.client.give_up` | counter | `reason` ([`GiveUpReason::as_str`](seawall::policy::GiveUpReason::as_str)) |
//! | `seawall_client_retry_overflow_total` | `seawall.client.retry_overflow` | counter | |
//! | `seawall_client_breaker_state` | `seawall.client.breaker.state` | gauge | 0 closed, 1 open, 2 half-open |
//! | `seawall_client_call_duration_seconds` | `seawall.client.call.duration` | histogram | successful calls only |
//!
//! Durations of failed calls are kept out of the histogram: fast failures would otherwise make
//! latency look better exactly when things are worst. Label several dependencies with
//! `Registry::sub_registry_with_label(("dependency".into(), "orders".into()))`.
//!
//! Nothing here counts on the hot path: the policy's core [`Metrics`] does, one relaxed atomic
//! increment per event, and the exports read a snapshot of it at scrape time. The call-duration
//! histogram is the core's too, fed by the layer (which holds the clock) when a [`ClientMetrics`]
//! is attached; the breaker gauge is set when a call gives up.

#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;
#[cfg(feature = "client-prometheus")]
pub(crate) mod prometheus;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seawall::breaker::BreakerState;
use seawall::metrics::{Metrics, Snapshot};

#[cfg(any(feature = "client-prometheus", feature = "otel"))]
pub(crate) use seawall::metrics::ATTEMPT_LABELS;

/// The client layers' metrics. Create one per dependency, register it, and hand it to the
/// layers with `with_metrics`: it then reports the counters of each layer's policy (summed, when
/// several layers with their own policies share it).
///
/// ```
/// # #[cfg(feature = "client-prometheus")] {
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
/// # }
/// ```
#[derive(Debug, Default)]
pub struct ClientMetrics {
    /// The core counters of every policy this view reports, each once (shared with the
    /// registered exports).
    pub(crate) sources: Sources,
    /// The policy's breaker: 0 closed, 1 open, 2 half-open.
    pub(crate) breaker: Arc<AtomicI64>,
    /// The OpenTelemetry duration histogram, once [`register_otel`](Self::register_otel)ed.
    #[cfg(feature = "otel")]
    pub(crate) otel_duration: std::sync::OnceLock<OtelDuration>,
}

/// The OpenTelemetry duration histogram of one registered [`ClientMetrics`], with its
/// attributes: fed here on each success, built by `metrics::otel`. (OpenTelemetry has no
/// observable histogram, so this one is recorded as calls end rather than read from the core.)
#[cfg(feature = "otel")]
#[derive(Debug)]
pub(crate) struct OtelDuration {
    pub(crate) histogram: opentelemetry::metrics::Histogram<f64>,
    pub(crate) attributes: Box<[opentelemetry::KeyValue]>,
}

impl ClientMetrics {
    /// An empty view: it reports zeros until a layer is given it with `with_metrics`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view over `core` (a policy's [`metrics`](seawall::policy::RetryPolicy::metrics)), for
    /// exporting a policy driven without a layer.
    pub fn over(core: Arc<Metrics>) -> Self {
        let m = Self::new();
        m.attach(&core);
        m
    }

    /// Adds `core` to what this view reports (once, however often it is attached): how a layer
    /// outside this crate (`seawall-grpc`'s) exports the core counters its calls report into.
    pub fn attach(&self, core: &Arc<Metrics>) {
        self.sources.attach(core);
    }

    /// The counters of every attached policy, summed. Read at scrape time.
    pub fn snapshot(&self) -> Snapshot {
        self.sources.snapshot()
    }

    /// A successful call of the layer whose policy counts into `core` took `took` (the
    /// duration histogram, and OpenTelemetry's if registered).
    pub fn succeeded(&self, core: &Metrics, took: Duration) {
        core.call_took(took);
        #[cfg(feature = "otel")]
        if let Some(d) = self.otel_duration.get() {
            d.histogram.record(took.as_secs_f64(), &d.attributes);
        }
    }

    pub(crate) fn breaker_state(&self, state: BreakerState) {
        let v = match state {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        };
        self.breaker.store(v, Ordering::Relaxed);
    }

    /// The breaker gauge: 0 closed, 1 open, 2 half-open.
    #[cfg(feature = "otel")]
    pub(crate) fn breaker_value(&self) -> i64 {
        self.breaker.load(Ordering::Relaxed)
    }
}

/// The core counters a [`ClientMetrics`] reports, shared with its registered exports.
#[derive(Debug, Default, Clone)]
pub(crate) struct Sources(Arc<Mutex<Vec<Arc<Metrics>>>>);

impl Sources {
    fn attach(&self, core: &Arc<Metrics>) {
        let mut sources = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !sources.iter().any(|s| Arc::ptr_eq(s, core)) {
            sources.push(core.clone());
        }
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let sources = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut total = Snapshot::default();
        for s in sources.iter() {
            total.add(&s.snapshot());
        }
        total
    }
}

/// Attempts by number label (`"1"`, …, `"10+"`), every label, zeros included.
#[cfg(any(feature = "client-prometheus", feature = "otel"))]
pub(crate) fn attempts_by_number(s: &Snapshot) -> impl Iterator<Item = (&'static str, u64)> + '_ {
    ATTEMPT_LABELS.iter().zip(s.attempts_by_number).map(|(l, c)| (*l, c))
}

/// Give-ups by reason label ([`GiveUpReason::as_str`](seawall::policy::GiveUpReason::as_str)), every reason, zeros included.
#[cfg(any(feature = "client-prometheus", feature = "otel"))]
pub(crate) fn give_ups_by_reason(s: &Snapshot) -> impl Iterator<Item = (&'static str, u64)> + '_ {
    seawall::policy::GiveUpReason::ALL.iter().map(|&r| (r.as_str(), s.give_ups(r)))
}
