//! The discrete-event engine: virtual time in nanoseconds, one calendar, and the tiers.
//!
//! A logical call at a client layer is a [`CallRec`] holding the real `seawall` policy state; each
//! attempt it sends becomes a [`JobRec`] at the next tier's server. At a tier that only forwards
//! (a load balancer, see `Sim::only_forwards`) the job lasts only while it is served, which takes
//! no time: the one call it makes downstream then stands for the attempt. Layer 0 is the edge
//! client (a person or a mobile app) calling tier 0; layer `k` is tier `k-1` calling tier `k`. Ids
//! are generational, so an event for something already finished is simply ignored.

mod door;
mod flow;
mod hedge;
mod queue;
mod sample;
mod server;
mod slab;
mod stats;
mod tier;

use seawall::admission::{Reason, RetryAfter, Ticket};
use seawall::budget::AnyBudget;
use seawall::classify::{Class, HttpClassifier, Transient};
use seawall::grpc::HedgeState;
use seawall::hint::Hint;
use seawall::policy::{Call, RetryPolicy};
use seawall::rng::{Rng, SeededRng, splitmix64};
use std::collections::HashMap;

use crate::error::Error;
use crate::policy::PolicySpec;
use crate::scenario::{Arrivals, BackoffKind, Balance, Scenario, Servers};
use door::DoorLog;
pub use door::{Door, DoorEvent};
use queue::{Calendar, Kind};
use server::Server;
use slab::{Id, Slab};
use stats::Stats;

pub(crate) use stats::second;

const SEC: u64 = 1_000_000_000;

fn ns(ms: f64) -> u64 {
    (ms * 1e6) as u64
}

/// Who waits for a call's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    /// The edge: a user's request (`refreshes` > 0 when the user tried again by hand). Its
    /// deadline is the call's own, `Call::deadline`, set when it arrived, so the second it
    /// arrived in is not kept.
    Edge { refreshes: u32 },
    /// A job at the tier above, which made this call while serving.
    Job(Id),
    /// An attempt of this call at a tier that only forwards: the attempt's whole work is this
    /// call, which stands for it, so no `JobRec` is kept for it (see `Sim::only_forwards`).
    Attempt(Id),
}

/// Which [`Parent`] a call has; with `CallRec::parent_word`, the parent in 9 B that sit in
/// room the record has anyway (a three-variant `Parent` would take 12 B, padding the record by
/// 8: 80 MB in a 5 M-client herd's 10 M calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParentTag {
    Edge,
    Job,
    Attempt,
}

#[derive(Debug)]
struct CallRec {
    layer: u16,
    /// Which instance of the layer holds the call's policy state.
    inst: u16,
    /// The class of the last attempt's answer (see `last`), beside the 16-bit fields rather
    /// than padded to 8 B in a tuple with the hint.
    last_class: Class,
    parent_tag: ParentTag,
    /// The parent's payload: the refreshes of an edge call, an id's bits ([`Id::to_bits`])
    /// for the others (see [`CallRec::parent`]).
    parent_word: u64,
    state: Call,
    /// The attempt in flight; for a hedged call, the newest of its copies in flight, the
    /// others listed through `Sim::copies`. At a callee that only forwards, the call standing
    /// for the attempt (`Parent::Attempt`), not a job. (A hedged call's schedule and a
    /// parallel fan-out's list live beside the slab, in `Sim::hedges` and `Sim::siblings`:
    /// most calls have neither, and a 5 M-client herd holds 10 M calls at once.)
    job: Option<Id>,
    /// The hint of the last attempt's answer, in 8 B (see [`PackedHint`]).
    last_hint: PackedHint,
}

impl CallRec {
    /// A call not yet sent.
    fn new(layer: u16, inst: u16, parent: Parent, state: Call) -> CallRec {
        let (last_class, last_hint) = NO_ANSWER;
        let (parent_tag, parent_word) = match parent {
            Parent::Edge { refreshes } => (ParentTag::Edge, u64::from(refreshes)),
            Parent::Job(job) => (ParentTag::Job, job.to_bits()),
            Parent::Attempt(call) => (ParentTag::Attempt, call.to_bits()),
        };
        CallRec {
            layer,
            inst,
            last_class,
            parent_tag,
            parent_word,
            state,
            job: None,
            last_hint: PackedHint::of(last_hint),
        }
    }

