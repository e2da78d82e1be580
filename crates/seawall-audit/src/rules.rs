//! The rules: each a check over the graph, each finding with a location and a one-line fix.

use std::collections::HashSet;
use std::time::Duration;

use crate::model::{Graph, Hop};
use crate::report::table::{human_duration, thousands};
use crate::report::{DependencyLoad, Finding, Severity};

/// A rule: id, short name, default severity, and what it checks.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable id, `SW0nn`.
    pub id: &'static str,
    /// Kebab-case name.
    pub name: &'static str,
    /// Severity of its findings.
    pub severity: Severity,
    /// What it checks, one sentence.
    pub help: &'static str,
}

/// Every rule the audit checks.
pub const RULES: [Rule; 12] = [
    Rule {
        id: "SW001",
        name: "retries-at-several-layers",
        severity: Severity::Error,
        help: "More than one place retries along a call path, so attempts multiply.",
    },
    Rule {
        id: "SW002",
        name: "retries-without-jitter",
        severity: Severity::Warning,
        help: "Retries wait without randomisation, so failed clients retry in synchronised waves.",
    },
    Rule {
        id: "SW003",
        name: "retries-without-budget",
        severity: Severity::Warning,
        help: "Retries are capped per request but not per client, so a fleet-wide failure multiplies load.",
    },
    Rule {
        id: "SW004",
        name: "non-idempotent-retry",
        severity: Severity::Error,
        help: "A non-idempotent call is retried without an idempotency key.",
    },
    Rule {
        id: "SW005",
        name: "retries-4xx",
        severity: Severity::Error,
        help: "Client errors (4xx other than 408/429, or their gRPC equivalents) are retried; they fail the same way again.",
    },
    Rule {
        id: "SW006",
        name: "retries-outlive-caller",
        severity: Severity::Warning,
        help: "A callee keeps retrying longer than its caller waits, so work continues after the caller left.",
    },
    Rule {
        id: "SW007",
        name: "per-try-timeout-below-p99",
        severity: Severity::Warning,
        help: "A per-try timeout is below the callee's p99, so healthy slow answers are retried.",
    },
    Rule {
        id: "SW008",
        name: "deadline-not-propagated",
        severity: Severity::Warning,
        help: "The caller's remaining time does not travel with the call, so abandoned work is finished.",
    },
    Rule {
        id: "SW009",
        name: "breaker-unbounded-half-open",
        severity: Severity::Warning,
        help: "A circuit breaker lets every waiting caller through when it half-opens: a herd with a delay.",
    },
    Rule {
        id: "SW010",
        name: "implicit-retries",
        severity: Severity::Info,
        help: "Retries nobody wrote: a mesh, SDK or library default.",
    },
    Rule {
        id: "SW011",
        name: "peak-exceeds-capacity",
        severity: Severity::Error,
        help: "The peak load a dependency receives when everything fails exceeds its capacity.",
    },
    Rule {
        id: "SW012",
        name: "paths-truncated",
        severity: Severity::Info,
        help: "The graph has too many paths; only the first were analysed.",
    },
];

/// The rule with id `id`.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

fn finding(
    rule: &'static str,
    severity: Severity,
    location: &str,
    message: String,
    fix: &str,
) -> Finding {
    Finding { rule, severity, location: location.to_string(), message, fix: fix.to_string() }
}

/// How long anyone on the caller's side waits for one execution by the callee: the smallest of
/// the hop's timeout and every layer's overall and per-try timeouts.
fn caller_wait(h: &Hop) -> Option<Duration> {
    let per_layer = h.layers.iter().flat_map(|l| [l.timeout, l.per_try_timeout]);
    std::iter::once(h.timeout).chain(per_layer).flatten().min()
}

/// How long the caller of `h` keeps trying it: the longest retrying layer, capped by the hop's
/// timeout.
fn retry_time(h: &Hop) -> Option<Duration> {
    let longest = h.retrying().filter_map(|l| l.total_time()).max();
    match (longest, h.timeout) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, _) => a,
    }
}

/// Runs every rule. `truncated_at` is the number of paths the enumeration stopped at, when it
/// did (`paths` is then incomplete).
pub fn check(
    graph: &Graph,
    paths: &[Vec<usize>],
    deps: &[DependencyLoad],
    truncated_at: Option<usize>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    multi_layer(graph, paths, &mut out);
    for h in &graph.hops {
        hop_rules(graph, h, &mut out);
    }
    for d in deps {
        let loc = graph.service(&d.service).map_or(d.service.as_str(), |s| s.location.as_str());
        let (peak, warm, cold) = (d.bounded_peak_rps, d.capacity_rps, d.cold_capacity_rps);
        let (limit, which) = match (warm, cold) {
            (Some(w), _) if peak > w => (w, "warm capacity"),
            (_, Some(c)) if peak > c => (c, "cold capacity"),
            _ => continue,
        };
        let severity = if which == "warm capacity" { Severity::Error } else { Severity::Warning };
        out.push(finding("SW011", severity, loc, format!(
            "{}: {} rps when everything fails{} ({} rps normally) against a {which} of {}; survives cold: {}",
            d.service, thousands(peak),
            if d.peak_rps > peak { format!(" with budgets, {} without", thousands(d.peak_rps)) } else { String::new() },
            thousands(d.normal_rps), thousands(limit),
            if cold.is_some_and(|c| peak <= c) { "yes" } else { "no" }),
            "Cut the multiplier (one retrying layer, a budget) or shed load at the dependency before it is needed"));
    }
    if let Some(limit) = truncated_at {
        out.push(finding(
            "SW012",
            Severity::Info,
            "graph",
            format!("more than {limit} paths; the rest were not analysed"),
            "Split the graph into smaller files",
        ));
    }
    out.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then(a.rule.cmp(b.rule)).then(a.location.cmp(&b.location))
    });
    out.dedup();
    out
}

