//! From one page of metrics to the totals `detect` needs, and from two pages to rates.

use serde::Serialize;

use crate::names;
use crate::prom::PromSample;
use crate::sample::Sample;

/// Callers kept from one page: the exporters keep at most 256 (their bounded top-callers
/// table); a page listing more is not one of theirs, and the rest is ignored.
pub const MAX_PAGE_CALLERS: usize = seawall::metrics::top::MAX_CALLERS;

/// Callers listed in an interval's [`TargetRates::top_callers`], heaviest first.
pub const TOP_CALLERS_SHOWN: usize = 5;

/// The counters and gauges of one target at one scrape. `None`: the page does not export it.
/// Counters with several label sets (attempt numbers, dependencies, reasons) are summed.
#[derive(Debug, Clone, PartialEq, Default)]
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
    /// Requests arriving at the door with attempt number 1, counted as they arrive
    /// (`seawall_server_arrivals_total{attempt="1"}`, or the proxy's
    /// `seawall_proxy_attempts_total` on a page without the server's).
    pub first_arrivals: Option<f64>,
    /// Requests arriving with attempt number 2 or more: retries, by the caller's own count.
    pub retry_arrivals: Option<f64>,
    /// Requests by caller, the exporter's heaviest callers (`seawall_server_caller_arrivals_total`
    /// or `seawall_proxy_caller_requests_total`), names cleaned as the exporters clean them, at
    /// most [`MAX_PAGE_CALLERS`].
    pub callers: Vec<(String, f64)>,
}

/// First and later attempts at a door, and the callers, as one family pair exports them.
#[derive(Default)]
struct Door {
    first: Option<f64>,
    retries: Option<f64>,
    callers: Vec<(String, f64)>,
}

impl Door {
    fn attempt(&mut self, s: &PromSample, v: f64) {
        let slot = match s.label("attempt") {
            Some("1") => &mut self.first,
            Some(_) => &mut self.retries,
            None => return,
        };
        *slot = Some(slot.unwrap_or(0.0) + v);
        // Both are known once either is: a page with only first attempts has no retries.
        self.first.get_or_insert(0.0);
        self.retries.get_or_insert(0.0);
    }

    fn caller(&mut self, s: &PromSample, v: f64) {
        let Some(name) = s.label("caller") else { return };
        let name = seawall::metrics::top::clean(name);
        if let Some(c) = self.callers.iter_mut().find(|(n, _)| *n == name) {
            c.1 += v;
        } else if self.callers.len() < MAX_PAGE_CALLERS {
            self.callers.push((name.into_owned(), v));
        }
    }
}

impl Totals {
    /// Reads the seawall metrics out of a parsed page; anything else is ignored. Values that are
    /// negative or not finite are read as 0: a counter cannot be either.
    pub fn from_samples(samples: &[PromSample]) -> Totals {
        let mut t = Totals::default();
        let (mut server, mut proxy) = (Door::default(), Door::default());
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
                names::SERVER_ARRIVALS => server.attempt(s, v),
                names::SERVER_CALLER_ARRIVALS => server.caller(s, v),
                names::PROXY_ATTEMPTS => proxy.attempt(s, v),
                names::PROXY_CALLER_REQUESTS => proxy.caller(s, v),
                _ => {}
            }
        }
        // A page is a server's or a proxy's; should it hold both, the server's door is the one
        // its own counters describe.
        let door =
            if server.first.is_some() || !server.callers.is_empty() { server } else { proxy };
        (t.first_arrivals, t.retry_arrivals, t.callers) = (door.first, door.retries, door.callers);
        t
    }

    /// Requests counted at the door by attempt number, all numbers.
    fn door_arrivals(&self) -> Option<f64> {
        Some(self.first_arrivals? + self.retry_arrivals?)
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
    /// Requests counted at the door by attempt number, per second (all attempt numbers).
    pub door_rps: Option<f64>,
    /// Of those, the share that were retries (attempt ≥ 2): `1 / (1 − share)` attempts reach
    /// this door per first attempt. `None` without attempt numbers or without arrivals.
    pub retry_share: Option<f64>,
    /// The heaviest callers over the interval, at most [`TOP_CALLERS_SHOWN`], heaviest first.
    pub top_callers: Vec<CallerRate>,
}

