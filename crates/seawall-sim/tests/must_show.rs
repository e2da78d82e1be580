//! The "must show" list, as tests: Bronson's metastable loop and its cure, 27 attempts
//! per request across three layers, and determinism.

mod common;

use common::amplification_during_fault;
use seawall_report::Run;
use seawall_sim::{Scenario, load, simulate};

fn scenario(name: &str, sets: &[&str]) -> Scenario {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    load(name, &sets).unwrap()
}

fn run(s: &Scenario, policy: &str, seed: u64) -> Run {
    simulate(s, &[policy.to_string()], seed, &mut |_, _| {}).unwrap().runs.remove(0)
}

#[test]
fn bronson_naive_stays_down_and_seawall_recovers_within_seconds() {
    // 40 s instead of 60 keeps the debug-build test short; the outage is 10..20 s.
    let s = scenario("bronson", &["duration_s=40"]);
    let naive = run(&s, "naive", 1);
    assert!(naive.goodput_before > 0.95, "{}", naive.goodput_before);
    assert!(!naive.recovered(), "naive recovered: {:?}", naive.series.goodput_rps);
    assert!(naive.goodput_after < 0.1, "{}", naive.goodput_after);
    // The loop: offered load at the database stays near 2 x 280 = 560 QPS after the outage.
    let late = &naive.series.bottom_attempts_rps[30..40];
    assert!(late.iter().all(|&x| x > 450.0), "{late:?}");

    let sw = run(&s, "seawall", 1);
    assert!(sw.recovered(), "seawall did not recover: {:?}", sw.series.goodput_rps);
    assert!(sw.recovery_s().unwrap() <= 5.0, "{:?}", sw.recovery_s());
    assert!(sw.goodput_after > 0.9, "{}", sw.goodput_after);
}

#[test]
fn bronson_naive_recovers_below_the_hidden_capacity() {
    // Bronson et al.: the loop needs load above ~150 QPS to sustain itself.
    let s = scenario("bronson", &["duration_s=40", "edge.rate=120"]);
    assert!(run(&s, "naive", 1).recovered());
}

#[test]
fn layered_naive_sends_exactly_27_attempts_per_request_and_seawall_one() {
    let s = scenario("layered", &[]);
    let naive = run(&s, "naive", 3);
    assert_eq!(amplification_during_fault(&s, &naive), 27.0);
    assert_eq!(naive.peak_amplification, 27.0);
    let sw = run(&s, "seawall", 3);
    let a = amplification_during_fault(&s, &sw);
    assert!(a <= 1.2, "{a}");
}

#[test]
fn layered_variants_reach_64_and_243() {
    let s = scenario("layered-64", &[]);
    assert_eq!(amplification_during_fault(&s, &run(&s, "naive", 1)), 64.0);
    let s = scenario("layered-243", &["edge.rate=5"]);
    assert_eq!(amplification_during_fault(&s, &run(&s, "naive", 1)), 243.0);
    assert!(amplification_during_fault(&s, &run(&s, "seawall", 1)) <= 1.2);
}

#[test]
fn same_seed_same_bytes_other_seed_other_series() {
    let s = scenario("bronson", &["duration_s=25"]);
    let policies = ["naive".to_string(), "seawall".to_string()];
    let a = simulate(&s, &policies, 42, &mut |_, _| {}).unwrap().to_json();
    let b = simulate(&s, &policies, 42, &mut |_, _| {}).unwrap().to_json();
    assert_eq!(a, b);
    let c = simulate(&s, &policies, 43, &mut |_, _| {}).unwrap();
    let a: seawall_report::Results = serde_json::from_str(&a).unwrap();
    assert_ne!(a.runs[0].series.edge_rps, c.runs[0].series.edge_rps);
    assert_ne!(a.runs[1].series.goodput_rps, c.runs[1].series.goodput_rps);
}