    /// Who waits for the call's result.
    fn parent(&self) -> Parent {
        match self.parent_tag {
            ParentTag::Edge => Parent::Edge { refreshes: self.parent_word as u32 },
            ParentTag::Job => Parent::Job(Id::from_bits(self.parent_word)),
            ParentTag::Attempt => Parent::Attempt(Id::from_bits(self.parent_word)),
        }
    }

    /// What the last attempt's server answered: a fail-fast layer that gives up without the
    /// overload signal passes that answer up as it is (with its `Retry-After`).
    fn last(&self) -> (Class, Hint) {
        (self.last_class, self.last_hint.hint())
    }

    fn set_last(&mut self, (class, hint): (Class, Hint)) {
        self.last_class = class;
        self.last_hint = PackedHint::of(hint);
    }
}

/// A [`Hint`] in 8 B instead of 16: a wait in nanoseconds, the two greatest values standing for
/// "no hint" and "don't retry". A wait of 584 years or more is kept as just under that, which no
/// server's `Retry-After` in a simulation reaches (the shedder draws seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PackedHint(u64);

impl PackedHint {
    const NONE: u64 = u64::MAX;
    const DONT_RETRY: u64 = u64::MAX - 1;

    fn of(hint: Hint) -> PackedHint {
        PackedHint(match hint {
            Hint::None => Self::NONE,
            Hint::DontRetry => Self::DONT_RETRY,
            Hint::After(d) => u64::try_from(d.as_nanos())
                .map_or(Self::DONT_RETRY - 1, |n| n.min(Self::DONT_RETRY - 1)),
        })
    }

    fn hint(self) -> Hint {
        match self.0 {
            Self::NONE => Hint::None,
            Self::DONT_RETRY => Hint::DontRetry,
            n => Hint::After(std::time::Duration::from_nanos(n)),
        }
    }
}

/// A call's last answer before it made an attempt.
const NO_ANSWER: (Class, Hint) = (Class::Retryable(Transient::ServerError), Hint::None);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
    Queued,
    Serving,
    Downstream,
}

/// Where a job is, with what only that phase needs: one 16 B field instead of a state byte, an
/// `Option<Ticket>` and an `Option<Id>` side by side (25 B, padded to 32).
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a worker; at a protected tier, its place in the admission queue.
    Queued(Option<Ticket>),
    Serving,
    /// Its local work is done: the calls it made downstream in flight, one in a sequence, a
    /// list (through `CallRec::sibling`) in a parallel fan-out.
    Downstream(Option<Id>),
}

/// `JobRec::deadline` when the attempt carries none (no deadline propagation).
const NO_DEADLINE: u64 = u64::MAX;

/// One attempt at a tier's server. Its tier is its server's (`Sim::tier_of`): not kept here,
/// which brings the record from 56 to 48 B.
#[derive(Debug)]
struct JobRec {
    /// Which instance of the tier serves it (its client makes the downstream call).
    inst: u16,
    /// The server (a replica of the tier, an index into `Sim::servers`) it went to.
    server: u16,
    attempt: u32,
    caller: Id,
    /// The propagated deadline in nanoseconds, [`NO_DEADLINE`] for none (see `deadline()`).
    deadline_ns: u64,
    /// When it was queued while queued, when its service started while serving (each phase
    /// needs only its own).
    since: u64,
    phase: Phase,
}

impl JobRec {
    fn deadline(&self) -> Option<u64> {
        (self.deadline_ns != NO_DEADLINE).then_some(self.deadline_ns)
    }

    fn state(&self) -> JobState {
        match self.phase {
            Phase::Queued(_) => JobState::Queued,
            Phase::Serving => JobState::Serving,
            Phase::Downstream(_) => JobState::Downstream,
        }
    }

