//! [`ShedLayer`]: admission control that rejects early and cheaply.
//!
//! # Why shed, and why at the door
//!
//! A server past its capacity that accepts everything serves everyone late: queues grow, every
//! response arrives after its caller gave up, throughput stays high and goodput falls to zero —
//! and the callers' retries make it worse. A server that refuses the excess at once keeps serving
//! the rest in time. So this layer caps the requests in the handler, lets a short queue absorb
//! bursts, and answers everything else **before any work** with `503 Service Unavailable` and a
//! jittered `Retry-After` (gRPC: `UNAVAILABLE`).
//!
//! The reject path must be cheap, or rejecting becomes its own overload (Bronson et al. list slow
//! error handling as a sustaining effect): it takes one short uncontended lock, builds a
//! response from pre-built header values and a static problem body
//! ([`crate::server::problem`]: no allocation), and logs nothing.
//!
//! Every decision — the cap, the queue and its discipline (FIFO when healthy; CoDel + adaptive
//! LIFO under standing delay; first attempts before retries, which queued first attempts evict),
//! the limit ([`GradientConfig`]), the operator's knob and the jittered `Retry-After` — is the
//! core's [`seawall::admission`]; the simulator runs the same type. This layer is the adapter: it
//! reads the attempt number and deadline off the request, keeps the state behind a short mutex,
//! wakes queued requests over a channel, and turns a [`Rejection`] into a response. A request
//! carrying a [`Dispatch`] (the `IdempotencyLayer` adds one) is marked
//! queued while it waits and admitted when its handler is called, so an outer layer that cuts it
//! in the queue knows the handler never ran.
//!
//! ```
//! use seawall_tower::server::ShedLayer;
//! use std::num::NonZeroUsize;
//!
//! // 32 requests in the handler at most, 16 waiting; the rest get 503 + Retry-After at once.
//! let shed = ShedLayer::new(NonZeroUsize::new(32).unwrap());
//! # let _ = shed;
//! ```

mod caller;
mod future;
mod layer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Request, Response, StatusCode, header};
use seawall::admission::{Admission, Class, Config, Offer, Reason, Rejection, RetryAfter, cut_by};
use seawall::control::Control;
use seawall::rng::{Rng, SeedSource, splitmix64};
use seawall::time::{Clock, Instant};
use tokio::sync::oneshot;
use tower_service::Service;

pub use caller::{CallerKey, UNKNOWN_CALLER};
pub use future::ResponseFuture;
pub use layer::ShedLayer;
pub use seawall::admission::{
    CodelConfig, DEFAULT_INTERVAL, DEFAULT_RETRY_AFTER_SECS, DEFAULT_TARGET, GradientConfig,
};

use crate::server::metrics::{RejectReason, ServerMetrics};
use crate::server::{Dispatch, problem, response};
use crate::wire;

/// The metrics' name for a core [`Reason`].
fn reject_reason(r: Reason) -> RejectReason {
    match r {
        Reason::CodelDrop => RejectReason::CodelDrop,
        Reason::DeadlineExpired => RejectReason::DeadlineExpired,
        Reason::RetryShed => RejectReason::RetryShed,
        Reason::AdmissionCut => RejectReason::AdmissionCut,
        // QueueFull, and any reason a newer core adds.
        _ => RejectReason::QueueFull,
    }
}

/// The layer's lock-free random stream: draw `n` is SplitMix64 of the seed and `n`.
struct Draws<'a> {
    seed: u64,
    counter: &'a AtomicU64,
}

impl Rng for Draws<'_> {
    fn next_u64(&mut self) -> u64 {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        splitmix64(self.seed ^ n.rotate_left(17))
    }
}

/// What a queued request is told when its turn comes.
#[derive(Debug)]
enum Grant {
    Run,
    Shed(Reason),
}

/// State shared by every service one [`ShedLayer`] makes.
#[derive(Debug)]
struct Shared<C> {
    adm: Mutex<Admission<oneshot::Sender<Grant>>>,
    clock: C,
    metrics: ServerMetrics,
    retry_after: RetryAfter,
    /// `Retry-After` values for every second of the range, pre-built.
    retry_after_values: Box<[HeaderValue]>,
    seed: u64,
    draws: AtomicU64,
    admission: Option<Arc<Control>>,
    callers: Option<CallerKey>,
}

impl<C: Clock> Shared<C> {
    fn new(
        cfg: Config,
        clock: C,
        metrics: ServerMetrics,
        retry_after: RetryAfter,
        seed: Option<u64>,
        admission: Option<Arc<Control>>,
        callers: Option<CallerKey>,
    ) -> Self {
        let seed = seed.unwrap_or_else(|| SeedSource::from_entropy().stream().next_u64());
        let (lo, hi) = retry_after.range();
        Shared {
            adm: Mutex::new(Admission::new(cfg)),
            clock,
            metrics,
            retry_after,
            retry_after_values: (lo..=hi).map(HeaderValue::from).collect(),
            seed,
            draws: AtomicU64::new(0),
            admission,
            callers,
        }
    }

