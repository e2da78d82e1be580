//! The open-loop driver: each request is due at its scheduled instant, whatever the others do.
//!
//! A closed-loop generator (wrk, ab: send, wait, send) slows down exactly when the system under
//! test does, so it offers less load to a sick server and measures latency only for the
//! requests it managed to send — *coordinated omission* (Gil Tene, "How NOT to Measure
//! Latency"). Here nothing waits for a response before the *schedule* moves on, and latency
//! runs from the scheduled instant, so any wait — the generator's own or the server's — is
//! charged to the result, not hidden.
//!
//! # Workers pulling due requests
//!
//! A driver runs `max_in_flight` workers, one per request in flight. Each takes the next
//! unclaimed arrival of the schedule, sleeps until it is due (if it is not yet), sends it, waits
//! for the answer or the deadline, and takes the next one. While every worker is busy, due
//! requests wait in the schedule — the queue is the schedule itself, bounded in time — and the
//! first worker to come free sends the oldest of them at once, its latency still measured from
//! its scheduled instant. That is wrk2's coordinated-omission correction (Gil Tene's wrk2
//! README: a request late because its connection is busy is sent as soon as it is free, its
//! latency counted from when it *should* have gone), with k6's accounting of what could not be
//! sent at all (`dropped_iterations` of `constant-arrival-rate`). A short stall of the machine
//! (a thread off the CPU for a few milliseconds, which owes `rate × stall` requests at once)
//! then costs latency, not drops.
//!
//! Workers sleeping on their own timers send in bursts, everything due in one tick of tokio's
//! 1 ms timer at once. That is the cheaper way to send: one task releasing each request the
//! moment it is due, woken by every answer, was tried and sustained about 10 % less at 256 and
//! 512 connections, with three to four times the context switches. Either way the wait is
//! charged to latency.
//!
//! Two bounds keep the generator honest about itself:
//! - **lateness**: a request a worker takes up more than `max_lateness` after its time is
//!   dropped rather than sent (it would miss most of its deadline, and a burst of such requests
//!   would be a different load from the one asked for). It counts as dropped *full* if it was
//!   already due when the worker came free (every slot was busy: the in-flight bound held it
//!   back), as dropped *late* if the worker was idle and woke too late (the generator itself
//!   was off the CPU);
//! - **in flight**: at most `max_in_flight` requests are outstanding (one per worker), so
//!   memory and sockets stay bounded however slow the target gets.
//!
//! Time comes from a [`Timer`], so the schedule logic runs on tokio's paused clock in tests.

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::schedule::{Arrivals, Schedule};
use super::stats::{Outcome, Recorder};

/// Where the driver reads the time and waits.
pub trait Timer: Clone + Send + Sync + 'static {
    /// Now.
    fn now(&self) -> Instant;
    /// Resolves at (or after) `at`.
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send;
}

/// tokio's clock: the wall clock, or virtual time under `tokio::time::pause`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioTimer;

impl Timer for TokioTimer {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(at)
    }
}

/// Something that sends one request.
pub trait Transport: Send + Sync + 'static {
    /// Sends one request whose deadline is `remaining` from now (the `Request-Timeout-Ms` it
    /// carries). The driver enforces the deadline by dropping the future when it passes, so
    /// whatever the call holds (an HTTP connection) must survive that or be closed with it.
    fn call(&self, remaining: Duration) -> impl Future<Output = Outcome> + Send;
}

/// The generator's own bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Most requests outstanding at once (for HTTP/1.1 also the most connections).
    pub max_in_flight: NonZeroUsize,
    /// A request not sent within this of its scheduled time is dropped as late.
    pub max_lateness: Duration,
}

/// What a worker does with the request it took up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Send it now.
    Send,
    /// Drop it: more than `max_lateness` behind its time, the generator itself being late.
    Late,
    /// Drop it: more than `max_lateness` behind its time, having waited for a free slot
    /// (all `max_in_flight` were busy when it was due).
    Full,
}

/// The decision for a request scheduled at `scheduled`, taken up by a worker at `now`; `waited`
/// says it was already due when the worker came free (every slot was busy).
pub fn admit(scheduled: Instant, now: Instant, waited: bool, bounds: &Bounds) -> Admit {
    if now.saturating_duration_since(scheduled) <= bounds.max_lateness {
        Admit::Send
    } else if waited {
        Admit::Full
    } else {
        Admit::Late
    }
}

/// What the generator has done so far, once per second of the schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// The second just finished (0-based).
    pub second: usize,
    /// Due in it.
    pub offered: u64,
    /// Sent in it.
    pub sent: u64,
    /// Dropped in it (late or full).
    pub dropped: u64,
    /// Answered successfully so far, all seconds.
    pub good: u64,
    /// Outstanding now.
    pub in_flight: usize,
}

fn lock(r: &Mutex<Recorder>) -> std::sync::MutexGuard<'_, Recorder> {
    r.lock().unwrap_or_else(PoisonError::into_inner)
}

fn progress_of(rec: &Recorder, second: usize, in_flight: usize) -> Progress {
    let s = &rec.seconds[second.min(rec.seconds.len() - 1)];
    Progress {
        second,
        offered: s.offered,
        sent: s.sent,
        dropped: s.dropped_late + s.dropped_full,
        good: rec.seconds.iter().map(|s| s.good).sum(),
        in_flight,
    }
}

