//! The admission decision, sans-io: in-flight count, two queues, CoDel and adaptive LIFO.
//!
//! # Why retries are shed first
//!
//! In a retry storm the extra load *is* the retries: Bronson et al. (HotOS 2021) show that
//! serving first attempts ahead of retries breaks their metastable loop, because a first attempt
//! served is a retry never sent, while a retry served only feeds the loop. So retries wait in
//! their own queue, dequeued only when no first attempt waits; a first attempt arriving at a full
//! queue evicts the oldest queued retry; and while CoDel sees a standing queue, retries are
//! refused at the door.
//!
//! # Why LIFO under standing delay
//!
//! With a standing queue, FIFO serves the request most likely to be abandoned already. Serving
//! the newest first ("adaptive LIFO", Facebook, "Fail at Scale", 2015) gives fresh requests a
//! good chance of being answered in time, while CoDel sloughs off the stale ones left behind.
//! Healthy queues stay FIFO, which is fair.

use std::collections::VecDeque;
use std::time::Duration;

use seawall::time::Instant;

use super::codel::{Codel, CodelConfig};
use super::limit::Limit;
use crate::server::metrics::RejectReason;

/// Whether a request is a first attempt or a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    First,
    Retry,
}

#[derive(Debug)]
struct Waiter<T> {
    id: u64,
    token: T,
    enqueued: Instant,
    deadline: Option<Instant>,
}

/// What [`Admission::offer`] decided.
#[derive(Debug)]
pub(crate) enum Offer<T> {
    /// Run now (a slot was taken).
    Run,
    /// Queued under `id`; `evicted` is a queued retry pushed out to make room.
    Queued { id: u64, evicted: Option<T> },
    /// Answer at once.
    Reject(RejectReason),
}

/// Queue and limit configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueConfig {
    pub(crate) max_queue: usize,
    pub(crate) codel: CodelConfig,
    pub(crate) lifo: bool,
}

/// The admission state; one per `ShedLayer`, behind a mutex in the service.
#[derive(Debug)]
pub(crate) struct Admission<T> {
    cfg: QueueConfig,
    limit: Limit,
    in_flight: usize,
    first: VecDeque<Waiter<T>>,
    retries: VecDeque<Waiter<T>>,
    codel: Codel,
    next_id: u64,
}

impl<T> Admission<T> {
    pub(crate) fn new(cfg: QueueConfig, limit: Limit) -> Self {
        Admission {
            cfg,
            limit,
            in_flight: 0,
            first: VecDeque::new(),
            retries: VecDeque::new(),
            codel: Codel::new(cfg.codel),
            next_id: 0,
        }
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub(crate) fn queue_len(&self) -> usize {
        self.first.len() + self.retries.len()
    }

    /// Age of the oldest queued request at `now`.
    pub(crate) fn oldest_age(&self, now: Instant) -> Duration {
        let f = self.first.front().map(|w| w.enqueued);
        let r = self.retries.front().map(|w| w.enqueued);
        match (f, r) {
            (Some(a), Some(b)) => now - a.min(b),
            (Some(a), None) | (None, Some(a)) => now - a,
            (None, None) => Duration::ZERO,
        }
    }

    /// Decides what to do with a new request. `token` is called only if the request is queued.
    pub(crate) fn offer(
        &mut self,
        now: Instant,
        class: Class,
        deadline: Option<Instant>,
        token: impl FnOnce() -> T,
    ) -> Offer<T> {
        if deadline.is_some_and(|d| now >= d) {
            return Offer::Reject(RejectReason::DeadlineExpired);
        }
        if self.in_flight < self.limit.current() && self.queue_len() == 0 {
            self.codel.observe(now, Duration::ZERO);
            self.in_flight += 1;
            return Offer::Run;
        }
        if class == Class::Retry && self.codel.overloaded() {
            return Offer::Reject(RejectReason::RetryShed);
        }
        let mut evicted = None;
        if self.queue_len() >= self.cfg.max_queue {
            match class {
                Class::First if !self.retries.is_empty() => {
                    evicted = self.retries.pop_front().map(|w| w.token);
                }
                Class::First => return Offer::Reject(RejectReason::QueueFull),
                Class::Retry => return Offer::Reject(RejectReason::RetryShed),
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let w = Waiter { id, token: token(), enqueued: now, deadline };
        match class {
            Class::First => self.first.push_back(w),
            Class::Retry => self.retries.push_back(w),
        }
        Offer::Queued { id, evicted }
    }

    /// Removes a queued request that went away (caller disconnected, deadline timer fired).
    /// False if it is no longer queued (it was granted or dropped already).
    pub(crate) fn cancel(&mut self, id: u64) -> bool {
        for q in [&mut self.first, &mut self.retries] {
            if let Some(i) = q.iter().position(|w| w.id == id) {
                q.remove(i);
                return true;
            }
        }
        false
    }

    /// A request that was running finished; `rtt` is its handler latency if it succeeded.
    pub(crate) fn finish(&mut self, rtt: Option<Duration>) {
        if let Some(rtt) = rtt {
            self.limit.sample(rtt, self.in_flight);
        }
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// If a slot is free, takes it for the next queued request and returns its token. Requests
    /// found doomed on the way (CoDel, expired deadline) are handed to `drop` with the reason.
    pub(crate) fn next(
        &mut self,
        now: Instant,
        mut drop: impl FnMut(T, RejectReason),
    ) -> Option<T> {
        while self.in_flight < self.limit.current() {
            let q = if self.first.is_empty() { &mut self.retries } else { &mut self.first };
            let oldest = q.front()?;
            // The standing delay is the head-of-line age, whichever end we serve from.
            let head_delay = now - oldest.enqueued;
            if self.codel.observe(now, head_delay) {
                let w = q.pop_front()?;
                drop(w.token, RejectReason::CodelDrop);
                continue;
            }
            let lifo = self.cfg.lifo && self.codel.overloaded();
            let w = if lifo { q.pop_back()? } else { q.pop_front()? };
            if w.deadline.is_some_and(|d| now >= d) {
                drop(w.token, RejectReason::DeadlineExpired);
                continue;
            }
            self.in_flight += 1;
            return Some(w.token);
        }
        None
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
