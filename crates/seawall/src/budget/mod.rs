//! Retry budgets: one trait, five implementations, each matching its source.
//!
//! # Why budgets and not only a maximum number of attempts?
//!
//! A per-request cap bounds one call: three attempts can never become four. But it is
//! per-request and therefore unbounded in aggregate — N requests failing means N × 2 extra
//! requests, with no ceiling — and that is exactly the situation in which retries hurt: when the
//! dependency fails *because* it is overloaded, every retry adds load to the thing that is
//! drowning. A budget is per-client: retries may be only a small share of traffic. When the
//! dependency is healthy that share is plenty; when everything fails, the budget empties within
//! seconds and retries stop by themselves, without a human in a war room deciding to turn them
//! off. Google combines both — 3 attempts per request and retries under 10 %
//! of a client's requests — cutting worst-case growth from just under 3× to about 1.1×.
//!
//! # The protocol
//!
//! The policy calls a budget at four points of a logical call:
//!
//! 1. [`Budget::admit`] before *every* attempt (first or retry). Most budgets always admit; the
//!    adaptive throttle refuses locally with a probability, and the ratio budget deposits here on
//!    first attempts.
//! 2. [`Budget::withdraw`] when the policy wants to retry, *before* the backoff wait. `None` means
//!    the budget refuses: the call gives up with [`GiveUpReason::BudgetExhausted`] ("retry
//!    overflow").
//! 3. [`Budget::record`] when an attempt that was admitted ends, with the withdrawal that paid for
//!    it (if it was a retry) and what happened.
//! 4. [`Budget::release`] when a withdrawal's retry is never sent (deadline, cancellation).
//!
//! Every method takes `now`: budgets never read a clock, so they run unchanged on the
//! simulator's virtual time. Every method takes `&self` and is safe to call concurrently.
//!
//! | budget | source | refuses when |
//! |---|---|---|
//! | [`GrpcThrottle`] | gRFC A6 `retryThrottling` (10 tokens, 0.1) | tokens ≤ max/2 |
//! | [`AwsRetryQuota`] | AWS SDKs' retry quota (500; 14 / 5 per retry) | a retry's cost > tokens left |
//! | [`RatioBudget`] | Finagle `RetryBudget`, tower `TpsBudget`, SRE (10 s, 10/s, 10 %) | retries in window > ratio × requests + reserve |
//! | [`EnvoyRetryBudget`] | Envoy cluster `RetryBudget` (20 %, 3) | retries in flight ≥ max(20 % × active, 3) |
//! | [`AdaptiveThrottle`] | Google SRE ch. 21 (2 min, K = 2) | *admit*: a draw < (requests − K·accepts) / (requests + 1) |
//! | [`Unlimited`] | — (for comparison) | never |
//!
//! They also differ in how they count a non-retryable answer ([`AttemptOutcome::Rejected`]: a
//! 404, a gRPC `INVALID_ARGUMENT`): the token buckets neither refill nor drain on it, as their
//! sources do; the adaptive throttle counts it as an accept (the backend chose to answer); the
//! ratio and Envoy budgets do not look at outcomes at all.
//!
//! They differ in what they remember: the token buckets ([`GrpcThrottle`], [`AwsRetryQuota`])
//! remember failures until successes pay them back; the windowed ones ([`RatioBudget`],
//! [`AdaptiveThrottle`]) forget after a fixed time; [`EnvoyRetryBudget`] remembers nothing and
//! bounds only the retries outstanding at one instant.
//!
//! ```
//! use seawall::budget::{Budget, GrpcThrottle, AttemptOutcome, RetryCause};
//! use seawall::time::Instant;
//!
//! // gRPC defaults: 10 tokens, 0.1 per success. Retries stop after about 5 failures in a row.
//! let b = GrpcThrottle::new(10, 0.1).unwrap();
//! let now = Instant::ZERO;
//! let mut allowed = 0;
//! for _ in 0..20 {
//!     b.record(now, None, AttemptOutcome::Failed(RetryCause::Transient));
//!     if let Some(w) = b.withdraw(now, RetryCause::Transient) {
//!         allowed += 1;
//!         b.release(now, w);
//!     }
//! }
//! assert_eq!(allowed, 4); // 9, 8, 7, 6 tokens are > 5; at 5 retries stop
//! ```
//!
//! [`GiveUpReason::BudgetExhausted`]: crate::policy::GiveUpReason::BudgetExhausted

use std::fmt;

use crate::time::Instant;

mod adaptive;
mod aws;
mod envoy;
mod grpc;
mod ratio;
pub(crate) mod window;