    /// The layer's seeded random stream (lock-free).
    fn rng(&self) -> Draws<'_> {
        Draws { seed: self.seed, counter: &self.draws }
    }

    /// Whether the operator's admission knob turns this request away. One atomic load when the
    /// knob is at 100 % (or absent).
    fn cut(&self) -> bool {
        self.admission.as_deref().is_some_and(|k| cut_by(k, &mut self.rng()))
    }

    fn lock(&self) -> MutexGuard<'_, Admission<oneshot::Sender<Grant>>> {
        // A panic while holding this lock can only come from a bug in this module; the state is
        // still consistent counters and queues, so keep serving rather than poison every request.
        self.adm.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn gauges(&self, adm: &Admission<oneshot::Sender<Grant>>, now: Instant) {
        self.metrics.set_gauges(adm.in_flight(), adm.queue_len(), adm.oldest_age(now), now);
    }

    /// Grants freed slots to queued requests; called with the lock held.
    fn dispatch(&self, adm: &mut Admission<oneshot::Sender<Grant>>, now: Instant) {
        let metrics = &self.metrics;
        while let Some(tx) = adm.next(now, |tx, reason| {
            metrics.reject(reject_reason(reason));
            let _ = tx.send(Grant::Shed(reason));
        }) {
            if tx.send(Grant::Run).is_err() {
                // The waiter went away between queueing and its turn: give the slot on.
                adm.finish(None);
            }
        }
        self.gauges(adm, now);
    }

    /// A running request finished (`rtt`: its handler latency, if it succeeded).
    fn release(&self, rtt: Option<Duration>) {
        let now = self.clock.now();
        let mut adm = self.lock();
        adm.finish(rtt);
        self.dispatch(&mut adm, now);
    }

    /// The cheap rejection: the core's [`Rejection`] as a static problem body with a
    /// pre-built `Retry-After`, no logging.
    fn reject<B: From<&'static str>>(&self, reason: Reason, grpc: bool) -> Response<B> {
        match Rejection::of(reason, &self.retry_after, &mut self.rng()) {
            Rejection::DeadlineExceeded => {
                response::refuse(StatusCode::GATEWAY_TIMEOUT, grpc, "4", problem::DEADLINE)
            }
            Rejection::Unavailable { retry_after_secs } => {
                let mut res = response::refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    grpc,
                    "14",
                    problem::OVERLOADED,
                );
                let i = usize::from(retry_after_secs - self.retry_after.range().0);
                if let Some(v) = self.retry_after_values.get(i) {
                    res.headers_mut().insert(header::RETRY_AFTER, v.clone());
                }
                res
            }
        }
    }
}

/// The request's attempt number: `Request-Attempt`, or `grpc-previous-rpc-attempts` + 1.
/// Malformed values count as absent (a first attempt), as [`wire::parse_attempt`] documents.
fn attempt_of(headers: &http::HeaderMap) -> u32 {
    headers
        .get(wire::REQUEST_ATTEMPT)
        .and_then(|v| wire::parse_attempt(v.as_bytes()))
        .or_else(|| {
            headers
                .get(wire::GRPC_PREVIOUS_RPC_ATTEMPTS)
                .and_then(|v| wire::parse_grpc_previous_attempts(v.as_bytes()))
        })
        .map_or(1, |n| n.get())
}

/// The service [`ShedLayer`] makes.
pub struct Shed<S, C> {
    inner: S,
    shared: Arc<Shared<C>>,
}

impl<S: std::fmt::Debug, C: std::fmt::Debug> std::fmt::Debug for Shed<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shed").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S: Clone, C> Clone for Shed<S, C> {
    fn clone(&self) -> Self {
        Shed { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

impl<S, C, ReqB, ResB> Service<Request<ReqB>> for Shed<S, C>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    ResB: From<&'static str>,
    C: Clock,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqB, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let attempt = attempt_of(req.headers());
        let class = Class::of_attempt(attempt);
        self.shared.metrics.arrival(attempt);
        if let Some(key) = &self.shared.callers {
            self.shared.metrics.caller(&key.caller(req.headers(), req.extensions()));
        }
        let grpc = response::is_grpc(req.headers());
        if self.shared.cut() {
            self.shared.metrics.reject(RejectReason::AdmissionCut);
            return ResponseFuture::rejected(self.shared.reject(Reason::AdmissionCut, grpc));
        }
        let now = self.shared.clock.now();
        // As an instant of this layer's clock (the time left, if it was made on another).
        let deadline = req
            .extensions()
            .get::<wire::RequestDeadline>()
            .map(|d| d.for_clock(&self.shared.clock, now).instant());
        let mut rx = None;
        let offer = {
            let mut adm = self.shared.lock();
            let offer = adm.offer(now, class, deadline, || {
                let (tx, r) = oneshot::channel();
                rx = Some(r);
                tx
            });
            if !matches!(offer, Offer::Reject(_)) {
                self.shared.gauges(&adm, now);
            }
            offer
        };
        match offer {
            Offer::Run => {
                let fut = self.inner.call(req);
                ResponseFuture::running(fut, self.shared.clone(), now, deadline)
            }
            Offer::Queued { ticket, evicted } => {
                if let Some(d) = req.extensions().get::<Dispatch>() {
                    d.queued();
                }
                if let Some(tx) = evicted {
                    self.shared.metrics.reject(RejectReason::RetryShed);
                    let _ = tx.send(Grant::Shed(Reason::RetryShed));
                }
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::waiting(
                    self.shared.clone(),
                    ticket,
                    rx,
                    req,
                    ready,
                    now,
                    deadline,
                    grpc,
                )
            }
            Offer::Reject(reason) => {
                self.shared.metrics.reject(reject_reason(reason));
                ResponseFuture::rejected(self.shared.reject(reason, grpc))
            }
        }
    }
}
