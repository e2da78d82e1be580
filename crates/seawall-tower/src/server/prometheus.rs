//! Prometheus export of [`ServerMetrics`], read from its atomics at scrape time.
//!
//! # Why a collector and not prometheus-client metrics
//!
//! The layers already count into plain relaxed atomics (one `fetch_add` per event, nothing
//! locked). Keeping a second set of `prometheus_client` counters in step would double every
//! increment on the hot path; instead [`ServerMetrics::register`] adds a
//! [`Collector`] that takes a [`snapshot`](ServerMetrics::snapshot) on each scrape and encodes
//! it. The request path does not change at all, and a scrape costs ~40 atomic loads.
//!
//! # The two numbers to watch
//!
//! A server in a retry storm keeps its throughput and loses its goodput, so watch their ratio;
//! and a queue whose oldest request is older than the callers' timeout is serving people who
//! have already gone (they retry, adding load), so compare the queue age with that timeout.
//!
//! ```promql
//! # Share of handler responses that were useful (successful and within the deadline).
//! sum(rate(seawall_server_goodput_total[1m])) / sum(rate(seawall_server_throughput_total[1m]))
//!
//! # Share of offered requests that were served usefully (rejections count as offered).
//! sum(rate(seawall_server_goodput_total[1m]))
//!   / (sum(rate(seawall_server_throughput_total[1m])) + sum(rate(seawall_server_rejected_total[1m])))
//!
//! # Rejections per second by reason.
//! sum by (reason) (rate(seawall_server_rejected_total[1m]))
//!
//! # Share of arrivals that are retries (attempt ≥ 2): "a surge of second and third attempts
//! # says their peers are overloaded too".
//! sum(rate(seawall_server_arrivals_total{attempt!="1"}[1m])) / sum(rate(seawall_server_arrivals_total[1m]))
//!
//! # The five heaviest callers (with `ShedLayer::with_callers`).
//! topk(5, sum by (caller) (rate(seawall_server_caller_arrivals_total[5m])))
//!
//! # Oldest queued request vs the callers' timeout (here 250 ms): above 1, work is wasted.
//! max(seawall_server_oldest_queued_seconds) / 0.250
//!
//! # p99 latency of successful responses.
//! histogram_quantile(0.99, sum by (le) (rate(seawall_server_request_duration_seconds_bucket[5m])))
//! ```
//!
//! | metric (Prometheus name) | OpenTelemetry name | type | labels |
//! |---|---|---|---|
//! | `seawall_server_throughput_total` | `seawall.server.throughput` | counter | |
//! | `seawall_server_goodput_total` | `seawall.server.goodput` | counter | |
//! | `seawall_server_rejected_total` | `seawall.server.rejected` | counter | `reason` ([`RejectReason::as_str`]: `queue_full`, `codel_drop`, `deadline_expired`, `retry_shed`, `admission_cut`) |
//! | `seawall_server_arrivals_total` | `seawall.server.arrivals` | counter | `attempt` (`1` … `9`, `10+`), counted at `ShedLayer`'s door |
//! | `seawall_server_caller_arrivals_total` | `seawall.server.caller.arrivals` | counter | `caller`, the heaviest callers only ([`TopCallers`](seawall::metrics::top::TopCallers)); present with `ShedLayer::with_callers` |
//! | `seawall_server_in_flight` | `seawall.server.in_flight` | gauge | |
//! | `seawall_server_queue_length` | `seawall.server.queue.length` | gauge | |
//! | `seawall_server_oldest_queued_seconds` | `seawall.server.queue.oldest_age` | gauge | |
//! | `seawall_server_request_duration_seconds` | `seawall.server.request.duration` | histogram | successful responses only |
//!
//! Throughput counts responses the handler produced (any status); rejections by a layer are
//! counted only in `rejected`. The duration histogram holds goodput only, so its `_count` equals
//! `seawall_server_goodput_total`; its buckets are 2^k µs (1 µs … ~8.4 s, then `+Inf`). In-flight
//! and queue length are the values at the queue's last change (every admission, start and
//! finish); the oldest queued age is measured at the scrape, so it keeps growing while a stuck
//! queue sees no traffic. Label several servers with `Registry::sub_registry_with_label`.
//!
//! # The idempotency layer
//!
//! [`IdempotencyMetrics::register`] exports the `IdempotencyLayer`'s counters the same way, as
//! `seawall_server_idempotency_<counter>_total` for each field of
//! [`IdempotencySnapshot`](super::idempotency::IdempotencySnapshot) (`executed`, `replayed`,
//! `conflicts`, `mismatches`, `principal_missing`, `body_too_large`, `body_timeouts`,
//! `store_unavailable`, `store_timeouts`, `capacity_refused`, `pending_refused`,
//! `released_cancelled`, `abandoned`); [`IdempotencyMetrics::register_with_pool`] adds the
//! in-memory store's two pools as gauges, `seawall_server_idempotency_pending_keys` (keys in
//! flight) and `seawall_server_idempotency_records` (finished and outcome-unknown keys).
//!
//! ```promql
//! # Writes refused because the store was down or full: page someone.
//! sum(rate(seawall_server_idempotency_store_unavailable_total[5m]))
//!   + sum(rate(seawall_server_idempotency_capacity_refused_total[5m]))
//!   + sum(rate(seawall_server_idempotency_pending_refused_total[5m]))
//! ```

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use seawall::time::{Clock, SystemClock};

