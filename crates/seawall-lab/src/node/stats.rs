//! Counters each node keeps and serves at `GET /lab/stats` for the parent to scrape each second.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

// The runtime's clock, not the wall's: the same on a real runtime, virtual under the virtual lab.
use tokio::time::Instant;

use serde::{Deserialize, Serialize};

/// The calling tier's name (`edge`, `gateway`, `order`) on every downstream request, which each
/// node's `ShedLayer` counts its top callers by (`CallerKey::header`); the load generator sends
/// none.
pub const CALLER_HEADER: http::HeaderName = http::HeaderName::from_static("lab-caller");

/// The response header that carries, from the dependency (or the PostgreSQL pool) up through
/// every tier to the load generator, how long the work behind a 2xx answer took, in whole
/// microseconds: the busy time that answer cost. With it the load generator adds up the busy
/// time that reached a user in time, against the bottom's whole busy time
/// ([`StatsSnapshot::busy_s`]).
pub const SERVICE_HEADER: http::HeaderName = http::HeaderName::from_static("lab-service-us");

/// Puts `busy` (the work behind an answer) into `headers` as [`SERVICE_HEADER`].
pub fn mark_service(headers: &mut http::HeaderMap, busy: Duration) {
    let us = u64::try_from(busy.as_micros()).unwrap_or(u64::MAX);
    headers.insert(SERVICE_HEADER, http::HeaderValue::from(us));
}

/// The busy time `headers` carry in [`SERVICE_HEADER`], at most `max` (`None` when absent or not
/// a plain number of microseconds).
pub fn service_of(headers: &http::HeaderMap, max: Duration) -> Option<Duration> {
    let v = headers.get(SERVICE_HEADER)?.to_str().ok()?;
    if v.is_empty() || v.len() > 20 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u64>().ok().map(|us| Duration::from_micros(us).min(max))
}

/// Seconds since this process first read the clock here (the origin of [`StatsSnapshot::at_s`]).
fn clock_s() -> f64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Live counters of one node. Cumulative; the parent turns them into per-second rates.
#[derive(Debug, Default)]
pub struct NodeStats {
    received: AtomicU64,
    shed: AtomicU64,
    doomed: AtomicU64,
    completed: AtomicU64,
    wasted: AtomicU64,
    busy_ns: AtomicU64,
    queued: Mutex<BTreeMap<u64, Instant>>,
    next_job: AtomicU64,
    timer_late_us: AtomicU64,
    timer_probes: AtomicU64,
}

/// A point-in-time copy of [`NodeStats`], plus what the node's retry policy counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Attempts that arrived at this node, counted at its door: before its server layers shed
    /// any or drop any as doomed (as the simulator counts a tier's attempts).
    pub received: u64,
    /// Requests rejected by admission control before any work.
    pub shed: u64,
    /// Requests dropped because their deadline passed before or while queued (doomed work).
    pub doomed: u64,
    /// Units of work the node completed (the dependency's queries).
    pub completed: u64,
    /// Completed work whose caller had already gone.
    pub wasted: u64,
    /// Time the node's workers spent serving, seconds, summed over workers: every request's
    /// service from its start to its end or cancellation (the dependency's and the PostgreSQL
    /// pool's; zero for the tiers, which only wait on the next one).
    #[serde(default)]
    pub busy_s: f64,
    /// When the node took this snapshot, seconds on its own monotonic clock (from an arbitrary
    /// origin, the same for every node of one process): two snapshots of one node are
    /// `at_s` apart, however late the parent's scrape of either was answered.
    #[serde(default)]
    pub at_s: f64,
    /// Age of the oldest request waiting for a worker, seconds.
    pub queue_age_s: f64,
    /// Requests waiting for a worker.
    pub queue_len: u64,
    /// Attempts this node's client sent downstream.
    pub attempts_sent: u64,
    /// Retries this node's client sent downstream.
    pub retries_sent: u64,
    /// Retries refused by the budget or local throttling.
    pub budget_refusals: u64,
    /// How late this node's runtime woke [`probe_timers`]' sleeps, microseconds, summed over
    /// the probes so far: over [`StatsSnapshot::timer_probes`], the mean lateness of a timer.
    #[serde(default)]
    pub timer_late_us: u64,
    /// Probe sleeps that have woken so far.
    #[serde(default)]
    pub timer_probes: u64,
}