/// One caller's requests over an interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallerRate {
    /// The caller's name as the exporter labels it (a header's value, a principal, an address).
    pub caller: String,
    /// Its requests per second (an upper bound: the exporters' counts are).
    pub rps: f64,
    /// Its share of the door's arrivals (of the listed callers' sum without attempt numbers).
    pub share: f64,
}

/// The callers' rates between two pages. A caller new to the table, or whose count fell (it
/// was evicted and came back with an inherited count), has no rate for this interval: its count
/// is not its requests.
fn caller_rates(prev: &Totals, cur: &Totals, door: Option<f64>, dt: f64) -> Vec<CallerRate> {
    let mut out: Vec<(String, f64)> = cur
        .callers
        .iter()
        .filter_map(|(name, c)| {
            let (_, p) = prev.callers.iter().find(|(n, _)| n == name)?;
            (c >= p).then(|| (name.clone(), c - p))
        })
        .filter(|(_, d)| *d > 0.0)
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let whole = door.filter(|d| *d > 0.0).unwrap_or_else(|| out.iter().map(|(_, d)| d).sum());
    out.truncate(TOP_CALLERS_SHOWN);
    out.into_iter()
        .map(|(caller, d)| CallerRate { caller, rps: d / dt, share: (d / whole).min(1.0) })
        .collect()
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
    let door = delta(prev.door_arrivals(), cur.door_arrivals());
    let retries = delta(prev.retry_arrivals, cur.retry_arrivals);
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
        door_rps: door.map(|d| d / dt),
        retry_share: match (door, retries) {
            (Some(d), Some(r)) if d > 0.0 => Some((r / d).min(1.0)),
            _ => None,
        },
        top_callers: caller_rates(prev, cur, door, dt),
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
///
/// A path of **one target** is read from that target's own counters:
///
/// - with a client layer, its calls (or its arrivals) are the edge and its client's attempts
///   the dependency: the service's own amplification of its dependency;
/// - without one, by its door's attempt numbers (a seawall server's or `seawall proxy`'s):
///   first attempts are the edge, all attempts the dependency, so attempts per call is
///   `1 / (1 − retry share)` — how hard its callers retry it. Goodput is the server's, or, for
///   a page without it (the proxy's), taken as the edge's, so only amplification is judged.
pub fn fold(t: f64, targets: &[TargetRates], prev: &[Totals], cur: &[Totals], dt: f64) -> Sample {
    let (Some(edge), Some(last)) = (targets.first(), targets.last()) else {
        return Sample { t, ..Sample::default() };
    };
    let n = targets.len();
    let rate = |i: usize, f: fn(&Totals) -> Option<f64>| {
        delta(prev.get(i).and_then(f), cur.get(i).and_then(f)).map(|d| d / dt)
    };
    let client_attempts = rate(n - 1, |x| x.attempts);
    let queue_age_s = targets.iter().filter_map(|r| r.oldest_queued_s).fold(0.0, f64::max);
    // An empty f64 sum is -0.0, which prints as "-0.0/s"; adding 0.0 makes it 0.0.
    let refusals_rps = targets.iter().filter_map(|r| r.retry_overflow_rps).sum::<f64>() + 0.0;
    let goodput = edge.goodput_rps.or_else(|| rate(0, |x| x.call_successes));
    if n == 1
        && client_attempts.is_none()
        && let (Some(first), Some(all)) = (rate(0, |x| x.first_arrivals), edge.door_rps)
    {
        return Sample {
            t,
            edge_rps: first,
            goodput_rps: goodput.unwrap_or(first),
            dependency_rps: all,
            queue_age_s,
            refusals_rps,
        };
    }
    let edge_rps = edge.arrivals_rps.or(edge.calls_rps).unwrap_or(0.0);
    // What the caller just above the last target sent it: a server counts a request only when
    // it answers or rejects it, so requests its caller gave up on while they waited (the bulk of
    // a storm) are missing from its arrivals; its caller's attempts are not.
    let sent_to_last = if n >= 2 { rate(n - 2, |x| x.attempts) } else { None };
    let arrived_at_last = if n == 1 {
        client_attempts.or(last.arrivals_rps)
    } else {
        last.arrivals_rps.or(client_attempts)
    };
    Sample {
        t,
        edge_rps,
        goodput_rps: goodput.unwrap_or(0.0),
        dependency_rps: match (arrived_at_last, sent_to_last) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b).unwrap_or(0.0),
        },
        queue_age_s,
        refusals_rps,
    }
}
