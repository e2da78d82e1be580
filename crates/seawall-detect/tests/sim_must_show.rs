//! The must-show figures on recorded series: the simulator runs the catalog scenarios in-process
//! and the classifier must call the storms storms (or metastable) within 30 simulated seconds of
//! the fault starting, the pure spike a spike, and the `seawall` policy's runs anything but a
//! storm. Every run is replayed twice: knowing when the trigger ended (as `detect --replay` does
//! with a results.json) and blind (as a live scrape is).

use seawall_detect::{Classifier, Thresholds, Verdict, VerdictKind, samples_from_run};
use seawall_report::Run;

/// Seeds every scenario is run with: one lucky seed must not carry a test.
const SEEDS: [u64; 3] = [1, 2, 3];

/// The bound on detection latency, simulated seconds after the fault starts.
const WITHIN_S: f64 = 30.0;

fn simulate(name: &str, policy: &str, seed: u64, sets: &[&str]) -> (Run, Option<(f64, f64)>) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sc = seawall_sim::load(name, &sets).unwrap();
    let mut r = seawall_sim::simulate(&sc, &[policy.to_string()], seed, &mut |_, _| {}).unwrap();
    (r.runs.remove(0), sc.fault_window())
}

fn classify(run: &Run, trigger_end: Option<f64>) -> Vec<Verdict> {
    let mut c = Classifier::new(Thresholds::default());
    if let Some(t) = trigger_end {
        c.set_trigger_end(t);
    }
    samples_from_run(run).into_iter().map(|s| c.push(s)).collect()
}

fn is_storm(k: VerdictKind) -> bool {
    matches!(k, VerdictKind::RetryStorm | VerdictKind::Metastable)
}

fn timeline(vs: &[Verdict]) -> String {
    vs.iter().map(|v| format!("{:.0}:{}", v.t, v.verdict.as_str())).collect::<Vec<_>>().join(" ")
}

/// Asserts a storm is called within [`WITHIN_S`] of the fault start and not before it; returns
/// the latency in simulated seconds.
fn assert_storm(name: &str, policy: &str, sets: &[&str]) -> Vec<f64> {
    let mut latencies = Vec::new();
    for seed in SEEDS {
        let (run, window) = simulate(name, policy, seed, sets);
        let (start, end) = window.expect("storm scenarios have a fault");
        for trigger_end in [Some(end), None] {
            let vs = classify(&run, trigger_end);
            let first = vs.iter().find(|v| is_storm(v.verdict));
            let first =
                first.unwrap_or_else(|| panic!("{name}/{policy}: no storm: {}", timeline(&vs)));
            assert!(
                first.t >= start && first.t <= start + WITHIN_S,
                "{name}/{policy} seed {seed}: storm at t={} (fault at {start}): {}",
                first.t,
                timeline(&vs)
            );
            // Goodput is attributed to the second a request arrived in, so requests arriving
            // just before the outage fail in the interval before it: allow one interval.
            let before = vs.iter().filter(|v| v.t < start - 1.0);
            assert!(
                before
                    .clone()
                    .all(|v| matches!(v.verdict, VerdictKind::Learning | VerdictKind::Healthy)),
                "{name}/{policy}: alarm before the fault: {}",
                timeline(&vs)
            );
            latencies.push(first.t - start);
        }
    }
    latencies
}

/// Asserts the run is never called a storm (nor a spike: nothing about the edge changed).
fn assert_contained(name: &str, sets: &[&str]) {
    for seed in SEEDS {
        let (run, window) = simulate(name, "seawall", seed, sets);
        for trigger_end in [window.map(|w| w.1), None] {
            let vs = classify(&run, trigger_end);
            assert!(
                vs.iter().all(|v| matches!(
                    v.verdict,
                    VerdictKind::Learning
                        | VerdictKind::Healthy
                        | VerdictKind::Degraded
                        | VerdictKind::Recovering
                )),
                "{name}/seawall seed {seed}: {}",
                timeline(&vs)
            );
            assert_eq!(vs.last().unwrap().verdict, VerdictKind::Healthy, "{}", timeline(&vs));
        }
    }
}

#[test]
fn bronson_naive_is_a_storm_at_once_then_metastable() {
    let sets = ["duration_s=40"];
    let lat = assert_storm("bronson", "naive", &sets);
    assert!(lat.iter().all(|&l| l <= 2.0), "{lat:?}");
    // With the outage's end known (10..20 s) and goodput still 0, it is metastable after grace.
    let (run, w) = simulate("bronson", "naive", 1, &sets);
    let vs = classify(&run, w.map(|w| w.1));
    assert_eq!(vs.last().unwrap().verdict, VerdictKind::Metastable, "{}", timeline(&vs));
    let v = vs.iter().find(|v| v.verdict == VerdictKind::RetryStorm).unwrap();
    assert!(v.evidence.iter().any(|e| e.contains("edge flat")), "{:?}", v.evidence);
}

#[test]
fn layered_naive_is_a_storm_in_the_first_interval() {
    let lat = assert_storm("layered", "naive", &[]);
    assert!(lat.iter().all(|&l| l <= 1.0), "{lat:?}");
}

#[test]
fn index_slowdown_fixed_is_a_storm_with_a_flat_edge() {
    let lat = assert_storm("index-slowdown", "fixed", &["duration_s=60"]);
    assert!(lat.iter().all(|&l| l <= 5.0), "{lat:?}");
}

#[test]
fn seawall_policy_runs_are_never_called_storms() {
    assert_contained("bronson", &["duration_s=40"]);
    assert_contained("layered", &[]);
    assert_contained("index-slowdown", &["duration_s=60"]);
}

#[test]
fn traffic_spike_is_a_spike_under_both_policies() {
    for policy in ["naive", "seawall"] {
        for seed in SEEDS {
            let (run, _) = simulate("traffic-spike", policy, seed, &[]);
            let vs = classify(&run, None);
            assert!(vs.iter().all(|v| !is_storm(v.verdict)), "{policy}: {}", timeline(&vs));
            // The catalog's spike runs 15..25 s.
            let first = vs.iter().find(|v| v.verdict == VerdictKind::TrafficSpike);
            let first = first.unwrap_or_else(|| panic!("{policy}: no spike: {}", timeline(&vs)));
            assert!((15.0..=15.0 + WITHIN_S).contains(&first.t), "{}", timeline(&vs));
            assert_eq!(vs.last().unwrap().verdict, VerdictKind::Healthy, "{}", timeline(&vs));
        }
    }
}