    /// The job's calls in flight downstream (the first of a fan-out's list).
    fn down(&self) -> Option<Id> {
        match self.phase {
            Phase::Downstream(d) => d,
            _ => None,
        }
    }

    fn set_down(&mut self, down: Option<Id>) {
        debug_assert_eq!(self.state(), JobState::Downstream);
        self.phase = Phase::Downstream(down);
    }

    /// Its place in a protected tier's queue while queued there.
    fn ticket(&self) -> Option<Ticket> {
        match self.phase {
            Phase::Queued(t) => t,
            _ => None,
        }
    }
}

/// What the engine measured besides the series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineStats {
    /// Events that did something: popped from the calendar and still meant for something in
    /// flight. The timer of an attempt already answered, the service end of a job cancelled
    /// and the backoff of a call abandoned are not counted, so the count is the model's, not
    /// the calendar's: an engine that never schedules such timers counts the same.
    pub events: u64,
    /// Events popped from the calendar, stale ones included: the engine's work.
    pub popped: u64,
    /// Most calls in flight at once (slots ever allocated).
    pub peak_calls: usize,
    /// Most attempts in flight at once.
    pub peak_jobs: usize,
}

/// One run of a scenario under one policy.
#[derive(Debug)]
pub(crate) struct Sim<'a> {
    sc: &'a Scenario,
    spec: &'a PolicySpec,
    now: u64,
    cal: Calendar,
    calls: Slab<CallRec>,
    jobs: Slab<JobRec>,
    /// Every tier's replicas, tier after tier (`replicas[t]` says where a tier's are).
    servers: Vec<Server>,
    /// Each tier's replicas in `servers`, and its balancer's state.
    replicas: Vec<Replicas>,
    /// Each client layer's instances, each a whole policy (budget, breaker, jitter stream).
    layers: Vec<Vec<RetryPolicy<AnyBudget>>>,
    /// Each hedged layer's A6 policy and its instances' token buckets (`None`: no hedging).
    hedging: Vec<Option<hedge::Hedging>>,
    /// Each hedged call's gRFC A6 schedule (the core's), from its first copy until the call
    /// ends. Only looked up, never iterated, so its order cannot reach the results.
    hedges: HashMap<Id, HedgeState>,
    /// The next of a job's calls in flight at once (a parallel fan-out's list), per call.
    siblings: HashMap<Id, Id>,
    /// The next older copy in flight of the same hedged call, per job (the list starts at
    /// `CallRec::job`); only hedged calls have more than one attempt in flight.
    copies: HashMap<Id, Id>,
    /// Clients of each herd still to arrive, counting the one its pending arrival brings.
    herd_left: Vec<u64>,
    /// Instances of the edge client, for the draw that spreads edge requests.
    edge_instances: u16,
    /// Instances per tier, for the draw that spreads the requests it serves.
    instances: Vec<u16>,
    /// What each client layer connects: caller, callee, the caller's next dependency.
    links: Vec<Link>,
    /// Each tier's first client layer (its first dependency), `None` for a tier that calls
    /// nothing.
    first_call: Vec<Option<u16>>,
    /// Which instance serves a request (its own stream: runs with one instance never draw).
    lb: SeededRng,
    arrivals: SeededRng,
    service: SeededRng,
    misc: SeededRng,
    /// The protected servers' `Retry-After` draws.
    shed: SeededRng,
    /// The operator knob's draws (its own stream: runs without a cut never draw).
    cut: SeededRng,
    /// The `Retry-After` range a protected server draws from (`ShedLayer`'s default).
    retry_after: RetryAfter,
    /// How a client reads a server's refusal (the tower client's classifier).
    classifier: HttpClassifier,
    /// Queued jobs an admission found doomed while filling slots (reused, never shrunk).
    doomed: Vec<(Id, Reason)>,
    stats: Stats,
    max_rate: f64,
    arrivals_end: u64,
    end: u64,
    /// Events that did something and events popped (see [`EngineStats`]).
    events: u64,
    popped: u64,
    /// Each layer's per-try timeout in nanoseconds (timers with it go to a calendar lane).
    per_try: Vec<Option<u64>>,
    /// Each tier's contention window in nanoseconds (`None`: no contention) and the time of
    /// its last success.
    contention: Vec<Option<(u64, Option<u64>)>>,
    /// Every layer's backoff waits repeat exactly (no jitter), so retry timers go to calendar
    /// lanes.
    fixed_waits: bool,
    /// Per tier: it only forwards, so an attempt there is handed on as the one call it makes
    /// downstream (see [`Sim::only_forwards`]).
    forwarding: Vec<bool>,
    /// One server's door, recorded (`door_trace`); `None` in every ordinary run.
    door_log: Option<DoorLog>,
}

