//! Hedged calls: several copies of one call in flight, the first success wins.
//!
//! The schedule is the core's gRFC A6 [`HedgeState`], the type the tonic layer drives: the first
//! copy goes at once, the next every `hedge_delay_ms` until `hedge_max_attempts` are out, a
//! non-fatal failure sends the next one at once, a "don't retry" pushback stops new copies, and
//! every copy after the first needs the layer's token bucket above half. This file only moves
//! copies (jobs, listed from `CallRec::job` through `Sim::copies`) and cancels the losers:
//! their server work stops under `cancellation`, else it runs on orphaned (wasted work).
//!
//! A hedged layer's own `RetryPolicy` is fail-fast (one attempt, no budget of its own): it
//! starts the call (deadline, breaker) and ends it with the answer that decided it, so the give-up
//! travels upward as any other layer's.
//!
//! # The simulator's answers as A6 status codes
//!
//! The A6 schedule reads gRPC codes; the simulator's answers are the classes the HTTP client
//! reads, mapped as a gRPC server built with seawall answers:
//!
//! | answer (class, hint) | code | pushback |
//! |---|---|---|
//! | success | `OK` | — |
//! | retryable (5xx, connection, restart) | `UNAVAILABLE` (non-fatal) | `Retry-After` → its value |
//! | the copy's own timeout | `UNAVAILABLE` (non-fatal) | absent |
//! | overloaded; don't retry (the fail-fast signal) | `UNAVAILABLE` | "don't retry" (negative) |
//! | throttled (429) | `RESOURCE_EXHAUSTED` (fatal) | as the hint |
//! | never retry (4xx) | `INVALID_ARGUMENT` (fatal) | — |
//!
//! So non-fatal failures and "don't retry" pushbacks cost a token, as for retries, and a success
//! gives `tokenRatio` back.

use seawall::budget::GrpcThrottle;
use seawall::classify::{Class, Transient};
use seawall::grpc::{Code, HedgeState, HedgeVerdict, HedgingConfig, Pushback};
use seawall::hint::Hint;
use seawall::policy::Decision;

use super::queue::Kind;
use super::slab::Id;
use super::{CallRec, Sim};

/// A hedged client layer: its A6 policy and each instance's token bucket.
#[derive(Debug)]
pub(super) struct Hedging {
    pub(super) policy: HedgingConfig,
    /// One per instance; `None` under `budget = "none"`.
    pub(super) throttles: Vec<Option<GrpcThrottle>>,
    /// What the layer's hedges did (over all its instances), for the report.
    pub(super) counts: Counts,
}

/// A hedged layer's counters (a hedge is a copy after the first): see
/// [`seawall_report::Hedging`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    pub(super) sent: u64,
    pub(super) won: u64,
    pub(super) cancelled: u64,
    pub(super) refused: u64,
}

impl Hedging {
    fn counts(hedging: &mut [Option<Hedging>], layer: u16) -> Option<&mut Counts> {
        hedging.get_mut(usize::from(layer))?.as_mut().map(|h| &mut h.counts)
    }
}

/// An answer as the A6 schedule reads it (the table in the module docs).
fn a6(class: Class, hint: Hint) -> (Code, Pushback) {
    let pushback = match hint {
        Hint::None => Pushback::Absent,
        Hint::After(d) => Pushback::After(d),
        Hint::DontRetry => Pushback::DontRetry,
    };
    match class {
        Class::Success => (Code::OK, Pushback::Absent),
        Class::Retryable(_) => (Code::UNAVAILABLE, pushback),
        Class::Overloaded => (Code::UNAVAILABLE, Pushback::DontRetry),
        Class::Throttled => (Code::RESOURCE_EXHAUSTED, pushback),
        Class::NeverRetry => (Code::INVALID_ARGUMENT, Pushback::Absent),
        // A class added to the core later: fatal, as A6 treats any code not listed non-fatal.
        _ => (Code::UNKNOWN, Pushback::Absent),
    }
}