use std::sync::Arc;

use super::idempotency::IdempotencyMetrics;
use super::idempotency::store::memory::MemoryStore;
use super::metrics::{LATENCY_BUCKETS, RejectReason, ServerMetrics, bucket_upper_bound};

/// Encodes a [`ServerMetrics`] snapshot on every scrape (see the [module docs](self)); the clock
/// is the `ShedLayer`'s, for the age of the oldest queued request.
#[derive(Debug)]
struct ServerCollector<C> {
    metrics: ServerMetrics,
    clock: C,
}

impl<C: Clock + 'static> Collector for ServerCollector<C> {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.metrics.snapshot();
        let oldest = self.metrics.oldest_queued_at(self.clock.now());
        let counter = |enc: &mut DescriptorEncoder, name, help, v: u64| {
            let c = ConstCounter::new(v);
            c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
        };
        counter(
            &mut enc,
            "throughput",
            "Responses the handler produced, any status",
            s.throughput,
        )?;
        counter(
            &mut enc,
            "goodput",
            "Successful responses produced before the caller's deadline",
            s.goodput,
        )?;

        let mut family = enc.encode_descriptor(
            "rejected",
            "Requests answered by a server layer instead of the handler, by reason",
            None,
            MetricType::Counter,
        )?;
        for r in RejectReason::ALL {
            ConstCounter::new(s.rejected(r))
                .encode(family.encode_family(&[("reason", r.as_str())])?)?;
        }

        let mut family = enc.encode_descriptor(
            "arrivals",
            "Requests arriving at the door, by attempt number (Request-Attempt, \
             grpc-previous-rpc-attempts + 1)",
            None,
            MetricType::Counter,
        )?;
        for (label, v) in seawall::metrics::ATTEMPT_LABELS.iter().zip(s.arrivals) {
            ConstCounter::new(v).encode(family.encode_family(&[("attempt", *label)])?)?;
        }
        if !s.callers.is_empty() {
            let mut family = enc.encode_descriptor(
                "caller_arrivals",
                "Requests arriving, by caller, the heaviest callers only (Space-Saving: a count \
                 is an upper bound)",
                None,
                MetricType::Counter,
            )?;
            for c in &s.callers {
                ConstCounter::new(c.count)
                    .encode(family.encode_family(&[("caller", c.caller.as_str())])?)?;
            }
        }

        let gauge = |enc: &mut DescriptorEncoder, name, help, unit, v: f64| {
            let g = ConstGauge::new(v);
            g.encode(enc.encode_descriptor(name, help, unit, g.metric_type())?)
        };
        gauge(
            &mut enc,
            "in_flight",
            "Requests running in the handler now",
            None,
            s.in_flight as f64,
        )?;
        gauge(
            &mut enc,
            "queue_length",
            "Requests waiting in the queue now",
            None,
            s.queue_len as f64,
        )?;
        gauge(
            &mut enc,
            "oldest_queued",
            "Age of the oldest request waiting in the queue now",
            Some(&Unit::Seconds),
            oldest.as_secs_f64(),
        )?;

        // Non-cumulative (upper bound, count) pairs; the encoder accumulates them and writes
        // f64::MAX as `+Inf`.
        let buckets: [(f64, u64); LATENCY_BUCKETS] = std::array::from_fn(|i| {
            (bucket_upper_bound(i).map_or(f64::MAX, |d| d.as_secs_f64()), s.latency[i])
        });
        enc.encode_descriptor(
            "request_duration",
            "Latency of successful responses within the deadline (goodput only)",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?
        .encode_histogram::<NoLabelSet>(
            s.latency_sum.as_secs_f64(),
            s.latency.iter().sum(),
            &buckets,
            None,
        )
    }
}

impl ServerMetrics {
    /// Registers these metrics in `registry` under the `seawall_server_*` names in the
    /// [module docs](self); values are read from the atomics at each scrape.
    ///
    /// ```
    /// use prometheus_client::registry::Registry;
    /// use seawall_tower::server::{ServerMetrics, prometheus};
    ///
    /// let metrics = ServerMetrics::new();
    /// let mut registry = Registry::default();
    /// metrics.register(&mut registry);
    /// metrics.response(true, std::time::Duration::from_millis(3));
    /// assert!(prometheus::encode(&registry).contains("seawall_server_goodput_total 1\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        self.register_with_clock(registry, SystemClock);
    }

    /// [`register`](Self::register) for a `ShedLayer` driven by another clock (a manual clock in
    /// tests): the oldest queued age is measured on `clock`.
    pub fn register_with_clock<C: Clock + 'static>(&self, registry: &mut Registry, clock: C) {
        let collector = ServerCollector { metrics: self.clone(), clock };
        registry.sub_registry_with_prefix("seawall_server").register_collector(Box::new(collector));
    }
}

