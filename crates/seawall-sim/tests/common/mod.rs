//! What the simulator's integration tests share.
#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};

use seawall_report::Run;
use seawall_sim::{Scenario, load, simulate};

/// Writes `text` as the scenario file `NAME.toml` in this test process's own temporary folder.
pub(crate) fn scenario_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seawall-sim-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// One run of `policy` on the scenario file at `path` with `--set` overrides, seed 1.
pub(crate) fn run_file(path: &Path, policy: &str, sets: &[&str]) -> Run {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = load(path.to_str().unwrap(), &sets).unwrap();
    simulate(&s, &[policy.to_string()], 1, &mut |_, _| {}).unwrap().runs.remove(0)
}

/// Bottom attempts per edge request over the seconds of the fault window.
pub(crate) fn amplification_during_fault(s: &Scenario, r: &Run) -> f64 {
    let (a, b) = s.fault_window().unwrap();
    let sr = &r.series;
    let idx = (0..sr.t.len()).filter(|&i| sr.t[i] >= a && sr.t[i] < b);
    let (bottom, edge) =
        idx.fold((0.0, 0.0), |(x, y), i| (x + sr.bottom_attempts_rps[i], y + sr.edge_rps[i]));
    bottom / edge
}
