//! Clocks for the layers: [`TokioClock`], so a paused tokio runtime runs every deadline and
//! every wait on the same virtual time.
//!
//! # Why a clock of tokio's
//!
//! Every layer reads the time through a [`Clock`] (`C = SystemClock` by default) and waits
//! with tokio's timers. Under `tokio::time::pause` (or `#[tokio::test(start_paused = true)]`)
//! the timers run on virtual time while [`SystemClock`] keeps reading the machine's: a
//! deadline of 100 ms would then pass while the layers' 100 ms waits had not. Build the layers
//! with `.with_clock(TokioClock)` and both read one time: a test of your own service can
//! advance an hour of retries, backoffs and deadlines in microseconds, deterministically.
//!
//! In production, `.with_clock(seawall::time::CoarseClock)` trades the clock's resolution for
//! the cost of its read: the kernel's tick (1–10 ms) instead of nanoseconds, a few nanoseconds
//! instead of a few tens per call on the success path (`BENCHMARKS-client.md`).
//!
//! ```
//! use seawall_tower::client::RetryLayer;
//! use seawall_tower::time::TokioClock;
//! use std::time::Duration;
//! use tower::{Layer, Service, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! // A dependency that never answers.
//! let hangs = tower::service_fn(|_req: http::Request<String>| {
//!     std::future::pending::<Result<http::Response<String>, std::convert::Infallible>>()
//! });
//! let mut client = RetryLayer::new()
//!     .with_default_timeout(Duration::from_secs(30))
//!     .with_clock(TokioClock)
//!     .layer(hangs);
//! let t0 = tokio::time::Instant::now();
//! let err = client.ready().await.unwrap().call(http::Request::new(String::new())).await;
//! // The 30 s deadline ended the call after 30 virtual seconds, not 30 real ones.
//! assert!(err.is_err());
//! assert_eq!(t0.elapsed(), Duration::from_secs(30));
//! # }
//! ```

use std::sync::OnceLock;

use seawall::time::{Clock, Epoch, Instant, SystemClock};

/// tokio's clock (`tokio::time::Instant::now()`) as a seawall [`Clock`]: virtual time under a
/// paused runtime, the monotonic clock otherwise.
///
/// Its instants are counted like [`SystemClock`]'s (converted with
/// [`SystemClock::instant_of`]), so on a running (not paused) runtime the two read the same
/// numbers. Its [`Epoch`] is its own all the same: under a paused runtime the numbers part, and
/// nothing tokio makes public says whether the runtime is paused. So a deadline one makes
/// reaches a layer on the other through its time left
/// ([`RequestDeadline`](crate::wire::RequestDeadline)), which is right whether or not the
/// runtime is paused, and costs a clock read on each side. Reading it outside a runtime
/// reads the monotonic clock, as `tokio::time::Instant::now()` does. Calendar time
/// ([`Clock::wall_time`], for HTTP-date `Retry-After` values) is the system's: dates are
/// written by servers on real time.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Instant {
        SystemClock::instant_of(tokio::time::Instant::now().into_std())
    }

    /// One epoch for every `TokioClock` (two runtimes, one paused, cannot be told apart).
    fn epoch(&self) -> Epoch {
        static EPOCH: OnceLock<Epoch> = OnceLock::new();
        *EPOCH.get_or_init(Epoch::fresh)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn follows_virtual_time() {
        let t0 = TokioClock.now();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(TokioClock.now() - t0, Duration::from_secs(3600));
    }

    #[test]
    fn has_an_epoch_of_its_own() {
        assert_eq!(TokioClock.epoch(), TokioClock.epoch());
        assert_ne!(TokioClock.epoch(), SystemClock.epoch());
    }

    #[tokio::test]
    async fn agrees_with_the_system_clock_while_running() {
        let (before, tokio, after) = (SystemClock.now(), TokioClock.now(), SystemClock.now());
        let slack = Duration::from_millis(1);
        assert!(tokio + slack >= before && tokio <= after + slack);
    }
}
