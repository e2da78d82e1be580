//! A circuit breaker whose half-open state is never a herd.
//!
//! After a threshold of failures the breaker stops calling the dependency for a while, fails
//! instantly, then lets a *bounded* number of probes through. Seed 001 warns about breakers that
//! let every waiting caller through when the open period ends: "that's just the thundering herd
//! with a delay … worse than no breaker at all because it produces regular synchronised waves".
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

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::error::{ConfigError, check_f64};
use crate::time::Instant;

/// Breaker settings. Build with [`BreakerConfig::default`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerConfig {
    consecutive_failures: u32,
    failure_rate: f64,
    window: Duration,
    min_calls: u32,
    open_for: Duration,
    max_open: Duration,
    open_jitter: f64,
    probes: NonZeroU32,
    probe_timeout: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            consecutive_failures: 5,
            failure_rate: 0.5,
            window: Duration::from_secs(10),
            min_calls: 20,
            open_for: Duration::from_secs(5),
            max_open: Duration::from_secs(60),
            open_jitter: 0.2,
            probes: NonZeroU32::MIN,
            probe_timeout: Duration::from_secs(10),
        }
    }
}

impl BreakerConfig {
    /// Open after this many consecutive failures (0 disables the rule; at most 10,000).
    pub fn with_consecutive_failures(mut self, n: u32) -> Result<Self, ConfigError> {
        if n > 10_000 {
            return Err(ConfigError::new("breaker.consecutive_failures", "in [0, 10000]", n));
        }
        self.consecutive_failures = n;
        Ok(self)
    }

    /// Open when the failure rate over `window` (1 s to 1 h) is at least `rate` (in (0, 1];
    /// 1.0 with `min_calls` 0 effectively disables it … use a rate of 1.0) once there were at
    /// least `min_calls` calls.
    pub fn with_failure_rate(
        mut self,
        rate: f64,
        window: Duration,
        min_calls: u32,
    ) -> Result<Self, ConfigError> {
        self.failure_rate =
            check_f64("breaker.failure_rate", "in (0, 1]", rate, f64::MIN_POSITIVE, 1.0)?;
        if window < Duration::from_secs(1) || window > Duration::from_secs(3600) {
            return Err(ConfigError::new("breaker.window", "in [1 s, 1 h]", format!("{window:?}")));
        }
        self.window = window;
        self.min_calls = min_calls;
        Ok(self)
    }

    /// The first open period (1 ms to 1 h), its maximum after doublings, and the jitter (in
    /// [0, 1)).
    pub fn with_open(
        mut self,
        open_for: Duration,
        max_open: Duration,
        jitter: f64,
    ) -> Result<Self, ConfigError> {
        let ok = |d: Duration| d >= Duration::from_millis(1) && d <= Duration::from_secs(3600);
        if !ok(open_for) {
            return Err(ConfigError::new(
                "breaker.open_for",
                "in [1 ms, 1 h]",
                format!("{open_for:?}"),
            ));
        }
        if !ok(max_open) || max_open < open_for {
            return Err(ConfigError::new(
                "breaker.max_open",
                "in [open_for, 1 h]",
                format!("{max_open:?}"),
            ));
        }
        self.open_jitter = check_f64("breaker.open_jitter", "in [0, 1)", jitter, 0.0, 0.999)?;
        self.open_for = open_for;
        self.max_open = max_open;
        Ok(self)
    }

    /// Concurrent probes allowed half-open (1 to 1,000), and how long before a probe that never
    /// reported is released (1 ms to 1 h).
    pub fn with_probes(
        mut self,
        probes: u32,
        probe_timeout: Duration,
    ) -> Result<Self, ConfigError> {
        self.probes = NonZeroU32::new(probes)
            .filter(|p| p.get() <= 1000)
            .ok_or_else(|| ConfigError::new("breaker.probes", "in [1, 1000]", probes))?;
        if probe_timeout < Duration::from_millis(1) || probe_timeout > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "breaker.probe_timeout",
                "in [1 ms, 1 h]",
                format!("{probe_timeout:?}"),
            ));
        }
        self.probe_timeout = probe_timeout;
        Ok(self)
    }
}

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
    probe: Option<u64>,
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
    HalfOpen { probes: Vec<(u64, Instant)> },
}

#[derive(Debug)]
struct Inner {
    state: State,
    consecutive: u32,
    buckets: [Bucket; BUCKETS],
    last_open: Duration,
    next_probe_id: u64,
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
                inner.next_probe_id += 1;
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
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;

    fn trip(b: &Breaker, t: Instant) {
        for _ in 0..5 {
            let p = b.admit(t, 0.5).unwrap();
            b.record(t, p, false);
        }
    }

