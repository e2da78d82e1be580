//! Instances per tier: each instance holds its own policy — budget, breaker, jitter stream — so a
//! ratio budget's per-client reserve of R retries/s becomes N × R fleet-wide, and a fleet of many
//! small clients retries more during an outage than one big client with the same settings.
//!
//! With `servers = "per-instance"` each instance also has its own server (a sidecar or
//! co-located layout): a fault on one instance's server hurts only that instance's share.
//!
//! What would break these tests: sharing one policy among the instances (the engine always picking
//! instance 0) makes every `instances = N` run equal to the one-instance run; ignoring `servers`
//! leaves one pool, which a fault on "replica 0" takes down whole.

mod common;

use common::{run_file, scenario_file};
use seawall_report::Run;
use seawall_sim::{load, simulate};

fn run(scenario: &str, policy: &str, sets: &[&str]) -> Run {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = load(scenario, &sets).unwrap();
    simulate(&s, &[policy.to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

/// Database attempts per second while every query fails (the `verify` outage, 10 s to 20 s).
fn db_rps_during_outage(r: &Run) -> f64 {
    let during = &r.series.bottom_attempts_rps[11..20];
    during.iter().sum::<f64>() / during.len() as f64
}

#[test]
fn a_ratio_budget_reserve_multiplies_with_the_edge_instances() {
    // 200 rps at the edge, the seawall preset with a ratio budget: the edge owns retries
    // (3 attempts; 10 % of requests plus a reserve of 10 retries/s per client), the tiers below
    // fail fast.
    let base = ["edge.rate=200", "duration_s=30", "policies.seawall.budget=ratio"];
    let one = run("verify", "seawall", &base);
    let fleet = run("verify", "seawall", &[&base[..], &["edge.instances=100"]].concat());
    let (one, fleet) = (db_rps_during_outage(&one), db_rps_during_outage(&fleet));
    eprintln!("db attempts/s during the outage: one edge client {one:.0}, 100: {fleet:.0}");
    // One client: 200 first attempts + at most 10 % + 10 retries/s.
    assert!(one <= 200.0 * 1.1 + 10.0 + 15.0, "one client: {one:.0}/s");
    // 100 clients of 2 rps each: the reserves (100 × 10/s) exceed what the attempt cap allows,
    // so the cap binds: about 3 attempts per request.
    assert!(fleet > 500.0, "100 clients: {fleet:.0}/s");
    assert!(fleet <= 200.0 * 3.0 + 15.0, "the attempt cap still binds: {fleet:.0}/s");
}

#[test]
fn a_middle_tier_instances_each_hold_a_budget_of_their_own() {
    // The `budget` preset retries at every layer, here each with a ratio budget.
    let base = ["edge.rate=200", "duration_s=30", "policies.budget.budget=ratio"];
    let one = run("verify", "budget", &base);
    let many = run("verify", "budget", &[&base[..], &["tier.service.instances=50"]].concat());
    let (one, many) = (db_rps_during_outage(&one), db_rps_during_outage(&many));
    eprintln!("db attempts/s during the outage: one service instance {one:.0}, 50: {many:.0}");
    assert!(many > 1.5 * one, "50 service instances: {many:.0}/s vs one: {one:.0}/s");
}

#[test]
fn one_instance_is_the_default_and_runs_are_deterministic() {
    let base = ["edge.rate=200", "duration_s=20"];
    let default = run("verify", "seawall", &base);
    let explicit = run("verify", "seawall", &[&base[..], &["edge.instances=1"]].concat());
    assert_eq!(default.series.bottom_attempts_rps, explicit.series.bottom_attempts_rps);
    let a = run("verify", "seawall", &[&base[..], &["edge.instances=7"]].concat());
    let b = run("verify", "seawall", &[&base[..], &["edge.instances=7"]].concat());
    assert_eq!(a.series.bottom_attempts_rps, b.series.bottom_attempts_rps);
}

#[test]
fn instance_counts_are_checked() {
    for bad in ["edge.instances=0", "edge.instances=10001", "tier.db.instances=2"] {
        let err = load("verify", &[bad.to_string()]).unwrap_err().to_string();
        assert!(err.contains("instances"), "{bad}: {err}");
    }
}

/// Four app instances in front of a database; for 10 s the server of app instance 0 fails every
/// request at once. The edge makes one attempt, so what fails is exactly what that server got.
const SIDECAR: &str = r#"
name = "sidecar"
description = "four app instances, each with its own server"
duration_s = 30
[edge]
rate = 400
deadline_ms = 1000
[[tier]]
name = "app"
workers = 50
instances = 4
servers = "per-instance"
service = { mean_ms = 5 }
timeout_ms = 500
[[tier]]
name = "db"
workers = 100
service = { mean_ms = 5 }
[[fault]]
kind = "outage"
mode = "fail"
tier = "app"
replica = 0
start_s = 10
duration_s = 10
"#;

#[test]
fn a_fault_on_one_instance_server_hurts_only_that_instance_share() {
    let path = scenario_file("sidecar", SIDECAR);
    let per_instance = run_file(&path, "seawall", &[]);
    let random = run_file(&path, "seawall", &["tier.app.balance=\"random\""]);
    // The control: one pool of servers for the four instances, the fault on its only server.
    let pool = run_file(&path, "seawall", &["tier.app.servers=\"pool\""]);
    let (p, r, q) = (per_instance.goodput_during, random.goodput_during, pool.goodput_during);
    eprintln!("goodput during: per-instance {p:.3} (random balance {r:.3}), pool {q:.3}");
    // Round robin over four servers: exactly every fourth request meets the failing one.
    assert!((0.74..0.76).contains(&p), "per-instance, round robin: {p}");
    // A uniform draw: a quarter on average (4,000 requests: a standard error under 0.7 points).
    assert!((0.72..0.78).contains(&r), "per-instance, random: {r}");
    assert!(q < 0.01, "one pool: {q}");
    assert!(per_instance.goodput_before > 0.99 && per_instance.goodput_after > 0.99);
}

#[test]
fn per_instance_servers_with_one_instance_are_the_pool() {
    let path = scenario_file("sidecar-one", SIDECAR);
    let one = ["tier.app.instances=1"];
    let per_instance = run_file(&path, "seawall", &one);
    let pool = run_file(&path, "seawall", &[one[0], "tier.app.servers=\"pool\""]);
    assert_eq!(per_instance, pool);
}

#[test]
fn per_instance_servers_are_checked() {
    let path = scenario_file("sidecar-bad", SIDECAR);
    let path = path.to_str().unwrap();
    let err = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load(path, &sets).unwrap_err().to_string()
    };
    // A replica per instance already: more replicas on top are refused, naming the field.
    let e = err(&["tier.app.replicas=2"]);
    assert!(e.contains("tier[0] (app).replicas") && e.contains("per-instance"), "{e}");
    // A fault's replica names an instance, so it must be below `instances`.
    let e = err(&["fault.0.replica=4"]);
    assert!(e.contains("fault[0].replica") && e.contains("4 instances"), "{e}");
    assert!(load(path, &["fault.0.replica=3".to_string()]).is_ok());
    let e = err(&["tier.app.servers=\"sidecar\""]);
    assert!(e.contains("servers"), "{e}");
}

/// The engine numbers servers with 16 bits, so a scenario holds at most 60,000 over all its
/// tiers, counting a tier's replicas or, with `servers = "per-instance"`, its instances. At the
/// cap it loads; one more is refused with an error that names the cap, whichever way the
/// servers were counted. Red if the check is dropped (or sums only one of the two).
#[test]
fn servers_over_all_tiers_are_capped_at_60000() {
    // Six tiers of 10,000 per-instance servers each is the cap; a last tier of `replicas`
    // servers tips it over by one or stays at it.
    let scenario = |last_replicas: u32| {
        let mut s = String::from(
            "name = \"cap\"\ndescription = \"the server cap\"\nduration_s = 1\n[edge]\nrate = 1\ndeadline_ms = 1000\n",
        );
        for i in 0..6 {
            s += &format!(
                "[[tier]]\nname = \"t{i}\"\nworkers = 1\ninstances = 10000\n\
                 servers = \"per-instance\"\nservice = {{ mean_ms = 1 }}\n"
            );
        }
        s += &format!(
            "[[tier]]\nname = \"db\"\nworkers = 1\nreplicas = {last_replicas}\n\
             service = {{ mean_ms = 1 }}\n"
        );
        s
    };
    // 60,000 + 1: the database's one server is past the cap.
    let over = scenario_file("cap-over", &scenario(1));
    let e = load(over.to_str().unwrap(), &[]).unwrap_err().to_string();
    assert!(e.contains("at most 60000 servers") && e.contains("60001"), "{e}");
    // Through --set, the same check: 5 tiers' worth at the cap, then one instance more.
    let at = ["tier.t5.instances=9999"].map(String::from);
    load(over.to_str().unwrap(), &at).expect("60,000 servers load");
    let e = load(over.to_str().unwrap(), &["tier.db.replicas=2".into(), at[0].clone()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 60000 servers") && e.contains("60001"), "{e}");
}

/// The sidecar layout (at 40 rps, through `--set`) with the database failing too while app
/// instance 0's server does: the app tier retries its database calls under a ratio budget per
/// instance (10 % of requests plus a reserve of 10 retries/s per client).
const DB_DOWN_TOO: &str = r#"
[[fault]]
kind = "outage"
mode = "fail"
tier = "db"
start_s = 10
duration_s = 10
"#;

/// With a server per instance, the instance whose server admitted a request is the one whose
/// client calls the database: instance 0's server fails everything, so instance 0's client
/// gets no requests and spends none of its retry reserve. Three reserves retry, not four. With
/// four pool replicas instead (the same fault on replica 0, the instance drawn apart from the
/// server), all four clients get requests and all four reserves are spent. Red if the engine
/// draws the instance apart from the server with `servers = "per-instance"` too.
#[test]
fn the_instance_whose_server_admitted_a_request_makes_its_calls() {
    let path = scenario_file("sidecar-both-down", &format!("{SIDECAR}{DB_DOWN_TOO}"));
    let base = ["edge.rate=40", "policies.budget.budget=ratio"];
    let per_instance = run_file(&path, "budget", &base);
    let pool = run_file(
        &path,
        "budget",
        &[base[0], base[1], "tier.app.servers=\"pool\"", "tier.app.replicas=4"],
    );
    let (p, q) = (db_rps_during_outage(&per_instance), db_rps_during_outage(&pool));
    eprintln!("database attempts/s during the outage: per instance {p:.1}, pool of 4 {q:.1}");
    // 30 first attempts/s reach the app's clients (three of four servers answer); the retries
    // are bounded by each live client's reserve plus 10 % of its 10 requests/s.
    let first = 30.0;
    assert!(p <= first + 3.0 * (10.0 + 1.0) + 2.0, "per instance: three reserves, got {p:.1}/s");
    assert!(q >= first + 4.0 * 10.0, "pool: four reserves, got {q:.1}/s");
}
