//! The AWS SDK retry quota: a 500-token bucket per client, retries priced by their cause.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{AttemptOutcome, Budget, RetryCause, Withdrawal};
use crate::error::ConfigError;
use crate::time::Instant;

/// The token bucket's capacity in every AWS SDK's standard retry mode.
pub const AWS_CAPACITY: u32 = 500;

/// What a retry costs, by the version of the AWS retry behaviour.
///
/// Source: AWS SDKs and Tools Reference Guide, *Retry behavior* (standard mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AwsRetryCosts {
    /// The updated behaviour (2026, seawall's default): a retry after a transient error or a
    /// timeout costs 14 tokens, a retry after throttling 5.
    #[default]
    Updated2026,
    /// The legacy standard mode: 5 tokens, 10 after a timeout, 5 after throttling.
    Legacy,
}

impl AwsRetryCosts {
    /// The tokens a retry for `cause` costs.
    pub const fn cost(self, cause: RetryCause) -> u32 {
        match (self, cause) {
            (AwsRetryCosts::Updated2026, RetryCause::Throttled) => 5,
            (AwsRetryCosts::Updated2026, _) => 14,
            (AwsRetryCosts::Legacy, RetryCause::Timeout) => 10,
            (AwsRetryCosts::Legacy, _) => 5,
        }
    }
}

/// The AWS SDK retry quota (standard retry mode).
///
/// A bucket of 500 tokens per client, starting full. A retry withdraws its cost (14 for transient
/// errors and timeouts, 5 for throttling; [`AwsRetryCosts`]) and is refused if the bucket holds
/// less. A retry that succeeds gives its cost back; a first attempt that succeeds adds 1 token;
/// the bucket never exceeds its capacity. With nothing but failures, 500 tokens buy 35 transient
/// retries and then retries stop until successes refill the bucket.
///
/// Source: AWS SDKs and Tools Reference Guide, *Retry behavior*; the SDKs' `RetryQuota`
/// (`NoRetryIncrement` 1, refund on a successful retry).
///
/// Mapping to the [`Budget`] protocol:
/// - only [`AttemptOutcome::Answered`] (a success) credits the bucket. A non-retryable answer
///   ([`AttemptOutcome::Rejected`]: a 400, a 404) credits nothing and refunds nothing, exactly as
///   the SDKs do: botocore's `RetryQuotaChecker.release_retry_quota` (`botocore/retries/standard.py`)
///   releases quota only when the final HTTP status is in `200..300`, and smithy-rs's
///   `StandardRetryStrategy::should_attempt_retry` (`aws-smithy-runtime`, `client/retries/strategy/standard.rs`)
///   releases the retry permit or adds the success reward only `if !ctx.is_failed()` — a modelled
///   4xx error is a failed attempt. A dependency answering a mix of 5xx and 4xx therefore drains
///   the bucket as fast as the SDKs' would;
/// - a withdrawal whose retry is never sent ([`Budget::release`]) is not refunded, as in the SDKs,
///   where a retry token acquired before a cancelled backoff sleep is dropped.
///
/// The bucket is one `AtomicU32`: a first-try success with a full bucket is a single load.
///
/// ```
/// use seawall::budget::{AttemptOutcome, AwsRetryQuota, Budget, RetryCause};
/// use seawall::time::Instant;
///
/// let q = AwsRetryQuota::default();
/// let now = Instant::ZERO;
/// let w = q.withdraw(now, RetryCause::Transient).unwrap();
/// assert_eq!(q.tokens(), 486);
/// q.record(now, Some(w), AttemptOutcome::Answered); // the retry succeeded: refund
/// assert_eq!(q.tokens(), 500);
/// ```
#[derive(Debug)]
pub struct AwsRetryQuota {
    tokens: AtomicU32,
    capacity: u32,
    costs: AwsRetryCosts,
}

impl Default for AwsRetryQuota {
    /// 500 tokens, updated (2026) costs: the AWS SDKs' defaults.
    fn default() -> Self {
        AwsRetryQuota::new(AwsRetryCosts::Updated2026)
    }
}

impl AwsRetryQuota {
    /// The largest capacity [`AwsRetryQuota::with_capacity`] accepts.
    pub const MAX_CAPACITY: u32 = 1_000_000;

    /// A full bucket of 500 tokens with the given costs.
    pub const fn new(costs: AwsRetryCosts) -> Self {
        AwsRetryQuota { tokens: AtomicU32::new(AWS_CAPACITY), capacity: AWS_CAPACITY, costs }
    }

    /// A full bucket of `capacity` tokens, in `[1, 1_000_000]` (the SDKs let the quota's maximum
    /// capacity be configured; 500 is their default).
    pub fn with_capacity(capacity: u32, costs: AwsRetryCosts) -> Result<Self, ConfigError> {
        if capacity == 0 || capacity > Self::MAX_CAPACITY {
            return Err(ConfigError::out_of_range("budget.capacity", "in [1, 1000000]", capacity));
        }
        Ok(AwsRetryQuota { tokens: AtomicU32::new(capacity), capacity, costs })
    }

