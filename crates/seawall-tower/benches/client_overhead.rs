//! Overhead per call of `RetryLayer` on the success path, over a no-op service, against
//! `tower::retry::Retry` with a `TpsBudget` policy in the same run. Futures complete on their
//! first poll (no I/O), so each is polled once with a no-op waker: no executor in the numbers.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use seawall_tower::client::{ClientMetrics, RetryLayer};
use tower::retry::budget::{Budget, TpsBudget};
use tower::{Layer, Service};

fn noop() -> impl Service<
    Request<Bytes>,
    Response = Response<Bytes>,
    Error = Infallible,
    Future = Ready<Result<Response<Bytes>, Infallible>>,
> + Clone
+ Send
+ 'static {
    tower::service_fn(|_req: Request<Bytes>| ready(Ok(Response::new(Bytes::new()))))
}

/// tower's retry with the budget it ships: retry 5xx while the budget allows.
#[derive(Clone)]
struct TowerPolicy(Arc<TpsBudget>);

impl<E> tower::retry::Policy<Request<Bytes>, Response<Bytes>, E> for TowerPolicy {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _req: &mut Request<Bytes>,
        result: &mut Result<Response<Bytes>, E>,
    ) -> Option<Self::Future> {
        match result {
            Ok(r) if !r.status().is_server_error() => {
                self.0.deposit();
                None
            }
            _ => self.0.withdraw().then(|| ready(())),
        }
    }

    fn clone_request(&mut self, req: &Request<Bytes>) -> Option<Request<Bytes>> {
        let mut r = Request::new(req.body().clone());
        *r.method_mut() = req.method().clone();
        *r.uri_mut() = req.uri().clone();
        *r.headers_mut() = req.headers().clone();
        Some(r)
    }
}

fn once<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the success path must not wait"),
    }
}

fn request() -> Request<Bytes> {
    Request::get("http://dependency/orders/1").body(Bytes::new()).unwrap()
}

fn bench<S>(c: &mut Criterion, name: &str, mut svc: S)
where
    S: Service<Request<Bytes>>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    c.bench_function(name, |b| {
        b.iter(|| {
            assert!(svc.poll_ready(&mut cx).is_ready());
            black_box(once(svc.call(black_box(request()))).unwrap())
        })
    });
}

fn overhead(c: &mut Criterion) {
    // The deadline path arms a tokio timer (never fired): it needs a runtime context.
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let _ctx = rt.enter();
    bench(c, "client/noop (baseline)", noop());
    let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2));
    bench(
        c,
        "client/tower Retry + TpsBudget",
        tower::retry::RetryLayer::new(TowerPolicy(budget)).layer(noop()),
    );
    bench(c, "client/seawall RetryLayer", RetryLayer::new().layer(noop()));
    let with_metrics = RetryLayer::new()
        .with_default_timeout(Duration::from_secs(1))
        .with_metrics(Arc::new(ClientMetrics::new()));
    bench(c, "client/seawall RetryLayer + deadline + metrics", with_metrics.layer(noop()));
}

criterion_group!(benches, overhead);
criterion_main!(benches);
