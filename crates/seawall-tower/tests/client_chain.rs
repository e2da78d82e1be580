//! One owner layer, with real servers: a 3-tier chain of axum services over loopback whose bottom
//! fails, each hop behind the real server `DeadlineLayer`. Naive 3-attempt retries at every tier
//! send 27 attempts to the bottom per edge request; `RetryLayer` at the edge and `FailFastLayer`
//! below send at most 3, and the edge's deadline reaches the bottom as a time left that shrinks at
//! every hop.
#![cfg(all(feature = "client", feature = "server"))]

mod common_client;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Request;
use axum::routing::any;
use bytes::Bytes;
use common_client::{Reqwest, get, serve};
use seawall::backoff::Backoff;
use seawall::budget::Unlimited;
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall_tower::client::{FailFastLayer, GaveUpError, LastOutcome, RetryLayer};
use seawall_tower::server::DeadlineLayer;
use seawall_tower::wire::RequestDeadline;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

type Client = BoxCloneSyncService<http::Request<Bytes>, http::Response<Bytes>, tower::BoxError>;

/// "Naive" retries: 3 attempts, a flat 1 ms, no budget — three such layers, as in an index slowdown
/// with retries everywhere.
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

/// The `Request-Timeout-Ms` values a hop received, in order of arrival.
type Seen = Arc<Mutex<Vec<u64>>>;

fn record(seen: &Seen, req: &Request) {
    if let Some(ms) = req.headers().get("request-timeout-ms").and_then(|v| v.to_str().ok()) {
        seen.lock().unwrap().push(ms.parse().unwrap_or(u64::MAX));
    }
}

/// Serves `handler` behind the real server `DeadlineLayer`: the caller's time left becomes the
/// request's `RequestDeadline`, enforced with a 504 and copied onto the outgoing call.
async fn behind_deadline<H, T>(handler: H) -> SocketAddr
where
    H: axum::handler::Handler<T, ()>,
    T: 'static,
{
    serve(axum::Router::new().route("/", any(handler)).layer(DeadlineLayer::new())).await
}

/// A tier: forwards every request to `next` with the caller's deadline, answers with what came
/// back; `seen` records the time left each request arrived with.
async fn tier(next: SocketAddr, client: Client, seen: Seen) -> SocketAddr {
    behind_deadline(move |req: Request| {
        let mut client = client.clone();
        record(&seen, &req);
        let mut out = get(next, "/");
        if let Some(d) = req.extensions().get::<RequestDeadline>() {
            out.extensions_mut().insert(d.clone());
        }
        async move {
            let resp = client.ready().await.unwrap().call(out).await.unwrap();
            let (parts, body) = resp.into_parts();
            http::Response::from_parts(parts, axum::body::Body::from(body))
        }
    })
    .await
}

struct Bottom {
    addr: SocketAddr,
    hits: Arc<AtomicU32>,
    seen: Seen,
}

async fn failing_bottom() -> Bottom {
    let hits = Arc::new(AtomicU32::new(0));
    let seen = Seen::default();
    let (h, s) = (hits.clone(), seen.clone());
    let addr = behind_deadline(move |req: Request| {
        h.fetch_add(1, Ordering::SeqCst);
        record(&s, &req);
        async { http::StatusCode::SERVICE_UNAVAILABLE }
    })
    .await;
    Bottom { addr, hits, seen }
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
    let mid = tier(bottom.addr, client_of(naive(), true), Seen::default()).await;
    let top = tier(mid, client_of(naive(), true), Seen::default()).await;
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
    let (top_seen, mid_seen) = (Seen::default(), Seen::default());
    let mid = tier(bottom.addr, fail_fast(), mid_seen.clone()).await;
    let top = tier(mid, fail_fast(), top_seen.clone()).await;
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
    // The edge's 2 s deadline travelled down two hops as the time left, read by each hop's
    // DeadlineLayer and sent on by its FailFastLayer: every attempt reached every hop with less
    // time than the hop above had (whole milliseconds, rounded down, so at least 1 ms less).
    let (top, mid, low) =
        (top_seen.lock().unwrap(), mid_seen.lock().unwrap(), bottom.seen.lock().unwrap());
    assert_eq!((top.len(), mid.len(), low.len()), (3 * n as usize, 3 * n as usize, 3 * n as usize));
    for k in 0..top.len() {
        assert!(top[k] <= 2000, "attempt {k}: {top:?}");
        assert!(top[k] > mid[k] && mid[k] > low[k], "attempt {k}: {top:?} {mid:?} {low:?}");
    }
}
