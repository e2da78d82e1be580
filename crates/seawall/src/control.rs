//! Runtime control: a kill switch for retries and a staged ramp to bring them back.
//!
//! During a retry storm the one piece of preparation that pays off is a feature flag for retry
//! behaviour: setting retries to zero fleet-wide takes the multiplied load off the dependency
//! within seconds, where restarts, scaling and relaxed timeouts only add to it. Bringing retries
//! back all at once re-forms the herd, so they come back in stages — 10 → 25 → 50 → 100 % (a staged
//! rollout).
//!
//! [`Control`] is one `AtomicU8` holding the percentage of retries allowed; the policy reads it
//! with one relaxed load on each retry decision, so a change takes effect on the very next one.
//! First attempts are never affected. Share it with `Arc` between policies, an admin endpoint
//! and a fleet-wide source (the middleware crate has a Redis one).
//!
//! ```
//! use seawall::control::Control;
//!
//! let c = Control::new();
//! assert_eq!(c.percent(), 100);
//! c.disable();
//! assert!(!c.allows_retry(0.0));
//! assert_eq!(c.ramp_up(), 10);
//! assert_eq!(c.ramp_up(), 25);
//! assert!(c.allows_retry(0.2) && !c.allows_retry(0.3));
//! ```

use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::ConfigError;

/// The stages of the ramp, in percent of retries allowed.
pub const RAMP: [u8; 4] = [10, 25, 50, 100];

/// The retry kill switch and ramp.
#[derive(Debug)]
pub struct Control {
    percent: AtomicU8,
}

impl Default for Control {
    fn default() -> Self {
        Control { percent: AtomicU8::new(100) }
    }
}

impl Control {
    /// Retries fully enabled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Percentage of retries currently allowed (0–100).
    pub fn percent(&self) -> u8 {
        self.percent.load(Ordering::Relaxed)
    }

    /// Sets the percentage of retries allowed.
    pub fn set_percent(&self, percent: u8) -> Result<(), ConfigError> {
        if percent > 100 {
            return Err(ConfigError::out_of_range("control.percent", "in [0, 100]", percent));
        }
        self.percent.store(percent, Ordering::Relaxed);
        Ok(())
    }

    /// Kill switch: no retries from the next decision on.
    pub fn disable(&self) {
        self.percent.store(0, Ordering::Relaxed);
    }

    /// All retries allowed again, at once. Prefer [`Control::ramp_up`].
    pub fn enable(&self) {
        self.percent.store(100, Ordering::Relaxed);
    }

    /// Moves to the next stage of [`RAMP`] above the current percentage and returns it.
    pub fn ramp_up(&self) -> u8 {
        let next = |p: u8| RAMP.iter().copied().find(|&s| s > p).unwrap_or(100);
        match self.percent.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| Some(next(p))) {
            Ok(prev) | Err(prev) => next(prev),
        }
    }

    /// Whether a retry may be sent, for a uniform `draw` in `[0, 1)`. One atomic load.
    #[inline]
    pub fn allows_retry(&self, draw: f64) -> bool {
        self.allows(draw)
    }

    /// Whether the gated thing (a retry; for a server's admission knob, a request) passes, for a
    /// uniform `draw` in `[0, 1)`: true with probability `percent / 100`. One atomic load.
    #[inline]
    pub fn allows(&self, draw: f64) -> bool {
        let p = self.percent.load(Ordering::Relaxed);
        p >= 100 || draw * 100.0 < f64::from(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_walks_the_stages_and_stays_at_full() {
        let c = Control::new();
        c.disable();
        let stages: Vec<u8> = (0..5).map(|_| c.ramp_up()).collect();
        assert_eq!(stages, [10, 25, 50, 100, 100]);
        c.set_percent(30).unwrap();
        assert_eq!(c.ramp_up(), 50);
        assert!(c.set_percent(101).is_err());
    }

    #[test]
    fn fraction_allowed_matches_percent() {
        let c = Control::new();
        c.set_percent(25).unwrap();
        let allowed = (0..1000).filter(|i| c.allows_retry(f64::from(*i) / 1000.0)).count();
        assert_eq!(allowed, 250);
        c.disable();
        assert_eq!((0..1000).filter(|i| c.allows_retry(f64::from(*i) / 1000.0)).count(), 0);
    }
}
