//! Counters every part reports into: calls, attempts, retries, give-ups by reason.
//!
//! Plain relaxed atomics, and the only counting on the hot path: exporters (the middleware's
//! Prometheus and OpenTelemetry views) read a [`Snapshot`] at scrape time, under the names in
//! [`names`]. The signal to watch is attempts per logical call: a healthy client sits at
//! ≈ 1.0, a storm pushes it towards the attempt cap.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::reason::GiveUpReason;

/// Largest attempt count with its own histogram bucket; longer calls land in the last bucket.
pub const MAX_TRACKED_ATTEMPTS: usize = 8;

/// Attempt numbers with a counter of their own (`1`, …, `10`); the last also counts any later
/// attempt.
pub const ATTEMPT_NUMBERS: usize = 10;

/// The `attempt` label of each attempt-number counter, `[0]` for first attempts: the client's
/// [`names::CLIENT_ATTEMPTS`], the server's [`names::SERVER_ARRIVALS`] and the proxy's
/// [`names::PROXY_ATTEMPTS`] all use these.
pub const ATTEMPT_LABELS: [&str; ATTEMPT_NUMBERS] =
    ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10+"];

/// The index of attempt number `attempt` (1 = first; 0 is read as 1) in [`ATTEMPT_LABELS`].
pub const fn attempt_index(attempt: u32) -> usize {
    let a = if attempt == 0 { 1 } else { attempt as usize };
    if a > ATTEMPT_NUMBERS { ATTEMPT_NUMBERS - 1 } else { a - 1 }
}

/// Upper bounds of the call-duration buckets, in nanoseconds: 1 ms doubling to 16.4 s (15
/// buckets, as Prometheus' `exponential_buckets(0.001, 2.0, 15)`), then `+Inf`.
pub const DURATION_BOUNDS_NS: [u64; 15] = {
    let mut b = [0; 15];
    let mut i = 0;
    while i < 15 {
        b[i] = 1_000_000 << i;
        i += 1;
    }
    b
};

/// Number of call-duration buckets: [`DURATION_BOUNDS_NS`] and `+Inf`.
pub const DURATION_BUCKETS: usize = DURATION_BOUNDS_NS.len() + 1;

/// The exported metric names, defined once: the middleware's exporters register these and
/// `seawall-detect` reads them.
pub mod names {
    /// Logical calls (counter).
    pub const CLIENT_CALLS: &str = "seawall_client_call_started_total";
    /// Attempts sent, label `attempt` (counter).
    pub const CLIENT_ATTEMPTS: &str = "seawall_client_attempt_started_total";
    /// Attempts after the first (counter).
    pub const CLIENT_RETRIES: &str = "seawall_client_retries_total";
    /// Calls given up, label `reason` (counter).
    pub const CLIENT_GIVE_UPS: &str = "seawall_client_give_up_total";
    /// Retries refused by the budget or local throttling
    /// ([`GiveUpReason::is_retry_overflow`](crate::reason::GiveUpReason::is_retry_overflow)),
    /// counter.
    pub const CLIENT_RETRY_OVERFLOW: &str = "seawall_client_retry_overflow_total";
    /// The policy's circuit breaker: 0 closed, 1 open, 2 half-open (gauge).
    pub const CLIENT_BREAKER_STATE: &str = "seawall_client_breaker_state";
    /// Duration of successful logical calls, seconds (histogram).
    pub const CLIENT_CALL_DURATION: &str = "seawall_client_call_duration_seconds";
    /// Successful logical calls: the count of the call-duration histogram.
    pub const CLIENT_CALL_SUCCESSES: &str = "seawall_client_call_duration_seconds_count";
    /// Responses the server's handler produced, any status (counter).
    pub const SERVER_THROUGHPUT: &str = "seawall_server_throughput_total";
    /// Successful responses produced before the caller's deadline (counter).
    pub const SERVER_GOODPUT: &str = "seawall_server_goodput_total";
    /// Requests answered by a server layer instead of the handler, label `reason` (counter).
    pub const SERVER_REJECTED: &str = "seawall_server_rejected_total";
    /// Requests running in the handler now (gauge).
    pub const SERVER_IN_FLIGHT: &str = "seawall_server_in_flight";
    /// Requests waiting in the shedding queue now (gauge).
    pub const SERVER_QUEUE_LENGTH: &str = "seawall_server_queue_length";
    /// Age of the oldest queued request, seconds (gauge).
    pub const SERVER_OLDEST_QUEUED: &str = "seawall_server_oldest_queued_seconds";
    /// Requests arriving at the server's door, label `attempt` from `Request-Attempt` or
    /// `grpc-previous-rpc-attempts` (counter): the share with `attempt` ≥ 2 is the retry share.
    pub const SERVER_ARRIVALS: &str = "seawall_server_arrivals_total";
    /// Requests arriving, by caller, label `caller`, for the heaviest callers only
    /// ([`TopCallers`](super::top::TopCallers)), counter.
    pub const SERVER_CALLER_ARRIVALS: &str = "seawall_server_caller_arrivals_total";
    /// Requests the proxy saw, label `attempt` as [`SERVER_ARRIVALS`] (counter).
    pub const PROXY_ATTEMPTS: &str = "seawall_proxy_attempts_total";
    /// Requests the proxy saw, by caller, label `caller`, heaviest callers only (counter).
    pub const PROXY_CALLER_REQUESTS: &str = "seawall_proxy_caller_requests_total";
}

pub mod top;

