//! Counting what happened to each scheduled request, by the second it was due.
//!
//! Every count is bucketed by the request's *scheduled* second, so a second's goodput is the
//! share of the requests due in it that succeeded — the same cohort definition the simulator
//! and the synthetic lab use, and what [`seawall_report::judge`] expects.
//!
//! Latency is the time from the scheduled send to the end of the response body. A request that
//! reached its deadline is recorded *at* its deadline: its true latency is at least that, and
//! leaving it out would hide exactly the slow tail an open-loop test exists to find. Connect
//! failures and broken connections are counted but carry no latency.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Latencies above this are recorded as this (microseconds; well above the longest deadline).
pub(crate) const LATENCY_MAX_US: u64 = 300_000_000;

/// What became of one request that was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// A response with this status, body read to the end, before the deadline.
    Status(u16),
    /// The TCP connection or the HTTP handshake failed.
    Connect,
    /// The deadline passed first; the request was abandoned (its connection closed).
    Deadline,
    /// The connection broke or the response was malformed.
    Other,
}

/// Per-second counts. `offered = sent + dropped_late + dropped_full`; every sent request ends
/// in exactly one of `good`, `connect`, `deadline`, `status_5xx`, `status_4xx`, `other`.
#[derive(Debug, Clone)]
pub struct Second {
    /// Due in this second.
    pub offered: u64,
    /// Sent (within the lateness bound, under the in-flight bound).
    pub sent: u64,
    /// Not sent: the generator could not send it within the lateness bound.
    pub dropped_late: u64,
    /// Not sent: max in flight was reached.
    pub dropped_full: u64,
    /// Answered 2xx within the deadline.
    pub good: u64,
    /// Connect failures.
    pub connect: u64,
    /// Deadline exceeded.
    pub deadline: u64,
    /// Answered 5xx.
    pub status_5xx: u64,
    /// Answered 4xx.
    pub status_4xx: u64,
    /// Anything else: 1xx/3xx finals, broken connections, malformed responses.
    pub other: u64,
    /// Latency of this second's requests, microseconds (two significant digits).
    pub latency: Histogram<u32>,
    /// The same requests' latency from their actual send (the target's own response time),
    /// microseconds (two significant digits).
    pub from_send: Histogram<u32>,
    /// Worst lag behind the schedule of a request due in this second: the generator's own
    /// saturation, second by second.
    pub max_lag: Duration,
}

impl Second {
    fn new() -> Self {
        Self {
            offered: 0,
            sent: 0,
            dropped_late: 0,
            dropped_full: 0,
            good: 0,
            connect: 0,
            deadline: 0,
            status_5xx: 0,
            status_4xx: 0,
            other: 0,
            latency: Histogram::new_with_bounds(1, LATENCY_MAX_US, 2).expect("static bounds"),
            from_send: Histogram::new_with_bounds(1, LATENCY_MAX_US, 2).expect("static bounds"),
            max_lag: Duration::ZERO,
        }
    }
}

/// Everything the generator counted.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// One entry per second of the schedule.
    pub seconds: Vec<Second>,
    /// Latency of the whole run, microseconds (three significant digits).
    pub overall: Histogram<u64>,
    /// Latency of the whole run from each request's actual send rather than its schedule: the
    /// target's own response time (k6's `http_req_duration`), without the generator's lag or a
    /// wait for a free connection. Microseconds, three significant digits.
    pub from_send: Histogram<u64>,
    /// Worst lag of a sent request behind its scheduled time.
    pub max_lag: Duration,
    /// Most requests in flight at once.
    pub peak_in_flight: usize,
}

impl Recorder {
    /// Room for `seconds` seconds (at least one).
    pub fn new(seconds: usize) -> Self {
        Self {
            seconds: (0..seconds.max(1)).map(|_| Second::new()).collect(),
            overall: Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static bounds"),
            from_send: Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static bounds"),
            max_lag: Duration::ZERO,
            peak_in_flight: 0,
        }
    }

    fn at(&mut self, sec: usize) -> &mut Second {
        let last = self.seconds.len() - 1;
        &mut self.seconds[sec.min(last)]
    }

