//! One tier's server side: workers, its queue, the load that degrades service (arrival rate or
//! work in the system), and the faults that hit it.
//!
//! Every tier queues through the core's [`Admission`](seawall::admission::Admission), the very
//! state machine `ShedLayer` runs: cap = the tier's workers (bounded further by faults through
//! its ceiling), queue = `queue_limit`. A protected tier (`server_protection`) runs it as
//! `ShedLayer` does: CoDel and adaptive LIFO at folly's defaults, first attempts before retries,
//! expired deadlines dropped. An unprotected tier runs it as a plain FIFO
//! ([`Config::fifo`]), offered every request as a first attempt without a deadline: it refuses
//! arrivals beyond `queue_limit` and serves the rest oldest first, whether anyone still waits.

use std::num::NonZeroUsize;

use seawall::admission::{Admission, Config, GradientConfig, Limit};
use seawall::control::Control;
use seawall::rng::SeededRng;

use super::sample::Dist;
use super::slab::Id;
use crate::policy::ServerLimit;
use crate::scenario::{AdmissionCut, Degrade, FaultKind, FaultSpec, OutageMode, Tier};

const SEC: f64 = 1e9;
/// Load is counted in ten 100 ms buckets: a sliding one-second window.
const BUCKET_NS: u64 = 100_000_000;

#[derive(Debug)]
struct Window {
    kind: FaultKind,
    mode: OutageMode,
    start: u64,
    end: u64,
    dist: Option<Dist>,
    capacity: f64,
    cold: f64,
}

/// A tier's server.
#[derive(Debug)]
pub(crate) struct Server {
    /// The tier it is a replica of (an index into the scenario's tiers): a job's tier is its
    /// server's, so a job need not carry it.
    pub(crate) tier: u16,
    workers: u32,
    pub(crate) busy: u32,
    /// The tier's admission: `ShedLayer`'s discipline if `protected`, a plain FIFO if not.
    pub(crate) adm: Admission<Id>,
    /// Whether the tier sheds load as `ShedLayer` does (`server_protection`).
    pub(crate) protected: bool,
    /// The operator's admission knob (`ShedLayer::with_admission`), and when it is turned down:
    /// `(start, end, admit_percent)`. Empty unless protected.
    pub(crate) knob: Control,
    cuts: Vec<(u64, u64, u8)>,
    dist: Dist,
    degrade: Option<Degrade>,
    ring: [u32; 10],
    ring_slot: u64,
    ring_sum: u32,
    windows: Vec<Window>,
}

impl Server {
    /// Replica `replica` of tier `t` (number `tier`), with the faults that hit it.
    pub(crate) fn new(
        t: &Tier,
        tier: u16,
        replica: u32,
        faults: &[FaultSpec],
        protect: bool,
        limit: ServerLimit,
        operator: &[AdmissionCut],
    ) -> Server {
        let windows = faults
            .iter()
            .filter(|f| f.tier == t.name && f.replica.is_none_or(|r| r == replica))
            .map(|f| Window {
                kind: f.kind,
                mode: f.mode,
                start: (f.start_s * SEC) as u64,
                end: ((f.start_s + f.duration_s) * SEC) as u64,
                dist: f.p50_ms.zip(f.p99_ms).map(|(a, b)| Dist::lognormal(a, b)),
                capacity: f.capacity.unwrap_or(1.0),
                cold: f.cold_factor.unwrap_or(1.0),
            })
            .collect();
        Server {
            tier,
            workers: t.workers,
            busy: 0,
            adm: {
                let workers = NonZeroUsize::new(t.workers as usize);
                let cap = match (limit, workers) {
                    // Gradient2 from the workers down: a slot is a worker here, so more
                    // than the workers would only queue at them.
                    (ServerLimit::Gradient, Some(w)) if protect => {
                        Limit::gradient(GradientConfig {
                            initial: w.get(),
                            max: w.get(),
                            ..GradientConfig::default()
                        })
                    }
                    (ServerLimit::Gradient, None) if protect => {
                        Limit::gradient(GradientConfig::default())
                    }
                    _ => Limit::fixed(workers.unwrap_or(NonZeroUsize::MAX)),
                };
                let queue = t.queue_limit as usize;
                Admission::new(if protect {
                    Config::new(cap, queue)
                } else {
                    Config::fifo(cap, queue)
                })
            },
            protected: protect,
            knob: Control::new(),
            cuts: operator
                .iter()
                .filter(|c| protect && c.tier == t.name)
                .map(|c| {
                    let start = (c.start_s * SEC) as u64;
                    (start, start + (c.duration_s * SEC) as u64, c.admit_percent.min(100))
                })
                .collect(),
            dist: Dist::from_service(&t.service),
            degrade: t.degrade,
            ring: [0; 10],
            ring_slot: 0,
            ring_sum: 0,
            windows,
        }
    }

