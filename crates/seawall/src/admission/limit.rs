//! The concurrency limit: fixed, or adaptive in the gradient style of Netflix's Gradient2.
//!
//! # Why an adaptive limit
//!
//! A fixed in-flight cap is right only for the hardware, handler and dependencies it was tuned
//! on. The gradient family (Netflix `concurrency-limits` Gradient2, Envoy's adaptive concurrency
//! filter) instead compares a long-term average latency with the latest one: when latency rises
//! above its long-term level a queue is forming *somewhere below us*, so the limit shrinks in
//! proportion; when it does not, the limit grows by a small headroom (`queue_size`) to probe.
//!
//! `gradient = clamp(tolerance · long_rtt / rtt, 0.5, 1.0)`,
//! `limit ← (1 − smoothing) · limit + smoothing · (gradient · limit + queue_size)`.
//!
//! Defaults are Gradient2's: tolerance 1.5, smoothing 0.2, long window 600 samples, headroom 4,
//! and the limit is not grown while fewer than half of it is in use (the app is not limited by
//! it then, so its latency says nothing about a bigger limit).

use std::num::NonZeroUsize;
use std::time::Duration;

/// Parameters of the adaptive (gradient) limit. Defaults from Netflix Gradient2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradientConfig {
    /// Starting limit (default 20, Gradient2's `initialLimit`).
    pub initial: usize,
    /// Lowest limit (default 1).
    pub min: usize,
    /// Highest limit (default 200, Gradient2's `maxConcurrency`).
    pub max: usize,
    /// How much latency growth is tolerated before shrinking (default 1.5).
    pub tolerance: f64,
    /// Weight of each new estimate (default 0.2).
    pub smoothing: f64,
    /// Samples in the long-term latency average (default 600).
    pub long_window: u32,
    /// Headroom added to probe for more capacity (default 4).
    pub queue_size: usize,
}

impl Default for GradientConfig {
    fn default() -> Self {
        GradientConfig {
            initial: 20,
            min: 1,
            max: 200,
            tolerance: 1.5,
            smoothing: 0.2,
            long_window: 600,
            queue_size: 4,
        }
    }
}

/// Which limit caps the requests in flight: fixed, or adaptive ([`GradientConfig`]).
///
/// Built only through [`Limit::fixed`] and [`Limit::gradient`], which validate their input.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit(Kind);

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Fixed(usize),
    Gradient { cfg: GradientConfig, limit: f64, long_rtt: Option<f64> },
}

impl Limit {
    /// At most `n` requests in flight, always.
    pub fn fixed(n: NonZeroUsize) -> Self {
        Limit(Kind::Fixed(n.get()))
    }

    /// An adaptive limit starting at `cfg.initial`. Out-of-order bounds are repaired: `min` is
    /// raised to 1, `max` to `min`, `long_window` to 1, and `initial` clamped into `[min, max]`.
    pub fn gradient(cfg: GradientConfig) -> Self {
        let min = cfg.min.max(1);
        let max = cfg.max.max(min);
        let cfg = GradientConfig { min, max, long_window: cfg.long_window.max(1), ..cfg };
        Limit(Kind::Gradient { limit: cfg.initial.clamp(min, max) as f64, cfg, long_rtt: None })
    }

    /// The limit now.
    pub fn current(&self) -> usize {
        match &self.0 {
            Kind::Fixed(n) => *n,
            Kind::Gradient { limit, .. } => *limit as usize,
        }
    }

    /// Feeds one successful request's handler latency, with `in_flight` at its completion.
    pub(super) fn sample(&mut self, rtt: Duration, in_flight: usize) {
        let Kind::Gradient { cfg, limit, long_rtt } = &mut self.0 else { return };
        let rtt = rtt.as_secs_f64().max(1e-6);
        let long = match long_rtt {
            None => rtt,
            Some(l) => {
                let w = f64::from(cfg.long_window);
                let mut l = *l * (1.0 - 1.0 / w) + rtt / w;
                // Gradient2: if the long average drifted far above the current latency (a past
                // slowdown), pull it down faster so the limit can recover.
                if l / rtt > 2.0 {
                    l *= 0.95;
                }
                l
            }
        };
        *long_rtt = Some(long);
        if (in_flight as f64) < *limit / 2.0 {
            return;
        }
        let gradient = (cfg.tolerance * long / rtt).clamp(0.5, 1.0);
        let estimate = gradient * *limit + cfg.queue_size as f64;
        let next = *limit * (1.0 - cfg.smoothing) + estimate * cfg.smoothing;
        *limit = next.clamp(cfg.min as f64, cfg.max as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn shrinks_when_latency_rises_and_grows_back() {
        let mut l = Limit::gradient(GradientConfig::default());
        for _ in 0..200 {
            let n = l.current();
            l.sample(10 * MS, n);
        }
        let grown = l.current();
        assert!(grown > 20, "probes upward at steady latency: {grown}");
        for _ in 0..30 {
            let n = l.current();
            l.sample(100 * MS, n);
        }
        assert!(l.current() < grown / 2, "shrinks under rising latency: {}", l.current());
        assert!(l.current() >= 1);
    }

    #[test]
    fn does_not_grow_when_app_limited() {
        let mut l = Limit::gradient(GradientConfig::default());
        for _ in 0..100 {
            l.sample(10 * MS, 1);
        }
        assert_eq!(l.current(), 20);
    }

    #[test]
    fn fixed_ignores_samples() {
        let mut l = Limit::fixed(NonZeroUsize::new(7).unwrap());
        l.sample(MS, 7);
        assert_eq!(l.current(), 7);
    }
}
