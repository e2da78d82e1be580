//! The retry policy: one logical call's decisions, from first attempt to success or give-up.
//!
//! [`RetryPolicy`] answers two questions, as plain synchronous functions of the call's state, the
//! outcome and `now` — never reading a clock, never sleeping:
//!
//! - [`RetryPolicy::before_attempt`]: may this attempt be sent? (deadline nearly gone, breaker
//!   open, adaptive throttle, retries switched off → no, with the reason)
//! - [`RetryPolicy::after_attempt`]: after this outcome, retry after how long, or give up and why?
//!
//! Middleware and the simulator drive the same code: the middleware sleeps for real, the
//! simulator schedules an event. A policy has a [`Role`]: the **owner** of a call path retries;
//! every other layer is **fail-fast** — one attempt, and a dependency's overload is passed upward
//! as an explicit "overloaded; don't retry" ([`GiveUp::overloaded`]), so attempts never multiply
//! across layers (rule 1).
//!
//! ```
//! use seawall::prelude::*;
//! use std::time::Duration;
//!
//! let policy = RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default()).with_seed(7);
//! let mut now = Instant::ZERO;
//! let deadline = Deadline::after(now, Duration::from_secs(2));
//! let mut call = policy.start(now, RequestInfo::idempotent(), Some(deadline));
//!
//! let attempt = policy.before_attempt(&mut call, now).unwrap();
//! assert_eq!(attempt.number(), 1);
//! // … send it; it fails with a 503 …
//! let class = HttpClassifier::default().classify(503);
//! match policy.after_attempt(&mut call, now, class, Hint::None) {
//!     Decision::Retry { after } => {
//!         assert!(after < Duration::from_millis(50)); // full jitter under the 50 ms ceiling
//!         now = now + after;
//!     }
//!     other => panic!("expected a retry, got {other:?}"),
//! }
//! let attempt = policy.before_attempt(&mut call, now).unwrap();
//! assert_eq!(attempt.number(), 2);
//! assert_eq!(policy.after_attempt(&mut call, now, Class::Success, Hint::None), Decision::Success);
//! assert_eq!(policy.metrics().snapshot().attempts, 2);
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::breaker::{Breaker, BreakerPermit};
use crate::budget::{AttemptOutcome, Budget, RetryCause, Withdrawal};
use crate::classify::{Class, Transient, is_idempotent_method};
use crate::control::Control;
use crate::deadline::Deadline;
use crate::error::{ConfigError, check_f64};
use crate::hint::Hint;
use crate::metrics::Metrics;
use crate::rng::{Rng, SeedSource, SeededRng};
use crate::time::Instant;

/// Whether this layer owns retries for its call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// Retries, within the attempt cap, budget and deadline.
    #[default]
    Owner,
    /// One attempt; overload below becomes "overloaded; don't retry" above.
    FailFast,
}

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GiveUp {
    /// Why the call stopped.
    pub reason: GiveUpReason,
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
    pub overloaded: bool,
}

impl GiveUp {
    fn new(reason: GiveUpReason, role: Role, last: Option<Class>) -> Self {
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
    /// Wait `after`, then call [`RetryPolicy::before_attempt`] again.
    Retry {
        /// How long to wait.
        after: Duration,
    },
    /// Stop and report.
    GiveUp(GiveUp),
}

/// What the policy needs to know about a request before the first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestInfo {
    safe_to_retry: bool,
    replayable: bool,
}

impl RequestInfo {
    /// An idempotent request (GET, PUT, DELETE, … or any request with an idempotency key).
    pub const fn idempotent() -> Self {
        RequestInfo { safe_to_retry: true, replayable: true }
    }

    /// A request that must not run twice: retried only if the failure proves it never reached
    /// the server (connection refused).
    pub const fn non_idempotent() -> Self {
        RequestInfo { safe_to_retry: false, replayable: true }
    }

    /// A request that can be sent only once whatever happens: its body is a stream that the
    /// first attempt consumes. Its failures give up with [`GiveUpReason::NotReplayable`].
    pub const fn send_once() -> Self {
        RequestInfo { safe_to_retry: false, replayable: false }
    }

    /// From an HTTP method and whether the request carries an `Idempotency-Key` (RFC 9110 §9.2.2).
    pub fn http(method: &str, has_idempotency_key: bool) -> Self {
        RequestInfo {
            safe_to_retry: has_idempotency_key || is_idempotent_method(method),
            replayable: true,
        }
    }
}

/// Policy settings. Defaults are safe without tuning; every one is documented with its source.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    role: Role,
    max_attempts: u32,
    backoff: Backoff,
    per_try_timeout: Option<Duration>,
    min_time_left: Duration,
    max_wait: Duration,
    hint_spread: f64,
}

