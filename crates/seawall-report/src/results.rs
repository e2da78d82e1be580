//! The `results.json` format and the summary figures every run reports.
//!
//! Definitions (the same for the simulator and the lab):
//! - *goodput* is the fraction of edge requests answered successfully within their deadline;
//!   `goodput_before`, `_during` and `_after` are taken before the fault, while it lasts, and from
//!   its end to the end of the run;
//! - the *verdict* (recovered, healed late, degraded, stays down, not judged) is the one
//!   judgement of [`crate::verdict`], computed from the series by [`crate::verdict::judge`];
//! - *amplification* is attempts reaching the bottom tier per edge request in the same second;
//!   `peak_amplification` is its maximum over the fault and after it.

use serde::{Deserialize, Serialize};

use crate::verdict::{self, Verdict};

/// Where the numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `seawall simulate`: virtual time.
    Simulation,
    /// `seawall lab`: real processes on loopback.
    Lab,
}

/// The injected fault's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// What it was, in words (e.g. `"outage of db for 10 s"`).
    pub kind: String,
    /// Start, seconds from the start of the run.
    pub start_s: f64,
    /// End, seconds from the start of the run.
    pub end_s: f64,
}

/// Per-second series of one run. All vectors have the length of `t`; `tier_attempts_rps` has
/// one vector per tier, top (edge side) first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Start of each interval, seconds.
    pub t: Vec<f64>,
    /// Edge requests offered per second.
    pub edge_rps: Vec<f64>,
    /// Edge requests answered successfully within their deadline, per second.
    pub goodput_rps: Vec<f64>,
    /// Attempts reaching the bottom tier per second.
    pub bottom_attempts_rps: Vec<f64>,
    /// Attempts arriving at each tier per second, top first.
    pub tier_attempts_rps: Vec<Vec<f64>>,
    /// Age of the oldest queued request at the bottom tier at the end of each interval, seconds.
    pub queue_age_s: Vec<f64>,
    /// Retries refused by a budget or local throttling, per second (all tiers).
    pub budget_refusals_rps: Vec<f64>,
    /// Requests shed by admission control or dropped as doomed, per second (all tiers).
    pub shed_rps: Vec<f64>,
    /// Fraction of clients whose circuit breaker was open at the end of each interval.
    pub breaker_open: Vec<f64>,
}

/// One policy's run of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Policy name (`naive`, `seawall`, …).
    pub policy: String,
    /// The verdict on the run, from [`crate::verdict::judge`] on its series.
    pub verdict: Verdict,
    /// See the module docs.
    pub peak_amplification: f64,
    /// Attempts at the bottom tier per edge request over the whole run.
    pub attempts_per_call: f64,
    /// Goodput fraction before the fault (over the whole run without one).
    pub goodput_before: f64,
    /// Goodput fraction during the fault (0 without one).
    pub goodput_during: f64,
    /// Goodput fraction after the fault (0 without one).
    pub goodput_after: f64,
    /// Share of the servers' busy time spent on work whose answer nobody used: by the time it
    /// was done, its caller, or a caller above it up to the edge, had gone. Weighed by service
    /// time, not counted in requests (a storm's wasted requests are often the slow ones); the
    /// simulator sums it over every tier, the lab measures it at its dependency. Against a
    /// stack of the user's own (`seawall lab --target`), whose service times it cannot see, the
    /// lab counts requests instead: an estimate.
    pub wasted_work: f64,
    /// Events processed (simulation) or requests sent (lab).
    pub events: u64,
    /// Hedging at each client layer that hedges, top first; empty (and left out of the JSON)
    /// when none does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hedging: Vec<Hedging>,
    /// Per-second series.
    pub series: Series,
}

/// What one hedging client layer did over a run (gRFC A6 hedging: a copy of the call every
/// hedging delay until one succeeds). A *hedge* is a copy after the first; the first copy is
/// the attempt that would have been sent without hedging.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hedging {
    /// The calling side: `"edge"` or the calling tier's name.
    pub caller: String,
    /// The tier called.
    pub tier: String,
    /// Hedges sent.
    pub sent: u64,
    /// Hedges whose success decided their call (the hedge answered first).
    pub won: u64,
    /// Hedges still in flight when another copy decided the call, cancelled downstream. Without
    /// cancellation the losers run on (counted as wasted work, not here).
    pub cancelled: u64,
    /// Hedges that were due but not sent because the layer's budget (the gRPC token bucket at
    /// or below half) refused them.
    pub refused: u64,
}

/// A scenario run under one or more policies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Scenario name.
    pub scenario: String,
    /// One line on what the scenario shows.
    pub description: String,
    /// Seed of the run (same seed, same results, byte for byte).
    pub seed: u64,
    /// Simulation or lab.
    pub source: Source,
    /// Length of the run, seconds.
    pub duration_s: f64,
    /// The trigger the run is judged against: the injected fault's window, or (a simulated
    /// scenario without a fault) its traffic spike's; `None` if neither.
    pub fault: Option<Fault>,
    /// Tier names, top (edge side) first.
    pub tiers: Vec<String>,
    /// One run per policy, in the order asked.
    pub runs: Vec<Run>,
}

impl Run {
    /// A run of `policy` judged on its `series` ([`crate::verdict::judge`]): the verdict, the
    /// goodput figures, the peak amplification and the attempts per call all come from the
    /// series; `wasted_work`, `events` and `hedging` start empty for the caller to fill.
    pub fn judged(policy: impl Into<String>, series: Series, fault: Option<&Fault>) -> Run {
        let j = verdict::judge(&series, fault);
        let edge: f64 = series.edge_rps.iter().filter(|v| v.is_finite()).sum();
        let bottom: f64 = series.bottom_attempts_rps.iter().filter(|v| v.is_finite()).sum();
        Run {
            policy: policy.into(),
            verdict: j.verdict,
            peak_amplification: j.peak_amplification,
            attempts_per_call: if edge > 0.0 { bottom / edge } else { 0.0 },
            goodput_before: j.goodput_before,
            goodput_during: j.goodput_during,
            goodput_after: j.goodput_after,
            wasted_work: 0.0,
            events: 0,
            hedging: Vec::new(),
            series,
        }
    }

    /// Recovered (and only then): see [`crate::verdict`].
    pub fn recovered(&self) -> bool {
        self.verdict.is_recovered()
    }

    /// Seconds from the fault's end to recovery, for a recovered run.
    pub fn recovery_s(&self) -> Option<f64> {
        self.verdict.recovery_s()
    }

    /// The verdict in one sentence ([`verdict::words::sentence`]).
    pub fn sentence(&self) -> String {
        verdict::words::sentence(self.verdict, self.goodput_before, self.goodput_after)
    }
}

impl Results {
    /// Pretty JSON with a trailing newline: deterministic for equal results.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("results serialize");
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_deterministic() {
        let r = Results {
            scenario: "x".into(),
            description: "d".into(),
            seed: 1,
            source: Source::Simulation,
            duration_s: 8.0,
            fault: Some(Fault { kind: "outage".into(), start_s: 2.0, end_s: 4.0 }),
            tiers: vec!["app".into(), "db".into()],
            runs: vec![],
        };
        assert_eq!(r.to_json(), r.clone().to_json());
        let back: Results = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(back, r);
    }
}
