//! Server metrics: rejections by reason, queue, in-flight, goodput vs throughput, success latency.
//!
//! Plain atomics behind an `Arc`, read through [`ServerMetrics::snapshot`]; with the `prometheus`
//! feature, `ServerMetrics::register` exports them at scrape time (names and PromQL in the
//! `server::prometheus` module). Two choices follow the load-shedding literature (Amazon
//! Builders' Library, "Using load shedding to avoid overload"):
//!
//! - **Goodput is not throughput.** Throughput counts every response the handler produced;
//!   goodput counts only successful ones that were ready before the caller's deadline. A server
//!   in a retry storm has healthy throughput and zero goodput.
//! - **Latency of successes only.** Fast rejections would make the median look excellent, so the
//!   histogram records only responses that count as goodput.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use seawall::metrics::ATTEMPT_NUMBERS;
use seawall::metrics::top::{CallerCount, TopCallers};
use seawall::time::Instant;

/// Why a request was answered by a server layer instead of the handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The in-flight cap was reached and the queue was full.
    QueueFull,
    /// CoDel dropped it: the queue had a standing delay and this request waited too long.
    CodelDrop,
    /// Its deadline passed before (or while) it could be served.
    DeadlineExpired,
    /// A retry (attempt > 1) shed to make room for, or protect, first attempts.
    RetryShed,
    /// Turned away at the door because an operator cut admission below 100 %
    /// ([`ShedLayer::admission`](crate::server::ShedLayer::with_admission); `seawall escape`).
    AdmissionCut,
}

impl RejectReason {
    /// Every reason, in the order of [`MetricsSnapshot::rejected`].
    pub const ALL: [RejectReason; 5] = [
        RejectReason::QueueFull,
        RejectReason::CodelDrop,
        RejectReason::DeadlineExpired,
        RejectReason::RetryShed,
        RejectReason::AdmissionCut,
    ];

    /// A short stable label (for metric labels).
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::QueueFull => "queue_full",
            RejectReason::CodelDrop => "codel_drop",
            RejectReason::DeadlineExpired => "deadline_expired",
            RejectReason::RetryShed => "retry_shed",
            RejectReason::AdmissionCut => "admission_cut",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Upper bounds of the latency buckets: 2^k microseconds for k = 0..=23 (1 µs … ~8.4 s); one
/// more bucket catches everything slower.
pub const LATENCY_BUCKETS: usize = 25;

/// The upper bound of latency bucket `i` (`None` for the last, unbounded bucket).
pub fn bucket_upper_bound(i: usize) -> Option<Duration> {
    (i + 1 < LATENCY_BUCKETS).then(|| Duration::from_micros(1 << i))
}

#[derive(Debug)]
struct Inner {
    arrivals: [AtomicU64; ATTEMPT_NUMBERS],
    callers: std::sync::Mutex<TopCallers>,
    rejected: [AtomicU64; RejectReason::ALL.len()],
    in_flight: AtomicI64,
    queued: AtomicI64,
    oldest_queued_nanos: AtomicU64,
    /// Arrival instant (clock nanos) of the oldest queued request; `u64::MAX` when none.
    oldest_arrival_nanos: AtomicU64,
    throughput: AtomicU64,
    goodput: AtomicU64,
    latency: [AtomicU64; LATENCY_BUCKETS],
    latency_sum_nanos: AtomicU64,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            arrivals: Default::default(),
            callers: Default::default(),
            rejected: Default::default(),
            in_flight: AtomicI64::new(0),
            queued: AtomicI64::new(0),
            oldest_queued_nanos: AtomicU64::new(0),
            oldest_arrival_nanos: AtomicU64::new(u64::MAX),
            throughput: AtomicU64::new(0),
            goodput: AtomicU64::new(0),
            latency: Default::default(),
            latency_sum_nanos: AtomicU64::new(0),
        }
    }
}

/// A cheap-to-clone handle every server layer reports into.
#[derive(Debug, Clone, Default)]
pub struct ServerMetrics(Arc<Inner>);

/// A point-in-time copy of [`ServerMetrics`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Requests arriving at `ShedLayer`'s door by attempt number, `[0]` first attempts, the
    /// last also counting later ones (labels [`seawall::metrics::ATTEMPT_LABELS`]).
    pub arrivals: [u64; ATTEMPT_NUMBERS],
    /// The heaviest callers, heaviest first, when `ShedLayer::with_callers` names them.
    pub callers: Vec<CallerCount>,
    /// Rejections, indexed like [`RejectReason::ALL`].
    pub rejected: [u64; RejectReason::ALL.len()],
    /// Requests running in the handler now.
    pub in_flight: u64,
    /// Requests waiting in the `ShedLayer` queue now.
    pub queue_len: u64,
    /// Age of the oldest queued request when the queue last changed (zero if empty).
    pub oldest_queued: Duration,
    /// Responses the handler produced (any status).
    pub throughput: u64,
    /// Successful responses (status below 500, not 408/429) produced before the deadline.
    pub goodput: u64,
    /// Counts of goodput latencies per bucket (see [`bucket_upper_bound`]).
    pub latency: [u64; LATENCY_BUCKETS],
    /// Sum of goodput latencies (a histogram's `_sum`; wraps after ~584 years of latency).
    pub latency_sum: Duration,
}

