//! One call under a `retryPolicy`: gRFC A6's backoff, pushback and throttle rules, sans-io.
//!
//! The caller makes an attempt, reads the status (and `grpc-retry-pushback-ms`) from the
//! response, and asks [`RetryState::on_failure`] what to do; on `OK` it calls
//! [`RetryState::on_success`]. Time never enters: the answer is a delay, and randomness comes from
//! the caller's [`Rng`].
//!
//! # A6, and where it differs from seawall's HTTP rules
//!
//! - **Backoff**: the n-th retry waits `min(initialBackoff · multiplier^(n−1), maxBackoff) ·
//!   random(0.8, 1.2)`, n counted since the last pushback: A6 as revised on 2024-08-29, as
//!   grpc-go and C-core do (A6 had `random(0, …)` before). It is a [`Backoff`](crate::backoff::Backoff) with
//!   [`Jitter::Grpc`](crate::backoff::Jitter::Grpc), built from the service config by
//!   [`RetryConfig::backoff`]; the HTTP policy's default is full jitter, `random(0, …)`, from
//!   its own base and cap.
//! - **Pushback**: a valid `grpc-retry-pushback-ms` *replaces* the delay (exactly that long,
//!   unjittered) and restarts the exponential sequence at `initialBackoff`; a negative or
//!   malformed one means no retry. The HTTP policy instead treats `Retry-Pushback-Ms` as a lower
//!   bound and jitters on top of it.
//! - **Throttle**: tokens change only on a success (+`tokenRatio`), on a failure whose code is in
//!   `retryableStatusCodes` (−1), or on a "don't retry" pushback (−1). A non-retryable code
//!   leaves them as they are, so a burst of `INVALID_ARGUMENT` cannot switch retries off.
//! - **Which failures**: the status code decides, from `retryableStatusCodes`; no idempotency
//!   key is needed (A6 leaves that choice to the service owner, who lists the codes).
//!
//! The order of the checks is grpc-go's: pushback "don't retry" first (charged), then the code
//! (uncharged when not retryable), then the throttle (charged), then `maxAttempts`.

use std::time::Duration;

use super::code::Code;
use super::config::RetryConfig;
use super::pushback::Pushback;
use crate::budget::GrpcThrottle;
use crate::reason::GiveUpReason;
use crate::rng::Rng;

/// The state of one call under a retry policy.
#[derive(Debug, Clone, Default)]
pub struct RetryState {
    /// Attempts made so far (the first included).
    attempts: u32,
    /// Retries since the last valid pushback: the exponent of the next backoff.
    since_pushback: u32,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Retry after `after`; the retry carries `grpc-previous-rpc-attempts: previous`.
    Retry {
        /// The wait before the retry.
        after: Duration,
        /// Attempts already made (the value of `grpc-previous-rpc-attempts` on the retry).
        previous: u32,
    },
    /// Return this failure to the caller.
    Stop(StopReason),
}

/// Why a failed call is not retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The code is not in `retryableStatusCodes` (or is fatal to a hedged call).
    NotRetryable,
    /// The server's pushback said not to retry.
    Pushback,
    /// The throttle's tokens are at or below half.
    Throttled,
    /// `maxAttempts` reached.
    Exhausted,
    /// The call's deadline would pass before the retry.
    Deadline,
}

impl From<StopReason> for GiveUpReason {
    /// The reason a gRPC call stopped, in the counters' words ([`crate::metrics`]): the
    /// throttle is the budget (its refusals are retry overflow), a "don't retry" pushback is the
    /// server's word, a deadline before the next retry is a deadline too close.
    fn from(r: StopReason) -> GiveUpReason {
        match r {
            StopReason::NotRetryable => GiveUpReason::NotRetryable,
            StopReason::Pushback => GiveUpReason::ServerSaidDontRetry,
            StopReason::Throttled => GiveUpReason::BudgetExhausted,
            StopReason::Exhausted => GiveUpReason::AttemptsExhausted,
            StopReason::Deadline => GiveUpReason::DeadlineTooClose,
        }
    }
}

