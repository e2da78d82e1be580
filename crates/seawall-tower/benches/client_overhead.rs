//! Overhead per call of `RetryLayer` on the success path, over a no-op service, against
//! `tower::retry::Retry` with a `TpsBudget` policy in the same run. Futures complete on their
//! first poll (no I/O), so each is polled once with a no-op waker: no executor in the numbers.
//! Requests are built, and responses dropped, outside the timed part (`iter_batched`), so the
//! baseline is the call of a no-op service and nothing else. Beside the two layers, the copy of
//! the request with no layer around it (`CopyAlone`): what any layer that keeps a request to
//! send it again pays before doing anything else, the floor under both.
//!
//! `SEAWALL_BENCH_COUNT=<n>` skips criterion and runs each case `n` times in its own
//! `#[inline(never)]` function (`count_<case>`), for instruction counts under callgrind:
//!
//! ```text
//! SEAWALL_BENCH_COUNT=100000 valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     target/release/deps/client_overhead-<hash>
//! callgrind_annotate --inclusive=yes cg.out | grep count_
//! ```
//!
//! It also prints each case's CPU time per call (`CLOCK_THREAD_CPUTIME_ID`, Linux):
//! time the thread was not running is not counted, which keeps the figures usable on a machine
//! busy with other work, where criterion's wall-clock times are not. With
//! `SEAWALL_BENCH_ROUNDS=<r>` the cases run interleaved `r` times; each case's minimum is kept,
//! and each ratio to tower is also given as the median of the `r` ratios taken within a round.
//!
//! `SEAWALL_BENCH_SIZES=1` prints the size of each layer's response future instead, and
//! `SEAWALL_BENCH_CLOCK=1` the CPU time of one clock read (seawall's `SystemClock` and
//! `CoarseClock`, tokio's `Instant::now`, which tower's `TpsBudget` reads on every call),
//! against an empty loop.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use criterion::{BatchSize, Criterion, criterion_group};
use http::{Request, Response};
use seawall::budget::AnyBudget;
use seawall::time::CoarseClock;
use seawall_tower::client::{ClientMetrics, RetryLayer};
use tower::retry::budget::TpsBudget;
use tower::{Layer, Service};

#[path = "client_common/mod.rs"]
mod common;
use common::TowerPolicy;

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

/// tower's retry keeping its copy of the request but never consulting a budget: tower's
/// machinery without its `TpsBudget`.
#[derive(Clone)]
struct NoBudget;

impl<E> tower::retry::Policy<Request<Bytes>, Response<Bytes>, E> for NoBudget {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _: &mut Request<Bytes>,
        _: &mut Result<Response<Bytes>, E>,
    ) -> Option<Ready<()>> {
        None
    }

    fn clone_request(&mut self, req: &Request<Bytes>) -> Option<Request<Bytes>> {
        TowerPolicy::clone_request(req)
    }
}

/// No layer at all: the request is copied (method, URI, version, headers, extensions and body,
/// the steps of seawall's crate-private `replay_head`), the copy sent and the request dropped.
/// The copy's own cost with nothing around it: the floor under any layer that keeps a request
/// to send it again.
#[derive(Clone)]
struct CopyAlone<S>(S);

impl<S: Service<Request<Bytes>>> Service<Request<Bytes>> for CopyAlone<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Bytes>) -> S::Future {
        let mut copy = Request::new(req.body().clone());
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.version_mut() = req.version();
        if !req.headers().is_empty() {
            *copy.headers_mut() = req.headers().clone();
        }
        *copy.extensions_mut() = req.extensions().clone();
        let fut = self.0.call(copy);
        drop(req);
        fut
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

/// The same request with the few headers a real client call usually carries already. The
/// header map then exists before the layer sees it: stamping `Request-Attempt` does not allocate
/// one, but a copy of the request (tower's `clone_request`, seawall's spare) clones it.
fn request_with_headers() -> Request<Bytes> {
    Request::get("http://dependency/orders/1")
        .header("accept", "application/json")
        .header("user-agent", "seawall-bench/0.1")
        .header("x-request-id", "0af7651916cd43dd8448eb211c80319c")
        .body(Bytes::new())
        .unwrap()
}

/// One call: ready, call, poll once.
#[inline(always)]
fn call<S>(svc: &mut S, req: Request<Bytes>) -> S::Response
where
    S: Service<Request<Bytes>>,
    S::Error: std::fmt::Debug,
{
    assert!(svc.poll_ready(&mut Context::from_waker(Waker::noop())).is_ready());
    once(svc.call(black_box(req))).unwrap()
}

fn bench<S>(c: &mut Criterion, name: &str, make: fn() -> Request<Bytes>, mut svc: S)
where
    S: Service<Request<Bytes>>,
    S::Error: std::fmt::Debug,
{
    c.bench_function(name, |b| {
        b.iter_batched(make, |req| call(&mut svc, req), BatchSize::SmallInput)
    });
}

/// Runs `n` calls; the request is built inside the loop, so subtract `count_noop`.
#[inline(always)]
fn count<S>(n: u64, make: fn() -> Request<Bytes>, mut svc: S)
where
    S: Service<Request<Bytes>>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..n {
        black_box(call(&mut svc, make()));
    }
}

