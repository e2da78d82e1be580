//! How long to wait before a retry: exponential growth, a cap, and jitter.
//!
//! # Why full jitter
//!
//! Clients that failed together and wait the same delay retry together: exponential backoff
//! without jitter spreads the *waves* out in time but keeps every client in phase, so the
//! dependency sees a square wave instead of a trickle (a spike at t + 100 ms, a bigger
//! one at t + 300 ms, a bigger one at t + 700 ms; Brooker, "Exponential Backoff And Jitter", AWS
//! Architecture Blog, 2015). Full jitter draws the wait uniformly from
//! `[0, min(cap, base · 2^(retry-1)))`, which is the only variant that spreads load evenly rather
//! than merely delaying the collision. Equal, decorrelated and no jitter are here for comparison
//! in the simulator; ±20 % ([`Jitter::Grpc`]) is gRPC's, for its connection backoff and, since
//! gRFC A6's revision of 2024-08-29, for its retries too (the `seawall::grpc` mode uses it).
//!
//! # Defaults and their source
//!
//! AWS SDKs' updated retry behaviour (2026): full jitter, base 50 ms for transient errors, 1 s
//! for throttling, cap 20 s. The ceilings for retries 1, 2, 3, … are then 0.05, 0.1, 0.2, …,
//! 12.8, 20, 20 s.
//!
//! ```
//! use seawall::backoff::Backoff;
//! use seawall::rng::SeededRng;
//! use std::time::Duration;
//!
//! let b = Backoff::default();
//! assert_eq!(b.ceiling(1, false), Duration::from_millis(50));
//! assert_eq!(b.ceiling(9, false), Duration::from_millis(12_800));
//! assert_eq!(b.ceiling(10, false), Duration::from_secs(20));
//! assert_eq!(b.ceiling(1, true), Duration::from_secs(1));
//!
//! let mut rng = SeededRng::new(1);
//! let wait = b.delay(3, false, Duration::ZERO, &mut rng);
//! assert!(wait < Duration::from_millis(200));
//! ```

use std::time::Duration;

use crate::error::{ConfigError, check_f64};
use crate::rng::Rng;

/// How the wait is randomised around (or below) the exponential ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Jitter {
    /// `U[0,1) · ceiling` — the default. (AWS Architecture Blog, "Exponential Backoff And Jitter".)
    #[default]
    Full,
    /// `ceiling/2 + U[0,1) · ceiling/2`.
    Equal,
    /// `min(cap, U[base, 3 · max(previous wait, base)))` — AWS's "decorrelated jitter"
    /// (Brooker, "Exponential Backoff And Jitter": `sleep = min(cap, random_between(base, sleep
    /// · 3))` with `sleep` starting at `base`). The first retry is jittered too, over
    /// `[base, 3 · base)`: clients that failed together must not retry together.
    Decorrelated,
    /// `ceiling · U[0.8, 1.2)` — gRPC's ±20 %. Its connection backoff (gRPC's
    /// `doc/connection-backoff.md`: `JITTER = 0.2`, the wait is the current backoff plus
    /// `UniformRandom(-JITTER · backoff, JITTER · backoff)`) and, since gRFC A6's revision of
    /// 2024-08-29, its retry backoff: the n-th retry waits `min(initialBackoff ·
    /// backoffMultiplier^(n−1), maxBackoff) · random(0.8, 1.2)`, as grpc-go and C-core do
    /// (A6 had `random(0, …)`, full jitter, before). May exceed the cap by 20 %.
    Grpc,
    /// Exactly the ceiling: synchronised clients stay synchronised. For comparison only.
    None,
}

/// Exponential backoff with a cap, a separate base for throttling, and jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    jitter: Jitter,
    base: Duration,
    throttle_base: Duration,
    cap: Duration,
    multiplier: f64,
}

