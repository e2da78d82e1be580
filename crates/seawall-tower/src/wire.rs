//! The wire conventions every part of seawall speaks.
//!
//! | meaning | HTTP | gRPC |
//! |---|---|---|
//! | time left for this request | `Request-Timeout-Ms: <ms>` | `grpc-timeout` |
//! | which attempt this is | `Request-Attempt: <n>` (1 = first; absent = first) | `grpc-previous-rpc-attempts` |
//! | wait at least / don't retry | `Retry-After`, `Retry-Pushback-Ms` (negative = don't retry) | `grpc-retry-pushback-ms` |
//! | safe to retry a write | `Idempotency-Key` | same key in metadata |
//!
//! Header values from the network are untrusted: parsed strictly, clamped, never a panic. The
//! codecs for time and hints live in the core ([`seawall::deadline`], [`seawall::hint`]); this
//! module adds the attempt number and the request extension that carries a deadline, with its
//! clock, from a server layer to the client layers of outgoing calls ([`RequestDeadline`]).

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use seawall::deadline::Deadline;
use seawall::time::{Clock, Epoch, Instant, SystemClock};

/// `Request-Attempt`: 1 for a first attempt, 2 for the first retry, … Absent means a first
/// attempt: seawall's client layers stamp it from the first retry on (a first attempt of a
/// header-less request then needs no header map at all), and its servers read no header as 1.
pub const REQUEST_ATTEMPT: HeaderName = HeaderName::from_static("request-attempt");
/// `Request-Timeout-Ms`: time left for the request, in whole milliseconds.
pub const REQUEST_TIMEOUT_MS: HeaderName = HeaderName::from_static("request-timeout-ms");
/// `Retry-Pushback-Ms`: wait at least this long; negative means don't retry.
pub const RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("retry-pushback-ms");
/// `Idempotency-Key` (IETF httpapi draft).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// gRPC: time left.
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
/// gRPC: attempts before this one (0 for a first attempt).
pub const GRPC_PREVIOUS_RPC_ATTEMPTS: HeaderName =
    HeaderName::from_static("grpc-previous-rpc-attempts");
/// gRPC: pushback in milliseconds; negative means don't retry.
pub const GRPC_RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");

/// Highest attempt number believed from the wire. Nobody legitimately sends more; a larger value
/// is clamped (it still marks the request as a retry, which is what matters for shedding).
pub const MAX_WIRE_ATTEMPT: u32 = 100;

/// Parses `Request-Attempt`: one to three ASCII digits, at least 1; larger values clamp to
/// [`MAX_WIRE_ATTEMPT`]. Anything else is `None` (treated as absent: a first attempt).
pub fn parse_attempt(value: &[u8]) -> Option<NonZeroU32> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = value.iter().skip_while(|&&b| b == b'0').count();
    let n = if digits > 3 {
        MAX_WIRE_ATTEMPT
    } else {
        value.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')).min(MAX_WIRE_ATTEMPT)
    };
    NonZeroU32::new(n)
}

/// Parses `grpc-previous-rpc-attempts` (0 = first attempt) into the attempt number (1 = first),
/// with the same strictness and clamp as [`parse_attempt`].
pub fn parse_grpc_previous_attempts(value: &[u8]) -> Option<NonZeroU32> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = value.iter().skip_while(|&&b| b == b'0').count();
    let prev = if digits > 3 {
        MAX_WIRE_ATTEMPT
    } else {
        value.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'))
    };
    NonZeroU32::new(prev.saturating_add(1).min(MAX_WIRE_ATTEMPT))
}