impl<'a> Sim<'a> {
    /// Builds the tiers and one real policy per client layer (with that layer's own client
    /// settings, if the policy has any; `Scenario::parse` checked them). The same seed gives every policy
    /// the same arrivals and service draws (common random numbers), so differences between
    /// policies are the policies'.
    pub(crate) fn new(sc: &'a Scenario, spec: &'a PolicySpec, seed: u64) -> Result<Self, Error> {
        let n = sc.tiers.len();
        // The client layers: the edge's call of tier 0, then each tier's calls in order. In a
        // chain, layer k is tier k-1 calling tier k.
        let mut links = vec![Link { caller: None, callee: 0, next: None }];
        let mut first_call = Vec::with_capacity(n);
        for t in 0..n {
            let calls = sc.calls_of(t);
            first_call.push((!calls.is_empty()).then_some(links.len() as u16));
            for (k, &callee) in calls.iter().enumerate() {
                let next = (k + 1 < calls.len()).then(|| (links.len() + 1) as u16);
                links.push(Link { caller: Some(t as u16), callee: callee as u16, next });
            }
        }
        // Under `single_owner`, a layer owns retries when it retries and no layer above it on
        // any path into its tier does (so attempts never multiply along a path).
        let mut retried_above = vec![false; n];
        retried_above[0] = sc.edge.retries;
        for t in 0..n {
            let below = retried_above[t] || sc.tiers[t].retries;
            for c in sc.calls_of(t) {
                retried_above[c] |= below;
            }
        }
        let mut layers = Vec::with_capacity(links.len());
        let mut hedging = Vec::with_capacity(links.len());
        let mut fixed_waits = true;
        for (layer, link) in links.iter().enumerate() {
            let (retries, timeout, client, field, count, owner) = match link.caller {
                None => {
                    let e = &sc.edge;
                    let client = spec.edge_client.as_ref();
                    (e.retries, e.timeout_ms, client, "edge".into(), e.instances, e.retries)
                }
                Some(t) => {
                    let (t, above) = (&sc.tiers[usize::from(t)], retried_above[usize::from(t)]);
                    let field = format!("tier.{}", t.name);
                    let client = spec.tier_clients.get(&t.name);
                    (t.retries, t.timeout_ms, client, field, t.instances, t.retries && !above)
                }
            };
            let field = format!("policies.{}.{field}", spec.name);
            let (lspec, timeout) = spec.for_client(client, timeout, &field)?;
            fixed_waits &= matches!(lspec.backoff, BackoffKind::None | BackoffKind::Constant);
            let layer_seed = splitmix64(seed ^ splitmix64(0x5EA_0000 + layer as u64));
            // Instance 0 keeps the layer's seed (a one-instance run is the run it always was);
            // the others get streams of their own.
            let count = count.clamp(1, u32::from(u16::MAX));
            let instances = (0..count)
                .map(|i| {
                    let s = if i == 0 {
                        layer_seed
                    } else {
                        splitmix64(layer_seed ^ splitmix64(u64::from(i)))
                    };
                    lspec.build(retries, owner, timeout, s)
                })
                .collect::<Result<Vec<_>, _>>()?;
            hedging.push(match lspec.hedging(&field)? {
                Some(policy) if lspec.hedges(retries, owner) => {
                    let throttles = (0..count).map(|_| lspec.hedge_throttle()).collect();
                    Some(hedge::Hedging { policy, throttles, counts: hedge::Counts::default() })
                }
                _ => None,
            });
            layers.push(instances);
        }
        let forwarding =
            (0..n).map(|t| Self::only_forwards(sc, spec, &links, &hedging, t)).collect();
        let instances = sc.tiers.iter().map(|t| t.instances.clamp(1, 65_535) as u16).collect();
        let secs = sc.duration_s.ceil() as usize;
        let arrivals_end = (sc.duration_s * 1e9) as u64;
        Ok(Sim {
            sc,
            spec,
            now: 0,
            cal: Calendar::default(),
            calls: Slab::new(),
            jobs: Slab::new(),
            servers: sc
                .tiers
                .iter()
                .enumerate()
                .flat_map(|(i, t)| {
                    (0..t.server_count()).map(move |r| {
                        Server::new(
                            t,
                            i as u16,
                            r,
                            &sc.faults,
                            spec.server_protection,
                            spec.server_limit,
                            &sc.operator,
                        )
                    })
                })
                .collect(),
            replicas: Replicas::of(sc),
            arrivals: SeededRng::new(splitmix64(seed ^ 0xA)),
            service: SeededRng::new(splitmix64(seed ^ 0xB)),
            misc: SeededRng::new(splitmix64(seed ^ 0xC)),
            shed: SeededRng::new(splitmix64(seed ^ 0xD)),
            lb: SeededRng::new(splitmix64(seed ^ 0xE)),
            cut: SeededRng::new(splitmix64(seed ^ 0xF)),
            herd_left: vec![0; sc.edge.herd.len()],
            edge_instances: sc.edge.instances.clamp(1, 65_535) as u16,
            instances,
            links,
            first_call,
            retry_after: RetryAfter::default(),
            classifier: HttpClassifier::default(),
            doomed: Vec::new(),
            stats: Stats::new(secs, n),
            max_rate: sample::max_rate(&sc.edge),
            arrivals_end,
            // Drain: every edge request has ended by its deadline.
            end: arrivals_end + ns(sc.edge.deadline_ms),
            events: 0,
            popped: 0,
            per_try: layers
                .iter()
                .map(|p| p[0].config().per_try_timeout().map(|t| t.as_nanos() as u64))
                .collect(),
            fixed_waits,
            forwarding,
            layers,
            hedging,
            hedges: HashMap::new(),
            siblings: HashMap::new(),
            copies: HashMap::new(),
            contention: sc
                .tiers
                .iter()
                .map(|t| t.contention_window_ms.map(|w| (ns(w), None)))
                .collect(),
            door_log: None,
        })
    }