impl MetricsSnapshot {
    /// Of the arrivals, the share that were retries (attempt ≥ 2); `None` before any arrival.
    pub fn retry_share(&self) -> Option<f64> {
        let all: u64 = self.arrivals.iter().sum();
        (all > 0).then(|| (all - self.arrivals[0]) as f64 / all as f64)
    }

    /// Rejections for one reason.
    pub fn rejected(&self, reason: RejectReason) -> u64 {
        self.rejected[reason.index()]
    }

    /// All rejections.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.iter().sum()
    }
}

impl ServerMetrics {
    /// Fresh counters, all zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts a request arriving with attempt number `attempt` (1 = first; 0 is read as 1).
    /// `ShedLayer` calls it for every request at its door.
    pub fn arrival(&self, attempt: u32) {
        self.0.arrivals[seawall::metrics::attempt_index(attempt)].fetch_add(1, Relaxed);
    }

    /// Counts a request from `caller` in the table of heaviest callers (bounded: see
    /// [`TopCallers`]).
    pub fn caller(&self, caller: &str) {
        self.0.callers.lock().unwrap_or_else(|e| e.into_inner()).record(caller);
    }

    /// Counts a rejection.
    pub fn reject(&self, reason: RejectReason) {
        self.0.rejected[reason.index()].fetch_add(1, Relaxed);
    }

    pub(crate) fn set_gauges(&self, in_flight: usize, len: usize, oldest: Duration, now: Instant) {
        self.0.in_flight.store(in_flight as i64, Relaxed);
        self.0.queued.store(len as i64, Relaxed);
        self.0
            .oldest_queued_nanos
            .store(u64::try_from(oldest.as_nanos()).unwrap_or(u64::MAX), Relaxed);
        let arrival = if len == 0 { u64::MAX } else { now.saturating_sub(oldest).as_nanos() };
        self.0.oldest_arrival_nanos.store(arrival, Relaxed);
    }

    /// Age of the oldest queued request at `now` (zero if the queue is empty), where `now` comes
    /// from the clock the `ShedLayer` runs on. Unlike [`MetricsSnapshot::oldest_queued`] it keeps
    /// growing while the queue is stuck and nothing arrives, which is when it matters.
    pub fn oldest_queued_at(&self, now: Instant) -> Duration {
        match self.0.oldest_arrival_nanos.load(Relaxed) {
            u64::MAX => Duration::ZERO,
            arrival => Duration::from_nanos(now.as_nanos().saturating_sub(arrival)),
        }
    }

    /// Records a response the handler produced: `good` if it counts as goodput (then its
    /// `latency` goes into the histogram).
    pub fn response(&self, good: bool, latency: Duration) {
        self.0.throughput.fetch_add(1, Relaxed);
        if good {
            self.0.goodput.fetch_add(1, Relaxed);
            let micros = latency.as_micros().max(1);
            let i = (128 - (micros - 1).leading_zeros()) as usize;
            self.0.latency[i.min(LATENCY_BUCKETS - 1)].fetch_add(1, Relaxed);
            let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
            self.0.latency_sum_nanos.fetch_add(nanos, Relaxed);
        }
    }

    /// Reads every counter (each individually atomic; the set is not one transaction).
    pub fn snapshot(&self) -> MetricsSnapshot {
        let i = &self.0;
        MetricsSnapshot {
            arrivals: std::array::from_fn(|k| i.arrivals[k].load(Relaxed)),
            callers: i.callers.lock().unwrap_or_else(|e| e.into_inner()).top(),
            rejected: std::array::from_fn(|k| i.rejected[k].load(Relaxed)),
            in_flight: i.in_flight.load(Relaxed).max(0) as u64,
            queue_len: i.queued.load(Relaxed).max(0) as u64,
            oldest_queued: Duration::from_nanos(i.oldest_queued_nanos.load(Relaxed)),
            throughput: i.throughput.load(Relaxed),
            goodput: i.goodput.load(Relaxed),
            latency: std::array::from_fn(|k| i.latency[k].load(Relaxed)),
            latency_sum: Duration::from_nanos(i.latency_sum_nanos.load(Relaxed)),
        }
    }
}

/// Whether a status counts as success for goodput: below 500 and neither 408 nor 429.
pub(crate) fn is_success(status: http::StatusCode) -> bool {
    let s = status.as_u16();
    s < 500 && s != 408 && s != 429
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_powers_of_two_micros() {
        let m = ServerMetrics::new();
        m.response(true, Duration::from_micros(1));
        m.response(true, Duration::from_micros(3));
        m.response(true, Duration::from_micros(4));
        m.response(true, Duration::from_secs(100));
        m.response(false, Duration::from_micros(4));
        let s = m.snapshot();
        assert_eq!(s.latency[0], 1);
        assert_eq!(s.latency[2], 2);
        assert_eq!(s.latency[LATENCY_BUCKETS - 1], 1);
        assert_eq!((s.throughput, s.goodput), (5, 4));
        assert_eq!(s.latency_sum, Duration::from_micros(100_000_008));
        assert_eq!(bucket_upper_bound(2), Some(Duration::from_micros(4)));
        assert_eq!(bucket_upper_bound(LATENCY_BUCKETS - 1), None);
    }

    #[test]
    fn rejections_by_reason() {
        let m = ServerMetrics::new();
        m.reject(RejectReason::RetryShed);
        m.reject(RejectReason::RetryShed);
        m.reject(RejectReason::QueueFull);
        let s = m.snapshot();
        assert_eq!(s.rejected(RejectReason::RetryShed), 2);
        assert_eq!(s.rejected_total(), 3);
    }
}
