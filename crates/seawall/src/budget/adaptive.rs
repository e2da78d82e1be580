//! Google SRE adaptive client throttling: refuse locally, with a probability, what the backend
//! would refuse anyway.

use std::time::Duration;

use std::sync::atomic::Ordering;

use super::window::{SlotClock, SlotCounts};
use super::{AttemptOutcome, Budget, RetryCause, Withdrawal};
use crate::error::{ConfigError, check_f64};
use crate::time::Instant;

/// Slots per window.
const SLOTS: u32 = 12;
/// Slots summed: the window plus the slot in progress, as in the ratio budget.
const SPAN: u32 = SLOTS + 1;
/// Lane of the requests.
const REQUESTS: usize = 0;
/// Lane of the accepts.
const ACCEPTS: usize = 1;

/// Adaptive client throttling: each attempt is refused locally with probability
/// `max(0, (requests − K × accepts) / (requests + 1))` over the last two minutes.
///
/// Source: *Site Reliability Engineering* (Google, 2016), ch. 21 "Handling Overload", *Client-side
/// throttling*: `requests` is what the application attempted, including the attempts this
/// throttle refused; `accepts` is what the backend accepted; K = 2 is the book's usual value
/// (K = 1.1 is its example of an aggressive setting); the history is "the last two minutes".
/// When the backend accepts everything, `requests ≈ accepts` and nothing is refused; when it
/// rejects most, the client sends about `K × accepts` and drops the rest before they cost the
/// backend anything — instead of the backend spending work to reject them.
///
/// Mapping to the [`Budget`] protocol: every [`Budget::admit`] (first attempts and retries: both
/// are requests the application layer attempted) counts a request, after drawing its decision
/// from the history before it; every [`Budget::record`] with [`AttemptOutcome::Answered`] or
/// [`AttemptOutcome::Rejected`] (a non-retryable answer such as a 404, which the backend chose to
/// give rather than refused under load) counts an accept. [`Budget::withdraw`] always allows: this throttle acts in `admit`, on retries and
/// first attempts alike (pair it with a policy's attempt cap).
///
/// The window is 12 slots of `window / 12` (10 s by default) plus the slot in progress, so it
/// remembers between `window` and `window + window/12`. Counts are kept in the tagged slots of
/// the crate's internal `budget::window` ring, lock-free and driven only by `now`; a decision sums
/// the ring's 16 slots (two adjacent lanes each) in one pass.
///
/// ```
/// use seawall::budget::{AdaptiveThrottle, AttemptOutcome, Budget};
/// use seawall::time::Instant;
///
/// let t = AdaptiveThrottle::default();
/// let now = Instant::ZERO;
/// // 100 requests, 10 accepted: p = (100 − 2·10) / 101 ≈ 0.79.
/// for i in 0..100 {
///     assert!(t.admit(now, false, 0.999));
///     if i < 10 {
///         t.record(now, None, AttemptOutcome::Answered);
///     }
/// }
/// assert!((t.rejection_probability(now) - 80.0 / 101.0).abs() < 1e-12);
/// assert!(!t.admit(now, false, 0.5)); // a draw under p is refused
/// ```
#[derive(Debug)]
pub struct AdaptiveThrottle {
    clock: SlotClock,
    /// Lane [`REQUESTS`] and lane [`ACCEPTS`] of each slot share a cache line; a read sums the
    /// ring, as [`RatioBudget`](super::RatioBudget)'s does.
    counts: SlotCounts<2>,
    k: f64,
}

impl Default for AdaptiveThrottle {
    /// Two minutes and K = 2 (SRE book, ch. 21).
    fn default() -> Self {
        AdaptiveThrottle::new(Duration::from_secs(120), 2.0).expect("defaults are valid")
    }
}

impl AdaptiveThrottle {
    /// A throttle over `window` (1 s to 1 h) with multiplier `k` (1 to 10: below 1 it would
    /// refuse requests the backend accepts).
    pub fn new(window: Duration, k: f64) -> Result<Self, ConfigError> {
        if window < Duration::from_secs(1) || window > Duration::from_secs(3600) {
            return Err(ConfigError::out_of_range(
                "budget.window",
                "in [1 s, 1 h]",
                format!("{window:?}"),
            ));
        }
        let k = check_f64("budget.k", "in [1, 10]", k, 1.0, 10.0)?;
        let slot_nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX) / u64::from(SLOTS);
        Ok(AdaptiveThrottle { clock: SlotClock::new(slot_nanos), counts: SlotCounts::new(), k })
    }

    /// `(requests, accepts)` in the window at `now`.
    pub fn counts(&self, now: Instant) -> (u64, u64) {
        self.counts_at(self.clock.generation(now))
    }

    fn counts_at(&self, generation: u64) -> (u64, u64) {
        let [requests, accepts] = self.counts.sums(generation, SPAN, 0, Ordering::SeqCst);
        (requests, accepts)
    }

    /// The probability that an attempt at `now` is refused.
    pub fn rejection_probability(&self, now: Instant) -> f64 {
        let (requests, accepts) = self.counts(now);
        self.probability(requests, accepts)
    }

    /// `max(0, (requests − K × accepts) / (requests + 1))`.
    pub fn probability(&self, requests: u64, accepts: u64) -> f64 {
        let r = requests as f64;
        ((r - self.k * accepts as f64) / (r + 1.0)).max(0.0)
    }
}

