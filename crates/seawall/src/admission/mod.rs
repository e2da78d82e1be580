//! The server's admission decisions: in-flight cap, bounded queue, CoDel and adaptive LIFO,
//! retries shed first, the gradient limit, the operator's knob and the jittered `Retry-After`.
//!
//! # Why shed, and why at the door
//!
//! A server past its capacity that accepts everything serves everyone late: queues grow, every
//! response arrives after its caller gave up, throughput stays high and goodput falls to zero —
//! and the callers' retries make it worse (Bronson et al., "Metastable Failures in Distributed
//! Systems", HotOS 2021). A server that refuses the excess at once keeps serving the rest in
//! time. So admission caps the requests in the handler, lets a short queue absorb bursts, and
//! answers everything else **before any work**, with a jittered `Retry-After` ([`Rejection`]).
//!
//! Inside that frame every choice favours the work that can still succeed:
//!
//! - **Retries shed first** ([`Class`]): a first attempt served is a retry never sent.
//! - **A standing queue is dropped, not served** ([`CodelConfig`]): CoDel as folly runs it.
//! - **Newest first under standing delay** ([`Config::lifo`]): the oldest waiter has most likely
//!   been abandoned already.
//! - **Doomed work is dropped**: a request whose deadline passed is refused, queued or not.
//! - **The limit can learn** ([`Limit::gradient`]): Netflix's Gradient2 shrinks it when latency
//!   rises below us.
//! - **An operator can cut admission** ([`cut_by`], over [`Control`](crate::control::Control)),
//!   then ramp back 10 → 25 → 50 → 100 %.
//!
//! # Why a state machine and no lock
//!
//! These decisions are plain synchronous functions over [`Admission`], with time passed in as
//! `now` and randomness as an [`Rng`](crate::rng::Rng), as governor's `check()` is: the
//! `ShedLayer` in `seawall-tower` puts one behind a short mutex and wakes queued requests over
//! channels; the simulator in `seawall-sim` drives the very same type on virtual time. What the
//! simulator shows about shedding is then what the layer does.
//!
//! # Example
//!
//! ```
//! use std::num::NonZeroUsize;
//! use std::time::Duration;
//! use seawall::admission::{Admission, Class, Config, Limit, Offer, Reason, Rejection, RetryAfter};
//! use seawall::hint::Hint;
//! use seawall::rng::SeededRng;
//! use seawall::time::{Clock, ManualClock};
//!
//! let clock = ManualClock::new();
//! // One request in the handler at a time, one waiting.
//! let mut adm = Admission::new(Config::new(Limit::fixed(NonZeroUsize::MIN), 1));
//! assert!(matches!(adm.offer(clock.now(), Class::First, None, || "a"), Offer::Run));
//! assert!(matches!(adm.offer(clock.now(), Class::Retry, None, || "b"), Offer::Queued { .. }));
//! // The queue is full: a first attempt evicts the queued retry...
//! match adm.offer(clock.now(), Class::First, None, || "c") {
//!     Offer::Queued { evicted: Some("b"), .. } => {}
//!     other => panic!("{other:?}"),
//! }
//! // ...and a retry is refused at once, with a jittered Retry-After.
//! let Offer::Reject(reason) = adm.offer(clock.now(), Class::Retry, None, || "d") else { panic!() };
//! assert_eq!(reason, Reason::RetryShed);
//! let answer = Rejection::of(reason, &RetryAfter::default(), &mut SeededRng::new(7));
//! assert_eq!(answer.status(), 503);
//! assert!(matches!(answer.hint(), Hint::After(d) if d >= Duration::from_secs(1)));
//! // "a" finishes after 20 ms; its slot goes to "c".
//! clock.advance(Duration::from_millis(20));
//! adm.finish(Some(Duration::from_millis(20)));
//! assert_eq!(adm.next(clock.now(), |_, _| unreachable!()), Some("c"));
//! ```

mod codel;
mod door;
mod limit;
mod queue;

use std::fmt;

pub use codel::{CodelConfig, DEFAULT_INTERVAL, DEFAULT_TARGET};
pub use door::{DEFAULT_RETRY_AFTER_SECS, Rejection, RetryAfter, cut_by};
pub use limit::{GradientConfig, Limit};
pub use queue::{Admission, Config};

/// Whether a request is a first attempt or a retry (attempt > 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// The caller's first attempt.
    First,
    /// A retry: served only when no first attempt waits, shed first.
    Retry,
}

impl Class {
    /// The class of attempt number `n` (1 = first; 0, malformed, counts as first).
    pub fn of_attempt(n: u32) -> Self {
        if n > 1 { Class::Retry } else { Class::First }
    }
}

/// Why a request was refused or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The in-flight cap was reached and the queue was full.
    QueueFull,
    /// CoDel dropped it: the queue had a standing delay and this request waited too long.
    CodelDrop,
    /// Its deadline passed before (or while) it could be served.
    DeadlineExpired,
    /// A retry (attempt > 1) shed to make room for, or protect, first attempts.
    RetryShed,
    /// Turned away at the door because an operator cut admission below 100 % ([`cut_by`]).
    AdmissionCut,
}

impl Reason {
    /// A short stable label (for metric labels).
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::QueueFull => "queue_full",
            Reason::CodelDrop => "codel_drop",
            Reason::DeadlineExpired => "deadline_expired",
            Reason::RetryShed => "retry_shed",
            Reason::AdmissionCut => "admission_cut",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A queued request's place, to [`cancel`](Admission::cancel) it if its caller goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket(u64);

/// What [`Admission::offer`] decided.
#[derive(Debug)]
#[must_use]
pub enum Offer<T> {
    /// Run now: a slot was taken; give it back with [`Admission::finish`].
    Run,
    /// Queued; its token comes back from [`Admission::next`] (run) or to `next`'s `drop`.
    Queued {
        /// Its place, for [`Admission::cancel`].
        ticket: Ticket,
        /// A queued retry pushed out to make room: answer it [`Reason::RetryShed`].
        evicted: Option<T>,
    },
    /// Refuse at once, before any work.
    Reject(Reason),
}
