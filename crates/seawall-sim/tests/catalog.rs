//! The rest of the catalog tells the story it claims: a spike that is not a storm, the
//! incidents staying down under their "before" policy and recovering under `seawall`, and work
//! for abandoned callers counted as waste.

use seawall_report::Run;
use seawall_sim::{load, simulate};

fn run(name: &str, policy: &str, sets: &[&str]) -> Run {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = load(name, &sets).unwrap();
    simulate(&s, &[policy.to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

#[test]
fn a_traffic_spike_is_not_a_storm() {
    for policy in ["naive", "seawall"] {
        let r = run("traffic-spike", policy, &[]);
        let s = &r.series;
        let peak_edge = s.edge_rps.iter().cloned().fold(0.0, f64::max);
        assert!(peak_edge > 2.5 * s.edge_rps[5], "the spike is there: {:?}", s.edge_rps);
        // Every attempt at the database is a first attempt: no amplification.
        assert_eq!(r.attempts_per_call, 1.0, "{policy}");
        assert!(r.recovered() && r.goodput_before > 0.99, "{policy}: {r:?}");
        assert_eq!(s.budget_refusals_rps.iter().sum::<f64>(), 0.0);
    }
}

#[test]
fn index_slowdown_fixed_retries_stay_down_and_seawall_recovers() {
    let fixed = run("index-slowdown", "fixed", &["duration_s=70"]);
    assert!(!fixed.recovered(), "{:?}", fixed.series.goodput_rps);
    assert!(fixed.peak_amplification > 3.0, "{}", fixed.peak_amplification);
    let sw = run("index-slowdown", "seawall", &["duration_s=70"]);
    assert!(sw.recovered() && sw.recovery_s().unwrap() <= 5.0, "{:?}", sw.recovery_s());
    assert!(sw.peak_amplification <= 1.2, "{}", sw.peak_amplification);
}

#[test]
fn tatkal_refreshes_waste_work_that_cancellation_saves() {
    let naive = run("tatkal", "naive", &[]);
    let sw = run("tatkal", "seawall", &[]);
    assert!(naive.wasted_work > 0.5, "{}", naive.wasted_work);
    assert!(sw.wasted_work < naive.wasted_work, "{} vs {}", sw.wasted_work, naive.wasted_work);
    assert!(sw.goodput_after > naive.goodput_after);
}

#[test]
fn verify_before_is_27_times_the_edge_at_the_database_and_after_about_one() {
    let sets = ["edge.rate=200", "duration_s=25"];
    let naive = run("verify", "naive", &sets);
    assert_eq!(naive.peak_amplification, 27.0);
    let sw = run("verify", "seawall", &sets);
    assert!(sw.peak_amplification <= 1.2, "{}", sw.peak_amplification);
}

#[test]
fn fleet_ratio_reserves_add_up_and_the_grpc_throttle_does_not() {
    // 1,000 instances: per-instance ratio budgets let the fleet retry every failure (3 attempts:
    // 3× at the database); per-instance gRPC throttles spend their tokens once.
    let ratio = run("fleet", "ratio-per-instance", &[]);
    let seawall = run("fleet", "seawall", &[]);
    let control = run("fleet", "ratio-per-instance", &["tier.api.instances=1"]);
    // Database attempts per edge request once the outage is under way (its first seconds spend
    // the credit a ratio budget saved over its 10 s window).
    let late = |r: &Run| {
        let (db, edge) = (&r.series.bottom_attempts_rps[14..20], &r.series.edge_rps[14..20]);
        db.iter().sum::<f64>() / edge.iter().sum::<f64>()
    };
    eprintln!(
        "fleet: peak {:.2} / {:.2} / {:.2}, late {:.2} / {:.2} / {:.2} (ratio x1000, seawall, ratio x1)",
        ratio.peak_amplification,
        seawall.peak_amplification,
        control.peak_amplification,
        late(&ratio),
        late(&seawall),
        late(&control)
    );
    assert!(ratio.peak_amplification > 2.5, "{}", ratio.peak_amplification);
    assert!(late(&ratio) > 2.5, "{}", late(&ratio));
    assert!(seawall.peak_amplification < 2.0, "{}", seawall.peak_amplification);
    assert!(late(&seawall) < 1.05, "{}", late(&seawall));
    // One instance with the same budget: 10 % + 10 retries/s bounds the fleet.
    assert!(late(&control) < 1.2, "{}", late(&control));
}
