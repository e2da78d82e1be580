//! Virtual-time-friendly instants and the [`Clock`] trait every decision is driven by.
//!
//! Core decisions never read the time themselves: they take `now: Instant` as an argument, so the
//! same code runs on a wall clock in middleware and on virtual time in the simulator. An
//! [`Instant`] is a count of nanoseconds since the clock's own epoch; it fits in one `u64`, so
//! budgets can keep timestamps in plain atomics.
//!
//! # Instants of different clocks
//!
//! An instant means something only next to the clock that made it: 5 s on a [`ManualClock`]
//! is five seconds after that clock's start, on [`SystemClock`] five seconds after the
//! machine's boot. Inside one component (a layer, a policy, the simulator) every instant comes
//! from one clock, and they stay plain `u64`s: typing them by clock (governor's
//! `Clock { type Instant }`) would spread a type parameter through every budget and the
//! simulator for a mix-up that cannot happen there. Instants cross between components in one
//! place, the deadline a server layer hands to the client layers of the calls its handler
//! makes. That crossing carries the clock's [`Epoch`] ([`Clock::epoch`]): a reader on the same
//! epoch uses the instant as it is; a reader on another converts it through the time left,
//! read on the clock that made it (as a hop over the network does). See `seawall-tower`'s
//! `wire::RequestDeadline`.

