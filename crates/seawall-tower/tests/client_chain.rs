//! Rule 1 with real servers: a 3-tier chain of axum services over loopback whose bottom fails.
//! Naive 3-attempt retries at every tier send 27 attempts to the bottom per edge request;
//! `RetryLayer` at the edge and `FailFastLayer` below send at most 3.
#![cfg(feature = "client")]

mod common_client;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::routing::any;
use bytes::Bytes;
use common_client::{Reqwest, get, serve};
use seawall::backoff::Backoff;
use seawall::budget::Unlimited;
use seawall::deadline::{Deadline, parse_timeout_ms};
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall::time::{Clock, SystemClock};
use seawall_tower::client::{FailFastLayer, GaveUpError, LastOutcome, RetryLayer};
use seawall_tower::wire::RequestDeadline;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

type Client = BoxCloneSyncService<http::Request<Bytes>, http::Response<Bytes>, tower::BoxError>;

/// "Naive" retries: 3 attempts, a flat 1 ms, no budget — what seed 000's three layers did.
fn naive() -> RetryLayer<Unlimited> {
    let cfg = PolicyConfig::default()
        .with_backoff(Backoff::constant(Duration::from_millis(1)).unwrap())
        .with_max_attempts(3)
        .unwrap();
    RetryLayer::from_policy(RetryPolicy::new(cfg, Unlimited).with_seed(1))
}

/// A client whose give-ups become responses the way a tier answers its own caller: naive tiers
/// pass the last status through (no pushback); seawall tiers use `into_response`.
fn client_of(layer: RetryLayer<Unlimited>, naive_tier: bool) -> Client {
    let svc = layer.layer(Reqwest::new());
    BoxCloneSyncService::new(tower::service_fn(move |req| {
        let mut svc = svc.clone();
        async move {
            match svc.ready().await?.call(req).await {
                Ok(r) => Ok(r),
                Err(e) if naive_tier => match GaveUpError::into_last(e) {
                    LastOutcome::Response(r) => {
                        Ok(http::Response::builder().status(r.status()).body(Bytes::new()).unwrap())
                    }
                    _ => Ok(http::Response::builder().status(502).body(Bytes::new()).unwrap()),
                },
                Err(e) => Ok(e.into_response()),
            }
        }
    }))
}

/// A tier: forwards every request to `next` with the caller's deadline, answers with what came
/// back.
async fn tier(next: SocketAddr, client: Client) -> SocketAddr {
    let handler = move |req: Request| {
        let mut client = client.clone();
        async move {
            let mut out = get(next, "/");
            // What the server DeadlineLayer does: the caller's time left becomes our deadline.
            if let Some(t) = req
                .headers()
                .get("request-timeout-ms")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_timeout_ms(v).ok())
            {
                let d = Deadline::after(SystemClock.now(), t);
                out.extensions_mut().insert(RequestDeadline(d));
            }
            let resp = client.ready().await.unwrap().call(out).await.unwrap();
            let (parts, body) = resp.into_parts();
            http::Response::from_parts(parts, axum::body::Body::from(body))
        }
    };
    serve(axum::Router::new().route("/", any(handler))).await
}

struct Bottom {
    addr: SocketAddr,
    hits: Arc<AtomicU32>,
    max_timeout_ms: Arc<AtomicU32>,
}

async fn failing_bottom() -> Bottom {
    let hits = Arc::new(AtomicU32::new(0));
    let max_timeout_ms = Arc::new(AtomicU32::new(0));
    let (h, m) = (hits.clone(), max_timeout_ms.clone());
    let handler = move |req: Request| {
        h.fetch_add(1, Ordering::SeqCst);
        if let Some(ms) = req.headers().get("request-timeout-ms").and_then(|v| v.to_str().ok()) {
            m.fetch_max(ms.parse().unwrap_or(u32::MAX), Ordering::SeqCst);
        }
        async { http::StatusCode::SERVICE_UNAVAILABLE }
    };
    let addr = serve(axum::Router::new().route("/", any(handler))).await;
    Bottom { addr, hits, max_timeout_ms }
}

async fn edge_calls(edge: &mut Client, top: SocketAddr, n: u32) -> Vec<http::Response<Bytes>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(edge.ready().await.unwrap().call(get(top, "/")).await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_retries_at_three_tiers_send_27_attempts_to_the_bottom() {
    let bottom = failing_bottom().await;
    let mid = tier(bottom.addr, client_of(naive(), true)).await;
    let top = tier(mid, client_of(naive(), true)).await;
    let mut edge = client_of(naive(), true);
    let n = 2;
    let resps = edge_calls(&mut edge, top, n).await;
    assert!(resps.iter().all(|r| r.status() == 503));
    assert_eq!(bottom.hits.load(Ordering::SeqCst), 27 * n, "3 × 3 × 3 per edge request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_retrying_layer_and_fail_fast_below_send_at_most_3() {
    let bottom = failing_bottom().await;
    let fail_fast = || {
        let svc = FailFastLayer::new().layer(Reqwest::new());
        BoxCloneSyncService::new(svc) as Client
    };
    let mid = tier(bottom.addr, fail_fast()).await;
    let top = tier(mid, fail_fast()).await;
    let edge_layer = naive().with_default_timeout(Duration::from_secs(2));
    let mut edge = client_of(edge_layer, false);
    let n = 5;
    let resps = edge_calls(&mut edge, top, n).await;
    let hits = bottom.hits.load(Ordering::SeqCst);
    assert!(hits <= 3 * n, "at most 3 attempts per edge request, got {hits} for {n}");
    // The bottom's 503 is transient, so the fail-fast tiers pass it up unchanged and only the
    // edge — the one owner — retries: exactly its 3 attempts, never 27.
    assert_eq!(hits, 3 * n);
    // Having used its attempts, the owner tells anyone above "overloaded; don't retry".
    for r in &resps {
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["retry-pushback-ms"], "-1");
    }
    // The edge's 2 s deadline travelled down two hops as the time left.
    let ms = bottom.max_timeout_ms.load(Ordering::SeqCst);
    assert!(ms > 0 && ms <= 2000, "bottom saw Request-Timeout-Ms {ms}");
}
