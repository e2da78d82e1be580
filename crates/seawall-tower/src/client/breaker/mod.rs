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

// Its own file, below `classify` (which recognises the error) as well as this module (which
// uses `classify`): the error alone is what both sides share.
pub(in crate::client) mod future;
mod layer;
mod metrics;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Request, Response};
use seawall::breaker::{Breaker, BreakerPermit, BreakerState};
use seawall::classify::HttpClassifier;
use seawall::control::Control;
use seawall::rng::{Rng, SeedSource};
use seawall::time::{Clock, SystemClock};
use tower_service::Service;

pub use crate::client::engine::breaker_open::BreakerOpen;
pub use future::BreakerFuture;
pub use layer::{BreakerLayer, Forced};
pub use metrics::BreakerMetrics;

use crate::client::engine::classify::RequestHeaders;
use crate::client::engine::error::BoxError;

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
