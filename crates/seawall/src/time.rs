//! Virtual-time-friendly instants and the [`Clock`] trait every decision is driven by.
//!
//! Core decisions never read the time themselves: they take `now: Instant` as an argument, so the
//! same code runs on a wall clock in middleware and on virtual time in the simulator. An
//! [`Instant`] is a count of nanoseconds since the clock's own epoch; it fits in one `u64`, so
//! budgets can keep timestamps in plain atomics.

use std::fmt;
use std::ops::{Add, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A point in time: nanoseconds since the epoch of the [`Clock`] that produced it.
///
/// Instants from different clocks are not comparable. Arithmetic saturates instead of panicking.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The clock's epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// An instant `d` after the epoch (saturating at `u64::MAX` nanoseconds, ~584 years).
    pub fn from_duration(d: Duration) -> Self {
        Instant(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the epoch.
    pub const fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating.
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }

    /// `self - d`, saturating at the epoch.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instant({:?})", self.since_epoch())
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        self.saturating_sub(rhs)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

/// A source of [`Instant`]s. Adapters hold one; core decisions take `now` as an argument.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// The monotonic wall clock. Its epoch is the first time any `SystemClock` was read in this
/// process, so every `SystemClock` in a process agrees.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    fn epoch() -> std::time::Instant {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        *EPOCH.get_or_init(std::time::Instant::now)
    }

    /// Converts a `std::time::Instant` into this clock's [`Instant`] (saturating at the epoch).
    pub fn instant_of(std: std::time::Instant) -> Instant {
        Instant::from_duration(std.saturating_duration_since(Self::epoch()))
    }

    /// Converts an [`Instant`] of this clock back into a `std::time::Instant`.
    pub fn to_std(at: Instant) -> std::time::Instant {
        Self::epoch() + at.since_epoch()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Self::instant_of(std::time::Instant::now())
    }
}

/// A clock that moves only when told to. Cloning shares the same time.
///
/// ```
/// use seawall::time::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now() - t0, Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at its epoch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `d` (saturating).
    pub fn advance(&self, d: Duration) {
        let step = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_add(step)));
    }

    /// Sets the clock to `at`. Going backwards is allowed (tests of misuse need it).
    pub fn set(&self, at: Instant) {
        self.0.store(at.as_nanos(), Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant(self.0.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_nanos(5);
        assert_eq!(t - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(
            Instant::from_nanos(u64::MAX) + Duration::from_secs(1),
            Instant::from_nanos(u64::MAX)
        );
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
    }

    #[test]
    fn manual_clock_is_shared_between_clones() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(3));
        assert_eq!(b.now().since_epoch(), Duration::from_secs(3));
    }

    #[test]
    fn system_clock_round_trips() {
        let _ = SystemClock.now(); // fixes the epoch
        let now = std::time::Instant::now();
        let at = SystemClock::instant_of(now);
        let back = SystemClock::to_std(at);
        assert!(back <= now && now - back < Duration::from_micros(1));
    }
}
