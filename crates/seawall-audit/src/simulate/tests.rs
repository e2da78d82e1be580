//! Unit tests of the audit → simulator bridge: path choice, layout of stacked places, the
//! per-place policy and its notes.

use std::path::Path;

use crate::graph;
use seawall_sim::scenario::{BackoffKind, BudgetKind};

use super::choose;
use super::fault::Fault;
use super::layout::{ServiceTime, layout};
use super::scenario::{self, CONFIGURED};

const GRAPH: &str = r#"
[services.mobile]
entry = true
rps = 100
[services.api]
p50_ms = 10
p99_ms = 50
[services.db]
capacity_rps = 500
cold_capacity_rps = 250
p50_ms = 5
p99_ms = 5
[services.cache]

[[calls]]
from = "mobile"
to = "api"
timeout_ms = 3000
[[calls.retries]]
place = "app"
attempts = 3
per_try_timeout_ms = 1000

[[calls]]
from = "api"
to = "db"
[[calls.retries]]
place = "app"
attempts = 3
[[calls.retries]]
place = "sdk"
attempts = 3
jitter = true
per_try_timeout_ms = 200
budget = { kind = "aws" }
[[calls.retries]]
place = "mesh"
attempts = 1

[[calls]]
from = "api"
to = "cache"
[[calls.retries]]
place = "app"
attempts = 2
"#;

fn g() -> crate::model::Graph {
    graph::parse(Path::new("t.toml"), GRAPH).unwrap()
}

#[test]
fn the_worst_path_into_each_leaf_is_chosen_largest_first() {
    let g = g();
    let chosen = choose(&g, None);
    let last: Vec<&str> = chosen.iter().map(|p| g.hops[*p.last().unwrap()].to.as_str()).collect();
    assert_eq!(last, ["db", "cache"]);
    assert_eq!(choose(&g, Some("api")).len(), 1);
    assert!(choose(&g, Some("nope")).is_empty());
}

#[test]
fn stacked_places_become_pass_through_tiers() {
    let g = g();
    let path = &choose(&g, Some("db"))[0];
    let l = layout(&g, path).unwrap();
    assert_eq!((l.edge.attempts, l.edge.per_try_ms), (3, Some(1000.0)));
    assert_eq!(l.deadline_ms, Some(3000.0));
    let names: Vec<&str> = l.tiers.iter().map(|t| t.name.as_str()).collect();
    // The mesh makes one attempt: it adds no load and no tier.
    assert_eq!(names, ["api", "api/sdk", "db"]);
    assert_eq!(l.tiers[1].workers, 0);
    assert_eq!(l.tiers[1].client.as_ref().unwrap().per_try_ms, Some(200.0));
    // 500 rps × 5 ms = 2.5 → 3 workers.
    assert_eq!((l.tiers[2].workers, l.tiers[2].service), (3, ServiceTime::LogNormal(5.0, 5.0)));
}

#[test]
fn every_place_keeps_its_own_settings() {
    let g = g();
    let path = &choose(&g, Some("db"))[0];
    let fault = Fault::parse("outage:5@2").unwrap();
    let ps = scenario::build(&g, path, &fault, 10.0).unwrap();
    assert_eq!((ps.audited_worst, ps.simulated_worst), (27, 27));
    let sc = seawall_sim::Scenario::new(ps.file.clone()).unwrap();
    assert_eq!(sc.tiers.len(), 3);
    assert_eq!(sc.faults.len(), 2, "the outage, then a cold restart");
    let policy = sc.policy(CONFIGURED).unwrap();
    let edge = policy.edge_client.as_ref().unwrap();
    assert_eq!((edge.attempts, edge.backoff), (Some(3), Some(BackoffKind::None)));
    assert_eq!((edge.budget, edge.timeout_ms), (Some(BudgetKind::None), Some(1000.0)));
    // api's app code: 3 plain attempts, no budget, no per-try timeout of its own.
    let app = &policy.tier_clients["api"];
    assert_eq!(
        (app.attempts, app.backoff, app.budget),
        (Some(3), Some(BackoffKind::None), Some(BudgetKind::None))
    );
    assert_eq!(app.timeout_ms, None);
    // The SDK below it: 3 jittered attempts under its own AWS quota, 200 ms per try.
    let sdk = &policy.tier_clients["api/sdk"];
    assert_eq!((sdk.attempts, sdk.backoff), (Some(3), Some(BackoffKind::FullJitter)));
    assert_eq!(
        (sdk.base_ms, sdk.budget, sdk.timeout_ms),
        (Some(50.0), Some(BudgetKind::Aws), Some(200.0))
    );
    let notes = ps.notes.join("\n");
    // The AWS quota's bound is the core's own: nothing to reconcile for the SDK.
    assert!(!notes.contains("runs as the core's"), "{notes}");
    assert!(notes.contains("db comes back cold"), "{notes}");
    for gone in ["one attempt cap", "majority", "have a budget"] {
        assert!(!notes.contains(gone), "{gone}: {notes}");
    }
}

