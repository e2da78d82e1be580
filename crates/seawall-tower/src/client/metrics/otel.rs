//! The client metrics through OpenTelemetry (feature `otel`):
//! [`ClientMetrics::register_otel`].
//!
//! # Why observable instruments
//!
//! The policy's core counters ([`seawall::metrics::Metrics`], which [`ClientMetrics`] views)
//! already count everything, in relaxed atomics, on the hot path of every call. Recording each
//! event a second time into OpenTelemetry counters would double that work for everyone who
//! turns the feature on. So no count is recorded twice: `register_otel` registers *observable*
//! instruments whose callbacks read a snapshot of the same atomics when the SDK collects (once
//! per export interval). Only the
//! duration histogram is fed per call (below).
//!
//! The same counts therefore appear in both exports: the Prometheus registry (if you register
//! one) and OpenTelemetry agree at every collection.
//!
//! | OpenTelemetry name | instrument | unit | attributes |
//! |---|---|---|---|
//! | [`seawall.client.call.started`](CALL_STARTED) | observable counter | `{call}` | |
//! | [`seawall.client.attempt.started`](ATTEMPT_STARTED) | observable counter | `{attempt}` | `attempt` (`1`, `2`, …, `10+`) |
//! | [`seawall.client.retries`](RETRIES) | observable counter | `{retry}` | |
//! | [`seawall.client.give_up`](GIVE_UP) | observable counter | `{call}` | `reason` ([`GiveUpReason::as_str`](seawall::policy::GiveUpReason::as_str)) |
//! | [`seawall.client.retry_overflow`](RETRY_OVERFLOW) | observable counter | `{retry}` | |
//! | [`seawall.client.breaker.state`](BREAKER_STATE) | observable gauge (i64) | | 0 closed, 1 open, 2 half-open |
//! | [`seawall.client.call.duration`](CALL_DURATION) | histogram (f64) | `s` | successful calls only |
//!
//! Every `attempt` and `reason` value is reported, zeros included, as in the Prometheus export.
//! Attempts per logical call — the number to watch, see [`metrics`](crate::client::metrics) —
//! is `seawall.client.attempt.started` summed over `attempt`, divided by
//! `seawall.client.call.started`.
//!
//! # The duration histogram
//!
//! [`seawall.client.call.duration`](CALL_DURATION) (seconds, successful calls only, the bucket
//! boundaries of OpenTelemetry's `http.client.request.duration`) is the one instrument fed as
//! calls happen: OpenTelemetry has no observable histogram. Once registered, each successful
//! call records its duration in it too — one check of a `OnceLock` for metrics that were never
//! registered with OpenTelemetry, the SDK's `record` for those that were.
//!
//! # Several dependencies
//!
//! Pass each dependency's [`ClientMetrics`] its own attributes, on the same meter: the
//! instruments are shared and each dependency is one attribute set in them, the OpenTelemetry
//! way (the Prometheus export does the same with a `dependency` label).
//!
//! ```
//! use opentelemetry::KeyValue;
//! use seawall_tower::client::{ClientMetrics, RetryLayer};
//! use std::sync::Arc;
//!
//! // Usually the global meter provider's meter (an SDK `SdkMeterProvider` with an exporter).
//! let meter = opentelemetry::global::meter("seawall");
//! let orders = Arc::new(ClientMetrics::new());
//! orders.register_otel(&meter, &[KeyValue::new("dependency", "orders")]);
//! let users = Arc::new(ClientMetrics::new());
//! users.register_otel(&meter, &[KeyValue::new("dependency", "users")]);
//! let _orders_layer = RetryLayer::new().with_metrics(orders);
//! ```
//!
//! Register each [`ClientMetrics`] once: a second registration reports its counts twice (the
//! histogram stays with the first). The callbacks hold the metrics weakly; once the metrics (and every layer using
//! them) are dropped, they report nothing.

use std::sync::{Arc, Weak};

use opentelemetry::KeyValue;
use opentelemetry::metrics::Meter;

use crate::client::metrics::{ClientMetrics, OtelDuration, attempts_by_number, give_ups_by_reason};