    /// Whether tier `t` only forwards: every attempt it gets is served at once (unlimited
    /// workers, no service time, no admission control, no contention, no fault) and its whole
    /// work is one call to its one dependency, from callers that do not hedge. Such an attempt
    /// needs no record of its own once it has made that call: the call stands for it
    /// (`Parent::Attempt`), and its caller lists the call as its attempt in flight. A load
    /// balancer is such a tier; in a synchronised 5 M-client herd that is 5 M records of 56 B
    /// fewer. Everything before the call is made (the arrival, the server's counts,
    /// the service that takes no time) happens as at any tier, in the same event.
    fn only_forwards(
        sc: &Scenario,
        spec: &PolicySpec,
        links: &[Link],
        hedging: &[Option<hedge::Hedging>],
        t: usize,
    ) -> bool {
        let tier = &sc.tiers[t];
        let timed = tier.service.mean_ms > 0.0
            || (tier.service.p50_ms.is_some() && tier.service.p99_ms.is_some());
        let hedged_callers =
            links.iter().zip(hedging).any(|(l, h)| usize::from(l.callee) == t && h.is_some());
        tier.workers == 0
            && !timed
            && !spec.server_protection
            && tier.contention_window_ms.is_none()
            && !sc.faults.iter().any(|f| f.tier == tier.name)
            && sc.calls_of(t).len() == 1
            && !hedged_callers
    }