/// Which of the schedule's arrivals one driver sends: those with `index ≡ shard (mod of)`.
///
/// A generator on several threads runs one driver per thread (as wrk does: one event loop per
/// thread, no waking across threads), each on every `of`-th arrival, so together they send the
/// schedule exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This driver's share, `0..of`.
    pub index: usize,
    /// How many drivers share the schedule (at least 1).
    pub of: usize,
}

impl Shard {
    /// The whole schedule.
    pub const WHOLE: Shard = Shard { index: 0, of: 1 };
}

/// Runs `schedule` from now against `transport`, each request with `deadline` from its
/// scheduled time, and returns the counts once every request has ended (at the latest at its
/// deadline). `progress` is called as each second of the schedule is dispatched.
pub async fn drive<T: Transport, K: Timer>(
    schedule: &Schedule,
    bounds: Bounds,
    deadline: Duration,
    transport: Arc<T>,
    timer: K,
    progress: impl FnMut(&Progress),
) -> Recorder {
    drive_shard(schedule, Shard::WHOLE, bounds, deadline, transport, timer, progress).await
}

/// What one driver's workers share.
struct Shared<T, K> {
    start: Instant,
    bounds: Bounds,
    deadline: Duration,
    transport: Arc<T>,
    timer: K,
    /// The arrivals no worker has taken up yet.
    arrivals: Mutex<std::iter::StepBy<std::iter::Skip<Arrivals>>>,
    /// Locked inside `arrivals` (never the other way round).
    rec: Mutex<Recorder>,
    in_flight: AtomicUsize,
    /// The second of the last arrival taken up (`usize::MAX` once there are none left): tells
    /// the progress loop that every earlier second is fully offered.
    claimed: watch::Sender<usize>,
}

impl<T: Transport, K: Timer> Shared<T, K> {
    /// Takes up the next arrival and counts it as offered.
    fn claim(&self) -> Option<Duration> {
        let mut arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner);
        let next = arrivals.next();
        let sec = next.map_or(usize::MAX, |t| t.as_secs() as usize);
        if let Some(t) = next {
            lock(&self.rec).offered(t.as_secs() as usize);
        }
        self.claimed.send_if_modified(|c| std::mem::replace(c, sec) != sec);
        next
    }

    /// One slot of the in-flight bound: takes up due requests one after another until none are
    /// left.
    async fn worker(self: Arc<Self>) {
        while let Some(offset) = self.claim() {
            let at = self.start + offset;
            let sec = offset.as_secs() as usize;
            let mut now = self.timer.now();
            // Due before this worker was free to take it: it waited for a slot.
            let waited = now > at;
            if now < at {
                self.timer.sleep_until(at).await;
                now = self.timer.now();
            }
            let lag = now.saturating_duration_since(at);
            match admit(at, now, waited, &self.bounds) {
                Admit::Late => lock(&self.rec).dropped(sec, true),
                Admit::Full => lock(&self.rec).dropped(sec, false),
                Admit::Send => {
                    let flying = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
                    lock(&self.rec).sent(sec, lag, flying);
                    let due = at + self.deadline;
                    let remaining = due.saturating_duration_since(now);
                    let call = self.transport.call(remaining);
                    let outcome = match tokio::time::timeout_at(due, call).await {
                        Ok(o) => o,
                        Err(_) => Outcome::Deadline,
                    };
                    let end = self.timer.now();
                    let latency = end.saturating_duration_since(at);
                    let from_send = end.saturating_duration_since(now);
                    self.in_flight.fetch_sub(1, Ordering::AcqRel);
                    lock(&self.rec).done(sec, outcome, latency, from_send);
                }
            }
        }
    }
}

/// [`drive`] for one [`Shard`] of the schedule (every second is still reported to `progress`).
pub async fn drive_shard<T: Transport, K: Timer>(
    schedule: &Schedule,
    shard: Shard,
    bounds: Bounds,
    deadline: Duration,
    transport: Arc<T>,
    timer: K,
    mut progress: impl FnMut(&Progress),
) -> Recorder {
    let start = timer.now();
    let shared = Arc::new(Shared {
        start,
        bounds,
        deadline,
        transport,
        timer: timer.clone(),
        arrivals: Mutex::new(schedule.arrivals().skip(shard.index).step_by(shard.of.max(1))),
        rec: Mutex::new(Recorder::new(schedule.seconds())),
        in_flight: AtomicUsize::new(0),
        claimed: watch::Sender::new(0),
    });
    let mut claimed = shared.claimed.subscribe();
    let mut workers = JoinSet::new();
    for _ in 0..bounds.max_in_flight.get() {
        workers.spawn(shared.clone().worker());
    }
    let report = |second: usize| {
        let flying = shared.in_flight.load(Ordering::Relaxed);
        progress_of(&lock(&shared.rec), second, flying)
    };
    // Second `s` is reported once all its arrivals are taken up (offered is final) and due.
    let end = start + schedule.duration();
    for s in 0..schedule.seconds() {
        let _ = claimed.wait_for(|c| *c > s).await;
        timer.sleep_until(end.min(start + Duration::from_secs(s as u64 + 1))).await;
        progress(&report(s));
    }
    while workers.join_next().await.is_some() {}
    std::mem::replace(&mut *lock(&shared.rec), Recorder::new(1))
}