impl Budget for AdaptiveThrottle {
    fn admit(&self, now: Instant, _retry: bool, draw: f64) -> bool {
        let g = self.clock.generation(now);
        // Counted whether or not it is refused: that is what makes the throttle let a trickle
        // through (requests grow, accepts do not, but p stays below 1). The decision is drawn
        // from the counts just before this request.
        let [requests, accepts] = self.counts.sums(g, SPAN, 0, Ordering::SeqCst);
        let _ = self.counts.incr(REQUESTS, g, Ordering::SeqCst);
        // Healthy (the common case): skip the division. `requests <= accepts` implies the
        // float comparison (K ≥ 1, and rounding is monotone) without converting to floats.
        if requests <= accepts || requests as f64 <= self.k * accepts as f64 {
            return true;
        }
        draw >= self.probability(requests, accepts)
    }

    fn withdraw(&self, _: Instant, _: RetryCause) -> Option<Withdrawal> {
        Some(Withdrawal::new(0))
    }

    fn record(&self, now: Instant, _: Option<Withdrawal>, outcome: AttemptOutcome) {
        // A non-retryable answer (a 404) is still one the backend accepted to give: the book's
        // `accepts` are the requests the backend did not reject for overload.
        if matches!(outcome, AttemptOutcome::Answered | AttemptOutcome::Rejected) {
            let _ = self.counts.incr(ACCEPTS, self.clock.generation(now), Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Instant {
        Instant::from_nanos(secs * 1_000_000_000)
    }

    #[test]
    fn validates() {
        let e = AdaptiveThrottle::new(Duration::from_millis(999), 2.0).unwrap_err();
        assert_eq!(e.field(), "budget.window");
        assert!(AdaptiveThrottle::new(Duration::from_secs(3601), 2.0).is_err());
        assert_eq!(
            AdaptiveThrottle::new(Duration::from_secs(60), 0.9).unwrap_err().field(),
            "budget.k"
        );
        assert!(AdaptiveThrottle::new(Duration::from_secs(60), f64::NAN).is_err());
        assert!(AdaptiveThrottle::new(Duration::from_secs(1), 1.1).is_ok());
    }

    #[test]
    fn formula() {
        let t = AdaptiveThrottle::default();
        assert_eq!(t.probability(0, 0), 0.0);
        assert_eq!(t.probability(100, 50), 0.0);
        assert_eq!(t.probability(100, 60), 0.0, "never negative");
        assert_eq!(t.probability(99, 0), 0.99);
        assert_eq!(t.probability(100, 40), 20.0 / 101.0);
    }

    #[test]
    fn refused_attempts_still_count_and_window_forgets() {
        let t = AdaptiveThrottle::default();
        for _ in 0..10 {
            t.admit(at(0), false, 0.0); // draw 0 is refused whenever p > 0
        }
        assert_eq!(t.counts(at(0)), (10, 0));
        assert!(!t.admit(at(0), false, 0.0));
        assert_eq!(t.counts(at(0)), (11, 0));
        // 12 slots of 10 s plus the one in progress: slot 0 is forgotten at 130 s.
        assert_eq!(t.counts(at(129)), (11, 0));
        assert_eq!(t.counts(at(130)), (0, 0));
        assert!(t.admit(at(130), false, 0.0));
    }

    /// A 404 is an answer the backend chose to give, not a refusal: it counts as an accept, a
    /// failure does not. Mutation checked: counting only `Answered` gives (3, 1).
    #[test]
    fn non_retryable_answers_are_accepts() {
        let t = AdaptiveThrottle::default();
        t.admit(at(0), false, 0.5);
        t.record(at(0), None, AttemptOutcome::Rejected);
        t.admit(at(0), false, 0.5);
        t.record(at(0), None, AttemptOutcome::Answered);
        t.admit(at(0), false, 0.5);
        t.record(at(0), None, AttemptOutcome::Failed(RetryCause::Throttled));
        assert_eq!(t.counts(at(0)), (3, 2));
    }

    #[test]
    fn withdraw_always_allows() {
        let t = AdaptiveThrottle::default();
        for _ in 0..100 {
            t.admit(at(1), false, 0.0);
        }
        assert!(t.withdraw(at(1), RetryCause::Throttled).is_some());
    }
}