/// Logical calls started (observable counter, `{call}`).
pub const CALL_STARTED: &str = "seawall.client.call.started";
/// Attempts sent, by `attempt` number (observable counter, `{attempt}`).
pub const ATTEMPT_STARTED: &str = "seawall.client.attempt.started";
/// Attempts after the first (observable counter, `{retry}`).
pub const RETRIES: &str = "seawall.client.retries";
/// Calls given up, by `reason` (observable counter, `{call}`).
pub const GIVE_UP: &str = "seawall.client.give_up";
/// Retries refused by the budget or local throttling (observable counter, `{retry}`).
pub const RETRY_OVERFLOW: &str = "seawall.client.retry_overflow";
/// Circuit breaker state: 0 closed, 1 open, 2 half-open (observable i64 gauge).
pub const BREAKER_STATE: &str = "seawall.client.breaker.state";
/// Duration of successful calls, in seconds (histogram, `s`).
pub const CALL_DURATION: &str = "seawall.client.call.duration";

/// Bucket boundaries, in seconds: OpenTelemetry's semantic conventions for
/// `http.client.request.duration`.
const DURATION_BOUNDARIES: [f64; 14] =
    [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

impl ClientMetrics {
    /// Registers instruments on `meter` that report these metrics, under the names in the
    /// [`otel`](crate::client::metrics::otel) module docs, each measurement carrying `attributes` (e.g.
    /// `dependency`) besides its own: observable counters and a gauge read at collection time,
    /// and the duration histogram, fed by each successful call. Register once: a second
    /// registration (on any meter) reports the counters twice and is ignored by the histogram.
    pub fn register_otel(self: &Arc<Self>, meter: &Meter, attributes: &[KeyValue]) {
        let base: Arc<[KeyValue]> = attributes.into();
        let histogram = meter
            .f64_histogram(CALL_DURATION)
            .with_description("Duration of successful calls")
            .with_unit("s")
            .with_boundaries(DURATION_BOUNDARIES.to_vec())
            .build();
        let _ = self
            .otel_duration
            .set(OtelDuration { histogram, attributes: base.iter().cloned().collect() });
        let plain = |read: fn(&ClientMetrics) -> u64| {
            let (m, attrs) = (Arc::downgrade(self), base.clone());
            move |o: &dyn opentelemetry::metrics::AsyncInstrument<u64>| {
                if let Some(m) = m.upgrade() {
                    o.observe(read(&m), &attrs);
                }
            }
        };
        // One attribute set per label value, built once; the callback zips them with the values
        // (both come in the same, fixed order).
        let labelled = |key: &'static str, read: fn(&ClientMetrics) -> Vec<(&'static str, u64)>| {
            let sets: Vec<Vec<KeyValue>> = read(self)
                .into_iter()
                .map(|(label, _)| with(&base, KeyValue::new(key, label)))
                .collect();
            let m: Weak<ClientMetrics> = Arc::downgrade(self);
            move |o: &dyn opentelemetry::metrics::AsyncInstrument<u64>| {
                if let Some(m) = m.upgrade() {
                    for ((_, value), attrs) in read(&m).into_iter().zip(&sets) {
                        o.observe(value, attrs);
                    }
                }
            }
        };

        meter
            .u64_observable_counter(CALL_STARTED)
            .with_description("Logical calls started")
            .with_unit("{call}")
            .with_callback(plain(|m| m.snapshot().calls))
            .build();
        meter
            .u64_observable_counter(ATTEMPT_STARTED)
            .with_description("Attempts sent, by attempt number")
            .with_unit("{attempt}")
            .with_callback(labelled("attempt", |m| attempts_by_number(&m.snapshot()).collect()))
            .build();
        meter
            .u64_observable_counter(RETRIES)
            .with_description("Attempts after the first")
            .with_unit("{retry}")
            .with_callback(plain(|m| m.snapshot().retries))
            .build();
        meter
            .u64_observable_counter(GIVE_UP)
            .with_description("Calls given up, by reason")
            .with_unit("{call}")
            .with_callback(labelled("reason", |m| give_ups_by_reason(&m.snapshot()).collect()))
            .build();
        meter
            .u64_observable_counter(RETRY_OVERFLOW)
            .with_description("Retries refused by the budget or local throttling")
            .with_unit("{retry}")
            .with_callback(plain(|m| m.snapshot().retry_overflow()))
            .build();
        let (m, attrs) = (Arc::downgrade(self), base.clone());
        meter
            .i64_observable_gauge(BREAKER_STATE)
            .with_description("Circuit breaker state: 0 closed, 1 open, 2 half-open")
            .with_callback(move |o| {
                if let Some(m) = m.upgrade() {
                    o.observe(m.breaker_value(), &attrs);
                }
            })
            .build();
    }
}

/// `base` plus one more attribute.
fn with(base: &[KeyValue], kv: KeyValue) -> Vec<KeyValue> {
    base.iter().cloned().chain([kv]).collect()
}
