//! A circuit breaker whose half-open state is never a herd.
//!
//! After a threshold of failures the breaker stops calling the dependency for a while, fails
//! instantly, then lets a *bounded* number of probes through. A breaker that lets every waiting
//! caller through when the open period ends is the thundering herd with a delay — worse than no
//! breaker at all, because it produces regular synchronised waves.
//! So here:
//!
//! - the open period is jittered (±`open_jitter`), so a fleet's breakers do not reopen together;
//! - half-open admits at most `probes` concurrent calls (default 1); everyone else is refused;
//! - a probe that never reports back is released after `probe_timeout`, so a hung probe cannot
//!   wedge the breaker half-open forever;
//! - a failed probe re-opens the breaker for twice as long as last time, up to `max_open`.
//!
//! Amazon's Builders' Library notes the cost of breakers — modal behaviour that is hard to test
//! and can lengthen recovery — and prefers a local retry token bucket; so the retry policy runs
//! without a breaker unless one is configured.
//!
//! Defaults and sources: 5 consecutive failures (Envoy outlier detection's `consecutive_5xx`);
//! or a failure rate ≥ 50 % over 10 s with at least 20 calls (Hystrix's error threshold and
//! request volume); open for 5 s (Hystrix's sleep window) with ±20 % jitter, doubling to at most
//! 60 s; 1 probe, released after 10 s.
//!
//! ```
//! use seawall::breaker::{Breaker, BreakerConfig, BreakerState};
//! use seawall::time::Instant;
//! use std::time::Duration;
//!
//! let b = Breaker::new(BreakerConfig::default());
//! let t = Instant::ZERO;
//! for _ in 0..5 {
//!     let p = b.admit(t, 0.5).unwrap();
//!     b.record(t, p, false);
//! }
//! assert_eq!(b.state(t), BreakerState::Open);
//! assert!(b.admit(t, 0.5).is_err());
//! let later = t + Duration::from_secs(7);
//! let probe = b.admit(later, 0.5).unwrap();      // half-open: one probe
//! assert!(b.admit(later, 0.5).is_err());         // … and only one
//! b.record(later, probe, true);
//! assert_eq!(b.state(later), BreakerState::Closed);
//! ```

mod config;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::time::Instant;

pub use config::BreakerConfig;

/// The breaker's state, as reported to metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// Calls are refused until the open period ends.
    Open,
    /// A bounded number of probes are allowed.
    HalfOpen,
}

/// Permission to send one call through the breaker. Give it back with [`Breaker::record`] or
/// [`Breaker::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPermit {
    probe: Option<u32>,
}

/// A refusal: the breaker is open (or half-open with all probes out) until at least `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// When the breaker will next consider a probe.
    pub until: Instant,
}

const BUCKETS: usize = 10;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    index: u64,
    calls: u32,
    failures: u32,
}

#[derive(Debug)]
enum State {
    Closed,
    Open { until: Instant },
    HalfOpen { probes: Vec<(u32, Instant)> },
}

#[derive(Debug)]
struct Inner {
    state: State,
    consecutive: u32,
    buckets: [Bucket; BUCKETS],
    last_open: Duration,
    /// Probes are told apart by a number that wraps after 2^32 of them: a permit would have to
    /// be held across four billion probes to be taken for a newer one.
    next_probe_id: u32,
}

