//! What a call's end looks like: the give-up reasons, the overload signal, the decision.

use std::fmt;
use std::time::Duration;

use super::Role;
use crate::classify::Class;
pub use crate::reason::GiveUpReason;

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