    /// The operator's knob at `now`, set for [`seawall::admission::cut_by`]; false if it is
    /// not turned down (no draw is then made).
    pub(crate) fn knob_down(&self, now: u64) -> bool {
        if self.cuts.is_empty() {
            return false;
        }
        let active = self.cuts.iter().filter(|(a, b, _)| *a <= now && now < *b);
        let percent = active.map(|c| c.2).min().unwrap_or(100);
        // In [0, 100] (validated and clamped), so this cannot fail.
        let _ = self.knob.set_percent(percent);
        percent < 100
    }

    /// Times at which a fault window ends (workers may free up) and restarts begin.
    pub(crate) fn boundaries(&self) -> impl Iterator<Item = (u64, bool)> + '_ {
        self.windows
            .iter()
            .map(|w| if w.kind == FaultKind::Restart { (w.start, true) } else { (w.end, false) })
    }

    fn active(&self, now: u64) -> impl Iterator<Item = &Window> {
        self.windows.iter().filter(move |w| w.start <= now && now < w.end)
    }

    /// Requests queued and in service: what a least-requests balancer compares.
    pub(crate) fn load(&self) -> u32 {
        self.waiting() + self.busy
    }

    /// Jobs waiting for a worker.
    pub(crate) fn waiting(&self) -> u32 {
        self.adm.queue_len() as u32
    }

    fn advance(&mut self, now: u64) {
        let slot = now / BUCKET_NS;
        if slot > self.ring_slot {
            for k in (self.ring_slot + 1..=slot).take(10) {
                let i = (k % 10) as usize;
                self.ring_sum -= self.ring[i];
                self.ring[i] = 0;
            }
            self.ring_slot = slot;
        }
    }

    /// Counts an arrival toward the load that degrades service (only an arrival-rate trigger
    /// needs the count).
    pub(crate) fn note_arrival(&mut self, now: u64) {
        if self.degrade.is_some_and(|d| d.above_rps.is_some()) {
            self.advance(now);
            self.ring[(self.ring_slot % 10) as usize] += 1;
            self.ring_sum += 1;
        }
    }

    /// How many requests may be in service now.
    pub(crate) fn capacity(&self, now: u64) -> u32 {
        let mut cap = if self.workers == 0 { u32::MAX } else { self.workers };
        for w in self.active(now) {
            match w.kind {
                FaultKind::Outage if w.mode == OutageMode::Hold => cap = 0,
                FaultKind::Capacity if self.workers == 0 && w.capacity <= 0.0 => cap = 0,
                FaultKind::Capacity if self.workers > 0 => {
                    cap = cap.min((f64::from(self.workers) * w.capacity).floor() as u32);
                }
                _ => {}
            }
        }
        cap
    }

    /// Whether requests fail at once (an outage in `fail` mode).
    pub(crate) fn failing(&self, now: u64) -> bool {
        self.active(now).any(|w| w.kind == FaultKind::Outage && w.mode == OutageMode::Fail)
    }

    /// A service time for a request starting now, in nanoseconds.
    pub(crate) fn service_ns(&mut self, now: u64, rng: &mut SeededRng) -> u64 {
        let mut dist = self.dist;
        let mut factor = 1.0;
        for w in self.active(now) {
            match w.kind {
                FaultKind::Latency => dist = w.dist.unwrap_or(dist),
                FaultKind::Restart => factor *= w.cold,
                _ => {}
            }
        }
        if let Some(d) = self.degrade {
            factor *= self.load_factor(&d, now);
        }
        (dist.sample(rng) * factor) as u64
    }

    /// The degrade slowdown for a request starting now (which `busy` already counts).
    fn load_factor(&mut self, d: &Degrade, now: u64) -> f64 {
        if let Some(rps) = d.above_rps {
            self.advance(now);
            return if f64::from(self.ring_sum) > rps { d.factor } else { 1.0 };
        }
        let Some(above) = d.above_in_system else { return 1.0 };
        let n = self.waiting() + self.busy;
        match d.full_in_system {
            None if n > above => d.factor,
            None => 1.0,
            Some(full) => {
                let over = (f64::from(n) - f64::from(above)) / f64::from(full - above);
                1.0 + (d.factor - 1.0) * over.clamp(0.0, 1.0)
            }
        }
    }
}
