//! [`BreakerLayer`]: the breaker's settings, its operator override, and the services it makes.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use seawall::breaker::{Breaker, BreakerConfig, BreakerState};
use seawall::classify::HttpClassifier;
use seawall::control::Control;
use seawall::rng::SeedSource;
use seawall::time::{Clock, Instant, SystemClock};
use tower_layer::Layer;

use super::{BreakerMetrics, BreakerService, Shared};

/// An operator's override of a breaker ([`BreakerLayer::force`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Forced {
    /// Refuse every request.
    Open,
    /// Send every request, and record nothing.
    Closed,
}

/// Wraps a service in the circuit breaker of [`BreakerConfig`]. See the [module docs](super).
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

    /// The operator's switch (see the [module docs](super#the-operators-switch)).
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
