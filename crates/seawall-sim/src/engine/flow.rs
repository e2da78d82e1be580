//! The life of a request: edge call → attempts (jobs) → service → downstream call → answer.
//!
//! Every retry decision is the real policy's (`before_attempt`, `after_attempt`, `abandon`), and
//! every admission decision at a protected tier is the real `seawall::admission` state machine's
//! (`offer`, `next`, `finish`, `cancel`; see `tier.rs`), the one `ShedLayer` runs; this file moves requests
//! between them and schedules what they answered. A server's answer reaches the client policy as
//! the tower client layers read it: a shed request's 503 through the HTTP classifier with its
//! jittered `Retry-After` as the hint, a fail-fast tier's "overloaded; don't retry" as
//! [`Class::Overloaded`] with [`Hint::DontRetry`].

use seawall::classify::{Class, Transient};
use seawall::deadline::Deadline;
use seawall::hint::Hint;
use seawall::policy::{
    Decision, GiveUp, GiveUpReason, LastAttempt, RequestInfo, Upstream, upstream,
};
use seawall::rng::{Rng, SeededRng};
use seawall::time::Instant;

use super::queue::{Held, Kind};
use super::slab::Id;
use super::{CallRec, Door, JobRec, JobState, NO_DEADLINE, Parent, Phase, Sim, ns, second};
use crate::policy::ServerSlot;
use crate::scenario::FanOut;

/// One of `n` instances, uniformly (no draw when there is one, so single-instance runs keep
/// their random streams).
fn pick(n: u16, rng: &mut SeededRng) -> u16 {
    if n > 1 { (rng.next_u64() % u64::from(n)) as u16 } else { 0 }
}

