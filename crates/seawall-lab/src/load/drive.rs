//! The open-loop driver: send each request at its scheduled instant, whatever the others do.
//!
//! A closed-loop generator (wrk, ab: send, wait, send) slows down exactly when the system under
//! test does, so it offers less load to a sick server and measures latency only for the
//! requests it managed to send — *coordinated omission* (Gil Tene, "How NOT to Measure
//! Latency"). Here the dispatcher never waits for a response: at each scheduled instant it
//! either sends (a task of its own) or counts the request as dropped, and latency runs from the
//! scheduled instant, so a late dispatcher's lag is charged to the result, not hidden.
//!
//! Two bounds keep the generator honest about itself:
//! - **lateness**: a request the dispatcher reaches more than `max_lateness` after its time
//!   (the machine was busy) is dropped as *late* rather than sent in a burst with the backlog —
//!   a burst would be a different load from the one asked for;
//! - **in flight**: at `max_in_flight` requests outstanding, a due request is dropped as *full*
//!   (memory and sockets stay bounded however slow the target gets).
//!
//! Time comes from a [`Timer`], so the schedule logic runs on tokio's paused clock in tests.

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::schedule::Schedule;
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
    /// carries). The driver enforces the deadline by dropping the future when it passes.
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

/// What the dispatcher does with a due request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Send it now.
    Send,
    /// Drop it: more than `max_lateness` behind its time.
    Late,
    /// Drop it: `max_in_flight` reached.
    Full,
}

/// The decision for a request scheduled at `scheduled`, reached at `now`, with `in_flight`
/// outstanding.
pub fn admit(scheduled: Instant, now: Instant, in_flight: usize, bounds: &Bounds) -> Admit {
    if now.saturating_duration_since(scheduled) > bounds.max_lateness {
        Admit::Late
    } else if in_flight >= bounds.max_in_flight.get() {
        Admit::Full
    } else {
        Admit::Send
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
    let rec = Arc::new(Mutex::new(Recorder::new(schedule.seconds())));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    let start = timer.now();
    let mut reported = 0;
    let mut burst = 0u32;
    for offset in schedule.arrivals().skip(shard.index).step_by(shard.of.max(1)) {
        let at = start + offset;
        if timer.now() < at {
            timer.sleep_until(at).await;
        }
        let now = timer.now();
        let sec = offset.as_secs() as usize;
        while reported < sec {
            progress(&progress_of(&lock(&rec), reported, in_flight.load(Ordering::Relaxed)));
            reported += 1;
        }
        let mut flying = in_flight.load(Ordering::Acquire);
        let mut decision = admit(at, now, flying, &bounds);
        // Behind schedule (a burst owed after a stall) or at the bound, answers may be waiting
        // unread: let the request tasks run before deciding that the generator is full, so a
        // slot freed by an answer already on the socket is counted as free.
        burst = if now > at { burst + 1 } else { 0 };
        if decision == Admit::Full || burst % 32 == 31 {
            tokio::task::yield_now().await;
            flying = in_flight.load(Ordering::Acquire);
            decision = admit(at, now, flying, &bounds);
        }
        {
            let mut r = lock(&rec);
            r.offered(sec);
            match decision {
                Admit::Late => r.dropped(sec, true),
                Admit::Full => r.dropped(sec, false),
                Admit::Send => r.sent(sec, now.saturating_duration_since(at), flying + 1),
            }
        }
        if decision != Admit::Send {
            continue;
        }
        in_flight.fetch_add(1, Ordering::AcqRel);
        let due = at + deadline;
        let remaining = due.saturating_duration_since(now);
        let (rec, in_flight, transport, timer) =
            (rec.clone(), in_flight.clone(), transport.clone(), timer.clone());
        tasks.spawn(async move {
            let outcome = match tokio::time::timeout_at(due, transport.call(remaining)).await {
                Ok(o) => o,
                Err(_) => Outcome::Deadline,
            };
            let latency = timer.now().saturating_duration_since(at);
            lock(&rec).done(sec, outcome, latency);
            in_flight.fetch_sub(1, Ordering::AcqRel);
        });
        // Reap finished tasks as we go, so the set is the size of what is in flight.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let last = schedule.seconds().saturating_sub(1);
    while reported <= last {
        progress(&progress_of(&lock(&rec), reported, 0));
        reported += 1;
    }
    match Arc::try_unwrap(rec) {
        Ok(m) => m.into_inner().unwrap_or_else(PoisonError::into_inner),
        Err(shared) => lock(&shared).clone(),
    }
}
