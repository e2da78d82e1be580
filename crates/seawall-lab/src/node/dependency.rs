//! The built-in dependency: `workers` × `service_time` of capacity, slower when overloaded, and
//! the faults the parent injects through `POST /admin/fault/{kind}/{ms}` (admin listener, token).
//!
//! Overload physics (Bronson et al.'s "an order of magnitude slower above 300 QPS", gentler):
//! with `n` requests in the system (queued + running) and `w` workers, each request takes
//! `service_time × (1 + 2 · clamp((n − 2w) / 4w, 0, 1))`: normal while the queue is shorter than
//! the worker pool, up to 3× slower once it is five times as long (contention, cache thrash).
//! Capacity therefore falls to a third exactly when the system is overloaded: the metastable
//! trap that retries keep a system in.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

// The runtime's clock, not the wall's: the same on a real runtime, virtual under the virtual lab.
use tokio::time::Instant;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Semaphore;

use prometheus_client::registry::Registry;
use seawall::control::Control;
use seawall_tower::admin::AdminAuth;
use seawall_tower::client::metrics_response;
use seawall_tower::server::{ServerMetrics, admission_response};

use super::spans::{SpanGuard, Tracer};
use super::stats::{BusySpan, NodeStats, QueueSlot, mark_service};
use super::{NodeSpec, admin};
use crate::config::{FaultKind, Stack};

/// Slowdown at full overload (queue ≥ workers).
const THRASH: f64 = 3.0;
/// Service time multiplier of a `slow` fault (an index slowdown: p50 40 → 240 ms).
const SLOW: f64 = 6.0;
/// Service time multiplier right after a restart; warms linearly.
const COLD: f64 = 4.0;
/// Seconds of healthy capacity a restarted dependency must serve to be warm again.
const WARMUP_S: f64 = 5.0;

#[derive(Debug, Clone, Copy)]
struct FaultState {
    kind: FaultKind,
    until: Instant,
}

/// The dependency's state.
#[derive(Debug)]
pub struct Dependency {
    stack: Stack,
    workers: u32,
    service: Duration,
    pool: Semaphore,
    in_system: AtomicU64,
    fault: Mutex<Option<FaultState>>,
    /// Requests left to serve before a restarted dependency is warm.
    cold_left: AtomicU64,
    warmup: u64,
    stats: Arc<NodeStats>,
    layers: ServerMetrics,
    registry: Registry,
    admission: Arc<Control>,
    /// Work queued longer than this is dropped when it reaches a worker (0: never).
    queue_timeout_ms: AtomicU64,
    /// How late the timer wakes a worker after its service sleep, microseconds, a moving
    /// average: each sleep asks for that much less (see [`Dependency::serve`]).
    timer_late_us: AtomicU64,
    /// Its spans, when the spec asks for them ([`NodeSpec::otlp`]).
    tracer: Option<Arc<Tracer>>,
}

impl Dependency {
    /// Its spans, when the spec asks for them.
    pub(super) fn tracer(&self) -> Option<&Arc<Tracer>> {
        self.tracer.as_ref()
    }

    /// The node's counters.
    pub(super) fn stats(&self) -> &Arc<NodeStats> {
        &self.stats
    }

    /// A healthy dependency for `spec`.
    pub fn new(spec: &NodeSpec) -> Self {
        let capacity = f64::from(spec.workers) / spec.service_time.as_secs_f64().max(1e-6);
        let layers = ServerMetrics::new();
        let mut registry = Registry::default();
        layers.register(&mut registry);
        Dependency {
            stack: spec.stack,
            workers: spec.workers,
            service: spec.service_time,
            pool: Semaphore::new(spec.workers as usize),
            in_system: AtomicU64::new(0),
            fault: Mutex::new(None),
            cold_left: AtomicU64::new(0),
            warmup: (capacity * WARMUP_S) as u64,
            stats: Arc::default(),
            layers,
            registry,
            admission: Arc::new(Control::new()),
            queue_timeout_ms: AtomicU64::new(0),
            timer_late_us: AtomicU64::new(0),
            tracer: spec.otlp.as_ref().map(|_| Tracer::new(spec.role.as_str(), spec.seed)),
        }
    }

