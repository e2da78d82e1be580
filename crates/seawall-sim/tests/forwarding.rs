//! A tier that only forwards (a load balancer: unlimited workers, no service time, one
//! dependency) keeps no record per attempt: the call it makes downstream stands for the attempt
//! (5 M records fewer in a synchronised herd). That must change nothing but memory.

use seawall_sim::{EngineStats, Scenario, run_policy};

/// An edge that retries, through a balancer, into an app that a latency fault makes slower than
/// the edge's per-attempt timeout, then a restart of the app: timeouts and retries at two layers,
/// the edge giving up (200 ms) while the balancer's call runs on (400 ms), so work below it that
/// nobody waits for (orphans), and, with cancellation, work dropped at every tier.
const THROUGH_A_BALANCER: &str = r#"
name = "through-a-balancer"
description = "an overloaded app behind a load balancer"
duration_s = 12

[edge]
rate = 400
deadline_ms = 1500
retries = true
timeout_ms = 200

[[tier]]
name = "lb"
timeout_ms = 400

[[tier]]
name = "app"
workers = 8
service = { mean_ms = 20 }
queue_limit = 300

[[fault]]
kind = "latency"
tier = "app"
start_s = 3
duration_s = 4
p50_ms = 60
p99_ms = 200

[[fault]]
kind = "restart"
tier = "app"
start_s = 8
duration_s = 2
cold_factor = 2

[policies.fixed-cancel]
base = "fixed"
cancellation = true
deadline_propagation = true
pushback = true
"#;

fn run(policy: &str, sets: &[&str]) -> (seawall_report::Run, EngineStats) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = Scenario::parse("through-a-balancer", THROUGH_A_BALANCER, &sets).unwrap();
    run_policy(&s, policy, 1, &mut |_| {}).unwrap()
}

/// The same balancer with a worker limit it never reaches is an ordinary tier, with a record
/// per attempt: the whole run (series, wasted work, events) must be the same, under policies
/// with and without cancellation and jitter, while the forwarding one holds only the app's
/// attempts. Red if a forwarded attempt's answer reaches a caller that no longer waits for it
/// (`forwarded_done` without its `c.job` check), if work below a forwarded attempt whose caller
/// has gone is not found orphaned (`orphaned` answering `false` at `Parent::Attempt`: less
/// wasted work), or if cancelling a forwarded attempt leaves its call running
/// (`cancel_attempt` doing nothing for one).
#[test]
fn a_forwarding_tier_changes_nothing_but_the_records_it_keeps() {
    for policy in ["naive", "fixed", "fixed-cancel", "jitter", "budget"] {
        let (forwarded, fst) = run(policy, &[]);
        let (kept, kst) = run(policy, &["tier.lb.workers=1000000"]);
        assert!(forwarded.wasted_work > 0.0, "{policy}: no orphaned work to find");
        assert_eq!(forwarded, kept, "{policy}");
        assert_eq!((fst.events, fst.popped), (kst.events, kst.popped), "{policy}");
        assert_eq!(fst.peak_calls, kst.peak_calls, "{policy}");
        assert!(fst.peak_jobs * 3 < kst.peak_jobs * 2, "{policy}: {fst:?} against {kst:?}");
    }
}