macro_rules! counters {
    ($($name:ident),*) => {$(
        #[inline(never)]
        fn $name<S>(n: u64, make: fn() -> Request<Bytes>, svc: S)
        where
            S: Service<Request<Bytes>>,
            S::Error: std::fmt::Debug,
        {
            // Distinct bodies: two cases of the same service type must not fold into one.
            black_box(stringify!($name));
            count(n, make, svc)
        }
    )*};
}

/// Calls `svc` with each of `reqs`, built beforehand, keeping the responses: what criterion's
/// `iter_batched` times.
#[inline(always)]
fn batch<S>(reqs: Vec<Request<Bytes>>, mut svc: S) -> Vec<S::Response>
where
    S: Service<Request<Bytes>>,
    S::Error: std::fmt::Debug,
{
    let mut out = Vec::with_capacity(reqs.len());
    for req in reqs {
        out.push(call(&mut svc, req));
    }
    out
}

macro_rules! batches {
    ($($name:ident),*) => {$(
        #[inline(never)]
        fn $name<S>(reqs: Vec<Request<Bytes>>, svc: S) -> Vec<S::Response>
        where
            S: Service<Request<Bytes>>,
            S::Error: std::fmt::Debug,
        {
            black_box(stringify!($name));
            batch(reqs, svc)
        }
    )*};
}

batches!(
    batch_noop,
    batch_tower,
    batch_tower_no_budget,
    batch_copy_alone,
    batch_seawall,
    batch_seawall_coarse,
    batch_seawall_deadline_metrics,
    batch_headers_noop,
    batch_headers_tower,
    batch_headers_copy_alone,
    batch_headers_seawall,
    batch_headers_seawall_coarse,
    batch_headers_seawall_deadline_metrics
);

counters!(
    count_noop,
    count_tower,
    count_tower_no_budget,
    count_copy_alone,
    count_seawall,
    count_seawall_coarse,
    count_seawall_deadline_metrics,
    count_headers_noop,
    count_headers_tower,
    count_headers_copy_alone,
    count_headers_seawall,
    count_headers_seawall_coarse,
    count_headers_seawall_deadline_metrics
);

fn tower_retry() -> impl Service<Request<Bytes>, Error = impl std::fmt::Debug> {
    let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2));
    tower::retry::RetryLayer::new(TowerPolicy(budget)).layer(noop())
}

fn tower_no_budget() -> impl Service<Request<Bytes>, Error = impl std::fmt::Debug> {
    tower::retry::RetryLayer::new(NoBudget).layer(noop())
}

/// The bare layer on the coarse clock (`CLOCK_MONOTONIC_COARSE`): the one clock read a call makes
/// is the cheap one.
fn coarse() -> RetryLayer<AnyBudget, CoarseClock> {
    RetryLayer::new().with_clock(CoarseClock)
}

fn with_deadline_metrics() -> RetryLayer {
    RetryLayer::new()
        .with_default_timeout(Duration::from_secs(1))
        .with_metrics(Arc::new(ClientMetrics::new()))
}

fn overhead(c: &mut Criterion) {
    let r = request;
    bench(c, "client/noop (baseline)", r, noop());
    bench(c, "client/tower Retry + TpsBudget", r, tower_retry());
    bench(c, "client/tower Retry, no budget", r, tower_no_budget());
    bench(c, "client/the copy alone (no layer)", r, CopyAlone(noop()));
    bench(c, "client/seawall RetryLayer", r, RetryLayer::new().layer(noop()));
    bench(c, "client/seawall RetryLayer, CoarseClock", r, coarse().layer(noop()));
    let name = "client/seawall RetryLayer + deadline + metrics";
    bench(c, name, r, with_deadline_metrics().layer(noop()));
    let h = request_with_headers;
    bench(c, "client/3 headers/noop (baseline)", h, noop());
    bench(c, "client/3 headers/tower Retry + TpsBudget", h, tower_retry());
    bench(c, "client/3 headers/the copy alone (no layer)", h, CopyAlone(noop()));
    bench(c, "client/3 headers/seawall RetryLayer", h, RetryLayer::new().layer(noop()));
    bench(c, "client/3 headers/seawall RetryLayer, CoarseClock", h, coarse().layer(noop()));
    let name = "client/3 headers/seawall RetryLayer + deadline + metrics";
    bench(c, name, h, with_deadline_metrics().layer(noop()));
}