pub use adaptive::AdaptiveThrottle;
pub use aws::{AWS_CAPACITY, AwsRetryCosts, AwsRetryQuota};
pub use envoy::EnvoyRetryBudget;
pub use grpc::GrpcThrottle;
pub use ratio::RatioBudget;

/// Why a retry is wanted; budgets that price retries differently (AWS) look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryCause {
    /// A transient error (5xx, connection failure).
    Transient,
    /// The attempt timed out.
    Timeout,
    /// The server is throttling (429, RESOURCE_EXHAUSTED, pushback).
    Throttled,
}

/// How an admitted attempt ended, as far as a budget cares.
///
/// Three kinds of answer, because the budgets' sources count them three ways: a success refills
/// the token buckets; a retryable failure drains them; a *non-retryable* failure (a 404, a 400, a
/// gRPC status outside `retryableStatusCodes`) does neither in gRPC (gRFC A6) nor in the AWS SDKs
/// (which credit only a 2xx), yet it is an answer the backend chose to give, so it counts as an
/// "accept" for adaptive throttling. Each budget documents what it does with each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// The attempt succeeded (its class was [`Class::Success`]: a 2xx or 3xx, gRPC `OK`, or
    /// whatever a custom classifier calls a success).
    ///
    /// [`Class::Success`]: crate::classify::Class::Success
    Answered,
    /// The dependency answered with a failure that another attempt would repeat (its class was
    /// [`Class::NeverRetry`]: a 4xx other than 408/429, a 500 not retried, a gRPC status outside
    /// `retryableStatusCodes`). It says nothing against the dependency's health, and nothing for
    /// it either: neither a success nor a failure for the token buckets.
    ///
    /// [`Class::NeverRetry`]: crate::classify::Class::NeverRetry
    Rejected,
    /// The attempt failed in a way that suggests the dependency is unhealthy.
    Failed(RetryCause),
    /// The caller gave up before an answer (cancelled). Counts as neither.
    Abandoned,
}

/// Proof that a budget paid for one retry. Hand it back through [`Budget::record`] when the retry
/// ends or [`Budget::release`] if it is never sent. `cost` is budget-specific (AWS tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Withdrawal {
    cost: u32,
}

impl Withdrawal {
    /// A withdrawal of `cost` units (0 for budgets that do not price retries).
    pub const fn new(cost: u32) -> Self {
        Withdrawal { cost }
    }

    /// The units withdrawn.
    pub const fn cost(self) -> u32 {
        self.cost
    }
}

/// A per-client retry budget. See the [module docs](self) for the protocol.
pub trait Budget: Send + Sync + fmt::Debug {
    /// Called before every attempt; `retry` is false for the first attempt of a call. `draw` is a
    /// uniform number in `[0, 1)` for budgets that refuse with a probability. Returning false
    /// refuses the attempt locally. Default: admit.
    fn admit(&self, now: Instant, retry: bool, draw: f64) -> bool {
        let _ = (now, retry, draw);
        true
    }

    /// Whether [`admit`](Self::admit) uses its `draw`. When false, the policy passes a fixed
    /// value instead of drawing from the call's random stream, which a successful call then
    /// never has to seed. Default: true (always correct); say false only if `admit` ignores it.
    fn admit_draws(&self) -> bool {
        true
    }

    /// May a retry be sent? `Some` pays for it.
    fn withdraw(&self, now: Instant, cause: RetryCause) -> Option<Withdrawal>;

    /// An admitted attempt ended. `paid_by` is the withdrawal that paid for it if it was a retry.
    fn record(&self, now: Instant, paid_by: Option<Withdrawal>, outcome: AttemptOutcome);

    /// A withdrawal whose retry will never be sent. Default: nothing to give back.
    fn release(&self, now: Instant, w: Withdrawal) {
        let _ = (now, w);
    }
}

impl<B: Budget + ?Sized> Budget for std::sync::Arc<B> {
    fn admit(&self, now: Instant, retry: bool, draw: f64) -> bool {
        (**self).admit(now, retry, draw)
    }
    fn admit_draws(&self) -> bool {
        (**self).admit_draws()
    }
    fn withdraw(&self, now: Instant, cause: RetryCause) -> Option<Withdrawal> {
        (**self).withdraw(now, cause)
    }
    fn record(&self, now: Instant, paid_by: Option<Withdrawal>, outcome: AttemptOutcome) {
        (**self).record(now, paid_by, outcome)
    }
    fn release(&self, now: Instant, w: Withdrawal) {
        (**self).release(now, w)
    }
}

/// No budget: every retry is allowed. Only the per-request cap bounds retries. For comparison
/// (the simulator's `jitter` preset); never a default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unlimited;

