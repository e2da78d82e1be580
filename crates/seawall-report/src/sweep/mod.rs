//! The results of a sweep: one scenario run over a grid of parameter values, each point under
//! one or more policies and several seeds, and the boundary between the points that heal by
//! themselves and the points that stay down.
//!
//! # Why sweep
//!
//! The question a retry review most needs answered is Bronson et al.'s *hidden capacity*: below
//! what load does the system heal by itself after a trigger? One run says "stuck at 280 QPS";
//! only a grid of runs says "heals below ≈ 155 QPS". Several seeds per point show how sharp that
//! boundary is: a point where some seeds heal and some do not is the boundary's width.
//!
//! `sweep.json` holds every grid point with the swept values under their dotted names
//! (`"edge.rate": 140`) beside that point's figures, and the boundaries found:
//!
//! ```
//! use seawall_report::Verdict;
//! use seawall_report::sweep::{Axis, Point, SeedRun, Sweep, boundaries};
//!
//! let run = |rate: f64| SeedRun {
//!     seed: 1,
//!     verdict: if rate < 155.0 {
//!         Verdict::Recovered { recovery_s: 2.0 }
//!     } else {
//!         Verdict::StaysDown
//!     },
//!     peak_amplification: 2.0,
//!     goodput_before: 1.0,
//!     goodput_during: 0.0,
//!     goodput_after: if rate < 155.0 { 0.9 } else { 0.0 },
//!     wasted_work: 0.5,
//! };
//! let axes = vec![Axis { path: "edge.rate".into(), values: vec![140.0, 150.0, 160.0] }];
//! let points: Vec<Point> = axes[0]
//!     .values
//!     .iter()
//!     .map(|&v| Point::new(vec![("edge.rate".into(), v)], "naive", vec![run(v)]))
//!     .collect();
//! let b = boundaries(&axes, &["naive".to_string()], &points);
//! assert_eq!(b[0].value, Some(155.0));
//! assert!(b[0].words.contains("below ≈ 155 QPS"), "{}", b[0].words);
//! let sweep = Sweep {
//!     scenario: "bronson".into(),
//!     description: String::new(),
//!     seed: 1,
//!     seeds: 1,
//!     sets: vec![],
//!     axes,
//!     policies: vec!["naive".into()],
//!     fault: None,
//!     points,
//!     boundaries: b,
//! };
//! assert!(sweep.to_json().contains(r#""edge.rate": 140,"#));
//! ```

mod boundary;
pub(crate) mod text;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};

use crate::{Fault, Verdict};

pub use boundary::{Boundary, BoundaryKind, boundaries};
pub use text::render_sweep_table;

/// One swept parameter: a dotted `--set` path and the values it takes, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// The dotted path (`edge.rate`, `fault.0.duration_s`).
    pub path: String,
    /// The values, ascending.
    pub values: Vec<f64>,
}

/// One seed's run at a grid point: the summary figures of [`Run`](crate::Run), no series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeedRun {
    /// The seed this run used; `seawall simulate --set PATH=VALUE… --seed SEED` repeats it.
    pub seed: u64,
    /// The run's verdict ([`crate::verdict`]).
    pub verdict: Verdict,
    /// See [`Run::peak_amplification`](crate::Run::peak_amplification).
    pub peak_amplification: f64,
    /// See [`Run::goodput_before`](crate::Run::goodput_before).
    pub goodput_before: f64,
    /// See [`Run::goodput_during`](crate::Run::goodput_during).
    pub goodput_during: f64,
    /// See [`Run::goodput_after`](crate::Run::goodput_after).
    pub goodput_after: f64,
    /// See [`Run::wasted_work`](crate::Run::wasted_work).
    pub wasted_work: f64,
}

