//! The client layers and the server `DeadlineLayer` on a paused tokio clock (`TokioClock`):
//! jitter, per-try timeouts and deadlines measured in virtual time, so the figures are exact
//! and the same on an idle laptop and a loaded 2-core CI machine. The services are in-process
//! (`tower::service_fn`): a paused runtime advances its clock whenever it is idle, which real
//! sockets would make it do in the middle of a read.
#![cfg(all(feature = "client", feature = "server"))]

mod common_client;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common_client::timeouts_ms;
use seawall::backoff::{Backoff, Jitter};
use seawall::budget::{GrpcThrottle, Unlimited};
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall_tower::client::{FailFastLayer, LastOutcome, RetryLayer};
use seawall_tower::server::DeadlineLayer;
use seawall_tower::time::TokioClock;
use seawall_tower::wire::RequestDeadline;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

type Req = http::Request<Bytes>;
type Resp = http::Response<Bytes>;
type Fut = Pin<Box<dyn Future<Output = Result<Resp, Infallible>> + Send>>;
/// What a dependency saw: when each request arrived (virtual time), and its headers.
type Seen = Arc<Mutex<Vec<(Instant, http::HeaderMap)>>>;

/// A dependency that records each request and answers `status(headers)` after `delay`.
fn dependency(
    delay: Duration,
    status: impl Fn(&http::HeaderMap) -> u16 + Clone + Send + Sync + 'static,
) -> (impl Service<Req, Response = Resp, Error = Infallible, Future = Fut> + Clone + Send, Seen) {
    let seen = Seen::default();
    let s = seen.clone();
    let svc = tower::service_fn(move |req: Req| {
        s.lock().unwrap().push((Instant::now(), req.headers().clone()));
        let code = status(req.headers());
        let f: Fut = Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok(http::Response::builder().status(code).body(Bytes::new()).unwrap())
        });
        f
    });
    (svc, seen)
}

fn tagged(call: usize) -> Req {
    let mut req = http::Request::get("http://dep/").body(Bytes::new()).unwrap();
    req.headers_mut().insert("x-call", call.into());
    req
}

/// Twenty calls fail at the same instant; each retries after its own full-jitter wait in
/// [0, 50 ms). Measured in virtual time, the waits are the policy's draws exactly: spread out
/// and distinct, identically in every run (the policy is seeded).
#[tokio::test(start_paused = true)]
async fn calls_failing_together_retry_at_different_instants() {
    let waits =
        || async {
            let (dep, seen) = dependency(Duration::ZERO, |h| {
                if h.contains_key("request-attempt") { 200 } else { 503 }
            });
            let budget = GrpcThrottle::new(100, 0.1).unwrap();
            let policy = RetryPolicy::new(PolicyConfig::default(), budget).with_seed(11);
            let layer = RetryLayer::from_policy(policy).with_clock(TokioClock);
            let n = 20;
            let calls: Vec<_> =
                (0..n).map(|i| tokio::spawn(layer.layer(dep.clone()).oneshot(tagged(i)))).collect();
            for c in calls {
                assert_eq!(c.await.unwrap().unwrap().status(), 200);
            }
            let seen = seen.lock().unwrap();
            let mut waits: Vec<Duration> = (0..n)
                .map(|i| {
                    let mine: Vec<Instant> = seen
                        .iter()
                        .filter(|(_, h)| h["x-call"] == i.to_string().as_str())
                        .map(|s| s.0)
                        .collect();
                    assert_eq!(mine.len(), 2, "call {i}");
                    mine[1] - mine[0]
                })
                .collect();
            waits.sort();
            waits
        };
    let w = waits().await;
    assert!(w.iter().all(|w| *w < Duration::from_millis(50)), "{w:?}");
    assert!(w[19] - w[0] > Duration::from_millis(15), "waits should spread: {w:?}");
    let mut ms: Vec<u128> = w.iter().map(Duration::as_millis).collect();
    ms.dedup();
    assert!(ms.len() >= 10, "waits land on {} distinct ms of 20: {w:?}", ms.len());
    assert_eq!(waits().await, w, "the same seed, the same waits");
}