    /// Whether `layer`'s attempts are handed on: its callee only forwards, so its calls list
    /// the call standing for an attempt, not a job, as their attempt in flight.
    fn handed_on(&self, layer: u16) -> bool {
        self.forwarding[usize::from(self.links[usize::from(layer)].callee)]
    }

    fn schedule_start(&mut self) {
        if self.max_rate > 0.0 {
            let first = match self.sc.edge.arrivals {
                Arrivals::Poisson => sample::exp(&mut self.arrivals, 1e9 / self.max_rate) as u64,
                Arrivals::Uniform => 0,
            };
            self.cal.push(first, Kind::Arrival);
        }
        for (i, h) in self.sc.edge.herd.iter().enumerate() {
            if h.clients > 0 {
                self.herd_left[i] = h.clients;
                self.cal.push((h.at_s * 1e9) as u64, Kind::Herd(i as u32));
            }
        }
        for s in 1..=self.stats.edge.len() as u64 {
            self.cal.push_in_order(s * SEC, Kind::Tick);
        }
        for (t, s) in self.servers.iter().enumerate() {
            for (at, restart) in s.boundaries() {
                let kind = if restart { Kind::Restart(t as u16) } else { Kind::Kick(t as u16) };
                self.cal.push(at, kind);
            }
        }
    }

    /// Runs to the end; `progress` gets the fraction of simulated time done, once a second.
    pub(crate) fn run(mut self, progress: &mut dyn FnMut(f64)) -> Outcome {
        self.schedule_start();
        while let Some((at, kind)) = self.cal.pop() {
            if at > self.end {
                break;
            }
            self.now = at;
            self.popped += 1;
            self.events += u64::from(self.handle(kind, progress));
        }
        let wasted =
            if self.stats.busy_ns > 0.0 { self.stats.wasted_ns / self.stats.busy_ns } else { 0.0 };
        let es = EngineStats {
            events: self.events,
            popped: self.popped,
            peak_calls: self.calls.capacity(),
            peak_jobs: self.jobs.capacity(),
        };
        let hedging = self.hedge_counts();
        let door = self.door_log.take().map(|l| l.events).unwrap_or_default();
        Outcome { series: self.stats.into_series(), wasted, stats: es, hedging, door }
    }

    /// Each hedged layer's counters, named by its caller and callee.
    fn hedge_counts(&self) -> Vec<seawall_report::Hedging> {
        let name = |t: u16| self.sc.tiers[usize::from(t)].name.clone();
        self.hedging
            .iter()
            .zip(&self.links)
            .filter_map(|(h, link)| {
                let n = h.as_ref()?.counts;
                Some(seawall_report::Hedging {
                    caller: link.caller.map_or_else(|| "edge".to_string(), name),
                    tier: name(link.callee),
                    sent: n.sent,
                    won: n.won,
                    cancelled: n.cancelled,
                    refused: n.refused,
                })
            })
            .collect()
    }