impl Default for PolicyConfig {
    /// Owner role; 3 attempts (Google SRE per-request cap, AWS standard mode); AWS 2026 backoff;
    /// no per-try timeout (the deadline bounds each attempt); 5 ms minimum time left for an
    /// attempt; waits at most 20 s (the AWS backoff cap); server hints spread by up to +50 %.
    fn default() -> Self {
        PolicyConfig {
            role: Role::Owner,
            max_attempts: 3,
            backoff: Backoff::default(),
            per_try_timeout: None,
            min_time_left: Duration::from_millis(5),
            max_wait: Duration::from_secs(20),
            hint_spread: 0.5,
        }
    }
}

/// The most attempts a policy may be configured with (gRPC caps `maxAttempts` at 5; seawall
/// allows 10 so the simulator can reproduce the worst configurations of the seeds).
pub const MAX_ATTEMPTS: u32 = 10;

impl PolicyConfig {
    /// A fail-fast layer: one attempt, overload passed upward.
    pub fn fail_fast() -> Self {
        PolicyConfig { role: Role::FailFast, max_attempts: 1, ..Self::default() }
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The attempt cap (1 for fail-fast).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff.
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The per-attempt timeout, if any.
    pub fn per_try_timeout(&self) -> Option<Duration> {
        self.per_try_timeout
    }

    /// Attempts per call including the first, in `[1, 10]`. Setting it on a fail-fast config is
    /// an error unless it is 1.
    pub fn with_max_attempts(mut self, n: u32) -> Result<Self, ConfigError> {
        if n == 0 || n > MAX_ATTEMPTS || (self.role == Role::FailFast && n != 1) {
            return Err(ConfigError::new(
                "policy.max_attempts",
                "in [1, 10] (exactly 1 for a fail-fast layer)",
                n,
            ));
        }
        self.max_attempts = n;
        Ok(self)
    }

    /// The backoff between attempts.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// A timeout for each attempt (1 ms to 1 h); the attempt's real timeout is the smaller of it
    /// and the time left before the deadline.
    pub fn with_per_try_timeout(mut self, t: Duration) -> Result<Self, ConfigError> {
        if t < Duration::from_millis(1) || t > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "policy.per_try_timeout",
                "in [1 ms, 1 h]",
                format!("{t:?}"),
            ));
        }
        self.per_try_timeout = Some(t);
        Ok(self)
    }

    /// No attempt starts with less than this left before the deadline (0 to 60 s).
    pub fn with_min_time_left(mut self, t: Duration) -> Result<Self, ConfigError> {
        if t > Duration::from_secs(60) {
            return Err(ConfigError::new("policy.min_time_left", "in [0, 60 s]", format!("{t:?}")));
        }
        self.min_time_left = t;
        Ok(self)
    }

    /// The longest wait before a retry, whatever the backoff or a server hint says (0 to 1 h). A
    /// server hint longer than this makes the call give up instead of retrying early.
    pub fn with_max_wait(mut self, t: Duration) -> Result<Self, ConfigError> {
        if t > Duration::from_secs(3600) {
            return Err(ConfigError::new("policy.max_wait", "in [0, 1 h]", format!("{t:?}")));
        }
        self.max_wait = t;
        Ok(self)
    }

    /// Jitter added on top of a server hint, as a fraction of it (in [0, 10]): a hint of 5 s with
    /// spread 0.5 waits uniformly between 5 and 7.5 s, so clients told the same thing do not
    /// return together.
    pub fn with_hint_spread(mut self, spread: f64) -> Result<Self, ConfigError> {
        self.hint_spread = check_f64("policy.hint_spread", "in [0, 10]", spread, 0.0, 10.0)?;
        Ok(self)
    }
}

/// One attempt the policy allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
    timeout: Option<Duration>,
    time_left: Option<Duration>,
}

impl Attempt {
    /// 1 for the first attempt (the `Request-Attempt` header value).
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Whether this attempt is a retry.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// This attempt's timeout: the smaller of the per-try timeout and the time left.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Time left before the deadline when the attempt starts (to send downstream).
    pub fn time_left(&self) -> Option<Duration> {
        self.time_left
    }
}

/// The state of one logical call. Create with [`RetryPolicy::start`].
#[derive(Debug)]
pub struct Call {
    attempts: u32,
    in_flight: bool,
    finished: bool,
    safe_to_retry: bool,
    replayable: bool,
    deadline: Option<Deadline>,
    /// The call's random stream, taken from the policy's [`SeedSource`] on the call's first draw:
    /// most calls never draw (no retry, no breaker, a budget that does not draw on admission),
    /// and seeding costs more than the rest of a successful call's decisions.
    rng: Option<SeededRng>,
    prev_wait: Duration,
    paid: Option<Withdrawal>,
    permit: Option<BreakerPermit>,
    last: Option<Class>,
}

