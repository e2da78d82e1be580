//! Envoy's retry budget: concurrent retries capped at a share of the requests in flight.

use std::sync::atomic::{AtomicI64, Ordering};

use super::{AttemptOutcome, Budget, RetryCause, Withdrawal};
use crate::error::{ConfigError, check_f64};
use crate::time::Instant;

/// Concurrent retries ≤ max(`budget_percent` % × (active + pending), `min_retry_concurrency`).
///
/// Source: Envoy `envoy.config.cluster.v3.CircuitBreakers.Thresholds.RetryBudget`: defaults
/// `budget_percent` 20 % and `min_retry_concurrency` 3; the limit is computed as in Envoy's
/// `ResourceManagerImpl::RetryBudgetImpl::max()`, `max(uint64(percent / 100 × active),
/// min_retry_concurrency)` (the product truncated), and a retry is allowed while the retries in
/// flight are below it.
///
/// Unlike the other budgets this one does not look at history: it bounds how many retries are
/// *outstanding at once*, so it reacts instantly and forgets instantly.
///
/// Mapping to the [`Budget`] protocol:
/// - **active + pending** is the number of attempts admitted ([`Budget::admit`], first attempts
///   and retries alike, as Envoy's `upstream_rq_active` counts retried requests) and not yet
///   ended ([`Budget::record`]). Envoy's *pending* requests wait for a connection pool; here an
///   attempt waiting for a connection has already been admitted, so it is counted as active.
/// - **a retry in flight** holds a slot from [`Budget::withdraw`] — before its backoff wait, as in
///   Envoy's `RetryStateImpl`, which takes the retry resource when it schedules the retry — until
///   the retry ends (`record` with `paid_by: Some(..)`) or is dropped ([`Budget::release`]).
///   Its [`Withdrawal::cost`] is 1, the slot.
///
/// Counters are two `AtomicI64`s; the limit is checked and the slot taken in one
/// compare-and-swap, so racing threads never take more slots than the limit they read. Unbalanced
/// calls (a `record` without an `admit`) cannot wrap a counter or lend the budget a slot.
///
/// Cost: a first attempt that succeeds is two read-modify-writes of `active` (one `fetch_add` in
/// `admit`, one `fetch_sub` in `record`) and nothing else, so about twice a bare atomic add is
/// its floor. Neither can be skipped, even with no retry outstanding: the limit a *later*
/// `withdraw` computes is a share of the attempts in flight at that moment, so every attempt
/// must be in `active` from its `admit` to its `record`; and a shared count that many threads
/// change needs a read-modify-write per change. (Per-thread shards would spare the contended
/// cache line, not the two writes, and would make `withdraw` sum them.)
///
/// ```
/// use seawall::budget::{AttemptOutcome, Budget, EnvoyRetryBudget, RetryCause};
/// use seawall::time::Instant;
///
/// let b = EnvoyRetryBudget::default();
/// let now = Instant::ZERO;
/// for _ in 0..20 {
///     b.admit(now, false, 0.0);
/// }
/// assert_eq!(b.max_retries(), 4); // 20 % of 20 active
/// let held: Vec<_> = (0..10).filter_map(|_| b.withdraw(now, RetryCause::Transient)).collect();
/// assert_eq!(held.len(), 4);
/// b.release(now, held[0]);
/// assert!(b.withdraw(now, RetryCause::Transient).is_some());
/// ```
#[derive(Debug)]
pub struct EnvoyRetryBudget {
    active: AtomicI64,
    retries: AtomicI64,
    /// `budget_percent / 100`, the factor Envoy multiplies by.
    fraction: f64,
    min_retry_concurrency: u32,
}

impl Default for EnvoyRetryBudget {
    /// 20 % and at least 3 concurrent retries: Envoy's defaults.
    fn default() -> Self {
        EnvoyRetryBudget::new(20.0, 3).expect("defaults are valid")
    }
}

impl EnvoyRetryBudget {
    /// A budget of `budget_percent` (in [0, 100], Envoy's `Percent`) of the attempts in flight,
    /// and never fewer than `min_retry_concurrency` retries.
    pub fn new(budget_percent: f64, min_retry_concurrency: u32) -> Result<Self, ConfigError> {
        let p = check_f64("budget.budget_percent", "in [0, 100]", budget_percent, 0.0, 100.0)?;
        Ok(EnvoyRetryBudget {
            active: AtomicI64::new(0),
            retries: AtomicI64::new(0),
            fraction: p / 100.0,
            min_retry_concurrency,
        })
    }

    /// Attempts admitted and not yet ended ("active + pending").
    pub fn active(&self) -> u64 {
        self.active.load(Ordering::Relaxed).max(0) as u64
    }

