//! [`BreakerLayer`]: the core circuit breaker ([`seawall::breaker`]) as a tower layer.
//!
//! # Why a breaker, and when a retry budget is enough
//!
//! A retry budget and a breaker answer different questions. A **budget** (the policy's, rule 2)
//! bounds how much *extra* load a client adds: retries stay under ~10 % of traffic, so a sick
//! dependency sees at most 1.1× its normal load, and first attempts keep flowing — each one a
//! free health check, and the reason recovery is seen the moment it happens. Amazon's Builders'
//! Library ("Timeouts, retries and backoff with jitter") prefers exactly that, a local token
//! bucket, to breakers: modal behaviour is hard to test and can lengthen recovery.
//!
//! A **breaker** also stops the *first* attempts. Use one when even 1× the load hurts, or when
//! failing costs the caller too:
//!
//! - the dependency falls over under its normal load once degraded (cold caches after a restart,
//!   a database in failover) and needs silence to come back;
//! - each failure is slow (connect timeouts, a hung pool), so callers' threads and deadlines
//!   drain waiting for an answer that a breaker gives in nanoseconds;
//! - there is a fallback worth serving at once (a cache, a default) rather than an error later.
//!
//! Otherwise, a budget alone is the simpler, safer choice; the two combine (a `RetryLayer` with
//! its budget above a `BreakerLayer`). Configure one breaker per dependency: either this layer
//! or the policy's [`RetryPolicy::with_breaker`](seawall::policy::RetryPolicy::with_breaker),
//! not both.
//!
//! # What the layer does
//!
//! Each request asks the breaker first. Closed, it goes through (one atomic load); open, it is
//! refused at once with a [`BreakerOpen`] error, without touching the inner service; once the
//! open period (jittered) ends, the breaker is half-open and lets **at most `probes`** requests
//! through at a time (default 1) — everyone else is still refused, so the end of an open
//! period is never a herd. A probe that succeeds closes the breaker; one that fails re-opens it
//! for twice as long (up to the maximum). A request dropped before its answer (its caller went
//! away) gives its probe slot back without counting either way.
//!
//! What counts as a failure is what the retry layers call a dependency failure: transport
//! errors, 5xx answers but 501, 429 and the "overloaded" signal (gRPC: UNAVAILABLE,
//! RESOURCE_EXHAUSTED, …); 4xx answers are the caller's business and count as successes.
//!
//! A [`RetryLayer`](crate::client::RetryLayer) or [`FailFastLayer`](crate::client::FailFastLayer)
//! above reads a [`BreakerOpen`] as "overloaded; don't retry": put the breaker *below* the layer
//! that owns retries, so each attempt asks it and an open breaker ends the call at once.
//!
//! # The operator's switch
//!
//! [`with_control`](BreakerLayer::with_control) shares a [`Control`] with an admin endpoint
//! ([`admin_response`](crate::client::admin_response)) or a fleet-wide source: at 0 % the
//! breaker is **forced open** (every request refused, [`BreakerOpen::is_forced`]); at 100 %
//! (the default) the breaker decides alone; in between, only that share of requests is let on
//! to the breaker, so a dependency comes back from a forced open along the same 10 → 25 → 50 →
//! 100 % ramp as retries do. [`BreakerLayer::force`] overrides the breaker from the program
//! (an admin handler of your own): forced open, or forced closed — every request sent, nothing
//! recorded.
//!
//! ```
//! use seawall::breaker::BreakerConfig;
//! use seawall::control::Control;
//! use seawall_tower::client::{BreakerLayer, BreakerMetrics, RetryLayer};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let cfg = BreakerConfig::default().with_probes(2, Duration::from_secs(5)).unwrap();
//! let switch = Arc::new(Control::new());
//! let metrics = Arc::new(BreakerMetrics::new());
//! let layers = tower::ServiceBuilder::new()
//!     .layer(RetryLayer::new())
//!     .layer(BreakerLayer::new(cfg).with_control(switch.clone()).with_metrics(metrics.clone()));
//! # let _ = layers;
//! switch.disable(); // force open: nothing reaches the dependency
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use seawall::breaker::{Breaker, BreakerConfig, BreakerPermit, BreakerState};
use seawall::classify::HttpClassifier;
use seawall::control::Control;
use seawall::rng::{Rng, SeedSource};
use seawall::time::{Clock, Instant, SystemClock};
use tower_layer::Layer;
use tower_service::Service;

use crate::client::classify::{Protocol, RequestHeaders, classify_error, classify_response};
use crate::client::retry::BoxError;

/// An operator's override of a breaker ([`BreakerLayer::force`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Forced {
    /// Refuse every request.
    Open,
    /// Send every request, and record nothing.
    Closed,
}

/// The error of a request the breaker refused: it was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen {
    until: Option<Instant>,
}

