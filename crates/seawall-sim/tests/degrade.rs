//! The two degrade triggers at 2× capacity with a shed-protected dependency (the lab's
//! `--rate 400` on 4 workers × 20 ms = 200 rps, `ShedLayer` queue of 2): a slowdown keyed on
//! arrivals counts the shed requests and runs the dependency 3× slower; one keyed on work in the
//! system never fires, because admission control bounds that work — goodput stays near capacity.

use seawall_report::Run;
use seawall_sim::{Scenario, simulate};

/// The lab's 2× capacity scenario with `degrade` as given, under `policy`.
fn lab_2x(degrade: &str, queue_limit: u32, policy: &str) -> Run {
    let text = format!(
        r#"
name = "lab-2x"
description = "the lab at twice capacity"
duration_s = 15
[edge]
rate = 400
deadline_ms = 1000
[[tier]]
name = "edge"
timeout_ms = 1000
[[tier]]
name = "dependency"
workers = 4
queue_limit = {queue_limit}
service = {{ p50_ms = 20, p99_ms = 20.2 }}
degrade = {degrade}
[policies.seawall]
cap_ms = 1000
"#
    );
    let s = Scenario::parse("lab-2x.toml", &text, &[]).unwrap();
    simulate(&s, &[policy.to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

fn mean_goodput_rps(r: &Run) -> f64 {
    r.series.goodput_rps.iter().sum::<f64>() / r.series.goodput_rps.len() as f64
}

#[test]
fn work_in_system_trigger_keeps_a_shed_protected_tier_near_capacity() {
    // The lab's physics: 1× up to 2 × workers in the system, 3× from 6 × workers.
    let in_system = "{ above_in_system = 8, full_in_system = 24, factor = 3 }";
    let sw = lab_2x(in_system, 2, "seawall");
    let g = mean_goodput_rps(&sw);
    eprintln!("in-system trigger, seawall: {g:.1} rps");
    assert!(g > 0.85 * 200.0 && g <= 200.0 * 1.05, "{g}");

    // The arrival-rate trigger sees 400 rps offered, shed or not, and runs 3× slower.
    let arrivals = lab_2x("{ above_rps = 200, factor = 3 }", 2, "seawall");
    let a = mean_goodput_rps(&arrivals);
    eprintln!("arrival trigger, seawall: {a:.1} rps");
    assert!(a < 0.45 * 200.0, "{a}");
}

#[test]
fn work_in_system_trigger_still_sinks_an_unbounded_queue() {
    // Without admission control the queue grows, the trigger fires, and goodput collapses.
    let step = "{ above_in_system = 8, factor = 3 }";
    let naive = lab_2x(step, 10_000_000, "naive");
    let g = mean_goodput_rps(&naive);
    eprintln!("in-system step, unbounded queue: {g:.1} rps");
    assert!(g < 0.5 * 200.0, "{g}");
}

#[test]
fn a_degrade_needs_exactly_one_trigger() {
    let parse = |d: &str| {
        let text = format!(
            "name = \"x\"\ndescription = \"d\"\nduration_s = 5\n[edge]\nrate = 1\ndeadline_ms = 100\n\
             [[tier]]\nname = \"db\"\nworkers = 1\ndegrade = {d}\n"
        );
        Scenario::parse("x.toml", &text, &[]).map(|_| ()).map_err(|e| e.to_string())
    };
    assert!(parse("{ above_in_system = 4, factor = 2 }").is_ok());
    assert!(parse("{ above_in_system = 4, full_in_system = 8, factor = 2 }").is_ok());
    let both = parse("{ above_rps = 5, above_in_system = 4, factor = 2 }").unwrap_err();
    assert!(both.contains("x.toml: tier[0] (db).degrade: expected one trigger"), "{both}");
    assert!(parse("{ factor = 2 }").unwrap_err().contains("neither"));
    let ramp = parse("{ above_in_system = 4, full_in_system = 4, factor = 2 }").unwrap_err();
    assert!(ramp.contains("full_in_system"), "{ramp}");
    let typo = parse("{ above_in_sytem = 4, factor = 2 }").unwrap_err();
    assert!(typo.starts_with("x.toml:10:") && typo.contains("above_in_sytem"), "{typo}");
}
