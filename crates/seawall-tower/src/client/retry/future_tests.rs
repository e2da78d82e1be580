//! Unit tests of [`RetryFuture`](super::RetryFuture): timeouts, waits and deadlines on a paused
//! tokio clock, request copies, replays and the role a layer's type fixes.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use seawall::budget::GrpcThrottle;
use seawall::policy::{GiveUpReason, PolicyConfig, RetryPolicy};
use tower::ServiceExt;
use tower_layer::Layer;

use super::*;
use crate::client::RetryLayer;
use crate::time::TokioClock;

type Fut = Pin<Box<dyn Future<Output = Result<Response<String>, Infallible>> + Send>>;

/// A service whose first `hang` calls never answer; later calls answer 200.
fn hanging(
    hang: u32,
    calls: Arc<AtomicU32>,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future = Fut>
+ Clone
+ Send
+ 'static {
    tower::service_fn(move |req: Request<String>| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        // A first attempt carries no number (absent = 1); retries carry theirs.
        let stamped = req.headers().get("request-attempt").map(|v| v.to_str().unwrap());
        assert_eq!(stamped, (n > 1).then(|| n.to_string()).as_deref());
        let f: Fut = if n <= hang {
            Box::pin(std::future::pending())
        } else {
            Box::pin(std::future::ready(Ok(Response::new(String::new()))))
        };
        f
    })
}

/// 3 attempts of at most `per_try` each within a 5 s deadline, on tokio's (virtual) clock.
fn layer(per_try: Duration) -> RetryLayer<GrpcThrottle, TokioClock> {
    let cfg = PolicyConfig::default().with_per_try_timeout(per_try).unwrap();
    RetryLayer::from_policy(RetryPolicy::new(cfg, GrpcThrottle::default()).with_seed(9))
        .with_default_timeout(Duration::from_secs(5))
        .with_clock(TokioClock)
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_hangs_times_out_and_the_retry_answers() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = layer(Duration::from_millis(20)).layer(hanging(1, calls.clone()));
    let t0 = tokio::time::Instant::now();
    let resp = svc.call(Request::new(String::new())).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // The timeout, then a full-jitter wait under the first retry's 50 ms ceiling.
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(20) && took < Duration::from_millis(70), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn attempts_that_all_hang_give_up_with_timed_out() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = layer(Duration::from_millis(10)).layer(hanging(u32::MAX, calls.clone()));
    let err = svc.call(Request::new(String::new())).await.unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::AttemptsExhausted);
    assert_eq!(err.attempts(), 3);
    assert!(matches!(err.into_last(), crate::client::LastOutcome::TimedOut));
}

/// On a paused runtime the deadline (read from the layer's clock) and the waits (tokio's
/// timers) run on one time: three attempts of up to 1 s each, inside a 2.5 s deadline, end
/// exactly at the deadline, the last attempt cut to the time left. On `SystemClock` the
/// deadline would not move while the timers did: three full seconds and more.
#[tokio::test(start_paused = true)]
async fn on_tokios_clock_the_deadline_and_the_waits_share_virtual_time() {
    let calls = Arc::new(AtomicU32::new(0));
    let l = layer(Duration::from_secs(1)).with_default_timeout(Duration::from_millis(2_500));
    let mut svc = l.layer(hanging(u32::MAX, calls.clone()));
    let t0 = tokio::time::Instant::now();
    let err = svc.call(Request::new(String::new())).await.unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::AttemptsExhausted, 3));
    assert_eq!(t0.elapsed(), Duration::from_millis(2_500));
}

#[tokio::test]
async fn dropping_the_future_mid_call_abandons_the_call() {
    let calls = Arc::new(AtomicU32::new(0));
    let l = layer(Duration::from_secs(1));
    let policy = l.policy().clone();
    let mut svc = l.layer(hanging(u32::MAX, calls));
    let mut fut = svc.call(Request::new(String::new()));
    let waker = std::task::Waker::noop();
    assert!(Pin::new(&mut fut).poll(&mut Context::from_waker(waker)).is_pending());
    drop(fut);
    assert_eq!(policy.metrics().snapshot().give_ups(GiveUpReason::Abandoned), 1);
}