criterion_group!(benches, overhead);

/// CPU time this thread has run, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`: exact, where
/// `/proc/thread-self/schedstat` moves only at scheduler ticks, 4 ms here).
fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// The cases of the counting modes: no-op, tower, tower without its budget, the copy alone,
/// seawall, seawall on the coarse clock, seawall with a deadline and metrics; then no-op, tower,
/// the copy alone, seawall, seawall on the coarse clock and seawall with a deadline and metrics
/// with a request carrying three headers.
const CASES: usize = 13;
/// Index of the second group's no-op (the first case with three headers).
const HEADERS: usize = 7;

fn counted(n: u64, rounds: u32) {
    let (r, h) = (request as fn() -> _, request_with_headers as fn() -> _);
    let cases: [(&str, &dyn Fn()); CASES] = [
        ("noop", &|| count_noop(n, r, noop())),
        ("tower", &|| count_tower(n, r, tower_retry())),
        ("tower, no budget", &|| count_tower_no_budget(n, r, tower_no_budget())),
        ("the copy alone (no layer)", &|| count_copy_alone(n, r, CopyAlone(noop()))),
        ("seawall", &|| count_seawall(n, r, RetryLayer::new().layer(noop()))),
        ("seawall, CoarseClock", &|| count_seawall_coarse(n, r, coarse().layer(noop()))),
        ("seawall + deadline + metrics", &|| {
            count_seawall_deadline_metrics(n, r, with_deadline_metrics().layer(noop()))
        }),
        ("3 headers/noop", &|| count_headers_noop(n, h, noop())),
        ("3 headers/tower", &|| count_headers_tower(n, h, tower_retry())),
        ("3 headers/the copy alone", &|| count_headers_copy_alone(n, h, CopyAlone(noop()))),
        ("3 headers/seawall", &|| count_headers_seawall(n, h, RetryLayer::new().layer(noop()))),
        ("3 headers/seawall, CoarseClock", &|| {
            count_headers_seawall_coarse(n, h, coarse().layer(noop()))
        }),
        ("3 headers/seawall + deadline + metrics", &|| {
            count_headers_seawall_deadline_metrics(n, h, with_deadline_metrics().layer(noop()))
        }),
    ];
    let mut times = vec![[0.0f64; CASES]; rounds.max(1) as usize];
    for round in &mut times {
        for (i, (_, run)) in cases.iter().enumerate() {
            let t0 = cpu_ns();
            run();
            round[i] = (cpu_ns() - t0) as f64 / n as f64;
        }
    }
    report(&cases.map(|c| c.0), &times);
}

/// Each case's time per call (minimum over the rounds) and its overhead as a multiple of
/// tower's.
fn report(names: &[&str; CASES], times: &[[f64; CASES]]) {
    let best: [f64; CASES] =
        std::array::from_fn(|i| times.iter().map(|r| r[i]).fold(f64::INFINITY, f64::min));
    // Request construction is inside the loop: overheads are differences from the no-op. The
    // machine's speed drifts between rounds; a ratio taken within one round, where the cases
    // ran one after the other, drifts less than the minima do, so the median of those is given
    // too.
    let baselines = |i: usize| if i < HEADERS { (0, 1) } else { (HEADERS, HEADERS + 1) };
    for (i, name) in names.iter().enumerate() {
        let (base, tower) = baselines(i);
        let (over, tower_over) = (best[i] - best[base], best[tower] - best[base]);
        let mut ratios: Vec<f64> =
            times.iter().map(|r| (r[i] - r[base]) / (r[tower] - r[base])).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "{name:<40} {:7.1} ns/call CPU  overhead {over:6.1} ns  = {:.2}x tower's  \
             (median of {} rounds' ratios {:.2}x)",
            best[i],
            over / tower_over,
            ratios.len(),
            ratios[ratios.len() / 2],
        );
    }
}

