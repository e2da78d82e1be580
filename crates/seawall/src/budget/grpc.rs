//! gRPC retry throttling (gRFC A6 `retryThrottling`): a token bucket per server.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{AttemptOutcome, Budget, RetryCause, Withdrawal};
use crate::error::{ConfigError, check_f64};
use crate::time::Instant;

/// gRFC A6 retry throttling. Tokens start at `max_tokens`; each failed attempt takes 1; each
/// successful one gives back `token_ratio`; retries are allowed only while tokens > `max_tokens`/2.
/// An attempt ending in a status that is not retryable ([`AttemptOutcome::Rejected`]) leaves the
/// tokens as they are: it is neither a success nor a retryable failure.
///
/// Source: gRFC A6 "gRPC Retry Design", *Throttling Retry Attempts and Hedged RPCs*:
/// `maxTokens` in (0, 1000], `tokenRatio` > 0 with three decimal places kept. seawall's defaults
/// are the example from the gRPC documentation, 10 and 0.1: with them retries stop once failures
/// exceed about 10 % of successes.
///
/// Tokens are kept in thousandths in one `AtomicU32`, so a success is one load (bucket full) or
/// one compare-and-swap, and the three-decimal rule is exact.
#[derive(Debug)]
pub struct GrpcThrottle {
    milli_tokens: AtomicU32,
    max_milli: u32,
    ratio_milli: u32,
}

impl Default for GrpcThrottle {
    /// 10 tokens, ratio 0.1.
    fn default() -> Self {
        GrpcThrottle::new(10, 0.1).expect("defaults are valid")
    }
}

impl GrpcThrottle {
    /// A full bucket of `max_tokens` (in (0, 1000]) refilled by `token_ratio` (in (0, 1000],
    /// rounded to three decimals, at least 0.001) per success.
    pub fn new(max_tokens: u32, token_ratio: f64) -> Result<Self, ConfigError> {
        if max_tokens == 0 || max_tokens > 1000 {
            return Err(ConfigError::out_of_range("budget.max_tokens", "in (0, 1000]", max_tokens));
        }
        let ratio =
            check_f64("budget.token_ratio", "in [0.001, 1000]", token_ratio, 0.001, 1000.0)?;
        let max_milli = max_tokens * 1000;
        Ok(GrpcThrottle {
            milli_tokens: AtomicU32::new(max_milli),
            max_milli,
            ratio_milli: (ratio * 1000.0).round() as u32,
        })
    }

    /// Current tokens (for metrics and tests).
    pub fn tokens(&self) -> f64 {
        f64::from(self.milli_tokens.load(Ordering::Relaxed)) / 1000.0
    }

    /// Whether a retry (or a hedged copy after the first) may be sent: tokens > `max_tokens`/2.
    /// The same answer as [`Budget::withdraw`], without a clock.
    pub fn allows_retry(&self) -> bool {
        self.allows(self.milli_tokens.load(Ordering::Relaxed))
    }

    /// A successful RPC: +`token_ratio`, up to `max_tokens` (as `record(.., Answered)`).
    pub fn record_success(&self) {
        self.record(Instant::ZERO, None, AttemptOutcome::Answered);
    }

    /// A failure gRFC A6 counts: a retryable or non-fatal status code, or a "don't retry"
    /// pushback whatever the code. −1, down to 0 (as `record(.., Failed(_))`). Failures with
    /// other codes must not be recorded at all.
    pub fn record_failure(&self) {
        self.record(Instant::ZERO, None, AttemptOutcome::Failed(RetryCause::Transient));
    }

    fn allows(&self, milli: u32) -> bool {
        // tokens > max/2  ⇔  2·milli > max_milli
        u64::from(milli) * 2 > u64::from(self.max_milli)
    }
}

impl Budget for GrpcThrottle {
    /// `admit` ignores its draw: no random stream needs seeding for it.
    fn admit_draws(&self) -> bool {
        false
    }

    fn withdraw(&self, _: Instant, _: RetryCause) -> Option<Withdrawal> {
        // gRFC A6 does not charge the retry itself; failures are charged as they happen.
        self.allows(self.milli_tokens.load(Ordering::Relaxed)).then_some(Withdrawal::new(0))
    }

