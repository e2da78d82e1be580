//! Fan-out: a tier that calls several dependencies, one after another or all at once, each call
//! through a client policy of its own; the calls form a DAG (`calls = [...]`, top first).
//!
//! What would break these tests: calling only the first dependency (the leaves' attempt counts),
//! a parallel fan-out that waits for each call in turn (its goodput under a tight deadline), a
//! sequence that goes on after a failure (the later dependency's attempts during the outage), or
//! a single-owner rule that lets two layers on one path retry (the diamond's amplification).

mod common;

use common::{run_file as run, scenario_file as scenario};
use seawall_report::Run;
use seawall_sim::load;

/// An API tier calling three dependencies of 100 ms each (exponential), 300 ms edge deadline.
const CHECKOUT: &str = r#"
name = "checkout"
description = "an API calling three dependencies"
duration_s = 30
[edge]
rate = 50
deadline_ms = 300
[[tier]]
name = "api"
calls = ["inventory", "payments", "fraud"]
fan_out = "parallel"
timeout_ms = 250
[[tier]]
name = "inventory"
workers = 100
service = { mean_ms = 60 }
[[tier]]
name = "payments"
workers = 100
service = { mean_ms = 60 }
[[tier]]
name = "fraud"
workers = 100
service = { mean_ms = 60 }
[[fault]]
kind = "outage"
mode = "fail"
tier = "inventory"
start_s = 10
duration_s = 10
"#;

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn every_dependency_is_called_and_parallel_calls_overlap() {
    let path = scenario("checkout", CHECKOUT);
    let parallel = run(&path, "naive", &["fault.0.duration_s=0"]);
    let sequence = run(&path, "naive", &["fault.0.duration_s=0", "tier.api.fan_out=\"sequence\""]);
    for r in [&parallel, &sequence] {
        let edge = mean(&r.series.edge_rps[2..28]);
        for (tier, name) in [(1, "inventory"), (2, "payments"), (3, "fraud")] {
            let a = mean(&r.series.tier_attempts_rps[tier][2..28]);
            assert!(a >= edge * 0.95, "{}: {name} gets {a:.1}/s of {edge:.1}/s", r.policy);
        }
    }
    // Three 60 ms calls in a row often miss a 300 ms deadline; at once, the slowest of three
    // rarely does.
    let good = |r: &Run| mean(&r.series.goodput_rps[2..28]) / mean(&r.series.edge_rps[2..28]);
    let (p, s) = (good(&parallel), good(&sequence));
    eprintln!("goodput with no fault: parallel {p:.3}, sequence {s:.3}");
    assert!(p > 0.9, "parallel {p}");
    assert!(p > s + 0.1, "parallel {p} vs sequence {s}");
}

#[test]
fn a_sequence_stops_at_the_first_failure_and_parallel_calls_are_dropped_with_it() {
    let path = scenario("checkout-fail", CHECKOUT);
    let during = |r: &Run, tier: usize| mean(&r.series.tier_attempts_rps[tier][11..19]);
    let sequence = run(&path, "naive", &["tier.api.fan_out=\"sequence\""]);
    // inventory is first and failing: payments and fraud are never reached.
    assert!(during(&sequence, 2) < 1.0, "payments: {}", during(&sequence, 2));
    assert!(during(&sequence, 1) > 40.0, "inventory: {}", during(&sequence, 1));
    let parallel = run(&path, "naive", &[]);
    // At once: payments is called with every attempt of the API's, failure or not.
    assert!(during(&parallel, 2) > 40.0, "payments: {}", during(&parallel, 2));
    assert!(parallel.goodput_during < 0.05, "{}", parallel.goodput_during);
}

/// A diamond: the API calls `a` and `b`, which both call `db`.
const DIAMOND: &str = r#"
name = "diamond"
description = "two paths to one database"
duration_s = 30
[edge]
rate = 100
deadline_ms = 5000
retries = true
timeout_ms = 4000
[[tier]]
name = "api"
calls = ["a", "b"]
fan_out = "parallel"
timeout_ms = 2000
[[tier]]
name = "a"
calls = ["db"]
timeout_ms = 1000
[[tier]]
name = "b"
calls = ["db"]
timeout_ms = 1000
[[tier]]
name = "db"
workers = 64
service = { mean_ms = 5 }
[[fault]]
kind = "outage"
mode = "fail"
tier = "db"
start_s = 10
duration_s = 10
"#;

#[test]
fn one_layer_owns_retries_on_every_path_of_a_dag() {
    let path = scenario("diamond", DIAMOND);
    let during = |r: &Run, tier: usize| mean(&r.series.tier_attempts_rps[tier][11..19]);
    // Database attempts per request `a` and `b` serve: how many attempts each hop below the
    // owner makes.
    let per_hop = |r: &Run| during(r, 3) / (during(r, 1) + during(r, 2));
    let seawall = run(&path, "seawall", &["policies.seawall.budget=none"]);
    let naive = run(&path, "naive", &[]);
    let (s, n) = (per_hop(&seawall), per_hop(&naive));
    eprintln!("database attempts per request of a and b: seawall {s:.2}, naive {n:.2}");
    // seawall: the edge owns retries; a and b fail fast on both paths.
    assert!(s <= 1.05, "seawall {s}");
    // naive: a and b make 3 attempts each.
    assert!(n > 2.9, "naive {n}");
    // The edge's 3 attempts reach the database, on one path or both (`try_join` drops the
    // other call when the first fails): never more than 2 × 3 per edge request.
    let db_per_edge = during(&seawall, 3) / mean(&seawall.series.edge_rps[11..19]);
    assert!((2.9..=6.1).contains(&db_per_edge), "{db_per_edge}");
}

#[test]
fn calls_are_checked() {
    let path = scenario("checkout-bad", CHECKOUT);
    let bad = |set: &str| {
        let e = load(path.to_str().unwrap(), &[set.to_string()]).unwrap_err().to_string();
        assert!(e.contains("calls") || e.contains("name"), "{set}: {e}");
    };
    bad("tier.api.calls=[\"nowhere\"]");
    bad("tier.api.calls=[\"inventory\", \"inventory\"]");
    bad("tier.fraud.calls=[\"api\"]"); // upward: a cycle
    bad("tier.api.calls=[\"inventory\", \"payments\"]"); // fraud is then called by nobody
}