impl Budget for Unlimited {
    fn admit_draws(&self) -> bool {
        false
    }
    fn withdraw(&self, _: Instant, _: RetryCause) -> Option<Withdrawal> {
        Some(Withdrawal::new(0))
    }
    fn record(&self, _: Instant, _: Option<Withdrawal>, _: AttemptOutcome) {}
}

/// Any of seawall's budgets, chosen at run time (configuration files, the simulator's presets)
/// without a virtual call.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyBudget {
    /// [`Unlimited`].
    Unlimited(Unlimited),
    /// [`GrpcThrottle`].
    Grpc(GrpcThrottle),
    /// [`AwsRetryQuota`].
    Aws(AwsRetryQuota),
    /// [`RatioBudget`].
    Ratio(RatioBudget),
    /// [`EnvoyRetryBudget`].
    Envoy(EnvoyRetryBudget),
    /// [`AdaptiveThrottle`].
    Adaptive(AdaptiveThrottle),
}

macro_rules! dispatch {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            AnyBudget::Unlimited($b) => $e,
            AnyBudget::Grpc($b) => $e,
            AnyBudget::Aws($b) => $e,
            AnyBudget::Ratio($b) => $e,
            AnyBudget::Envoy($b) => $e,
            AnyBudget::Adaptive($b) => $e,
        }
    };
}

macro_rules! any_from {
    ($($variant:ident($ty:ty)),*) => {$(
        impl From<$ty> for AnyBudget {
            fn from(b: $ty) -> Self {
                AnyBudget::$variant(b)
            }
        }
    )*};
}

any_from!(
    Unlimited(Unlimited),
    Grpc(GrpcThrottle),
    Aws(AwsRetryQuota),
    Ratio(RatioBudget),
    Envoy(EnvoyRetryBudget),
    Adaptive(AdaptiveThrottle)
);

impl Budget for AnyBudget {
    #[inline]
    fn admit(&self, now: Instant, retry: bool, draw: f64) -> bool {
        dispatch!(self, b => b.admit(now, retry, draw))
    }
    /// Only the adaptive throttle refuses with a probability; the others' `admit` ignores the
    /// draw (checked by a test below: a variant that starts using it must be listed here).
    fn admit_draws(&self) -> bool {
        match self {
            AnyBudget::Adaptive(b) => b.admit_draws(),
            AnyBudget::Unlimited(_)
            | AnyBudget::Grpc(_)
            | AnyBudget::Aws(_)
            | AnyBudget::Ratio(_)
            | AnyBudget::Envoy(_) => false,
        }
    }
    fn withdraw(&self, now: Instant, cause: RetryCause) -> Option<Withdrawal> {
        dispatch!(self, b => b.withdraw(now, cause))
    }
    #[inline]
    fn record(&self, now: Instant, paid_by: Option<Withdrawal>, outcome: AttemptOutcome) {
        dispatch!(self, b => b.record(now, paid_by, outcome))
    }
    fn release(&self, now: Instant, w: Withdrawal) {
        dispatch!(self, b => b.release(now, w))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Every budget but the adaptive throttle, the ratio budget last.
    const DETERMINISTIC: [fn() -> AnyBudget; 5] = [
        || Unlimited.into(),
        || GrpcThrottle::default().into(),
        || AwsRetryQuota::default().into(),
        || EnvoyRetryBudget::default().into(),
        || RatioBudget::default().into(),
    ];

    /// `AnyBudget::admit_draws` says which budgets may be given a fixed draw: their admission
    /// must not depend on it, in any state.
    #[test]
    fn budgets_that_say_they_do_not_draw_ignore_the_draw() {
        for make in DETERMINISTIC {
            let (low, high) = (make(), make());
            assert!(!low.admit_draws(), "{low:?}");
            let mut now = Instant::ZERO;
            for i in 0..200u32 {
                let retry = i % 3 != 0;
                assert_eq!(
                    low.admit(now, retry, 0.0),
                    high.admit(now, retry, 0.999_999),
                    "{low:?}"
                );
                for b in [&low, &high] {
                    let paid = if retry { b.withdraw(now, RetryCause::Transient) } else { None };
                    let failed = i % 5 < 3;
                    let outcome = if failed {
                        AttemptOutcome::Failed(RetryCause::Transient)
                    } else {
                        AttemptOutcome::Answered
                    };
                    b.record(now, paid, outcome);
                }
                now = now + Duration::from_millis(50);
            }
        }
        assert!(AnyBudget::from(AdaptiveThrottle::default()).admit_draws());
    }
}
