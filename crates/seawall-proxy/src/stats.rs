//! What passes through the proxy, counted: totals for Prometheus, and a per-second series.
//!
//! The "many copies of the same statement" signature of a retry storm is counted directly:
//! every request is keyed (HTTP: method, path and a hash of the body; PostgreSQL: the query
//! text) and the proxy tracks how many with the same key are in flight at once — what the
//! `pg_stat_activity` query (`seawall_lab::pg`) shows inside the database, seen from outside it.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seawall::metrics::top::TopCallers;
use serde::Serialize;

/// Distinct request keys tracked at once; beyond this a request is not tracked (never refused).
pub const MAX_KEYS: usize = 65_536;
/// Seconds kept in the per-second series (the oldest are dropped).
pub const MAX_SECONDS: usize = 3_600;
/// Attempt numbers counted one by one; higher ones are counted as `10+`.
pub const MAX_ATTEMPT_LABEL: usize = seawall::metrics::ATTEMPT_NUMBERS;

/// One second of traffic.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Second {
    /// Seconds since the proxy started (the start of this second).
    pub t: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Requests seen (HTTP requests; PostgreSQL statements).
    pub requests: u64,
    /// Of those, retries (attempt > 1 from `Request-Attempt` or `grpc-previous-rpc-attempts`).
    pub retries: u64,
    /// Connections or requests a fault acted on: refused, dropped, held or delayed.
    pub faulted: u64,
    /// Most copies of one request in flight at once during the second.
    pub identical_in_flight_peak: u64,
}

/// The proxy's counters. Cheap to update from every connection task.
#[derive(Debug, Default)]
pub struct Stats {
    /// Whether bytes are counted (TCP mode); without, `seawall_proxy_bytes_total` is left out
    /// of the page rather than shown as 0.
    counts_bytes: bool,
    connections: AtomicU64,
    open: AtomicU64,
    requests: AtomicU64,
    attempts: [AtomicU64; MAX_ATTEMPT_LABEL],
    callers: Mutex<TopCallers>,
    faulted: Mutex<HashMap<&'static str, u64>>,
    rejected: Mutex<HashMap<&'static str, u64>>,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    peak: AtomicU64,
    in_flight: Mutex<HashMap<u64, u64>>,
    series: Mutex<VecDeque<Second>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Stats {
    /// Counters for a proxy that counts bytes (`counts_bytes`, TCP mode) or not (HTTP mode).
    pub fn new(counts_bytes: bool) -> Self {
        Stats { counts_bytes, ..Stats::default() }
    }

    fn second(&self, t: Duration, f: impl FnOnce(&mut Second)) {
        let sec = t.as_secs();
        let mut s = lock(&self.series);
        if s.back().is_none_or(|b| b.t < sec) {
            if s.len() >= MAX_SECONDS {
                s.pop_front();
            }
            s.push_back(Second { t: sec, ..Second::default() });
        }
        // A late update for an earlier second goes to the second it belongs to, if still kept.
        if let Some(b) = s.iter_mut().rev().find(|b| b.t <= sec) {
            f(b);
        }
    }

    /// A connection was accepted at `t`.
    pub fn connection(&self, t: Duration) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.second(t, |s| s.connections += 1);
    }

    /// Open connections: +1 on accept, the guard's drop takes it back.
    pub fn open(self: &Arc<Self>) -> OpenGuard {
        self.open.fetch_add(1, Ordering::Relaxed);
        OpenGuard(self.clone())
    }

