//! [`Admission`]: the in-flight count, two queues, CoDel and adaptive LIFO, as one state machine.
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

use crate::time::Instant;

use super::codel::{Codel, CodelConfig};
use super::limit::Limit;
use super::{Class, Offer, Reason, Ticket};

/// How an [`Admission`] is set up: its limit, its queue, and the queue's discipline.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The in-flight cap, fixed or adaptive.
    pub limit: Limit,
    /// How many requests may wait for a slot (0: none wait; reject as soon as the cap is hit).
    pub max_queue: usize,
    /// CoDel parameters (default: folly's target 5 ms, interval 100 ms).
    pub codel: CodelConfig,
    /// Serve newest-first while CoDel sees a standing queue (default on; off = always FIFO).
    pub lifo: bool,
}

impl Config {
    /// A fixed cap with a queue of `max_queue`, CoDel at folly's defaults, adaptive LIFO on.
    pub fn new(limit: Limit, max_queue: usize) -> Self {
        Config { limit, max_queue, codel: CodelConfig::default(), lifo: true }
    }

    /// A plain FIFO queue of `max_queue` in front of the cap, refusing arrivals beyond it: no
    /// CoDel ([`CodelConfig::OFF`]), no LIFO. Offered every request as a [`Class::First`] with
    /// no deadline, it is a server without load shedding (the simulator's unprotected tiers).
    pub fn fifo(limit: Limit, max_queue: usize) -> Self {
        Config { limit, max_queue, codel: CodelConfig::OFF, lifo: false }
    }
}

#[derive(Debug)]
struct Waiter<T> {
    id: u64,
    token: T,
    enqueued: Instant,
    deadline: Option<Instant>,
}

/// The server's admission state: every decision of `ShedLayer`'s load shedding, sans-io.
///
/// `T` is whatever the caller needs back when a queued request's turn comes (the tower layer
/// keeps a channel to wake the request; the simulator, the job's id). One `Admission` per
/// protected server; it holds no lock and reads no clock: every method that depends on time
/// takes `now`. See the [module docs](super) for the why and an example.
#[derive(Debug)]
pub struct Admission<T> {
    cfg: Config,
    in_flight: usize,
    /// An outside bound on the slots (for example, workers lost to a fault), `usize::MAX` if none.
    ceiling: usize,
    first: VecDeque<Waiter<T>>,
    retries: VecDeque<Waiter<T>>,
    codel: Codel,
    next_id: u64,
}

impl<T> Admission<T> {
    /// An empty server: nothing in flight, nothing queued.
    pub fn new(cfg: Config) -> Self {
        Admission {
            codel: Codel::new(cfg.codel),
            cfg,
            in_flight: 0,
            ceiling: usize::MAX,
            first: VecDeque::new(),
            retries: VecDeque::new(),
            next_id: 0,
        }
    }

    /// The configuration (with the limit as it was built, not as it adapted since).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Requests holding a slot.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Requests waiting for a slot.
    pub fn queue_len(&self) -> usize {
        self.first.len() + self.retries.len()
    }

    /// The in-flight limit now (the adaptive limit moves; the ceiling bounds it).
    pub fn limit(&self) -> usize {
        self.cfg.limit.current().min(self.ceiling)
    }

    /// Whether CoDel saw a standing queue in its last interval (retries are then refused at the
    /// door, and the queue is served newest-first if LIFO is on).
    pub fn overloaded(&self) -> bool {
        self.codel.overloaded()
    }

    /// Bounds the slots from outside, below the limit: a host that lost workers to a fault, or
    /// `0` while it serves nothing. `usize::MAX` removes the bound. Lowering it never preempts
    /// what runs; call [`next`](Self::next) after raising it.
    pub fn set_ceiling(&mut self, ceiling: usize) {
        self.ceiling = ceiling;
    }

    /// Age of the oldest queued request at `now`.
    pub fn oldest_age(&self, now: Instant) -> Duration {
        let f = self.first.front().map(|w| w.enqueued);
        let r = self.retries.front().map(|w| w.enqueued);
        match f.into_iter().chain(r).min() {
            Some(t) => now.saturating_duration_since(t),
            None => Duration::ZERO,
        }
    }