    #[inline]
    fn record(&self, _: Instant, _: Option<Withdrawal>, outcome: AttemptOutcome) {
        match outcome {
            AttemptOutcome::Answered => {
                let max = self.max_milli;
                let add = self.ratio_milli;
                // Healthy bucket: one load and no write.
                if self.milli_tokens.load(Ordering::Relaxed) >= max {
                    return;
                }
                let _ = self.milli_tokens.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    (t < max).then(|| t.saturating_add(add).min(max))
                });
            }
            AttemptOutcome::Failed(_) => {
                let _ = self.milli_tokens.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    (t > 0).then(|| t.saturating_sub(1000))
                });
            }
            // gRFC A6 counts only two kinds of RPC: one that fails with a status in
            // `retryableStatusCodes` (or with pushback) takes a token, a successful one gives back
            // `tokenRatio`. Any other status — INVALID_ARGUMENT, NOT_FOUND, … — does neither
            // (gRPC C-core's retry filter records a success on OK only and returns before
            // recording a failure for a status that is not retryable).
            AttemptOutcome::Rejected | AttemptOutcome::Abandoned => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T: Instant = Instant::ZERO;
    const FAIL: AttemptOutcome = AttemptOutcome::Failed(RetryCause::Transient);

    #[test]
    fn validates() {
        assert!(GrpcThrottle::new(0, 0.1).is_err());
        assert!(GrpcThrottle::new(1001, 0.1).is_err());
        assert!(GrpcThrottle::new(10, 0.0).is_err());
        assert!(GrpcThrottle::new(10, f64::INFINITY).is_err());
        assert_eq!(GrpcThrottle::new(1001, 0.1).unwrap_err().field(), "budget.max_tokens");
        assert!(GrpcThrottle::new(1000, 0.001).is_ok());
    }

    #[test]
    fn three_decimals_kept() {
        let b = GrpcThrottle::new(10, 0.1234).unwrap();
        b.record(T, None, FAIL);
        b.record(T, None, AttemptOutcome::Answered);
        assert_eq!(b.tokens(), 9.123);
    }

    /// gRFC A6 counts a non-retryable status neither way. Mutation checked: counting `Rejected`
    /// like `Answered` refills the bucket to 10 and fails.
    #[test]
    fn non_retryable_statuses_leave_the_tokens_alone() {
        let b = GrpcThrottle::new(10, 0.1).unwrap();
        b.record(T, None, FAIL);
        for _ in 0..50 {
            b.record(T, None, AttemptOutcome::Rejected);
        }
        assert_eq!(b.tokens(), 9.0);
    }

    #[test]
    fn stops_at_half_and_refills() {
        let b = GrpcThrottle::new(10, 0.1).unwrap();
        for _ in 0..5 {
            b.record(T, None, FAIL);
        }
        assert_eq!(b.tokens(), 5.0);
        assert!(b.withdraw(T, RetryCause::Transient).is_none(), "exactly half: no retry");
        b.record(T, None, AttemptOutcome::Answered);
        assert_eq!(b.tokens(), 5.1);
        assert!(b.withdraw(T, RetryCause::Transient).is_some());
        for _ in 0..100 {
            b.record(T, None, FAIL);
        }
        assert_eq!(b.tokens(), 0.0, "never below zero");
        for _ in 0..1000 {
            b.record(T, None, AttemptOutcome::Answered);
        }
        assert_eq!(b.tokens(), 10.0, "never above max");
    }

    proptest! {
        #[test]
        fn never_admits_at_or_below_half(max in 1u32..=1000, ratio_milli in 1u32..=5000,
                                         ops in proptest::collection::vec(any::<bool>(), 0..400)) {
            let b = GrpcThrottle::new(max, f64::from(ratio_milli) / 1000.0).unwrap();
            for ok in ops {
                b.record(T, None, if ok { AttemptOutcome::Answered } else { FAIL });
                let t = b.tokens();
                prop_assert!((0.0..=f64::from(max)).contains(&t));
                let allowed = b.withdraw(T, RetryCause::Timeout).is_some();
                prop_assert_eq!(allowed, t > f64::from(max) / 2.0);
            }
        }
    }
}
