//! A tier's server side of a request: arrive, start, queue or shed; fill free workers; restart.
//!
//! A protected tier's decisions are the core `seawall::admission::Admission`'s (`offer`, `next`,
//! `finish` in `flow.rs`, `cancel`), the state machine `ShedLayer` runs, and a refusal is
//! answered as `ShedLayer` answers it ([`Rejection`]).

use seawall::admission::{Class as Attempt, Offer, Reason, Rejection, cut_by};
use seawall::classify::{Class, Transient};
use seawall::hint::Hint;
use seawall::time::Instant;

use super::queue::Kind;
use super::slab::Id;
use super::{Door, JobState, Phase, Sim};
use crate::policy::ServerSlot;

impl Sim<'_> {
    /// The answer a server gives when it refuses work.
    fn refusal(&self) -> Class {
        if self.spec.pushback {
            Class::Overloaded
        } else {
            Class::Retryable(Transient::ServerError)
        }
    }

    /// An attempt reaches its tier: fail, start, queue or shed it.
    pub(super) fn arrive(&mut self, job: Id) {
        let now = self.instant();
        let Some(j) = self.jobs.get(job) else { return };
        let (tier, attempt, deadline, server) =
            (self.tier_of(j), j.attempt, j.deadline(), j.server as usize);
        self.stats.attempt(tier, self.now);
        self.door(server, job, Door::Arrived { attempt, deadline_ns: deadline });
        let s = &mut self.servers[server];
        s.note_arrival(self.now);
        // The operator's knob, at the door before anything else, as `ShedLayer` applies it.
        if s.knob_down(self.now) && cut_by(&s.knob, &mut self.cut) {
            return self.shed(job, Reason::AdmissionCut);
        }
        if s.failing(self.now) {
            return self.respond(job, Class::Retryable(Transient::ServerError), Hint::None);
        }
        let cap = s.capacity(self.now);
        s.adm.set_ceiling(cap as usize);
        // An unprotected server neither tells retries apart nor reads deadlines.
        let (class, deadline) = if s.protected {
            (Attempt::of_attempt(attempt), deadline.map(Instant::from_nanos))
        } else {
            (Attempt::First, None)
        };
        match s.adm.offer(now, class, deadline, || job) {
            Offer::Run => self.start_service(job),
            Offer::Queued { ticket, evicted } => {
                self.door(server, job, Door::Queued);
                if let Some(j) = self.jobs.get_mut(job) {
                    j.phase = Phase::Queued(Some(ticket));
                }
                if let Some(e) = evicted {
                    self.shed(e, Reason::RetryShed);
                }
            }
            Offer::Reject(r) => self.shed(job, r),
        }
    }

    /// A protected tier refuses `job` for `reason`: the answer `ShedLayer` sends (503 + jittered
    /// `Retry-After`, or 504), read as the tower client reads it.
    fn shed(&mut self, job: Id, reason: Reason) {
        self.stats.shed(self.now);
        let server = self.jobs.get(job).map(|j| j.server as usize);
        let protected = server.is_none_or(|s| self.servers[s].protected);
        if !protected {
            // A full queue at a server without load shedding: its plain refusal.
            self.door(server.unwrap_or(0), job, Door::Refused { status: 503 });
            return self.respond(job, self.refusal(), Hint::None);
        }
        let answer = Rejection::of(reason, &self.retry_after, &mut self.shed);
        if let Some(s) = server {
            self.door(s, job, Door::Refused { status: answer.status() });
        }
        let class = self.classifier.classify(answer.status());
        self.respond(job, class, answer.hint());
    }

    fn start_service(&mut self, job: Id) {
        let Some(j) = self.jobs.get_mut(job) else { return };
        let server = j.server as usize;
        j.phase = Phase::Serving;
        j.since = self.now;
        self.door(server, job, Door::Admitted);
        let s = &mut self.servers[server];
        s.busy += 1;
        let d = s.service_ns(self.now, &mut self.service);
        if d == 0 {
            self.finish_service(job);
        } else {
            self.cal.push(self.now + d, Kind::ServiceDone(job));
        }
    }

    /// Starts queued work while workers are free; a protected tier's admission drops the
    /// doomed work it finds on the way (CoDel, expired deadlines).
    pub(super) fn dispatch(&mut self, server: usize) {
        let now = self.instant();
        loop {
            let s = &mut self.servers[server];
            let cap = s.capacity(self.now);
            s.adm.set_ceiling(cap as usize);
            let doomed = &mut self.doomed;
            let next = s.adm.next(now, |id, r| doomed.push((id, r)));
            while let Some((id, r)) = self.doomed.pop() {
                self.shed(id, r);
            }
            match next {
                Some(id) => self.start_service(id),
                None => return,
            }
        }
    }

    /// A restart fails everything queued or running at the replica (under `server_slot =
    /// "handler"`, requests waiting for their calls downstream too: they hold slots, and die
    /// with the process); caches are then cold.
    pub(super) fn restart(&mut self, server: usize) {
        let s = &mut self.servers[server];
        let mut victims: Vec<Id> = Vec::new();
        s.adm.clear(|id| victims.push(id));
        let handler = self.spec.server_slot == ServerSlot::Handler;
        victims.extend(self.jobs.ids().filter(|&id| {
            self.jobs.get(id).is_some_and(|j| {
                j.server as usize == server
                    && (j.state() == JobState::Serving
                        || handler && j.state() == JobState::Downstream)
            })
        }));
        for id in victims {
            match self.jobs.get(id).map(|j| (j.state(), j.down())) {
                Some((JobState::Serving, _)) => self.servers[server].busy -= 1,
                Some((JobState::Downstream, down)) => self.drop_calls(down),
                _ => {}
            }
            self.respond(id, Class::Retryable(Transient::Connection), Hint::None);
        }
    }
}
