//! The Prometheus export of the server metrics: a few requests through `ShedLayer`, then the
//! scraped text is checked for every name, label and value.
#![cfg(feature = "prometheus")]

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use prometheus_client::registry::Registry;
use seawall_tower::server::{MetricsSnapshot, ServerMetrics, ShedLayer, prometheus};
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt, service_fn};

/// Yields until `cond` holds for the metrics (the spawned requests are on the same runtime).
async fn until(metrics: &ServerMetrics, cond: impl Fn(&MetricsSnapshot) -> bool) {
    for _ in 0..10_000 {
        if cond(&metrics.snapshot()) {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("metrics never reached the expected state: {:?}", metrics.snapshot());
}

fn get(path: &str) -> Request<String> {
    Request::builder().uri(path).body(String::new()).expect("valid request")
}

#[tokio::test]
async fn scrape_after_requests_through_shed_layer() {
    let metrics = ServerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);

    // One slot, one queue place. The handler waits for a permit from `gate`, so the test decides
    // when requests finish; `/fail` answers 500 (throughput but not goodput).
    let gate = Arc::new(Semaphore::new(0));
    let handler = {
        let gate = gate.clone();
        service_fn(move |req: Request<String>| {
            let gate = gate.clone();
            async move {
                gate.acquire().await.expect("gate open").forget();
                let status = if req.uri().path() == "/fail" {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                };
                let mut resp = Response::new("done".to_owned());
                *resp.status_mut() = status;
                Ok::<_, Infallible>(resp)
            }
        })
    };
    let svc = ShedLayer::new(NonZeroUsize::MIN)
        .with_queue(1)
        .with_metrics(metrics.clone())
        .layer(handler);

    let running = tokio::spawn(svc.clone().oneshot(get("/ok")));
    until(&metrics, |s| s.in_flight == 1).await;
    let queued = tokio::spawn(svc.clone().oneshot(get("/fail")));
    until(&metrics, |s| s.queue_len == 1).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let shed = svc.clone().oneshot(get("/ok")).await.expect("infallible");
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);

    let busy = prometheus::encode(&registry);
    for needle in [
        "# TYPE seawall_server_in_flight gauge\nseawall_server_in_flight 1.0\n",
        "# TYPE seawall_server_queue_length gauge\nseawall_server_queue_length 1.0\n",
        "seawall_server_rejected_total{reason=\"queue_full\"} 1\n",
        "seawall_server_throughput_total 0\n",
    ] {
        assert!(busy.contains(needle), "{needle:?} missing from\n{busy}");
    }
    // The age is measured at the scrape: the queued request has waited ≥ 5 ms.
    let age: f64 = value_of(&busy, "seawall_server_oldest_queued_seconds ");
    assert!((0.005..1.0).contains(&age), "oldest queued age {age}");

    gate.add_permits(2);
    assert_eq!(running.await.expect("task").expect("infallible").status(), StatusCode::OK);
    let failed = queued.await.expect("task").expect("infallible");
    assert_eq!(failed.status(), StatusCode::INTERNAL_SERVER_ERROR);

    let idle = prometheus::encode(&registry);
    for needle in [
        "# TYPE seawall_server_throughput counter\nseawall_server_throughput_total 2\n",
        "# TYPE seawall_server_goodput counter\nseawall_server_goodput_total 1\n",
        "# TYPE seawall_server_rejected counter\n",
        "seawall_server_rejected_total{reason=\"queue_full\"} 1\n",
        "seawall_server_rejected_total{reason=\"codel_drop\"} 0\n",
        "seawall_server_rejected_total{reason=\"deadline_expired\"} 0\n",
        "seawall_server_rejected_total{reason=\"retry_shed\"} 0\n",
        "seawall_server_in_flight 0.0\n",
        "seawall_server_queue_length 0.0\n",
        "seawall_server_oldest_queued_seconds 0.0\n",
        "# UNIT seawall_server_oldest_queued_seconds seconds\n",
        "# TYPE seawall_server_request_duration_seconds histogram\n",
        "seawall_server_request_duration_seconds_count 1\n",
        "seawall_server_request_duration_seconds_bucket{le=\"0.000001\"} 0\n",
        "seawall_server_request_duration_seconds_bucket{le=\"+Inf\"} 1\n",
        "# EOF\n",
    ] {
        assert!(idle.contains(needle), "{needle:?} missing from\n{idle}");
    }
    // Only the success is in the histogram; it waited ≥ 5 ms for the gate.
    let sum: f64 = value_of(&idle, "seawall_server_request_duration_seconds_sum ");
    assert!((0.005..1.0).contains(&sum), "latency sum {sum}");
}

#[test]
fn http_response_is_openmetrics_text() {
    let mut registry = Registry::default();
    ServerMetrics::new().register(&mut registry);
    let resp = prometheus::metrics_response(&registry);
    let ct = resp.headers()[http::header::CONTENT_TYPE].to_str().expect("ascii");
    assert!(ct.starts_with("application/openmetrics-text"));
    assert!(resp.body().contains("seawall_server_goodput_total 0\n"));
}

/// The value on the line starting with `prefix`.
fn value_of(text: &str, prefix: &str) -> f64 {
    let line = text.lines().find(|l| l.starts_with(prefix)).expect("metric line present");
    line[prefix.len()..].parse().expect("a number")
}