/// The deadline of the request being served, with the clock that made it.
///
/// The server `DeadlineLayer` inserts it into request extensions (and runs the handler inside
/// [`propagate::scope`](crate::propagate::scope) with it); handlers may clone it onto outgoing
/// requests, where the client layers read it, so the edge's deadline flows down the whole call
/// path. Build one by hand with [`RequestDeadline::on`] or [`RequestDeadline::after`].
///
/// # Why it carries its clock
///
/// A [`Deadline`] is an instant, and an instant means something only on the clock that made it
/// (see [`Epoch`]): "start + 5 s" on a `ManualClock` at 0 is five seconds away, on
/// `SystemClock` it passed just after boot. The server layer and the client layers of one
/// service each have their own clock (`with_clock`), so nothing makes them agree — a
/// `ManualClock` server in a test, or a `time::TokioClock` client on a paused runtime under a
/// `SystemClock` server, would silently misread the deadline: a call with seconds left would be
/// refused at once, or a call of an expired request sent with a deadline of hours.
///
/// So the instant never leaves its clock bare. A reader asks for the deadline on its own clock
/// ([`for_clock`](Self::for_clock)):
///
/// - on the same [`Epoch`] (the same clock or its clones; `SystemClock` and `CoarseClock`),
///   the instant is used as it is: an id compare, no clock read;
/// - on another epoch, the time left is read on the clock that made the deadline and starts
///   again from the reader's `now`: exactly what a hop over the network does with
///   `Request-Timeout-Ms`. It is right whatever the two clocks are, including a
///   `TokioClock` on a runtime that may or may not be paused (which no tag can tell), and
///   costs one read of the maker's clock.
///
/// Failing the call instead would refuse correct configurations that the epochs cannot prove
/// equal (the gRPC client layer runs on `TokioClock` under any server), and ignoring the
/// deadline would let the handler's calls outlive their caller without a word; the time left
/// keeps the deadline's meaning, which is what the reader needs.
///
/// ```
/// use seawall::time::{Clock, ManualClock, SystemClock};
/// use seawall_tower::wire::RequestDeadline;
/// use std::time::Duration;
///
/// let server = ManualClock::new();
/// server.advance(Duration::from_secs(3600));
/// let d = RequestDeadline::after(&server, Duration::from_millis(250));
///
/// // A reader on the same clock (or a clone of it) gets the instant as it was made.
/// assert_eq!(d.for_clock(&server, server.now()).instant(), server.now() + Duration::from_millis(250));
/// // A reader on another manual clock, still at 0, gets the time left from its own now ...
/// let client = ManualClock::new();
/// assert_eq!(d.for_clock(&client, client.now()).remaining(client.now()), Duration::from_millis(250));
/// // ... and so does one on the system clock, whose epoch is the machine's boot.
/// let now = SystemClock.now();
/// assert_eq!(d.for_clock(&SystemClock, now).remaining(now), Duration::from_millis(250));
/// // Time passes on the clock that made it.
/// server.advance(Duration::from_millis(100));
/// assert_eq!(d.remaining(), Duration::from_millis(150));
/// assert_eq!(d.for_clock(&client, client.now()).remaining(client.now()), Duration::from_millis(150));
/// ```
#[derive(Clone)]
pub struct RequestDeadline {
    deadline: Deadline,
    clock: DeadlineClock,
}

impl RequestDeadline {
    /// `deadline`, an instant of `clock`.
    ///
    /// The deadline keeps a clone of `clock` behind an `Arc`, shared by its clones (a
    /// `RequestDeadline` is `Clone`, not `Copy`), except on [`Epoch::MONOTONIC`]: there it
    /// keeps no clock and reads `SystemClock`, which tells the same time, so the deadlines of
    /// the usual `SystemClock` and `CoarseClock` layers clone no `Arc`.
    pub fn on<C: Clock + Clone + 'static>(clock: &C, deadline: Deadline) -> Self {
        RequestDeadline { deadline, clock: DeadlineClock::of(clock) }
    }

    /// `timeout` from `clock`'s now.
    pub fn after<C: Clock + Clone + 'static>(clock: &C, timeout: Duration) -> Self {
        Self::on(clock, Deadline::after(clock.now(), timeout))
    }

    /// The deadline as an instant of `clock`, whose reading is `now`: the instant itself on
    /// the same [`Epoch`], else the time left (read on the clock that made the deadline) from
    /// `now`. See [why](Self#why-it-carries-its-clock).
    #[inline]
    pub fn for_clock<C: Clock + ?Sized>(&self, clock: &C, now: Instant) -> Deadline {
        if clock.epoch() == self.clock.epoch {
            self.deadline
        } else {
            Deadline::after(now, self.remaining())
        }
    }

    /// The time left, read on the clock that made the deadline (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.remaining(self.clock.now())
    }

    /// The epoch of the clock that made the deadline.
    pub fn epoch(&self) -> Epoch {
        self.clock.epoch
    }
}

/// Equal when the instants are equal on the same epoch.
impl PartialEq for RequestDeadline {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline && self.clock.epoch == other.clock.epoch
    }
}

impl Eq for RequestDeadline {}

impl fmt::Debug for RequestDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestDeadline")
            .field("deadline", &self.deadline)
            .field("epoch", &self.clock.epoch)
            .finish()
    }
}

/// The clock a [`RequestDeadline`] is an instant of, as the deadline keeps it: made once per
/// layer (or per deadline made by hand), cloned into each request's deadline.
#[derive(Clone)]
pub(crate) struct DeadlineClock {
    epoch: Epoch,
    /// `None` for the monotonic epoch, read with `SystemClock`.
    clock: Option<Arc<dyn Clock>>,
}

impl DeadlineClock {
    pub(crate) fn of<C: Clock + Clone + 'static>(clock: &C) -> Self {
        let epoch = clock.epoch();
        let clock = (epoch != Epoch::MONOTONIC).then(|| Arc::new(clock.clone()) as Arc<dyn Clock>);
        DeadlineClock { epoch, clock }
    }

    /// `deadline`, an instant of this clock (for a layer that made the clock once).
    #[cfg(feature = "server")]
    pub(crate) fn stamp(&self, deadline: Deadline) -> RequestDeadline {
        RequestDeadline { deadline, clock: self.clone() }
    }

    pub(crate) fn now(&self) -> Instant {
        match &self.clock {
            Some(c) => c.now(),
            None => SystemClock.now(),
        }
    }
}

