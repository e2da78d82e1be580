//! Sweeps: a scenario run over a grid of `--set` values, in parallel, to find where the system
//! stops healing by itself — Bronson et al.'s hidden capacity.
//!
//! # Why a grid, seeds, and seeds derived from the point
//!
//! One run answers "does it recover at 280 QPS?"; the question a team needs answered is "below
//! what load does it recover?", which only a line of runs shows. Near the boundary a single
//! seed's verdict is a coin toss, so each point runs several seeds and the boundary carries the
//! interval where they disagree. Each seed is derived from the base seed and the point's values
//! ([`point_seed`]), never from a run counter, so a point's figures are the same at any thread
//! count, in any order, in any grid that contains it — and `seawall simulate --set …
//! --seed SEED` repeats any one of them.
//!
//! ```
//! use std::num::NonZeroUsize;
//! use seawall_sim::sweep::{Plan, parse_axis};
//!
//! let axis = parse_axis("edge.rate=100..250:150").unwrap();
//! let plan = Plan::new("bronson", &["duration_s=40".into()], vec![axis], &["naive".into()], 1, 1)
//!     .unwrap();
//! let sweep = plan.run(NonZeroUsize::new(2).unwrap(), &|_, _| {}).unwrap();
//! assert!(sweep.points[0].recovered); // 100 QPS heals
//! assert!(!sweep.points[1].recovered); // 250 QPS stays down
//! assert_eq!(sweep.boundaries[0].value, Some(175.0));
//! ```

mod axis;
mod pool;
mod seed;

use std::num::NonZeroUsize;

use seawall_report::Fault;
use seawall_report::sweep::{Axis, Point, SeedRun, Sweep, boundaries};

use crate::error::Error;
use crate::scenario::Scenario;

pub use axis::{MAX_VALUES, parse_axis};
pub use seed::point_seed;

/// Most swept parameters (a strip or a heat map).
pub const MAX_AXES: usize = 2;
/// Most grid points.
pub const MAX_POINTS: usize = 10_000;
/// Most seeds per point.
pub const MAX_SEEDS: u32 = 100;
/// Most runs in one sweep (points × policies × seeds).
pub const MAX_RUNS: usize = 100_000;

/// A sweep checked and ready to run: every grid point's scenario already parsed and validated.
#[derive(Debug)]
pub struct Plan {
    name: String,
    description: String,
    fault: Option<Fault>,
    sets: Vec<String>,
    axes: Vec<Axis>,
    policies: Vec<String>,
    seed: u64,
    seeds: u32,
    /// One per grid point, the first axis varying fastest, with the point's values.
    points: Vec<(Vec<(String, f64)>, Scenario)>,
}

impl Plan {
    /// Checks a sweep of `name_or_path` (catalog name or file) over `axes`, with `sets` applied
    /// to every point, under `policies` (empty: the scenario's default pair), `seeds` seeds per
    /// point derived from `seed`. Every point is parsed and validated here, so a bad path or a
    /// value out of range fails before anything runs.
    pub fn new(
        name_or_path: &str,
        sets: &[String],
        axes: Vec<Axis>,
        policies: &[String],
        seed: u64,
        seeds: u32,
    ) -> Result<Plan, Error> {
        let flag = |given: &str, m: String| Error::Sweep { given: given.into(), message: m };
        if axes.is_empty() || axes.len() > MAX_AXES {
            let m = format!("sweep 1 or {MAX_AXES} parameters, got {}", axes.len());
            return Err(flag("", m));
        }
        if !(1..=MAX_SEEDS).contains(&seeds) {
            return Err(flag("", format!("--seeds must be in [1, {MAX_SEEDS}], got {seeds}")));
        }
        for (i, a) in axes.iter().enumerate() {
            let given = format!("{}=…", a.path);
            if a.values.is_empty() {
                return Err(flag(&given, "no values".into()));
            }
            if axes[..i].iter().any(|b| b.path == a.path) {
                return Err(flag(&given, "swept twice".into()));
            }
            let key = |s: &String| s.split_once('=').map(|(k, _)| k.trim().to_string());
            if sets.iter().filter_map(key).any(|k| k == a.path) {
                return Err(flag(&given, "also given with --set; sweep it or set it".into()));
            }
        }
        let n_points: usize = axes.iter().map(|a| a.values.len()).product();
        if n_points > MAX_POINTS {
            return Err(flag("", format!("{n_points} grid points; at most {MAX_POINTS}")));
        }
        let (file, text) = crate::source(name_or_path)?;
        let base = Scenario::parse(&file, &text, sets)?;
        let policies =
            if policies.is_empty() { base.default_policies.clone() } else { policies.to_vec() };
        for p in &policies {
            base.policy(p)?;
        }
        let runs = n_points * policies.len() * seeds as usize;
        if runs > MAX_RUNS {
            return Err(flag(
                "",
                format!("{runs} runs (points × policies × seeds); at most {MAX_RUNS}"),
            ));
        }
        let mut points = Vec::with_capacity(n_points);
        for i in 0..n_points {
            let at = grid_point(&axes, i);
            let mut all = sets.to_vec();
            all.extend(at.iter().map(|(p, v)| axis::set(p, *v)));
            let s = Scenario::parse(&file, &text, &all).map_err(|e| point_error(&at, e))?;
            points.push((at, s));
        }
        Ok(Plan {
            name: base.name.clone(),
            description: base.description.clone(),
            fault: crate::run::fault(&base),
            sets: sets.to_vec(),
            axes,
            policies,
            seed,
            seeds,
            points,
        })
    }

