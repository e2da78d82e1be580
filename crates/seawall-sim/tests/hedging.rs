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

/// Total edge requests, and those not answered in time, over the whole run.
fn edge_and_misses(r: &Run) -> (f64, f64) {
    let edge: f64 = r.series.edge_rps.iter().sum();
    (edge, edge - r.series.goodput_rps.iter().sum::<f64>())
}

#[test]
fn the_report_counts_hedges_sent_won_cancelled_and_refused() {
    let path = scenario("tail-counts", TAIL);
    let hedged = run(&path, "hedged", &[]);
    let [h] = &hedged.hedging[..] else { panic!("one hedged layer: {:?}", hedged.hedging) };
    let (edge, misses) = edge_and_misses(&hedged);
    eprintln!("{edge} calls, {misses} misses: {h:?}");
    assert_eq!((h.caller.as_str(), h.tier.as_str()), ("edge", "db"));
    // A hedge goes when the first copy is still out at 51 ms, the service's p95: 5 % of calls
    // (± 1 point: 8,000 calls give a standard error of 0.25 points).
    let share = h.sent as f64 / edge;
    assert!((0.04..0.06).contains(&share), "hedges sent per call {share:.4}");
    // Healthy: the token bucket stays full, so no hedge is refused.
    assert_eq!(h.refused, 0);
    // Every hedge either wins, or loses to its first copy (then it is cancelled), or its call
    // misses the deadline (both copies time out): at most one hedge per missed call.
    assert!(h.won + h.cancelled <= h.sent, "{h:?}");
    assert!((h.sent - h.won - h.cancelled) as f64 <= misses, "{h:?}, {misses} misses");
    // The first copy, slower than 51 ms, is usually the tail: the hedge (median 10 ms) mostly
    // answers first.
    assert!(h.won > h.cancelled, "{h:?}");
    assert!(h.cancelled > 0, "{h:?}");
}

#[test]
fn the_throttle_refuses_hedges_during_an_outage() {
    let path = scenario("tail-refused", TAIL);
    let sets = ["fault.0.duration_s=10", "policies.hedged-unbudgeted.budget=\"grpc\""];
    let throttled = run(&path, "hedged-unbudgeted", &sets);
    let unbudgeted = run(&path, "hedged-unbudgeted", &sets[..1]);
    let ([t], [u]) = (&throttled.hedging[..], &unbudgeted.hedging[..]) else { panic!() };
    let outage_calls: f64 = throttled.series.edge_rps[10..20].iter().sum();
    eprintln!("{outage_calls} calls in the outage; throttled {t:?}; unbudgeted {u:?}");
    // Every copy fails at once, so the next is due at once; the bucket, at half after five
    // failures, refuses it for all but the first few calls: about one refusal per call in the
    // outage, and at most one per call (a refusal stops the call's hedges).
    assert!(t.refused as f64 > 0.9 * outage_calls, "{t:?}");
    assert!(t.refused as f64 <= outage_calls + 0.1 * outage_calls, "{t:?}");
    // Without a budget nothing is refused and each failing call sends both hedges.
    assert_eq!(u.refused, 0);
    assert!(u.sent as f64 > 1.9 * outage_calls, "{u:?}");
}

#[test]
fn a_run_without_hedging_reports_none() {
    let path = scenario("tail-plain", TAIL);
    let plain = run(&path, "plain", &[]);
    assert!(plain.hedging.is_empty(), "{:?}", plain.hedging);
    let results = seawall_report::Results {
        scenario: "tail".into(),
        description: String::new(),
        seed: 1,
        source: seawall_report::Source::Simulation,
        duration_s: 40.0,
        fault: None,
        tiers: vec!["db".into()],
        runs: vec![plain],
    };
    assert!(!results.to_json().contains("hedging"));
    assert_eq!(seawall_report::render_hedging(&results), "");
    assert!(!seawall_report::render_html(&results).contains("Hedging"));
}
