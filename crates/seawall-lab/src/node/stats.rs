//! Counters each node keeps and serves at `GET /lab/stats` for the parent to scrape each second.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Live counters of one node. Cumulative; the parent turns them into per-second rates.
#[derive(Debug, Default)]
pub struct NodeStats {
    received: AtomicU64,
    shed: AtomicU64,
    doomed: AtomicU64,
    completed: AtomicU64,
    wasted: AtomicU64,
    queued: Mutex<BTreeMap<u64, Instant>>,
    next_job: AtomicU64,
}

/// A point-in-time copy of [`NodeStats`], plus what the node's retry policy counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Attempts that arrived at this node.
    pub received: u64,
    /// Requests rejected by admission control before any work.
    pub shed: u64,
    /// Requests dropped because their deadline passed before or while queued (doomed work).
    pub doomed: u64,
    /// Units of work the node completed (the dependency's queries).
    pub completed: u64,
    /// Completed work whose caller had already gone.
    pub wasted: u64,
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
            queue_age_s,
            queue_len,
            ..StatsSnapshot::default()
        }
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
    }
}
