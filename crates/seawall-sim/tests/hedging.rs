//! Hedging at a client layer (gRFC A6 `hedgingPolicy`, the core's `seawall::grpc::HedgeState`):
//! a copy every `hedge_delay_ms` until one succeeds, the losers cancelled, the copies spending
//! from the layer's token bucket.
//!
//! Dean and Barroso ("The Tail at Scale", CACM 2013) hedge after the 95th-percentile latency:
//! about 5 % more requests for a much shorter tail. Here a log-normal service (p50 10 ms, p99
//! 100 ms, so p95 ≈ 51 ms) under an 80 ms deadline.
//!
//! What would break these tests: no second copy (the tail's misses stay), copies sent without
//! waiting for the delay (attempts per call near 2), losers left running (wasted work), or
//! copies that do not spend from the budget (the outage's load with a throttle stays at
//! max-attempts × the offered rate).

mod common;

use common::{run_file as run, scenario_file as scenario};
use seawall_report::Run;

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// One heavy-tailed tier called straight from the edge's retrying client; the fault is off
/// unless a test turns it on.
const TAIL: &str = r#"
name = "tail"
description = "a heavy-tailed dependency under a tight deadline"
duration_s = 40
[edge]
rate = 200
deadline_ms = 80
retries = true
[[tier]]
name = "db"
workers = 200
service = { p50_ms = 10, p99_ms = 100 }
[[fault]]
kind = "outage"
mode = "fail"
tier = "db"
start_s = 10
duration_s = 0
[policies.plain]
base = "budget"
attempts = 1
cancellation = true
[policies.hedged]
base = "budget"
attempts = 1
cancellation = true
hedge_max_attempts = 2
hedge_delay_ms = 51
[policies.hedged-unbudgeted]
base = "budget"
budget = "none"
cancellation = true
hedge_max_attempts = 3
hedge_delay_ms = 51
"#;

fn share_good(r: &Run) -> f64 {
    mean(&r.series.goodput_rps[2..38]) / mean(&r.series.edge_rps[2..38])
}

fn attempts_per_call(r: &Run, from: usize, to: usize) -> f64 {
    mean(&r.series.tier_attempts_rps[0][from..to]) / mean(&r.series.edge_rps[from..to])
}

#[test]
fn hedging_at_p95_cuts_the_tail_for_about_five_percent_more_load() {
    let path = scenario("tail", TAIL);
    let plain = run(&path, "plain", &[]);
    let hedged = run(&path, "hedged", &[]);
    let (gp, gh) = (share_good(&plain), share_good(&hedged));
    let (ap, ah) = (attempts_per_call(&plain, 2, 38), attempts_per_call(&hedged, 2, 38));
    eprintln!(
        "within 80 ms: plain {gp:.4} ({ap:.3} attempts/call), hedged {gh:.4} ({ah:.3}), \
         wasted {:.3}",
        hedged.wasted_work
    );
    // Log-normal σ = ln 10 / 2.326: P(X > 80 ms) ≈ 1.8 %; hedged, a miss needs the second copy
    // (sent at 51 ms) to take more than 29 ms too: ≈ 0.3 %.
    assert!(1.0 - gp > 0.01, "the plain tail misses {:.4}", 1.0 - gp);
    assert!((1.0 - gh) < (1.0 - gp) / 3.0, "misses: plain {:.4}, hedged {:.4}", 1.0 - gp, 1.0 - gh);
    assert!((ap - 1.0).abs() < 0.01, "plain {ap}");
    assert!((1.03..1.08).contains(&ah), "hedged attempts per call {ah}");
}

#[test]
fn losers_run_on_as_wasted_work_without_cancellation() {
    let path = scenario("tail-orphans", TAIL);
    let kept = run(&path, "hedged", &[]);
    let orphans = run(&path, "hedged", &["policies.hedged.cancellation=false"]);
    eprintln!("wasted: cancelled {:.3}, orphaned {:.3}", kept.wasted_work, orphans.wasted_work);
    // A cancelled loser wastes the work it had done (the slow first copy, cut at the winner's
    // answer); an orphaned one finishes it all for nobody.
    assert!(orphans.wasted_work > kept.wasted_work * 1.3, "{}", orphans.wasted_work);
}

#[test]
fn during_an_outage_hedges_multiply_load_unless_the_throttle_stops_them() {
    let path = scenario("tail-outage", TAIL);
    let outage = ["fault.0.duration_s=10"];
    let unbudgeted = run(&path, "hedged-unbudgeted", &outage);
    let throttled =
        run(&path, "hedged-unbudgeted", &[outage[0], "policies.hedged-unbudgeted.budget=\"grpc\""]);
    let (au, at) = (attempts_per_call(&unbudgeted, 12, 19), attempts_per_call(&throttled, 12, 19));
    eprintln!("attempts per call during the outage: no budget {au:.2}, gRPC throttle {at:.2}");
    // Every copy fails at once (UNAVAILABLE, non-fatal): the next goes at once, up to 3.
    assert!(au > 2.9, "no budget: {au}");
    // The throttle falls to half after five failures and stops every copy after the first.
    assert!(at < 1.05, "throttled: {at}");
    // And it heals: once the outage ends, successes refill the bucket and hedging resumes.
    let after = attempts_per_call(&throttled, 30, 38);
    assert!(after > 1.03, "after: {after}");
}