impl NodeStats {
    /// An attempt arrived.
    pub fn received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }

    /// A request was shed before any work.
    pub fn shed(&self) {
        self.shed.fetch_add(1, Ordering::Relaxed);
    }

    /// A request was dropped as doomed.
    pub fn doomed(&self) {
        self.doomed.fetch_add(1, Ordering::Relaxed);
    }

    /// A unit of work completed; `wasted` if its caller had gone.
    pub fn completed(&self, wasted: bool) {
        self.completed.fetch_add(1, Ordering::Relaxed);
        if wasted {
            self.wasted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A worker spent `d` serving (a request's service, whole or cut short).
    pub fn busy(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.busy_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// A request starts waiting for a worker; the returned id ends the wait in
    /// [`NodeStats::dequeue`].
    pub fn enqueue(&self) -> u64 {
        let id = self.next_job.fetch_add(1, Ordering::Relaxed);
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).insert(id, Instant::now());
        id
    }

    /// The wait of `id` is over (it got a worker or was abandoned).
    pub fn dequeue(&self, id: u64) {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    /// The counters now; the policy's figures are filled in by the caller.
    pub fn snapshot(&self) -> StatsSnapshot {
        let (queue_age_s, queue_len) = {
            let q = self.queued.lock().unwrap_or_else(|e| e.into_inner());
            let age = q.values().next().map_or(0.0, |t| t.elapsed().as_secs_f64());
            (age, q.len() as u64)
        };
        StatsSnapshot {
            received: self.received.load(Ordering::Relaxed),
            shed: self.shed.load(Ordering::Relaxed),
            doomed: self.doomed.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            wasted: self.wasted.load(Ordering::Relaxed),
            busy_s: self.busy_ns.load(Ordering::Relaxed) as f64 / 1e9,
            at_s: clock_s(),
            queue_age_s,
            queue_len,
            timer_late_us: self.timer_late_us.load(Ordering::Relaxed),
            timer_probes: self.timer_probes.load(Ordering::Relaxed),
            ..StatsSnapshot::default()
        }
    }
}

/// How often [`probe_timers`] sleeps.
pub const PROBE_PERIOD: Duration = Duration::from_millis(10);

/// Measures, for as long as it is polled, how late this node's runtime wakes a timer: sleeps of
/// [`PROBE_PERIOD`], each one's lateness added to `stats`. Every per-try timeout and backoff of
/// the node runs on the same timer, so this is by how much its retries came late. A healthy
/// runtime wakes about a millisecond late (tokio's timer has a 1 ms tick); a starved one —
/// more runnable work than cores — tens of milliseconds, and then the storm it measures is the
/// machine's, not the stack's ([`crate::saturation`]).
pub async fn probe_timers(stats: &NodeStats) {
    loop {
        let asked = Instant::now();
        tokio::time::sleep(PROBE_PERIOD).await;
        let late = asked.elapsed().saturating_sub(PROBE_PERIOD);
        let us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
        stats.timer_late_us.fetch_add(us, Ordering::Relaxed);
        stats.timer_probes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Adds the time from its start to its drop to a node's [`NodeStats::busy`]: one request's
/// service, counted whether it ends or its caller cancels it half-way.
#[derive(Debug)]
pub struct BusySpan<'a> {
    stats: &'a NodeStats,
    started: Instant,
}

impl<'a> BusySpan<'a> {
    /// A worker starts serving now.
    pub fn start(stats: &'a NodeStats) -> Self {
        BusySpan { stats, started: Instant::now() }
    }

    /// The service so far.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for BusySpan<'_> {
    fn drop(&mut self) {
        self.stats.busy(self.started.elapsed());
    }
}

/// Removes a queued entry when dropped, so an abandoned wait does not look queued forever.
#[derive(Debug)]
pub struct QueueSlot<'a> {
    stats: &'a NodeStats,
    id: Option<u64>,
}

impl<'a> QueueSlot<'a> {
    /// Starts waiting.
    pub fn new(stats: &'a NodeStats) -> Self {
        QueueSlot { stats, id: Some(stats.enqueue()) }
    }

    /// Stops waiting (got a worker).
    pub fn done(mut self) {
        if let Some(id) = self.id.take() {
            self.stats.dequeue(id);
        }
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.stats.dequeue(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_header_round_trips_and_is_parsed_strictly() {
        let mut h = http::HeaderMap::new();
        assert_eq!(service_of(&h, Duration::from_secs(1)), None);
        mark_service(&mut h, Duration::from_micros(41_862));
        assert_eq!(service_of(&h, Duration::from_secs(1)), Some(Duration::from_micros(41_862)));
        // Never longer than the deadline the answer came within.
        assert_eq!(service_of(&h, Duration::from_millis(10)), Some(Duration::from_millis(10)));
        for bad in ["", "-5", "+5", "1.5", "12ms", " 7", "99999999999999999999999"] {
            h.insert(SERVICE_HEADER, http::HeaderValue::from_str(bad).unwrap());
            assert_eq!(service_of(&h, Duration::from_secs(1)), None, "{bad:?}");
        }
    }

    #[test]
    fn queue_age_tracks_the_oldest_waiter() {
        let s = NodeStats::default();
        let a = QueueSlot::new(&s);
        let b = QueueSlot::new(&s);
        assert_eq!(s.snapshot().queue_len, 2);
        a.done();
        drop(b);
        let snap = s.snapshot();
        assert_eq!((snap.queue_len, snap.queue_age_s), (0, 0.0));
        s.completed(true);
        assert_eq!((s.snapshot().completed, s.snapshot().wasted), (1, 1));
        s.busy(Duration::from_millis(1500));
        drop(BusySpan::start(&s));
        let busy = s.snapshot().busy_s;
        assert!((1.5..1.6).contains(&busy), "{busy}");
    }
}