    /// Tokens in the bucket now (for metrics and tests).
    pub fn tokens(&self) -> u32 {
        self.tokens.load(Ordering::Relaxed)
    }

    /// The bucket's capacity.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The price list.
    pub fn costs(&self) -> AwsRetryCosts {
        self.costs
    }

    fn deposit(&self, amount: u32) {
        let cap = self.capacity;
        // Full bucket (the healthy steady state): one load, no write.
        if self.tokens.load(Ordering::Relaxed) >= cap {
            return;
        }
        let _ = self.tokens.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
            (t < cap).then(|| t.saturating_add(amount).min(cap))
        });
    }
}

impl Budget for AwsRetryQuota {
    /// `admit` ignores its draw: no random stream needs seeding for it.
    fn admit_draws(&self) -> bool {
        false
    }

    fn withdraw(&self, _: Instant, cause: RetryCause) -> Option<Withdrawal> {
        let cost = self.costs.cost(cause);
        self.tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| t.checked_sub(cost))
            .ok()
            .map(|_| Withdrawal::new(cost))
    }

    fn record(&self, _: Instant, paid_by: Option<Withdrawal>, outcome: AttemptOutcome) {
        // Only a success credits: a non-retryable answer (`Rejected`), a failure or an abandoned
        // attempt leaves the bucket as it is (the SDKs release quota on a 2xx only).
        if outcome != AttemptOutcome::Answered {
            return;
        }
        match paid_by {
            // A successful retry gets its own cost back.
            Some(w) => self.deposit(w.cost()),
            // A first-try success adds `NoRetryIncrement`, 1.
            None => self.deposit(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Instant = Instant::ZERO;

    #[test]
    fn known_vectors() {
        let q = AwsRetryQuota::default();
        let w = q.withdraw(T, RetryCause::Transient).unwrap();
        assert_eq!((q.tokens(), w.cost()), (486, 14));
        q.record(T, Some(w), AttemptOutcome::Answered);
        assert_eq!(q.tokens(), 500);

        let w = q.withdraw(T, RetryCause::Throttled).unwrap();
        assert_eq!(q.tokens(), 495);
        q.record(T, Some(w), AttemptOutcome::Answered);
        assert_eq!(q.tokens(), 500);

        let w = q.withdraw(T, RetryCause::Timeout).unwrap();
        assert_eq!(q.tokens(), 486);
        q.record(T, Some(w), AttemptOutcome::Failed(RetryCause::Timeout));
        assert_eq!(q.tokens(), 486, "a failed retry keeps its cost");
        q.record(T, None, AttemptOutcome::Answered);
        assert_eq!(q.tokens(), 487, "a first-try success adds 1");
    }

    #[test]
    fn legacy_costs() {
        let q = AwsRetryQuota::new(AwsRetryCosts::Legacy);
        let costs: Vec<u32> = [RetryCause::Transient, RetryCause::Timeout, RetryCause::Throttled]
            .into_iter()
            .map(|c| q.withdraw(T, c).unwrap().cost())
            .collect();
        assert_eq!(costs, [5, 10, 5]);
        assert_eq!(q.tokens(), 480);
    }

    #[test]
    fn empties_then_refuses_and_never_overfills() {
        let q = AwsRetryQuota::default();
        let granted = (0..100).filter(|_| q.withdraw(T, RetryCause::Transient).is_some()).count();
        assert_eq!(granted, 35, "500 / 14 = 35 transient retries");
        assert_eq!(q.tokens(), 10);
        assert!(q.withdraw(T, RetryCause::Transient).is_none());
        let w =
            q.withdraw(T, RetryCause::Throttled).expect("10 tokens still buy a throttled retry");
        q.release(T, w);
        assert_eq!(q.tokens(), 5, "release does not refund (as in the SDKs)");
        for _ in 0..1000 {
            q.record(T, None, AttemptOutcome::Answered);
        }
        assert_eq!(q.tokens(), 500);
        q.record(T, Some(Withdrawal::new(14)), AttemptOutcome::Answered);
        assert_eq!(q.tokens(), 500, "a refund never overfills");
    }

    #[test]
    fn validates_capacity() {
        assert_eq!(
            AwsRetryQuota::with_capacity(0, AwsRetryCosts::Legacy).unwrap_err().field(),
            "budget.capacity"
        );
        assert!(AwsRetryQuota::with_capacity(1_000_001, AwsRetryCosts::Legacy).is_err());
        assert_eq!(AwsRetryQuota::with_capacity(20, AwsRetryCosts::Legacy).unwrap().tokens(), 20);
    }
}