fn multi_layer(graph: &Graph, paths: &[Vec<usize>], out: &mut Vec<Finding>) {
    let prefixes: HashSet<&[usize]> = paths.iter().map(|p| &p[..p.len() - 1]).collect();
    let mut reported: HashSet<Vec<(usize, usize)>> = HashSet::new();
    for p in paths.iter().filter(|p| !prefixes.contains(p.as_slice())) {
        let places: Vec<(usize, usize)> = p
            .iter()
            .flat_map(|&i| {
                graph.hops[i]
                    .layers
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.retries())
                    .map(move |(j, _)| (i, j))
            })
            .collect();
        if places.len() < 2 || !reported.insert(places.clone()) {
            continue;
        }
        let worst = p.iter().fold(1u64, |a, &i| a.saturating_mul(graph.hops[i].worst_case()));
        let mut names = vec![graph.hops[p[0]].from.as_str()];
        names.extend(p.iter().map(|&i| graph.hops[i].to.as_str()));
        let list: Vec<String> = places
            .iter()
            .map(|&(i, j)| {
                let (h, l) = (&graph.hops[i], &graph.hops[i].layers[j]);
                format!(
                    "{} on {} ×{}{}",
                    l.place,
                    h.name(),
                    l.attempts,
                    if l.implicit { " (implicit)" } else { "" }
                )
            })
            .collect();
        out.push(finding("SW001", Severity::Error, &names.join(" → "), format!(
            "{} places retry on this path: {}; worst case {} attempts per request reach {}",
            places.len(), list.join(", "), thousands(worst as f64), names[names.len() - 1]),
            "Keep retries at one layer (just above the failing dependency); make every other layer fail fast and pass \"overloaded; don't retry\" upward"));
    }
}

fn hop_rules(graph: &Graph, h: &Hop, out: &mut Vec<Finding>) {
    let callee = graph.service(&h.to);
    for l in h.retrying() {
        let what = format!("{} retries on {} (×{})", l.place, h.name(), l.attempts);
        if !l.jitter {
            out.push(finding("SW002", Severity::Warning, &l.source, format!("{what} wait without jitter"), "Use exponential backoff with full jitter: sleep = random(0, min(cap, base · 2^retry))"));
        }
        if l.budget.is_none() {
            out.push(finding("SW003", Severity::Warning, &l.source, format!("{what} spend from no budget: when everything fails they multiply load ×{}", l.attempts), "Add a retry budget (retries ≤ 10 % of requests, or gRPC retryThrottling / an Envoy retry_budget)"));
        }
        if l.retries_4xx {
            out.push(finding(
                "SW005",
                Severity::Error,
                &l.source,
                format!("{what} include client errors (4xx or their gRPC equivalents)"),
                "Retry only 408, 429, 502, 503, 504 (UNAVAILABLE, RESOURCE_EXHAUSTED in gRPC)",
            ));
        }
        if let (Some(t), Some(p99)) = (l.per_try_timeout, callee.and_then(|s| s.p99))
            && t < p99
        {
            out.push(finding("SW007", Severity::Warning, &l.source, format!("per-try timeout {} on {} is below {}'s p99 of {}: healthy slow answers are retried", human_duration(t), h.name(), h.to, human_duration(p99)), "Set the per-try timeout above the callee's p99 (and the attempts × per-try below the caller's deadline)"));
        }
        if l.implicit {
            out.push(finding("SW010", Severity::Info, &l.source, format!("{what} come from a default nobody wrote: {}", l.note.as_deref().unwrap_or("implicit")), "Write the setting down explicitly (e.g. Istio `retries: {attempts: 0}`) so the owner layer is a decision"));
        }
    }
    if h.retrying().next().is_some() && !h.idempotent && !h.idempotency_key {
        out.push(finding(
            "SW004",
            Severity::Error,
            &h.location,
            format!("{} is not idempotent and is retried without an idempotency key", h.name()),
            "Send an Idempotency-Key reused on every attempt, or do not retry this call",
        ));
    }
    if !h.deadline_propagated {
        out.push(finding("SW008", Severity::Warning, &h.location, format!("{} does not propagate the deadline: {} finishes work its caller abandoned", h.name(), h.to), "Send the remaining time (grpc-timeout / Request-Timeout-Ms) and drop work whose deadline has passed"));
    }
    if h.breaker.is_some_and(|b| b.half_open_max.is_none()) {
        out.push(finding(
            "SW009",
            Severity::Warning,
            &h.location,
            format!("the breaker on {} does not bound half-open probes", h.name()),
            "Let at most one (or a few) probe through when half-open, with a jittered open time",
        ));
    }
    // Work continues after the caller left: hops into `h.from` wait less than `h` keeps retrying.
    let Some(retrying_for) = retry_time(h) else { return };
    for up in graph.hops.iter().filter(|u| u.to == h.from) {
        if let Some(wait) = caller_wait(up)
            && retrying_for > wait
        {
            out.push(finding("SW006", Severity::Warning, &h.location, format!("{} keeps retrying {} for up to {} but {} waits only {} for {}: work continues after the caller left", h.from, h.to, human_duration(retrying_for), up.from, human_duration(wait), h.from), "Propagate the deadline and stop retrying when the caller's time is gone, or make attempts × per-try timeout fit inside it"));
        }
    }
}