impl RetryState {
    /// A call whose first attempt is about to be sent.
    pub fn new() -> Self {
        RetryState { attempts: 1, since_pushback: 0 }
    }

    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The attempt succeeded: the throttle gains `tokenRatio`.
    pub fn on_success(&self, throttle: Option<&GrpcThrottle>) {
        if let Some(t) = throttle {
            t.record_success();
        }
    }

    /// The attempt failed with `code` (not `OK`) and `pushback`: retry or stop, charging the
    /// throttle as A6 says. On `Retry` the state counts the retry as made.
    pub fn on_failure(
        &mut self,
        policy: &RetryConfig,
        code: Code,
        pushback: Pushback,
        throttle: Option<&GrpcThrottle>,
        rng: &mut impl Rng,
    ) -> RetryDecision {
        if pushback == Pushback::DontRetry {
            if let Some(t) = throttle {
                t.record_failure();
            }
            return RetryDecision::Stop(StopReason::Pushback);
        }
        if !policy.retryable.contains(code) {
            return RetryDecision::Stop(StopReason::NotRetryable);
        }
        if let Some(t) = throttle {
            t.record_failure();
            if !t.allows_retry() {
                return RetryDecision::Stop(StopReason::Throttled);
            }
        }
        if self.attempts >= policy.max_attempts {
            return RetryDecision::Stop(StopReason::Exhausted);
        }
        let after = match pushback {
            Pushback::After(d) => {
                self.since_pushback = 0;
                d
            }
            _ => {
                self.since_pushback += 1;
                policy.backoff().delay(self.since_pushback, false, Duration::ZERO, rng)
            }
        };
        let previous = self.attempts;
        self.attempts += 1;
        RetryDecision::Retry { after, previous }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::CodeSet;
    use crate::rng::SeededRng;

    /// An `Rng` that always draws the same fraction.
    struct Fixed(f64);
    impl Rng for Fixed {
        fn next_u64(&mut self) -> u64 {
            unreachable!()
        }
        fn next_f64(&mut self) -> f64 {
            self.0
        }
    }

    fn policy(max_attempts: u32) -> RetryConfig {
        RetryConfig {
            max_attempts,
            configured_max_attempts: u64::from(max_attempts),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
            backoff_multiplier: 3.0,
            retryable: CodeSet::of(&[Code::UNAVAILABLE]),
            per_attempt_recv_timeout: None,
        }
    }

    fn delay(d: RetryDecision) -> Duration {
        match d {
            RetryDecision::Retry { after, .. } => after,
            other => panic!("{other:?}"),
        }
    }

    /// The ceiling of the n-th retry's wait: `min(initialBackoff · multiplier^(n−1), maxBackoff)`.
    fn ceiling(p: &RetryConfig, n: u32) -> Duration {
        p.backoff().ceiling(n, false)
    }

    #[test]
    fn ceiling_is_a6_formula() {
        let p = policy(5);
        let ms = |n| ceiling(&p, n).as_millis();
        assert_eq!([ms(1), ms(2), ms(3), ms(4)], [100, 300, 700, 700], "100·3^(n-1) capped at 700");
        let mut huge = policy(5);
        huge.backoff_multiplier = 1e308;
        assert_eq!(ceiling(&huge, 40), huge.max_backoff, "overflow caps, never panics");
        let mut shrinking = policy(5);
        shrinking.backoff_multiplier = 0.5; // A6 allows any multiplier > 0
        assert_eq!(ceiling(&shrinking, 3), Duration::from_millis(25));
    }

    /// A6 since 2024-08-29: the ceiling times random(0.8, 1.2). Breaks if the layer goes back
    /// to the older random(0, ceiling): a draw of 0.5 then waits half the ceiling, not all of it.
    #[test]
    fn waits_are_the_ceiling_within_twenty_percent() {
        let p = policy(5);
        let mut s = RetryState::new();
        let mut r = Fixed(0.5);
        let waits: Vec<_> = (0..4)
            .map(|_| delay(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut r)))
            .collect();
        assert_eq!(waits, [100, 300, 700, 700].map(Duration::from_millis));
        let mut low = Fixed(0.0);
        let mut s = RetryState::new();
        let w = delay(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut low));
        assert_eq!(w, Duration::from_millis(80), "the smallest wait is 0.8 of the ceiling");
        let mut seeded = SeededRng::new(7);
        let mut s = RetryState::new();
        for n in 1..5 {
            let w = delay(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut seeded));
            let c = ceiling(&p, n);
            assert!(w >= c.mul_f64(0.8) && w < c.mul_f64(1.2), "retry {n}: {w:?} vs {c:?}");
        }
    }

    #[test]
    fn pushback_replaces_delay_and_resets_sequence() {
        let p = policy(5);
        let mut s = RetryState::new();
        let mut r = Fixed(0.5);
        let push = Pushback::After(Duration::from_millis(1234));
        let d1 = delay(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut r));
        let d2 = delay(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut r));
        let d3 = delay(s.on_failure(&p, Code::UNAVAILABLE, push, None, &mut r));
        let d4 = delay(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut r));
        assert_eq!([d1, d2, d3, d4], [100, 300, 1234, 100].map(Duration::from_millis));
        // A pushback on a code that is not retryable does not make it retryable.
        let mut s = RetryState::new();
        let d = s.on_failure(&p, Code::INTERNAL, push, None, &mut r);
        assert_eq!(d, RetryDecision::Stop(StopReason::NotRetryable));
    }

    #[test]
    fn attempts_and_previous() {
        let p = policy(3);
        let mut s = RetryState::new();
        let mut r = Fixed(0.0);
        let prev = |d| match d {
            RetryDecision::Retry { previous, .. } => previous,
            other => panic!("{other:?}"),
        };
        assert_eq!(prev(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut r)), 1);
        assert_eq!(prev(s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut r)), 2);
        let last = s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, None, &mut r);
        assert_eq!(last, RetryDecision::Stop(StopReason::Exhausted));
        assert_eq!(s.attempts(), 3);
    }

    #[test]
    fn throttle_accounting_is_a6() {
        let p = policy(5);
        let t = GrpcThrottle::new(10, 0.5).unwrap();
        let mut r = Fixed(0.0);
        let mut s = RetryState::new();
        for _ in 0..10 {
            let d = s.on_failure(&p, Code::INVALID_ARGUMENT, Pushback::Absent, Some(&t), &mut r);
            assert_eq!(d, RetryDecision::Stop(StopReason::NotRetryable));
        }
        assert_eq!(t.tokens(), 10.0, "non-retryable codes leave the tokens alone");
        let d = s.on_failure(&p, Code::INVALID_ARGUMENT, Pushback::DontRetry, Some(&t), &mut r);
        assert_eq!(d, RetryDecision::Stop(StopReason::Pushback));
        assert_eq!(t.tokens(), 9.0, "a don't-retry pushback costs a token, whatever the code");
        let d = s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, Some(&t), &mut r);
        assert!(matches!(d, RetryDecision::Retry { .. }));
        assert_eq!(t.tokens(), 8.0, "a retryable failure costs a token");
        s.on_success(Some(&t));
        assert_eq!(t.tokens(), 8.5, "a success gives back tokenRatio");
        for _ in 0..3 {
            t.record_failure();
        }
        assert_eq!(t.tokens(), 5.5);
        let mut s = RetryState::new();
        let d = s.on_failure(&p, Code::UNAVAILABLE, Pushback::Absent, Some(&t), &mut r);
        assert_eq!(d, RetryDecision::Stop(StopReason::Throttled), "4.5 <= 10/2");
    }
}