impl fmt::Debug for DeadlineClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.clock {
            Some(c) => fmt::Debug::fmt(c, f),
            None => f.write_str("SystemClock"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seawall::time::{CoarseClock, ManualClock};

    const MS: Duration = Duration::from_millis(1);

    /// A deadline read on another clock is the time left on its own, from the reader's now;
    /// on the same epoch (a clone; `SystemClock` and `CoarseClock`) the instant itself.
    /// Mutation checked: `for_clock` returning `self.deadline` whatever the epoch fails the
    /// first assertion (the server's hour-late instant read at the client's 0: 3 600 250 ms
    /// left); comparing no epochs and always converting fails the `same` assertion.
    #[test]
    fn a_deadline_is_read_through_its_own_clock() {
        let server = ManualClock::new();
        server.advance(Duration::from_secs(3600));
        let d = RequestDeadline::after(&server, 250 * MS);
        let client = ManualClock::new();
        assert_eq!(d.for_clock(&client, client.now()).remaining(client.now()), 250 * MS);
        // Time passing on the reader's clock does not count; on the maker's, it does.
        client.advance(Duration::from_secs(10));
        assert_eq!(d.for_clock(&client, client.now()).remaining(client.now()), 250 * MS);
        server.advance(200 * MS);
        assert_eq!(d.for_clock(&client, client.now()).remaining(client.now()), 50 * MS);
        server.advance(Duration::from_secs(1));
        assert!(d.for_clock(&client, client.now()).is_expired(client.now()));
        // The same epoch: the instant as made, whatever `now` the reader passes.
        let same = d.for_clock(&server.clone(), Instant::ZERO);
        assert_eq!(same.instant(), Instant::ZERO + Duration::from_secs(3600) + 250 * MS);
        let sys = RequestDeadline::after(&SystemClock, 250 * MS);
        assert_eq!(sys.for_clock(&CoarseClock, Instant::ZERO), sys.deadline);
        assert_eq!(sys.epoch(), Epoch::MONOTONIC);
        assert_ne!(sys, RequestDeadline::on(&server, sys.deadline), "same instant, other epoch");
    }

    /// A deadline holds a clone of its clock, shared by the deadline's clones and let go with
    /// the last of them; one on the monotonic epoch holds none (the common case clones no
    /// `Arc`). Mutation checked: the previous `DeadlineClock` (each epoch's first clock
    /// `Box::leak`ed into a process-wide table) leaves the count at 2 after the drop; keeping
    /// an `Arc` on the monotonic epoch too fails the `SystemClock` assertion.
    #[test]
    fn a_deadline_holds_its_clock_until_the_last_clone_goes() {
        #[derive(Debug, Clone)]
        struct Counted(Arc<()>, Epoch);
        impl Clock for Counted {
            fn now(&self) -> Instant {
                Instant::ZERO
            }
            fn epoch(&self) -> Epoch {
                self.1
            }
        }
        let clock = Counted(Arc::new(()), Epoch::fresh());
        let d = RequestDeadline::after(&clock, 250 * MS);
        let clones = vec![d.clone(); 3];
        assert_eq!(Arc::strong_count(&clock.0), 2, "one clone of the clock, shared");
        assert_eq!(clones[2].remaining(), 250 * MS);
        drop((d, clones));
        assert_eq!(Arc::strong_count(&clock.0), 1, "let go with the last deadline");
        assert!(RequestDeadline::after(&SystemClock, MS).clock.clock.is_none());
        assert!(RequestDeadline::after(&CoarseClock, MS).clock.clock.is_none());
    }

    #[test]
    fn attempt_parsing_is_strict_and_clamped() {
        assert_eq!(parse_attempt(b"1").map(NonZeroU32::get), Some(1));
        assert_eq!(parse_attempt(b"3").map(NonZeroU32::get), Some(3));
        assert_eq!(parse_attempt(b"007").map(NonZeroU32::get), Some(7));
        assert_eq!(parse_attempt(b"99999999999999999999").map(NonZeroU32::get), Some(100));
        for bad in [&b""[..], b"0", b"-1", b"+1", b" 1", b"1.0", b"abc", b"\xff"] {
            assert_eq!(parse_attempt(bad), None, "{bad:?}");
        }
        assert_eq!(parse_grpc_previous_attempts(b"0").map(NonZeroU32::get), Some(1));
        assert_eq!(parse_grpc_previous_attempts(b"2").map(NonZeroU32::get), Some(3));
        assert_eq!(parse_grpc_previous_attempts(b"x"), None);
    }
}
