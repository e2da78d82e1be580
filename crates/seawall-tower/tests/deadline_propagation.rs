//! Deadlines that propagate: three real axum tiers on loopback, each behind the server
//! `DeadlineLayer`, whose handlers call the tier below through a client layer *without copying
//! the deadline*. The edge's budget reaches the bottom as a time left that only shrinks, and the
//! bottom's work is dropped — at its deadline, and as soon as the caller above goes away.
//!
//! Real sockets rule out a paused tokio clock (it would jump over the time spent waiting on
//! them), so these run on the system clock with generous budgets and assert orderings and
//! inequalities, never spreads.
#![cfg(all(feature = "client", feature = "server", feature = "axum"))]

mod common_client;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::routing::any;
use bytes::Bytes;
use common_client::{Reqwest, get, serve};
use seawall_tower::client::{FailFastLayer, RetryLayer};
use seawall_tower::propagate;
use seawall_tower::server::{DeadlineLayer, RejectReason, ServerMetrics, TimeLeft};
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

type Client = BoxCloneSyncService<http::Request<Bytes>, http::Response<Bytes>, tower::BoxError>;

/// The top tier's outgoing client: the one owner of retries on the path.
fn owner() -> Client {
    let svc = RetryLayer::new().layer(Reqwest::new());
    BoxCloneSyncService::new(tower::service_fn(move |req| {
        let mut svc = svc.clone();
        async move {
            match svc.ready().await?.call(req).await {
                Ok(r) => Ok(r),
                Err(e) => Ok(e.into_response()),
            }
        }
    }))
}

/// Every other tier's outgoing client.
fn fail_fast() -> Client {
    BoxCloneSyncService::new(FailFastLayer::new().layer(Reqwest::new()))
}