use std::fmt;
use std::ops::{Add, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// A point in time: nanoseconds since the epoch of the [`Clock`] that produced it.
///
/// Instants from clocks of different [`Epoch`]s are not comparable. Arithmetic saturates instead
/// of panicking.
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

/// Which timeline a clock's [`Instant`]s count on: two clocks of one epoch read instants that
/// compare; instants of clocks of different epochs do not.
///
/// # Why an epoch
///
/// [`Instant`] is one type for every clock, so that budgets keep instants in atomics and the
/// simulator and the middleware share every decision. The price is that nothing in the type
/// stops an instant of a [`ManualClock`] at 0 from being compared with [`SystemClock`]'s
/// reading, where "start + 5 s" means "expired since boot". Where an instant leaves the
/// component whose clock made it, it travels with that clock's epoch, and the reader checks it
/// against its own: an id compare, nothing on the paths that keep instants among themselves.
///
/// - [`SystemClock`] and [`CoarseClock`] share [`Epoch::MONOTONIC`]: the same kernel clock at two
///   resolutions.
/// - Every [`ManualClock::new`] gets a fresh epoch, shared by its clones (which share its time).
/// - A clock of your own gets one from [`Epoch::fresh`] (once per timeline, not per read), or
///   returns [`Epoch::MONOTONIC`] only if it reads the monotonic clock.
///
/// ```
/// use seawall::time::{Clock, CoarseClock, Epoch, ManualClock, SystemClock};
///
/// assert_eq!(SystemClock.epoch(), CoarseClock.epoch());
/// assert_eq!(SystemClock.epoch(), Epoch::MONOTONIC);
/// let manual = ManualClock::new();
/// assert_eq!(manual.epoch(), manual.clone().epoch(), "clones share the time, so the epoch");
/// assert_ne!(manual.epoch(), ManualClock::new().epoch(), "another manual clock is another time");
/// assert_ne!(manual.epoch(), SystemClock.epoch());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Epoch(u64);

impl Epoch {
    /// The monotonic clock's (`CLOCK_MONOTONIC` on Linux): [`SystemClock`] and [`CoarseClock`].
    pub const MONOTONIC: Epoch = Epoch(0);

    /// An epoch no other call returns: for a clock whose time is its own (a manual or virtual
    /// clock). Take it once per timeline and keep it.
    pub fn fresh() -> Epoch {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Epoch(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("Epoch(monotonic)"),
            n => write!(f, "Epoch(#{n})"),
        }
    }
}

/// A source of [`Instant`]s. Adapters hold one; core decisions take `now` as an argument.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Instant;

    /// The timeline [`now`](Self::now)'s instants count on (see [`Epoch`]): equal for two clocks
    /// exactly when their instants compare.
    fn epoch(&self) -> Epoch;

    /// The calendar time now, for the few values that come as dates (an HTTP-date
    /// `Retry-After`, RFC 9110 §10.2.3): a date is turned into a wait by subtracting this.
    ///
    /// Default: the system's calendar clock (`SystemTime::now()`), which is what a server's
    /// dates are written in. [`ManualClock`] overrides it so that dates too are deterministic.
    fn wall_time(&self) -> SystemTime {
        SystemTime::now()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
    fn epoch(&self) -> Epoch {
        (**self).epoch()
    }
    fn wall_time(&self) -> SystemTime {
        (**self).wall_time()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
    fn epoch(&self) -> Epoch {
        (**self).epoch()
    }
    fn wall_time(&self) -> SystemTime {
        (**self).wall_time()
    }
}

/// The monotonic wall clock.
///
/// On Linux it is `CLOCK_MONOTONIC` read directly (through the vDSO), in integer nanoseconds:
/// its epoch is the machine's boot, and every `SystemClock` on the machine agrees. A read is a
/// third of `std::time::Instant::now()` plus the conversion to nanoseconds, which a client call
/// pays once or twice on its success path (`crates/seawall-tower/BENCHMARKS-client.md`).
/// Elsewhere its epoch is the first time any `SystemClock` was read in the process.
///
/// [`instant_of`](Self::instant_of) and [`to_std`](Self::to_std) convert to and from
/// `std::time::Instant` (and so tokio's timers) through one pair of readings taken back to back
/// when either is first used: they agree with [`now`](Clock::now) to within the time between
/// those two readings (tens of nanoseconds), and round-trip exactly.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// A `std::time::Instant` and this clock's reading of the same moment.
    fn anchor() -> (std::time::Instant, Instant) {
        static ANCHOR: std::sync::OnceLock<(std::time::Instant, Instant)> =
            std::sync::OnceLock::new();
        *ANCHOR.get_or_init(|| (std::time::Instant::now(), raw_now()))
    }

    /// Converts a `std::time::Instant` into this clock's [`Instant`] (saturating at the epoch).
    pub fn instant_of(std: std::time::Instant) -> Instant {
        let (a_std, a) = Self::anchor();
        match std.checked_duration_since(a_std) {
            Some(after) => a + after,
            None => a - a_std.duration_since(std),
        }
    }

    /// Converts an [`Instant`] of this clock back into a `std::time::Instant`.
    pub fn to_std(at: Instant) -> std::time::Instant {
        let (a_std, a) = Self::anchor();
        if at >= a {
            a_std + (at - a)
        } else {
            // Before the anchor: as far back as `std::time::Instant` can go on this platform.
            a_std.checked_sub(a - at).unwrap_or(a_std)
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the same clock as `std::time::Instant` on Linux).
#[cfg(target_os = "linux")]
#[inline]
fn raw_now() -> Instant {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // Both fields are non-negative for CLOCK_MONOTONIC; u64 nanoseconds last ~584 years.
    let (secs, nanos) = (t.tv_sec as u64, t.tv_nsec as u64);
    Instant(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

/// `std::time::Instant` since the process's first read.
#[cfg(not(target_os = "linux"))]
fn raw_now() -> Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(std::time::Instant::now);
    Instant::from_duration(std::time::Instant::now().saturating_duration_since(epoch))
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        raw_now()
    }

    #[inline]
    fn epoch(&self) -> Epoch {
        Epoch::MONOTONIC
    }
}

/// A cheaper, coarser [`SystemClock`]: on Linux `CLOCK_MONOTONIC_COARSE`, the kernel's
/// timekeeping as of its last tick, read from the vDSO without reading the CPU's counter.
///
/// # Why a coarse clock
///
/// A layer on the success path reads its clock once per call; [`SystemClock`]'s read is a
/// large share of what the layer costs when the service below answers at once. The coarse
/// clock is the same clock (same epoch: its instants compare with [`SystemClock`]'s) seen at
/// the resolution of the kernel's tick — [`CoarseClock::resolution`], 1–10 ms depending on the
/// kernel's `HZ` — so it is never ahead of [`SystemClock`] and at most one tick behind. Use it
/// where decisions are made in milliseconds anyway (deadlines of tens of milliseconds and up,
/// budget windows of seconds) and the call rate makes the read count; keep [`SystemClock`] to
/// time things shorter than a few ticks. The timers that wait (tokio's) are not affected: only
/// the instants decisions are taken at.
///
/// Elsewhere than Linux it is [`SystemClock`].
///
/// ```
/// use seawall::time::{Clock, CoarseClock, SystemClock};
///
/// let (coarse, fine) = (CoarseClock.now(), SystemClock.now());
/// assert!(coarse <= fine, "never ahead of the fine clock");
/// assert!(CoarseClock::resolution() > std::time::Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CoarseClock;

impl CoarseClock {
    /// How far apart its readings step (the kernel's tick on Linux; 1 ns elsewhere).
    pub fn resolution() -> Duration {
        coarse_resolution()
    }
}

#[cfg(target_os = "linux")]
fn coarse_resolution() -> Duration {
    let t = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[cfg(not(target_os = "linux"))]
fn coarse_resolution() -> Duration {
    Duration::from_nanos(1)
}

impl Clock for CoarseClock {
    #[cfg(target_os = "linux")]
    #[inline]
    fn now(&self) -> Instant {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        // Non-negative, as for CLOCK_MONOTONIC, of which it is the tick-resolution view.
        let (secs, nanos) = (t.tv_sec as u64, t.tv_nsec as u64);
        Instant(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
    }

    #[cfg(not(target_os = "linux"))]
    #[inline]
    fn now(&self) -> Instant {
        raw_now()
    }

    #[inline]
    fn epoch(&self) -> Epoch {
        Epoch::MONOTONIC
    }
}

/// A clock that moves only when told to. Cloning shares the same time (and [`Epoch`]); each
/// [`ManualClock::new`] is a time of its own, with an epoch of its own.
///
/// Its calendar time ([`Clock::wall_time`]) is the Unix epoch plus its reading: set it to
/// `Instant::from_duration(date - UNIX_EPOCH)` to test HTTP dates.
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
#[derive(Debug, Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
    epoch: Epoch,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualClock {
    /// A clock at its epoch, with a fresh [`Epoch`].
    pub fn new() -> Self {
        ManualClock { nanos: Arc::default(), epoch: Epoch::fresh() }
    }

    /// Moves the clock forward by `d` (saturating).
    pub fn advance(&self, d: Duration) {
        let step = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_add(step)));
    }

    /// Sets the clock to `at`. Going backwards is allowed (tests of misuse need it).
    pub fn set(&self, at: Instant) {
        self.nanos.store(at.as_nanos(), Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant(self.nanos.load(Ordering::Acquire))
    }

    fn epoch(&self) -> Epoch {
        self.epoch
    }

    fn wall_time(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + self.now().since_epoch()
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
    fn manual_clock_tells_calendar_time_from_its_reading() {
        let c = ManualClock::new();
        c.advance(Duration::from_secs(784_111_777)); // Sun, 06 Nov 1994 08:49:37 GMT
        let since = c.wall_time().duration_since(SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(since, Duration::from_secs(784_111_777));
    }

    #[test]
    fn manual_clock_is_shared_between_clones() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(3));
        assert_eq!(b.now().since_epoch(), Duration::from_secs(3));
    }

    /// Each manual clock is a time of its own; its clones are the same time; the two kernel
    /// clocks are one. Mutation checked: `ManualClock::new` taking `Epoch::MONOTONIC` (or one
    /// shared epoch) instead of `Epoch::fresh()` fails the first two assertions.
    #[test]
    fn epochs_tell_timelines_apart() {
        let (a, b) = (ManualClock::new(), ManualClock::new());
        assert_ne!(a.epoch(), b.epoch());
        assert_ne!(a.epoch(), Epoch::MONOTONIC);
        assert_eq!(a.clone().epoch(), a.epoch());
        assert_ne!(ManualClock::default().epoch(), a.epoch());
        assert_eq!(SystemClock.epoch(), CoarseClock.epoch());
        // Through the `Arc` and `&` impls too.
        fn epoch_of(c: impl Clock) -> Epoch {
            c.epoch()
        }
        assert_eq!(epoch_of(Arc::new(a.clone())), epoch_of(&a));
        assert_eq!(epoch_of(&a), a.epoch());
        assert_ne!(Epoch::fresh(), Epoch::fresh());
        assert_eq!(format!("{:?}", Epoch::MONOTONIC), "Epoch(monotonic)");
    }

    #[test]
    fn system_clock_round_trips() {
        let now = std::time::Instant::now();
        let at = SystemClock::instant_of(now);
        assert_eq!(SystemClock::to_std(at), now);
        // Before the anchor too.
        let earlier = SystemClock::instant_of(now) - Duration::from_millis(5);
        assert_eq!(SystemClock::instant_of(SystemClock::to_std(earlier)), earlier);
    }

    /// The coarse clock is `SystemClock` seen at tick resolution: never ahead of it, never
    /// backwards, and (minimum over many tries, so a preemption between two reads does not
    /// count) within a few ticks of it, and stepping by ticks (consecutive reads repeat). On
    /// Linux only, where it differs from `SystemClock`. Mutation checked: reading
    /// `CLOCK_MONOTONIC` instead fails (no two reads repeat).
    #[cfg(target_os = "linux")]
    #[test]
    fn coarse_clock_is_the_system_clock_at_tick_resolution() {
        let res = CoarseClock::resolution();
        assert!(res > Duration::ZERO && res <= Duration::from_millis(100), "{res:?}");
        let mut last = CoarseClock.now();
        let (mut closest, mut repeats) = (Duration::MAX, 0);
        for _ in 0..1_000 {
            let (coarse, fine) = (CoarseClock.now(), SystemClock.now());
            assert!(coarse <= fine, "coarse {coarse:?} ahead of {fine:?}");
            assert!(coarse >= last, "went back");
            repeats += usize::from(coarse == last);
            last = coarse;
            closest = closest.min(fine - coarse);
        }
        assert!(closest <= res * 2, "{closest:?} apart at resolution {res:?}");
        assert!(repeats > 0, "1 000 reads within microseconds all differ: not tick-resolution");
    }

    #[test]
    fn system_clock_agrees_with_std_and_never_goes_back() {
        let mut last = SystemClock.now();
        for _ in 0..1_000 {
            let (before, std, after) =
                (SystemClock.now(), std::time::Instant::now(), SystemClock.now());
            let converted = SystemClock::instant_of(std);
            // Within the anchor's two back-to-back readings (tens of ns; 1 ms is generous).
            let slack = Duration::from_millis(1);
            assert!(converted + slack >= before && converted <= after + slack);
            assert!(before >= last && after >= before);
            last = after;
        }
    }
}