impl BreakerOpen {
    /// When the breaker will next consider a probe (by the layer's clock); `None` when forced
    /// open by the operator.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Forced open by the operator ([`Control`] or [`BreakerLayer::force`]), not by failures.
    pub fn is_forced(&self) -> bool {
        self.until.is_none()
    }
}

impl fmt::Display for BreakerOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_forced() {
            f.write_str("circuit breaker forced open by its control; request not sent")
        } else {
            f.write_str("circuit breaker open; request not sent")
        }
    }
}

impl std::error::Error for BreakerOpen {}

type Labels = [(&'static str, &'static str); 1];

/// The breaker layer's Prometheus metrics; [`register`](Self::register) them, then hand them to
/// [`BreakerLayer::with_metrics`].
///
/// | metric (Prometheus name) | type | labels |
/// |---|---|---|
/// | `seawall_client_breaker_layer_opened_total` | counter | |
/// | `seawall_client_breaker_layer_rejected_total` | counter | `reason` (`open`, `forced`) |
/// | `seawall_client_breaker_layer_probes_total` | counter | |
/// | `seawall_client_breaker_layer_state` | gauge | 0 closed, 1 open, 2 half-open |
///
/// (The policy's own breaker reports `seawall_client_breaker_state` through
/// [`ClientMetrics`](crate::client::ClientMetrics).)
///
/// ```
/// use prometheus_client::registry::Registry;
/// use seawall_tower::client::{BreakerMetrics, metrics_text};
///
/// let mut registry = Registry::default();
/// BreakerMetrics::new().register(&mut registry);
/// assert!(metrics_text(&registry).contains("seawall_client_breaker_layer_opened_total 0"));
/// ```
#[derive(Debug)]
pub struct BreakerMetrics {
    opened: Counter,
    rejected_family: Family<Labels, Counter>,
    rejected_open: Counter,
    rejected_forced: Counter,
    probes: Counter,
    state: Gauge,
}

impl Default for BreakerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl BreakerMetrics {
    /// Fresh metrics, all zero.
    pub fn new() -> Self {
        let rejected_family = Family::<Labels, Counter>::default();
        let rejected_open = rejected_family.get_or_create(&[("reason", "open")]).clone();
        let rejected_forced = rejected_family.get_or_create(&[("reason", "forced")]).clone();
        BreakerMetrics {
            opened: Counter::default(),
            rejected_family,
            rejected_open,
            rejected_forced,
            probes: Counter::default(),
            state: Gauge::default(),
        }
    }

    /// Registers every metric in `registry` under the names in the table above.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("seawall_client_breaker_layer");
        r.register("opened", "Times the breaker opened", self.opened.clone());
        r.register("rejected", "Requests refused, by reason", self.rejected_family.clone());
        r.register("probes", "Half-open probes let through", self.probes.clone());
        r.register("state", "Breaker state: 0 closed, 1 open, 2 half-open", self.state.clone());
    }

    /// Times the breaker opened (a failed probe re-opening it included).
    pub fn opened(&self) -> u64 {
        self.opened.get()
    }

    /// Requests refused: by the breaker, and forced by the operator's switch.
    pub fn rejected(&self) -> (u64, u64) {
        (self.rejected_open.get(), self.rejected_forced.get())
    }

    /// Probes let through half-open.
    pub fn probes(&self) -> u64 {
        self.probes.get()
    }

    fn set_state(&self, s: BreakerState) {
        self.state.set(match s {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        });
    }
}

/// What every service a [`BreakerLayer`] makes shares: one breaker per layer.
#[derive(Debug)]
struct Shared<C> {
    breaker: Breaker,
    clock: C,
    control: Option<Arc<Control>>,
    metrics: Option<Arc<BreakerMetrics>>,
    classifier: HttpClassifier,
    seeds: SeedSource,
    /// Serialises recording a failure with reading the state around it, so each opening is
    /// counted once. Only failures take it.
    failing: Mutex<()>,
    /// A permit of a closed breaker, to tell probes from ordinary permits (the core's
    /// `BreakerPermit` says nothing else about itself).
    plain: BreakerPermit,
    /// [`Forced`] as a number: 0 none, 1 open, 2 closed.
    forced: AtomicU8,
}

impl<C: Clock> Shared<C> {
    fn draw(&self) -> f64 {
        self.seeds.stream().next_f64()
    }

    fn record(&self, permit: BreakerPermit, success: bool) {
        let now = self.clock.now();
        if success {
            self.breaker.record(now, permit, true);
            if permit != self.plain
                && let Some(m) = &self.metrics
            {
                m.set_state(self.breaker.state(now));
            }
            return;
        }
        let _g = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.breaker.state(now);
        self.breaker.record_with_draw(now, permit, false, self.draw());
        let after = self.breaker.state(now);
        if let Some(m) = &self.metrics {
            if after == BreakerState::Open && before != BreakerState::Open {
                m.opened.inc();
            }
            m.set_state(after);
        }
    }
}

