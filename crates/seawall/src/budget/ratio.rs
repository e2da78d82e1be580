//! The ratio budget (Finagle `RetryBudget`, tower `TpsBudget`, Google SRE): retries ≤ a share of
//! requests over a sliding window, plus a small reserve per second.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::window::{RING, SlotClock, SlotCounts};
use super::{Budget, RetryCause, Withdrawal};
use crate::error::{ConfigError, check_f64};
use crate::time::Instant;

/// Slots per window, as in Finagle's `WindowedAdder` and tower's `TpsBudget`.
const SLOTS: u32 = 10;
/// Slots a withdrawal looks back over: the window plus the slot in progress (see the type docs).
const SPAN: u32 = SLOTS + 1;
/// Milli-units per retry: the ratio is kept to three decimals, exactly.
const PER_RETRY: u64 = 1000;

/// Retries may be at most `ratio` × the requests of the last `window`, plus a reserve of
/// `min_retries_per_sec` × `window` so that a client with little traffic can still retry.
///
/// Source: Finagle's `RetryBudget(ttl, minRetriesPerSec, percentCanRetry)` and tower's
/// `TpsBudget` (its port), and the Google SRE book's per-client 10 % budget (ch. 22). Finagle's
/// and tower's defaults are 10 s, 10 retries/s and 20 % ([`RatioBudget::finagle`]); seawall's
/// default ([`RatioBudget::default`]) is 10 s, 10/s and 10 %, the SRE book's figure. Ranges are
/// Finagle's: window 1–60 s, ratio 0–1000.
///
/// Requests are deposited by [`Budget::admit`] on first attempts (retries do not earn retries).
/// A withdrawal is counted at once and kept only if, counting it, retries in the window are at
/// most `ratio × requests + reserve`; so racing threads can never overspend together — at worst
/// both are refused. Neither [`Budget::record`] nor [`Budget::release`] gives anything back (as
/// in Finagle and tower, which have no refund).
///
/// # The window, exactly
///
/// Time is cut into slots of `window / 10`. A withdrawal counts the slot `now` is in and the 10
/// before it, so at every granted retry at instant `x`:
///
/// > retries in `(x − window, x]` ≤ `ratio` × requests in `(x − window − window/10, x]` + reserve
///
/// The bound is on trailing windows, as the budget decides: an interval that begins just after a
/// burst of requests may hold retries that burst paid for. One slot of extra memory is the
/// granularity (tower keeps the same 10 slots plus one being
/// written). The ratio is exact to 0.001, where tower truncates `1 / percent` to an integer
/// (0.3 becomes one retry per 3 requests, 33 %).
///
/// The slots are tagged atomics (the crate's `budget::window` ring): no lock, no clock read; a first
/// attempt is one load and one `fetch_add` once the slot for `now` is known. Counts saturate at
/// about 4.29 × 10⁹ per slot, which only ever refuses retries.
///
/// ```
/// use seawall::budget::{Budget, RatioBudget, RetryCause};
/// use seawall::time::Instant;
/// use std::time::Duration;
///
/// // 10 % of requests, no reserve.
/// let b = RatioBudget::new(Duration::from_secs(10), 0, 0.1).unwrap();
/// let now = Instant::ZERO;
/// for _ in 0..50 {
///     b.admit(now, false, 0.0);
/// }
/// let granted = (0..10).filter(|_| b.withdraw(now, RetryCause::Transient).is_some()).count();
/// assert_eq!(granted, 5);
/// ```
#[derive(Debug)]
pub struct RatioBudget {
    clock: SlotClock,
    deposits: SlotCounts,
    withdrawals: SlotCounts,
    /// Milli-retries earned per request: `round(ratio × 1000)`.
    per_request: u64,
    /// Milli-retries of reserve: `min_retries_per_sec × window in ms`.
    reserve: u64,
}

impl Default for RatioBudget {
    /// seawall's preset: 10 s window, 10 retries/s reserve, 10 % (Google SRE book, ch. 22).
    fn default() -> Self {
        RatioBudget::new(Duration::from_secs(10), 10, 0.1).expect("defaults are valid")
    }
}

impl RatioBudget {
    /// The largest `min_retries_per_sec` accepted.
    pub const MAX_MIN_PER_SEC: u32 = 1_000_000;

    /// A budget over `window` (1–60 s, whole milliseconds count) allowing `ratio` retries per
    /// request (0 or 0.001–1000, three decimals kept) plus `min_retries_per_sec` (0–1 000 000)
    /// × `window` retries of reserve.
    pub fn new(
        window: Duration,
        min_retries_per_sec: u32,
        ratio: f64,
    ) -> Result<Self, ConfigError> {
        if window < Duration::from_secs(1) || window > Duration::from_secs(60) {
            return Err(ConfigError::out_of_range(
                "budget.window",
                "in [1 s, 60 s]",
                format!("{window:?}"),
            ));
        }
        if min_retries_per_sec > Self::MAX_MIN_PER_SEC {
            return Err(ConfigError::out_of_range(
                "budget.min_retries_per_sec",
                "in [0, 1000000]",
                min_retries_per_sec,
            ));
        }
        let ratio = check_f64("budget.ratio", "0 or in [0.001, 1000]", ratio, 0.0, 1000.0)?;
        if ratio > 0.0 && ratio < 0.001 {
            return Err(ConfigError::out_of_range("budget.ratio", "0 or in [0.001, 1000]", ratio));
        }
        let window_ms = window.as_millis() as u64; // ≤ 60 000
        Ok(RatioBudget {
            clock: SlotClock::new(window_ms * 1_000_000 / u64::from(SLOTS)),
            deposits: SlotCounts::new(),
            withdrawals: SlotCounts::new(),
            per_request: (ratio * 1000.0).round() as u64,
            reserve: u64::from(min_retries_per_sec) * window_ms,
        })
    }

