//! The life of a request: edge call → attempts (jobs) → service → downstream call → answer.
//!
//! Every retry decision is the real policy's (`before_attempt`, `after_attempt`, `abandon`);
//! this file only moves requests between queues and schedules what the policy answered.

use seawall::classify::{Class, Transient};
use seawall::deadline::Deadline;
use seawall::hint::Hint;
use seawall::policy::{Decision, GiveUp, GiveUpReason, RequestInfo};
use seawall::rng::Rng;
use seawall::time::Instant;

use super::queue::Kind;
use super::slab::Id;
use super::{CallRec, JobRec, JobState, Parent, Sim, ns, second};

impl Sim<'_> {
    fn instant(&self) -> Instant {
        Instant::from_nanos(self.now)
    }

    /// A new logical request at the edge (`refreshes` > 0 when a user tries again by hand).
    pub(super) fn edge_request(&mut self, refreshes: u32) {
        self.stats.edge_request(self.now);
        let deadline = self.now + ns(self.sc.edge.deadline_ms);
        let d = Deadline::at(Instant::from_nanos(deadline));
        let state = self.layers[0].start(self.instant(), RequestInfo::idempotent(), Some(d));
        let parent = Parent::Edge { second: second(self.now), deadline, refreshes };
        let id = self.calls.insert(CallRec { layer: 0, parent, state, job: None, attempt: 0 });
        self.send(id);
    }

    /// Asks the call's policy for the next attempt and sends it.
    pub(super) fn send(&mut self, call: Id) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        let layer = c.layer as usize;
        match self.layers[layer].before_attempt(&mut c.state, now) {
            Ok(att) => {
                let deadline = if self.spec.deadline_propagation {
                    c.state.deadline().map(|d| d.instant().as_nanos())
                } else {
                    None
                };
                c.attempt = att.number();
                let job = self.jobs.insert(JobRec {
                    tier: layer as u16,
                    caller: call,
                    attempt: att.number(),
                    deadline,
                    enqueued: self.now,
                    started: 0,
                    state: JobState::Queued,
                    down: None,
                });
                c.job = Some(job);
                if let Some(t) = att.timeout() {
                    let kind = Kind::Timeout { call, attempt: att.number() };
                    let t = t.as_nanos() as u64;
                    // The per-try timeout recurs, and so does the whole edge deadline (a first
                    // attempt at the edge); a timeout cut short by a deadline is arbitrary.
                    if Some(t) == self.per_try[layer] || t == ns(self.sc.edge.deadline_ms) {
                        self.cal.push_after(self.now, t, kind);
                    } else {
                        self.cal.push(self.now + t, kind);
                    }
                }
                self.arrive(job);
            }
            Err(g) => self.finish_call(call, Err(g)),
        }
    }

    /// The answer a server gives when it refuses work.
    fn refusal(&self) -> Class {
        if self.spec.pushback {
            Class::Overloaded
        } else {
            Class::Retryable(Transient::ServerError)
        }
    }

    /// An attempt reaches its tier: fail, start, queue or shed it.
    fn arrive(&mut self, job: Id) {
        let Some(j) = self.jobs.get(job) else { return };
        let (tier, retry) = (j.tier as usize, j.attempt > 1);
        self.stats.attempt(tier, self.now);
        let s = &mut self.servers[tier];
        s.note_arrival(self.now);
        if s.failing(self.now) {
            return self.respond(job, Class::Retryable(Transient::ServerError));
        }
        if s.queued == 0 && s.busy < s.capacity(self.now) {
            return self.start_service(job);
        }
        let protect = self.spec.server_protection;
        if s.queued >= s.queue_limit || (protect && retry && s.queued >= s.shed_threshold()) {
            self.stats.shed(self.now);
            // A protected server sheds retries with "overloaded; don't retry" (rule 5).
            let class = if protect { Class::Overloaded } else { self.refusal() };
            return self.respond(job, class);
        }
        if protect && retry {
            s.retries.push_back(job)
        } else {
            s.firsts.push_back(job)
        }
        s.queued += 1;
    }

    fn start_service(&mut self, job: Id) {
        let Some(j) = self.jobs.get_mut(job) else { return };
        let tier = j.tier as usize;
        j.state = JobState::Serving;
        j.started = self.now;
        let s = &mut self.servers[tier];
        s.busy += 1;
        let d = s.service_ns(self.now, &mut self.service);
        if d == 0 {
            self.finish_service(job);
        } else {
            self.cal.push(self.now + d, Kind::ServiceDone(job));
        }
    }

    /// Starts queued work while workers are free; drops doomed work on protected servers.
    pub(super) fn dispatch(&mut self, tier: usize) {
        loop {
            let s = &mut self.servers[tier];
            if s.queued == 0 || s.busy >= s.capacity(self.now) {
                return;
            }
            let Some(id) = s.firsts.pop_front().or_else(|| s.retries.pop_front()) else { return };
            let Some(j) = self.jobs.get(id) else { continue }; // cancelled while queued
            s.queued -= 1;
            if self.spec.server_protection && j.deadline.is_some_and(|d| d <= self.now) {
                self.stats.shed(self.now);
                self.respond(id, Class::Overloaded);
                continue;
            }
            self.start_service(id);
        }
    }

    /// Local service is done: answer (bottom tier) or call the next tier.
    pub(super) fn finish_service(&mut self, job: Id) {
        let Some(j) = self.jobs.get(job) else { return };
        let (tier, deadline, spent) = (j.tier as usize, j.deadline, self.now - j.started);
        self.servers[tier].busy -= 1;
        self.stats.busy_ns += spent as f64;
        if spent > 0 && self.orphaned(job) {
            self.stats.wasted_ns += spent as f64;
        }
        if tier + 1 == self.servers.len() {
            return self.respond(job, Class::Success);
        }
        let layer = tier + 1;
        let d = deadline.map(|t| Deadline::at(Instant::from_nanos(t)));
        let state = self.layers[layer].start(self.instant(), RequestInfo::idempotent(), d);
        let rec =
            CallRec { layer: layer as u16, parent: Parent::Job(job), state, job: None, attempt: 0 };
        let call = self.calls.insert(rec);
        if let Some(j) = self.jobs.get_mut(job) {
            j.state = JobState::Downstream;
            j.down = Some(call);
        }
        self.send(call);
    }

    /// Whether nobody waits for this job any more, at any tier above.
    fn orphaned(&self, mut job: Id) -> bool {
        loop {
            let Some(j) = self.jobs.get(job) else { return true };
            let Some(c) = self.calls.get(j.caller) else { return true };
            if c.job != Some(job) {
                return true;
            }
            match c.parent {
                Parent::Edge { .. } => return false,
                Parent::Job(p) => job = p,
            }
        }
    }

    /// The job ends with `class`; its caller hears it if it still waits for this attempt.
    fn respond(&mut self, job: Id, class: Class) {
        let Some(j) = self.jobs.get(job) else { return };
        let caller = j.caller;
        self.jobs.remove(job);
        match self.calls.get_mut(caller) {
            Some(c) if c.job == Some(job) => c.job = None,
            _ => return,
        }
        self.attempt_done(caller, class);
    }

    fn attempt_done(&mut self, call: Id, class: Class) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        match self.layers[c.layer as usize].after_attempt(&mut c.state, now, class, Hint::None) {
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

    pub(super) fn timeout(&mut self, call: Id, attempt: u32) {
        let Some(c) = self.calls.get_mut(call) else { return };
        if c.attempt != attempt {
            return;
        }
        let Some(job) = c.job.take() else { return };
        if self.spec.cancellation {
            self.cancel_job(job);
        }
        self.attempt_done(call, Class::Retryable(Transient::Timeout));
    }

    fn finish_call(&mut self, call: Id, result: Result<(), GiveUp>) {
        let Some(c) = self.calls.get(call) else { return };
        let parent = c.parent;
        self.calls.remove(call);
        if let Err(g) = result
            && matches!(g.reason(), GiveUpReason::BudgetExhausted | GiveUpReason::ThrottledLocally)
        {
            self.stats.refusal(self.now);
        }
        match parent {
            Parent::Edge { second, deadline, refreshes } => {
                if result.is_ok() && self.now <= deadline {
                    self.stats.good(second);
                } else if let Some(r) = self.sc.edge.refresh
                    && refreshes < r.max
                    && self.misc.next_f64() < r.probability
                {
                    self.cal
                        .push(self.now + ns(r.delay_ms), Kind::Refresh { count: refreshes + 1 });
                }
            }
            Parent::Job(job) => {
                match self.jobs.get_mut(job) {
                    Some(j) if j.down == Some(call) => j.down = None,
                    _ => return,
                }
                let class = match result {
                    Ok(()) => Class::Success,
                    Err(g) if g.reason() == GiveUpReason::NotRetryable => Class::NeverRetry,
                    Err(g) if g.is_overloaded() && self.spec.pushback => Class::Overloaded,
                    Err(_) => Class::Retryable(Transient::ServerError),
                };
                self.respond(job, class);
            }
        }
    }

    /// Cancellation: the job's caller gave up, so its work (queued, running or downstream) stops.
    fn cancel_job(&mut self, job: Id) {
        let Some(j) = self.jobs.get(job) else { return };
        let (tier, state, down, started) = (j.tier as usize, j.state, j.down, j.started);
        self.jobs.remove(job);
        match state {
            JobState::Queued => self.servers[tier].queued -= 1,
            JobState::Serving => {
                let spent = (self.now - started) as f64;
                self.stats.busy_ns += spent;
                self.stats.wasted_ns += spent;
                self.servers[tier].busy -= 1;
                self.dispatch(tier);
            }
            JobState::Downstream => {
                if let Some(call) = down {
                    self.abandon(call);
                }
            }
        }
    }

    fn abandon(&mut self, call: Id) {
        let now = self.instant();
        let Some(c) = self.calls.get_mut(call) else { return };
        self.layers[c.layer as usize].abandon(&mut c.state, now);
        let job = c.job.take();
        self.calls.remove(call);
        if let Some(j) = job {
            self.cancel_job(j);
        }
    }

    /// A restart fails everything queued or running at the tier; caches are then cold.
    pub(super) fn restart(&mut self, tier: usize) {
        let s = &mut self.servers[tier];
        let mut victims: Vec<Id> = s.firsts.drain(..).chain(s.retries.drain(..)).collect();
        s.queued = 0;
        victims.extend(self.jobs.ids().filter(|&id| {
            self.jobs
                .get(id)
                .is_some_and(|j| j.tier as usize == tier && j.state == JobState::Serving)
        }));
        for id in victims {
            if let Some(j) = self.jobs.get(id)
                && j.state == JobState::Serving
            {
                self.servers[tier].busy -= 1;
            }
            self.respond(id, Class::Retryable(Transient::Connection));
        }
    }
}