/// Like [`counted`], but the requests are built before the timed part and the responses dropped
/// after it, as criterion's `iter_batched` does.
fn batched(n: u64, rounds: u32) {
    let (r, h) = (request as fn() -> _, request_with_headers as fn() -> _);
    type Case<'a> = (&'a str, fn() -> Request<Bytes>, &'a dyn Fn(Vec<Request<Bytes>>));
    let cases: [Case; CASES] = [
        ("noop", r, &|q| drop(batch_noop(q, noop()))),
        ("tower", r, &|q| drop(batch_tower(q, tower_retry()))),
        ("tower, no budget", r, &|q| drop(batch_tower_no_budget(q, tower_no_budget()))),
        ("the copy alone (no layer)", r, &|q| drop(batch_copy_alone(q, CopyAlone(noop())))),
        ("seawall", r, &|q| drop(batch_seawall(q, RetryLayer::new().layer(noop())))),
        ("seawall, CoarseClock", r, &|q| drop(batch_seawall_coarse(q, coarse().layer(noop())))),
        ("seawall + deadline + metrics", r, &|q| {
            drop(batch_seawall_deadline_metrics(q, with_deadline_metrics().layer(noop())))
        }),
        ("3 headers/noop", h, &|q| drop(batch_headers_noop(q, noop()))),
        ("3 headers/tower", h, &|q| drop(batch_headers_tower(q, tower_retry()))),
        ("3 headers/the copy alone", h, &|q| drop(batch_headers_copy_alone(q, CopyAlone(noop())))),
        ("3 headers/seawall", h, &|q| {
            drop(batch_headers_seawall(q, RetryLayer::new().layer(noop())))
        }),
        ("3 headers/seawall, CoarseClock", h, &|q| {
            drop(batch_headers_seawall_coarse(q, coarse().layer(noop())))
        }),
        ("3 headers/seawall + deadline + metrics", h, &|q| {
            let svc = with_deadline_metrics().layer(noop());
            drop(batch_headers_seawall_deadline_metrics(q, svc))
        }),
    ];
    let mut times = vec![[0.0f64; CASES]; rounds.max(1) as usize];
    for round in &mut times {
        for (i, (_, make, run)) in cases.iter().enumerate() {
            let reqs: Vec<_> = (0..n).map(|_| make()).collect();
            let t0 = cpu_ns();
            run(reqs);
            round[i] = (cpu_ns() - t0) as f64 / n as f64;
        }
    }
    report(&cases.map(|c| c.0), &times);
}

/// The CPU time of one clock read: what a layer's success path pays for each (the vDSO's work,
/// which callgrind does not count). Interleaved rounds, minimum per case.
fn clock_reads() {
    use seawall::time::{Clock, SystemClock};
    const N: u32 = 1_000_000;
    let cases: [(&str, &dyn Fn()); 4] = [
        ("empty loop", &|| {
            (0..N).for_each(|i| {
                black_box(i);
            })
        }),
        ("seawall SystemClock::now", &|| {
            (0..N).for_each(|_| {
                black_box(SystemClock.now());
            })
        }),
        ("seawall CoarseClock::now", &|| {
            (0..N).for_each(|_| {
                black_box(CoarseClock.now());
            })
        }),
        ("tokio Instant::now", &|| {
            (0..N).for_each(|_| {
                black_box(tokio::time::Instant::now());
            })
        }),
    ];
    let mut best = [f64::MAX; 4];
    for _ in 0..11 {
        for (i, (_, run)) in cases.iter().enumerate() {
            let t0 = cpu_ns();
            run();
            best[i] = best[i].min((cpu_ns() - t0) as f64 / f64::from(N));
        }
    }
    for (i, (name, _)) in cases.iter().enumerate() {
        println!(
            "{name:26} {:6.1} ns/read CPU  ({:.1} ns over the empty loop)",
            best[i],
            best[i] - best[0]
        );
    }
}

fn main() {
    // The deadline path arms a tokio timer (never fired): it needs a runtime context.
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let _ctx = rt.enter();
    if std::env::var("SEAWALL_BENCH_CLOCK").is_ok() {
        clock_reads();
        return;
    }
    if std::env::var("SEAWALL_BENCH_SIZES").is_ok() {
        // Futures are moved by value: their size is part of the cost.
        let seawall = RetryLayer::new().layer(noop()).call(request());
        let tower = tower_retry().call(request());
        let (s, t) = (std::mem::size_of_val(&seawall), std::mem::size_of_val(&tower));
        println!("future sizes: seawall {s} bytes, tower {t} bytes");
        return;
    }
    if let Some(n) = std::env::var("SEAWALL_BENCH_COUNT").ok().and_then(|v| v.parse().ok()) {
        let rounds = std::env::var("SEAWALL_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok());
        if std::env::var("SEAWALL_BENCH_BATCHED").is_ok() {
            batched(n, rounds.unwrap_or(1));
        } else {
            counted(n, rounds.unwrap_or(1));
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
