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
//! as an explicit "overloaded; don't retry" ([`GiveUp::is_overloaded`]), so attempts never multiply
//! across layers.
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

mod config;
mod outcome;

use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{Breaker, BreakerPermit};
use crate::budget::{AttemptOutcome, Budget, RetryCause, Withdrawal};
use crate::classify::{Class, Transient, is_idempotent_method};
use crate::control::Control;
use crate::deadline::Deadline;
use crate::hint::Hint;
use crate::metrics::Metrics;
use crate::rng::{CallRng, Rng, SeedSource};
use crate::time::Instant;

pub use config::{MAX_ATTEMPTS, PolicyConfig, Role};
pub use outcome::{Decision, GiveUp, GiveUpReason, LastAttempt, Upstream, upstream};

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

/// One attempt the policy allowed. The default is a placeholder for none yet: number 0, no
/// timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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

/// Where a call stands between its decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Before an attempt: the first, or a retry the policy allowed.
    Ready,
    /// An attempt was allowed and not yet reported.
    InFlight,
    /// Success or give-up: nothing more to decide.
    Finished,
}

/// The state of one logical call. Create with [`RetryPolicy::start`].
///
/// Plain values: what the call holds (a budget withdrawal, a breaker permit, its own random
/// stream) is an `Option` of it, and nothing per call points into the policy: budget, breaker,
/// control, metrics and the seed source are borrowed from it at decision time. A simulator holds
/// millions of these at once (a synchronised reconnect herd: 10 M calls in flight), which is why
/// the call's random stream is a [`CallRng`] (8 B of state) rather than a [`SeededRng`] (32 B).
///
/// [`SeededRng`]: crate::rng::SeededRng
#[derive(Debug)]
pub struct Call {
    stage: Stage,
    role: Role,
    request: RequestInfo,
    /// Attempts sent so far: at most [`MAX_ATTEMPTS`], since a call past `max_attempts` gives up.
    attempts: u8,
    /// The class of the last attempt's answer.
    last: Option<Class>,
    deadline: Option<Deadline>,
    /// The wait before the retry under way or the last one (zero before the first).
    prev_wait: Duration,
    /// The budget withdrawal held for the retry under way.
    paid: Option<Withdrawal>,
    /// The breaker permit held for the attempt in flight.
    permit: Option<BreakerPermit>,
    /// The call's random stream, taken from the policy's [`SeedSource`] on its first draw: most
    /// calls never draw (no retry, no breaker, a budget that does not draw on admission), and
    /// streams handed out in the order of first draws keep a seeded run reproducible.
    rng: Option<CallRng>,
}

impl Call {
    /// Attempts sent so far.
    pub fn attempts(&self) -> u32 {
        u32::from(self.attempts)
    }

    /// The call's deadline.
    #[inline(always)]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// Whether the call has reached success or give-up.
    pub fn is_finished(&self) -> bool {
        self.stage == Stage::Finished
    }

    /// The call's random stream, taken from `seeds` on its first draw.
    #[inline]
    fn rng(&mut self, seeds: &SeedSource) -> &mut CallRng {
        self.rng.get_or_insert_with(|| seeds.call_stream())
    }