#[tokio::test]
async fn a_refused_first_attempt_is_an_error_without_a_call() {
    let calls = Arc::new(AtomicU32::new(0));
    // 1 ms left is under the 5 ms an attempt needs at least.
    let l = layer(Duration::from_secs(1)).with_default_timeout(Duration::from_millis(1));
    let mut svc = l.layer(hanging(0, calls.clone()));
    let err = svc.call(Request::new(String::new())).await.unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::DeadlineTooClose);
    assert_eq!((err.attempts(), calls.load(Ordering::SeqCst)), (0, 0));
}

/// A body that counts its replays; `lies` says it can be replayed and then cannot.
struct Counted {
    replays: Arc<AtomicU32>,
    lies: bool,
}

impl crate::client::ReplayBody for Counted {
    fn try_replay(&self) -> Option<Self> {
        if self.lies {
            return None;
        }
        self.replays.fetch_add(1, Ordering::SeqCst);
        Some(Counted { replays: self.replays.clone(), lies: false })
    }

    fn can_replay(&self) -> bool {
        true
    }
}

/// A service answering 503 to its first `fail` calls and 200 after, recording the headers
/// of each request.
fn failing<B: Send + 'static>(
    fail: usize,
    seen: Arc<std::sync::Mutex<Vec<http::HeaderMap>>>,
) -> impl Service<Request<B>, Response = Response<String>, Error = Infallible, Future = Fut>
+ Clone
+ Send
+ 'static {
    tower::service_fn(move |req: Request<B>| {
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(req.headers().clone());
            seen.len()
        };
        let status = if n <= fail { 503 } else { 200 };
        let resp = Response::builder().status(status).body(String::new()).unwrap();
        let f: Fut = Box::pin(std::future::ready(Ok(resp)));
        f
    })
}

#[tokio::test]
async fn a_request_attempt_the_caller_copied_in_is_replaced_by_the_calls_own() {
    let seen = Arc::default();
    let mut svc = layer(Duration::from_secs(1)).layer(failing(1, Arc::clone(&seen)));
    let req = Request::builder().header("request-attempt", "7").body(String::new()).unwrap();
    assert_eq!(svc.call(req).await.unwrap().status(), 200);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].contains_key("request-attempt"), "a first attempt carries no number");
    assert_eq!(seen[1].get_all("request-attempt").iter().collect::<Vec<_>>(), ["2"]);
}

