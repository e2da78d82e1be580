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

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{Breaker, BreakerPermit};
use crate::budget::{AttemptOutcome, Budget, RetryCause, Withdrawal};
use crate::classify::{Class, Transient, is_idempotent_method};
use crate::control::Control;
use crate::deadline::Deadline;
use crate::hint::Hint;
use crate::metrics::Metrics;
use crate::rng::{Rng, SeedSource, SeededRng};
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

/// The state of one logical call. Create with [`RetryPolicy::start`].
///
/// Kept small (32 B), because a simulator holds millions at once (a synchronised reconnect
/// herd: 10 M calls in flight): the optional deadline, budget withdrawal and breaker probe are a
/// plain value plus a bit in `flags` rather than `Option`s (each would pad to twice its size);
/// the last wait is kept in nanoseconds (it is at most the policy's `max_wait`, at most an hour);
/// the random stream is kept as its number and the count of values read (5 B), not as the
/// generator's 32 B state, which a draw rebuilds from those two; and the role and the class of
/// the last answer are bits of `flags` too. Nothing per call points into the policy: budget,
/// breaker, control, metrics and the seed source are borrowed from it at decision time.
pub struct Call {
    /// The deadline's instant in nanoseconds; meaningful only with [`Call::DEADLINE`].
    deadline: u64,
    /// The last wait in nanoseconds: at most `PolicyConfig::max_wait` (1 h at most), so exact.
    prev_wait: u64,
    /// The number of the call's random stream in the policy's [`SeedSource`], taken on the
    /// call's first draw; meaningful only with [`Call::STREAM`]. Most calls never draw (no
    /// retry, no breaker, a budget that does not draw on admission). The low 32 bits of the
    /// source's count: a policy hands out 2^32 distinct streams, then starts again at 0, so two
    /// calls four billion calls apart may wait the same jitter.
    stream: u32,
    /// The breaker probe held ([`BreakerPermit::probe`]); meaningful only with [`Call::PROBE`].
    probe: u32,
    /// The cost of the budget withdrawal held; meaningful only with [`Call::PAID`].
    paid: u32,
    /// Attempts sent so far: at most [`MAX_ATTEMPTS`], since a call past `max_attempts` gives up.
    attempts: u8,
    /// Values read from the stream so far, drawn or skipped: at most six per attempt (two
    /// before it, one as it ends, three deciding a retry), so at most 60.
    draws: u8,
    /// The flags below, the role ([`Call::FAIL_FAST`]) and the class of the last answer in the
    /// top bits ([`Call::LAST_SHIFT`], see [`class_code`]).
    flags: u16,
}

/// The class of an attempt's answer in 4 bits (0: none yet), as a [`Call`] keeps it.
fn class_code(class: Option<Class>) -> u16 {
    match class {
        None => 0,
        Some(Class::Success) => 1,
        Some(Class::Retryable(Transient::ServerError)) => 2,
        Some(Class::Retryable(Transient::Timeout)) => 3,
        Some(Class::Retryable(Transient::Connection)) => 4,
        Some(Class::Retryable(Transient::ConnectRefused)) => 5,
        Some(Class::Throttled) => 6,
        Some(Class::Overloaded) => 7,
        Some(Class::NeverRetry) => 8,
    }
}

/// The class [`class_code`] coded.
fn class_of_code(code: u16) -> Option<Class> {
    Some(match code {
        1 => Class::Success,
        2 => Class::Retryable(Transient::ServerError),
        3 => Class::Retryable(Transient::Timeout),
        4 => Class::Retryable(Transient::Connection),
        5 => Class::Retryable(Transient::ConnectRefused),
        6 => Class::Throttled,
        7 => Class::Overloaded,
        8 => Class::NeverRetry,
        _ => return None,
    })
}

