//! Counters every part reports into: calls, attempts, retries, give-ups by reason.
//!
//! Plain relaxed atomics; exporters (Prometheus, OpenTelemetry) live with the middleware and read
//! a [`Snapshot`]. The signal to watch is attempts per logical call: a
//! healthy client sits at ≈ 1.0, a storm pushes it towards the attempt cap.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::policy::GiveUpReason;

/// Largest attempt count with its own histogram bucket; longer calls land in the last bucket.
pub const MAX_TRACKED_ATTEMPTS: usize = 8;

/// Counters for one client (one policy).
///
/// A successful call with one attempt touches two of them: its first attempt and its end. Calls
/// are counted as their first attempt starts, or as they end without one (refused, abandoned),
/// so a call costs no counter of its own; attempts are first attempts plus retries.
#[derive(Debug, Default)]
pub struct Metrics {
    first_attempts: AtomicU64,
    unsent: AtomicU64,
    retries: AtomicU64,
    give_ups: [AtomicU64; GiveUpReason::COUNT],
    attempts_per_call: [AtomicU64; MAX_TRACKED_ATTEMPTS],
}

/// A point-in-time copy of [`Metrics`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Logical calls: those that sent a first attempt or ended without one (a call between its
    /// start and its first attempt's decision is not counted yet).
    pub calls: u64,
    /// Attempts sent (first attempts and retries).
    pub attempts: u64,
    /// Retries sent (attempts after the first).
    pub retries: u64,
    /// Calls that ended in success (derived: ended calls that did not give up).
    pub successes: u64,
    /// Calls given up, indexed by [`GiveUpReason::index`].
    pub give_ups: [u64; GiveUpReason::COUNT],
    /// Finished calls by number of attempts: `[0]` is 1 attempt, the last bucket is 8 or more.
    pub attempts_per_call: [u64; MAX_TRACKED_ATTEMPTS],
}

impl Snapshot {
    /// Calls given up for `reason`.
    pub fn give_ups(&self, reason: GiveUpReason) -> u64 {
        self.give_ups[reason.index()]
    }

    /// Retries refused by the budget or local throttling ("retry overflow").
    pub fn retry_overflow(&self) -> u64 {
        self.give_ups(GiveUpReason::BudgetExhausted) + self.give_ups(GiveUpReason::ThrottledLocally)
    }

    /// Attempts per logical call (0 when there were no calls).
    pub fn attempts_per_call(&self) -> f64 {
        if self.calls == 0 { 0.0 } else { self.attempts as f64 / self.calls as f64 }
    }
}

impl Metrics {
    /// Zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub(crate) fn attempt_sent(&self, retry: bool) {
        if retry {
            self.retries.fetch_add(1, Ordering::Relaxed);
        } else {
            self.first_attempts.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn call_ended(&self, attempts: u32, outcome: Result<(), GiveUpReason>) {
        // Successes are not counted: they are the ended calls (the histogram) that did not give
        // up, which saves the success path one shared atomic.
        if let Err(r) = outcome {
            self.give_ups[r.index()].fetch_add(1, Ordering::Relaxed);
        }
        if attempts == 0 {
            self.unsent.fetch_add(1, Ordering::Relaxed);
        }
        let i = (attempts.max(1) as usize).min(MAX_TRACKED_ATTEMPTS) - 1;
        self.attempts_per_call[i].fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of the counters. Not atomic across counters (each is read once, relaxed).
    pub fn snapshot(&self) -> Snapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let give_ups: [u64; GiveUpReason::COUNT] = std::array::from_fn(|i| load(&self.give_ups[i]));
        let attempts_per_call: [u64; MAX_TRACKED_ATTEMPTS] =
            std::array::from_fn(|i| load(&self.attempts_per_call[i]));
        let ended: u64 = attempts_per_call.iter().sum();
        let (first, retries) = (load(&self.first_attempts), load(&self.retries));
        Snapshot {
            calls: first + load(&self.unsent),
            attempts: first + retries,
            retries,
            successes: ended.saturating_sub(give_ups.iter().sum()),
            give_ups,
            attempts_per_call,
        }
    }
}
