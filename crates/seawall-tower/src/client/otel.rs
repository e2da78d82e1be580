//! The client metrics through OpenTelemetry (feature `otel`):
//! [`ClientMetrics::register_otel`].
//!
//! # Why observable instruments
//!
//! [`ClientMetrics`] already counts everything, in relaxed atomics, on the hot path of every
//! call. Recording each event a second time into OpenTelemetry counters would double that work
//! for everyone who turns the feature on — and cost a branch for everyone who does not. So
//! nothing is recorded twice: `register_otel` registers *observable* instruments whose callbacks
//! read the same atomics when the SDK collects (once per export interval). A call costs exactly
//! what it cost before; the only work is a handful of atomic loads per collection.
//!
//! The same values therefore appear in both exports: the Prometheus registry (if you register
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
//!
//! Every `attempt` and `reason` value is reported, zeros included, as in the Prometheus export.
//! Attempts per logical call — the number to watch, see [`metrics`](crate::client::metrics) —
//! is `seawall.client.attempt.started` summed over `attempt`, divided by
//! `seawall.client.call.started`.
//!
//! # What stays Prometheus-only: the duration histogram
//!
//! `seawall.client.call.duration` is not exported here. OpenTelemetry has no observable
//! histogram: a histogram is fed one measurement at a time, and feeding it would put an
//! OpenTelemetry record call on the hot path of every successful call, which this module exists
//! to avoid. Read call durations from the Prometheus registry
//! ([`ClientMetrics::register`]), or record your own histogram around the service.
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
//! Register each [`ClientMetrics`] once per meter provider: a second registration reports its
//! values twice. The callbacks hold the metrics weakly; once the metrics (and every layer using
//! them) are dropped, they report nothing.

use std::sync::{Arc, Weak};

use opentelemetry::KeyValue;
use opentelemetry::metrics::Meter;

use crate::client::metrics::ClientMetrics;

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

impl ClientMetrics {
    /// Registers observable instruments on `meter` that report these metrics at collection
    /// time, under the names in the [`otel`](crate::client::otel) module docs, each measurement
    /// carrying `attributes` (e.g. `dependency`) besides its own. Adds no work to any call.
    pub fn register_otel(self: &Arc<Self>, meter: &Meter, attributes: &[KeyValue]) {
        let base: Arc<[KeyValue]> = attributes.into();
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
            .with_callback(plain(ClientMetrics::calls_started))
            .build();
        meter
            .u64_observable_counter(ATTEMPT_STARTED)
            .with_description("Attempts sent, by attempt number")
            .with_unit("{attempt}")
            .with_callback(labelled("attempt", |m| m.attempts_by_number().collect()))
            .build();
        meter
            .u64_observable_counter(RETRIES)
            .with_description("Attempts after the first")
            .with_unit("{retry}")
            .with_callback(plain(ClientMetrics::retries_started))
            .build();
        meter
            .u64_observable_counter(GIVE_UP)
            .with_description("Calls given up, by reason")
            .with_unit("{call}")
            .with_callback(labelled("reason", |m| m.give_ups_by_reason().collect()))
            .build();
        meter
            .u64_observable_counter(RETRY_OVERFLOW)
            .with_description("Retries refused by the budget or local throttling")
            .with_unit("{retry}")
            .with_callback(plain(ClientMetrics::retry_overflows))
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