    /// From now on, drops (as they reach a worker) the requests that have been queued for longer
    /// than `older_than` — a standing queue timeout, "drop queued work older than the callers'
    /// timeouts" done by hand, since the baseline has no `DeadlineLayer` to do it. Zero turns it
    /// off. Returns how many requests are queued now.
    pub fn flush(&self, older_than: Duration) -> u64 {
        self.queue_timeout_ms.store(older_than.as_millis() as u64, Ordering::Relaxed);
        self.stats.snapshot().queue_len
    }

    fn flushed(&self, queued_at: Instant) -> bool {
        let ms = self.queue_timeout_ms.load(Ordering::Relaxed);
        ms > 0 && queued_at.elapsed() > Duration::from_millis(ms)
    }

    /// Starts a fault now, for `length`.
    pub fn inject(&self, kind: FaultKind, length: Duration) {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(FaultState { kind, until: Instant::now() + length });
        if kind == FaultKind::Restart {
            self.cold_left.store(self.warmup, Ordering::Relaxed);
        }
    }

    fn current_fault(&self) -> Option<FaultState> {
        let f = *self.fault.lock().unwrap_or_else(|e| e.into_inner());
        f.filter(|f| Instant::now() < f.until)
    }

    fn service_time(&self, n: u64) -> Duration {
        let w = f64::from(self.workers);
        let over = ((n as f64 - 2.0 * w) / (4.0 * w)).clamp(0.0, 1.0);
        let mut factor = 1.0 + (THRASH - 1.0) * over;
        if matches!(self.current_fault(), Some(f) if f.kind == FaultKind::Slow) {
            factor *= SLOW;
        }
        let cold = self.cold_left.load(Ordering::Relaxed);
        if cold > 0 {
            self.cold_left.fetch_sub(1, Ordering::Relaxed);
            factor *= 1.0 + (COLD - 1.0) * cold as f64 / self.warmup.max(1) as f64;
        }
        self.service.mul_f64(factor)
    }

    /// One request's work: wait for a worker, then hold it for the service time. `deadline`
    /// (seawall only) drops the request if it expired while queued. `gone` says whether the
    /// caller left (the work is then wasted). Returns the answer and, when the work was done,
    /// how long it took (the busy time the answer cost; see [`super::stats::SERVICE_HEADER`]).
    async fn work(
        &self,
        deadline: Option<Instant>,
        gone: &AtomicBool,
    ) -> (StatusCode, Option<Duration>) {
        const UNAVAILABLE: (StatusCode, Option<Duration>) = (StatusCode::SERVICE_UNAVAILABLE, None);
        if let Some(f) = self.current_fault()
            && matches!(f.kind, FaultKind::Fail | FaultKind::Restart)
        {
            return UNAVAILABLE;
        }
        self.in_system.fetch_add(1, Ordering::Relaxed);
        let _leave = Leave(&self.in_system);
        let slot = QueueSlot::new(&self.stats);
        let queued_at = Instant::now();
        let Ok(_permit) = self.pool.acquire().await else {
            return UNAVAILABLE;
        };
        slot.done();
        if self.flushed(queued_at) {
            self.stats.doomed();
            return UNAVAILABLE;
        }
        if let Some(f) = self.current_fault()
            && f.kind == FaultKind::Hang
        {
            // A hung dependency holds its worker without serving (the simulator's `hold`
            // outage: no capacity), so this wait is not busy time.
            tokio::time::sleep_until(f.until).await;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            self.stats.doomed();
            return UNAVAILABLE;
        }
        let t = self.service_time(self.in_system.load(Ordering::Relaxed));
        // Busy from here, until the work ends or the caller cancels it (seawall drops the
        // handler, and with it this span).
        let busy = BusySpan::start(&self.stats);
        self.serve(t, &busy).await;
        self.stats.completed(gone.load(Ordering::Relaxed));
        (StatusCode::OK, Some(busy.elapsed()))
    }

