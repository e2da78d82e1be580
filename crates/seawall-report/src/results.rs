//! The `results.json` format and the summary figures every run reports.
//!
//! Definitions (the same for the simulator and the lab):
//! - *goodput* is the fraction of edge requests answered successfully within their deadline;
//!   `goodput_before`, `_during` and `_after` are taken before the fault, while it lasts, and from
//!   its end to the end of the run;
//! - *recovered* means both of: goodput per second returned to ≥ 90 % of its pre-fault level and
//!   stayed there to the end of the run (`recovery_s` counts from the fault's end to the first
//!   second of that healthy stretch), **and** `goodput_after` ≥ half of `goodput_before`, so most
//!   of the requests offered after the fault were answered as well as before. The two figures
//!   therefore cannot disagree: a run that reads "recovered" answered most of its post-fault
//!   requests, and one that failed most of them reads "did not recover" however quickly the
//!   per-second rate came back. Why both: seconds and requests are different weights. A herd of
//!   5 M reconnects refused within one second is one bad second but 94 % of the requests after
//!   the fault; a per-second rule alone called that run "recovered in 1.0 s". The verdict is
//!   about the run as simulated: a system that heals only late in a short after-window (most of
//!   its post-fault requests lost) reads "did not recover" until the run is long enough
//!   ([`Summary::healthy_from_s`] tells that case apart: the table shows "no (late)");
//! - *amplification* is attempts reaching the bottom tier per edge request in the same second;
//!   `peak_amplification` is its maximum over the fault and after it.

use serde::{Deserialize, Serialize};

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
    /// See the module docs.
    pub recovered: bool,
    /// Seconds from the fault's end to recovery; `None` if it did not recover (or no fault).
    pub recovery_s: Option<f64>,
    /// See the module docs.
    pub peak_amplification: f64,
    /// Attempts at the bottom tier per edge request over the whole run.
    pub attempts_per_call: f64,
    /// Goodput fraction before the fault.
    pub goodput_before: f64,
    /// Goodput fraction during the fault.
    pub goodput_during: f64,
    /// Goodput fraction after the fault.
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
    /// The fault, if one was injected.
    pub fault: Option<Fault>,
    /// Tier names, top (edge side) first.
    pub tiers: Vec<String>,
    /// One run per policy, in the order asked.
    pub runs: Vec<Run>,
}

impl Results {
    /// Pretty JSON with a trailing newline: deterministic for equal results.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("results serialize");
        s.push('\n');
        s
    }
}

/// The summary figures derived from a run's series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// See [`Run::recovered`].
    pub recovered: bool,
    /// See [`Run::recovery_s`].
    pub recovery_s: Option<f64>,
    /// Seconds from the fault's end to the first second of the healthy stretch that lasts to
    /// the end of the run, by the per-second rule alone; `Some` beside `recovered == false`
    /// means the run healed only after losing most of its post-fault requests ("healed late").
    pub healthy_from_s: Option<f64>,
    /// See [`Run::goodput_before`].
    pub goodput_before: f64,
    /// See [`Run::goodput_during`].
    pub goodput_during: f64,
    /// See [`Run::goodput_after`].
    pub goodput_after: f64,
    /// See [`Run::peak_amplification`].
    pub peak_amplification: f64,
}

/// A run is recovered only if `goodput_after` is at least this share of `goodput_before`
/// ("most requests after the fault were answered"); see the module docs.
pub const MOST: f64 = 0.5;

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 { num / den } else { 0.0 }
}

