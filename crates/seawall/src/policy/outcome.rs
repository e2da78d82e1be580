//! What a call's end looks like: the give-up reasons, the overload signal, the decision.

use std::fmt;
use std::time::Duration;

use super::Role;
use crate::classify::Class;

/// Why a call gave up. Metrics count give-ups by reason; errors carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GiveUpReason {
    /// The outcome can never succeed on retry (a 4xx other than 408/429, a non-retryable gRPC
    /// status).
    NotRetryable,
    /// The request is not idempotent and carries no idempotency key.
    NotIdempotent,
    /// The attempt cap was reached (for a fail-fast layer, after its one attempt).
    AttemptsExhausted,
    /// The retry budget refused ("retry overflow").
    BudgetExhausted,
    /// The wait, plus the minimum time an attempt needs, would outlive the deadline.
    DeadlineTooClose,
    /// The circuit breaker is open.
    CircuitOpen,
    /// Retries are switched off (or ramped down) by runtime control.
    RetriesDisabled,
    /// The server said not to retry (negative pushback, "overloaded; don't retry"), or asked for
    /// a wait longer than the configured maximum.
    ServerSaidDontRetry,
    /// Adaptive client throttling refused the attempt locally.
    ThrottledLocally,
    /// The request's body cannot be sent again (a stream already consumed), so even a failure
    /// that proves the request never arrived cannot be retried.
    NotReplayable,
    /// The caller abandoned the call (it was cancelled or its future dropped) before it ended.
    Abandoned,
}

impl GiveUpReason {
    /// Number of reasons.
    pub const COUNT: usize = 11;

    /// Every reason, in [`GiveUpReason::index`] order.
    pub const ALL: [GiveUpReason; Self::COUNT] = [
        GiveUpReason::NotRetryable,
        GiveUpReason::NotIdempotent,
        GiveUpReason::AttemptsExhausted,
        GiveUpReason::BudgetExhausted,
        GiveUpReason::DeadlineTooClose,
        GiveUpReason::CircuitOpen,
        GiveUpReason::RetriesDisabled,
        GiveUpReason::ServerSaidDontRetry,
        GiveUpReason::ThrottledLocally,
        GiveUpReason::NotReplayable,
        GiveUpReason::Abandoned,
    ];

    /// A dense index in `0..COUNT`, for arrays of counters.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A stable snake_case name for metrics labels and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            GiveUpReason::NotRetryable => "not_retryable",
            GiveUpReason::NotIdempotent => "not_idempotent",
            GiveUpReason::AttemptsExhausted => "attempts_exhausted",
            GiveUpReason::BudgetExhausted => "budget_exhausted",
            GiveUpReason::DeadlineTooClose => "deadline_too_close",
            GiveUpReason::CircuitOpen => "circuit_open",
            GiveUpReason::RetriesDisabled => "retries_disabled",
            GiveUpReason::ServerSaidDontRetry => "server_said_dont_retry",
            GiveUpReason::ThrottledLocally => "throttled_locally",
            GiveUpReason::NotReplayable => "not_replayable",
            GiveUpReason::Abandoned => "abandoned",
        }
    }
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GiveUpReason::NotRetryable => "the outcome is not retryable",
            GiveUpReason::NotIdempotent => {
                "the request is not idempotent and has no idempotency key"
            }
            GiveUpReason::AttemptsExhausted => "attempts exhausted",
            GiveUpReason::BudgetExhausted => "retry budget exhausted",
            GiveUpReason::DeadlineTooClose => "deadline too close",
            GiveUpReason::CircuitOpen => "circuit open",
            GiveUpReason::RetriesDisabled => "retries disabled",
            GiveUpReason::ServerSaidDontRetry => "server said don't retry",
            GiveUpReason::ThrottledLocally => "throttled locally",
            GiveUpReason::NotReplayable => "the request body cannot be sent again",
            GiveUpReason::Abandoned => "the caller abandoned the call",
        })
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
