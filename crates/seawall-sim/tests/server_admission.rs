//! A protected tier's admission as `ShedLayer`'s: its in-flight limit (`server_limit`, fixed
//! at its workers or adaptive, Gradient2, `ShedLayer::gradient`: the core's
//! `seawall::admission::Limit`) and the operator's knob (`[[operator]]`, `ShedLayer`'s
//! `with_admission`: the core's `seawall::admission::cut_by`).

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

/// `verify` with the operator turning the database's admission knob to `percent` from 5 s for
/// 5 s (before the fault at 10 s), under `policy`.
fn verify_cut(policy: &str, percent: u8) -> Run {
    let entry = seawall_sim::catalog::get("verify").unwrap();
    let text = format!(
        "{}\n[[operator]]\ntier = \"db\"\nstart_s = 5\nduration_s = 5\nadmit_percent = {percent}\n",
        entry.text
    );
    let s = seawall_sim::Scenario::parse("verify-cut.toml", &text, &[]).unwrap();
    simulate(&s, &[policy.to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

#[test]
fn the_operator_knob_refuses_its_share_at_a_protected_tier_only() {
    let shed_in = |r: &Run, a: usize, b: usize| r.series.shed_rps[a..b].iter().sum::<f64>();
    let db_in =
        |r: &Run, a: usize, b: usize| r.series.bottom_attempts_rps[a..b].iter().sum::<f64>();
    let open = verify_cut("seawall", 100);
    let half = verify_cut("seawall", 50);
    // At 100 % nothing is cut: the knob untouched costs nothing, not even a draw.
    assert_eq!(shed_in(&open, 5, 10), 0.0);
    // At 50 % about half the database's arrivals in the window are refused at its door.
    let (shed, arrived) = (shed_in(&half, 5, 10), db_in(&half, 5, 10));
    let share = shed / arrived;
    assert!((0.45..0.55).contains(&share), "{shed} of {arrived} refused: {share:.3}");
    assert_eq!(shed_in(&half, 12, 20), shed_in(&open, 12, 20), "and only in its window");
    // A tier without load shedding has no knob.
    assert_eq!(verify_cut("naive", 50).series, verify_cut("naive", 100).series);
    let bad = seawall_sim::Scenario::parse(
        "bad.toml",
        &format!(
            "{}\n[[operator]]\ntier = \"nope\"\nstart_s = 5\nduration_s = 5\nadmit_percent = 5\n",
            seawall_sim::catalog::get("verify").unwrap().text
        ),
        &[],
    );
    assert!(bad.unwrap_err().to_string().contains("operator[0].tier"));
}

/// An api tier of 8 workers (1 ms of its own work per request) calling a database that takes
/// 40 ms, at 300 requests a second, with `server_slot` set as given, under `seawall`.
fn slot_run(slot: &str) -> Run {
    let text = r#"
name = "slot"
description = "an api of 8 workers calling a 40 ms database at 300 rps"
duration_s = 20
[edge]
rate = 300
deadline_ms = 2000
retries = true
timeout_ms = 1000
[[tier]]
name = "api"
workers = 8
service = { mean_ms = 1 }
queue_limit = 64
timeout_ms = 500
[[tier]]
name = "db"
workers = 1000
service = { mean_ms = 40 }
"#;
    let sets = vec![format!("policies.seawall.server_slot={slot}")];
    let s = seawall_sim::Scenario::parse("slot.toml", text, &sets).unwrap();
    simulate(&s, &["seawall".to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

/// Under `server_slot = "handler"` a request keeps its tier's slot while it waits for its call
/// downstream, as `ShedLayer` holds one around the whole handler: 300 rps × 41 ms needs ~12
/// slots of the api's 8, so the api sheds and goodput falls to what 8 slots carry (8 / 41 ms,
/// ~195 rps). Under "service" (the default) the api's work is 1 ms and nothing is shed. Red if
/// the held slot is freed at the end of local work (`held` always false: both runs alike), or
/// never freed (the api stops serving after its first 8 requests).
#[test]
fn a_slot_held_across_the_call_downstream_caps_the_tier_as_shed_layer_does() {
    let (service, handler) = (slot_run("service"), slot_run("handler"));
    let shed = |r: &Run| r.series.shed_rps.iter().sum::<f64>();
    assert_eq!(shed(&service), 0.0, "8 workers carry 300 rps of 1 ms work");
    assert!(service.goodput_before > 0.99, "{}", service.goodput_before);
    assert!(shed(&handler) > 1_000.0, "shed {}", shed(&handler));
    let served = handler.series.goodput_rps[5..].iter().sum::<f64>() / 15.0;
    assert!((150.0..215.0).contains(&served), "8 slots of ~41 ms serve ~195 rps, got {served:.0}");
    let bad = seawall_sim::Scenario::parse(
        "bad.toml",
        seawall_sim::catalog::get("verify").unwrap().text,
        &["policies.seawall.server_slot=thread".to_string()],
    );
    assert!(bad.unwrap_err().to_string().contains("server_slot"));
}
