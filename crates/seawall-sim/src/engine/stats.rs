//! Per-second counters of one run, turned into the report's [`Series`] at the end.

use seawall_report::Series;

/// Counters indexed by whole simulated seconds; events after the last second are ignored.
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) edge: Vec<f64>,
    pub(crate) goodput: Vec<f64>,
    pub(crate) tier_attempts: Vec<Vec<f64>>,
    pub(crate) queue_age: Vec<f64>,
    pub(crate) refusals: Vec<f64>,
    pub(crate) shed: Vec<f64>,
    /// Service time spent, nanoseconds.
    pub(crate) busy_ns: f64,
    /// Service time spent on requests whose caller had gone, nanoseconds.
    pub(crate) wasted_ns: f64,
}

/// Index of the second containing `t` nanoseconds.
pub(crate) fn second(t: u64) -> usize {
    (t / 1_000_000_000) as usize
}

fn bump(v: &mut [f64], t: u64) {
    if let Some(x) = v.get_mut(second(t)) {
        *x += 1.0;
    }
}

impl Stats {
    pub(crate) fn new(secs: usize, tiers: usize) -> Stats {
        Stats {
            edge: vec![0.0; secs],
            goodput: vec![0.0; secs],
            tier_attempts: vec![vec![0.0; secs]; tiers],
            queue_age: vec![0.0; secs],
            refusals: vec![0.0; secs],
            shed: vec![0.0; secs],
            busy_ns: 0.0,
            wasted_ns: 0.0,
        }
    }

    pub(crate) fn edge_request(&mut self, t: u64) {
        bump(&mut self.edge, t);
    }

    /// A success, counted in the second its edge request arrived.
    pub(crate) fn good(&mut self, arrival_second: usize) {
        if let Some(x) = self.goodput.get_mut(arrival_second) {
            *x += 1.0;
        }
    }

    pub(crate) fn attempt(&mut self, tier: usize, t: u64) {
        bump(&mut self.tier_attempts[tier], t);
    }

    pub(crate) fn refusal(&mut self, t: u64) {
        bump(&mut self.refusals, t);
    }

    pub(crate) fn shed(&mut self, t: u64) {
        bump(&mut self.shed, t);
    }

    pub(crate) fn into_series(self) -> Series {
        let n = self.edge.len();
        Series {
            t: (0..n).map(|i| i as f64).collect(),
            bottom_attempts_rps: self.tier_attempts.last().cloned().unwrap_or_default(),
            edge_rps: self.edge,
            goodput_rps: self.goodput,
            tier_attempts_rps: self.tier_attempts,
            queue_age_s: self.queue_age,
            budget_refusals_rps: self.refusals,
            shed_rps: self.shed,
            breaker_open: vec![0.0; n],
        }
    }
}
