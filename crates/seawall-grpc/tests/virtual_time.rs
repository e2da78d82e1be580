//! `GrpcRetryLayer` on a paused tokio runtime with `.with_clock(TokioClock)`: gRFC A6's
//! backoff, the deadline and the `grpc-timeout` sent on each attempt, all on virtual time, so
//! every instant below is exact (to tokio's 1 ms timer tick) and a 5 s call takes microseconds.
//!
//! The dependency is an in-process tower service answering trailers-only statuses, as tonic
//! servers reject calls; the real tonic server over HTTP/2 is `tests/grpc.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use seawall::deadline::parse_grpc_timeout;
use seawall_grpc::{GrpcEvent, GrpcRetryLayer};
use seawall_tower::time::TokioClock;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

type Body = tonic::body::Body;

/// initialBackoff 1 s, ×2, at most 10 s: ceilings 1, 2, 4, 8 s.
const CONFIG: &str = r#"{"methodConfig": [{"name": [{"service": "demo.Echo"}],
  "retryPolicy": {"maxAttempts": 5, "initialBackoff": "1s", "maxBackoff": "10s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["unavailable"]}}]}"#;

/// What the dependency saw of one attempt: when (virtual time since the start) and the
/// `grpc-timeout` it carried.
#[derive(Debug, Clone, Copy)]
struct Seen {
    at: Duration,
    timeout: Option<Duration>,
}

/// What the dependency records.
type Log = Arc<Mutex<Vec<Seen>>>;

/// A dependency that answers `UNAVAILABLE` to the first `fails` attempts and `OK` after,
/// recording each attempt in `log`.
fn dependency(
    fails: usize,
    t0: Instant,
    log: Log,
) -> impl Service<
    http::Request<Body>,
    Response = http::Response<Body>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |req: http::Request<Body>| {
        let timeout = req
            .headers()
            .get("grpc-timeout")
            .map(|v| parse_grpc_timeout(v.to_str().unwrap()).unwrap());
        let mut log = log.lock().unwrap();
        log.push(Seen { at: t0.elapsed(), timeout });
        let status = if log.len() <= fails {
            tonic::Status::unavailable("warming up")
        } else {
            tonic::Status::ok("")
        };
        std::future::ready(Ok(status.into_http::<Body>()))
    })
}

fn request(timeout: Option<&str>) -> http::Request<Body> {
    let mut req = http::Request::post("http://dep/demo.Echo/Say");
    if let Some(t) = timeout {
        req = req.header("grpc-timeout", t);
    }
    req.body(Body::empty()).unwrap()
}

fn grpc_status(resp: &http::Response<Body>) -> &str {
    resp.headers().get("grpc-status").map_or("none", |v| v.to_str().unwrap())
}

/// `elapsed` is `wait` rounded up to tokio's timer tick (1 ms), once per wait (at most 4).
fn within_a_tick(elapsed: Duration, wait: Duration) -> bool {
    elapsed >= wait && elapsed - wait < Duration::from_millis(4)
}

fn backoffs(events: &[GrpcEvent]) -> Vec<Duration> {
    events.iter().filter_map(GrpcEvent::backoff).collect()
}

fn layer(events: &Arc<Mutex<Vec<GrpcEvent>>>) -> GrpcRetryLayer {
    let log = events.clone();
    GrpcRetryLayer::from_json(CONFIG)
        .unwrap()
        .with_seed(5)
        .with_observer(move |e| log.lock().unwrap().push(*e))
}

/// Four failures, then OK: the attempts arrive exactly the layer's backoffs apart, and the
/// n-th backoff is the ceiling 1, 2, 4, 8 s times a draw in [0.8, 1.2) (A6 as revised on
/// 2024-08-29). Breaks if the layer goes back to A6's older random(0, ceiling) (a wait under
/// 0.8 of its ceiling), or sleeps on a timer other than tokio's (the gaps would not match).
#[tokio::test(start_paused = true)]
async fn backoffs_are_a6_on_virtual_time() {
    let t0 = Instant::now();
    let seen = Log::default();
    let dep = dependency(4, t0, seen.clone());
    let events = Arc::default();
    let mut client = layer(&events).with_clock(TokioClock).layer(dep);
    let resp = client.ready().await.unwrap().call(request(None)).await.unwrap();
    assert_eq!(grpc_status(&resp), "0");
    let seen = seen.lock().unwrap().clone();
    let waits = backoffs(&events.lock().unwrap());
    assert_eq!(seen.len(), 5);
    assert_eq!(waits.len(), 4);
    for (n, wait) in waits.iter().enumerate() {
        let ceiling = Duration::from_secs(1 << n);
        assert!(
            *wait >= ceiling.mul_f64(0.8) && *wait < ceiling.mul_f64(1.2),
            "retry {}: {wait:?} against the ceiling {ceiling:?}",
            n + 1
        );
        let gap = seen[n + 1].at - seen[n].at;
        assert!(within_a_tick(gap, *wait), "retry {}: sent {gap:?} after, waited {wait:?}", n + 1);
    }
    let total: Duration = waits.iter().sum();
    assert!(within_a_tick(t0.elapsed(), total), "no time passes but the backoffs");
}