    /// Handles one event; false if it was stale (see [`EngineStats::events`]).
    fn handle(&mut self, kind: Kind, progress: &mut dyn FnMut(f64)) -> bool {
        match kind {
            Kind::Arrival => {
                let t = self.now as f64 / 1e9;
                let rate = sample::rate_at(&self.sc.edge, t);
                let gap = match self.sc.edge.arrivals {
                    // Thinning: candidates at the peak rate, each kept with rate / peak.
                    Arrivals::Poisson => {
                        if self.arrivals.next_f64() < rate / self.max_rate {
                            self.edge_request(0);
                        }
                        sample::exp(&mut self.arrivals, 1e9 / self.max_rate)
                    }
                    // One gap at the rate in force now; while the rate is 0, look again a
                    // peak-rate gap later.
                    Arrivals::Uniform if rate > 0.0 => {
                        self.edge_request(0);
                        1e9 / rate
                    }
                    Arrivals::Uniform => 1e9 / self.max_rate,
                };
                let next = self.now + gap as u64;
                if next < self.arrivals_end {
                    self.cal.push(next, Kind::Arrival);
                }
                true
            }
            Kind::Herd(n) => {
                self.edge_request(0);
                let left = self.herd_left[n as usize];
                if left > 1 {
                    self.herd_left[n as usize] = left - 1;
                    let h = &self.sc.edge.herd[n as usize];
                    let spread = self.spec.herd_spread_s.unwrap_or(h.spread_s);
                    let end = ((h.at_s + spread) * 1e9) as u64;
                    // The next of `left` sorted uniform points on [now, end].
                    let x = 1.0 - (1.0 - self.arrivals.next_f64()).powf(1.0 / left as f64);
                    let next = self.now + (end.saturating_sub(self.now) as f64 * x) as u64;
                    let kind = Kind::Herd(n);
                    if next == self.now {
                        self.cal.push_after(self.now, 0, kind);
                    } else {
                        self.cal.push(next, kind);
                    }
                }
                true
            }
            Kind::Refresh { count } => {
                self.edge_request(count);
                true
            }
            Kind::ServiceDone(job) => {
                let Some(j) = self.jobs.get(job) else { return false };
                let server = j.server as usize;
                self.finish_service(job);
                self.dispatch(server);
                true
            }
            Kind::Timeout { call, attempt } => self.timeout(call, u32::from(attempt)),
            Kind::Retry(call) | Kind::Hedge(call) if self.calls.get(call).is_none() => false,
            Kind::Retry(call) => {
                self.send(call);
                true
            }
            Kind::Hedge(call) => {
                self.hedge_due(call);
                true
            }
            Kind::Kick(server) => {
                self.dispatch(server as usize);
                true
            }
            Kind::Restart(server) => {
                self.restart(server as usize);
                true
            }
            Kind::Tick => {
                let s = second(self.now) - 1;
                self.stats.queue_age[s] = self.tier_queue_age(self.replicas.len() - 1);
                progress((s + 1) as f64 / self.stats.edge.len() as f64);
                true
            }
        }
    }

    /// The tier `job` is an attempt at: its server's.
    fn tier_of(&self, job: &JobRec) -> usize {
        usize::from(self.servers[usize::from(job.server)].tier)
    }

    fn queue_age(&mut self, server: usize) -> f64 {
        let now = seawall::time::Instant::from_nanos(self.now);
        self.servers[server].adm.oldest_age(now).as_secs_f64()
    }

    /// The oldest queued request's age over a tier's replicas, seconds.
    fn tier_queue_age(&mut self, tier: usize) -> f64 {
        let Replicas { first, count, .. } = self.replicas[tier];
        (first..first + count).map(|s| self.queue_age(s as usize)).fold(0.0, f64::max)
    }
}

/// A client layer: who calls whom.
#[derive(Debug, Clone, Copy)]
struct Link {
    /// The calling tier (`None`: the edge).
    caller: Option<u16>,
    /// The tier called.
    callee: u16,
    /// The caller's next dependency (the layer to call after this one, in a sequence).
    next: Option<u16>,
}

/// A tier's replicas in `Sim::servers` and its load balancer.
#[derive(Debug, Clone, Copy)]
struct Replicas {
    first: u16,
    count: u16,
    balance: Balance,
    /// The next replica in turn (round robin).
    next: u16,
    /// `servers = "per-instance"`: replica `k` is instance `k`, so the balancer's pick also
    /// names the instance that serves the request.
    per_instance: bool,
}

impl Replicas {
    fn of(sc: &Scenario) -> Vec<Replicas> {
        let mut first = 0;
        sc.tiers
            .iter()
            .map(|t| {
                let count = t.server_count() as u16;
                let per_instance = t.servers == Servers::PerInstance;
                let r = Replicas { first, count, balance: t.balance, next: 0, per_instance };
                first += count;
                r
            })
            .collect()
    }