/// Wraps a service in the circuit breaker of [`BreakerConfig`]. See the [module docs](self).
/// Clones, and every service the layer makes, share one breaker.
#[derive(Debug)]
pub struct BreakerLayer<C = SystemClock> {
    cfg: BreakerConfig,
    seed: Option<u64>,
    shared: Arc<Shared<C>>,
}

impl<C> Clone for BreakerLayer<C> {
    fn clone(&self) -> Self {
        BreakerLayer { cfg: self.cfg.clone(), seed: self.seed, shared: self.shared.clone() }
    }
}

impl Default for BreakerLayer {
    fn default() -> Self {
        Self::new(BreakerConfig::default())
    }
}

impl BreakerLayer {
    /// A closed breaker with `cfg` (the defaults and their sources: [`seawall::breaker`]).
    pub fn new(cfg: BreakerConfig) -> Self {
        BreakerLayer::build(cfg, None, SystemClock, None, None, HttpClassifier::default())
    }
}

impl<C: Clock + Clone> BreakerLayer<C> {
    fn build(
        cfg: BreakerConfig,
        seed: Option<u64>,
        clock: C,
        control: Option<Arc<Control>>,
        metrics: Option<Arc<BreakerMetrics>>,
        classifier: HttpClassifier,
    ) -> Self {
        let plain = Breaker::new(BreakerConfig::default()).admit(Instant::ZERO, 0.5);
        let shared = Arc::new(Shared {
            breaker: Breaker::new(cfg.clone()),
            clock,
            control,
            metrics,
            classifier,
            seeds: seed.map_or_else(SeedSource::from_entropy, SeedSource::new),
            failing: Mutex::new(()),
            forced: AtomicU8::new(0),
            plain: plain.expect("a new breaker is closed"),
        });
        BreakerLayer { cfg, seed, shared }
    }

    /// A fresh breaker with the same settings but for what `f` changes.
    fn rebuild<C2: Clock + Clone>(
        self,
        clock: C2,
        f: impl FnOnce(&mut Option<Arc<Control>>, &mut Option<Arc<BreakerMetrics>>, &mut HttpClassifier),
    ) -> BreakerLayer<C2> {
        let sh = &*self.shared;
        let (mut control, mut metrics, mut classifier) =
            (sh.control.clone(), sh.metrics.clone(), sh.classifier);
        f(&mut control, &mut metrics, &mut classifier);
        BreakerLayer::build(self.cfg, self.seed, clock, control, metrics, classifier)
    }

    fn with(
        self,
        f: impl FnOnce(&mut Option<Arc<Control>>, &mut Option<Arc<BreakerMetrics>>, &mut HttpClassifier),
    ) -> Self {
        let clock = self.shared.clock.clone();
        self.rebuild(clock, f)
    }

    /// Reads the time from `clock` (a [`ManualClock`](seawall::time::ManualClock) in tests,
    /// [`TokioClock`](crate::time::TokioClock) on a paused runtime). Each `with_*` starts a
    /// fresh, closed breaker: configure the layer before cloning it or making services.
    pub fn with_clock<C2: Clock + Clone>(self, clock: C2) -> BreakerLayer<C2> {
        self.rebuild(clock, |_, _, _| {})
    }

    /// The operator's switch (see the [module docs](self#the-operators-switch)).
    pub fn with_control(self, control: Arc<Control>) -> Self {
        self.with(|c, _, _| *c = Some(control))
    }

    /// Report into `metrics`.
    pub fn with_metrics(self, metrics: Arc<BreakerMetrics>) -> Self {
        self.with(|_, m, _| *m = Some(metrics))
    }

    /// Which HTTP statuses count as failures (default: [`HttpClassifier::default`]).
    pub fn with_classifier(self, classifier: HttpClassifier) -> Self {
        self.with(|_, _, c| *c = classifier)
    }

    /// A fixed seed for the open-period jitter and the switch's draws (default: from entropy,
    /// so a fleet's breakers do not reopen together).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self.with(|_, _, _| {})
    }

    /// Overrides the breaker for every service of this layer (and its clones) from the next
    /// request on, or (`None`) hands it back to its failures and its [`Control`]. Forced
    /// [`Open`](Forced::Open) refuses every request, as a [`Control`] at 0 % does; forced
    /// [`Closed`](Forced::Closed) sends every request, whatever the breaker and the control
    /// say, and records nothing — for when the breaker itself is wrong (a failure it counts
    /// that is not one), not to push traffic at a dependency that is down.
    pub fn force(&self, forced: Option<Forced>) {
        let v = match forced {
            None => 0,
            Some(Forced::Open) => 1,
            Some(Forced::Closed) => 2,
        };
        self.shared.forced.store(v, Ordering::Relaxed);
    }

    /// The breaker's state now.
    pub fn state(&self) -> BreakerState {
        self.shared.breaker.state(self.shared.clock.now())
    }
}