impl Sim<'_> {
    pub(super) fn instant(&self) -> Instant {
        Instant::from_nanos(self.now)
    }

    /// A new logical request at the edge (`refreshes` > 0 when a user tries again by hand).
    pub(super) fn edge_request(&mut self, refreshes: u32) {
        self.stats.edge_request(self.now);
        let deadline = self.now + ns(self.sc.edge.deadline_ms);
        let d = Deadline::at(Instant::from_nanos(deadline));
        let inst = pick(self.edge_instances, &mut self.lb);
        let state =
            self.layers[0][inst as usize].start(self.instant(), RequestInfo::idempotent(), Some(d));
        let parent = Parent::Edge { refreshes };
        let id = self.calls.insert(CallRec::new(0, inst, parent, state));
        self.send(id);
    }

    /// Asks the call's policy for the next attempt and sends it.
    pub(super) fn send(&mut self, call: Id) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        let layer = c.layer as usize;
        match self.layers[layer][c.inst as usize].before_attempt(&mut c.state, now) {
            Ok(att) => {
                let (job, timer) = self.launch(call, att.number(), att.timeout());
                if att.number() == 1 && self.hedging[layer].is_some() {
                    self.hedge_start(call);
                }
                self.arrive_timed(call, job, timer);
            }
            Err(g) => self.finish_call(call, Err(g)),
        }
    }

    /// Makes attempt `number` of `call` a job at the next tier's server (listed as the call's
    /// newest attempt in flight, before any older copies) and holds its timer in the calendar's
    /// order; the caller sends both with `arrive_timed`.
    pub(super) fn launch(
        &mut self,
        call: Id,
        number: u32,
        timeout: Option<std::time::Duration>,
    ) -> (Id, Option<Held>) {
        let c = self.calls.get(call).expect("a call being sent exists");
        let layer = c.layer as usize;
        let deadline = if self.spec.deadline_propagation {
            c.state.deadline().map(|d| d.instant().as_nanos())
        } else {
            None
        };
        let copy = c.job;
        debug_assert!(copy.is_none() || !self.handed_on(c.layer), "only hedged calls have copies");
        // The instance of the tier that serves this attempt (its client makes the downstream
        // call): drawn apart from the server in a pool, the server's own with per-instance
        // servers.
        let tier = self.links[layer].callee;
        let (served_by, server) = if self.replicas[usize::from(tier)].per_instance {
            let r = &mut self.replicas[usize::from(tier)];
            let server = r.pick(&self.servers, &mut self.lb);
            (server - r.first, server)
        } else {
            let served_by = pick(self.instances[usize::from(tier)], &mut self.lb);
            (served_by, self.replicas[usize::from(tier)].pick(&self.servers, &mut self.lb))
        };
        let job = self.jobs.insert(JobRec {
            inst: served_by,
            server,
            caller: call,
            attempt: number,
            deadline_ns: deadline.unwrap_or(NO_DEADLINE),
            since: self.now,
            phase: Phase::Queued(None),
        });
        if let Some(older) = copy {
            self.copies.insert(job, older);
        }
        if let Some(c) = self.calls.get_mut(call) {
            c.job = Some(job);
        }
        let timer = timeout.map(|t| {
            // An attempt number is at most `MAX_ATTEMPTS` (10) or a hedged copy's, at most 5.
            let attempt = u8::try_from(number).expect("attempt numbers fit in 8 bits");
            let kind = Kind::Timeout { call, attempt };
            let t = t.as_nanos() as u64;
            // The per-try timeout recurs, and so does the whole edge deadline (a first
            // attempt at the edge); a timeout cut short by a deadline is arbitrary.
            if Some(t) == self.per_try[layer] || t == ns(self.sc.edge.deadline_ms) {
                self.cal.hold_after(self.now, t, kind)
            } else {
                self.cal.hold(self.now + t, kind)
            }
        });
        (job, timer)
    }

    /// Sends `job` to its server, then schedules its attempt's timer (held at `launch`, so in
    /// the same place) unless the server has already answered: an attempt shed or failed at
    /// once has no timer to fire, which in a synchronised herd is millions of pending timers
    /// fewer. A job gone after `arrive` was answered or cancelled, and off its
    /// call's list either way, so its timer would have found nothing in flight. At a tier that
    /// only forwards, the job is gone either way (`forward`): the attempt is in flight while
    /// `call` lists the call that stands for it.
    pub(super) fn arrive_timed(&mut self, call: Id, job: Id, timer: Option<Held>) {
        self.arrive(job);
        let Some(t) = timer else { return };
        let in_flight = match self.calls.get(call) {
            Some(c) if self.handed_on(c.layer) => c.job.is_some(),
            _ => self.jobs.get(job).is_some(),
        };
        if in_flight {
            self.cal.schedule(t);
        }
    }

    /// Local service is done: answer (bottom tier) or call the next tier.
    pub(super) fn finish_service(&mut self, job: Id) {
        let Some(j) = self.jobs.get(job) else { return };
        let (tier, deadline, spent) = (self.tier_of(j), j.deadline(), self.now - j.since);
        let (inst, server) = (j.inst, j.server as usize);
        let s = &mut self.servers[server];
        s.busy -= 1;
        // The worker is the slot. Under `server_slot = "service"` it is free once local work is
        // done (downstream calls wait without one); under "handler" a request that calls
        // downstream keeps it until it answers (`release_slot`), as `ShedLayer` holds its slot
        // around the whole handler. The time it was held teaches an adaptive limit.
        let calls_down = self.first_call[tier].is_some() && !self.forwarding[tier];
        let held = calls_down && self.spec.server_slot == ServerSlot::Handler;
        if !held {
            s.adm.finish(Some(std::time::Duration::from_nanos(spent)));
            self.door(server, job, Door::Finished);
        }
        self.stats.busy_ns += spent as f64;
        if spent > 0 && self.orphaned(job) {
            self.stats.wasted_ns += spent as f64;
        }
        // Optimistic concurrency: a success within the window before this one wins the race.
        if let Some((window, last)) = &mut self.contention[tier] {
            if last.is_some_and(|t| self.now - t < *window) {
                if held {
                    self.servers[server].adm.finish(None);
                    self.door(server, job, Door::Finished);
                }
                return self.respond(job, Class::Retryable(Transient::ServerError), Hint::None);
            }
            *last = Some(self.now);
        }
        let Some(first) = self.first_call[tier] else {
            return self.respond(job, Class::Success, Hint::None);
        };
        if self.forwarding[tier] {
            return self.forward(job, first, inst, deadline);
        }
        if let Some(j) = self.jobs.get_mut(job) {
            j.phase = Phase::Downstream(None);
        }
        if self.sc.tiers[tier].fan_out == FanOut::Sequence {
            return self.call_dependency(job, first, inst, deadline);
        }
        // All at once: the calls are listed on the job before any is sent, since one may end
        // (and cancel the rest) while the next is being sent.
        let mut layer = Some(first);
        let mut calls = Vec::new();
        while let Some(l) = layer {
            calls.push(self.new_call(Parent::Job(job), l, inst, deadline));
            layer = self.links[usize::from(l)].next;
        }
        for pair in calls.windows(2) {
            if self.calls.get(pair[0]).is_some() {
                self.set_sibling(pair[0], Some(pair[1]));
            }
        }
        if let Some(j) = self.jobs.get_mut(job) {
            j.set_down(calls.first().copied());
        }
        for call in calls {
            self.send(call); // a call already cancelled by a sibling's failure is gone: no-op
        }
    }

    /// The call `parent` makes through client layer `layer` (instance `inst`), not yet sent.
    fn new_call(&mut self, parent: Parent, layer: u16, inst: u16, deadline: Option<u64>) -> Id {
        let d = deadline.map(|t| Deadline::at(Instant::from_nanos(t)));
        let policy = &self.layers[usize::from(layer)][usize::from(inst)];
        let state = policy.start(self.instant(), RequestInfo::idempotent(), d);
        self.calls.insert(CallRec::new(layer, inst, parent, state))
    }

    /// `job`, at a tier that only forwards (`Sim::only_forwards`), makes its one call downstream
    /// through `layer`, and the call takes the job's place: the job's caller lists the call as
    /// its attempt in flight, and the call answers that caller when it ends (`Parent::Attempt`).
    fn forward(&mut self, job: Id, layer: u16, inst: u16, deadline: Option<u64>) {
        let caller = self.jobs.get(job).expect("a job being served exists").caller;
        self.remove_job(job);
        let call = self.new_call(Parent::Attempt(caller), layer, inst, deadline);
        // The job was made and served in this event, so its caller still lists it.
        let c = self.calls.get_mut(caller).expect("a forwarded attempt's caller exists");
        debug_assert_eq!(c.job, Some(job));
        c.job = Some(call);
        self.send(call);
    }

    /// Makes `job`'s call through `layer` its one call downstream, and sends it.
    fn call_dependency(&mut self, job: Id, layer: u16, inst: u16, deadline: Option<u64>) {
        let call = self.new_call(Parent::Job(job), layer, inst, deadline);
        if let Some(j) = self.jobs.get_mut(job) {
            j.set_down(Some(call));
        }
        self.send(call);
    }

    /// Takes `call` (with `sibling`, its successor) off `job`'s list of calls downstream;
    /// false if it is not there (an answer nobody waits for).
    fn unlink(&mut self, job: Id, call: Id, sibling: Option<Id>) -> bool {
        let Some(j) = self.jobs.get_mut(job) else { return false };
        if j.down() == Some(call) {
            j.set_down(sibling);
            return true;
        }
        let mut cur = j.down();
        while let Some(c) = cur {
            if self.calls.get(c).is_none() {
                return false;
            }
            let next = self.sibling(c);
            if next == Some(call) {
                self.set_sibling(c, sibling);
                return true;
            }
            cur = next;
        }
        false
    }

    /// The call after `call` in its job's list of calls in flight at once.
    fn sibling(&self, call: Id) -> Option<Id> {
        if self.siblings.is_empty() {
            return None; // no parallel fan-out in flight: no lookup
        }
        self.siblings.get(&call).copied()
    }

    fn set_sibling(&mut self, call: Id, next: Option<Id>) {
        match next {
            Some(n) => self.siblings.insert(call, n),
            None => self.siblings.remove(&call),
        };
    }

    /// Whether `call` is a hedged call past its first copy (it has an A6 schedule).
    pub(super) fn is_hedged(&self, call: Id) -> bool {
        !self.hedges.is_empty() && self.hedges.contains_key(&call)
    }

    /// Frees `call`'s record with what lives beside it.
    fn remove_call(&mut self, call: Id) {
        self.calls.remove(call);
        if !self.siblings.is_empty() {
            self.siblings.remove(&call);
        }
        if !self.hedges.is_empty() {
            self.hedges.remove(&call);
        }
    }

    /// Whether nobody waits for this job any more, at any tier above.
    fn orphaned(&self, mut job: Id) -> bool {
        loop {
            let Some(j) = self.jobs.get(job) else { return true };
            let Some(mut c) = self.calls.get(j.caller) else { return true };
            if !self.holds(c, job) {
                return true;
            }
            let mut call = j.caller;
            loop {
                match c.parent() {
                    Parent::Edge { .. } => return false,
                    Parent::Job(p) => {
                        job = p;
                        break;
                    }
                    // `call` stands for an attempt of `up`: `up` must still list it.
                    Parent::Attempt(up) => {
                        let Some(u) = self.calls.get(up) else { return true };
                        if u.job != Some(call) {
                            return true;
                        }
                        (call, c) = (up, u);
                    }
                }
            }
        }
    }

    /// The job ends with `class` and `hint`; its caller hears it if it still waits for this
    /// attempt.
    pub(super) fn respond(&mut self, job: Id, class: Class, hint: Hint) {
        let Some(j) = self.jobs.get(job) else { return };
        let (caller, copy, state, server) = (j.caller, j.attempt, j.state(), j.server as usize);
        let held = self.holds_slot(job);
        if self.door_log.is_some() {
            if let Some((server, _)) = held {
                self.door(server, job, Door::Finished);
            }
            if matches!(state, JobState::Serving | JobState::Downstream) {
                self.door(server, job, Door::Answered);
            }
        }
        if !self.unlink_copy(caller, job) {
            self.remove_job(job);
            return self.release_slot(held, class == Class::Success);
        }
        self.remove_job(job);
        self.release_slot(held, class == Class::Success);
        if self.is_hedged(caller) {
            return self.hedge_answer(caller, copy, class, hint);
        }
        self.attempt_done(caller, class, hint);
    }

    /// Whether `job` holds its tier's slot while it waits for its calls downstream
    /// (`server_slot = "handler"`): its server and when it took the slot, if so.
    fn holds_slot(&self, job: Id) -> Option<(usize, u64)> {
        let j = self.jobs.get(job)?;
        (self.spec.server_slot == ServerSlot::Handler && j.state() == JobState::Downstream)
            .then_some((j.server as usize, j.since))
    }

    /// A request that held its slot across its calls downstream ends: the slot goes to the next
    /// in the queue, and the whole handler's time teaches an adaptive limit if it succeeded (as
    /// `ShedLayer` samples the inner service's latency).
    fn release_slot(&mut self, held: Option<(usize, u64)>, ok: bool) {
        let Some((server, since)) = held else { return };
        let rtt = ok.then(|| std::time::Duration::from_nanos(self.now - since));
        self.servers[server].adm.finish(rtt);
        self.dispatch(server);
    }

    /// The attempt of `caller` that `call` stood for (at a tier that only forwards) ends with
    /// `class` and `hint`, as `respond` ends a job's: `caller` hears it if it still waits for it.
    fn forwarded_done(&mut self, caller: Id, call: Id, class: Class, hint: Hint) {
        let Some(c) = self.calls.get_mut(caller) else { return };
        if c.job != Some(call) {
            return;
        }
        c.job = None;
        self.attempt_done(caller, class, hint);
    }

    fn attempt_done(&mut self, call: Id, class: Class, hint: Hint) {
        let now = self.instant();
        let hint = if self.spec.honour_hints { hint } else { Hint::None };
        let Some(c) = self.calls.get_mut(call) else { return };
        c.set_last((class, hint));
        match self.layers[c.layer as usize][c.inst as usize].after_attempt(
            &mut c.state,
            now,
            class,
            hint,
        ) {
            Decision::Success => self.finish_call(call, Ok(())),
            Decision::Retry { after } => {
                let after = after.as_nanos() as u64;
                if self.fixed_waits {
                    self.cal.push_after(self.now, after, Kind::Retry(call));
                } else {
                    self.cal.push(self.now + after, Kind::Retry(call));
                }
            }
            Decision::GiveUp(g) => self.finish_call(call, Err(g)),
        }
    }

    /// Attempt `attempt` of `call` timed out; false if it was no longer in flight (answered,
    /// or its call gone), a timer that did nothing.
    pub(super) fn timeout(&mut self, call: Id, attempt: u32) -> bool {
        if self.is_hedged(call) {
            return self.hedge_timeout(call, attempt);
        }
        let Some(c) = self.calls.get_mut(call) else { return false };
        // Not hedged: the policy's count of attempts names the one in flight.
        if c.state.attempts() != attempt {
            return false;
        }
        let (Some(job), layer) = (c.job.take(), c.layer) else { return false };
        if self.spec.cancellation {
            self.cancel_attempt(layer, job);
        }
        self.attempt_done(call, Class::Retryable(Transient::Timeout), Hint::None);
        true
    }

    pub(super) fn finish_call(&mut self, call: Id, result: Result<(), GiveUp>) {
        let Some(c) = self.calls.get(call) else { return };
        let (parent, last, layer, inst) = (c.parent(), c.last(), c.layer, c.inst);
        let deadline = c.state.deadline();
        let sibling = self.sibling(call);
        self.remove_call(call);
        if let Err(g) = result
            && matches!(g.reason(), GiveUpReason::BudgetExhausted | GiveUpReason::ThrottledLocally)
        {
            self.stats.refusal(self.now);
        }
        match parent {
            Parent::Edge { refreshes } => {
                // An edge call always has its deadline, set when it arrived (`edge_request`).
                let deadline = deadline.map(|d| d.instant().as_nanos());
                if result.is_ok()
                    && let Some(d) = deadline
                    && self.now <= d
                {
                    let arrived = d.saturating_sub(ns(self.sc.edge.deadline_ms));
                    self.stats.good(second(arrived));
                } else if let Some(r) = self.sc.edge.refresh
                    && refreshes < r.max
                    && self.misc.next_f64() < r.probability
                {
                    self.cal
                        .push(self.now + ns(r.delay_ms), Kind::Refresh { count: refreshes + 1 });
                }
            }
            Parent::Job(job) => {
                if !self.unlink(job, call, sibling) {
                    return;
                }
                let Some(j) = self.jobs.get_mut(job) else { return };
                if result.is_ok() {
                    if let Some(next) = self.links[usize::from(layer)].next
                        && let tier = self.servers[usize::from(j.server)].tier // `tier_of`
                        && self.sc.tiers[usize::from(tier)].fan_out == FanOut::Sequence
                    {
                        let deadline = j.deadline();
                        return self.call_dependency(job, next, inst, deadline);
                    }
                    if j.down().is_some() {
                        return; // a parallel fan-out's other calls are still in flight
                    }
                } else {
                    // `try_join`: the first failure drops the other calls in flight.
                    let mut rest = j.down();
                    j.set_down(None);
                    while let Some(c) = rest {
                        rest = self.calls.get(c).and_then(|_| self.sibling(c));
                        self.drop_call(c);
                    }
                }
                let (class, hint) = self.upward(result, last);
                self.respond(job, class, hint);
            }
            // A tier that only forwards makes one call and no other work: its answer is the
            // job's (no next dependency, no siblings).
            Parent::Attempt(caller) => {
                let (class, hint) = self.upward(result, last);
                self.forwarded_done(caller, call, class, hint);
            }
        }
    }

    /// What a layer answers upward for a call that ended with `result` after `last`: the
    /// core's rule ([`seawall::policy::upstream`]), rendered as the tower client reads the
    /// tower layers' answers — "overloaded; don't retry" as a 503 with a negative pushback, the
    /// last answer as it is (a shed 503 keeps its Retry-After), a timed-out attempt as a 504
    /// (a server error to the classifier). A layer without pushback (`pushback = false`)
    /// answers every failure as a plain server error.
    fn upward(&self, result: Result<(), GiveUp>, last: (Class, Hint)) -> (Class, Hint) {
        let failed = (Class::Retryable(Transient::ServerError), Hint::None);
        let last_attempt = match last.0 {
            Class::Retryable(Transient::Timeout) => LastAttempt::TimedOut,
            _ => LastAttempt::Answered,
        };
        match upstream(result, last_attempt) {
            Upstream::Success => (Class::Success, Hint::None),
            // The caller's own answer (a 404) is no failure of the layer's, pushback or not.
            Upstream::Last if last.0 == Class::NeverRetry => (Class::NeverRetry, Hint::None),
            _ if !self.spec.pushback => failed,
            Upstream::DontRetry => (Class::Overloaded, Hint::DontRetry),
            Upstream::Last => last,
            Upstream::TimedOut => failed,
        }
    }

    /// Cancellation: the job's caller gave up, so its work (queued, running or downstream) stops.
    pub(super) fn cancel_job(&mut self, job: Id) {
        let Some(j) = self.jobs.get(job) else { return };
        let (server, state, down, started) = (j.server as usize, j.state(), j.down(), j.since);
        let ticket = j.ticket();
        let held = self.holds_slot(job);
        self.door(server, job, Door::Cancelled);
        self.remove_job(job);
        let s = &mut self.servers[server];
        match state {
            JobState::Queued => {
                if let Some(t) = ticket {
                    s.adm.cancel(t);
                }
            }
            JobState::Serving => {
                let spent = (self.now - started) as f64;
                self.stats.busy_ns += spent;
                self.stats.wasted_ns += spent;
                s.busy -= 1;
                s.adm.finish(None);
                self.dispatch(server);
            }
            JobState::Downstream => {
                self.drop_calls(down);
                self.release_slot(held, false);
            }
        }
    }

    /// Abandons a job's calls downstream, `first` and its siblings (the job is going away).
    pub(super) fn drop_calls(&mut self, first: Option<Id>) {
        let mut rest = first;
        while let Some(call) = rest {
            rest = self.calls.get(call).and_then(|_| self.sibling(call));
            self.abandon(call);
        }
    }

    /// The caller no longer waits for `call` (a sibling failed): its policy state ends, and its
    /// attempt in flight is cancelled downstream only under `cancellation` (otherwise it runs
    /// on, orphaned: wasted work).
    fn drop_call(&mut self, call: Id) {
        if self.spec.cancellation {
            return self.abandon(call);
        }
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        self.layers[c.layer as usize][c.inst as usize].abandon(&mut c.state, now);
        self.remove_call(call);
    }

    fn abandon(&mut self, call: Id) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        self.layers[c.layer as usize][c.inst as usize].abandon(&mut c.state, now);
        let (mut job, layer) = (c.job.take(), c.layer);
        self.remove_call(call);
        if self.handed_on(layer) {
            // The call standing for its one attempt (a forwarding tier's callers do not hedge).
            if let Some(a) = job {
                self.abandon(a);
            }
            return;
        }
        // Every copy of a hedged call; the one attempt of any other.
        while let Some(j) = job {
            job = self.copy(j);
            self.cancel_job(j);
        }
    }

    /// Cancels `att`, the attempt in flight of a call at `layer` (off its list already): a
    /// job, or at a callee that only forwards the call standing for it, which ends with its
    /// own attempts as the job's cancellation would have ended it.
    fn cancel_attempt(&mut self, layer: u16, att: Id) {
        if self.handed_on(layer) {
            self.abandon(att);
        } else {
            self.cancel_job(att);
        }
    }
}
