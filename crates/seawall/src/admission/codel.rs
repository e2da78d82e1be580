//! CoDel as folly implements it for request queues: detect a *standing* queue, then slough off.
//!
//! # Why CoDel, and why folly's variant
//!
//! A queue absorbs bursts, which is its job, but a queue that never drains only adds delay: every
//! request waits, and under a retry storm it waits until its caller has already given up. The
//! signal that tells a good queue from a bad one is not its length but its *minimum* delay over a
//! window: a burst drains, so some request in the window sees a short wait; a standing queue
//! does not (Nichols & Jacobson, "Controlling Queue Delay", ACM Queue 2012).
//!
//! Packet CoDel then drops at increasing frequency. folly's `Codel` (used by Facebook's
//! servers, "Fail at Scale", 2015) does something simpler that works better for RPC queues: at
//! the end of each `interval` it declares the queue *overloaded* if the minimum delay seen in that
//! interval exceeded `target`; while overloaded it rejects any request that has waited more than
//! `2 × target` (the "slough timeout"). Defaults are folly's: target 5 ms, interval 100 ms.
//!
//! This is a pure state machine driven by `now` and the observed delay, so it is tested on a
//! manual clock.

use std::time::Duration;

use crate::time::Instant;

/// folly's default CoDel target delay.
pub const DEFAULT_TARGET: Duration = Duration::from_millis(5);
/// folly's default CoDel interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// CoDel parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodelConfig {
    /// Acceptable standing delay (default 5 ms, folly).
    pub target: Duration,
    /// Window over which the minimum delay is measured (default 100 ms, folly).
    pub interval: Duration,
}

impl CodelConfig {
    /// CoDel that never sees a standing queue: it drops nothing, and a queue under it never
    /// turns LIFO or refuses retries. What a server without load shedding does
    /// ([`Config::fifo`](super::Config::fifo)).
    pub const OFF: CodelConfig = CodelConfig { target: Duration::MAX, interval: DEFAULT_INTERVAL };
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig { target: DEFAULT_TARGET, interval: DEFAULT_INTERVAL }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Codel {
    cfg: CodelConfig,
    interval_end: Option<Instant>,
    min_delay: Duration,
    reset: bool,
    overloaded: bool,
}

impl Codel {
    pub(super) fn new(cfg: CodelConfig) -> Self {
        Codel { cfg, interval_end: None, min_delay: Duration::ZERO, reset: true, overloaded: false }
    }

    /// True while the last completed interval had a standing delay above target.
    pub(super) fn overloaded(&self) -> bool {
        self.overloaded
    }

    /// The delay above which an overloaded queue drops a request: 2 × target (folly).
    pub(super) fn slough_timeout(&self) -> Duration {
        self.cfg.target.saturating_mul(2)
    }

    /// Observes one request's queueing delay at `now`; returns true if it should be dropped.
    pub(super) fn observe(&mut self, now: Instant, delay: Duration) -> bool {
        match self.interval_end {
            None => self.interval_end = Some(now + self.cfg.interval),
            Some(end) if now > end => {
                self.interval_end = Some(now + self.cfg.interval);
                self.overloaded = self.min_delay > self.cfg.target;
                self.reset = true;
            }
            Some(_) => {}
        }
        if self.reset {
            // The first observation of an interval only seeds the minimum: more than one request
            // must arrive in an interval before CoDel drops anything (folly).
            self.reset = false;
            self.min_delay = delay;
            return false;
        }
        self.min_delay = self.min_delay.min(delay);
        self.overloaded && delay > self.slough_timeout()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn bursts_do_not_trip_it_a_standing_queue_does() {
        let mut c = Codel::new(CodelConfig::default());
        let mut now = Instant::ZERO;
        // A burst: delays up to 50 ms but some request in every interval waits ~0.
        for i in 0..50u32 {
            now = now + 10 * MS;
            let d = if i % 5 == 0 { Duration::ZERO } else { 50 * MS };
            assert!(!c.observe(now, d));
        }
        assert!(!c.overloaded());
        // A standing queue: every request waits >= 20 ms.
        for _ in 0..30 {
            now = now + 10 * MS;
            c.observe(now, 20 * MS);
        }
        assert!(c.overloaded());
        assert!(c.observe(now, 11 * MS), "waited > 2 x target while overloaded");
        assert!(!c.observe(now, 9 * MS), "waited < 2 x target");
    }

    #[test]
    fn recovers_once_the_queue_drains() {
        let mut c = Codel::new(CodelConfig::default());
        let mut now = Instant::ZERO;
        for _ in 0..30 {
            now = now + 10 * MS;
            c.observe(now, 30 * MS);
        }
        assert!(c.overloaded());
        for _ in 0..30 {
            now = now + 10 * MS;
            c.observe(now, MS);
        }
        assert!(!c.overloaded());
    }
}