impl Default for Backoff {
    /// AWS 2026 defaults: full jitter, 50 ms base, 1 s throttling base, 20 s cap, ×2.
    fn default() -> Self {
        Backoff {
            jitter: Jitter::Full,
            base: Duration::from_millis(50),
            throttle_base: Duration::from_secs(1),
            cap: Duration::from_secs(20),
            multiplier: 2.0,
        }
    }
}

/// The longest base or cap accepted: one hour. Longer waits are configuration mistakes.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

impl Backoff {
    /// A backoff with the given jitter, base (for transient errors and throttling alike), cap and
    /// multiplier. Use [`Backoff::with_throttle_base`] for a separate throttling base.
    ///
    /// `base` and `cap` must be at most [`MAX_BACKOFF`]; `multiplier` in `[1, 16]`.
    pub fn new(
        jitter: Jitter,
        base: Duration,
        cap: Duration,
        multiplier: f64,
    ) -> Result<Self, ConfigError> {
        if base > MAX_BACKOFF {
            return Err(ConfigError::out_of_range(
                "backoff.base",
                "at most 1 hour",
                format!("{base:?}"),
            ));
        }
        if cap > MAX_BACKOFF {
            return Err(ConfigError::out_of_range(
                "backoff.cap",
                "at most 1 hour",
                format!("{cap:?}"),
            ));
        }
        let multiplier = check_f64("backoff.multiplier", "in [1, 16]", multiplier, 1.0, 16.0)?;
        Ok(Backoff { jitter, base, throttle_base: base, cap, multiplier })
    }

    /// gRPC's retry backoff for a `retryPolicy`'s `initialBackoff`, `maxBackoff` and
    /// `backoffMultiplier` (gRFC A6, revision of 2024-08-29): the n-th retry since the last
    /// pushback waits `min(initial · multiplier^(n−1), max) · random(0.8, 1.2)`
    /// ([`Jitter::Grpc`]). Not range-checked as [`Backoff::new`] is, because A6 allows a
    /// multiplier below 1 or above 16 and backoffs over an hour; the service config parser
    /// (`seawall::grpc::config`) validates them, and [`Backoff::ceiling`] saturates at `max`
    /// whatever they are.
    pub fn grpc(initial: Duration, max: Duration, multiplier: f64) -> Self {
        Backoff {
            jitter: Jitter::Grpc,
            base: initial,
            throttle_base: initial,
            cap: max,
            multiplier,
        }
    }

    /// A flat delay with no jitter (e.g. "3 retries, flat 100 ms").
    pub fn constant(delay: Duration) -> Result<Self, ConfigError> {
        Self::new(Jitter::None, delay, delay, 1.0)
    }

    /// Sets the base used after a throttling response (429, RESOURCE_EXHAUSTED).
    pub fn with_throttle_base(mut self, base: Duration) -> Result<Self, ConfigError> {
        if base > MAX_BACKOFF {
            return Err(ConfigError::out_of_range(
                "backoff.throttle_base",
                "at most 1 hour",
                format!("{base:?}"),
            ));
        }
        self.throttle_base = base;
        Ok(self)
    }

    /// The jitter variant.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The cap.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The base for transient errors.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// `min(cap, base · multiplier^(retry-1))` for retry number `retry` (1 = the first retry).
    pub fn ceiling(&self, retry: u32, throttled: bool) -> Duration {
        let base = if throttled { self.throttle_base } else { self.base };
        let exp = retry.saturating_sub(1).min(1024) as i32;
        let secs = base.as_secs_f64() * self.multiplier.powi(exp);
        let cap = self.cap.as_secs_f64();
        if secs.is_finite() && secs < cap {
            // Round to whole nanoseconds so that 0.05 · 2^8 is exactly 12.8 s.
            Duration::from_nanos((secs * 1e9).round() as u64)
        } else {
            self.cap
        }
    }