/// The idempotency layer's counters and its in-memory store's pools, scraped while one keyed
/// request is in flight and after it finished, was replayed, and a keyed request came without a
/// principal.
#[tokio::test]
async fn scrape_idempotency_counters_and_pools() {
    use bytes::Bytes;
    use http_body_util::Full;
    use seawall::time::SystemClock;
    use seawall_tower::server::IdempotencyLayer;
    use seawall_tower::server::idempotency::scope::Principal;
    use seawall_tower::server::idempotency::store::memory::MemoryStore;

    let pool = Arc::new(MemoryStore::new());
    let layer = IdempotencyLayer::with_store_and_clock(pool.clone(), SystemClock);
    let metrics = layer.metrics_handle();
    let mut registry = Registry::default();
    metrics.register_with_pool(&mut registry, pool.clone());

    let gate = Arc::new(Semaphore::new(0));
    let handler = {
        let gate = gate.clone();
        service_fn(move |_req: Request<Full<Bytes>>| {
            let gate = gate.clone();
            async move {
                gate.acquire().await.expect("gate open").forget();
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"paid"))))
            }
        })
    };
    let svc = layer.layer(handler);
    let keyed = |principal: bool| {
        let mut b = Request::post("/pay").header("idempotency-key", "k1");
        if principal {
            b = b.extension(Principal::user("tenant-a"));
        }
        b.body(Full::new(Bytes::from_static(b"10 EUR"))).unwrap()
    };
    let line = |page: &str, name: &str| {
        page.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')).map(str::to_owned))
            .unwrap_or_else(|| panic!("{name} missing from:\n{page}"))
    };

    let running = tokio::spawn(svc.clone().oneshot(keyed(true)));
    for _ in 0..10_000 {
        if pool.stats().pending == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let page = prometheus::encode(&registry);
    assert_eq!(line(&page, "seawall_server_idempotency_pending_keys"), "1", "{page}");
    assert_eq!(line(&page, "seawall_server_idempotency_records"), "0", "{page}");

    gate.add_permits(1);
    assert_eq!(running.await.unwrap().unwrap().status(), StatusCode::OK);
    let replay = svc.clone().oneshot(keyed(true)).await.unwrap();
    assert_eq!(replay.status(), StatusCode::OK);
    let anonymous = svc.clone().oneshot(keyed(false)).await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);

    let page = prometheus::encode(&registry);
    for (name, v) in [
        ("pending_keys", "0"),
        ("records", "1"),
        ("executed_total", "1"),
        ("replayed_total", "1"),
        ("principal_missing_total", "1"),
        ("conflicts_total", "0"),
        ("store_unavailable_total", "0"),
    ] {
        assert_eq!(line(&page, &format!("seawall_server_idempotency_{name}")), v, "{name}\n{page}");
    }
    for (name, help) in [("executed", "counter"), ("pending_keys", "gauge")] {
        assert!(
            page.contains(&format!("# TYPE seawall_server_idempotency_{name} {help}")),
            "{page}"
        );
    }
}

/// Every request is counted at the door by its attempt number, shed or not, and — with
/// `with_callers` — by caller in the bounded table of heaviest callers. Red check: without the
/// `arrival` call in `Shed::call` the attempt counts stay 0; without `with_callers` the caller
/// family is absent.
#[tokio::test]
async fn arrivals_by_attempt_and_by_caller() {
    use seawall_tower::server::shed::CallerKey;
    let metrics = ServerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let handler = service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    });
    let svc = ShedLayer::new(NonZeroUsize::new(4).unwrap())
        .with_callers(CallerKey::header(http::HeaderName::from_static("x-client-id")))
        .with_metrics(metrics.clone())
        .layer(handler);
    let send = |attempt: Option<&str>, grpc_prev: Option<&str>, caller: Option<&str>| {
        let mut b = Request::builder().uri("/");
        if let Some(a) = attempt {
            b = b.header("request-attempt", a);
        }
        if let Some(p) = grpc_prev {
            b = b.header("grpc-previous-rpc-attempts", p);
        }
        if let Some(c) = caller {
            b = b.header("x-client-id", c);
        }
        svc.clone().oneshot(b.body(String::new()).unwrap())
    };
    for _ in 0..6 {
        send(None, None, Some("batch")).await.unwrap();
    }
    send(Some("2"), None, Some("batch")).await.unwrap();
    send(Some("3"), None, Some("web")).await.unwrap();
    send(None, Some("1"), None).await.unwrap(); // a gRPC second attempt, no caller header
    send(Some("12"), None, Some("web")).await.unwrap();
    send(Some("not a number"), None, Some("web")).await.unwrap(); // malformed: a first attempt

    let s = metrics.snapshot();
    assert_eq!(s.arrivals[..3], [7, 2, 1]);
    assert_eq!(s.arrivals[9], 1, "attempt 12 counts as 10+");
    assert_eq!(s.retry_share(), Some(4.0 / 11.0));
    let page = prometheus::encode(&registry);
    for needle in [
        "seawall_server_arrivals_total{attempt=\"1\"} 7\n",
        "seawall_server_arrivals_total{attempt=\"2\"} 2\n",
        "seawall_server_arrivals_total{attempt=\"10+\"} 1\n",
        "seawall_server_caller_arrivals_total{caller=\"batch\"} 7\n",
        "seawall_server_caller_arrivals_total{caller=\"web\"} 3\n",
        "seawall_server_caller_arrivals_total{caller=\"unknown\"} 1\n",
    ] {
        assert!(page.contains(needle), "{needle:?} missing from\n{page}");
    }
}
