//! Running a scenario under several policies and packing the runs into one [`Results`].

use seawall_report::{Fault, Results, Run, Source};

use crate::engine::{self, DoorEvent, EngineStats};
use crate::error::Error;
use crate::scenario::{FaultKind, OutageMode, Scenario};

/// Runs `scenario` once per policy name, in order, with the same seed (so the same arrivals).
///
/// `progress(policy_index, fraction)` is called about once per simulated second.
///
/// ```
/// use seawall_sim::{Scenario, catalog, simulate};
/// let e = catalog::get("bronson").unwrap();
/// let s = Scenario::parse(e.name, e.text, &["duration_s=5".into()]).unwrap();
/// let r = simulate(&s, &["seawall".into()], 1, &mut |_, _| {}).unwrap();
/// assert_eq!(r.runs[0].series.t.len(), 5);
/// ```
pub fn simulate(
    scenario: &Scenario,
    policies: &[String],
    seed: u64,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<Results, Error> {
    let mut runs = Vec::with_capacity(policies.len());
    for (i, name) in policies.iter().enumerate() {
        let (run, _) = run_policy(scenario, name, seed, &mut |f| progress(i, f))?;
        runs.push(run);
    }
    Ok(Results {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed,
        source: Source::Simulation,
        duration_s: scenario.duration_s,
        fault: fault(scenario),
        tiers: scenario.tiers.iter().map(|t| t.name.clone()).collect(),
        runs,
    })
}

/// One policy's run, with the engine's own figures (for benchmarks).
pub fn run_policy(
    scenario: &Scenario,
    policy: &str,
    seed: u64,
    progress: &mut dyn FnMut(f64),
) -> Result<(Run, EngineStats), Error> {
    let spec = scenario.policy(policy)?;
    let engine::Outcome { series, wasted, stats, hedging, .. } =
        engine::run(scenario, &spec, seed, progress)?;
    let mut run = Run::judged(policy, series, fault(scenario).as_ref());
    run.wasted_work = wasted;
    run.events = stats.events;
    run.hedging = hedging;
    Ok((run, stats))
}

/// Runs `policy` on `scenario` and returns what the door of `tier`'s first replica did,
/// request by request ([`DoorEvent`]), in the order the engine did it: the simulator's own
/// server, to check against another implementation of the same door.
pub fn door_trace(
    scenario: &Scenario,
    policy: &str,
    seed: u64,
    tier: &str,
) -> Result<Vec<DoorEvent>, Error> {
    let spec = scenario.policy(policy)?;
    let t = scenario.tiers.iter().position(|t| t.name == tier).ok_or_else(|| {
        Error::invalid("tier", "the name of one of the scenario's tiers", tier.to_string())
    })?;
    engine::door_trace(scenario, &spec, seed, t)
}

/// The run's trigger for the judgement: the faults' window, or, in a scenario without a fault,
/// its traffic spikes' (a spike is a trigger too: did the system come back after it?).
pub(crate) fn fault(s: &Scenario) -> Option<Fault> {
    let Some((start_s, end_s)) = s.fault_window() else { return spike(s) };
    let words: Vec<String> = s
        .faults
        .iter()
        .filter(|f| f.start_s < s.duration_s)
        .map(|f| {
            let what = match (f.kind, f.mode) {
                (FaultKind::Outage, OutageMode::Hold) => "outage (requests held)",
                (FaultKind::Outage, OutageMode::Fail) => "outage (requests fail fast)",
                (FaultKind::Latency, _) => "latency injection",
                (FaultKind::Capacity, _) => "capacity loss",
                (FaultKind::Restart, _) => "restart into cold caches",
            };
            format!("{what} of {} for {} s", f.tier, f.duration_s)
        })
        .collect();
    Some(Fault { kind: words.join("; "), start_s, end_s })
}

fn spike(s: &Scenario) -> Option<Fault> {
    let spikes = || s.edge.spike.iter().filter(|p| p.start_s < s.duration_s && p.end_s > p.start_s);
    let start_s = spikes().map(|p| p.start_s).reduce(f64::min)?;
    let end_s = spikes().map(|p| p.end_s.min(s.duration_s)).reduce(f64::max)?;
    let words: Vec<String> = spikes()
        .map(|p| {
            format!("traffic spike of +{} rps at the edge for {} s", p.rate, p.end_s - p.start_s)
        })
        .collect();
    Some(Fault { kind: words.join("; "), start_s, end_s })
}