impl Call {
    /// Attempts sent so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The call's deadline.
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// Whether the call has reached success or give-up.
    pub fn is_finished(&self) -> bool {
        self.finished
    }
}

/// The retry policy for one client of one dependency. Share it (`Arc`) across every call to that
/// dependency: its budget, breaker and metrics are per client, not per call.
#[derive(Debug)]
pub struct RetryPolicy<B = crate::budget::AnyBudget> {
    cfg: PolicyConfig,
    budget: B,
    breaker: Option<Breaker>,
    control: Arc<Control>,
    metrics: Arc<Metrics>,
    seeds: SeedSource,
}

impl<B: Budget> RetryPolicy<B> {
    /// A policy with its own control (retries on) and metrics, seeded from entropy.
    pub fn new(cfg: PolicyConfig, budget: B) -> Self {
        RetryPolicy {
            cfg,
            budget,
            breaker: None,
            control: Arc::new(Control::new()),
            metrics: Arc::new(Metrics::new()),
            seeds: SeedSource::from_entropy(),
        }
    }

    /// Adds a circuit breaker (none by default).
    pub fn with_breaker(mut self, breaker: Breaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// Shares a runtime control (kill switch and ramp) with other policies.
    pub fn with_control(mut self, control: Arc<Control>) -> Self {
        self.control = control;
        self
    }

    /// Shares metrics with other policies.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Makes the per-call random streams reproducible (tests, the simulator).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seeds = SeedSource::new(seed);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    /// The budget.
    pub fn budget(&self) -> &B {
        &self.budget
    }

    /// The breaker, if any.
    pub fn breaker(&self) -> Option<&Breaker> {
        self.breaker.as_ref()
    }

    /// The runtime control.
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Starts a logical call.
    pub fn start(&self, _now: Instant, request: RequestInfo, deadline: Option<Deadline>) -> Call {
        self.metrics.call_started();
        Call {
            attempts: 0,
            in_flight: false,
            finished: false,
            safe_to_retry: request.safe_to_retry,
            replayable: request.replayable,
            deadline,
            rng: None,
            prev_wait: Duration::ZERO,
            paid: None,
            permit: None,
            last: None,
        }
    }

    /// The call's random stream, seeded on first use. Streams are handed out in the order of
    /// calls' first draws, so a seeded policy driven in the same order makes the same decisions.
    fn rng<'a>(&'a self, call: &'a mut Call) -> &'a mut SeededRng {
        call.rng.get_or_insert_with(|| self.seeds.stream())
    }

    fn finish(&self, call: &mut Call, now: Instant, outcome: Result<(), GiveUpReason>) {
        if let Some(w) = call.paid.take() {
            self.budget.release(now, w);
        }
        call.finished = true;
        self.metrics.call_ended(call.attempts, outcome);
    }

    fn give_up(&self, call: &mut Call, now: Instant, reason: GiveUpReason) -> GiveUp {
        self.finish(call, now, Err(reason));
        GiveUp::new(reason, self.cfg.role, call.last)
    }

    /// May the next attempt be sent now? On `Ok` send it and report with
    /// [`RetryPolicy::after_attempt`]; on `Err` the call is over.
    ///
    /// Calling it on a finished call, or twice without reporting, refuses with
    /// [`GiveUpReason::AttemptsExhausted`] rather than panicking.
    pub fn before_attempt(&self, call: &mut Call, now: Instant) -> Result<Attempt, GiveUp> {
        if call.finished || call.in_flight {
            return Err(GiveUp::new(GiveUpReason::AttemptsExhausted, self.cfg.role, call.last));
        }
        let retry = call.attempts > 0;
        let time_left = call.deadline.map(|d| d.remaining(now));
        if let Some(left) = time_left
            && (left.is_zero() || left < self.cfg.min_time_left)
        {
            return Err(self.give_up(call, now, GiveUpReason::DeadlineTooClose));
        }
        if retry && self.control.percent() == 0 {
            return Err(self.give_up(call, now, GiveUpReason::RetriesDisabled));
        }
        if let Some(b) = &self.breaker {
            match b.admit(now, self.rng(call).next_f64()) {
                Ok(p) => call.permit = Some(p),
                Err(_) => return Err(self.give_up(call, now, GiveUpReason::CircuitOpen)),
            }
        }
        // Only budgets that refuse with a probability get a draw of their own (see
        // `Budget::admit_draws`); the others get a fixed value and the call's stream is untouched.
        let draw = if self.budget.admit_draws() { self.rng(call).next_f64() } else { 0.5 };
        if !self.budget.admit(now, retry, draw) {
            if let (Some(b), Some(p)) = (&self.breaker, call.permit.take()) {
                b.release(p);
            }
            return Err(self.give_up(call, now, GiveUpReason::ThrottledLocally));
        }
        call.attempts += 1;
        call.in_flight = true;
        self.metrics.attempt_sent(retry);
        let timeout = match (self.cfg.per_try_timeout, time_left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Attempt { number: call.attempts, timeout, time_left })
    }

    /// Reports the outcome of the attempt in flight and decides what comes next.
    ///
    /// `hint` is what the server said (`Retry-After`, pushback); pass [`Hint::None`] if nothing.
    pub fn after_attempt(
        &self,
        call: &mut Call,
        now: Instant,
        class: Class,
        hint: Hint,
    ) -> Decision {
        if call.finished || !call.in_flight {
            return Decision::GiveUp(GiveUp::new(
                GiveUpReason::AttemptsExhausted,
                self.cfg.role,
                call.last,
            ));
        }
        call.in_flight = false;
        call.last = Some(class);
        let cause = match class {
            Class::Success | Class::NeverRetry => None,
            Class::Retryable(Transient::Timeout) => Some(RetryCause::Timeout),
            Class::Retryable(_) => Some(RetryCause::Transient),
            Class::Throttled | Class::Overloaded => Some(RetryCause::Throttled),
        };
        let outcome = cause.map_or(AttemptOutcome::Answered, AttemptOutcome::Failed);
        self.budget.record(now, call.paid.take(), outcome);
        if let (Some(b), Some(p)) = (&self.breaker, call.permit.take()) {
            let draw = self.rng(call).next_f64();
            b.record_with_draw(now, p, cause.is_none(), draw);
        }

        let cause = match (class, cause) {
            (Class::Success, _) => {
                self.finish(call, now, Ok(()));
                return Decision::Success;
            }
            (_, None) => {
                return Decision::GiveUp(self.give_up(call, now, GiveUpReason::NotRetryable));
            }
            (_, Some(c)) => c,
        };
        let reason = if class == Class::Overloaded || hint == Hint::DontRetry {
            Some(GiveUpReason::ServerSaidDontRetry)
        } else if call.attempts >= self.cfg.max_attempts || self.cfg.role == Role::FailFast {
            Some(GiveUpReason::AttemptsExhausted)
        } else if !call.replayable {
            Some(GiveUpReason::NotReplayable)
        } else if !call.safe_to_retry && class != Class::Retryable(Transient::ConnectRefused) {
            Some(GiveUpReason::NotIdempotent)
        } else if !self.control.allows_retry(self.rng(call).next_f64()) {
            Some(GiveUpReason::RetriesDisabled)
        } else {
            None
        };
        if let Some(r) = reason {
            return Decision::GiveUp(self.give_up(call, now, r));
        }

        let throttled = cause == RetryCause::Throttled;
        let retry_no = call.attempts; // the retry about to be scheduled: 1 after the first attempt
        let prev_wait = call.prev_wait;
        let mut wait = self.cfg.backoff.delay(retry_no, throttled, prev_wait, self.rng(call));
        if let Hint::After(h) = hint {
            if h > self.cfg.max_wait {
                return Decision::GiveUp(self.give_up(
                    call,
                    now,
                    GiveUpReason::ServerSaidDontRetry,
                ));
            }
            let spread = h.mul_f64(self.cfg.hint_spread * self.rng(call).next_f64());
            wait = wait.max(h + spread).min(self.cfg.max_wait).max(h);
        } else {
            wait = wait.min(self.cfg.max_wait);
        }
        if let Some(d) = call.deadline
            && wait + self.cfg.min_time_left > d.remaining(now)
        {
            return Decision::GiveUp(self.give_up(call, now, GiveUpReason::DeadlineTooClose));
        }
        match self.budget.withdraw(now, cause) {
            Some(w) => call.paid = Some(w),
            None => {
                return Decision::GiveUp(self.give_up(call, now, GiveUpReason::BudgetExhausted));
            }
        }
        call.prev_wait = wait;
        Decision::Retry { after: wait }
    }

    /// The caller abandoned the call (cancelled, dropped): releases what it held and counts a
    /// give-up with [`GiveUpReason::Abandoned`] if it had not finished. Idempotent.
    pub fn abandon(&self, call: &mut Call, now: Instant) {
        if call.finished {
            return;
        }
        if call.in_flight {
            call.in_flight = false;
            self.budget.record(now, call.paid.take(), AttemptOutcome::Abandoned);
            if let (Some(b), Some(p)) = (&self.breaker, call.permit.take()) {
                b.release(p);
            }
        }
        self.finish(call, now, Err(GiveUpReason::Abandoned));
    }
}

#[cfg(test)]
mod tests;