    /// A request (attempt number `attempt`, 1 = first) from `caller` (the peer's address) was
    /// seen at `t`.
    pub fn request(&self, t: Duration, attempt: u32, caller: &str) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.attempts[seawall::metrics::attempt_index(attempt)].fetch_add(1, Ordering::Relaxed);
        lock(&self.callers).record(caller);
        self.second(t, |s| {
            s.requests += 1;
            s.retries += u64::from(attempt > 1);
        });
    }

    /// A fault of kind `by` acted on a connection or request at `t`: refused or dropped it
    /// (`fail`, `partial`, `restart-cold`, `refuse`), held it (`hang`) or delayed it (`slow`).
    pub fn faulted(&self, t: Duration, by: &'static str) {
        *lock(&self.faulted).entry(by).or_default() += 1;
        self.second(t, |s| s.faulted += 1);
    }

    /// The proxy's own bound turned something away (`max_connections`, `held_queue_full`, …).
    pub fn rejected(&self, reason: &'static str) {
        *lock(&self.rejected).entry(reason).or_default() += 1;
    }

    /// Bytes forwarded towards the upstream (`up`) or back to the client.
    pub fn bytes(&self, up: bool, n: usize) {
        let c = if up { &self.bytes_up } else { &self.bytes_down };
        c.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A request with `key` starts at `t`; it is in flight until the guard drops.
    pub fn enter(self: &Arc<Self>, key: u64, t: Duration) -> InFlight {
        let copies = {
            let mut m = lock(&self.in_flight);
            if m.len() >= MAX_KEYS && !m.contains_key(&key) {
                return InFlight { stats: self.clone(), key: None };
            }
            let n = m.entry(key).or_default();
            *n += 1;
            *n
        };
        self.peak.fetch_max(copies, Ordering::Relaxed);
        self.second(t, |s| s.identical_in_flight_peak = s.identical_in_flight_peak.max(copies));
        InFlight { stats: self.clone(), key: Some(key) }
    }

    /// Most copies of one request in flight right now.
    pub fn identical_in_flight(&self) -> u64 {
        lock(&self.in_flight).values().copied().max().unwrap_or(0)
    }

    /// The per-second series kept so far.
    pub fn series(&self) -> Vec<Second> {
        lock(&self.series).iter().cloned().collect()
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Connections or requests refused or dropped by a fault so far (all kinds): what never
    /// reached the upstream.
    pub fn faulted_total(&self) -> u64 {
        lock(&self.faulted).values().sum()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// The counters as Prometheus text (exposition format 0.0.4), names `seawall_proxy_*`.
    pub fn prometheus(&self) -> String {
        let mut o = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
            // Text format 0.0.4: a counter's family is named with its `_total` suffix.
            let suffix = if kind == "counter" { "_total" } else { "" };
            let full = format!("seawall_proxy_{name}{suffix}");
            let _ = writeln!(o, "# HELP {full} {help}\n# TYPE {full} {kind}");
            for (labels, v) in samples {
                let _ = writeln!(o, "{full}{labels} {v}");
            }
        };
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let one = |v| vec![(String::new(), v)];
        let labelled = |label: &str, m: &Mutex<HashMap<&'static str, u64>>| {
            let mut v: Vec<_> =
                lock(m).iter().map(|(k, n)| (format!("{{{label}=\"{k}\"}}"), *n)).collect();
            v.sort();
            v
        };
        metric("connections", "counter", "Connections accepted.", &one(load(&self.connections)));
        metric("connections_open", "gauge", "Connections open now.", &one(load(&self.open)));
        metric(
            "requests",
            "counter",
            "Requests seen (HTTP requests, PostgreSQL statements).",
            &one(load(&self.requests)),
        );
        let attempts: Vec<_> = seawall::metrics::ATTEMPT_LABELS
            .iter()
            .zip(&self.attempts)
            .map(|(l, c)| (format!("{{attempt=\"{l}\"}}"), load(c)))
            .collect();
        metric(
            "attempts",
            "counter",
            "Requests by attempt number (Request-Attempt, grpc-previous-rpc-attempts + 1).",
            &attempts,
        );
        let callers: Vec<_> = lock(&self.callers)
            .top()
            .into_iter()
            .map(|c| (format!("{{caller=\"{}\"}}", c.caller), c.count))
            .collect();
        metric(
            "caller_requests",
            "counter",
            "Requests by caller (the peer's IP address), the heaviest callers only (Space-Saving: \
             a count is an upper bound).",
            &callers,
        );
        metric(
            "faulted",
            "counter",
            "Connections or requests a fault acted on (refused, dropped, held or delayed), by fault kind.",
            &labelled("fault", &self.faulted),
        );
        metric(
            "rejected",
            "counter",
            "Turned away by the proxy's own bounds, by reason.",
            &labelled("reason", &self.rejected),
        );
        if self.counts_bytes {
            metric(
                "bytes",
                "counter",
                "Bytes forwarded, by direction (TCP mode only).",
                &[
                    ("{direction=\"upstream\"}".into(), load(&self.bytes_up)),
                    ("{direction=\"downstream\"}".into(), load(&self.bytes_down)),
                ],
            );
        }
        metric(
            "identical_in_flight",
            "gauge",
            "Most copies of one request (same method, path and body; same SQL) in flight now.",
            &one(self.identical_in_flight()),
        );
        metric(
            "identical_in_flight_peak",
            "gauge",
            "Most copies of one request in flight at once since the start.",
            &one(load(&self.peak)),
        );
        o
    }
}

/// Holds one open connection in the count.
#[derive(Debug)]
pub struct OpenGuard(Arc<Stats>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Holds one request in the identical-in-flight count.
#[derive(Debug)]
pub struct InFlight {
    stats: Arc<Stats>,
    key: Option<u64>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some(key) = self.key else { return };
        let mut m = lock(&self.stats.in_flight);
        if let Some(n) = m.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&key);
            }
        }
    }
}

/// A 64-bit FNV-1a hash of `parts` (a key for identical requests; stable across runs).
pub fn key_of(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3); // separator: ("ab","c") ≠ ("a","bc")
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_in_flight_counts_copies_and_releases() {
        let s = Arc::new(Stats::default());
        let t = Duration::from_millis(1500);
        let (a, b) = (key_of(&[b"GET", b"/x"]), key_of(&[b"GET", b"/y"]));
        let g1 = s.enter(a, t);
        let g2 = s.enter(a, t);
        let _g3 = s.enter(b, t);
        assert_eq!(s.identical_in_flight(), 2);
        drop((g1, g2));
        assert_eq!(s.identical_in_flight(), 1);
        assert_eq!(s.series()[0].identical_in_flight_peak, 2);
        assert!(s.prometheus().contains("seawall_proxy_identical_in_flight_peak 2\n"));
    }

    #[test]
    fn per_second_series_and_attempt_labels() {
        let s = Stats::default();
        s.request(Duration::from_millis(100), 1, "127.0.0.2");
        s.request(Duration::from_millis(900), 3, "127.0.0.2");
        s.request(Duration::from_millis(2100), 42, "127.0.0.3");
        s.connection(Duration::from_millis(2200));
        let series = s.series();
        assert_eq!((series[0].t, series[0].requests, series[0].retries), (0, 2, 1));
        assert_eq!((series[1].t, series[1].requests, series[1].connections), (2, 1, 1));
        let text = s.prometheus();
        assert!(text.contains("seawall_proxy_attempts_total{attempt=\"3\"} 1\n"), "{text}");
        assert!(text.contains("seawall_proxy_attempts_total{attempt=\"10+\"} 1\n"));
        assert!(text.contains("seawall_proxy_caller_requests_total{caller=\"127.0.0.2\"} 2\n"));
        assert!(text.contains("seawall_proxy_caller_requests_total{caller=\"127.0.0.3\"} 1\n"));
        assert!(text.contains("seawall_proxy_requests_total 3\n"));
        assert_ne!(key_of(&[b"ab", b"c"]), key_of(&[b"a", b"bc"]));
    }
}