impl Sim<'_> {
    /// Whether `job` is one of `c`'s attempts in flight.
    pub(super) fn holds(&self, c: &CallRec, job: Id) -> bool {
        let mut cur = c.job;
        while let Some(j) = cur {
            if j == job {
                return true;
            }
            cur = self.copy(j);
        }
        false
    }

    /// The next older copy in flight of `job`'s hedged call (none for a job of any other call,
    /// and for a job gone: `remove_job` drops its entry).
    #[inline]
    pub(super) fn copy(&self, job: Id) -> Option<Id> {
        if self.copies.is_empty() {
            return None; // no hedged call has two copies in flight: no lookup
        }
        self.copies.get(&job).copied()
    }

    fn set_copy(&mut self, job: Id, next: Option<Id>) {
        match next {
            Some(n) => self.copies.insert(job, n),
            None => self.copies.remove(&job),
        };
    }

    /// Frees `job`'s record with its place in a list of copies.
    #[inline]
    pub(super) fn remove_job(&mut self, job: Id) {
        self.jobs.remove(job);
        if !self.copies.is_empty() {
            self.copies.remove(&job);
        }
    }

    /// Takes `job`, a live job, off its caller's attempts in flight; false if it is not there
    /// (an answer nobody waits for).
    #[inline]
    pub(super) fn unlink_copy(&mut self, call: Id, job: Id) -> bool {
        debug_assert!(self.jobs.get(job).is_some());
        let next = self.copy(job);
        let Some(c) = self.calls.get_mut(call) else { return false };
        if c.job == Some(job) {
            c.job = next;
            return true;
        }
        let mut cur = c.job;
        while let Some(j) = cur {
            if self.jobs.get(j).is_none() {
                return false;
            }
            let older = self.copy(j);
            if older == Some(job) {
                self.set_copy(j, next);
                return true;
            }
            cur = older;
        }
        false
    }

    /// The layer's A6 policy and the instance's bucket (split borrows of `self`).
    fn schedule(hedging: &[Option<Hedging>], layer: u16, inst: u16) -> Option<HedgeParts<'_>> {
        let h = hedging.get(usize::from(layer))?.as_ref()?;
        Some((&h.policy, h.throttles.get(usize::from(inst)).and_then(Option::as_ref)))
    }

    /// The first copy of `call` was just listed: start its schedule and time the next copy.
    pub(super) fn hedge_start(&mut self, call: Id) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        let Some((policy, _)) = Self::schedule(&self.hedging, c.layer, c.inst) else { return };
        let state = HedgeState::new(policy, now);
        let next = state.next_at();
        self.hedges.insert(call, state);
        if let Some(at) = next {
            self.cal.push(at.as_nanos(), Kind::Hedge(call));
        }
    }

    /// A hedge timer: send the next copy if it is due and the bucket allows it.
    pub(super) fn hedge_due(&mut self, call: Id) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        let Some((policy, throttle)) = Self::schedule(&self.hedging, c.layer, c.inst) else {
            return;
        };
        let Some(h) = self.hedges.get_mut(&call) else { return };
        let left = c.state.deadline().map(|d| d.remaining(now));
        let (sent, refused) = match left {
            Some(l) if l.is_zero() => (None, false),
            _ => {
                let due = h.next_at().is_some_and(|at| at <= now);
                let sent = h.send_due(policy, now, throttle);
                // Due, yet not sent: only the throttle says no to a due copy.
                (sent, due && sent.is_none())
            }
        };
        let next = h.next_at();
        let layer = c.layer;
        if let Some(n) = Hedging::counts(&mut self.hedging, layer) {
            n.sent += u64::from(sent.is_some());
            n.refused += u64::from(refused);
        }
        let Some(c) = self.calls.get_mut(call) else { return };
        let Some(previous) = sent else {
            if c.job.is_none() && (next.is_none() || left.is_some_and(|l| l.is_zero())) {
                let (class, hint) = c.last();
                self.hedge_end(call, class, hint);
            }
            return;
        };
        let per_try = self.per_try[usize::from(c.layer)].map(std::time::Duration::from_nanos);
        let timeout = match (per_try, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let (job, timer) = self.launch(call, previous + 1, timeout);
        if let Some(at) = next {
            self.cal.push(at.as_nanos(), Kind::Hedge(call));
        }
        self.arrive_timed(call, job, timer);
    }

    /// Copy `copy` (1 = the first) of `call` answered (it is already off the list): the first
    /// success wins; a fatal failure ends the call; a non-fatal one may send the next copy at
    /// once.
    pub(super) fn hedge_answer(&mut self, call: Id, copy: u32, class: Class, hint: Hint) {
        let now = self.instant();
        let hint = if self.spec.honour_hints { hint } else { Hint::None };
        let Some(c) = self.calls.get_mut(call) else { return };
        let Some((policy, throttle)) = Self::schedule(&self.hedging, c.layer, c.inst) else {
            return;
        };
        let Some(h) = self.hedges.get_mut(&call) else { return };
        c.set_last((class, hint));
        if class == Class::Success {
            h.on_success(throttle);
            if copy > 1
                && let Some(n) = Hedging::counts(&mut self.hedging, c.layer)
            {
                n.won += 1;
            }
            return self.hedge_end(call, class, hint);
        }
        let (code, pushback) = a6(class, hint);
        let verdict = h.on_failure(policy, code, pushback, now, throttle);
        let (next, idle) = (h.next_at(), c.job.is_none());
        match (verdict, next) {
            (HedgeVerdict::Fatal, _) | (HedgeVerdict::Continue, None) if idle => {
                self.hedge_end(call, class, hint)
            }
            (HedgeVerdict::Fatal, _) => self.hedge_end(call, class, hint),
            (HedgeVerdict::Continue, None) => {} // the copies in flight may still win
            (HedgeVerdict::Continue, Some(at)) if at <= now => self.hedge_due(call),
            (HedgeVerdict::Continue, Some(at)) => self.cal.push(at.as_nanos(), Kind::Hedge(call)),
        }
    }

    /// Copy `attempt` of `call` timed out: it is cancelled downstream under `cancellation`
    /// (else it runs on, orphaned), and counts as a non-fatal failure. False if that copy was
    /// no longer in flight (a timer that did nothing).
    pub(super) fn hedge_timeout(&mut self, call: Id, attempt: u32) -> bool {
        let Some(c) = self.calls.get(call) else { return false };
        let mut cur = c.job;
        while let Some(j) = cur {
            let Some(rec) = self.jobs.get(j) else { return false };
            if rec.attempt == attempt {
                break;
            }
            cur = self.copy(j);
        }
        let Some(job) = cur else { return false };
        self.unlink_copy(call, job);
        if self.spec.cancellation {
            self.cancel_job(job);
        }
        self.hedge_answer(call, attempt, Class::Retryable(Transient::Timeout), Hint::None);
        true
    }

    /// The call is decided by `class`: the copies still in flight lose (cancelled downstream
    /// under `cancellation`, else orphaned), and the layer's fail-fast policy ends the call.
    fn hedge_end(&mut self, call: Id, class: Class, hint: Hint) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        let mut losers = c.job.take();
        let policy = &self.layers[usize::from(c.layer)][usize::from(c.inst)];
        let result = match policy.after_attempt(&mut c.state, now, class, hint) {
            Decision::Success => Ok(()),
            Decision::GiveUp(g) => Err(g),
            // A fail-fast policy never retries; end the call all the same.
            Decision::Retry { .. } => Err(policy.cancel_retry(&mut c.state, now)),
        };
        let layer = c.layer;
        if self.spec.cancellation {
            let mut hedges = 0;
            while let Some(j) = losers {
                let Some(rec) = self.jobs.get(j) else { break };
                hedges += u64::from(rec.attempt > 1);
                losers = self.copy(j);
                self.cancel_job(j);
            }
            if let Some(n) = Hedging::counts(&mut self.hedging, layer) {
                n.cancelled += hedges;
            }
        }
        self.finish_call(call, result);
    }
}

type HedgeParts<'a> = (&'a HedgingConfig, Option<&'a GrpcThrottle>);