    /// Decides what to do with a request arriving at `now`: run it, queue it, or reject it.
    /// `token` is called only if the request is queued. A queued first attempt may push out a
    /// queued retry ([`Offer::Queued::evicted`]); tell that retry it was shed
    /// ([`Reason::RetryShed`]).
    pub fn offer(
        &mut self,
        now: Instant,
        class: Class,
        deadline: Option<Instant>,
        token: impl FnOnce() -> T,
    ) -> Offer<T> {
        if deadline.is_some_and(|d| now >= d) {
            return Offer::Reject(Reason::DeadlineExpired);
        }
        if self.in_flight < self.limit() && self.queue_len() == 0 {
            self.codel.observe(now, Duration::ZERO);
            self.in_flight += 1;
            return Offer::Run;
        }
        if class == Class::Retry && self.codel.overloaded() {
            return Offer::Reject(Reason::RetryShed);
        }
        let mut evicted = None;
        if self.queue_len() >= self.cfg.max_queue {
            match class {
                Class::First if !self.retries.is_empty() => {
                    evicted = self.retries.pop_front().map(|w| w.token);
                }
                Class::First => return Offer::Reject(Reason::QueueFull),
                Class::Retry => return Offer::Reject(Reason::RetryShed),
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let w = Waiter { id, token: token(), enqueued: now, deadline };
        match class {
            Class::First => self.first.push_back(w),
            Class::Retry => self.retries.push_back(w),
        }
        Offer::Queued { ticket: Ticket(id), evicted }
    }

    /// Removes a queued request that went away (caller disconnected, deadline timer fired) and
    /// returns its token; `None` if it is no longer queued (granted or dropped already).
    pub fn cancel(&mut self, ticket: Ticket) -> Option<T> {
        for q in [&mut self.first, &mut self.retries] {
            // Ids grow in push order and both ends pop, so each queue stays sorted by id.
            if let Ok(i) = q.binary_search_by_key(&ticket.0, |w| w.id) {
                return q.remove(i).map(|w| w.token);
            }
        }
        None
    }

    /// A request that held a slot finished; `rtt` is its handler latency if it succeeded (the
    /// adaptive limit learns from it). Call [`next`](Self::next) afterwards to hand the slot on.
    pub fn finish(&mut self, rtt: Option<Duration>) {
        if let Some(rtt) = rtt {
            self.cfg.limit.sample(rtt, self.in_flight);
        }
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// If a slot is free, takes it for the next queued request and returns its token (first
    /// attempts before retries; FIFO, or LIFO under a standing queue). Requests found doomed on
    /// the way (CoDel, an expired deadline) are handed to `drop` with the reason. Call it in a
    /// loop until `None` to fill every free slot.
    pub fn next(&mut self, now: Instant, mut drop: impl FnMut(T, Reason)) -> Option<T> {
        while self.in_flight < self.limit() {
            let q = if self.first.is_empty() { &mut self.retries } else { &mut self.first };
            let oldest = q.front()?;
            // The standing delay is the head-of-line age, whichever end we serve from.
            let head_delay = now.saturating_duration_since(oldest.enqueued);
            if self.codel.observe(now, head_delay) {
                let w = q.pop_front()?;
                drop(w.token, Reason::CodelDrop);
                continue;
            }
            let lifo = self.cfg.lifo && self.codel.overloaded();
            let w = if lifo { q.pop_back()? } else { q.pop_front()? };
            if w.deadline.is_some_and(|d| now >= d) {
                drop(w.token, Reason::DeadlineExpired);
                continue;
            }
            self.in_flight += 1;
            return Some(w.token);
        }
        None
    }

    /// Empties the queues (a restart: everything waiting is lost), first attempts first, and
    /// forgets what was in flight. CoDel and the adaptive limit keep what they learned.
    pub fn clear(&mut self, mut each: impl FnMut(T)) {
        self.in_flight = 0;
        for w in self.first.drain(..).chain(self.retries.drain(..)) {
            each(w.token);
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