/// A circuit breaker. Thread-safe; the closed-state admit path is one atomic load.
#[derive(Debug)]
pub struct Breaker {
    cfg: BreakerConfig,
    closed: AtomicU8,
    inner: Mutex<Inner>,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(cfg: BreakerConfig) -> Self {
        Breaker {
            cfg,
            closed: AtomicU8::new(1),
            inner: Mutex::new(Inner {
                state: State::Closed,
                consecutive: 0,
                buckets: [Bucket::default(); BUCKETS],
                last_open: Duration::ZERO,
                next_probe_id: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave Inner inconsistent in a way that matters
        // more than refusing service forever would; recover the guard.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state at `now`.
    pub fn state(&self, now: Instant) -> BreakerState {
        match &self.lock().state {
            State::Closed => BreakerState::Closed,
            State::Open { until } if now < *until => BreakerState::Open,
            State::Open { .. } | State::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// May a call be sent at `now`? `draw` is unused today and reserved for probabilistic
    /// half-open admission.
    pub fn admit(&self, now: Instant, _draw: f64) -> Result<BreakerPermit, Refused> {
        if self.closed.load(Ordering::Acquire) == 1 {
            return Ok(BreakerPermit { probe: None });
        }
        let mut g = self.lock();
        let inner = &mut *g;
        if let State::Open { until } = inner.state {
            if now < until {
                return Err(Refused { until });
            }
            inner.state = State::HalfOpen { probes: Vec::new() };
        }
        match &mut inner.state {
            State::Closed => Ok(BreakerPermit { probe: None }),
            State::Open { .. } => unreachable!("handled above"),
            State::HalfOpen { probes } => {
                let timeout = self.cfg.probe_timeout;
                probes.retain(|&(_, started)| now.saturating_duration_since(started) < timeout);
                if probes.len() >= self.cfg.probes.get() as usize {
                    let oldest = probes.iter().map(|p| p.1).min().unwrap_or(now);
                    return Err(Refused { until: oldest + timeout });
                }
                let id = inner.next_probe_id;
                inner.next_probe_id = inner.next_probe_id.wrapping_add(1);
                probes.push((id, now));
                Ok(BreakerPermit { probe: Some(id) })
            }
        }
    }

    /// Records the result of a call admitted with `permit`. `draw` jitters the next open period.
    pub fn record(&self, now: Instant, permit: BreakerPermit, success: bool) {
        self.record_with_draw(now, permit, success, 0.5)
    }

    /// [`Breaker::record`] with an explicit uniform draw in `[0, 1)` for the open-period jitter.
    pub fn record_with_draw(&self, now: Instant, permit: BreakerPermit, success: bool, draw: f64) {
        let mut g = self.lock();
        let inner = &mut *g;
        if let Some(id) = permit.probe {
            let State::HalfOpen { probes } = &mut inner.state else {
                return; // a stale probe from an earlier half-open period
            };
            let Some(pos) = probes.iter().position(|p| p.0 == id) else { return };
            probes.swap_remove(pos);
            if success {
                self.close(inner);
            } else {
                let next = (inner.last_open * 2).clamp(self.cfg.open_for, self.cfg.max_open);
                self.open(inner, now, next, draw);
            }
            return;
        }
        if !matches!(inner.state, State::Closed) {
            return; // a call admitted before the breaker opened
        }
        let bucket_len = (self.cfg.window / BUCKETS as u32).max(Duration::from_nanos(1));
        let index = now.as_nanos() / bucket_len.as_nanos() as u64;
        let b = &mut inner.buckets[(index % BUCKETS as u64) as usize];
        if b.index != index {
            *b = Bucket { index, calls: 0, failures: 0 };
        }
        b.calls += 1;
        if success {
            inner.consecutive = 0;
            return;
        }
        b.failures += 1;
        inner.consecutive += 1;
        let oldest = index.saturating_sub(BUCKETS as u64 - 1);
        let (calls, failures) = inner
            .buckets
            .iter()
            .filter(|b| b.index >= oldest && b.index <= index)
            .fold((0u32, 0u32), |(c, f), b| (c + b.calls, f + b.failures));
        let by_count =
            self.cfg.consecutive_failures > 0 && inner.consecutive >= self.cfg.consecutive_failures;
        let by_rate = calls >= self.cfg.min_calls.max(1)
            && f64::from(failures) >= self.cfg.failure_rate * f64::from(calls);
        if by_count || by_rate {
            self.open(inner, now, self.cfg.open_for, draw);
        }
    }

    /// Gives back a permit whose call was abandoned without a result.
    pub fn release(&self, permit: BreakerPermit) {
        if let Some(id) = permit.probe
            && let State::HalfOpen { probes } = &mut self.lock().state
        {
            probes.retain(|p| p.0 != id);
        }
    }

    fn open(&self, inner: &mut Inner, now: Instant, base: Duration, draw: f64) {
        let j = self.cfg.open_jitter;
        let d = base.mul_f64(1.0 - j + 2.0 * j * draw.clamp(0.0, 1.0));
        inner.last_open = base;
        inner.state = State::Open { until: now + d };
        inner.consecutive = 0;
        inner.buckets = [Bucket::default(); BUCKETS];
        self.closed.store(0, Ordering::Release);
    }

    fn close(&self, inner: &mut Inner) {
        inner.state = State::Closed;
        inner.last_open = Duration::ZERO;
        inner.consecutive = 0;
        self.closed.store(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