    /// Holds the worker for `t`, as measured by `busy`. A tokio sleep ends on a 1 ms timer tick
    /// after it is due, and later still on a busy machine: slept as asked, a 40 ms service took
    /// 41.9 ms on average on a loaded 2-core machine, and the dependency served 5 % under the
    /// capacity it was given. So each sleep asks for `t` less the timer's recent lateness (a
    /// moving average over the last ~16 sleeps, never more than half of `t`), and the service
    /// times it reports ([`NodeStats::busy`]) average `t`.
    async fn serve(&self, t: Duration, busy: &BusySpan<'_>) {
        let late = self.timer_late_us.load(Ordering::Relaxed);
        let ask = sleep_for(t, late);
        tokio::time::sleep(ask).await;
        let observed = busy.elapsed().saturating_sub(ask);
        self.timer_late_us.store(next_lateness(late, observed), Ordering::Relaxed);
    }
}

/// What to ask the timer for, for a service of `t` when it has lately woken `late_us` late:
/// `t` less that, but at least half of `t`.
fn sleep_for(t: Duration, late_us: u64) -> Duration {
    t.saturating_sub(Duration::from_micros(late_us).min(t / 2))
}

/// The timer's lateness, a moving average (weight 1/16) of `late_us` and one more wake-up
/// `observed` late, microseconds.
fn next_lateness(late_us: u64, observed: Duration) -> u64 {
    let (old, now) = (late_us as i64, observed.as_micros().min(1 << 40) as i64);
    (old + (now - old) / 16).max(0) as u64
}

struct Leave<'a>(&'a AtomicU64);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Sets the flag when the handler is dropped before the work finished (the caller left).
struct GoneOnDrop(Arc<AtomicBool>);

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

async fn handle(State(dep): State<Arc<Dependency>>, headers: HeaderMap) -> Response {
    let span = dep.tracer.as_ref().map(|t| t.server(&headers));
    let end = |span: Option<SpanGuard>, status: StatusCode| {
        if let Some(mut s) = span
            && status.is_server_error()
        {
            s.fail(Some(status.as_u16()));
        }
    };
    let (status, busy) = match dep.stack {
        // Baseline: a server that finishes what it started, caller or not (what most
        // databases do): the work runs detached from the request, and its span ends with it.
        Stack::Baseline => {
            let gone = Arc::new(AtomicBool::new(false));
            let _guard = GoneOnDrop(gone.clone());
            let d = dep.clone();
            let job = tokio::spawn(async move {
                let r = d.work(None, &gone).await;
                end(span, r.0);
                r
            });
            job.await.unwrap_or((StatusCode::INTERNAL_SERVER_ERROR, None))
        }
        // Seawall: the handler is the work; a caller that leaves cancels it (and ends its
        // span), and the deadline the caller sent drops it if it expires in the queue.
        Stack::Seawall => {
            let deadline = super::tier::header_deadline(&headers).map(|d| Instant::now() + d);
            let r = dep.work(deadline, &AtomicBool::new(false)).await;
            end(span, r.0);
            r
        }
    };
    let mut out = status.into_response();
    if let Some(d) = busy {
        mark_service(out.headers_mut(), d);
    }
    out
}

/// `POST /admin/fault/{kind}/{ms}` (on the admin listener, behind the token): starts a fault.
fn fault(dep: &Dependency, kind: &str, ms: u64) -> StatusCode {
    let kind = match kind {
        "fail" => FaultKind::Fail,
        "hang" => FaultKind::Hang,
        "slow" => FaultKind::Slow,
        "restart" => FaultKind::Restart,
        _ => return StatusCode::BAD_REQUEST,
    };
    dep.inject(kind, Duration::from_millis(ms.min(3_600_000)));
    StatusCode::NO_CONTENT
}