    #[test]
    fn failure_rate_opens() {
        let cfg = BreakerConfig::default().with_consecutive_failures(0).unwrap();
        let b = Breaker::new(cfg);
        let t = Instant::ZERO;
        for i in 0..19 {
            let p = b.admit(t, 0.5).unwrap();
            b.record(t, p, i % 2 == 0);
        }
        assert_eq!(b.state(t), BreakerState::Closed, "below min_calls");
        let p = b.admit(t, 0.5).unwrap();
        b.record(t, p, false);
        assert_eq!(b.state(t), BreakerState::Open, "20 calls, 10 failures = 50 %");
    }

    #[test]
    fn old_failures_leave_the_window() {
        let cfg = BreakerConfig::default().with_consecutive_failures(0).unwrap();
        let b = Breaker::new(cfg);
        for i in 0..19u64 {
            let t = Instant::ZERO + Duration::from_secs(i * 2);
            let p = b.admit(t, 0.5).unwrap();
            b.record(t, p, false);
        }
        assert_eq!(b.state(Instant::ZERO + Duration::from_secs(40)), BreakerState::Closed);
    }

    #[test]
    fn failed_probe_reopens_longer_and_jittered() {
        let b = Breaker::new(BreakerConfig::default());
        let t0 = Instant::ZERO;
        trip(&b, t0);
        // draw 0.5 → exactly the base: 5 s
        assert!(b.admit(t0 + Duration::from_millis(4999), 0.5).is_err());
        let t1 = t0 + Duration::from_secs(5);
        let p = b.admit(t1, 0.5).unwrap();
        b.record(t1, p, false);
        assert!(
            b.admit(t1 + Duration::from_millis(9999), 0.5).is_err(),
            "second open period is 10 s"
        );
        assert!(b.admit(t1 + Duration::from_secs(10), 0.5).is_ok());
    }

    #[test]
    fn jitter_spreads_open_period() {
        let b = Breaker::new(BreakerConfig::default());
        let t = Instant::ZERO;
        for _ in 0..4 {
            let p = b.admit(t, 0.5).unwrap();
            b.record(t, p, false);
        }
        let p = b.admit(t, 0.5).unwrap();
        b.record_with_draw(t, p, false, 0.0);
        assert!(b.admit(t + Duration::from_secs(4), 0.5).is_ok(), "draw 0 → 0.8 × 5 s");
    }

    #[test]
    fn hung_probe_is_released() {
        let b = Breaker::new(BreakerConfig::default());
        trip(&b, Instant::ZERO);
        let t = Instant::ZERO + Duration::from_secs(6);
        let _hung = b.admit(t, 0.5).unwrap();
        assert!(b.admit(t + Duration::from_secs(9), 0.5).is_err());
        assert!(b.admit(t + Duration::from_secs(10), 0.5).is_ok());
    }

    #[test]
    fn rejects_bad_config() {
        assert!(BreakerConfig::default().with_probes(0, Duration::from_secs(1)).is_err());
        assert!(
            BreakerConfig::default().with_failure_rate(1.5, Duration::from_secs(10), 1).is_err()
        );
        assert!(
            BreakerConfig::default()
                .with_open(Duration::from_secs(10), Duration::from_secs(5), 0.1)
                .is_err()
        );
        assert!(
            BreakerConfig::default()
                .with_open(Duration::from_secs(1), Duration::from_secs(5), 1.0)
                .is_err()
        );
    }

    /// Many threads race for the half-open slots; never more than `probes` are out at once.
    #[test]
    fn half_open_admits_at_most_probes_concurrently() {
        for probes in [1u32, 3] {
            let cfg =
                BreakerConfig::default().with_probes(probes, Duration::from_secs(3600)).unwrap();
            let b = Arc::new(Breaker::new(cfg));
            trip(&b, Instant::ZERO);
            let t = Instant::ZERO + Duration::from_secs(10);
            let out = Arc::new(AtomicU32::new(0));
            let peak = Arc::new(AtomicU32::new(0));
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let (b, out, peak) = (b.clone(), out.clone(), peak.clone());
                    std::thread::spawn(move || {
                        for i in 0..2000u32 {
                            if let Ok(p) = b.admit(t, 0.5) {
                                let n = out.fetch_add(1, Ordering::SeqCst) + 1;
                                peak.fetch_max(n, Ordering::SeqCst);
                                std::thread::yield_now();
                                out.fetch_sub(1, Ordering::SeqCst);
                                // abandon the probe: the breaker stays half-open
                                let _ = i;
                                b.release(p);
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            assert!(
                peak.load(Ordering::SeqCst) <= probes,
                "peak {} > {probes}",
                peak.load(Ordering::SeqCst)
            );
            assert!(peak.load(Ordering::SeqCst) >= 1);
        }
    }
}
