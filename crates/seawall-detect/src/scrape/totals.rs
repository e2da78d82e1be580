//! From one page of metrics to the totals `detect` needs, and from two pages to rates.

use serde::Serialize;

use crate::names;
use crate::prom::PromSample;
use crate::sample::Sample;

/// The counters and gauges of one target at one scrape. `None`: the page does not export it.
/// Counters with several label sets (attempt numbers, dependencies, reasons) are summed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    /// Logical calls started by the service's client layer.
    pub calls: Option<f64>,
    /// Attempts sent by the client layer, all attempt numbers.
    pub attempts: Option<f64>,
    /// Retries refused by a budget or local throttling.
    pub retry_overflow: Option<f64>,
    /// Successful logical calls (the client's call-duration histogram count).
    pub call_successes: Option<f64>,
    /// Responses the server's handler produced.
    pub served: Option<f64>,
    /// Responses that count as goodput.
    pub goodput: Option<f64>,
    /// Requests the server layers rejected, all reasons.
    pub rejected: Option<f64>,
    /// Age of the oldest queued request, seconds (the largest if several are exported).
    pub oldest_queued_s: Option<f64>,
}

impl Totals {
    /// Reads the seawall metrics out of a parsed page; anything else is ignored. Values that are
    /// negative or not finite are read as 0: a counter cannot be either.
    pub fn from_samples(samples: &[PromSample]) -> Totals {
        let mut t = Totals::default();
        for s in samples {
            let v = if s.value.is_finite() && s.value >= 0.0 { s.value } else { 0.0 };
            let add = |slot: &mut Option<f64>| *slot = Some(slot.unwrap_or(0.0) + v);
            match s.name.as_str() {
                names::CLIENT_CALLS => add(&mut t.calls),
                names::CLIENT_ATTEMPTS => add(&mut t.attempts),
                names::CLIENT_RETRY_OVERFLOW => add(&mut t.retry_overflow),
                names::CLIENT_CALL_SUCCESSES => add(&mut t.call_successes),
                names::SERVER_THROUGHPUT => add(&mut t.served),
                names::SERVER_GOODPUT => add(&mut t.goodput),
                names::SERVER_REJECTED => add(&mut t.rejected),
                names::SERVER_OLDEST_QUEUED => {
                    t.oldest_queued_s = Some(t.oldest_queued_s.unwrap_or(0.0).max(v));
                }
                _ => {}
            }
        }
        t
    }

    fn arrivals(&self) -> Option<f64> {
        match (self.served, self.rejected) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        }
    }
}

/// One target's rates over an interval. `None`: the target does not export the metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetRates {
    /// The scraped URL.
    pub url: String,
    /// Requests arriving at the server (served + rejected) per second.
    pub arrivals_rps: Option<f64>,
    /// Goodput per second (server side).
    pub goodput_rps: Option<f64>,
    /// Responses produced per second (server throughput).
    pub throughput_rps: Option<f64>,
    /// Logical calls the service made to its dependency per second.
    pub calls_rps: Option<f64>,
    /// Attempts per logical call of the service's client layer.
    pub attempts_per_call: Option<f64>,
    /// Retries refused per second.
    pub retry_overflow_rps: Option<f64>,
    /// Oldest queued request, seconds.
    pub oldest_queued_s: Option<f64>,
}

/// A counter's increase: a drop means the process restarted, and the counter counted from 0.
fn delta(prev: Option<f64>, cur: Option<f64>) -> Option<f64> {
    let (p, c) = (prev?, cur?);
    Some(if c >= p { c - p } else { c })
}

/// The rates of one target between two scrapes `dt` seconds apart (`dt` > 0).
pub fn rates(url: &str, prev: &Totals, cur: &Totals, dt: f64) -> TargetRates {
    let rate = |p, c| delta(p, c).map(|d| d / dt);
    let calls = delta(prev.calls, cur.calls);
    let attempts = delta(prev.attempts, cur.attempts);
    TargetRates {
        url: url.to_string(),
        arrivals_rps: rate(prev.arrivals(), cur.arrivals()),
        goodput_rps: rate(prev.goodput, cur.goodput),
        throughput_rps: rate(prev.served, cur.served),
        calls_rps: calls.map(|c| c / dt),
        attempts_per_call: match (calls, attempts) {
            (Some(c), Some(a)) if c > 0.0 => Some(a / c),
            _ => None,
        },
        retry_overflow_rps: rate(prev.retry_overflow, cur.retry_overflow),
        oldest_queued_s: cur.oldest_queued_s,
    }
}

/// Folds the targets' rates, listed edge first and dependency last, into the classifier's
/// sample:
///
/// - edge rate: requests arriving at the first target (its server metrics), or else the logical
///   calls its client layer started;
/// - dependency rate: requests arriving at the last target (its server metrics), or else the
///   attempts the last target's client layer sends on — so a path may end at the deepest
///   service that exports metrics, with the dependency itself unscraped; never less than the
///   attempts the target before it sent (a server does not count requests abandoned while
///   they waited);
/// - goodput: the first target's server goodput, or else its client's successful calls;
/// - queue age: the oldest queued request anywhere; refusals: summed over the targets.
pub fn fold(t: f64, targets: &[TargetRates], prev: &[Totals], cur: &[Totals], dt: f64) -> Sample {
    let (Some(edge), Some(last)) = (targets.first(), targets.last()) else {
        return Sample { t, ..Sample::default() };
    };
    let n = targets.len();
    let rate = |i: usize, f: fn(&Totals) -> Option<f64>| {
        delta(prev.get(i).and_then(f), cur.get(i).and_then(f)).map(|d| d / dt)
    };
    let client_attempts = rate(n - 1, |x| x.attempts);
    // What the caller just above the last target sent it: a server counts a request only when
    // it answers or rejects it, so requests its caller gave up on while they waited (the bulk of
    // a storm) are missing from its arrivals; its caller's attempts are not.
    let sent_to_last = if n >= 2 { rate(n - 2, |x| x.attempts) } else { None };
    let edge_rps = edge.arrivals_rps.or(edge.calls_rps).unwrap_or(0.0);
    Sample {
        t,
        edge_rps,
        goodput_rps: edge.goodput_rps.or_else(|| rate(0, |x| x.call_successes)).unwrap_or(0.0),
        dependency_rps: match (last.arrivals_rps.or(client_attempts), sent_to_last) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b).unwrap_or(0.0),
        },
        queue_age_s: targets.iter().filter_map(|r| r.oldest_queued_s).fold(0.0, f64::max),
        refusals_rps: targets.iter().filter_map(|r| r.retry_overflow_rps).sum(),
    }
}