impl Call {
    const IN_FLIGHT: u16 = 1;
    const FINISHED: u16 = 1 << 1;
    const SAFE_TO_RETRY: u16 = 1 << 2;
    const REPLAYABLE: u16 = 1 << 3;
    const DEADLINE: u16 = 1 << 4;
    const PAID: u16 = 1 << 5;
    /// A breaker permit is held; with [`Call::PROBE`], a half-open probe's, named by `probe`.
    const PERMIT: u16 = 1 << 6;
    const PROBE: u16 = 1 << 7;
    /// The call has a stream number (`stream`).
    const STREAM: u16 = 1 << 8;
    /// The call's role is [`Role::FailFast`] (else [`Role::Owner`]).
    const FAIL_FAST: u16 = 1 << 9;
    /// Where the 4 bits of the last answer's class start.
    const LAST_SHIFT: u16 = 12;

    #[inline(always)]
    fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    #[inline(always)]
    fn set(&mut self, flag: u16, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    #[inline(always)]
    fn role(&self) -> Role {
        if self.has(Self::FAIL_FAST) { Role::FailFast } else { Role::Owner }
    }

    /// The class of the last attempt's answer.
    #[inline(always)]
    fn last(&self) -> Option<Class> {
        class_of_code(self.flags >> Self::LAST_SHIFT)
    }

    #[inline(always)]
    fn set_last(&mut self, class: Class) {
        let low = self.flags & ((1 << Self::LAST_SHIFT) - 1);
        self.flags = low | (class_code(Some(class)) << Self::LAST_SHIFT);
    }

    /// Attempts sent so far.
    pub fn attempts(&self) -> u32 {
        u32::from(self.attempts)
    }

    /// The breaker permit held, handed over.
    #[inline(always)]
    fn take_permit(&mut self) -> Option<BreakerPermit> {
        let p = self.permit();
        self.set(Self::PERMIT | Self::PROBE, false);
        p
    }

    fn permit(&self) -> Option<BreakerPermit> {
        let probe = self.has(Self::PROBE).then_some(self.probe);
        self.has(Self::PERMIT).then(|| BreakerPermit::of_probe(probe))
    }

    fn hold_permit(&mut self, permit: BreakerPermit) {
        self.set(Self::PERMIT, true);
        self.set(Self::PROBE, permit.probe().is_some());
        self.probe = permit.probe().unwrap_or(0);
    }

    /// The call's stream number, taken from `seeds` on its first draw (drawn or skipped), so
    /// streams are handed out in the order of calls' first draws.
    #[inline]
    fn stream_number(&mut self, seeds: &SeedSource) -> u64 {
        if !self.has(Self::STREAM) {
            self.stream = seeds.take() as u32; // the low 32 bits: see `Call::stream`
            self.set(Self::STREAM, true);
        }
        u64::from(self.stream)
    }

    /// The call's stream where it stands: its number's stream past the values already read.
    fn stream_now(&mut self, seeds: &SeedSource) -> SeededRng {
        let mut rng = seeds.numbered(self.stream_number(seeds));
        for _ in 0..self.draws {
            rng.next_u64();
        }
        rng
    }

    /// Reads the stream's next value without computing it: for a draw whose value cannot
    /// change the decision. The values after it stay the ones the stream gives at their place.
    fn skip_draw(&mut self, seeds: &SeedSource) {
        self.stream_number(seeds);
        self.draws += 1;
    }

    /// The call's deadline.
    #[inline(always)]
    pub fn deadline(&self) -> Option<Deadline> {
        self.has(Self::DEADLINE).then(|| Deadline::at(Instant::from_nanos(self.deadline)))
    }

    /// Whether the call has reached success or give-up.
    pub fn is_finished(&self) -> bool {
        self.has(Self::FINISHED)
    }

    fn in_flight(&self) -> bool {
        self.has(Self::IN_FLIGHT)
    }

    /// The withdrawal held for the retry under way, if any, handed over.
    #[inline(always)]
    fn take_paid(&mut self) -> Option<Withdrawal> {
        let w = self.has(Self::PAID).then(|| Withdrawal::new(self.paid));
        self.set(Self::PAID, false);
        w
    }

    /// The refusal of a request or report that does not fit the call's state (a finished call,
    /// an attempt already in flight, or none to report): nothing is counted.
    fn not_in_flight(&self) -> GiveUp {
        GiveUp::new(GiveUpReason::AttemptsExhausted, self.role(), self.last())
    }

    fn prev_wait(&self) -> Duration {
        Duration::from_nanos(self.prev_wait)
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("attempts", &self.attempts)
            .field("in_flight", &self.in_flight())
            .field("finished", &self.is_finished())
            .field("safe_to_retry", &self.has(Self::SAFE_TO_RETRY))
            .field("replayable", &self.has(Self::REPLAYABLE))
            .field("deadline", &self.deadline())
            .field("stream", &self.has(Self::STREAM).then_some((self.stream, self.draws)))
            .field("prev_wait", &self.prev_wait())
            .field("paid", &self.has(Self::PAID).then(|| Withdrawal::new(self.paid)))
            .field("permit", &self.permit())
            .field("last", &self.last())
            .field("role", &self.role())
            .finish()
    }
}

/// A call's random stream while it draws: rebuilt on the first draw from the stream's number
/// and the values the call has read ([`Call::stream_now`]), then kept for the draws that follow
/// in the same step. A call keeps 10 B of stream instead of the generator's 32 B, and pays a
/// rebuild (a seeding and one step per value read before) per step that draws: a few dozen
/// instructions, on retries and breaker decisions only.
struct CallRng<'a> {
    seeds: &'a SeedSource,
    call: &'a mut Call,
    state: Option<SeededRng>,
}

