//! The retry layer against real axum servers on 127.0.0.1: budgets, server hints, idempotency,
//! refused connections, the time left on the wire and gRPC trailers-only answers.
#![cfg(feature = "client")]

mod common_client;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::routing::any;
use bytes::Bytes;
use common_client::{Reqwest, get, post, reply, serve, timeouts_ms};
use seawall::backoff::{Backoff, Jitter};
use seawall::budget::{AnyBudget, Budget, GrpcThrottle, RatioBudget};
use seawall::policy::{GiveUpReason, PolicyConfig, RetryPolicy};
use seawall_tower::client::{GaveUpError, RetryLayer};
use tower::{Layer, ServiceExt};

type Seen = Arc<Mutex<Vec<(Instant, http::HeaderMap)>>>;

/// A server that records every request and answers with `answer(request number, headers)`.
async fn recording(
    answer: impl Fn(usize, &http::HeaderMap) -> axum::response::Response + Clone + Send + Sync + 'static,
) -> (std::net::SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let handler = move |req: Request| {
        let n = {
            let mut g = s.lock().unwrap();
            g.push((Instant::now(), req.headers().clone()));
            g.len()
        };
        let resp = answer(n, req.headers());
        async move { resp }
    };
    (serve(axum::Router::new().route("/", any(handler))).await, seen)
}

/// The attempt number a seawall server reads from the headers: `Request-Attempt`, absent = 1 (a
/// first attempt carries none).
fn attempt(h: &http::HeaderMap) -> u32 {
    h.get("request-attempt")
        .map_or(1, |v| seawall_tower::wire::parse_attempt(v.as_bytes()).unwrap().get())
}

fn fast(max_attempts: u32) -> PolicyConfig {
    let b = Backoff::new(Jitter::Full, Duration::from_millis(2), Duration::from_millis(10), 2.0);
    PolicyConfig::default().with_backoff(b.unwrap()).with_max_attempts(max_attempts).unwrap()
}

async fn call<Bu: Budget + 'static>(
    layer: &RetryLayer<Bu>,
    req: http::Request<Bytes>,
) -> Result<http::Response<Bytes>, GaveUpError<Bytes>> {
    layer.layer(Reqwest::new()).oneshot(req).await
}

#[tokio::test]
async fn budget_stops_retries_under_sustained_failure() {
    let (addr, seen) = recording(|_, _| reply(503, &[])).await;
    // The SRE book's budget: retries ≤ 10 % of requests (no reserve, to see the ratio itself).
    let ratio = RatioBudget::new(Duration::from_secs(10), 0, 0.1).unwrap();
    let policy = RetryPolicy::new(fast(3), AnyBudget::Ratio(ratio)).with_seed(3);
    let layer = RetryLayer::from_policy(policy);
    let calls = 300;
    let mut reasons = Vec::new();
    for _ in 0..calls {
        reasons.push(call(&layer, get(addr, "/")).await.unwrap_err().reason());
    }
    let attempts = seen.lock().unwrap().len() as f64;
    let per_call = attempts / f64::from(calls);
    assert!((1.05..=1.12).contains(&per_call), "attempts per call {per_call}, want ≈ 1.1");
    assert!(reasons.contains(&GiveUpReason::BudgetExhausted));
    let snap = layer.policy().metrics().snapshot();
    assert_eq!(snap.attempts as f64, attempts);

    // gRPC throttling never refills without successes: retries stop altogether.
    let (addr, seen) = recording(|_, _| reply(503, &[])).await;
    let policy = RetryPolicy::new(fast(3), AnyBudget::Grpc(GrpcThrottle::default())).with_seed(4);
    let layer = RetryLayer::from_policy(policy);
    for _ in 0..100 {
        let _ = call(&layer, get(addr, "/")).await;
    }
    let before = seen.lock().unwrap().len();
    for _ in 0..100 {
        let e = call(&layer, get(addr, "/")).await.unwrap_err();
        assert_eq!(e.reason(), GiveUpReason::BudgetExhausted);
        assert_eq!(e.attempts(), 1);
    }
    assert_eq!(seen.lock().unwrap().len() - before, 100, "no retries once the budget is spent");
}

