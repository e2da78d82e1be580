//! `seawall detect --scrape` on one server alone: the dependency of a running `seawall lab`
//! stack, judged by its door (arrivals by attempt number, as the tiers' `Request-Attempt`
//! headers say). The real `seawall lab` binary runs each stack; `detect` reads only the
//! dependency's page. The baseline (every tier retrying) is called a storm within 5 s of the
//! fault and not before; the seawall stack (one retrying owner, a budget) never; the baseline
//! under a rising load without a fault never. The door's retry share is what decides: with it
//! read as 0 the baseline is not called.

mod detect_support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use detect_support::{TempDir, lab_nodes, small_lab, text, verdicts};

const AT: f64 = 10.0;
const FAULT: f64 = 4.0;
const DURATION: f64 = 20.0;
const STORMS: [&str; 2] = ["retry_storm", "metastable"];

/// The dependency's `/metrics` URL once the lab has written `nodes.json`, and when it did.
fn dependency(out: &Path, lab: &mut std::process::Child) -> (String, Instant) {
    let (v, up) = lab_nodes(out, lab);
    let node = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["role"] == "dependency")
        .expect("a dependency node");
    (node["metrics"].as_str().unwrap().to_string(), up)
}

/// Runs one stack and watches its dependency alone: `(t, verdict)`, the fault's `t`, and the
/// callers its door named (its `lab-caller` headers, counted by `ShedLayer::with_callers`).
fn watch(root: &Path, stack: &str, load: &[&str]) -> (Vec<(f64, String)>, f64, Vec<String>) {
    let out = root.join(format!("{stack}{}", load.join("")));
    let mut lab = small_lab(stack, load, AT, DURATION, &[], &out);
    let (url, up) = dependency(&out, &mut lab);
    let intervals = format!("{:.0}", DURATION - 3.0);
    let started = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["detect", "--scrape", &url, "--interval", "1", "--warmup", "4", "--json"])
        .args(["--max-intervals", &intervals])
        .output()
        .unwrap();
    let _ = lab.kill();
    let _ = lab.wait();
    assert!(o.status.success(), "{stack}: {}", text(&o));
    let vs = verdicts(&o.stdout);
    let mut callers: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(|v| {
            v["targets"][0]["top_callers"].as_array().cloned().unwrap_or_default().into_iter()
        })
        .filter_map(|c| c["caller"].as_str().map(String::from))
        .collect();
    callers.sort();
    callers.dedup();
    // detect's t = 0 is its first interval's start, just after `started`.
    (vs, AT - started.duration_since(up).as_secs_f64(), callers)
}

fn first_storm(vs: &[(f64, String)]) -> Option<f64> {
    vs.iter().find(|(_, k)| STORMS.contains(&k.as_str())).map(|(t, _)| *t)
}

#[test]
#[ignore = "slow: three lab runs of 20 s"]
fn the_dependency_alone_tells_a_storm_by_its_callers_attempt_numbers() {
    let root = TempDir::new("lab-door");
    let fault = ["--rate", "40", "--fault", &format!("fail:{FAULT}")];

    let (vs, at, callers) = watch(&root.0, "baseline", &fault);
    eprintln!("baseline (fault at t={at:.1}): {vs:?}");
    // The dependency has one caller, the order service, and its door names it.
    assert_eq!(callers, ["order"], "baseline: the door's callers");
    let called = first_storm(&vs).unwrap_or_else(|| panic!("baseline: no storm: {vs:?}"));
    // A verdict's t is the start of its 1 s interval: the fault may land inside it.
    assert!(called > at - 1.0, "baseline: storm before the fault: {vs:?}");
    assert!(called <= at + 5.0, "baseline: storm {:.1} s after the fault", called - at);

    let (vs, at, _) = watch(&root.0, "seawall", &fault);
    eprintln!("seawall (fault at t={at:.1}): {vs:?}");
    assert!(first_storm(&vs).is_none(), "seawall called a storm: {vs:?}");
    let judged = vs.iter().filter(|(t, k)| *t > at && k != "learning").count();
    assert!(judged >= 4, "seawall: too few judged intervals after the fault: {vs:?}");

    // A load rising 2.5× over the run, within the dependency's capacity, and no fault.
    let (vs, _, _) =
        watch(&root.0, "baseline", &["--rate", "16", "--ramp-to", "40", "--fault", "none"]);
    eprintln!("baseline, rising load, no fault: {vs:?}");
    assert!(first_storm(&vs).is_none(), "a rising load without a fault called a storm: {vs:?}");
}
