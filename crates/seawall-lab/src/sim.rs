//! The `sim` column: the simulator's prediction for the lab's own parameters, and the gap.
//!
//! # Why predict before measuring
//!
//! The simulator runs the same core policy code as the lab's tiers, so for the same stack, load,
//! capacity and fault it should tell the same story. Where it does not, one of them is missing
//! something — a queue, a timeout, a cost — and that is worth knowing before trusting either
//! with a question nobody can test on production. The prediction is computed first (it takes
//! well under a second and catches a scenario the simulator cannot express before a minute of
//! lab time is spent).
//!
//! # How the lab maps onto a scenario
//!
//! | lab | scenario |
//! |---|---|
//! | load generator, one attempt, `--deadline-ms` | `[edge]`, `retries = false` |
//! | edge, gateway, order (proxies) | three tiers with `workers = 0` |
//! | per-try timeout: baseline 250 ms, seawall none (the deadline) | tiers' `timeout_ms` |
//! | dependency: `workers` × `workers / capacity` | bottom tier, near-constant log-normal service |
//! | baseline: unbounded queue; seawall: `ShedLayer` queue of `workers / 2` | `queue_limit` |
//! | dependency slows up to 3× once its queue passes twice its workers | `degrade = { above_in_system = 2w, full_in_system = 6w, factor = 3 }` |
//! | baseline: owner everywhere, 3 attempts, flat 100 ms, no budget | preset `fixed`, `attempts = 3` |
//! | seawall: edge owns (full jitter 50 ms – 1 s, gRPC budget), fail-fast below | preset `seawall`, `cap_ms = 1000` |
//! | `fail` / `hang` / `slow` | outage `fail` / outage `hold` / latency ×6 |
//! | `restart` | outage `fail`, then a restart with caches cold ×4 for 5 s |
//!
//! The simulator's service times are a distribution, so small gaps are expected; a different
//! verdict is not. Its slowdown follows the work in the system (queued + running), as the lab's
//! dependency does, so shedding protects it in both.

use std::fmt::Write as _;

use seawall_report::{Results, Source};
use seawall_sim::Scenario;
use seawall_sim::policy::Preset;
use seawall_sim::scenario::{
    DEFAULT_QUEUE_LIMIT, Degrade, Edge, FaultKind as SimFault, FaultSpec, OutageMode,
    PolicyOverride, RatePoint, ScenarioFile, Service, Tier,
};

use crate::LabError;
use crate::config::{FaultKind, LabParams, Stack};
use crate::node::Role;
use crate::node::client::{BASELINE_DELAY, BASELINE_TIMEOUT};
use crate::report::fault_of;

/// The scenario that mirrors `params` for `stack`, built in code (its TOML is
/// [`ScenarioFile::to_toml`]). One scenario per stack, because the tiers' per-try timeouts differ
/// between the two and are a scenario field, not a policy knob.
pub fn scenario(params: &LabParams, stack: Stack) -> ScenarioFile {
    let dur = params.duration.as_secs_f64();
    let deadline_ms = params.deadline.as_secs_f64() * 1000.0;
    let service_ms = params.service_time().as_secs_f64() * 1000.0;
    let ramp = match params.ramp_to {
        Some(to) => {
            vec![RatePoint { at_s: 0.0, rate: params.rate }, RatePoint { at_s: dur, rate: to }]
        }
        None => Vec::new(),
    };
    let edge = Edge {
        rate: params.rate,
        ramp,
        spike: Vec::new(),
        herd: Vec::new(),
        deadline_ms,
        retries: false,
        timeout_ms: Some(deadline_ms),
        refresh: None,
        instances: 1,
    };
    let tier_timeout = match stack {
        Stack::Baseline => BASELINE_TIMEOUT.as_secs_f64() * 1000.0,
        Stack::Seawall => deadline_ms,
    };
    let proxy = |role: Role| Tier {
        name: role.as_str().to_string(),
        workers: 0,
        queue_limit: DEFAULT_QUEUE_LIMIT,
        service: Service::default(),
        degrade: None,
        timeout_ms: Some(tier_timeout),
        retries: true,
        ..Tier::new(String::new())
    };
    let mut tiers: Vec<Tier> = [Role::Edge, Role::Gateway, Role::Order].map(proxy).into();
    let w = params.workers;
    tiers.push(Tier {
        name: DEPENDENCY.to_string(),
        workers: w,
        // The lab's baseline dependency queues without limit; seawall's `ShedLayer` admits
        // `workers` at once and queues half as many more (its default), rejecting the rest.
        queue_limit: match stack {
            Stack::Baseline => 10_000_000,
            Stack::Seawall => (w / 2).max(1),
        },
        service: Service {
            mean_ms: 0.0,
            p50_ms: Some(service_ms),
            p99_ms: Some(service_ms * 1.01),
        },
        degrade: Some(Degrade {
            above_rps: None,
            above_in_system: Some(2 * w),
            full_in_system: Some(6 * w),
            factor: 3.0,
        }),
        timeout_ms: None,
        retries: true,
        ..Tier::new(String::new())
    });
    let mut faults = Vec::new();
    if let Some(f) = params.fault {
        let (at, d) = (params.at.as_secs_f64(), f.duration.as_secs_f64());
        let fault =
            |kind, start_s, duration_s| FaultSpec::new(kind, DEPENDENCY, start_s, duration_s);
        let fail = FaultSpec { mode: OutageMode::Fail, ..fault(SimFault::Outage, at, d) };
        match f.kind {
            FaultKind::Fail => faults.push(fail),
            FaultKind::Hang => faults.push(fault(SimFault::Outage, at, d)),
            FaultKind::Slow => faults.push(FaultSpec {
                p50_ms: Some(service_ms * 6.0),
                p99_ms: Some(service_ms * 6.06),
                ..fault(SimFault::Latency, at, d)
            }),
            FaultKind::Restart => faults.extend([
                fail,
                FaultSpec { cold_factor: Some(4.0), ..fault(SimFault::Restart, at + d, 5.0) },
            ]),
        }
    }
    let policy = match stack {
        Stack::Baseline => {
            let delay = BASELINE_DELAY.as_millis() as f64;
            PolicyOverride {
                base: Some(Preset::Fixed),
                attempts: Some(3),
                base_ms: Some(delay),
                cap_ms: Some(delay),
                ..PolicyOverride::default()
            }
        }
        Stack::Seawall => PolicyOverride {
            base: Some(Preset::Seawall),
            cap_ms: Some(1000.0),
            ..PolicyOverride::default()
        },
    };
    ScenarioFile {
        name: format!("lab-{stack}"),
        description: format!("the lab's parameters, {stack}"),
        duration_s: dur,
        default_policies: vec![stack.to_string()],
        edge,
        tiers,
        faults,
        policies: [(stack.to_string(), policy)].into(),
    }
}