    /// Finagle's (and tower's) defaults: 10 s, 10 retries/s, 20 %.
    pub fn finagle() -> Self {
        RatioBudget::new(Duration::from_secs(10), 10, 0.2).expect("defaults are valid")
    }

    /// Milli-retries available at `gen` (may be negative while racing withdrawals settle).
    fn balance(&self, generation: u64) -> i128 {
        let earned = self.deposits.sum(generation, SPAN, 0, Ordering::SeqCst);
        // Withdrawals by callers whose `now` is ahead of ours still count against us.
        let ahead = RING as u32 - SPAN;
        let spent = self.withdrawals.sum(generation, SPAN, ahead, Ordering::SeqCst);
        i128::from(earned) * i128::from(self.per_request) + i128::from(self.reserve)
            - i128::from(spent) * i128::from(PER_RETRY)
    }

    /// Whole retries that could be withdrawn at `now` (for metrics and tests).
    pub fn available(&self, now: Instant) -> u64 {
        let b = self.balance(self.clock.generation(now));
        u64::try_from(b / i128::from(PER_RETRY)).unwrap_or(0)
    }
}

impl Budget for RatioBudget {
    /// `admit` ignores its draw: no random stream needs seeding for it.
    fn admit_draws(&self) -> bool {
        false
    }

    fn admit(&self, now: Instant, retry: bool, _draw: f64) -> bool {
        if !retry {
            // A lost deposit (saturated slot, late caller) only makes the budget stricter.
            let _ = self.deposits.incr(0, self.clock.generation(now), Ordering::Relaxed);
        }
        true
    }

    fn withdraw(&self, now: Instant, _: RetryCause) -> Option<Withdrawal> {
        let g = self.clock.generation(now);
        // Count first, then check: two racing withdrawals each see the other's.
        if !self.withdrawals.incr(0, g, Ordering::SeqCst) {
            return None;
        }
        if self.balance(g) >= 0 {
            Some(Withdrawal::new(0))
        } else {
            self.withdrawals.decr(0, g, Ordering::SeqCst);
            None
        }
    }

    /// Outcomes do not matter here, a non-retryable answer included: like Finagle's
    /// `RetryBudget` and tower's `TpsBudget`, the budget is earned by requests sent (`admit`)
    /// and spent by retries (`withdraw`), whatever the answers were.
    fn record(&self, _: Instant, _: Option<Withdrawal>, _: super::AttemptOutcome) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn grant(b: &RatioBudget, now: Instant, n: usize) -> usize {
        (0..n).filter(|_| b.withdraw(now, RetryCause::Transient).is_some()).count()
    }

    #[test]
    fn validates() {
        let s = Duration::from_secs(1);
        assert_eq!(RatioBudget::new(s / 2, 10, 0.1).unwrap_err().field(), "budget.window");
        assert!(RatioBudget::new(s * 61, 10, 0.1).is_err());
        let e = RatioBudget::new(s, 2_000_000, 0.1).unwrap_err();
        assert_eq!(e.field(), "budget.min_retries_per_sec");
        assert_eq!(RatioBudget::new(s, 10, -0.1).unwrap_err().field(), "budget.ratio");
        assert!(RatioBudget::new(s, 10, 0.0004).is_err());
        assert!(RatioBudget::new(s, 10, f64::NAN).is_err());
        assert!(RatioBudget::new(s, 10, 0.0).is_ok());
        assert!(RatioBudget::new(s * 60, 1_000_000, 1000.0).is_ok());
    }

    #[test]
    fn reserve_is_min_per_sec_times_window() {
        // Finagle: 10 s × 10/s = 100 retries with no traffic at all.
        let b = RatioBudget::finagle();
        assert_eq!(b.available(at(0)), 100);
        assert_eq!(grant(&b, at(0), 150), 100);
        // The reserve comes back once those withdrawals leave the window (11 slots of 1 s).
        assert_eq!(b.available(at(10_999)), 0);
        assert_eq!(b.available(at(11_000)), 100);
    }

    #[test]
    fn ratio_exact_to_three_decimals() {
        // tower would allow one retry per 3 requests for 0.3 (33 %); here 30 of 100.
        let b = RatioBudget::new(Duration::from_secs(10), 0, 0.3).unwrap();
        for _ in 0..100 {
            b.admit(at(5), false, 0.0);
        }
        b.admit(at(5), true, 0.0); // a retry's attempt earns nothing
        assert_eq!(grant(&b, at(5), 100), 30);
    }

    #[test]
    fn deposits_expire_after_window_plus_one_slot() {
        let b = RatioBudget::new(Duration::from_secs(10), 0, 0.5).unwrap();
        for _ in 0..10 {
            b.admit(at(500), false, 0.0); // slot 0
        }
        assert_eq!(b.available(at(10_999)), 5, "slot 0 is still in slots 0..=10");
        assert_eq!(b.available(at(11_000)), 0);
    }

    #[test]
    fn late_caller_is_refused_not_lost() {
        let b = RatioBudget::new(Duration::from_secs(10), 1, 0.0).unwrap();
        assert_eq!(grant(&b, at(16_000), 5), 5, "reserve 10");
        // A caller a whole ring (16 slots) behind finds its slot taken by a newer generation.
        assert!(b.withdraw(at(0), RetryCause::Transient).is_none());
        // A caller one slot behind still sees the newer withdrawals.
        assert_eq!(grant(&b, at(15_000), 10), 5);
    }
}
