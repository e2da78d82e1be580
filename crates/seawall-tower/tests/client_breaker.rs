//! `BreakerLayer` on a manual clock: opens on failures and refuses without calling the
//! dependency, half-open admits a bounded number of probes, an abandoned probe frees its slot, a
//! failed probe re-opens for longer, the `Control` forces it open, the metrics count it all, and
//! a `RetryLayer` above never retries an open breaker.
#![cfg(feature = "client")]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use prometheus_client::registry::Registry;
use seawall::breaker::{BreakerConfig, BreakerState};
use seawall::control::Control;
use seawall::time::ManualClock;
use seawall_tower::client::{
    BreakerLayer, BreakerMetrics, BreakerOpen, BreakerService, Forced, GaveUpError, RetryLayer,
    metrics_text,
};
use tokio::sync::Semaphore;
use tower::{BoxError, Layer, Service, ServiceExt};

/// The dependency: answers `status` once `gate` lets it; counts the requests it was sent.
#[derive(Clone)]
struct Dep {
    calls: Arc<AtomicU32>,
    status: Arc<AtomicU16>,
    gate: Arc<Semaphore>,
}

impl Dep {
    fn new() -> Self {
        Dep {
            calls: Arc::default(),
            status: Arc::new(AtomicU16::new(200)),
            gate: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
        }
    }

    /// Answers wait until [`release`](Self::release)d.
    fn gated() -> Self {
        Dep { gate: Arc::new(Semaphore::new(0)), ..Dep::new() }
    }

    fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }

    fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Service<Request<()>> for Dep {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<()>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (gate, status) = (self.gate.clone(), self.status.clone());
        Box::pin(async move {
            gate.acquire().await.unwrap().forget();
            let status = status.load(Ordering::SeqCst);
            Ok(Response::builder().status(status).body(()).unwrap())
        })
    }
}

type Svc = BreakerService<Dep, ManualClock>;

fn req() -> Request<()> {
    Request::get("/").body(()).unwrap()
}

/// Open for exactly 5 s (no jitter) doubling to 60 s, `probes` probes, 5 consecutive failures.
fn layer(clock: &ManualClock, probes: u32) -> (BreakerLayer<ManualClock>, Arc<BreakerMetrics>) {
    let cfg = BreakerConfig::default()
        .with_open(Duration::from_secs(5), Duration::from_secs(60), 0.0)
        .unwrap()
        .with_probes(probes, Duration::from_secs(10))
        .unwrap();
    let metrics = Arc::new(BreakerMetrics::new());
    let l = BreakerLayer::new(cfg).with_clock(clock.clone()).with_metrics(metrics.clone());
    (l.with_seed(1), metrics)
}

async fn send(svc: &mut Svc) -> Result<Response<()>, BoxError> {
    svc.ready().await?.call(req()).await
}

fn open_err(r: Result<Response<()>, BoxError>) -> BreakerOpen {
    *r.expect_err("refused").downcast::<BreakerOpen>().expect("a BreakerOpen")
}

/// Five 503s in a row: the breaker opens.
async fn trip(svc: &mut Svc, dep: &Dep) {
    dep.answer(503);
    for _ in 0..5 {
        assert_eq!(send(svc).await.unwrap().status(), 503);
    }
}

#[tokio::test]
async fn opens_on_failures_and_refuses_without_calling_the_dependency() {
    let clock = ManualClock::new();
    let (layer, metrics) = layer(&clock, 1);
    let dep = Dep::new();
    let mut svc = layer.layer(dep.clone());
    trip(&mut svc, &dep).await;
    assert_eq!(layer.state(), BreakerState::Open);
    for _ in 0..10 {
        let e = open_err(send(&mut svc).await);
        assert!(!e.is_forced());
        assert_eq!(e.until(), Some(seawall::time::Instant::ZERO + Duration::from_secs(5)));
    }
    assert_eq!(dep.calls(), 5, "an open breaker sends nothing");
    assert_eq!((metrics.opened(), metrics.rejected()), (1, (10, 0)));
}

#[tokio::test]
async fn client_errors_are_not_the_dependencys_failures() {
    let clock = ManualClock::new();
    let (layer, metrics) = layer(&clock, 1);
    let dep = Dep::new();
    let mut svc = layer.layer(dep.clone());
    dep.answer(404);
    for _ in 0..20 {
        assert_eq!(send(&mut svc).await.unwrap().status(), 404);
    }
    assert_eq!((layer.state(), metrics.opened()), (BreakerState::Closed, 0));
}

/// A breaker tripped open at 0 s and half-open now (5 s), over a gated dependency.
async fn half_open(probes: u32) -> (BreakerLayer<ManualClock>, Arc<BreakerMetrics>, Dep, Svc) {
    let clock = ManualClock::new();
    let (layer, metrics) = layer(&clock, probes);
    let dep = Dep::gated();
    let mut svc = layer.layer(dep.clone());
    dep.release(5);
    trip(&mut svc, &dep).await;
    clock.advance(Duration::from_secs(5));
    assert_eq!(layer.state(), BreakerState::HalfOpen);
    (layer, metrics, dep, svc)
}

