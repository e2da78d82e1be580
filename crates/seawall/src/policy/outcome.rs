//! What a call's end looks like: the give-up reasons, the overload signal, the decision.

use std::fmt;
use std::time::Duration;

use super::Role;
use crate::classify::Class;
pub use crate::reason::GiveUpReason;

/// How a call's last attempt ended, as far as [`upstream`] needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LastAttempt {
    /// The dependency answered (any status).
    Answered,
    /// The transport failed (refused, reset, …).
    Failed,
    /// The attempt's own timeout fired.
    TimedOut,
    /// No attempt was sent: the policy refused the first.
    NotSent,
}

/// What the caller above a layer is told when the layer's call ended: the one rule of "fail
/// fast" that the tower layers render as responses and the simulator as classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Upstream {
    /// The call succeeded: its answer, as it is.
    Success,
    /// "Overloaded; don't retry" (HTTP 503 + `Retry-Pushback-Ms: -1`, gRPC UNAVAILABLE +
    /// `grpc-retry-pushback-ms: -1`): the give-up is [`GiveUp::is_overloaded`], or nothing
    /// was sent that could be passed up.
    DontRetry,
    /// The last attempt's outcome as it is — the answer with its status and hints, or the
    /// transport error — for the one owner above to judge (and retry once, within its budget).
    Last,
    /// The last attempt timed out: a gateway timeout (HTTP 504, gRPC UNAVAILABLE), which the
    /// owner above may retry.
    TimedOut,
}

/// What a layer passes to its caller when its call ended with `outcome` after `last`.
///
/// ```
/// use seawall::policy::{upstream, LastAttempt, Upstream};
/// assert_eq!(upstream(Ok(()), LastAttempt::Answered), Upstream::Success);
/// ```
pub fn upstream(outcome: Result<(), GiveUp>, last: LastAttempt) -> Upstream {
    match (outcome, last) {
        (Ok(()), _) => Upstream::Success,
        (Err(g), _) if g.is_overloaded() => Upstream::DontRetry,
        (Err(_), LastAttempt::Answered | LastAttempt::Failed) => Upstream::Last,
        (Err(_), LastAttempt::TimedOut) => Upstream::TimedOut,
        (Err(_), LastAttempt::NotSent) => Upstream::DontRetry,
    }
}

/// A give-up: why, and whether to tell the caller "overloaded; don't retry".
///
/// Only the policy builds one, from the reason, the layer's [`Role`] and the call's last
/// outcome, so the two always agree: a request that may not be resent is never also
/// "overloaded", and one event has one reason wherever it is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GiveUp {
    pub(super) reason: GiveUpReason,
    pub(super) overloaded: bool,
}

impl GiveUp {
    /// Why the call stopped.
    pub const fn reason(&self) -> GiveUpReason {
        self.reason
    }

    /// True when the layer above must not retry, so adapters answer with the explicit overload
    /// signal (HTTP 503 + `Retry-Pushback-Ms: -1`, gRPC UNAVAILABLE + `grpc-retry-pushback-ms:
    /// -1`). That is the case when:
    ///
    /// - something refused the retry — a budget, the breaker, local throttling, the kill switch,
    ///   the server's own "don't retry", or a deadline too close to try again;
    /// - an **owner** used up its attempts: it already retried, so nobody above may multiply;
    /// - a **fail-fast** layer's one attempt was throttled or refused as overloaded (429,
    ///   RESOURCE_EXHAUSTED, a pushback).
    ///
    /// It is false when the failure says nothing about overload and the owner above may still
    /// try again within its own budget: a fail-fast layer's transient failure (502, 503, 504, a
    /// reset or a timeout) is passed up as it is, so the one owner of the path can retry it once
    /// — which is what keeps a fleet at ≈ 1.1 attempts per request instead of 1.0 or 27. It is
    /// also false for answers and for requests that may not be resent (not retryable, not
    /// idempotent, not replayable, abandoned).
    pub const fn is_overloaded(&self) -> bool {
        self.overloaded
    }

    pub(super) fn new(reason: GiveUpReason, role: Role, last: Option<Class>) -> Self {
        use GiveUpReason as R;
        let overloaded = match reason {
            R::NotRetryable | R::NotIdempotent | R::NotReplayable | R::Abandoned => false,
            R::AttemptsExhausted => {
                role == Role::Owner || matches!(last, Some(Class::Throttled | Class::Overloaded))
            }
            _ => true,
        };
        GiveUp { reason, overloaded }
    }
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.reason.fmt(f)
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The call succeeded; return the response.
    Success,
    /// Wait `after`, then call [`RetryPolicy::before_attempt`](super::RetryPolicy::before_attempt) again.
    Retry {
        /// How long to wait.
        after: Duration,
    },
    /// Stop and report.
    GiveUp(GiveUp),
}

#[cfg(test)]
mod upstream_tests {
    use super::*;
    use crate::classify::Transient;

    /// The fail-fast rule: refusals and an owner's exhaustion go up as "don't retry"; a
    /// fail-fast layer's transient failure goes up as it is (a timeout as a gateway timeout),
    /// so only the owner retries it. Breaks if a fail-fast layer's 503 were turned into
    /// "don't retry" (the owner could not retry once: goodput drops), or an owner's exhaustion
    /// passed up as it is (the layer above multiplies).
    #[test]
    fn the_fail_fast_rule() {
        let retryable = Some(Class::Retryable(Transient::ServerError));
        let ff = |r, last| GiveUp::new(r, Role::FailFast, last);
        let owner = |r, last| GiveUp::new(r, Role::Owner, last);
        let cases = [
            (ff(GiveUpReason::AttemptsExhausted, retryable), LastAttempt::Answered, Upstream::Last),
            (ff(GiveUpReason::AttemptsExhausted, retryable), LastAttempt::Failed, Upstream::Last),
            (
                ff(GiveUpReason::AttemptsExhausted, retryable),
                LastAttempt::TimedOut,
                Upstream::TimedOut,
            ),
            (
                ff(GiveUpReason::AttemptsExhausted, Some(Class::Throttled)),
                LastAttempt::Answered,
                Upstream::DontRetry,
            ),
            (
                owner(GiveUpReason::AttemptsExhausted, retryable),
                LastAttempt::Answered,
                Upstream::DontRetry,
            ),
            (
                ff(GiveUpReason::BudgetExhausted, retryable),
                LastAttempt::Answered,
                Upstream::DontRetry,
            ),
            (ff(GiveUpReason::CircuitOpen, None), LastAttempt::NotSent, Upstream::DontRetry),
            (ff(GiveUpReason::NotRetryable, retryable), LastAttempt::Answered, Upstream::Last),
            (ff(GiveUpReason::Abandoned, None), LastAttempt::NotSent, Upstream::DontRetry),
        ];
        for (g, last, want) in cases {
            assert_eq!(upstream(Err(g), last), want, "{g:?} after {last:?}");
        }
        assert_eq!(upstream(Ok(()), LastAttempt::Answered), Upstream::Success);
    }
}
