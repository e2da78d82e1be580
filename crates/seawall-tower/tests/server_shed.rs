//! ShedLayer and DeadlineLayer: goodput under 4× overload on a real axum server on 127.0.0.1
//! (wall-clock load); doomed work not started and retries shed first on a paused runtime, in
//! process, where the order of events is the test's and every wait exact.
#![cfg(feature = "server")]

mod common_server;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use common_server::{req, send_within, serve};
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use seawall_tower::server::{DeadlineLayer, RejectReason, ServerMetrics, ShedLayer};
use seawall_tower::time::TokioClock;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// Handler capacity: `WORKERS` at a time (a pool of workers), each request takes `WORK`.
const WORKERS: usize = 4;
const WORK: Duration = Duration::from_millis(50);
/// The callers' deadline: an answer later than this is not goodput.
const CALLER_TIMEOUT: Duration = Duration::from_millis(250);

fn capacity_rps() -> f64 {
    WORKERS as f64 / WORK.as_secs_f64()
}

/// A fixed-time handler with a fixed pool of workers: more requests than workers wait (FIFO) for
/// one, as on a thread pool or a database connection pool.
fn pool_app(pool: Arc<Semaphore>) -> Router {
    Router::new().route(
        "/work",
        get(move || {
            let pool = pool.clone();
            async move {
                let _worker = pool.acquire().await.expect("pool open");
                tokio::time::sleep(WORK).await;
                "done"
            }
        }),
    )
}

/// Offers `factor` × capacity, open loop, for `run`; returns goodput as a fraction of capacity
/// (successes answered within [`CALLER_TIMEOUT`], per second of the run).
async fn goodput(addr: std::net::SocketAddr, factor: f64, run: Duration) -> f64 {
    let rate = capacity_rps() * factor;
    let good = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    let total = (rate * run.as_secs_f64()) as usize;
    for _ in 0..total {
        tick.tick().await;
        let good = good.clone();
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let r = req("GET", addr, "/work").body(Full::new(Bytes::new())).unwrap();
            // The caller gives up at 1 s (dropping the connection); only answers within its
            // 250 ms deadline count.
            let got = send_within(addr, r, Duration::from_secs(1)).await;
            if got.is_some_and(|g| g.status == StatusCode::OK && sent.elapsed() <= CALLER_TIMEOUT) {
                good.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let offered_for = start.elapsed();
    for t in tasks {
        let _ = t.await;
    }
    good.load(Ordering::Relaxed) as f64 / offered_for.as_secs_f64() / capacity_rps()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goodput_holds_at_4x_with_shedding_and_collapses_without() {
    let run = Duration::from_secs(3);

    let metrics = ServerMetrics::new();
    let shed = ShedLayer::new(NonZeroUsize::new(WORKERS).unwrap()).with_metrics(metrics.clone());
    let with = serve(pool_app(Arc::new(Semaphore::new(WORKERS))).layer(shed)).await;
    let g_with = goodput(with, 4.0, run).await;

    let without = serve(pool_app(Arc::new(Semaphore::new(WORKERS)))).await;
    let g_without = goodput(without, 4.0, run).await;

    eprintln!(
        "goodput at 4x capacity: with ShedLayer {g_with:.2}, without {g_without:.2} ({:?})",
        metrics.snapshot()
    );
    assert!(g_with >= 0.9, "with shedding goodput {g_with:.2} of capacity");
    assert!(g_without <= 0.5, "without shedding goodput should collapse, got {g_without:.2}");
    assert!(metrics.snapshot().rejected_total() > 0);
}

/// A router with `handler` at `/slow` under `ShedLayer` (one slot, a queue of `queue`) and,
/// outside it, `DeadlineLayer`, both on tokio's clock: on a paused runtime the whole stack runs
/// on virtual time, called in-process (no sockets), so the order of arrivals is the order of
/// the test's steps and every wait is exact.
fn paused_stack<H, T>(handler: H, queue: usize, metrics: &ServerMetrics) -> Router
where
    H: axum::handler::Handler<T, ()>,
    T: 'static,
{
    Router::new()
        .route("/slow", get(handler))
        .layer(
            ShedLayer::new(NonZeroUsize::new(1).unwrap())
                .with_queue(queue)
                .with_metrics(metrics.clone())
                .with_clock(TokioClock),
        )
        .layer(DeadlineLayer::new().with_metrics(metrics.clone()).with_clock(TokioClock))
}

fn slow(headers: &[(&str, &str)]) -> http::Request<axum::body::Body> {
    let mut r = http::Request::get("/slow");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(axum::body::Body::empty()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn request_with_30ms_left_is_not_started_when_the_queue_wait_exceeds_it() {
    let started = Arc::new(AtomicU64::new(0));
    let s = started.clone();
    let handler = move || {
        s.fetch_add(1, Ordering::SeqCst);
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            "done"
        }
    };
    let metrics = ServerMetrics::new();
    let app = paused_stack(handler, 64, &metrics);
    let first = tokio::spawn(app.clone().oneshot(slow(&[])));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t = tokio::time::Instant::now();
    let got = app.clone().oneshot(slow(&[("request-timeout-ms", "30")])).await.unwrap();
    // Cut at its deadline, exactly, not when the slot came free (180 ms later).
    assert_eq!(t.elapsed(), Duration::from_millis(30));
    assert_eq!(got.status(), StatusCode::GATEWAY_TIMEOUT);
    // The outer DeadlineLayer cut it while its inner service (the queue) held it: from there the
    // outcome is unknown, and the problem body says so.
    assert_eq!(got.headers()["content-type"], "application/problem+json");
    let body = got.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("#deadline-passed-while-running"), "{body}");
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(started.load(Ordering::SeqCst), 1, "the doomed request never reached the handler");
    assert_eq!(metrics.snapshot().rejected(RejectReason::DeadlineExpired), 1);
    assert_eq!(metrics.snapshot().queue_len, 0, "the cancelled waiter left the queue");
}

#[tokio::test(start_paused = true)]
async fn retries_are_shed_before_first_attempts() {
    let handler = || async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        "done"
    };
    let metrics = ServerMetrics::new();
    let app = paused_stack(handler, 2, &metrics);
    let get =
        |attempt: &str| tokio::spawn(app.clone().oneshot(slow(&[("request-attempt", attempt)])));
    let step = || tokio::time::sleep(Duration::from_millis(30));
    let running = get("1");
    step().await;
    let retries = [get("2"), get("3")];
    step().await;
    assert_eq!(metrics.snapshot().queue_len, 2);
    let firsts = [get("1"), get("1")];
    step().await;
    let late_retry = get("2");
    for r in retries {
        let got = r.await.unwrap().unwrap();
        assert_eq!(
            got.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "queued retry evicted by a first attempt"
        );
        let after: u64 = got.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=5).contains(&after));
    }
    assert_eq!(late_retry.await.unwrap().unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(running.await.unwrap().unwrap().status(), StatusCode::OK);
    for f in firsts {
        assert_eq!(f.await.unwrap().unwrap().status(), StatusCode::OK, "first attempts served");
    }
    assert_eq!(metrics.snapshot().rejected(RejectReason::RetryShed), 3);
}