#[tokio::test]
async fn half_open_lets_at_most_the_probes_through_and_a_success_closes_it() {
    let (layer, metrics, dep, mut svc) = half_open(2).await;
    // The breaker decides at `call`: two probes go out (and wait at the dependency); everyone
    // else is refused while they are out.
    dep.answer(200);
    let p1 = svc.ready().await.unwrap().call(req());
    let p2 = svc.ready().await.unwrap().call(req());
    for _ in 0..5 {
        open_err(send(&mut svc).await);
    }
    assert_eq!((dep.calls(), metrics.probes()), (7, 2));
    dep.release(1);
    assert_eq!(p1.await.unwrap().status(), 200);
    assert_eq!(layer.state(), BreakerState::Closed);
    dep.release(usize::MAX >> 4);
    assert_eq!(p2.await.unwrap().status(), 200);
    for _ in 0..10 {
        assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    }
    assert_eq!(metrics.rejected(), (5, 0));
}

#[tokio::test]
async fn an_abandoned_probe_gives_its_slot_back() {
    let (layer, metrics, dep, mut svc) = half_open(1).await;
    let probe = svc.ready().await.unwrap().call(req());
    open_err(send(&mut svc).await);
    drop(probe); // its caller went away: no answer, no verdict
    let probe = svc.ready().await.unwrap().call(req());
    assert_eq!((dep.calls(), metrics.probes()), (7, 2));
    dep.release(1);
    dep.answer(200);
    assert_eq!(probe.await.unwrap().status(), 200);
    assert_eq!(layer.state(), BreakerState::Closed);
}

#[tokio::test]
async fn a_failed_probe_reopens_for_twice_as_long() {
    let clock = ManualClock::new();
    let (layer, metrics) = layer(&clock, 1);
    let dep = Dep::new();
    let mut svc = layer.layer(dep.clone());
    trip(&mut svc, &dep).await;
    clock.advance(Duration::from_secs(5));
    assert_eq!(send(&mut svc).await.unwrap().status(), 503); // the probe fails
    assert_eq!((layer.state(), metrics.opened()), (BreakerState::Open, 2));
    clock.advance(Duration::from_secs(9));
    open_err(send(&mut svc).await);
    clock.advance(Duration::from_secs(1));
    dep.answer(200);
    assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    assert_eq!(layer.state(), BreakerState::Closed);
}

#[tokio::test]
async fn the_control_forces_it_open_and_ramps_it_back() {
    let clock = ManualClock::new();
    let control = Arc::new(Control::new());
    let (layer, metrics) = layer(&clock, 1);
    let layer = layer.with_control(control.clone());
    let dep = Dep::new();
    let mut svc = layer.layer(dep.clone());
    assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    control.disable();
    for _ in 0..10 {
        assert!(open_err(send(&mut svc).await).is_forced());
    }
    assert_eq!((dep.calls(), layer.state()), (1, BreakerState::Closed));
    // 25 % of the ramp: about a quarter get through (seeded, so exactly this many every run).
    control.set_percent(25).unwrap();
    let mut through = 0;
    for _ in 0..400 {
        through += u32::from(send(&mut svc).await.is_ok());
    }
    assert!((60..140).contains(&through), "{through} of 400 at 25 %");
    control.enable();
    for _ in 0..10 {
        assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    }
    assert_eq!(metrics.rejected().1, 10 + 400 - u64::from(through));
    assert_eq!(dep.calls(), 1 + through + 10);
}

#[tokio::test]
async fn a_retry_layer_above_never_retries_an_open_breaker() {
    let clock = ManualClock::new();
    let (layer, _) = layer(&clock, 1);
    let dep = Dep::new();
    let mut breaker = layer.layer(dep.clone());
    trip(&mut breaker, &dep).await;
    let mut retrying = RetryLayer::new().with_clock(clock.clone()).layer(breaker);
    let e: GaveUpError<()> = retrying.ready().await.unwrap().call(req()).await.unwrap_err();
    assert!(e.is_overloaded(), "{e:?}");
    assert_eq!(e.attempts(), 1);
    assert_eq!(dep.calls(), 5);
    // and answers its caller "overloaded; don't retry"
    let resp = e.into_response();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-pushback-ms"], "-1");
}

#[tokio::test]
async fn metrics_are_exported() {
    let clock = ManualClock::new();
    let (layer, metrics) = layer(&clock, 1);
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let dep = Dep::new();
    let mut svc = layer.layer(dep.clone());
    trip(&mut svc, &dep).await;
    open_err(send(&mut svc).await);
    let text = metrics_text(&registry);
    for line in [
        "seawall_client_breaker_layer_opened_total 1",
        "seawall_client_breaker_layer_rejected_total{reason=\"open\"} 1",
        "seawall_client_breaker_layer_rejected_total{reason=\"forced\"} 0",
        "seawall_client_breaker_layer_probes_total 0",
        "seawall_client_breaker_layer_state 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test]
async fn force_overrides_the_breaker_both_ways() {
    let clock = ManualClock::new();
    let (layer, metrics) = layer(&clock, 1);
    let dep = Dep::new();
    let mut svc = layer.layer(dep.clone());
    layer.clone().force(Some(Forced::Open)); // a clone shares the breaker
    assert!(open_err(send(&mut svc).await).is_forced());
    assert_eq!((dep.calls(), layer.state()), (0, BreakerState::Closed));
    layer.force(None);
    trip(&mut svc, &dep).await;
    open_err(send(&mut svc).await);
    // Forced closed: everything is sent and nothing recorded, however it fails.
    layer.force(Some(Forced::Closed));
    for _ in 0..20 {
        assert_eq!(send(&mut svc).await.unwrap().status(), 503);
    }
    assert_eq!((dep.calls(), metrics.opened()), (25, 1));
    layer.force(None);
    assert!(!open_err(send(&mut svc).await).is_forced());
    assert_eq!(metrics.rejected(), (2, 1));
}