    /// The server an attempt goes to. One replica: no draw (a one-replica run keeps its random
    /// streams).
    fn pick(&mut self, servers: &[Server], rng: &mut SeededRng) -> u16 {
        let n = self.count;
        if n <= 1 {
            return self.first;
        }
        let draw = |rng: &mut SeededRng, below: u16| (rng.next_u64() % u64::from(below)) as u16;
        let k = match self.balance {
            Balance::RoundRobin => {
                let k = self.next;
                self.next = (k + 1) % n;
                k
            }
            Balance::Random => draw(rng, n),
            Balance::LeastRequests => {
                // Two distinct replicas; the less loaded wins, the first drawn on a tie.
                let a = draw(rng, n);
                let b = (a + 1 + draw(rng, n - 1)) % n;
                let load = |k: u16| servers[usize::from(self.first + k)].load();
                if load(b) < load(a) { b } else { a }
            }
        };
        self.first + k
    }
}

/// What one run measured.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) series: seawall_report::Series,
    /// The wasted-work fraction.
    pub(crate) wasted: f64,
    pub(crate) stats: EngineStats,
    /// Each hedged layer's counters (empty when no layer hedges).
    pub(crate) hedging: Vec<seawall_report::Hedging>,
    /// The recorded door's events (empty unless one was recorded).
    pub(crate) door: Vec<DoorEvent>,
}

/// Runs `spec` on `sc` and returns the record of the door of `tier`'s first replica.
pub(crate) fn door_trace(
    sc: &Scenario,
    spec: &PolicySpec,
    seed: u64,
    tier: usize,
) -> Result<Vec<DoorEvent>, Error> {
    let mut sim = Sim::new(sc, spec, seed)?;
    let server = sim.servers.iter().position(|s| usize::from(s.tier) == tier).unwrap_or(0);
    sim.door_log = Some(DoorLog { server, events: Vec::new() });
    Ok(sim.run(&mut |_| {}).door)
}

/// Runs `spec` on `sc` and returns what it measured.
pub(crate) fn run(
    sc: &Scenario,
    spec: &PolicySpec,
    seed: u64,
    progress: &mut dyn FnMut(f64),
) -> Result<Outcome, Error> {
    Ok(Sim::new(sc, spec, seed)?.run(progress))
}

#[cfg(test)]
mod size_tests {
    use super::*;
    use std::mem::size_of;

    /// Memory per call in flight. The 5 M-client synchronised reconnect herd (10 M calls in
    /// flight at once, client and load balancer) must run in 1.5 GB: ≤ 150 B per call in
    /// flight, counting the call, its attempt and their calendar entries. These bounds are
    /// today's sizes, so a field that grows a record fails here and the budget is spent on
    /// purpose, not by accident. `Call` is the core's per-call state (seawall::policy), plain
    /// fields at 72 B; the simulator's own records are where the herd is made cheap.
    #[test]
    fn records_stay_within_their_budget() {
        assert_eq!(size_of::<Option<Id>>(), 8);
        assert!(size_of::<Call>() <= 72, "seawall::policy::Call grew");
        assert!(size_of::<Class>() + size_of::<ParentTag>() <= 4, "no room beside layer, inst");
        assert_eq!(size_of::<Phase>(), 16);
        assert_eq!(size_of::<PackedHint>(), 8);
        assert!(size_of::<CallRec>() <= 104, "CallRec grew to {} B", size_of::<CallRec>());
        assert!(size_of::<JobRec>() <= 48, "JobRec grew to {} B", size_of::<JobRec>());
    }

    #[test]
    fn a_packed_hint_gives_back_what_it_was_given() {
        use std::time::Duration;
        for h in [
            Hint::None,
            Hint::DontRetry,
            Hint::After(Duration::ZERO),
            Hint::After(Duration::from_nanos(1)),
            Hint::After(Duration::new(7, 123_456_789)),
            Hint::After(Duration::from_nanos(u64::MAX - 2)),
        ] {
            assert_eq!(PackedHint::of(h).hint(), h);
        }
        // Beyond what 8 B hold: the longest wait it can keep, never "no hint" or "don't retry".
        let longest = Hint::After(Duration::from_nanos(u64::MAX - 2));
        assert_eq!(PackedHint::of(Hint::After(Duration::MAX)).hint(), longest);
        assert_eq!(PackedHint::of(Hint::After(Duration::from_nanos(u64::MAX))).hint(), longest);
    }
}
