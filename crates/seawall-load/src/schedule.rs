//! When each request is due: a constant or piecewise-linear (ramping) arrival rate.
//!
//! The instants are computed, not accumulated: arrival `i` is the time at which the integral of
//! the rate reaches `i` (k6's `ramping-arrival-rate` does the same), so a long run does not drift
//! and the count in any second is exactly the rate's integral over it, give or take one. Nothing
//! here reads a clock: the schedule is a pure function of the stages, tested as such.
//!
//! ```
//! use std::time::Duration;
//! use seawall_load::{Schedule, Stage};
//!
//! // 0 → 100 rps over 2 s, then 100 rps for 1 s.
//! let s = Schedule::ramp(0.0, vec![
//!     Stage { duration: Duration::from_secs(2), target: 100.0 },
//!     Stage { duration: Duration::from_secs(1), target: 100.0 },
//! ])?;
//! let mut per_second = vec![0; s.seconds()];
//! for t in s.arrivals() {
//!     per_second[t.as_secs() as usize] += 1;
//! }
//! assert_eq!(per_second, [25, 75, 100]);
//! # Ok::<(), seawall_load::LoadError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use super::error::{LoadError, LoadErrorKind};

/// Highest rate accepted, requests per second (a bound, not a promise that the machine keeps it).
pub const MAX_RATE: f64 = 1_000_000.0;
/// Longest run accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(600);

/// One stage of a ramp: the rate moves linearly to `target` over `duration` (k6's `stages`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    /// Length of the stage.
    pub duration: Duration,
    /// Rate at the end of the stage, requests per second.
    pub target: f64,
}

/// A validated arrival schedule: a start rate and one or more stages.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    start: f64,
    /// Shared with every [`Arrivals`], which own their copy of the stages (a driver's workers
    /// pull from one iterator that outlives any borrow).
    stages: Arc<[Stage]>,
}

fn check_rate(what: &str, r: f64) -> Result<(), LoadError> {
    if r.is_finite() && (0.0..=MAX_RATE).contains(&r) {
        Ok(())
    } else {
        Err(LoadError::new(LoadErrorKind::Rate, format!("{what}: in [0, {MAX_RATE}] rps, got {r}")))
    }
}

impl Schedule {
    /// A constant rate for `duration` (k6's `constant-arrival-rate`, wrk2's `-R`).
    pub fn constant(rate: f64, duration: Duration) -> Result<Self, LoadError> {
        Self::ramp(rate, vec![Stage { duration, target: rate }])
    }

    /// Starts at `start` rps and follows `stages` in order. The run lasts the sum of the stages
    /// (at most [`MAX_DURATION`]); some rate must be above zero.
    pub fn ramp(start: f64, stages: Vec<Stage>) -> Result<Self, LoadError> {
        check_rate("rate", start)?;
        let bad = |m: String| Err(LoadError::new(LoadErrorKind::Ramp, m));
        if stages.is_empty() {
            return bad("a schedule needs at least one stage".into());
        }
        let mut total = Duration::ZERO;
        for s in &stages {
            check_rate("ramp target", s.target)?;
            if s.duration.is_zero() {
                return bad("a stage lasts more than 0 s".into());
            }
            total = total.saturating_add(s.duration);
        }
        if total > MAX_DURATION {
            return Err(LoadError::new(
                LoadErrorKind::Duration,
                format!(
                    "the run lasts at most {} s, got {:.3} s",
                    MAX_DURATION.as_secs(),
                    total.as_secs_f64()
                ),
            ));
        }
        if start <= 0.0 && stages.iter().all(|s| s.target <= 0.0) {
            return Err(LoadError::new(
                LoadErrorKind::Rate,
                "every rate is 0: nothing to send".into(),
            ));
        }
        Ok(Self { start, stages: stages.into() })
    }

    /// Length of the run.
    pub fn duration(&self) -> Duration {
        self.stages.iter().map(|s| s.duration).sum()
    }

    /// Whole seconds the run touches (the length of every per-second series).
    pub fn seconds(&self) -> usize {
        self.duration().as_secs_f64().ceil() as usize
    }

    /// The start rate.
    pub fn start_rate(&self) -> f64 {
        self.start
    }

    /// The stages.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The rate at `t` from the start (0 after the end).
    pub fn rate_at(&self, t: Duration) -> f64 {
        let mut from = self.start;
        let mut at = Duration::ZERO;
        for s in self.stages.iter() {
            if t < at + s.duration {
                let f = (t - at).as_secs_f64() / s.duration.as_secs_f64();
                return from + (s.target - from) * f;
            }
            at += s.duration;
            from = s.target;
        }
        0.0
    }

    /// The send instants, as offsets from the start, in order. Lazy: a long run at a high rate
    /// costs no memory.
    pub fn arrivals(&self) -> Arrivals {
        Arrivals {
            stages: self.stages.clone(),
            stage: 0,
            stage_start: 0.0,
            from: self.start,
            done: 0.0,
            next: 0,
        }
    }
}

