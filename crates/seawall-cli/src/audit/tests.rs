//! Unit tests of the audit → simulator bridge: path choice, layout of stacked places, the folded
//! policy and its notes.

use std::path::Path;

use seawall_audit::graph;

use super::fault::Fault;
use super::layout::{ServiceTime, layout};
use super::scenario::{self, CONFIGURED};
use super::simulate::choose;

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

fn g() -> seawall_audit::model::Graph {
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
fn the_scenario_parses_and_lists_its_approximations() {
    let g = g();
    let path = &choose(&g, Some("db"))[0];
    let fault = Fault::parse("outage:5@2").unwrap();
    let ps = scenario::build(&g, path, &fault, 10.0).unwrap();
    assert_eq!((ps.audited_worst, ps.simulated_worst), (27, 27));
    let sc = seawall_sim::Scenario::parse("t", &ps.text, &[]).unwrap();
    assert_eq!(sc.tiers.len(), 3);
    assert_eq!(sc.faults.len(), 2, "the outage, then a cold restart");
    let policy = sc.policy(CONFIGURED).unwrap();
    assert_eq!(policy.attempts, 3);
    let notes = ps.notes.join("\n");
    assert!(notes.contains("1 of 3 retrying places have a budget"), "{notes}");
    assert!(notes.contains("db comes back cold"), "{notes}");
}

#[test]
fn mixed_caps_are_folded_and_said() {
    let g = g();
    let path = &choose(&g, Some("cache"))[0];
    for f in ["fail:1", "slow:1", "gc:1"] {
        let ps = scenario::build(&g, path, &Fault::parse(f).unwrap(), 5.0).unwrap();
        seawall_sim::Scenario::parse("t", &ps.text, &[]).unwrap();
        assert_eq!((ps.audited_worst, ps.simulated_worst), (6, 9), "{f}");
        assert!(ps.notes.iter().any(|n| n.contains("one attempt cap per run")), "{f}");
        assert!(ps.notes.iter().any(|n| n.contains("cache has no capacity_rps")), "{f}");
    }
}