async fn stats(State(dep): State<Arc<Dependency>>) -> String {
    let s = super::protect::merge(dep.stats.snapshot(), &dep.layers);
    serde_json::to_string(&s).unwrap_or_default()
}

async fn metrics(State(dep): State<Arc<Dependency>>) -> http::Response<String> {
    metrics_response(&dep.registry)
}

/// `POST /admin/flush?older_than_ms=N` (default 1000; 0 turns it off): see
/// [`Dependency::flush`].
fn flush(dep: &Dependency, uri: &Uri) -> String {
    let ms = uri
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("older_than_ms=")))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1000)
        .min(3_600_000);
    let queued = dep.flush(Duration::from_millis(ms));
    format!("{{\"flushed_older_than_ms\":{ms},\"queued\":{queued}}}")
}

/// The dependency's traffic routes: `GET /`, `GET /metrics` (the server layer's
/// `seawall_server_*`) and `GET /lab/stats`. The knobs and the fault injection are on
/// [`admin_router`].
pub fn router(dep: Arc<Dependency>) -> Router {
    let mut work = Router::new().route("/", get(handle));
    work = match dep.stack {
        // Admission at the worker count: the dependency never holds more than it can serve.
        Stack::Seawall => super::protect::protect(
            work,
            dep.workers as usize,
            &dep.layers,
            &dep.admission,
            &dep.stats,
        ),
        Stack::Baseline => super::protect::observe(work, &dep.layers, &dep.admission, &dep.stats),
    };
    work.route("/lab/stats", get(stats)).route("/metrics", get(metrics)).with_state(dep)
}

/// The dependency's admin routes, each behind `auth`: the admission knob at
/// [`admin::ADMISSION_PATH`], `POST` [`admin::FLUSH_PATH`]`?older_than_ms=N` and `POST`
/// [`admin::FAULT_PATH`]`/{kind}/{ms}` (the lab's own fault injection).
pub fn admin_router(dep: &Arc<Dependency>, auth: &AdminAuth) -> Router {
    let knob = dep.admission.clone();
    let r = admin::knob_route(Router::new(), admin::ADMISSION_PATH, auth, move |a, req| {
        admission_response(&knob, a, req)
    });
    let (dep, auth) = (dep.clone(), auth.clone());
    let (dep2, auth2) = (dep.clone(), auth.clone());
    r.route(
        admin::FLUSH_PATH,
        post(move |req: Request| async move {
            if auth.allows(&req) {
                flush(&dep, req.uri()).into_response()
            } else {
                admin::unauthorized()
            }
        }),
    )
    .route(
        &format!("{}/{{kind}}/{{ms}}", admin::FAULT_PATH),
        post(move |Path((kind, ms)): Path<(String, u64)>, req: Request| async move {
            if auth2.allows(&req) {
                fault(&dep2, &kind, ms).into_response()
            } else {
                admin::unauthorized()
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_sleeps_correct_for_a_late_timer() {
        let t = Duration::from_millis(40);
        // A timer that always wakes 1.9 ms late: the lateness learnt converges on it, and the
        // sleep asked plus that lateness is the service time.
        let mut late = 0;
        for _ in 0..200 {
            late = next_lateness(late, Duration::from_micros(1_900));
        }
        assert!((1_850..=1_900).contains(&late), "{late}");
        let took = sleep_for(t, late) + Duration::from_micros(1_900);
        assert!(took.abs_diff(t) < Duration::from_micros(60), "{took:?}");
        // A timer on time teaches it back down; a wild one never halves the service more.
        assert!(next_lateness(late, Duration::ZERO) < late);
        assert_eq!(sleep_for(t, 10_000_000), Duration::from_millis(20));
        assert_eq!(sleep_for(t, 0), t);
    }
}