#[tokio::test]
async fn each_attempt_of_a_request_with_headers_carries_its_own_numbers_once() {
    // A request that has headers is stamped in place before it is copied: each attempt's
    // number and time left must replace the previous attempt's, never add to them, and
    // the caller's headers must reach every attempt, the last (the request itself) too.
    let seen = Arc::default();
    let mut svc = layer(Duration::from_secs(1)).layer(failing(2, Arc::clone(&seen)));
    let req = Request::post("http://a/x")
        .header("accept", "application/json")
        .header("idempotency-key", "k-1")
        .body(String::new())
        .unwrap();
    assert_eq!(svc.call(req).await.unwrap().status(), 200);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    let mut last_left = u64::MAX;
    for (i, h) in seen.iter().enumerate() {
        let all = |name: &str| h.get_all(name).iter().map(|v| v.to_str().unwrap().to_owned());
        let attempt: Vec<_> = all("request-attempt").collect();
        let expected: Vec<String> = (i > 0).then(|| (i + 1).to_string()).into_iter().collect();
        assert_eq!(attempt, expected, "attempt {}", i + 1);
        let left: Vec<u64> = all("request-timeout-ms").map(|v| v.parse().unwrap()).collect();
        assert_eq!(left.len(), 1, "attempt {}: {left:?}", i + 1);
        assert!(left[0] <= 5_000 && left[0] <= last_left, "attempt {}: {left:?}", i + 1);
        last_left = left[0];
        assert_eq!(all("accept").collect::<Vec<_>>(), ["application/json"]);
        assert_eq!(all("idempotency-key").collect::<Vec<_>>(), ["k-1"]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_seeded_call_on_virtual_time_waits_the_same_backoff_every_run() {
    // Two 503s, then a 200: the two full-jitter waits (under 50 ms, then 100 ms ceilings)
    // are drawn from the seeded policy, so on virtual time the call takes the same time in
    // every run, however loaded the machine.
    let run = || async {
        let seen = Arc::default();
        let l = RetryLayer::from_policy(
            RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default()).with_seed(5),
        )
        .with_clock(TokioClock);
        let policy = l.policy().clone();
        let mut svc = l.layer(failing(2, Arc::clone(&seen)));
        let t0 = tokio::time::Instant::now();
        assert_eq!(svc.call(Request::new(String::new())).await.unwrap().status(), 200);
        assert_eq!(seen.lock().unwrap().len(), 3);
        let snap = policy.metrics().snapshot();
        assert_eq!((snap.calls, snap.attempts, snap.retries), (1, 3, 2));
        t0.elapsed()
    };
    let took = run().await;
    assert!(took > Duration::ZERO && took < Duration::from_millis(150), "{took:?}");
    assert_eq!(run().await, took);
}

#[tokio::test]
async fn the_layer_type_fixes_the_role_whatever_the_policy_says() {
    // One owner policy (3 attempts) behind both layers: the fail-fast hop sends one attempt
    // and passes the transient 503 up as it is; the retry layer retries it.
    let policy = Arc::new(RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default()));
    let seen = Arc::default();
    let hop = crate::client::FailFastLayer::from_shared_policy(policy.clone())
        .layer(failing(usize::MAX, Arc::clone(&seen)));
    let resp = hop.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(resp.status(), 503);
    assert!(!resp.headers().contains_key("retry-pushback-ms"), "transient: passed up as is");
    assert_eq!(seen.lock().unwrap().len(), 1);

    let seen = Arc::default();
    let mut owner = RetryLayer::from_shared_policy(policy).layer(failing(1, Arc::clone(&seen)));
    assert_eq!(owner.call(Request::new(String::new())).await.unwrap().status(), 200);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn attempts_are_sent_copies_and_the_last_one_the_request_itself() {
    let (seen, replays) = (Arc::default(), Arc::new(AtomicU32::new(0)));
    let mut svc = layer(Duration::from_secs(1)).layer(failing(usize::MAX, seen));
    let body = Counted { replays: replays.clone(), lies: false };
    let err = svc.call(Request::new(body)).await.unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::AttemptsExhausted, 3));
    assert_eq!(replays.load(Ordering::SeqCst), 2, "copies for attempts 1 and 2 only");
}

#[tokio::test]
async fn a_streaming_body_is_sent_once() {
    use http_body_util::BodyExt;
    let seen = Arc::default();
    let mut svc = layer(Duration::from_secs(1)).layer(failing(1, Arc::clone(&seen)));
    let body = http_body_util::Full::new(bytes::Bytes::from_static(b"x")).boxed_unsync();
    let err = svc.call(Request::new(body)).await.unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::NotReplayable, 1));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_body_that_fails_to_replay_after_saying_it_could_is_sent_once() {
    let seen = Arc::default();
    let l = layer(Duration::from_secs(1));
    let policy = l.policy().clone();
    let mut svc = l.layer(failing(1, Arc::clone(&seen)));
    let body = Counted { replays: Arc::default(), lies: true };
    let err = svc.call(Request::new(body)).await.unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::NotReplayable, 1));
    assert!(!err.is_overloaded(), "a request that cannot be resent is not an overload");
    assert_eq!(seen.lock().unwrap().len(), 1);
    // One event, one reason: the core counts the same give-up, and no abandonment.
    let snap = policy.metrics().snapshot();
    assert_eq!(snap.give_ups(GiveUpReason::NotReplayable), 1);
    assert_eq!(snap.give_ups(GiveUpReason::Abandoned), 0);
}
