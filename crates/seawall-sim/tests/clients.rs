//! Per-layer client settings (`[policies.NAME.edge]`, `[policies.NAME.tier.TIER]`): a path whose
//! places are configured differently runs as configured, layer by layer, and a bad setting is an
//! error naming the file and the line or field.

mod common;

use common::amplification_during_fault;
use seawall_report::Run;
use seawall_sim::{Scenario, simulate};

/// Three client layers (edge → app → envoy → db) while the database fails fast for 10 s.
const CHAIN: &str = r#"
name = "chain"
description = "three client layers, each configured its own way"
duration_s = 25
default_policies = ["as-configured", "seawall"]
[edge]
rate = 100
deadline_ms = 10000
retries = true
timeout_ms = 5000
[[tier]]
name = "app"
timeout_ms = 2000
[[tier]]
name = "envoy"
timeout_ms = 1000
[[tier]]
name = "db"
workers = 50
service = { mean_ms = 5 }
[[fault]]
kind = "outage"
mode = "fail"
tier = "db"
start_s = 5
duration_s = 10

[policies.as-configured]
base = "naive"

[policies.as-configured.edge]
attempts = 4

[policies.as-configured.tier.app]
attempts = 3
backoff = "constant"
base_ms = 0

[policies.as-configured.tier.envoy]
attempts = 2
budget = "none"
"#;

fn run(text: &str, policy: &str) -> (Scenario, Run) {
    let s = Scenario::parse("chain.toml", text, &[]).unwrap();
    let r = simulate(&s, &[policy.to_string()], 3, &mut |_, _| {}).unwrap().runs.remove(0);
    (s, r)
}

#[test]
fn four_by_three_by_two_gives_exactly_24_at_the_bottom() {
    let (s, r) = run(CHAIN, "as-configured");
    assert_eq!(amplification_during_fault(&s, &r), 24.0);
    assert_eq!(r.peak_amplification, 24.0);
    // The per-layer settings belong to the policy: seawall on the same path is untouched.
    let (s, sw) = run(CHAIN, "seawall");
    assert!(amplification_during_fault(&s, &sw) <= 1.2);
}

#[test]
fn a_jittered_layer_keeps_the_product_over_the_fault() {
    // Jittered waits move some attempts into the next second, so per second the ratio wobbles;
    // over the whole fault it is still 4 × 3 × 2.
    let text = CHAIN.replace(
        "backoff = \"constant\"\nbase_ms = 0\n",
        "backoff = \"full-jitter\"\nbase_ms = 1\ncap_ms = 4\n",
    );
    let (s, r) = run(&text, "as-configured");
    let a = amplification_during_fault(&s, &r);
    assert!((a - 24.0).abs() < 0.5, "{a}");
}

#[test]
fn a_layer_budget_bounds_that_layer_only() {
    // The bottom layer's gRPC throttle runs dry in the first second of the fault (10 tokens,
    // −1 per failure): from then on each envoy call makes one attempt, 4 × 3 × 1 = 12.
    let text = CHAIN.replace("budget = \"none\"", "budget = \"grpc\"");
    let (s, r) = run(&text, "as-configured");
    let a = amplification_during_fault(&s, &r);
    assert!(a > 12.0 && a < 13.0, "{a}");
}

#[test]
fn a_layer_timeout_replaces_the_tier_timeout() {
    let text = CHAIN.replace("attempts = 2\n", "attempts = 2\ntimeout_ms = 0.5\n");
    let e = Scenario::parse("chain.toml", &text, &[]).unwrap_err().to_string();
    assert!(e.contains("chain.toml: policies.as-configured.tier.envoy.timeout_ms"), "{e}");
    let text = CHAIN.replace("attempts = 2\n", "attempts = 2\ntimeout_ms = 300\n");
    let (_, r) = run(&text, "as-configured");
    assert_eq!(r.peak_amplification, 24.0);
}

#[test]
fn bad_layer_settings_name_file_and_line_or_field() {
    let typo = CHAIN.replace("attempts = 3\n", "atempts = 3\n");
    let line = typo.lines().position(|l| l.starts_with("atempts")).unwrap() + 1;
    let e = Scenario::parse("chain.toml", &typo, &[]).unwrap_err().to_string();
    assert!(e.starts_with(&format!("chain.toml:{line}:")) && e.contains("atempts"), "{e}");

    let range = CHAIN.replace("attempts = 2\n", "attempts = 11\n");
    let e = Scenario::parse("chain.toml", &range, &[]).unwrap_err().to_string();
    assert!(e.contains("chain.toml: policies.as-configured.tier.envoy"), "{e}");

    let neg = CHAIN.replace("base_ms = 0\n", "base_ms = -1\n");
    let e = Scenario::parse("chain.toml", &neg, &[]).unwrap_err().to_string();
    assert!(e.contains("policies.as-configured.tier.app.base_ms"), "{e}");

    let bottom = CHAIN.replace("tier.envoy]", "tier.db]");
    let e = Scenario::parse("chain.toml", &bottom, &[]).unwrap_err().to_string();
    assert!(e.contains("tier.db: expected a tier that calls another"), "{e}");

    let unknown = CHAIN.replace("tier.envoy]", "tier.enovy]");
    assert!(Scenario::parse("chain.toml", &unknown, &[]).is_err());
}

#[test]
fn set_reaches_layer_settings() {
    let sets = ["policies.as-configured.tier.envoy.attempts=3".to_string()];
    let s = Scenario::parse("chain.toml", CHAIN, &sets).unwrap();
    let r = simulate(&s, &["as-configured".to_string()], 3, &mut |_, _| {}).unwrap();
    assert_eq!(r.runs[0].peak_amplification, 36.0);
}

/// Each budget at the envoy layer, with the figure it gives (seed 3; the run is deterministic,
/// so a band of ±2 % only absorbs float summation order): the gRPC throttle and AWS's retry
/// quota drain within the fault and take the envoy's second attempt away (24 → 12); the ratio
/// budget (10 % of requests, plus its floor of 10 retries a second) lets a little more through;
/// Envoy's budget never binds here — its floor of 3 concurrent retries is never reached by a
/// database that fails at once (no retry is ever in flight for long); adaptive throttling also
/// refuses first attempts locally (SRE book, ch. 21) and remembers two minutes of failures,
/// longer than this run, so it cuts deepest and the run does not recover. Red if a kind is built
/// as another (each pair of kinds differs by more than the band) or does not reach the layer.
#[test]
fn every_budget_kind_runs_at_a_layer() {
    let expected = [
        ("grpc", 12.00, true),
        ("aws", 12.03, true),
        ("ratio", 13.31, true),
        ("envoy", 24.0, true),
    ];
    for (kind, want, recovers) in expected.into_iter().chain([("adaptive", 3.17, false)]) {
        let text = CHAIN.replace("budget = \"none\"", &format!("budget = \"{kind}\""));
        let (s, r) = run(&text, "as-configured");
        let a = amplification_during_fault(&s, &r);
        assert!((a / want - 1.0).abs() < 0.02, "{kind}: {a}, expected {want}");
        assert_eq!(r.recovered(), recovers, "{kind}");
    }
}