/// Computes the summary figures from per-second series, with the definitions of the module docs.
/// Seconds with no edge traffic count as healthy (nothing was asked). Without a fault, the whole
/// run is "before", and `recovered` is true if goodput never fell below 90 % of its mean.
pub fn summarize(series: &Series, fault: Option<&Fault>) -> Summary {
    let n = series.t.len();
    let (fs, fe) = fault.map_or((f64::INFINITY, f64::INFINITY), |f| (f.start_s, f.end_s));
    let mut sums = [(0.0, 0.0); 3];
    for i in 0..n {
        let t = series.t[i];
        let phase = if t < fs {
            0
        } else if t < fe {
            1
        } else {
            2
        };
        sums[phase].0 += series.goodput_rps[i];
        sums[phase].1 += series.edge_rps[i];
    }
    let g = |p: usize| ratio(sums[p].0, sums[p].1);
    let before = g(0);
    let healthy = |i: usize| {
        series.edge_rps[i] <= 0.0 || series.goodput_rps[i] / series.edge_rps[i] >= 0.9 * before
    };
    // The first second after the fault from which every later second is healthy.
    let mut recovery_at = None;
    for i in (0..n).rev() {
        if fault.is_some() && series.t[i] < fe {
            break;
        }
        if healthy(i) {
            recovery_at = Some(series.t[i]);
        } else {
            break;
        }
    }
    let after = g(2);
    let healthy_from_s = fault.and(recovery_at).map(|t| (t - fe).max(0.0));
    let (recovered, recovery_s) = match fault {
        // Weighted by requests, not seconds: most post-fault requests must have been answered.
        Some(_) if after < MOST * before || !after.is_finite() => (false, None),
        Some(_) => match recovery_at {
            Some(t) => (true, Some((t - fe).max(0.0))),
            None => (false, None),
        },
        None => ((0..n).all(healthy), None),
    };
    let from = if fault.is_some() { fs } else { f64::NEG_INFINITY };
    let peak_amplification = (0..n)
        .filter(|&i| series.t[i] >= from)
        .map(|i| ratio(series.bottom_attempts_rps[i], series.edge_rps[i]))
        .fold(0.0, f64::max);
    Summary {
        recovered,
        recovery_s,
        healthy_from_s,
        goodput_before: before,
        goodput_during: g(1),
        goodput_after: after,
        peak_amplification,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(good: &[f64]) -> Series {
        let n = good.len();
        Series {
            t: (0..n).map(|i| i as f64).collect(),
            edge_rps: vec![100.0; n],
            goodput_rps: good.to_vec(),
            bottom_attempts_rps: good
                .iter()
                .map(|g| if *g < 50.0 { 300.0 } else { 100.0 })
                .collect(),
            ..Series::default()
        }
    }

    fn fault() -> Fault {
        Fault { kind: "outage".into(), start_s: 2.0, end_s: 4.0 }
    }

    #[test]
    fn recovers_two_seconds_after_the_fault() {
        let s = series(&[100.0, 100.0, 0.0, 0.0, 0.0, 50.0, 95.0, 100.0]);
        let sum = summarize(&s, Some(&fault()));
        assert!(sum.recovered);
        assert_eq!(sum.recovery_s, Some(2.0));
        assert_eq!(sum.goodput_before, 1.0);
        assert_eq!(sum.goodput_during, 0.0);
        assert_eq!(sum.peak_amplification, 3.0);
    }

    #[test]
    fn a_relapse_is_not_recovery() {
        let s = series(&[100.0, 100.0, 0.0, 0.0, 100.0, 100.0, 0.0, 100.0]);
        let sum = summarize(&s, Some(&fault()));
        assert_eq!(sum.recovery_s, Some(3.0));
        let s = series(&[100.0, 100.0, 0.0, 0.0, 100.0, 100.0, 100.0, 0.0]);
        assert!(!summarize(&s, Some(&fault())).recovered);
    }

    #[test]
    fn most_requests_failing_after_the_fault_is_not_recovery() {
        // reconnect-herd under fixed-1s, in miniature: every second after the fault is healthy
        // except the one a herd of 10,000 lands in, and 94 % of that herd is refused. The
        // per-second rule alone said "recovered, 1.0 s" beside a goodput after of 9 %.
        let mut s = series(&[100.0, 100.0, 0.0, 0.0, 600.0, 100.0, 100.0, 100.0]);
        s.edge_rps[4] = 10_000.0;
        let sum = summarize(&s, Some(&fault()));
        assert!(sum.goodput_after < 0.5 * sum.goodput_before, "{}", sum.goodput_after);
        assert!(!sum.recovered);
        assert_eq!(sum.recovery_s, None);
        assert_eq!(sum.healthy_from_s, Some(1.0), "healed, but late");
        // The same herd answered in full is recovery.
        s.goodput_rps[4] = 10_000.0;
        assert!(summarize(&s, Some(&fault())).recovered);
    }

    #[test]
    fn recovered_never_sits_beside_most_requests_failing() {
        // Every series of six seconds, each second 0 %, 50 % or 100 % good at 100 or 10,000
        // requests: the verdict and goodput_after cannot disagree.
        let mut checked = 0;
        for code in 0..6u32.pow(6) {
            let (mut s, mut c) = (series(&[100.0; 8]), code);
            for i in 2..8 {
                let (good, big) = (c % 3, (c / 3) % 2 == 1);
                c /= 6;
                s.edge_rps[i] = if big { 10_000.0 } else { 100.0 };
                s.goodput_rps[i] = s.edge_rps[i] * good as f64 / 2.0;
            }
            let sum = summarize(&s, Some(&fault()));
            if sum.recovered {
                assert!(sum.goodput_after >= MOST * sum.goodput_before, "{code}: {sum:?}");
                checked += 1;
            }
        }
        assert!(checked > 100, "{checked}");
    }

    #[test]
    fn json_is_deterministic() {
        let r = Results {
            scenario: "x".into(),
            description: "d".into(),
            seed: 1,
            source: Source::Simulation,
            duration_s: 8.0,
            fault: Some(fault()),
            tiers: vec!["app".into(), "db".into()],
            runs: vec![],
        };
        assert_eq!(r.to_json(), r.clone().to_json());
        let back: Results = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(back, r);
    }
}
