//! The audited paths as simulator scenarios: what a fault at each dependency does over time,
//! under the graph's own settings and under seawall's (the `simulate` feature, which brings in
//! `seawall-sim`).
//!
//! This reads the audit's typed graph and path list (never the file again), builds one scenario
//! per path in code ([`build`], a [`seawall_sim::scenario::ScenarioFile`]) and leaves validation
//! to `seawall_sim::Scenario::new`, like any scenario file. The "as configured" policy
//! ([`CONFIGURED`]) gives every client layer of the path its own settings; what remains
//! approximate is listed in the [`PathScenario::notes`].
//!
//! Which paths ([`choose`]): for every dependency (a service that calls nothing; every path's
//! last service when the graph has no such leaf), the path into it with the largest worst-case
//! multiplier — the one the fault hurts most — largest first, at most [`MAX_PATHS`].
//!
//! ```
//! use seawall_audit::graph;
//! use seawall_audit::simulate::{CONFIGURED, Fault, build, choose};
//! use std::path::Path;
//!
//! let toml = "[services.app]\nentry = true\nrps = 50\n[services.db]\ncapacity_rps = 100\n\
//!             [[calls]]\nfrom = \"app\"\nto = \"db\"\n\
//!             [[calls.retries]]\nplace = \"app\"\nattempts = 3\n";
//! let g = graph::parse(Path::new("g.toml"), toml).unwrap();
//! let path = &choose(&g, None)[0];
//! let ps = build(&g, path, &Fault::parse("fail:5@2").unwrap(), 10.0).unwrap();
//! assert_eq!((ps.label.as_str(), ps.audited_worst), ("app → db", 3));
//! let scenario = seawall_sim::Scenario::new(ps.file).unwrap();
//! let results =
//!     seawall_sim::simulate(&scenario, &[CONFIGURED.into()], 1, &mut |_, _| {}).unwrap();
//! assert!(results.runs[0].peak_amplification > 1.0);
//! ```

mod fault;
mod layout;
mod scenario;
#[cfg(test)]
mod tests;

pub use fault::{DEFAULT_START_S, Fault, FaultKind, SLOW_FACTOR};
pub use scenario::{COLD_S, CONFIGURED, PathScenario, build};

use crate::analysis;
use crate::model::Graph;

/// Most paths simulated in one command: each is two full runs, and a table per path beyond a
/// handful stops being read.
pub const MAX_PATHS: usize = 4;

/// The worst path into each dependency, largest multiplier first (see the module docs).
pub fn choose(graph: &Graph, only: Option<&str>) -> Vec<Vec<usize>> {
    let (all, _) = analysis::paths(graph);
    let worst =
        |p: &[usize]| p.iter().fold(1u64, |a, &i| a.saturating_mul(graph.hops[i].worst_case()));
    let last = |p: &[usize]| p.last().map(|&i| graph.hops[i].to.as_str()).unwrap_or_default();
    let is_leaf = |s: &str| !graph.hops.iter().any(|h| h.from == s);
    let any_leaf = all.iter().any(|p| is_leaf(last(p)));
    let mut best: Vec<Vec<usize>> = Vec::new();
    for p in all {
        let dep = last(&p);
        let wanted = match only {
            Some(name) => dep == name,
            None => !any_leaf || is_leaf(dep),
        };
        if !wanted {
            continue;
        }
        match best.iter_mut().find(|b| last(b) == dep) {
            Some(b) if worst(&p) > worst(b) => *b = p,
            Some(_) => {}
            None => best.push(p),
        }
    }
    best.sort_by(|a, b| worst(b).cmp(&worst(a)).then_with(|| last(a).cmp(last(b))));
    best.truncate(MAX_PATHS);
    best
}