impl<S, C> Layer<S> for BreakerLayer<C> {
    type Service = BreakerService<S, C>;

    fn layer(&self, inner: S) -> BreakerService<S, C> {
        BreakerService { inner, shared: self.shared.clone() }
    }
}

/// The service [`BreakerLayer`] makes. Clones share the layer's breaker.
#[derive(Debug)]
pub struct BreakerService<S, C = SystemClock> {
    inner: S,
    shared: Arc<Shared<C>>,
}

impl<S: Clone, C> Clone for BreakerService<S, C> {
    fn clone(&self) -> Self {
        BreakerService { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

impl<S, B, RB, C> Service<Request<B>> for BreakerService<S, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    C: Clock,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = BreakerFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let sh = &self.shared;
        let protocol =
            |req: &Request<B>| RequestHeaders::scan(req.headers(), req.method()).protocol;
        match sh.forced.load(Ordering::Relaxed) {
            1 => {
                if let Some(m) = &sh.metrics {
                    m.rejected_forced.inc();
                }
                return BreakerFuture::refused(BreakerOpen { until: None });
            }
            2 => {
                let p = protocol(&req);
                let guard = Permit { shared: sh.clone(), permit: None };
                return BreakerFuture::running(self.inner.call(req), guard, p);
            }
            _ => {}
        }
        if let Some(c) = &sh.control
            && c.percent() < 100
            && !c.allows(sh.draw())
        {
            if let Some(m) = &sh.metrics {
                m.rejected_forced.inc();
            }
            return BreakerFuture::refused(BreakerOpen { until: None });
        }
        let now = sh.clock.now();
        match sh.breaker.admit(now, 0.5) {
            Err(refused) => {
                if let Some(m) = &sh.metrics {
                    m.rejected_open.inc();
                    m.set_state(sh.breaker.state(now));
                }
                BreakerFuture::refused(BreakerOpen { until: Some(refused.until) })
            }
            Ok(permit) => {
                if permit != sh.plain
                    && let Some(m) = &sh.metrics
                {
                    m.probes.inc();
                    m.set_state(BreakerState::HalfOpen);
                }
                let p = protocol(&req);
                let guard = Permit { shared: sh.clone(), permit: Some(permit) };
                BreakerFuture::running(self.inner.call(req), guard, p)
            }
        }
    }
}

/// A permit out of the breaker; dropped without a result, it is given back (a probe slot
/// freed, nothing counted).
struct Permit<C: Clock> {
    shared: Arc<Shared<C>>,
    permit: Option<BreakerPermit>,
}

impl<C: Clock> Drop for Permit<C> {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            self.shared.breaker.release(p);
        }
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, C: Clock> {
        Refused { err: Option<BreakerOpen> },
        Running { #[pin] fut: F, permit: Permit<C>, protocol: Protocol },
    }
}

pin_project! {
    /// The future [`BreakerService`] returns.
    pub struct BreakerFuture<F, C: Clock> {
        #[pin]
        kind: Kind<F, C>,
    }
}

impl<F, C: Clock> fmt::Debug for BreakerFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerFuture").finish_non_exhaustive()
    }
}

impl<F, C: Clock> BreakerFuture<F, C> {
    fn refused(err: BreakerOpen) -> Self {
        BreakerFuture { kind: Kind::Refused { err: Some(err) } }
    }

    fn running(fut: F, permit: Permit<C>, protocol: Protocol) -> Self {
        BreakerFuture { kind: Kind::Running { fut, permit, protocol } }
    }
}

impl<F, RB, E, C> Future for BreakerFuture<F, C>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
    C: Clock,
{
    type Output = Result<Response<RB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Refused { err } => Poll::Ready(Err(Box::new(
                err.take().expect("BreakerFuture polled after completion"),
            ))),
            KindProj::Running { fut, permit, protocol } => {
                let res = std::task::ready!(fut.poll(cx)).map_err(Into::into);
                // No permit: forced closed, nothing to record.
                let Some(p) = permit.permit.take() else { return Poll::Ready(res) };
                let sh = &permit.shared;
                let class = match &res {
                    Ok(resp) => {
                        classify_response(&sh.classifier, *protocol, resp, || sh.clock.wall_time())
                            .0
                    }
                    Err(e) => classify_error(&**e),
                };
                sh.record(p, !class.is_dependency_failure());
                Poll::Ready(res)
            }
        }
    }
}