/// Name of the bottom tier.
const DEPENDENCY: &str = "dependency";

/// The simulator's prediction for every configuration of `params` (same shape as the lab's
/// results, `source: Simulation`, the lab's fault window).
pub fn predict(params: &LabParams) -> Result<Results, LabError> {
    let sim = |e: seawall_sim::Error| LabError::Sim(e.to_string());
    let mut runs = Vec::with_capacity(params.stacks.len());
    for &stack in &params.stacks {
        let scenario = Scenario::new(scenario(params, stack)).map_err(sim)?;
        let (run, _) = seawall_sim::run_policy(&scenario, stack.as_str(), params.seed, &mut |_| {})
            .map_err(sim)?;
        runs.push(run);
    }
    let mut r = crate::report::to_results(params, runs);
    r.source = Source::Simulation;
    r.description = format!("simulator, same parameters: {}", r.description);
    r.fault = fault_of(params);
    Ok(r)
}

/// Measured vs predicted, one row per configuration: recovered, recovery time, peak
/// amplification at the dependency, goodput during and after the fault, and mean goodput (the
/// figure that matters without a fault, e.g. at 2× capacity).
pub fn gap_table(measured: &Results, predicted: &Results) -> String {
    let mut s = String::from(
        "config     source  recovered  recovery(s)  peak amp  goodput during  after  goodput/s\n",
    );
    let faulted = measured.fault.is_some();
    let pct = |x: f64| if faulted { format!("{:.0} %", x * 100.0) } else { "—".into() };
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    for m in &measured.runs {
        let p = predicted.runs.iter().find(|p| p.policy == m.policy);
        for (src, r) in [("lab", Some(m)), ("sim", p)] {
            let Some(r) = r else { continue };
            let rec = r.recovery_s.map_or("—".to_string(), |x| format!("{x:.1}"));
            let recovered = match (faulted, r.recovered) {
                (false, _) => "—",
                (true, true) => "yes",
                (true, false) => "no",
            };
            let _ = writeln!(
                s,
                "{:<10} {src:<6}  {recovered:<9}  {rec:>11}  {:>7.1}×  {:>14}  {:>5}  {:>9.1}",
                m.policy,
                r.peak_amplification,
                pct(r.goodput_during),
                pct(r.goodput_after),
                mean(&r.series.goodput_rps),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_kind_is_a_valid_scenario() {
        for f in ["fail:10", "hang:10", "slow:10", "restart:10"] {
            let p = LabParams { fault: Some(f.parse().unwrap()), ..LabParams::default() };
            for stack in [Stack::Baseline, Stack::Seawall] {
                let file = scenario(&p, stack);
                Scenario::new(file.clone())
                    .unwrap_or_else(|e| panic!("{f} {stack}: {e}\n{file:?}"));
            }
        }
    }

    #[test]
    fn predicts_the_storm_and_the_cure_for_the_default_lab() {
        let r = predict(&LabParams::default()).unwrap();
        let (base, sea) = (&r.runs[0], &r.runs[1]);
        eprintln!("{}", gap_table(&r, &r));
        assert!(!base.recovered && sea.recovered);
        assert!(base.peak_amplification > 20.0, "{}", base.peak_amplification);
        assert!(sea.peak_amplification <= 1.2, "{}", sea.peak_amplification);
    }

    #[test]
    fn two_x_capacity_prediction_keeps_seawall_above_baseline() {
        let p = LabParams {
            rate: 400.0,
            fault: None,
            duration: std::time::Duration::from_secs(15),
            ..LabParams::default()
        };
        let r = predict(&p).unwrap();
        let mean = |i: usize| r.runs[i].series.goodput_rps.iter().sum::<f64>() / 15.0;
        // Shedding protects the simulated dependency as it does the lab's: seawall plateaus
        // near capacity while the baseline collapses.
        assert!(mean(1) > 5.0 * mean(0), "{} vs {}", mean(1), mean(0));
    }
}