/// One grid point under one policy: the swept values, then the figures over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The swept values by dotted path; in JSON they sit at the top level of the point
    /// (`"edge.rate": 140`), whole numbers printed as integers.
    #[serde(flatten, serialize_with = "whole_numbers")]
    pub at: BTreeMap<String, f64>,
    /// The policy.
    pub policy: String,
    /// Whether most seeds recovered (all of them when there is one).
    pub recovered: bool,
    /// How many seeds recovered.
    pub recovered_seeds: usize,
    /// How many seeds healed late ([`Verdict::HealedLate`]): back for good, but after most
    /// requests after the fault were lost (a longer run may call them recovered).
    #[serde(default)]
    pub late_seeds: usize,
    /// Median recovery time over the seeds that recovered; `None` if none did.
    pub recovery_s: Option<f64>,
    /// Mean over the seeds.
    pub peak_amplification: f64,
    /// Mean over the seeds.
    pub goodput_during: f64,
    /// Mean over the seeds.
    pub goodput_after: f64,
    /// Mean over the seeds.
    pub wasted_work: f64,
    /// Every seed's run, in seed order.
    pub runs: Vec<SeedRun>,
}

impl Point {
    /// Aggregates the seeds' runs of one point: majority verdict, median recovery time, means.
    pub fn new(at: Vec<(String, f64)>, policy: &str, runs: Vec<SeedRun>) -> Point {
        let n = runs.len().max(1) as f64;
        let mean = |f: fn(&SeedRun) -> f64| runs.iter().map(f).sum::<f64>() / n;
        let recovered_seeds = runs.iter().filter(|r| r.verdict.is_recovered()).count();
        let late_seeds =
            runs.iter().filter(|r| matches!(r.verdict, Verdict::HealedLate { .. })).count();
        let mut times: Vec<f64> =
            runs.iter().filter_map(|r| r.verdict.recovery_s()).filter(|s| s.is_finite()).collect();
        times.sort_by(f64::total_cmp);
        let recovery_s = match times.len() {
            0 => None,
            k if k % 2 == 1 => Some(times[k / 2]),
            k => Some((times[k / 2 - 1] + times[k / 2]) / 2.0),
        };
        Point {
            at: at.into_iter().collect(),
            policy: policy.to_string(),
            recovered: !runs.is_empty() && 2 * recovered_seeds > runs.len(),
            recovered_seeds,
            late_seeds,
            recovery_s,
            peak_amplification: mean(|r| r.peak_amplification),
            goodput_during: mean(|r| r.goodput_during),
            goodput_after: mean(|r| r.goodput_after),
            wasted_work: mean(|r| r.wasted_work),
            runs,
        }
    }

    /// Share of the seeds that recovered, in [0, 1].
    pub fn share(&self) -> f64 {
        if self.runs.is_empty() {
            0.0
        } else {
            self.recovered_seeds as f64 / self.runs.len() as f64
        }
    }
}

/// A whole sweep: what was run, every point, and the boundaries found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Scenario name.
    pub scenario: String,
    /// One line on what the scenario shows.
    pub description: String,
    /// The base seed every point's seeds are derived from.
    pub seed: u64,
    /// Seeds per point.
    pub seeds: u32,
    /// The `--set` overrides applied to every point.
    pub sets: Vec<String>,
    /// The swept parameters; the first varies fastest in `points`.
    pub axes: Vec<Axis>,
    /// The policies, in the order asked.
    pub policies: Vec<String>,
    /// The base scenario's fault window, if it has one.
    pub fault: Option<Fault>,
    /// Every grid point under every policy.
    pub points: Vec<Point>,
    /// Where recovery turns into staying down, per policy (see [`boundaries`]).
    pub boundaries: Vec<Boundary>,
}

impl Sweep {
    /// Pretty JSON with a trailing newline: deterministic for equal sweeps.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("sweep serializes");
        s.push('\n');
        s
    }
}

/// A value as JSON prints it best: `140` for a whole number, `0.5` otherwise.
fn json_number(v: f64) -> serde_json::Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        serde_json::Value::from(v as i64)
    } else {
        serde_json::Value::from(v)
    }
}

fn whole_numbers<S: Serializer>(at: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(at.iter().map(|(k, v)| (k, json_number(*v))))
}