    /// A request was due in `sec`.
    pub fn offered(&mut self, sec: usize) {
        self.at(sec).offered += 1;
    }

    /// The request due in `sec` was dropped: late (`late`) or because the in-flight bound was hit.
    pub fn dropped(&mut self, sec: usize, late: bool) {
        let s = self.at(sec);
        if late { s.dropped_late += 1 } else { s.dropped_full += 1 }
    }

    /// The request due in `sec` was sent `lag` after its time, with `in_flight` now in flight.
    pub fn sent(&mut self, sec: usize, lag: Duration, in_flight: usize) {
        let s = self.at(sec);
        s.sent += 1;
        s.max_lag = s.max_lag.max(lag);
        self.max_lag = self.max_lag.max(lag);
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
    }

    /// Adds another driver's counts (a shard of the same schedule). `peak_in_flight` becomes
    /// the sum of the peaks: an upper bound of the peak of the sum.
    pub fn merge(&mut self, o: &Recorder) {
        for (a, b) in self.seconds.iter_mut().zip(&o.seconds) {
            a.offered += b.offered;
            a.sent += b.sent;
            a.dropped_late += b.dropped_late;
            a.dropped_full += b.dropped_full;
            a.good += b.good;
            a.connect += b.connect;
            a.deadline += b.deadline;
            a.status_5xx += b.status_5xx;
            a.status_4xx += b.status_4xx;
            a.other += b.other;
            a.latency.add(&b.latency).expect("same bounds");
            a.from_send.add(&b.from_send).expect("same bounds");
            a.max_lag = a.max_lag.max(b.max_lag);
        }
        self.overall.add(&o.overall).expect("same bounds");
        self.from_send.add(&o.from_send).expect("same bounds");
        self.max_lag = self.max_lag.max(o.max_lag);
        self.peak_in_flight += o.peak_in_flight;
    }

    /// The request due in `sec` ended with `outcome`, `latency` after its scheduled time and
    /// `from_send` after it was sent.
    pub fn done(&mut self, sec: usize, outcome: Outcome, latency: Duration, from_send: Duration) {
        let s = self.at(sec);
        let timed = match outcome {
            Outcome::Status(c) if (200..300).contains(&c) => {
                s.good += 1;
                true
            }
            Outcome::Status(c) if (500..600).contains(&c) => {
                s.status_5xx += 1;
                true
            }
            Outcome::Status(c) if (400..500).contains(&c) => {
                s.status_4xx += 1;
                true
            }
            Outcome::Status(_) => {
                s.other += 1;
                true
            }
            Outcome::Connect => {
                s.connect += 1;
                false
            }
            Outcome::Deadline => {
                s.deadline += 1;
                true
            }
            Outcome::Other => {
                s.other += 1;
                false
            }
        };
        if timed {
            let us = |d: Duration| {
                u64::try_from(d.as_micros()).unwrap_or(u64::MAX).clamp(1, LATENCY_MAX_US)
            };
            s.latency.saturating_record(us(latency));
            s.from_send.saturating_record(us(from_send));
            self.overall.saturating_record(us(latency));
            self.from_send.saturating_record(us(from_send));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_land_in_one_bucket_each() {
        let mut r = Recorder::new(2);
        let ms = Duration::from_millis;
        r.done(0, Outcome::Status(204), ms(5), ms(5));
        r.done(0, Outcome::Status(503), ms(7), ms(7));
        r.done(0, Outcome::Status(404), ms(1), ms(1));
        r.done(0, Outcome::Status(302), ms(1), ms(1));
        r.done(0, Outcome::Connect, ms(1), ms(1));
        r.done(0, Outcome::Other, ms(1), ms(1));
        r.done(9, Outcome::Deadline, ms(1000), ms(1000));
        let s = &r.seconds[0];
        assert_eq!((s.good, s.status_5xx, s.status_4xx, s.other, s.connect), (1, 1, 1, 2, 1));
        assert_eq!(r.seconds[1].deadline, 1, "past the end lands in the last second");
        assert_eq!(r.overall.len(), 5, "connect and broken connections carry no latency");
        assert_eq!(r.overall.max(), r.overall.highest_equivalent(1_000_000));
    }
}
