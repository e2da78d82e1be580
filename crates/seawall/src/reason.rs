//! Why a call gave up: the reasons every counter and error shares. Below both the policy (which
//! decides) and the metrics (which count by reason), so neither depends on the other.

use std::fmt;

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

    /// Whether this give-up is a "retry overflow": a retry refused by the budget or local
    /// throttling (Envoy's `upstream_rq_retry_overflow`). The one definition every counter
    /// and exporter uses.
    pub const fn is_retry_overflow(self) -> bool {
        matches!(self, GiveUpReason::BudgetExhausted | GiveUpReason::ThrottledLocally)
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