/// Encodes an [`IdempotencyMetrics`] snapshot (and, with a pool, the store's fill) on every
/// scrape.
#[derive(Debug)]
struct IdempotencyCollector<C: 'static> {
    metrics: IdempotencyMetrics,
    pool: Option<Arc<MemoryStore<C>>>,
}

impl<C: Clock + 'static> Collector for IdempotencyCollector<C> {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.metrics.snapshot();
        let counters: [(&str, &str, u64); 14] = [
            ("executed", "Keyed requests whose handler was called", s.executed),
            ("replayed", "Stored responses replayed", s.replayed),
            ("conflicts", "409s: key in progress or outcome unknown", s.conflicts),
            ("mismatches", "422s: key reused with another payload", s.mismatches),
            ("principal_missing", "401s: keyed request without a principal", s.principal_missing),
            ("body_too_large", "413s: body over the limit", s.body_too_large),
            ("body_timeouts", "408s: body not read within the body timeout", s.body_timeouts),
            ("store_unavailable", "503s: the store failed or timed out", s.store_unavailable),
            ("store_timeouts", "Store calls that hit the store timeout", s.store_timeouts),
            ("capacity_refused", "503s: the store's records pool was full", s.capacity_refused),
            ("pending_refused", "503s: the store's pending pool was full", s.pending_refused),
            (
                "scope_refused",
                "429s: the principal held its share or its bound of unknown outcomes",
                s.scope_refused,
            ),
            (
                "released_cancelled",
                "Keys released: request cancelled before the handler ran",
                s.released_cancelled,
            ),
            (
                "abandoned",
                "Keys outcome unknown: request cancelled after the handler ran",
                s.abandoned,
            ),
        ];
        for (name, help, v) in counters {
            let c = ConstCounter::new(v);
            c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        if let Some(pool) = &self.pool {
            let st = pool.stats();
            for (name, help, v) in [
                (
                    "pending_keys",
                    "Keys in flight in the in-memory store's pending pool",
                    st.pending,
                ),
                ("records", "Finished and outcome-unknown keys in the in-memory store", st.records),
                ("unknown_records", "Outcome-unknown keys in the in-memory store", st.unknown),
                ("scopes", "Principals holding keys in the in-memory store", st.scopes),
            ] {
                let g = ConstGauge::new(v as i64);
                g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)?;
            }
        }
        Ok(())
    }
}

impl IdempotencyMetrics {
    /// Registers these counters in `registry` as `seawall_server_idempotency_*_total` (see the
    /// [module docs](self)); read from the atomics at each scrape.
    ///
    /// ```
    /// use prometheus_client::registry::Registry;
    /// use seawall_tower::server::idempotency::IdempotencyMetrics;
    /// use seawall_tower::server::prometheus;
    ///
    /// let metrics = IdempotencyMetrics::new();
    /// let mut registry = Registry::default();
    /// metrics.register(&mut registry);
    /// let page = prometheus::encode(&registry);
    /// assert!(page.contains("seawall_server_idempotency_executed_total 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        self.register_collector::<SystemClock>(registry, None);
    }

    /// [`register`](Self::register), plus the fill of `pool`, the in-memory store the layer
    /// uses (share it: `IdempotencyLayer::with_store_and_clock(pool.clone(), clock)`), as the
    /// gauges `seawall_server_idempotency_pending_keys` and `_records`.
    pub fn register_with_pool<C: Clock + 'static>(
        &self,
        registry: &mut Registry,
        pool: Arc<MemoryStore<C>>,
    ) {
        self.register_collector(registry, Some(pool));
    }

    fn register_collector<C: Clock + 'static>(
        &self,
        registry: &mut Registry,
        pool: Option<Arc<MemoryStore<C>>>,
    ) {
        let collector = IdempotencyCollector { metrics: self.clone(), pool };
        registry
            .sub_registry_with_prefix("seawall_server_idempotency")
            .register_collector(Box::new(collector));
    }
}

/// The registry in the Prometheus (OpenMetrics) text exposition format.
pub fn encode(registry: &Registry) -> String {
    crate::exposition::encode(registry)
}

/// An HTTP response with the registry's text exposition: mount it on axum with
/// `get(move || { let r = registry.clone(); async move { metrics_response(&r) } })`
/// (share the registry in an `Arc`).
pub fn metrics_response(registry: &Registry) -> http::Response<String> {
    crate::exposition::response(registry)
}
