//! [`ShedLayer`]: configuration, validated when built, with documented defaults.

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;

use seawall::admission::{self, CodelConfig, GradientConfig, Limit, RetryAfter};
use seawall::control::Control;
use seawall::time::{Clock, SystemClock};
use tower_layer::Layer;

use super::caller::CallerKey;
use super::{Shared, Shed};
use crate::server::metrics::ServerMetrics;

#[derive(Debug, Clone)]
struct Config {
    queue: admission::Config,
    retry_after: RetryAfter,
    seed: Option<u64>,
    admission: Option<Arc<Control>>,
    callers: Option<CallerKey>,
}

/// Admission control: caps in-flight requests, queues a few, rejects the rest with 503.
///
/// All services made by one `ShedLayer` (for example one per axum route) share one limit and one
/// queue. See the [module docs](super) for the why.
pub struct ShedLayer<C = SystemClock> {
    cfg: Config,
    clock: C,
    metrics: ServerMetrics,
    shared: Arc<Shared<C>>,
}

impl<C: fmt::Debug> fmt::Debug for ShedLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer").field("cfg", &self.cfg).field("clock", &self.clock).finish()
    }
}

impl<C: Clone> Clone for ShedLayer<C> {
    fn clone(&self) -> Self {
        ShedLayer {
            cfg: self.cfg.clone(),
            clock: self.clock.clone(),
            metrics: self.metrics.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl ShedLayer<SystemClock> {
    /// At most `max_in_flight` requests in the handler at once; a queue of half that (Google SRE
    /// book, "Handling Overload": queues of at most ~50 % of the thread pool for steady traffic).
    pub fn new(max_in_flight: NonZeroUsize) -> Self {
        let queue = (max_in_flight.get() / 2).max(1);
        Self::build(Limit::fixed(max_in_flight), queue)
    }

    /// An adaptive in-flight limit (gradient, as Netflix Gradient2 and Envoy's adaptive
    /// concurrency filter), with a queue of half its starting value.
    pub fn adaptive(cfg: GradientConfig) -> Self {
        let queue = (cfg.initial / 2).max(1);
        Self::build(Limit::gradient(cfg), queue)
    }

    fn build(limit: Limit, max_queue: usize) -> Self {
        let cfg = Config {
            queue: admission::Config::new(limit, max_queue),
            retry_after: RetryAfter::default(),
            seed: None,
            admission: None,
            callers: None,
        };
        ShedLayer::from_parts(cfg, SystemClock, ServerMetrics::new())
    }
}

impl<C: Clock + Clone> ShedLayer<C> {
    fn from_parts(cfg: Config, clock: C, metrics: ServerMetrics) -> Self {
        let shared = Arc::new(Shared::new(
            cfg.queue.clone(),
            clock.clone(),
            metrics.clone(),
            cfg.retry_after,
            cfg.seed,
            cfg.admission.clone(),
            cfg.callers.clone(),
        ));
        ShedLayer { cfg, clock, metrics, shared }
    }

    fn with(self, f: impl FnOnce(&mut Config)) -> Self {
        let mut cfg = self.cfg;
        f(&mut cfg);
        Self::from_parts(cfg, self.clock, self.metrics)
    }

    /// How many requests may wait for a slot (0: no queue, reject as soon as the cap is hit).
    pub fn with_queue(self, max_queue: usize) -> Self {
        self.with(|c| c.queue.max_queue = max_queue)
    }

    /// CoDel parameters (default: target 5 ms, interval 100 ms, as folly).
    pub fn with_codel(self, codel: CodelConfig) -> Self {
        self.with(|c| c.queue.codel = codel)
    }

    /// Serve newest-first while CoDel sees a standing queue (default on; off = always FIFO).
    pub fn with_adaptive_lifo(self, on: bool) -> Self {
        self.with(|c| c.queue.lifo = on)
    }

    /// The range of whole seconds the jittered `Retry-After` is drawn from (default 1–5 s). An
    /// inverted range is swapped; zero is raised to one.
    pub fn with_retry_after_secs(self, min: u16, max: u16) -> Self {
        self.with(|c| c.retry_after = RetryAfter::secs(min, max))
    }

    /// A fixed seed for the `Retry-After` jitter (default: from entropy, so replicas differ).
    pub fn with_seed(self, seed: u64) -> Self {
        self.with(|c| c.seed = Some(seed))
    }

    /// An operator's admission knob: the percentage of new requests let in at all (default:
    /// none, i.e. 100 %). Below 100 %, each request is turned away at the door with that
    /// probability — 503 + jittered `Retry-After`, reason
    /// [`RejectReason::AdmissionCut`](crate::server::RejectReason::AdmissionCut) — before it
    /// costs anything (the decision is [`seawall::admission::cut_by`]). The first step out of a
    /// metastable state is to cut load hard at the edge, then ramp back 10 → 25 → 50 → 100 %
    /// (Bronson et al., HotOS 2021: the loop only breaks once load falls). Share the [`Control`] with
    /// [`admission_response`](crate::server::admission_response) (an admin endpoint) or with
    /// `seawall escape`, which drives it with `POST ?percent=N`; its ramp is the same one the
    /// retry switch uses.
    pub fn with_admission(self, knob: Arc<Control>) -> Self {
        self.with(|c| c.admission = Some(knob))
    }

    /// Count each request's caller, named by `key`, in the metrics' table of heaviest callers
    /// (`seawall_server_caller_arrivals_total{caller}`, at most
    /// [`DEFAULT_CALLERS`](seawall::metrics::top::DEFAULT_CALLERS) callers: see
    /// [`TopCallers`](seawall::metrics::top::TopCallers)). Default: off, the table stays empty.
    /// Every request is counted by attempt number either way
    /// (`seawall_server_arrivals_total{attempt}`).
    pub fn with_callers(self, key: CallerKey) -> Self {
        self.with(|c| c.callers = Some(key))
    }

    /// Report into `metrics` (default: a private, unread set).
    pub fn with_metrics(self, metrics: ServerMetrics) -> Self {
        Self::from_parts(self.cfg, self.clock, metrics)
    }

    /// Drive admission from another clock (tests). A deadline in the request extensions made
    /// on another clock is read as its time left ([`RequestDeadline::for_clock`](crate::wire::RequestDeadline::for_clock)).
    pub fn with_clock<C2: Clock + Clone>(self, clock: C2) -> ShedLayer<C2> {
        ShedLayer::from_parts(self.cfg, clock, self.metrics)
    }
}

impl<S, C> Layer<S> for ShedLayer<C> {
    type Service = Shed<S, C>;

    fn layer(&self, inner: S) -> Shed<S, C> {
        Shed { inner, shared: self.shared.clone() }
    }
}