#[test]
fn the_product_of_the_places_is_the_audited_worst_case() {
    let g = g();
    let path = &choose(&g, Some("cache"))[0];
    for f in ["fail:1", "slow:1", "gc:1"] {
        let ps = scenario::build(&g, path, &Fault::parse(f).unwrap(), 5.0).unwrap();
        let sc = seawall_sim::Scenario::new(ps.file.clone()).unwrap();
        assert_eq!((ps.audited_worst, ps.simulated_worst), (6, 6), "{f}");
        let policy = sc.policy(CONFIGURED).unwrap();
        assert_eq!(policy.edge_client.as_ref().unwrap().attempts, Some(3), "{f}");
        assert_eq!(policy.tier_clients["api"].attempts, Some(2), "{f}");
        assert!(ps.notes.iter().any(|n| n.contains("cache has no capacity_rps")), "{f}");
    }
}

#[test]
fn budgets_differing_from_the_cores_defaults_are_said() {
    let text =
        GRAPH.replace("budget = { kind = \"aws\" }", "budget = { kind = \"ratio\", ratio = 0.2 }");
    let g = graph::parse(Path::new("t.toml"), &text).unwrap();
    let path = &choose(&g, Some("db"))[0];
    let ps = scenario::build(&g, path, &Fault::parse("fail:1").unwrap(), 5.0).unwrap();
    let sc = seawall_sim::Scenario::new(ps.file.clone()).unwrap();
    let sdk = &sc.policy(CONFIGURED).unwrap().tier_clients["api/sdk"];
    assert_eq!(sdk.budget, Some(BudgetKind::Ratio));
    assert!(
        ps.notes.iter().any(|n| n.contains("ratio 20% runs as the core's 10%")),
        "{:?}",
        ps.notes
    );
}

/// The checkout example's database path without the AWS quota of the order service's SDK: the
/// quota is what holds the configured run near 9× (see tests/audit_simulate.rs); without it the
/// three places multiply to the audited 27.
#[test]
fn checkout_database_without_the_sdk_quota_reaches_27() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../seawall-audit/examples/checkout.toml");
    let g = graph::load(&p).unwrap();
    let path = &choose(&g, Some("database"))[0];
    let ps = scenario::build(&g, path, &Fault::parse("fail:5@5").unwrap(), 20.0).unwrap();
    let mut file = ps.file;
    let layers = file.policies.get_mut(CONFIGURED).unwrap().tier.values_mut();
    let mut quotas: Vec<_> = layers.filter(|c| c.budget == Some(BudgetKind::Aws)).collect();
    assert_eq!(quotas.len(), 1, "one AWS quota");
    quotas[0].budget = Some(BudgetKind::None);
    let sc = seawall_sim::Scenario::new(file).unwrap();
    let r = seawall_sim::simulate(&sc, &[CONFIGURED.to_string()], 1, &mut |_, _| {}).unwrap();
    let peak = r.runs[0].peak_amplification;
    assert!((26.0..=27.5).contains(&peak), "peak {peak}");
}