    /// The wait before retry number `retry` (1 = first retry). `previous` is the previous wait
    /// (used only by decorrelated jitter; pass `Duration::ZERO` for the first retry).
    pub fn delay(
        &self,
        retry: u32,
        throttled: bool,
        previous: Duration,
        rng: &mut impl Rng,
    ) -> Duration {
        let ceiling = self.ceiling(retry, throttled);
        match self.jitter {
            Jitter::Full => ceiling.mul_f64(rng.next_f64()),
            Jitter::Equal => ceiling / 2 + (ceiling / 2).mul_f64(rng.next_f64()),
            Jitter::Decorrelated => {
                let base = if throttled { self.throttle_base } else { self.base };
                // `sleep` starts at `base` (the first retry passes `previous = 0`), so the first
                // retry draws from [base, 3·base) like every later one, not exactly `base`.
                let hi = previous.max(base).saturating_mul(3);
                let d = base + (hi - base).mul_f64(rng.next_f64());
                d.min(self.cap)
            }
            Jitter::Grpc => ceiling.mul_f64(0.8 + 0.4 * rng.next_f64()),
            Jitter::None => ceiling,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeededRng;
    use proptest::prelude::*;

    #[test]
    fn aws_full_jitter_ceilings() {
        let b = Backoff::default();
        let expect_ms = [50, 100, 200, 400, 800, 1600, 3200, 6400, 12_800, 20_000, 20_000];
        for (i, ms) in expect_ms.iter().enumerate() {
            assert_eq!(
                b.ceiling(i as u32 + 1, false),
                Duration::from_millis(*ms),
                "retry {}",
                i + 1
            );
        }
        assert_eq!(b.ceiling(u32::MAX, false), Duration::from_secs(20));
        assert_eq!(b.ceiling(1, true), Duration::from_secs(1));
        assert_eq!(b.ceiling(6, true), Duration::from_secs(20));
    }

    #[test]
    fn no_jitter_exponential_from_100ms() {
        // Doubling from 100 ms: 100 ms, 200 ms, 400 ms.
        let b =
            Backoff::new(Jitter::None, Duration::from_millis(100), Duration::from_secs(20), 2.0)
                .unwrap();
        let mut rng = SeededRng::new(0);
        let waits: Vec<_> = (1..=3).map(|n| b.delay(n, false, Duration::ZERO, &mut rng)).collect();
        assert_eq!(waits, [100, 200, 400].map(Duration::from_millis));
    }

    #[test]
    fn constant_is_flat() {
        let b = Backoff::constant(Duration::from_millis(100)).unwrap();
        let mut rng = SeededRng::new(0);
        for n in 1..5 {
            assert_eq!(b.delay(n, false, Duration::ZERO, &mut rng), Duration::from_millis(100));
        }
    }

    #[test]
    fn rejects_bad_config() {
        assert!(
            Backoff::new(Jitter::Full, Duration::from_secs(7200), Duration::from_secs(1), 2.0)
                .is_err()
        );
        assert!(
            Backoff::new(Jitter::Full, Duration::ZERO, Duration::from_secs(1), f64::NAN).is_err()
        );
        let e =
            Backoff::new(Jitter::Full, Duration::ZERO, Duration::from_secs(1), 0.5).unwrap_err();
        assert_eq!(e.field(), "backoff.multiplier");
        assert!(e.to_string().contains("[1, 16]"));
    }

    #[test]
    fn full_jitter_spreads() {
        let b = Backoff::default();
        let mut rng = SeededRng::new(3);
        let waits: Vec<_> =
            (0..1000).map(|_| b.delay(4, false, Duration::ZERO, &mut rng)).collect();
        let mean = waits.iter().map(|d| d.as_secs_f64()).sum::<f64>() / 1000.0;
        assert!((mean - 0.2).abs() < 0.02, "mean of U[0, 400ms) ≈ 200 ms, got {mean}");
    }

    /// A thousand clients that fail at the same instant, each with its own random
    /// stream (as the policy hands out: one `SeedSource`, one stream per call), must not all
    /// pick the same first decorrelated wait. Mutation checked: the old first retry (`hi =
    /// max(3 · previous, base)`, i.e. exactly `base` when `previous` is 0) makes every wait
    /// 100 ms and fails.
    #[test]
    fn decorrelated_jitters_the_first_retry() {
        let base = Duration::from_millis(100);
        let b = Backoff::new(Jitter::Decorrelated, base, Duration::from_secs(20), 2.0).unwrap();
        let seeds = crate::rng::SeedSource::new(19);
        let mut waits: Vec<Duration> =
            (0..1000).map(|_| b.delay(1, false, Duration::ZERO, &mut seeds.stream())).collect();
        assert!(waits.iter().all(|w| (base..base * 3).contains(w)), "in [base, 3·base)");
        waits.sort();
        let distinct = waits.windows(2).filter(|w| w[0] != w[1]).count() + 1;
        assert_eq!(distinct, 1000, "no two clients wait the same");
        // Spread over the range, not bunched: the middle half spans about 100 ms of the 200.
        let iqr = waits[749] - waits[250];
        assert!(iqr > Duration::from_millis(80), "interquartile range {iqr:?}");
        // The throttling base is jittered the same way.
        let t = b.with_throttle_base(Duration::from_secs(1)).unwrap();
        let a = t.delay(1, true, Duration::ZERO, &mut seeds.stream());
        let c = t.delay(1, true, Duration::ZERO, &mut seeds.stream());
        assert_ne!(a, c);
        assert!(a >= Duration::from_secs(1) && a < Duration::from_secs(3));
    }

    #[test]
    fn decorrelated_grows_from_the_previous_wait() {
        let base = Duration::from_millis(100);
        let b = Backoff::new(Jitter::Decorrelated, base, Duration::from_secs(20), 2.0).unwrap();
        let mut rng = SeededRng::new(5);
        for _ in 0..200 {
            let d = b.delay(3, false, Duration::from_secs(2), &mut rng);
            assert!(d >= base && d < Duration::from_secs(6), "{d:?}");
        }
    }

    /// gRPC's first retry waits its initial backoff ±20 % (gRFC A6, 2024-08-29 revision).
    #[test]
    fn grpc_jitter_is_twenty_percent_either_side() {
        let b = Backoff::new(Jitter::Grpc, Duration::from_secs(1), Duration::from_secs(120), 1.6)
            .unwrap();
        let mut rng = SeededRng::new(2);
        for _ in 0..200 {
            let d = b.delay(1, false, Duration::ZERO, &mut rng);
            assert!(d >= Duration::from_millis(800) && d < Duration::from_millis(1200), "{d:?}");
        }
    }

    proptest! {
        #[test]
        fn full_jitter_never_exceeds_ceiling(
            base_ms in 0u64..5_000, cap_ms in 0u64..60_000, retry in 1u32..200, seed: u64,
        ) {
            let b = Backoff::new(Jitter::Full, Duration::from_millis(base_ms), Duration::from_millis(cap_ms), 2.0).unwrap();
            let mut rng = SeededRng::new(seed);
            let d = b.delay(retry, false, Duration::ZERO, &mut rng);
            let exact = (base_ms as f64) * 2f64.powi((retry - 1).min(1000) as i32);
            prop_assert!(d <= Duration::from_millis(cap_ms));
            prop_assert!(d.as_secs_f64() * 1000.0 <= exact + 1e-6);
        }

        #[test]
        fn equal_and_decorrelated_stay_in_bounds(
            base_ms in 0u64..5_000, cap_ms in 0u64..60_000, retry in 1u32..50, prev_ms in 0u64..100_000, seed: u64,
        ) {
            let mut rng = SeededRng::new(seed);
            for j in [Jitter::Equal, Jitter::Decorrelated] {
                let b = Backoff::new(j, Duration::from_millis(base_ms), Duration::from_millis(cap_ms), 2.0).unwrap();
                let d = b.delay(retry, false, Duration::from_millis(prev_ms), &mut rng);
                prop_assert!(d <= Duration::from_millis(cap_ms.max(base_ms)));
            }
        }
    }
}
