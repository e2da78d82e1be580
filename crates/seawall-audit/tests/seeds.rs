//! The classic retry-storm shapes: 27, 243, 64, 27 on one hop, Istio's ×3, and the cure with no
//! findings.

use std::path::Path;

use seawall_audit::report::{PathReport, Report};
use seawall_audit::{analysis, graph};

/// A chain of `services`, each calling the next; the first `retrying` calls retry `attempts`
/// times in app code. `extra` is appended to every call table.
fn chain(services: &[&str], retrying: usize, attempts: u32, extra: &str) -> String {
    let mut t = format!("[services.{}]\nentry = true\nrps = 2000\n", services[0]);
    for s in &services[1..] {
        t += &format!("[services.{s}]\n");
    }
    for (i, w) in services.windows(2).enumerate() {
        t += &format!("[[calls]]\nfrom = \"{}\"\nto = \"{}\"\n{extra}\n", w[0], w[1]);
        let n = if i < retrying { attempts } else { 1 };
        t += &format!("[[calls.retries]]\nplace = \"app\"\nattempts = {n}\n");
    }
    t
}

fn audit(toml: &str) -> Report {
    let g = graph::parse(Path::new("seed.toml"), toml).unwrap_or_else(|e| panic!("{e}"));
    analysis::analyse(&g)
}

fn to<'a>(r: &'a Report, leaf: &str) -> &'a PathReport {
    r.paths.iter().find(|p| p.path.last().map(String::as_str) == Some(leaf)).unwrap()
}

const CHECKOUT: [&str; 4] = ["mobile", "gateway", "orders", "database"];

#[test]
fn three_attempts_at_three_layers_is_27() {
    let r = audit(&chain(&CHECKOUT, 3, 3, ""));
    let p = to(&r, "database");
    assert_eq!(p.worst_case_attempts, 27);
    assert_eq!(p.peak_rps, Some(54_000.0), "the verification test: 2,000 rps × 27");
    assert_eq!(p.bounded_attempts, None, "no budget anywhere");
    assert!(
        r.findings
            .iter()
            .any(|f| f.rule == "SW001" && f.location == "mobile → gateway → orders → database")
    );
}

#[test]
fn five_layers_is_243() {
    let r = audit(&chain(&["a", "b", "c", "d", "e", "db"], 5, 3, ""));
    assert_eq!(to(&r, "db").worst_case_attempts, 243);
}

#[test]
fn four_attempts_at_three_layers_is_64() {
    let r = audit(&chain(&CHECKOUT, 3, 4, ""));
    assert_eq!(to(&r, "database").worst_case_attempts, 64);
}

#[test]
fn app_sdk_and_sidecar_on_one_hop_is_27() {
    let mut t = String::from(
        "[services.orders]\n[services.database]\n[[calls]]\nfrom = \"orders\"\nto = \"database\"\n",
    );
    for place in ["app", "sdk", "mesh"] {
        t += &format!("[[calls.retries]]\nplace = \"{place}\"\nattempts = 3\n");
    }
    let r = audit(&t);
    assert_eq!(r.hops[0].worst_case_attempts, 27);
    assert_eq!(r.hops[0].layers.len(), 3);
    assert_eq!(to(&r, "database").worst_case_attempts, 27);
    assert!(
        r.findings.iter().any(|f| f.rule == "SW001"),
        "three places on one hop are three layers"
    );
}

#[test]
fn istio_default_adds_times_three_to_a_silent_route() {
    let plain = audit(&chain(&CHECKOUT, 1, 3, ""));
    let meshed = audit(&chain(&CHECKOUT, 1, 3, "mesh = \"istio\""));
    let (a, b) =
        (to(&plain, "database").worst_case_attempts, to(&meshed, "database").worst_case_attempts);
    assert_eq!(a, 3);
    assert_eq!(b, 3 * 27, "each of three hops gains Istio's 1 + 2 attempts");
    assert!(meshed.findings.iter().any(|f| f.rule == "SW010"), "implicit retries are listed");
    // Through an imported VirtualService whose route never mentions retries: the same ×3.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let t = "[services.a]\n[services.b]\n[[calls]]\nfrom = \"a\"\nto = \"b\"\n[[calls.import]]\nformat = \"istio\"\nfile = \"istio-retries.yaml\"\nname = \"reviews\"\n";
    let g = graph::parse(&dir.join("inline.toml"), t).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.hops[0].worst_case(), 3);
}

#[test]
fn one_owner_and_fail_fast_elsewhere_is_clean() {
    let mut t = String::from(
        "[services.mobile]\nentry = true\nrps = 2000\n[services.gateway]\n[services.orders]\n[services.database]\ncapacity_rps = 6000\ncold_capacity_rps = 2400\n",
    );
    for (from, to, attempts) in
        [("mobile", "gateway", 1), ("gateway", "orders", 1), ("orders", "database", 3)]
    {
        t += &format!("[[calls]]\nfrom = \"{from}\"\nto = \"{to}\"\ndeadline_propagated = true\n");
        t += &format!(
            "[[calls.retries]]\nplace = \"app\"\nattempts = {attempts}\njitter = true\nbudget = {{ kind = \"ratio\", ratio = 0.1 }}\n"
        );
    }
    let r = audit(&t);
    let p = to(&r, "database");
    assert!(p.worst_case_attempts <= 3);
    assert_eq!(p.bounded_attempts, Some(1.1), "bounded by the 10 % budget");
    assert_eq!(p.bounded_peak_rps, Some(2200.0), "the verification test: 2,000 rps × 1.1");
    assert_eq!(p.survives_cold, Some(true));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn peak_against_cold_capacity() {
    let mut t = chain(&CHECKOUT, 3, 3, "");
    t = t.replace(
        "[services.database]\n",
        "[services.database]\ncapacity_rps = 60000\ncold_capacity_rps = 1200\n",
    );
    let r = audit(&t);
    let p = to(&r, "database");
    assert_eq!((p.survives_warm, p.survives_cold), (Some(true), Some(false)));
    let table = seawall_audit::report::table::render(&r, "seed.toml");
    assert!(
        table.contains("survives cold: no — 54,000 rps against a cold capacity of 1,200"),
        "{table}"
    );
    assert!(r.findings.iter().any(|f| f.rule == "SW011"));
}

/// A graph of more paths than the analysis enumerates says so (SW012), naming the limit.
#[test]
fn a_graph_of_too_many_paths_is_reported_truncated() {
    // 14 diamonds in a row: 2^k paths into the k-th joint, 2^15 in all.
    let mut t = String::from("[services.s0]\nentry = true\nrps = 10\n");
    for k in 1..=14 {
        t += &format!("[services.s{k}]\n[services.a{k}]\n[services.b{k}]\n");
        for mid in ["a", "b"] {
            t += &format!("[[calls]]\nfrom = \"s{}\"\nto = \"{mid}{k}\"\n", k - 1);
            t += &format!("[[calls]]\nfrom = \"{mid}{k}\"\nto = \"s{k}\"\n");
        }
    }
    let r = audit(&t);
    let f = r.findings.iter().find(|f| f.rule == "SW012").expect("SW012");
    assert_eq!(
        f.message,
        format!("more than {} paths; the rest were not analysed", analysis::MAX_PATHS)
    );
    // Control: one diamond is far below the limit.
    let small: String = t.split("[services.s2]").next().unwrap().to_string();
    assert!(!audit(&small).findings.iter().any(|f| f.rule == "SW012"));
}
