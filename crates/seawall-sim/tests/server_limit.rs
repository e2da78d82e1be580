//! `server_limit`: a protected tier's in-flight limit, fixed (its workers) or adaptive
//! (Gradient2, `ShedLayer::gradient`), both the core's `seawall::admission::Limit`.

use seawall_report::Run;
use seawall_sim::{load, simulate};

/// `index-slowdown` under `seawall`, with the given limit: the index's p50 goes from 40 ms to
/// 240 ms for a while, which is what a latency-driven limit reacts to.
fn run(limit: &str) -> Run {
    let sets = vec![format!("policies.seawall.server_limit={limit}")];
    let s = load("index-slowdown", &sets).unwrap();
    simulate(&s, &["seawall".to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

#[test]
fn a_gradient_limit_sheds_where_the_fixed_one_queues() {
    let fixed = run("fixed");
    let gradient = run("gradient");
    let shed = |r: &Run| r.series.shed_rps.iter().sum::<f64>();
    // Same arrivals and service draws (common random numbers): any difference is the limit's.
    // Gradient2 reads the lognormal service times' spread as rising latency and lowers the
    // limit below the workers, so it sheds, before the fault too.
    assert!(shed(&gradient) > shed(&fixed) + 100.0, "{} vs {}", shed(&gradient), shed(&fixed));
    assert!(gradient.goodput_before < fixed.goodput_before, "the price, before the fault");
}

#[test]
fn a_gradient_limit_needs_server_protection() {
    let sets = vec!["policies.naive.server_limit=gradient".to_string()];
    let e = load("bronson", &sets).unwrap_err().to_string();
    assert!(e.contains("policies.naive.server_limit") && e.contains("server_protection"), "{e}");
    let sets = vec!["policies.seawall.server_limit=adaptive".to_string()];
    assert!(load("bronson", &sets).is_err(), "an unknown limit is refused");
}