/// The layer counts its calls as the HTTP layers do, into the same `ClientMetrics` and the
/// same Prometheus names: one call, five attempts by number, four retries, one success with
/// its duration; a call stopped by its deadline gives up as `deadline_too_close`; a call
/// dropped during its backoff as `abandoned`. Breaks if attempts go uncounted (attempts per
/// call 1.0 in a storm), if the end is counted twice or not at all, or if a dropped call is
/// lost.
#[tokio::test(start_paused = true)]
async fn calls_are_counted_into_client_metrics() {
    use seawall::policy::GiveUpReason;
    use seawall_tower::client::ClientMetrics;

    let t0 = Instant::now();
    let metrics = Arc::new(ClientMetrics::new());
    let events = Arc::default();
    let layer = layer(&events).with_clock(TokioClock).with_metrics(metrics.clone());
    let mut client = layer.layer(dependency(4, t0, Log::default()));
    let resp = client.ready().await.unwrap().call(request(None)).await.unwrap();
    assert_eq!(grpc_status(&resp), "0");
    let s = metrics.snapshot();
    assert_eq!((s.calls, s.attempts, s.retries, s.successes), (1, 5, 4, 1), "{s:?}");
    assert_eq!(s.attempts_by_number[..5], [1, 1, 1, 1, 1]);
    assert_eq!(s.durations.iter().sum::<u64>(), 1, "the success's duration");
    assert!(within_a_tick(s.duration_sum, backoffs(&events.lock().unwrap()).iter().sum()));

    // The deadline: three attempts, then the deadline is too close for the fourth.
    let mut client = layer.layer(dependency(10, Instant::now(), Log::default()));
    let resp = client.ready().await.unwrap().call(request(Some("5S"))).await.unwrap();
    assert_eq!(grpc_status(&resp), "14");
    let s = metrics.snapshot();
    assert_eq!((s.calls, s.attempts, s.successes), (2, 8, 1), "{s:?}");
    assert_eq!(s.give_ups(GiveUpReason::DeadlineTooClose), 1);

    // The caller gives up during the first backoff (at least 0.8 s): abandoned, once.
    let mut client = layer.layer(dependency(10, Instant::now(), Log::default()));
    let call = client.ready().await.unwrap().call(request(None));
    assert!(tokio::time::timeout(Duration::from_millis(500), call).await.is_err());
    let s = metrics.snapshot();
    assert_eq!((s.calls, s.attempts), (3, 9), "{s:?}");
    assert_eq!(s.give_ups(GiveUpReason::Abandoned), 1);
    assert_eq!(s.give_ups.iter().sum::<u64>(), 2, "each call ended once");

    {
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let text = seawall_tower::client::metrics_text(&registry);
        for line in [
            "seawall_client_call_started_total 3",
            "seawall_client_attempt_started_total{attempt=\"2\"} 2",
            "seawall_client_give_up_total{reason=\"deadline_too_close\"} 1",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}

/// A 5 s deadline (`grpc-timeout: 5S`): each attempt carries the time left, and the retry
/// whose backoff would end past the deadline is not made — the caller gets the last attempt's
/// `UNAVAILABLE` at once, not `DEADLINE_EXCEEDED` at the deadline (see the layer's docs). The
/// control: the same layer on the system's clock (the default) under the paused runtime never
/// sees its time left shrink, so it makes a fourth attempt — the test reads the layer's clock.
#[tokio::test(start_paused = true)]
async fn the_deadline_and_grpc_timeout_follow_the_layers_clock() {
    let t0 = Instant::now();
    let seen = Log::default();
    let dep = dependency(10, t0, seen.clone());
    let events = Arc::default();
    let mut client = layer(&events).with_clock(TokioClock).layer(dep);
    let resp = client.ready().await.unwrap().call(request(Some("5S"))).await.unwrap();
    assert_eq!(grpc_status(&resp), "14", "the last attempt's UNAVAILABLE");
    let seen = seen.lock().unwrap().clone();
    let waits = backoffs(&events.lock().unwrap());
    // Ceilings 1, 2, 4 s: attempts near 0, 1 and 3 s; the third retry would end near 7 s.
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(waits.len(), 2);
    for s in &seen {
        let left = Duration::from_secs(5) - s.at;
        let sent = s.timeout.expect("grpc-timeout on every attempt");
        assert!(sent.abs_diff(left) < Duration::from_millis(1), "{sent:?} sent, {left:?} left");
    }
    assert!(
        events.lock().unwrap().iter().any(|e| matches!(
            e,
            GrpcEvent::Stopped { reason: seawall::grpc::StopReason::Deadline }
        ))
    );
    let total = waits.iter().sum::<Duration>();
    assert!(within_a_tick(t0.elapsed(), total), "answered at once, not at 5 s: {total:?}");

    // The control: the system's clock does not move under a paused runtime.
    let t0 = Instant::now();
    let seen = Log::default();
    let dep = dependency(10, t0, seen.clone());
    let mut control = layer(&Arc::default()).layer(dep);
    let _ = control.ready().await.unwrap().call(request(Some("5S"))).await.unwrap();
    // 5 s stay left on the system's clock, so the retries after 1 and 2 and 4 s are all made;
    // only the fourth (at least 6.4 s) is longer than what is "left".
    assert_eq!(seen.lock().unwrap().len(), 4, "on SystemClock the time left never shrinks");
}
