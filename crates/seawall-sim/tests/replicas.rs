//! Replicas behind a load balancer. Two claims of the Google SRE book's "Handling Overload"
//! chapter, and the reason least-request balancing exists:
//!
//! - when a few tasks fail, a retry probably lands on a healthy one, so retrying at once is
//!   right, and a budget still stops retries when most fail;
//! - a balancer that looks at load (the less loaded of two random replicas) steers around a slow
//!   replica that random or round-robin balancing keeps feeding.
//!
//! What would break them: a fault that hits every replica whatever its `replica` says (the first
//! test's one-replica run then serves nothing), or least-requests picking at random (the second
//! test's runs then tie).

use seawall_report::Run;
use seawall_sim::{load, simulate};

fn run(sets: &[&str]) -> Run {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = load("verify", &sets).unwrap();
    simulate(&s, &["seawall".to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

#[test]
fn retries_land_on_healthy_replicas_when_a_few_fail_and_stop_when_all_do() {
    // The `verify` database as 20 replicas of 4 workers; its 10 s outage (every query failing)
    // on one replica, or on all.
    let db = ["edge.rate=2000", "tier.db.replicas=20", "tier.db.workers=4"];
    let one_out = [&db[..], &["fault.0.replica=0"]].concat();
    let retried = run(&one_out);
    let single_attempt = run(&[&one_out[..], &["policies.seawall.attempts=1"]].concat());
    let all_out = run(&db);
    // One replica in 20 failing: without retries 1 request in 20 fails; with them almost none.
    assert!(single_attempt.goodput_during < 0.97, "{}", single_attempt.goodput_during);
    assert!(retried.goodput_during > 0.99, "{}", retried.goodput_during);
    // Every replica failing: the budget stops the retries (no amplification), nothing is served.
    assert!(all_out.goodput_during < 0.05, "{}", all_out.goodput_during);
    assert!(all_out.peak_amplification < 1.2, "{}", all_out.peak_amplification);
}

#[test]
fn least_requests_steers_around_a_slow_replica() {
    // 4 replicas of 4 workers (1,600 queries/s) at 1,200/s; for 10 s one replica keeps only a
    // quarter of its workers.
    let base = [
        "edge.rate=1200",
        "tier.db.replicas=4",
        "tier.db.workers=4",
        "fault.0.kind=capacity",
        "fault.0.capacity=0.25",
        "fault.0.replica=0",
    ];
    let with = |b: &str| run(&[&base[..], &[b]].concat()).goodput_during;
    let (random, rr, least) = (
        with("tier.db.balance=random"),
        with("tier.db.balance=round-robin"),
        with("tier.db.balance=least-requests"),
    );
    eprintln!("goodput during: random {random:.3}, round robin {rr:.3}, least requests {least:.3}");
    assert!(least > random + 0.05, "least requests {least} vs random {random}");
    assert!(least > rr + 0.05, "least requests {least} vs round robin {rr}");
}

#[test]
fn replica_settings_are_checked() {
    for bad in [
        "tier.db.replicas=0",
        "tier.db.replicas=1001",
        "fault.0.replica=1",
        "tier.db.balance=\"fastest\"",
    ] {
        assert!(load("verify", &[bad.to_string()]).is_err(), "{bad}");
    }
}