    /// The refusal of a request or report that does not fit the call's state (a finished call,
    /// an attempt already in flight, or none to report): nothing is counted.
    fn not_in_flight(&self) -> GiveUp {
        GiveUp::new(GiveUpReason::AttemptsExhausted, self.role, self.last)
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

    /// Starts a logical call in the role of the policy's configuration
    /// ([`PolicyConfig::role`]).
    pub fn start(&self, now: Instant, request: RequestInfo, deadline: Option<Deadline>) -> Call {
        self.start_as(self.cfg.role, now, request, deadline)
    }

    /// Starts a logical call in `role`, whatever the configuration says: an adapter whose type
    /// fixes the role (a retrying layer, a fail-fast layer) passes its own, so a policy shared
    /// between both kinds of layer behaves as each layer must. A fail-fast call makes one
    /// attempt whatever [`PolicyConfig::max_attempts`] says.
    pub fn start_as(
        &self,
        role: Role,
        _now: Instant,
        request: RequestInfo,
        deadline: Option<Deadline>,
    ) -> Call {
        Call {
            stage: Stage::Ready,
            role,
            request,
            attempts: 0,
            last: None,
            deadline,
            prev_wait: Duration::ZERO,
            paid: None,
            permit: None,
            rng: None,
        }
    }

    /// Whether the control's ramp lets this retry through. The call's stream is drawn from even
    /// with retries fully on, when the value cannot matter, so that the call's later draws are
    /// the ones they always were whatever the ramp says.
    fn ramp_allows(&self, call: &mut Call) -> bool {
        let draw = call.rng(&self.seeds).next_f64();
        self.control.percent() >= 100 || self.control.allows_retry(draw)
    }

    fn finish(&self, call: &mut Call, now: Instant, outcome: Result<(), GiveUpReason>) {
        if let Some(w) = call.paid.take() {
            self.budget.release(now, w);
        }
        call.stage = Stage::Finished;
        self.metrics.call_ended(call.attempts(), outcome);
    }

    fn give_up(&self, call: &mut Call, now: Instant, reason: GiveUpReason) -> GiveUp {
        self.finish(call, now, Err(reason));
        GiveUp::new(reason, call.role, call.last)
    }

    /// May the next attempt be sent now? On `Ok` send it and report with
    /// [`RetryPolicy::after_attempt`]; on `Err` the call is over.
    ///
    /// Calling it on a finished call, or twice without reporting, refuses with
    /// [`GiveUpReason::AttemptsExhausted`] rather than panicking.
    #[inline(always)]
    pub fn before_attempt(&self, call: &mut Call, now: Instant) -> Result<Attempt, GiveUp> {
        if call.stage != Stage::Ready {
            return Err(call.not_in_flight());
        }
        let retry = call.attempts > 0;
        let time_left = call.deadline().map(|d| d.remaining(now));
        if let Some(left) = time_left
            && (left.is_zero() || left < self.cfg.min_time_left)
        {
            return Err(self.give_up(call, now, GiveUpReason::DeadlineTooClose));
        }
        if retry && self.control.percent() == 0 {
            return Err(self.give_up(call, now, GiveUpReason::RetriesDisabled));
        }
        if let Some(b) = &self.breaker {
            match b.admit(now, call.rng(&self.seeds).next_f64()) {
                Ok(p) => call.permit = Some(p),
                Err(_) => return Err(self.give_up(call, now, GiveUpReason::CircuitOpen)),
            }
        }
        // Only budgets that refuse with a probability get a draw of their own (see
        // `Budget::admit_draws`); the others get a fixed value and the call's stream is untouched.
        let draw = if self.budget.admit_draws() { call.rng(&self.seeds).next_f64() } else { 0.5 };
        if !self.budget.admit(now, retry, draw) {
            if let Some(b) = &self.breaker
                && let Some(p) = call.permit.take()
            {
                b.release(p);
            }
            return Err(self.give_up(call, now, GiveUpReason::ThrottledLocally));
        }
        call.attempts += 1;
        call.stage = Stage::InFlight;
        self.metrics.attempt_sent(call.attempts());
        let timeout = match (self.cfg.per_try_timeout, time_left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Attempt { number: call.attempts(), timeout, time_left })
    }

    /// Reports the outcome of the attempt in flight and decides what comes next.
    ///
    /// `hint` is what the server said (`Retry-After`, pushback); pass [`Hint::None`] if nothing.
    #[inline(always)]
    pub fn after_attempt(
        &self,
        call: &mut Call,
        now: Instant,
        class: Class,
        hint: Hint,
    ) -> Decision {
        // A success, the common case, is a few stores and the budget's and metrics' updates:
        // kept small enough for the caller to inline; every other outcome is decided out of line.
        if class == Class::Success {
            if !self.settle(call, now, class, None) {
                return Decision::GiveUp(call.not_in_flight());
            }
            self.finish(call, now, Ok(()));
            return Decision::Success;
        }
        self.after_failure(call, now, class, hint)
    }

    /// Ends the attempt in flight with `class` (`cause`: why it may be retried, `None` for a
    /// success or a failure that must not be): the budget and the breaker learn of it. False,
    /// touching nothing, if no attempt was in flight.
    #[inline(always)]
    fn settle(
        &self,
        call: &mut Call,
        now: Instant,
        class: Class,
        cause: Option<RetryCause>,
    ) -> bool {
        if call.stage != Stage::InFlight {
            return false;
        }
        call.stage = Stage::Ready;
        call.last = Some(class);
        // Three kinds of answer, not two: a non-retryable failure (a 404, INVALID_ARGUMENT) is
        // neither a success nor a failure for the token buckets (see `AttemptOutcome`).
        let outcome = match (class, cause) {
            (_, Some(c)) => AttemptOutcome::Failed(c),
            (Class::Success, None) => AttemptOutcome::Answered,
            (_, None) => AttemptOutcome::Rejected,
        };
        self.budget.record(now, call.paid.take(), outcome);
        if let Some(b) = &self.breaker
            && let Some(p) = call.permit.take()
        {
            let draw = call.rng(&self.seeds).next_f64();
            b.record_with_draw(now, p, cause.is_none(), draw);
        }
        true
    }

    /// [`after_attempt`](Self::after_attempt) for anything but a success.
    #[inline(never)]
    fn after_failure(&self, call: &mut Call, now: Instant, class: Class, hint: Hint) -> Decision {
        let cause = match class {
            Class::Success | Class::NeverRetry => None,
            Class::Retryable(Transient::Timeout) => Some(RetryCause::Timeout),
            Class::Retryable(_) => Some(RetryCause::Transient),
            Class::Throttled | Class::Overloaded => Some(RetryCause::Throttled),
        };
        if !self.settle(call, now, class, cause) {
            return Decision::GiveUp(call.not_in_flight());
        }

        let cause = match (class, cause) {
            // Taken by `after_attempt`; kept so that this decides any class.
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
        } else if call.attempts() >= self.cfg.max_attempts || call.role == Role::FailFast {
            Some(GiveUpReason::AttemptsExhausted)
        } else if !call.request.replayable {
            Some(GiveUpReason::NotReplayable)
        } else if !call.request.safe_to_retry
            && class != Class::Retryable(Transient::ConnectRefused)
        {
            Some(GiveUpReason::NotIdempotent)
        } else if !self.ramp_allows(call) {
            Some(GiveUpReason::RetriesDisabled)
        } else {
            None
        };
        if let Some(r) = reason {
            return Decision::GiveUp(self.give_up(call, now, r));
        }

        let throttled = cause == RetryCause::Throttled;
        let retry_no = call.attempts(); // the retry about to be scheduled: 1 after the first attempt
        let prev_wait = call.prev_wait;
        let rng = call.rng(&self.seeds);
        let mut wait = self.cfg.backoff.delay(retry_no, throttled, prev_wait, &mut *rng);
        if let Hint::After(h) = hint {
            if h > self.cfg.max_wait {
                return Decision::GiveUp(self.give_up(
                    call,
                    now,
                    GiveUpReason::ServerSaidDontRetry,
                ));
            }
            let spread = h.mul_f64(self.cfg.hint_spread * rng.next_f64());
            wait = wait.max(h + spread).min(self.cfg.max_wait).max(h);
        } else {
            wait = wait.min(self.cfg.max_wait);
        }
        if let Some(d) = call.deadline()
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

    /// The retry the last [`after_attempt`](Self::after_attempt) allowed cannot be sent after
    /// all: the request is gone (its body said it could be replayed, then could not). Ends the
    /// call with [`GiveUpReason::NotReplayable`], giving the retry's budget withdrawal back, and
    /// returns the give-up to report. A call that is not waiting for a retry (finished, or an
    /// attempt in flight) is left as it is and gets [`GiveUpReason::AttemptsExhausted`].
    pub fn cancel_retry(&self, call: &mut Call, now: Instant) -> GiveUp {
        if call.stage != Stage::Ready {
            return call.not_in_flight();
        }
        self.give_up(call, now, GiveUpReason::NotReplayable)
    }

    /// The caller abandoned the call (cancelled, dropped): releases what it held and counts a
    /// give-up with [`GiveUpReason::Abandoned`] if it had not finished. Idempotent.
    pub fn abandon(&self, call: &mut Call, now: Instant) {
        if call.is_finished() {
            return;
        }
        if call.stage == Stage::InFlight {
            call.stage = Stage::Ready;
            self.budget.record(now, call.paid.take(), AttemptOutcome::Abandoned);
            if let Some(b) = &self.breaker
                && let Some(p) = call.permit.take()
            {
                b.release(p);
            }
        }
        self.finish(call, now, Err(GiveUpReason::Abandoned));
    }
}

#[cfg(test)]
mod tests;
