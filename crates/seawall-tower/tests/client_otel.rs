//! `ClientMetrics::register_otel` (feature `otel`): calls through `RetryLayer` against an
//! in-process service that fails then succeeds; an OpenTelemetry SDK reader collects, and every
//! exported value equals what the same `ClientMetrics` exports to Prometheus.
#![cfg(feature = "otel")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use prometheus_client::registry::Registry;
use seawall::backoff::{Backoff, Jitter};
use seawall::budget::{AnyBudget, GrpcThrottle};
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall_tower::client::metrics::otel;
use seawall_tower::client::{ClientMetrics, RetryLayer, metrics_text};
use tower::{Layer, ServiceExt};

/// A `ManualReader` the test keeps a handle to after giving it to the provider.
#[derive(Debug, Clone)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: std::sync::Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// (metric name, sorted `key=value` attributes) → value, from one collection.
type Points = BTreeMap<(String, String), i64>;

fn attrs<'a>(kvs: impl Iterator<Item = &'a KeyValue>) -> String {
    let mut v: Vec<String> = kvs.map(|kv| format!("{}={}", kv.key, kv.value)).collect();
    v.sort();
    v.join(",")
}

fn collect(reader: &SharedReader) -> Points {
    let mut rm = ResourceMetrics::default();
    reader.collect(&mut rm).unwrap();
    let mut out = Points::new();
    for scope in rm.scope_metrics() {
        for m in scope.metrics() {
            let name = m.name().to_owned();
            match m.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                    assert!(sum.is_monotonic(), "{name} is a counter");
                    for p in sum.data_points() {
                        let v = i64::try_from(p.value()).unwrap();
                        out.insert((name.clone(), attrs(p.attributes())), v);
                    }
                }
                AggregatedMetrics::I64(MetricData::Gauge(g)) => {
                    for p in g.data_points() {
                        out.insert((name.clone(), attrs(p.attributes())), p.value());
                    }
                }
                // Compared on its own (`histogram`).
                AggregatedMetrics::F64(MetricData::Histogram(_)) => {}
                other => panic!("{name}: unexpected data {other:?}"),
            }
        }
    }
    out
}

/// The duration histogram's (count, sum, bucket boundaries) for attributes `want`, from one
/// collection.
fn histogram(reader: &SharedReader, want: &str) -> Option<(u64, f64, Vec<f64>)> {
    let mut rm = ResourceMetrics::default();
    reader.collect(&mut rm).unwrap();
    for scope in rm.scope_metrics() {
        for m in scope.metrics().filter(|m| m.name() == otel::CALL_DURATION) {
            assert_eq!(m.unit(), "s");
            let AggregatedMetrics::F64(MetricData::Histogram(h)) = m.data() else {
                panic!("{:?}", m.data())
            };
            if let Some(p) = h.data_points().find(|p| attrs(p.attributes()) == want) {
                return Some((p.count(), p.sum(), p.bounds().collect()));
            }
        }
    }
    None
}

/// The Prometheus text exposition as (name, labels) → value, histograms left out.
fn prometheus(registry: &Registry) -> BTreeMap<(String, String), i64> {
    let mut out = BTreeMap::new();
    for line in metrics_text(registry).lines() {
        if line.starts_with('#') || line.contains("duration") || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}').replace('"', "")),
            None => (series, String::new()),
        };
        out.insert((name.to_owned(), labels), value.parse().unwrap());
    }
    out
}

/// The Prometheus series of an OpenTelemetry instrument (the table in `client::metrics`).
fn prometheus_name(otel_name: &str) -> String {
    match otel_name {
        otel::BREAKER_STATE => "seawall_client_breaker_state".to_owned(),
        counter => format!("{}_total", counter.replace('.', "_")),
    }
}

fn fast_layer(metrics: Arc<ClientMetrics>) -> RetryLayer {
    let b = Backoff::new(Jitter::Full, Duration::from_millis(1), Duration::from_millis(5), 2.0);
    let cfg = PolicyConfig::default().with_backoff(b.unwrap());
    let policy = RetryPolicy::new(cfg, AnyBudget::Grpc(GrpcThrottle::new(100, 0.1).unwrap()));
    RetryLayer::from_policy(policy).with_metrics(metrics)
}