    /// Retries holding a slot.
    pub fn retries_in_flight(&self) -> u64 {
        self.retries.load(Ordering::Relaxed).max(0) as u64
    }

    /// The current limit on concurrent retries.
    pub fn max_retries(&self) -> u64 {
        self.limit(self.active())
    }

    /// Envoy's formula for `active` attempts in flight.
    pub fn limit(&self, active: u64) -> u64 {
        // `as` truncates toward zero and saturates, like Envoy's conversion to uint64_t.
        ((self.fraction * active as f64) as u64).max(u64::from(self.min_retry_concurrency))
    }

    fn free_slot(&self) {
        decrement(&self.retries);
    }
}

/// Subtracts one; a decrement below zero (an unbalanced call) is undone rather than kept, so it
/// cannot lend the budget a slot. One `fetch_sub` in the balanced case, no retry loop.
fn decrement(c: &AtomicI64) {
    if c.fetch_sub(1, Ordering::AcqRel) <= 0 {
        c.fetch_add(1, Ordering::AcqRel);
    }
}

impl Budget for EnvoyRetryBudget {
    /// `admit` ignores its draw: no random stream needs seeding for it.
    fn admit_draws(&self) -> bool {
        false
    }

    fn admit(&self, _: Instant, _: bool, _: f64) -> bool {
        self.active.fetch_add(1, Ordering::AcqRel);
        true
    }

    fn withdraw(&self, _: Instant, _: RetryCause) -> Option<Withdrawal> {
        let active = self.active.load(Ordering::Acquire).max(0) as u64;
        let max = self.limit(active);
        self.retries
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                ((r.max(0) as u64) < max).then_some(r + 1)
            })
            .ok()
            .map(|_| Withdrawal::new(1))
    }

    /// Any outcome, a non-retryable answer included, ends the attempt the same way: Envoy's
    /// budget bounds only how many retries are in flight, never what they answered.
    fn record(&self, _: Instant, paid_by: Option<Withdrawal>, _: AttemptOutcome) {
        decrement(&self.active);
        if paid_by.is_some_and(|w| w.cost() > 0) {
            self.free_slot();
        }
    }

    fn release(&self, _: Instant, w: Withdrawal) {
        if w.cost() > 0 {
            self.free_slot();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Instant = Instant::ZERO;
    const FAIL: AttemptOutcome = AttemptOutcome::Failed(RetryCause::Transient);

    #[test]
    fn validates() {
        assert_eq!(EnvoyRetryBudget::new(100.5, 3).unwrap_err().field(), "budget.budget_percent");
        assert!(EnvoyRetryBudget::new(-1.0, 3).is_err());
        assert!(EnvoyRetryBudget::new(f64::NAN, 3).is_err());
        assert!(EnvoyRetryBudget::new(0.0, 0).is_ok());
    }

    #[test]
    fn formula_truncates_and_has_a_floor() {
        let b = EnvoyRetryBudget::default();
        assert_eq!(b.limit(0), 3);
        assert_eq!(b.limit(19), 3); // 3.8 → 3
        assert_eq!(b.limit(20), 4);
        assert_eq!(b.limit(24), 4); // 4.8 → 4
        assert_eq!(b.limit(1000), 200);
        assert_eq!(EnvoyRetryBudget::new(0.0, 0).unwrap().limit(1000), 0);
    }

    #[test]
    fn floor_of_three_with_nothing_in_flight() {
        let b = EnvoyRetryBudget::default();
        let held: Vec<_> = (0..5).filter_map(|_| b.withdraw(T, RetryCause::Timeout)).collect();
        assert_eq!(held.len(), 3);
        assert!(held.iter().all(|w| w.cost() == 1));
        // A retry is admitted (now active) and ends: its slot comes back.
        b.admit(T, true, 0.0);
        b.record(T, Some(held[0]), FAIL);
        assert_eq!((b.active(), b.retries_in_flight()), (0, 2));
        // A first attempt ending does not free a retry slot.
        b.admit(T, false, 0.0);
        b.record(T, None, AttemptOutcome::Answered);
        assert_eq!(b.retries_in_flight(), 2);
    }

    #[test]
    fn unbalanced_calls_do_not_wrap() {
        let b = EnvoyRetryBudget::default();
        b.record(T, Some(Withdrawal::new(1)), AttemptOutcome::Abandoned);
        b.release(T, Withdrawal::new(1));
        assert_eq!((b.active(), b.retries_in_flight(), b.max_retries()), (0, 0, 3));
        assert_eq!((0..5).filter_map(|_| b.withdraw(T, RetryCause::Timeout)).count(), 3);
    }
}