#[tokio::test]
async fn a_retry_after_that_outlives_the_deadline_gives_up_at_once() {
    // (How Retry-After is honoured and jittered is measured on virtual time:
    // `client_virtual_time.rs`.) Rather than retry late, give up without waiting.
    let (addr, seen) = recording(|_, _| reply(503, &[("retry-after", "5".into())])).await;
    let layer = RetryLayer::new().with_default_timeout(Duration::from_secs(2));
    let e = call(&layer, get(addr, "/")).await.unwrap_err();
    assert_eq!(e.reason(), GiveUpReason::DeadlineTooClose);
    assert_eq!(e.status(), Some(http::StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn post_without_key_is_not_retried_with_a_key_it_is_and_the_key_is_stable() {
    let (addr, seen) = recording(|_, _| reply(503, &[])).await;
    let layer = RetryLayer::from_policy(RetryPolicy::new(fast(3), GrpcThrottle::default()));
    let e = call(&layer, post(addr, "/")).await.unwrap_err();
    assert_eq!(e.reason(), GiveUpReason::NotIdempotent);
    assert_eq!(seen.lock().unwrap().len(), 1);

    let layer = layer.with_idempotency_keys(true);
    let e = call(&layer, post(addr, "/")).await.unwrap_err();
    assert_eq!(e.reason(), GiveUpReason::AttemptsExhausted);
    let seen = seen.lock().unwrap();
    let keys: Vec<&str> =
        seen[1..].iter().map(|(_, h)| h["idempotency-key"].to_str().unwrap()).collect();
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    assert_eq!(uuid::Uuid::parse_str(keys[0]).unwrap().get_version_num(), 4);
    let attempts: Vec<u32> = seen[1..].iter().map(|(_, h)| attempt(h)).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(!seen[1].1.contains_key("request-attempt"), "a first attempt carries no number");
    assert_eq!(seen[2].1["request-attempt"], "2");
}

#[tokio::test]
async fn a_refused_connection_is_retried_even_for_a_post() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let layer = RetryLayer::from_policy(RetryPolicy::new(fast(3), GrpcThrottle::default()));
    let e = call(&layer, post(addr, "/")).await.unwrap_err();
    assert_eq!(e.attempts(), 3, "the server never saw it, so resending is safe: {e}");
    assert_eq!(e.reason(), GiveUpReason::AttemptsExhausted);
}

// Jitter spread and per-try timeouts are measured on virtual time: `client_virtual_time.rs`.

#[tokio::test]
async fn attempts_carry_the_time_left_over_the_wire() {
    let (addr, seen) = recording(|_, _| reply(503, &[])).await;
    let cfg = fast(3).with_per_try_timeout(Duration::from_millis(100)).unwrap();
    let layer = RetryLayer::from_policy(RetryPolicy::new(cfg, seawall::budget::Unlimited))
        .with_default_timeout(Duration::from_millis(1000));
    let _ = call(&layer, get(addr, "/")).await.unwrap_err();
    let left = timeouts_ms(seen.lock().unwrap().iter().map(|(_, h)| h));
    assert_eq!(left.len(), 3);
    assert!(left[0] <= 1000 && left.windows(2).all(|w| w[1] <= w[0]), "{left:?}");
}

#[tokio::test]
async fn grpc_trailers_only_errors_are_classified_and_stamped() {
    let (addr, seen) = recording(|_, h| {
        let status = if h.contains_key("grpc-previous-rpc-attempts") { "0" } else { "14" };
        reply(200, &[("content-type", "application/grpc".into()), ("grpc-status", status.into())])
    })
    .await;
    let layer = RetryLayer::from_policy(RetryPolicy::new(fast(3), GrpcThrottle::default()))
        .with_default_timeout(Duration::from_secs(1));
    let mut req = post(addr, "/");
    req.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
    req.headers_mut().insert("idempotency-key", "k-1".parse().unwrap());
    let resp = call(&layer, req.clone()).await.unwrap();
    assert_eq!(resp.headers()["grpc-status"], "0");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(!seen[0].1.contains_key("grpc-previous-rpc-attempts"));
        assert_eq!(seen[1].1["grpc-previous-rpc-attempts"], "1");
        assert!(seen[0].1["grpc-timeout"].to_str().unwrap().ends_with('u'));
        assert!(!seen[0].1.contains_key("request-attempt"));
    }

    // A fail-fast hop answers a gRPC caller in gRPC: UNAVAILABLE + pushback -1.
    let (addr, _) = recording(|_, _| {
        reply(200, &[("content-type", "application/grpc".into()), ("grpc-status", "8".into())])
    })
    .await;
    let mut req = post(addr, "/");
    req.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
    let resp = seawall_tower::client::FailFastLayer::new()
        .layer(Reqwest::new())
        .oneshot(req)
        .await
        .unwrap();
    assert_eq!(resp.headers()["grpc-status"], "14");
    assert_eq!(resp.headers()["grpc-retry-pushback-ms"], "-1");
}