    /// Runs this many simulations.
    pub fn runs(&self) -> usize {
        self.points.len() * self.policies.len() * self.seeds as usize
    }

    /// Runs every point under every policy and seed on `jobs` threads, and finds the
    /// boundaries. `progress(done, total)` is called after each run, from the worker threads.
    /// The result does not depend on `jobs`.
    pub fn run(
        &self,
        jobs: NonZeroUsize,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<Sweep, Error> {
        let k = self.seeds as usize;
        let per_policy = self.points.len() * k;
        // Task i: policy-major, then grid point, then seed.
        let task = |i: usize| -> Result<SeedRun, Error> {
            let policy = &self.policies[i / per_policy];
            let (at, scenario) = &self.points[(i % per_policy) / k];
            let seed = point_seed(self.seed, at, (i % k) as u32);
            let (run, _) = crate::run_policy(scenario, policy, seed, &mut |_| {})?;
            Ok(SeedRun {
                seed,
                verdict: run.verdict,
                peak_amplification: run.peak_amplification,
                goodput_before: run.goodput_before,
                goodput_during: run.goodput_during,
                goodput_after: run.goodput_after,
                wasted_work: run.wasted_work,
            })
        };
        let runs = pool::run_all(self.runs(), jobs, &task, progress)?;
        let mut points = Vec::with_capacity(self.policies.len() * self.points.len());
        for (chunk, i) in runs.chunks(k).zip(0..) {
            let policy = &self.policies[i / self.points.len()];
            let (at, _) = &self.points[i % self.points.len()];
            points.push(Point::new(at.clone(), policy, chunk.to_vec()));
        }
        let boundaries = boundaries(&self.axes, &self.policies, &points);
        Ok(Sweep {
            scenario: self.name.clone(),
            description: self.description.clone(),
            seed: self.seed,
            seeds: self.seeds,
            sets: self.sets.clone(),
            axes: self.axes.clone(),
            policies: self.policies.clone(),
            fault: self.fault.clone(),
            points,
            boundaries,
        })
    }
}

/// The values of grid point `i`, the first axis varying fastest.
fn grid_point(axes: &[Axis], mut i: usize) -> Vec<(String, f64)> {
    let mut at = Vec::with_capacity(axes.len());
    for a in axes {
        at.push((a.path.clone(), a.values[i % a.values.len()]));
        i /= a.values.len();
    }
    at
}

/// A point's parse error, named by the `--sweep` value that caused it.
fn point_error(at: &[(String, f64)], e: Error) -> Error {
    let given: Vec<String> = at.iter().map(|(p, v)| axis::set(p, *v)).collect();
    Error::Sweep { given: given.join(" "), message: e.to_string() }
}