impl Rng for CallRng<'_> {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        let (call, seeds) = (&mut *self.call, self.seeds);
        let state = self.state.get_or_insert_with(|| call.stream_now(seeds));
        call.draws += 1;
        state.next_u64()
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
        let mut flags = 0;
        if role == Role::FailFast {
            flags |= Call::FAIL_FAST;
        }
        if request.safe_to_retry {
            flags |= Call::SAFE_TO_RETRY;
        }
        if request.replayable {
            flags |= Call::REPLAYABLE;
        }
        if deadline.is_some() {
            flags |= Call::DEADLINE;
        }
        Call {
            attempts: 0,
            draws: 0,
            flags,
            deadline: deadline.map_or(0, |d| d.instant().as_nanos()),
            stream: 0,
            prev_wait: 0,
            paid: 0,
            probe: 0,
        }
    }

    /// The call's random stream, for the draws of one step of a decision. Streams are handed
    /// out in the order of calls' first draws, so a seeded policy driven in the same order makes
    /// the same decisions.
    fn rng<'a>(&'a self, call: &'a mut Call) -> CallRng<'a> {
        CallRng { seeds: &self.seeds, call, state: None }
    }

    /// Whether the control's ramp lets this retry through. A draw from the call's stream
    /// decides, except with retries fully on, when its value cannot matter: then it is only
    /// counted ([`Call::skip_draw`]), so the call's later draws are the ones they always were
    /// while a call that retries with a flat wait never rebuilds its stream.
    fn ramp_allows(&self, call: &mut Call) -> bool {
        if self.control.percent() >= 100 {
            call.skip_draw(&self.seeds);
            return true;
        }
        self.control.allows_retry(self.rng(call).next_f64())
    }

    fn finish(&self, call: &mut Call, now: Instant, outcome: Result<(), GiveUpReason>) {
        if let Some(w) = call.take_paid() {
            self.budget.release(now, w);
        }
        call.set(Call::FINISHED, true);
        self.metrics.call_ended(call.attempts(), outcome);
    }

    fn give_up(&self, call: &mut Call, now: Instant, reason: GiveUpReason) -> GiveUp {
        self.finish(call, now, Err(reason));
        GiveUp::new(reason, call.role(), call.last())
    }

    /// May the next attempt be sent now? On `Ok` send it and report with
    /// [`RetryPolicy::after_attempt`]; on `Err` the call is over.
    ///
    /// Calling it on a finished call, or twice without reporting, refuses with
    /// [`GiveUpReason::AttemptsExhausted`] rather than panicking.
    #[inline(always)]
    pub fn before_attempt(&self, call: &mut Call, now: Instant) -> Result<Attempt, GiveUp> {
        if call.is_finished() || call.in_flight() {
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
            match b.admit(now, self.rng(call).next_f64()) {
                Ok(p) => call.hold_permit(p),
                Err(_) => return Err(self.give_up(call, now, GiveUpReason::CircuitOpen)),
            }
        }
        // Only budgets that refuse with a probability get a draw of their own (see
        // `Budget::admit_draws`); the others get a fixed value and the call's stream is untouched.
        let draw = if self.budget.admit_draws() { self.rng(call).next_f64() } else { 0.5 };
        if !self.budget.admit(now, retry, draw) {
            if let Some(b) = &self.breaker
                && let Some(p) = call.take_permit()
            {
                b.release(p);
            }
            return Err(self.give_up(call, now, GiveUpReason::ThrottledLocally));
        }
        call.attempts += 1;
        call.set(Call::IN_FLIGHT, true);
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
        if call.is_finished() || !call.in_flight() {
            return false;
        }
        call.set(Call::IN_FLIGHT, false);
        call.set_last(class);
        // Three kinds of answer, not two: a non-retryable failure (a 404, INVALID_ARGUMENT) is
        // neither a success nor a failure for the token buckets (see `AttemptOutcome`).
        let outcome = match (class, cause) {
            (_, Some(c)) => AttemptOutcome::Failed(c),
            (Class::Success, None) => AttemptOutcome::Answered,
            (_, None) => AttemptOutcome::Rejected,
        };
        self.budget.record(now, call.take_paid(), outcome);
        if let Some(b) = &self.breaker
            && let Some(p) = call.take_permit()
        {
            let draw = self.rng(call).next_f64();
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
        } else if call.attempts() >= self.cfg.max_attempts || call.role() == Role::FailFast {
            Some(GiveUpReason::AttemptsExhausted)
        } else if !call.has(Call::REPLAYABLE) {
            Some(GiveUpReason::NotReplayable)
        } else if !call.has(Call::SAFE_TO_RETRY)
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
        let prev_wait = call.prev_wait();
        // One rebuild of the stream for both draws (the backoff's, the hint's spread).
        let mut rng = self.rng(call);
        let mut wait = self.cfg.backoff.delay(retry_no, throttled, prev_wait, &mut rng);
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
            Some(w) => {
                call.paid = w.cost();
                call.set(Call::PAID, true);
            }
            None => {
                return Decision::GiveUp(self.give_up(call, now, GiveUpReason::BudgetExhausted));
            }
        }
        // `wait` is at most `max_wait` (1 h at most), so its nanoseconds fit 64 bits exactly.
        call.prev_wait = wait.as_nanos() as u64;
        Decision::Retry { after: wait }
    }

    /// The retry the last [`after_attempt`](Self::after_attempt) allowed cannot be sent after
    /// all: the request is gone (its body said it could be replayed, then could not). Ends the
    /// call with [`GiveUpReason::NotReplayable`], giving the retry's budget withdrawal back, and
    /// returns the give-up to report. A call that is not waiting for a retry (finished, or an
    /// attempt in flight) is left as it is and gets [`GiveUpReason::AttemptsExhausted`].
    pub fn cancel_retry(&self, call: &mut Call, now: Instant) -> GiveUp {
        if call.is_finished() || call.in_flight() {
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
        if call.in_flight() {
            call.set(Call::IN_FLIGHT, false);
            self.budget.record(now, call.take_paid(), AttemptOutcome::Abandoned);
            if let Some(b) = &self.breaker
                && let Some(p) = call.take_permit()
            {
                b.release(p);
            }
        }
        self.finish(call, now, Err(GiveUpReason::Abandoned));
    }
}

#[cfg(test)]
mod tests;