/// Counters for one client (one policy).
///
/// A successful call with one attempt touches two of them: its first attempt and its end. Calls
/// are counted as their first attempt starts, or as they end without one (refused, abandoned),
/// so a call costs no counter of its own; attempts are first attempts plus retries.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Attempts by number: `[0]` is first attempts, the last also counts later ones.
    attempts: [AtomicU64; ATTEMPT_NUMBERS],
    unsent: AtomicU64,
    give_ups: [AtomicU64; GiveUpReason::COUNT],
    attempts_per_call: [AtomicU64; MAX_TRACKED_ATTEMPTS],
    durations: [AtomicU64; DURATION_BUCKETS],
    duration_sum_ns: AtomicU64,
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
    /// Attempts sent by attempt number: `[0]` is first attempts, the last bucket also counts
    /// later attempts.
    pub attempts_by_number: [u64; ATTEMPT_NUMBERS],
    /// Successful calls by duration, per bucket (not cumulative): bucket `i` is at most
    /// [`DURATION_BOUNDS_NS`]`[i]`, the last is `+Inf`. Fed by [`Metrics::call_took`].
    pub durations: [u64; DURATION_BUCKETS],
    /// Sum of the durations in [`durations`](Self::durations).
    pub duration_sum: Duration,
}

impl Snapshot {
    /// Calls given up for `reason`.
    pub fn give_ups(&self, reason: GiveUpReason) -> u64 {
        self.give_ups[reason.index()]
    }

    /// Retries refused by the budget or local throttling ("retry overflow").
    pub fn retry_overflow(&self) -> u64 {
        GiveUpReason::ALL.iter().filter(|r| r.is_retry_overflow()).map(|&r| self.give_ups(r)).sum()
    }

    /// Adds `other`'s counts to these (several policies exported as one client).
    pub fn add(&mut self, other: &Snapshot) {
        fn sum<const N: usize>(a: &mut [u64; N], b: &[u64; N]) {
            a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
        }
        self.calls += other.calls;
        self.attempts += other.attempts;
        self.retries += other.retries;
        self.successes += other.successes;
        sum(&mut self.give_ups, &other.give_ups);
        sum(&mut self.attempts_per_call, &other.attempts_per_call);
        sum(&mut self.attempts_by_number, &other.attempts_by_number);
        sum(&mut self.durations, &other.durations);
        self.duration_sum += other.duration_sum;
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

    /// Counts attempt number `number` (1 = the first) as sent. [`RetryPolicy`] counts its own
    /// calls; this and [`Metrics::call_ended`] are for an adapter that drives another of the
    /// core's decision engines (the gRPC mode's `RetryState` and `HedgeState`, which hold no
    /// counters), so that its calls are counted by the same rules and exported under the same
    /// names. One relaxed add.
    ///
    /// [`RetryPolicy`]: crate::policy::RetryPolicy
    #[inline]
    pub fn attempt_sent(&self, number: u32) {
        let i = (number.max(1) as usize).min(ATTEMPT_NUMBERS) - 1;
        self.attempts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Records the duration of a successful call, all attempts and waits included. The policy
    /// does not know when a call ends on the caller's clock, so the adapter that measures it
    /// reports it (the middleware does when an exporter is attached). Two relaxed adds.
    pub fn call_took(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let i =
            DURATION_BOUNDS_NS.iter().position(|&b| ns <= b).unwrap_or(DURATION_BOUNDS_NS.len());
        self.durations[i].fetch_add(1, Ordering::Relaxed);
        self.duration_sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Counts a call as ended after `attempts` attempts (0: refused before its first), in
    /// success or given up for a reason (see [`Metrics::attempt_sent`]). Once per call: a call
    /// that never ends is not counted as one unless it sent an attempt.
    #[inline]
    pub fn call_ended(&self, attempts: u32, outcome: Result<(), GiveUpReason>) {
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
        let attempts_by_number: [u64; ATTEMPT_NUMBERS] =
            std::array::from_fn(|i| load(&self.attempts[i]));
        let first = attempts_by_number[0];
        let retries: u64 = attempts_by_number[1..].iter().sum();
        Snapshot {
            calls: first + load(&self.unsent),
            attempts: first + retries,
            retries,
            successes: ended.saturating_sub(give_ups.iter().sum()),
            give_ups,
            attempts_per_call,
            attempts_by_number,
            durations: std::array::from_fn(|i| load(&self.durations[i])),
            duration_sum: Duration::from_nanos(load(&self.duration_sum_ns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_by_number_durations_and_overflow() {
        let m = Metrics::new();
        for n in [1, 2, 3, 12] {
            m.attempt_sent(n);
        }
        m.call_ended(4, Err(GiveUpReason::BudgetExhausted));
        m.call_ended(0, Err(GiveUpReason::ThrottledLocally));
        m.call_ended(1, Err(GiveUpReason::AttemptsExhausted));
        m.call_took(Duration::from_millis(3));
        m.call_took(Duration::from_secs(60));
        let s = m.snapshot();
        assert_eq!(s.attempts_by_number, [1, 1, 1, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!((s.calls, s.attempts, s.retries), (2, 4, 3));
        assert_eq!(s.retry_overflow(), 2);
        assert_eq!(s.durations[2], 1, "3 ms is in the 4 ms bucket");
        assert_eq!(s.durations[DURATION_BUCKETS - 1], 1, "60 s is in +Inf");
        assert_eq!(s.duration_sum, Duration::from_millis(60_003));
        let mut twice = s.clone();
        twice.add(&s);
        assert_eq!((twice.calls, twice.retry_overflow()), (4, 4));
    }
}
