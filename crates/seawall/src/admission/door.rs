//! What a refused request is told: the jittered `Retry-After`, and the operator's knob.
//!
//! # Why jitter the server's `Retry-After`
//!
//! Every caller refused in the same millisecond that hears `Retry-After: 2` comes back in the
//! same second, as a new spike. So the server draws the value from a range (default 1–5 s), and
//! the clients add their own jitter on top (RFC 9110 §10.2.3 leaves the value to the server;
//! AWS's "Exponential Backoff And Jitter" shows why synchronised waits re-synchronise load).

use std::time::Duration;

use crate::control::Control;
use crate::hint::Hint;
use crate::rng::Rng;

use super::Reason;

/// Default spread of the `Retry-After` sent with a 503: uniformly 1 to 5 whole seconds. A local
/// choice; clients add their own full jitter on top.
pub const DEFAULT_RETRY_AFTER_SECS: (u16, u16) = (1, 5);

/// The range of whole seconds a refusal's `Retry-After` is drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter {
    min: u16,
    max: u16,
}

impl Default for RetryAfter {
    fn default() -> Self {
        let (min, max) = DEFAULT_RETRY_AFTER_SECS;
        RetryAfter { min, max }
    }
}

impl RetryAfter {
    /// Seconds drawn uniformly from `min..=max`. An inverted range is swapped; zero is raised
    /// to one (a `Retry-After: 0` invites an immediate stampede).
    pub fn secs(min: u16, max: u16) -> Self {
        RetryAfter { min: min.min(max).max(1), max: max.max(min).max(1) }
    }

    /// The bounds, in seconds.
    pub fn range(&self) -> (u16, u16) {
        (self.min, self.max)
    }

    /// One draw, in whole seconds.
    pub fn pick(&self, rng: &mut impl Rng) -> u16 {
        let n = u64::from(self.max - self.min) + 1;
        self.min + (rng.next_u64() % n) as u16
    }
}

/// What the server answers a request it refuses, protocol-neutral.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Overloaded: come back after `retry_after_secs` (HTTP 503 + `Retry-After`; gRPC
    /// `UNAVAILABLE`).
    Unavailable {
        /// The jittered `Retry-After`, whole seconds.
        retry_after_secs: u16,
    },
    /// The caller's deadline passed (HTTP 504; gRPC `DEADLINE_EXCEEDED`): no hint, since
    /// retrying the same call cannot help, and its caller has gone anyway.
    DeadlineExceeded,
}

impl Rejection {
    /// The answer for a request refused for `reason`, drawing the `Retry-After` from `range`.
    pub fn of(reason: Reason, range: &RetryAfter, rng: &mut impl Rng) -> Self {
        match reason {
            Reason::DeadlineExpired => Rejection::DeadlineExceeded,
            _ => Rejection::Unavailable { retry_after_secs: range.pick(rng) },
        }
    }

    /// The HTTP status: 503 or 504.
    pub fn status(&self) -> u16 {
        match self {
            Rejection::Unavailable { .. } => 503,
            Rejection::DeadlineExceeded => 504,
        }
    }

    /// The gRPC status code: 14 (`UNAVAILABLE`) or 4 (`DEADLINE_EXCEEDED`).
    pub fn grpc_code(&self) -> i32 {
        match self {
            Rejection::Unavailable { .. } => 14,
            Rejection::DeadlineExceeded => 4,
        }
    }

    /// The hint a client reads off this answer: `Retry-After` as [`Hint::After`].
    pub fn hint(&self) -> Hint {
        match self {
            Rejection::Unavailable { retry_after_secs } => {
                Hint::After(Duration::from_secs(u64::from(*retry_after_secs)))
            }
            Rejection::DeadlineExceeded => Hint::None,
        }
    }
}

/// Whether the operator's admission knob turns a new request away: with probability
/// `1 − percent / 100`. Draws from `rng` only below 100 %, so an untouched knob costs one atomic
/// load. Refuse such a request with [`Reason::AdmissionCut`] before it costs anything.
pub fn cut_by(knob: &Control, rng: &mut impl Rng) -> bool {
    knob.percent() < 100 && !knob.allows(rng.next_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeededRng;

    #[test]
    fn retry_after_stays_in_range_and_covers_it() {
        let r = RetryAfter::secs(5, 2);
        assert_eq!(r.range(), (2, 5));
        let mut rng = SeededRng::new(1);
        let mut seen = [false; 6];
        for _ in 0..200 {
            let s = r.pick(&mut rng);
            assert!((2..=5).contains(&s));
            seen[usize::from(s)] = true;
        }
        assert_eq!(seen, [false, false, true, true, true, true]);
        assert_eq!(RetryAfter::secs(0, 0).range(), (1, 1));
    }

    #[test]
    fn deadline_gets_504_without_hint_others_503_with_one() {
        let mut rng = SeededRng::new(2);
        let r = RetryAfter::secs(3, 3);
        let d = Rejection::of(Reason::DeadlineExpired, &r, &mut rng);
        assert_eq!((d.status(), d.grpc_code(), d.hint()), (504, 4, Hint::None));
        let u = Rejection::of(Reason::QueueFull, &r, &mut rng);
        assert_eq!((u.status(), u.grpc_code()), (503, 14));
        assert_eq!(u.hint(), Hint::After(Duration::from_secs(3)));
    }

    #[test]
    fn knob_cuts_its_share_and_nothing_at_full() {
        let k = Control::new();
        let mut rng = SeededRng::new(3);
        assert!((0..1000).all(|_| !cut_by(&k, &mut rng)));
        k.set_percent(25).unwrap();
        let cut = (0..10_000).filter(|_| cut_by(&k, &mut rng)).count();
        assert!((7_000..8_000).contains(&cut), "{cut}");
    }
}