/// Each call is told "Retry-After: 1" on its first attempt and succeeds on its second: it
/// waits at least the hint and at most +50 % more (the policy's spread), each call its own.
#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_and_jittered_per_call() {
    let (dep, seen) =
        dependency(Duration::ZERO, |h| if h.contains_key("request-attempt") { 200 } else { 503 });
    let dep = dep.map_response(|mut r: Resp| {
        if r.status() == 503 {
            r.headers_mut().insert("retry-after", http::HeaderValue::from_static("1"));
        }
        r
    });
    let policy = RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default()).with_seed(4);
    let layer = RetryLayer::from_policy(policy)
        .with_default_timeout(Duration::from_secs(5))
        .with_clock(TokioClock);
    let calls: Vec<_> =
        (0..4).map(|i| tokio::spawn(layer.layer(dep.clone()).oneshot(tagged(i)))).collect();
    for c in calls {
        assert_eq!(c.await.unwrap().unwrap().status(), 200);
    }
    let seen = seen.lock().unwrap();
    let mut waits = Vec::new();
    for i in 0..4 {
        let tag = i.to_string();
        let mine: Vec<Instant> =
            seen.iter().filter(|(_, h)| h["x-call"] == tag.as_str()).map(|s| s.0).collect();
        assert_eq!(mine.len(), 2);
        let wait = mine[1] - mine[0];
        assert!(wait >= Duration::from_secs(1), "retried {wait:?} after Retry-After: 1");
        assert!(wait <= Duration::from_millis(1500), "spread is at most +50 %: {wait:?}");
        waits.push(wait);
    }
    waits.sort();
    waits.dedup();
    assert_eq!(waits.len(), 4, "hints are jittered per call: {waits:?}");
}

/// A dependency that takes 2 s, three attempts of at most 100 ms each: the call is over after
/// the three timeouts and two short waits, not after 2 s.
#[tokio::test(start_paused = true)]
async fn per_try_timeouts_cut_attempts_off_in_virtual_time() {
    let (slow, seen) = dependency(Duration::from_secs(2), |_| 200);
    let b = Backoff::new(Jitter::Full, Duration::from_millis(2), Duration::from_millis(10), 2.0);
    let cfg = PolicyConfig::default()
        .with_backoff(b.unwrap())
        .with_per_try_timeout(Duration::from_millis(100))
        .unwrap();
    let layer = RetryLayer::from_policy(RetryPolicy::new(cfg, Unlimited).with_seed(3))
        .with_default_timeout(Duration::from_secs(1))
        .with_clock(TokioClock);
    let t0 = Instant::now();
    let e = layer.layer(slow).oneshot(tagged(0)).await.unwrap_err();
    let took = t0.elapsed();
    assert_eq!(e.attempts(), 3);
    assert!(matches!(e.into_last(), LastOutcome::TimedOut));
    // 3 × 100 ms, plus waits under 2 ms and 4 ms.
    assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(306), "{took:?}");
    // Each attempt carried the time left, shrinking by what the previous attempts took.
    let left = timeouts_ms(seen.lock().unwrap().iter().map(|(_, h)| h));
    assert_eq!(left[0], 1000);
    assert!(left[1] <= 900 && left[2] <= 800 && left[2] >= 790, "{left:?}");
}

/// Testing your own service on virtual time: a handler behind `DeadlineLayer` works 100 ms, then
/// calls a slow dependency through `FailFastLayer`, all on `TokioClock`. Of the caller's 300 ms,
/// 200 reach the dependency as the time left (on `SystemClock` the client would still see about
/// 300: the machine's clock has not moved); the handler is cut off with a 504 at exactly
/// 300 ms, and its dependency call, cancelled with it, never gets its 1 s answer.
#[tokio::test(start_paused = true)]
async fn a_service_under_test_runs_its_deadline_and_its_calls_on_one_virtual_clock() {
    let (dep, seen) = dependency(Duration::from_secs(1), |_| 200);
    let client = FailFastLayer::new().with_clock(TokioClock).layer(dep);
    let handler = tower::service_fn(move |req: http::Request<Bytes>| {
        let client = client.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut out = http::Request::get("http://dep/").body(Bytes::new()).unwrap();
            if let Some(d) = req.extensions().get::<RequestDeadline>() {
                out.extensions_mut().insert(d.clone());
            }
            client.oneshot(out).await
        }
    });
    let service = DeadlineLayer::new().with_clock(TokioClock).layer(handler);
    let req =
        http::Request::builder().header("request-timeout-ms", "300").body(Bytes::new()).unwrap();
    let t0 = Instant::now();
    let resp = service.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 504);
    assert_eq!(t0.elapsed(), Duration::from_millis(300));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0 - t0, Duration::from_millis(100));
    assert_eq!(seen[0].1["request-timeout-ms"], "200");
}
