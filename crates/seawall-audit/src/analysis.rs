//! Paths, multipliers and peak loads: the arithmetic of "if everything fails at once".
//!
//! # The worst case
//!
//! Every place that retries a call multiplies the attempts below it: the app's 3 attempts each
//! go through an SDK making 3, each through a sidecar making 3 — 27 on one hop — and hops
//! multiply along a path (3 × 3 × 3 = 27 from mobile to database, 3⁵ = 243 for five layers).
//! The worst case assumes every attempt fails, which is exactly the outage in which retries hurt.
//!
//! # The bound
//!
//! A budget caps a place's retries at a share `x` of its requests however long the failure
//! lasts, so the place sends at most `1 + x` attempts per call on average (and never more than
//! its cap): a 10 % ratio budget gives 1.1, gRPC throttling `1 + tokenRatio`, an Envoy retry
//! budget `1 + percent/100`, the AWS retry quota 1 + 1/14 (see [`crate::model::Budget::retry_share`]).
//! Places without a budget keep their cap. The bounded multiplier of a path is the product, and is
//! reported only when at least one retrying place on the path has a budget.
//!
//! # Peak load
//!
//! With an entry rate `r`, a path puts `r × multiplier` on its dependency; a dependency's peak
//! is the sum over every path reaching it, compared with its warm and cold capacity. The verdict
//! uses the bounded peak — what arrives while the budgets do their job — which is the worst case
//! wherever no budget applies.

use std::collections::BTreeMap;

use crate::model::Graph;
use crate::report::{DependencyLoad, HopReport, LayerReport, PathReport, Report};

/// At most this many paths are enumerated; graphs with more are reported as truncated.
pub const MAX_PATHS: usize = 10_000;

/// Every path (as hop indices) from every entry point to every service it reaches, without
/// revisiting a service (a cycle is cut where it closes). The flag is true when truncated.
pub fn paths(graph: &Graph) -> (Vec<Vec<usize>>, bool) {
    let mut out = Vec::new();
    let mut truncated = false;
    for entry in graph.entries() {
        let mut stack: Vec<(Vec<usize>, Vec<&str>)> = vec![(Vec::new(), vec![entry.name.as_str()])];
        while let Some((hops, seen)) = stack.pop() {
            let at = *seen.last().unwrap_or(&"");
            for (i, h) in graph.hops.iter().enumerate().rev() {
                if h.from != at || seen.contains(&h.to.as_str()) {
                    continue;
                }
                if out.len() >= MAX_PATHS {
                    truncated = true;
                    break;
                }
                let mut p = hops.clone();
                p.push(i);
                let mut s = seen.clone();
                s.push(h.to.as_str());
                out.push(p.clone());
                stack.push((p, s));
            }
        }
    }
    out.sort_by(|a, b| a.iter().cmp(b.iter()));
    (out, truncated)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Analyses a graph: paths, dependency loads, hops and findings.
pub fn analyse(graph: &Graph) -> Report {
    let (all, truncated) = paths(graph);
    let mut paths_out = Vec::new();
    let mut deps: BTreeMap<String, DependencyLoad> = BTreeMap::new();
    for p in &all {
        let hops: Vec<_> = p.iter().map(|&i| &graph.hops[i]).collect();
        let worst = hops.iter().fold(1u64, |a, h| a.saturating_mul(h.worst_case()));
        let bounded_raw: f64 = hops.iter().map(|h| h.bounded()).product();
        let bounded = hops.iter().any(|h| h.has_budget()).then(|| round3(bounded_raw));
        let first = &hops[0].from;
        let last = &hops[hops.len() - 1].to;
        let rps = graph.service(first).and_then(|s| s.rps);
        let dep = graph.service(last);
        let mut names = vec![first.clone()];
        names.extend(hops.iter().map(|h| h.to.clone()));
        if let Some(r) = rps {
            let d = deps.entry(last.clone()).or_insert_with(|| DependencyLoad {
                service: last.clone(),
                normal_rps: 0.0,
                peak_rps: 0.0,
                bounded_peak_rps: 0.0,
                capacity_rps: dep.and_then(|s| s.capacity_rps),
                cold_capacity_rps: dep.and_then(|s| s.cold_capacity_rps),
            });
            d.normal_rps += r;
            d.peak_rps += r * worst as f64;
            d.bounded_peak_rps += r * bounded_raw;
        }
        paths_out.push(PathReport {
            path: names,
            worst_case_attempts: worst,
            bounded_attempts: bounded,
            peak_rps: rps.map(|r| round3(r * worst as f64)),
            bounded_peak_rps: rps.map(|r| round3(r * bounded_raw)),
            capacity_rps: dep.and_then(|s| s.capacity_rps),
            cold_capacity_rps: dep.and_then(|s| s.cold_capacity_rps),
            survives_warm: None,
            survives_cold: None,
        });
    }
    for d in deps.values_mut() {
        d.peak_rps = round3(d.peak_rps);
        d.bounded_peak_rps = round3(d.bounded_peak_rps);
    }
    for p in &mut paths_out {
        if let Some(d) = p.path.last().and_then(|n| deps.get(n)) {
            p.survives_warm = d.capacity_rps.map(|c| d.bounded_peak_rps <= c);
            p.survives_cold = d.cold_capacity_rps.map(|c| d.bounded_peak_rps <= c);
        }
    }
    let hops = graph
        .hops
        .iter()
        .map(|h| HopReport {
            from: h.from.clone(),
            to: h.to.clone(),
            worst_case_attempts: h.worst_case(),
            bounded_attempts: round3(h.bounded()),
            layers: h
                .layers
                .iter()
                .map(|l| LayerReport {
                    place: l.place,
                    attempts: l.attempts,
                    bounded_attempts: round3(l.bounded()),
                    implicit: l.implicit,
                    budget: l.budget.map(|b| b.to_string()),
                    source: l.source.clone(),
                    note: l.note.clone(),
                })
                .collect(),
        })
        .collect();
    let dependencies: Vec<DependencyLoad> = deps.into_values().collect();
    let findings = crate::rules::check(graph, &all, &dependencies, truncated.then_some(MAX_PATHS));
    Report { paths: paths_out, dependencies, hops, findings }
}