/// The iterator of [`Schedule::arrivals`].
#[derive(Debug, Clone)]
pub struct Arrivals {
    stages: Arc<[Stage]>,
    stage: usize,
    /// Start of the current stage, seconds.
    stage_start: f64,
    /// Rate at the start of the current stage.
    from: f64,
    /// Arrivals (the rate's integral) before the current stage.
    done: f64,
    /// Index of the next arrival.
    next: u64,
}

impl Iterator for Arrivals {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        while let Some(s) = self.stages.get(self.stage) {
            let len = s.duration.as_secs_f64();
            let (a, b) = (self.from, s.target);
            let n = self.next as f64 - self.done;
            // Solve a·x + (b − a)·x² / (2·len) = n for x in [0, len); the form 2n / (a + √…)
            // is stable when b ≈ a and exact at n = 0.
            let disc = a * a + 2.0 * (b - a) * n / len;
            let den = a + disc.max(0.0).sqrt();
            // n ≤ 0: due at the stage's start, if the stage sends anything at all.
            let x = if n <= 0.0 && (a > 0.0 || b > 0.0) {
                Some(0.0)
            } else if disc >= 0.0 && den > 0.0 {
                Some(2.0 * n / den)
            } else {
                None
            };
            if let Some(x) = x.filter(|x| *x < len) {
                self.next += 1;
                return Some(Duration::from_secs_f64(self.stage_start + x));
            }
            self.done += (a + b) * len / 2.0;
            self.stage_start += len;
            self.from = b;
            self.stage += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn per_second(s: &Schedule) -> Vec<u64> {
        let mut out = vec![0; s.seconds()];
        for t in s.arrivals() {
            out[t.as_secs() as usize] += 1;
        }
        out
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn constant_rate_is_evenly_spaced_and_exact() {
        let s = Schedule::constant(100.0, secs(3)).unwrap();
        let v: Vec<_> = s.arrivals().collect();
        assert_eq!(v.len(), 300);
        for (i, t) in v.iter().enumerate() {
            assert!((t.as_secs_f64() - i as f64 / 100.0).abs() < 1e-9, "{i}: {t:?}");
        }
        assert_eq!(per_second(&s), vec![100, 100, 100]);
    }

    #[test]
    fn ramp_follows_the_integral() {
        // 0 → 100 rps over 2 s, then hold 100 for 1 s: 25, 75, then 100.
        let s = Schedule::ramp(
            0.0,
            vec![
                Stage { duration: secs(2), target: 100.0 },
                Stage { duration: secs(1), target: 100.0 },
            ],
        )
        .unwrap();
        assert_eq!(per_second(&s), vec![25, 75, 100]);
        // Down again: 100 → 0 over 4 s gives 87.5, 62.5, 37.5, 12.5 (± 1 at the edges).
        let s = Schedule::ramp(100.0, vec![Stage { duration: secs(4), target: 0.0 }]).unwrap();
        let got = per_second(&s);
        for (g, want) in got.iter().zip([87.5, 62.5, 37.5, 12.5]) {
            assert!((*g as f64 - want).abs() <= 1.0, "{got:?}");
        }
        assert_eq!(got.iter().sum::<u64>(), 200);
    }

    #[test]
    fn arrivals_are_monotone_and_inside_the_run() {
        let s = Schedule::ramp(
            10.0,
            vec![
                Stage { duration: Duration::from_millis(1500), target: 1000.0 },
                Stage { duration: secs(1), target: 0.0 },
                Stage { duration: secs(1), target: 0.0 },
                Stage { duration: secs(1), target: 50.0 },
            ],
        )
        .unwrap();
        let v: Vec<_> = s.arrivals().collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        assert!(v.iter().all(|t| *t < s.duration()));
        // No arrival while the rate is 0 (2.5 s – 3.5 s).
        assert!(!v.iter().any(|t| (2.5..3.5).contains(&t.as_secs_f64())), "{v:?}");
        let want = (10.0 + 1000.0) / 2.0 * 1.5 + 500.0 + 25.0;
        assert!((v.len() as f64 - want).abs() <= 2.0, "{} vs {want}", v.len());
        assert_eq!(s.rate_at(Duration::from_millis(750)), 505.0);
        assert_eq!(s.rate_at(secs(9)), 0.0);
    }

    #[test]
    fn bad_schedules_are_refused() {
        for r in [f64::NAN, -1.0, f64::INFINITY, 2e6] {
            assert_eq!(Schedule::constant(r, secs(1)).unwrap_err().kind(), LoadErrorKind::Rate);
        }
        assert_eq!(Schedule::constant(0.0, secs(1)).unwrap_err().kind(), LoadErrorKind::Rate);
        assert_eq!(Schedule::constant(1.0, secs(601)).unwrap_err().kind(), LoadErrorKind::Duration);
        assert_eq!(
            Schedule::constant(1.0, Duration::ZERO).unwrap_err().kind(),
            LoadErrorKind::Ramp
        );
        assert_eq!(Schedule::ramp(1.0, vec![]).unwrap_err().kind(), LoadErrorKind::Ramp);
    }
}
