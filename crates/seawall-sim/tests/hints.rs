//! Server hints reach the client policy: the `Retry-After` a protected tier's admission control
//! sends with a shed request (passed up through the fail-fast layers as the tower layers pass
//! it) changes what the owner does, so a run that honours it differs from one that ignores it.

use seawall_report::Run;
use seawall_sim::{load, simulate};

/// `verify` at 2× the database's capacity (200 rps at one 10 ms worker), so the database's
/// admission control sheds all along, not only during the outage.
fn verify_2x(policy: &str, extra: &[&str]) -> Run {
    let mut sets = vec!["edge.rate=200", "duration_s=25", "tier.db.workers=1"];
    sets.extend_from_slice(extra);
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = load("verify", &sets).unwrap();
    simulate(&s, &[policy.to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

#[test]
fn the_seawall_preset_differs_when_it_ignores_retry_after() {
    let honoured = verify_2x("seawall", &[]);
    let ignored = verify_2x("seawall", &["policies.seawall.honour_hints=false"]);
    assert!(honoured.series.shed_rps.iter().sum::<f64>() > 100.0, "the database sheds");
    // The budget already bounds retries, so the effect is small, but it is there.
    assert_ne!(honoured.series.goodput_rps, ignored.series.goodput_rps);
    assert_ne!(honoured.series.shed_rps, ignored.series.shed_rps);
}

#[test]
fn without_a_budget_retry_after_is_what_keeps_the_shed_tier_serving() {
    let budgetless = "policies.seawall.budget=none";
    let honoured = verify_2x("seawall", &[budgetless]);
    let ignored = verify_2x("seawall", &[budgetless, "policies.seawall.honour_hints=false"]);
    // Retries that wait the 1-5 s they were told come back when there is room; retries after
    // 50 ms of backoff come back into the same standing queue and are shed again.
    let shed = |r: &Run| r.series.shed_rps.iter().sum::<f64>();
    let db = |r: &Run| r.series.bottom_attempts_rps.iter().sum::<f64>();
    assert!(shed(&ignored) > 1.5 * shed(&honoured), "{} vs {}", shed(&ignored), shed(&honoured));
    assert!(db(&ignored) > db(&honoured), "{} vs {}", db(&ignored), db(&honoured));
    assert!(
        honoured.goodput_after > ignored.goodput_after + 0.2,
        "{} vs {}",
        honoured.goodput_after,
        ignored.goodput_after
    );
}