/// What a hop saw: the `Request-Timeout-Ms` it was sent, the [`TimeLeft`] its handler extracted,
/// and when (after extracting).
#[derive(Debug, Clone, Copy)]
struct Seen {
    header_ms: Option<u64>,
    left: Duration,
    at: Instant,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn seen(log: &Log, req: &Request, TimeLeft(left): TimeLeft) {
    let header_ms =
        req.headers().get("request-timeout-ms").map(|v| v.to_str().unwrap().parse().unwrap());
    log.lock().unwrap().push(Seen { header_ms, left, at: Instant::now() });
}

/// A middle tier: works for `work`, then calls `next` through `client` with a fresh request — no
/// deadline copied.
async fn tier(next: SocketAddr, client: Client, log: Log, work: Duration) -> SocketAddr {
    let handler = move |left: TimeLeft, req: Request| {
        let mut client = client.clone();
        seen(&log, &req, left);
        async move {
            tokio::time::sleep(work).await;
            let resp = client.ready().await.unwrap().call(get(next, "/")).await.unwrap();
            let (parts, body) = resp.into_parts();
            http::Response::from_parts(parts, axum::body::Body::from(body))
        }
    };
    serve(axum::Router::new().route("/", any(handler)).layer(DeadlineLayer::new())).await
}

/// Counts the bottom's work: started, finished, and dropped unfinished.
#[derive(Debug, Default)]
struct Work {
    started: AtomicU32,
    finished: AtomicU32,
    dropped: AtomicU32,
}

struct DropGuard(Arc<Work>, bool);

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

struct Bottom {
    addr: SocketAddr,
    log: Log,
    work: Arc<Work>,
    metrics: ServerMetrics,
}

/// The bottom tier: work that takes far longer than any budget here (60 s), unless dropped.
async fn bottom() -> Bottom {
    let (log, work, metrics) = (Log::default(), Arc::new(Work::default()), ServerMetrics::new());
    let (l, w) = (log.clone(), work.clone());
    let handler = move |left: TimeLeft, req: Request| {
        seen(&l, &req, left);
        let w = w.clone();
        async move {
            w.started.fetch_add(1, Ordering::SeqCst);
            let mut guard = DropGuard(w.clone(), false);
            tokio::time::sleep(Duration::from_secs(60)).await;
            guard.1 = true;
            w.finished.fetch_add(1, Ordering::SeqCst);
            "done"
        }
    };
    let layer = DeadlineLayer::new().with_metrics(metrics.clone());
    let addr = serve(axum::Router::new().route("/", any(handler)).layer(layer)).await;
    Bottom { addr, log, work, metrics }
}

/// Waits (bounded: 20 s) until the bottom has dropped at least `n` pieces of work, and all it
/// started.
async fn dropped(work: &Work, n: u32) {
    for _ in 0..2000 {
        let d = work.dropped.load(Ordering::SeqCst);
        if d >= n && d == work.started.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the bottom's work was not dropped: {work:?}");
}

/// top (RetryLayer) → mid (FailFastLayer) → bottom, each behind a `DeadlineLayer`; the top and
/// the mid work for `work` before calling down.
async fn three_tiers(work: Duration) -> (SocketAddr, Log, Log, Bottom) {
    let bottom = bottom().await;
    let (top_log, mid_log) = (Log::default(), Log::default());
    let mid = tier(bottom.addr, fail_fast(), mid_log.clone(), work).await;
    let top = tier(mid, owner(), top_log.clone(), work).await;
    (top, top_log, mid_log, bottom)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_budget_reaches_the_bottom_and_work_past_it_is_dropped() {
    const BUDGET_MS: u64 = 1500;
    const WORK_MS: u64 = 200;
    let (top, top_log, mid_log, bottom) = three_tiers(Duration::from_millis(WORK_MS)).await;
    let edge = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = edge
        .get(format!("http://{top}/"))
        .header("request-timeout-ms", BUDGET_MS.to_string())
        .send()
        .await
        .unwrap();
    // The top's deadline passed with the bottom still working: a 504 (the top's deadline) or
    // the owner's 503 give-up (its deadline gone), never the bottom's "done".
    assert!(matches!(resp.status().as_u16(), 503 | 504), "{}", resp.status());
    dropped(&bottom.work, 1).await;

    let (top, mid) = (top_log.lock().unwrap()[0], mid_log.lock().unwrap()[0]);
    let low = bottom.log.lock().unwrap().clone();
    assert_eq!(top.header_ms, Some(BUDGET_MS));
    assert!(top.left <= Duration::from_millis(BUDGET_MS));
    // Each hop was sent the time left of the hop above, which nobody copied: strictly less at
    // every hop (whole milliseconds, rounded down).
    let (mid_ms, low_ms) = (mid.header_ms.expect("mid: no deadline header"), low[0].header_ms);
    let low_ms = low_ms.expect("bottom: no deadline header");
    assert!(BUDGET_MS > mid_ms && mid_ms > low_ms, "{BUDGET_MS} {mid_ms} {low_ms}");
    // The time each hop spent before calling down came off what it sent: the bottom was sent
    // the top's budget minus both hops' work, at most (time on the wire is not subtracted: the
    // header carries a time left, not an instant).
    assert!(mid_ms <= BUDGET_MS - WORK_MS, "{mid_ms}");
    assert!(low_ms <= BUDGET_MS - 2 * WORK_MS, "{low_ms}");
    // … and the bottom's handler sees no more than that.
    assert!(low[0].left <= Duration::from_millis(low_ms));
    assert!(top.at < mid.at && mid.at < low[0].at);
    // Work past the deadline is dropped, never finished: every request the bottom started
    // (the owner may have retried once) was cancelled.
    let w = &bottom.work;
    assert_eq!(w.finished.load(Ordering::SeqCst), 0);
    assert_eq!(w.dropped.load(Ordering::SeqCst), w.started.load(Ordering::SeqCst));
    assert_eq!(low.len() as u32, w.started.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bottom_drops_its_work_when_the_caller_goes_away() {
    // A long budget (30 s), and an edge that gives up after 300 ms: the top's connection closes,
    // hyper drops the top's handler, which drops its outgoing call, and so on down.
    let (top, _, _, bottom) = three_tiers(Duration::ZERO).await;
    let edge = reqwest::Client::builder().no_proxy().timeout(Duration::from_millis(300));
    let edge = edge.build().unwrap();
    let sent = edge.get(format!("http://{top}/")).header("request-timeout-ms", "30000").send();
    assert!(sent.await.unwrap_err().is_timeout());
    dropped(&bottom.work, 1).await;
    let low = bottom.log.lock().unwrap()[0];
    assert!(low.left > Duration::from_secs(20), "{low:?}");
    // Dropped because the caller went, long before the bottom's own deadline could fire.
    assert_eq!(bottom.metrics.snapshot().rejected(RejectReason::DeadlineExpired), 0);
    assert_eq!(bottom.work.finished.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn spawned_tasks_leave_the_scope_unless_carried() {
    let clock = seawall::time::ManualClock::new();
    let d = seawall_tower::wire::RequestDeadline::after(&clock, Duration::from_millis(250));
    let (lost, carried) = propagate::scope(d.clone(), async {
        let lost = tokio::spawn(async { propagate::current() });
        let carried = tokio::spawn(propagate::scope(propagate::current().unwrap(), async {
            propagate::current()
        }));
        (lost.await.unwrap(), carried.await.unwrap())
    })
    .await;
    assert_eq!((lost, carried), (None, Some(d)));
}

/// The deadline `DeadlineLayer` gives the handler, as seen from inside `call` (a service that
/// builds its future eagerly) and from inside the future.
#[tokio::test]
async fn the_scope_covers_the_inner_call_and_its_future() {
    let ms = |d: Option<seawall_tower::wire::RequestDeadline>| d.map(|d| d.remaining());
    let svc = tower::service_fn(move |_req: http::Request<()>| {
        let in_call = ms(propagate::current());
        async move {
            let in_future = ms(propagate::current());
            let ok = |d: Option<Duration>| d.is_some_and(|d| d <= Duration::from_millis(250));
            let body = format!("{} {}", ok(in_call), ok(in_future));
            Ok::<_, std::convert::Infallible>(http::Response::new(body))
        }
    });
    let mut svc = DeadlineLayer::new().layer(svc);
    let req = http::Request::get("/").header("request-timeout-ms", "250").body(()).unwrap();
    let resp = svc.ready().await.unwrap().call(req).await.unwrap();
    assert_eq!(resp.body(), "true true");
    assert_eq!(propagate::current(), None, "the scope ends with the request");
}