/// Runs `calls` calls whose first attempt gets a 503 and whose retry succeeds, then one call
/// that fails on every attempt (given up after 3).
async fn traffic(layer: &RetryLayer, calls: u32) {
    let fail_always = Arc::new(AtomicU32::new(0));
    let f = fail_always.clone();
    let dependency = tower::service_fn(move |req: http::Request<Bytes>| {
        let retry = req.headers().contains_key("request-attempt");
        let status = if f.load(Ordering::Relaxed) == 1 || !retry { 503 } else { 200 };
        async move {
            Ok::<_, std::convert::Infallible>(
                http::Response::builder().status(status).body(Bytes::new()).unwrap(),
            )
        }
    });
    for _ in 0..calls {
        let req = http::Request::get("http://orders/1").body(Bytes::new()).unwrap();
        let resp = layer.layer(dependency.clone()).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    fail_always.store(1, Ordering::Relaxed);
    let req = http::Request::get("http://orders/1").body(Bytes::new()).unwrap();
    let e = layer.layer(dependency).oneshot(req).await.unwrap_err();
    assert_eq!(e.attempts(), 3, "{e}");
}

#[tokio::test]
async fn exported_values_equal_the_client_metrics() {
    let reader = SharedReader(Arc::new(ManualReader::builder().build()));
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let meter = provider.meter("seawall-test");

    let metrics = Arc::new(ClientMetrics::new());
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    metrics.register_otel(&meter, &[]);

    // Registered but idle: every series is there, at zero.
    let idle = collect(&reader);
    assert_eq!(idle[&(otel::CALL_STARTED.to_owned(), String::new())], 0);
    assert_eq!(idle[&(otel::ATTEMPT_STARTED.to_owned(), "attempt=10+".to_owned())], 0);

    traffic(&fast_layer(metrics.clone()), 5).await;

    let points = collect(&reader);
    let prom = prometheus(&registry);
    // The values the traffic implies: 6 calls, 5 + 1 first attempts, 5 + 1 second attempts,
    // 1 third attempt, 7 retries, 1 give-up for exhausted attempts, breaker closed.
    let expect = [
        (otel::CALL_STARTED, "", 6),
        (otel::ATTEMPT_STARTED, "attempt=1", 6),
        (otel::ATTEMPT_STARTED, "attempt=2", 6),
        (otel::ATTEMPT_STARTED, "attempt=3", 1),
        (otel::ATTEMPT_STARTED, "attempt=4", 0),
        (otel::RETRIES, "", 7),
        (otel::GIVE_UP, "reason=attempts_exhausted", 1),
        (otel::GIVE_UP, "reason=budget_exhausted", 0),
        (otel::RETRY_OVERFLOW, "", 0),
        (otel::BREAKER_STATE, "", 0),
    ];
    for (name, labels, value) in expect {
        assert_eq!(points.get(&(name.to_owned(), labels.to_owned())), Some(&value), "{name}");
    }
    // And every exported point equals its Prometheus twin, and vice versa.
    for ((name, labels), value) in &points {
        let twin = (prometheus_name(name), labels.clone());
        assert_eq!(prom.get(&twin), Some(value), "{name}{{{labels}}} vs {twin:?}");
    }
    assert_eq!(points.len(), prom.len(), "{points:#?}\n{prom:#?}");
    assert_eq!(points.len(), 1 + 10 + 1 + seawall::policy::GiveUpReason::COUNT + 1 + 1);

    // The duration histogram: the 5 successful calls only, as in Prometheus.
    let (count, sum, bounds) = histogram(&reader, "").expect("a duration histogram");
    let text = metrics_text(&registry);
    let prom_count = text
        .lines()
        .find_map(|l| l.strip_prefix("seawall_client_call_duration_seconds_count "))
        .expect("the Prometheus histogram");
    assert_eq!((count, prom_count), (5, "5"));
    assert!(sum > 0.0 && sum < 5.0, "{sum}");
    assert_eq!(bounds.first(), Some(&0.005));
}

#[tokio::test]
async fn dependencies_share_instruments_as_attribute_sets() {
    let reader = SharedReader(Arc::new(ManualReader::builder().build()));
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let meter = provider.meter("seawall-test");
    let orders = Arc::new(ClientMetrics::new());
    orders.register_otel(&meter, &[KeyValue::new("dependency", "orders")]);
    let users = Arc::new(ClientMetrics::new());
    users.register_otel(&meter, &[KeyValue::new("dependency", "users")]);

    traffic(&fast_layer(orders.clone()), 2).await;
    traffic(&fast_layer(users.clone()), 4).await;

    let points = collect(&reader);
    let calls = |dep: &str| points[&(otel::CALL_STARTED.to_owned(), format!("dependency={dep}"))];
    assert_eq!((calls("orders"), calls("users")), (3, 5));
    let successes = |dep: &str| histogram(&reader, &format!("dependency={dep}")).unwrap().0;
    assert_eq!((successes("orders"), successes("users")), (2, 4));
    let second = |dep: &str| {
        points[&(otel::ATTEMPT_STARTED.to_owned(), format!("attempt=2,dependency={dep}"))]
    };
    assert_eq!((second("orders"), second("users")), (3, 5));

    // Dropped metrics report nothing (the callbacks hold them weakly).
    drop(users);
    let points = collect(&reader);
    assert!(points.keys().all(|(_, labels)| !labels.contains("users")), "{points:#?}");
    assert_eq!(points[&(otel::RETRIES.to_owned(), "dependency=orders".to_owned())], 2 + 2);
}
