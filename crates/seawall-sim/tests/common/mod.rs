//! What the simulator's integration tests share.

use seawall_report::Run;
use seawall_sim::Scenario;

/// Bottom attempts per edge request over the seconds of the fault window.
pub(crate) fn amplification_during_fault(s: &Scenario, r: &Run) -> f64 {
    let (a, b) = s.fault_window().unwrap();
    let sr = &r.series;
    let idx = (0..sr.t.len()).filter(|&i| sr.t[i] >= a && sr.t[i] < b);
    let (bottom, edge) =
        idx.fold((0.0, 0.0), |(x, y), i| (x + sr.bottom_attempts_rps[i], y + sr.edge_rps[i]));
    bottom / edge
}
