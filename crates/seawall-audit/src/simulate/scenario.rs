//! One audited path as a simulator scenario (a `ScenarioFile` built in code, validated by
//! `Scenario::new`) and the "as configured" policy, with every assumption written down as a note.
//!
//! The configured policy gives every client layer its own settings (`[policies.P.edge]`,
//! `[policies.P.tier.TIER]`, crates/seawall-sim/SCENARIOS.md): each place's attempts, backoff,
//! budget and per-try timeout, so the simulated worst case is the product of the places' attempts,
//! as in the audit. What remains approximate, each said in a note where it applies:
//!
//! - backoff: the graph says only whether a place jitters, so a jittered place waits full jitter
//!   from 50 ms (20 s cap) and an unjittered one retries at once (the worst case);
//! - budgets run the core's default parameters for their kind (gRPC 10/0.1, ratio 10 %, Envoy
//!   20 % min 3, AWS 500 tokens at 14 per retry after an error), not the graph's numbers;
//! - attempts above the core's `MAX_ATTEMPTS` are capped;
//! - only per-attempt timeouts exist in the simulator: a place without one is bounded by its own
//!   overall timeout, or the hop's (see [`super::layout`]), and the entry hop's gives the edge
//!   deadline;
//! - stacked places on one hop are pass-through tiers (see [`super::layout`]); the breaker,
//!   idempotency and 4xx settings of a hop are not simulated.

use std::collections::BTreeMap;

use crate::model::{Budget, Graph};
use seawall_sim::policy::Preset;
use seawall_sim::scenario::{
    BackoffKind, BudgetKind, ClientOverride, DEFAULT_QUEUE_LIMIT, Edge, FaultKind as SimFault,
    FaultSpec, OutageMode, PolicyOverride, ScenarioFile, Service, Tier,
};

use super::fault::{Fault, FaultKind, SLOW_FACTOR};
use super::layout::{Client, Layout, ServiceTime, layout};

/// Name of the policy that runs the graph's own settings.
pub const CONFIGURED: &str = "as-configured";
/// How long a dependency stays cold after coming back from an outage, seconds: the graph gives
/// a cold capacity but not how long caches take to warm.
pub const COLD_S: f64 = 10.0;
/// Edge deadline when the entry hop sets no timeout, milliseconds.
const DEFAULT_DEADLINE_MS: f64 = 10_000.0;
/// Entry rate when the entry service gives none, requests per second.
const DEFAULT_RATE: f64 = 100.0;

/// A path ready to simulate.
#[derive(Debug, Clone)]
pub struct PathScenario {
    /// `entry → … → dependency`.
    pub label: String,
    /// The dependency (bottom tier) the fault hits.
    pub dependency: String,
    /// The scenario, not yet validated.
    pub file: ScenarioFile,
    /// The path's worst-case attempts per the audit.
    pub audited_worst: u64,
    /// The worst case the simulated policy can reach: the product of the layers' attempts.
    pub simulated_worst: u64,
    /// What was assumed or approximated.
    pub notes: Vec<String>,
}

/// The core's default of each budget kind the simulator builds, and the name it has there.
fn budget_kind(b: &Budget) -> (BudgetKind, Option<String>) {
    // What the simulator runs differs from the graph when the graph's numbers are not the core's
    // defaults; the note says so.
    match *b {
        Budget::GrpcThrottle { max_tokens, token_ratio } => {
            let same = max_tokens == 10.0 && token_ratio == 0.1;
            let note =
                format!("gRPC throttle {max_tokens}/{token_ratio} runs as the core's 10/0.1");
            (BudgetKind::Grpc, (!same).then_some(note))
        }
        Budget::Ratio { ratio } => {
            let same = ratio == 0.1;
            let note = format!(
                "ratio {}% runs as the core's 10% (10 s window, 10 retries/s floor)",
                ratio * 100.0
            );
            (BudgetKind::Ratio, (!same).then_some(note))
        }
        Budget::Envoy { percent, min_concurrency } => {
            let same = percent == 20.0 && min_concurrency == 3;
            let note = format!(
                "Envoy retry budget {percent}% (min {min_concurrency}) runs as the core's 20% \
                 (min 3)"
            );
            (BudgetKind::Envoy, (!same).then_some(note))
        }
        // The audit's bound is the core's quota's own (`Budget::retry_share`).
        Budget::AwsQuota => (BudgetKind::Aws, None),
    }
}

/// One client layer's settings under the configured policy.
fn client_override(label: &str, c: &Client, notes: &mut Vec<String>) -> ClientOverride {
    let attempts = c.attempts.min(seawall::policy::MAX_ATTEMPTS);
    if attempts < c.attempts {
        notes.push(format!("{label}: {} attempts capped at the core's {attempts}", c.attempts));
    }
    let (backoff, base_ms, cap_ms) = if c.jitter {
        (BackoffKind::FullJitter, Some(50.0), Some(20_000.0))
    } else {
        (BackoffKind::None, None, None)
    };
    let budget = match c.budget.as_ref().filter(|_| attempts > 1) {
        Some(b) => {
            let (kind, note) = budget_kind(b);
            if let Some(n) = note {
                notes.push(format!("{label}: {n}"));
            }
            kind
        }
        None => BudgetKind::None,
    };
    ClientOverride {
        attempts: Some(attempts),
        backoff: Some(backoff),
        base_ms,
        cap_ms,
        budget: Some(budget),
        timeout_ms: c.per_try_ms.map(|ms| ms.max(1.0)),
        ..ClientOverride::default()
    }
}

/// The policy for the graph's own settings, one table per client layer, and the product of the
/// layers' attempts (the worst case it can reach).
fn configured_policy(l: &Layout, entry: &str, notes: &mut Vec<String>) -> (PolicyOverride, u64) {
    let place = |c: &Client| c.place.map_or_else(|| "client".to_string(), |p| p.to_string());
    let edge_label = format!("{} on {entry}", place(&l.edge));
    let edge = client_override(&edge_label, &l.edge, notes);
    let mut tier = BTreeMap::new();
    let mut layers = vec![&l.edge];
    for t in &l.tiers {
        if let Some(c) = &t.client {
            let label = format!("{} on {}", place(c), t.name);
            tier.insert(t.name.clone(), client_override(&label, c, notes));
            layers.push(c);
        }
    }
    let policy = PolicyOverride {
        base: Some(Preset::Naive),
        single_owner: Some(false),
        deadline_propagation: Some(l.deadline_propagated),
        cancellation: Some(false),
        pushback: Some(false),
        server_protection: Some(false),
        edge: Some(edge),
        tier,
        ..PolicyOverride::default()
    };
    let retrying: Vec<&&Client> = layers.iter().filter(|c| c.attempts > 1).collect();
    let jittered = retrying.iter().filter(|c| c.jitter).count();
    if jittered > 0 {
        notes.push(
            "jittered places: full jitter from 50 ms, 20 s cap (the graph gives no base)".into(),
        );
    }
    if jittered < retrying.len() {
        notes.push(
            "unjittered places retry at once (the graph gives no wait: the worst case)".into(),
        );
    }
    let worst = layers.iter().fold(1u64, |a, c| {
        a.saturating_mul(u64::from(c.attempts.min(seawall::policy::MAX_ATTEMPTS)))
    });
    (policy, worst)
}

/// Which place the `seawall` run lets retry: the simulator makes the top retrying layer the one
/// owner (the layer whose `retries` flag is set first), the others fail fast.
fn owner_note(l: &Layout, entry: &str) -> String {
    let mut caller = entry;
    for (client, callee) in std::iter::once(Some(&l.edge))
        .chain(l.tiers.iter().map(|t| t.client.as_ref()))
        .zip(l.tiers.iter().map(|t| t.name.as_str()))
    {
        if client.is_some_and(|c| c.attempts > 1) {
            return format!(
                "seawall: {caller} → {callee} owns retries, every other place fails fast"
            );
        }
        caller = callee;
    }
    "seawall: no place retries in the graph, so none retries under seawall either".into()
}

fn service(s: ServiceTime) -> Service {
    match s {
        ServiceTime::LogNormal(p50, p99) => {
            Service { mean_ms: 0.0, p50_ms: Some(p50), p99_ms: Some(p99) }
        }
        ServiceTime::Mean(m) => Service { mean_ms: m, p50_ms: None, p99_ms: None },
    }
}

/// The faults of the bottom tier; a cold restart follows an outage when the dependency has a
/// cold capacity below its warm one.
fn faults(graph: &Graph, l: &Layout, fault: &Fault, notes: &mut Vec<String>) -> Vec<FaultSpec> {
    let Some(bottom) = l.tiers.last() else { return Vec::new() };
    let spec = |kind, start_s, duration_s| FaultSpec::new(kind, &bottom.name, start_s, duration_s);
    let here = spec(SimFault::Outage, fault.start_s, fault.duration_s);
    let mut v = vec![match fault.kind {
        FaultKind::Outage => here,
        FaultKind::Fail => FaultSpec { mode: OutageMode::Fail, ..here },
        FaultKind::Slow => {
            let (p50, p99) = bottom.service.percentiles();
            let (a, b) = (p50 * SLOW_FACTOR, p99 * SLOW_FACTOR);
            notes.push(format!(
                "{} ×{SLOW_FACTOR}: p50 {p50:.1} → {a:.1} ms, p99 {p99:.1} → {b:.1} ms",
                bottom.name
            ));
            FaultSpec { kind: SimFault::Latency, p50_ms: Some(a), p99_ms: Some(b), ..here }
        }
        FaultKind::Gc => FaultSpec { kind: SimFault::Capacity, capacity: Some(0.0), ..here },
    }];
    let svc = graph.service(&bottom.name);
    let warm_cold = svc.and_then(|s| Some((s.capacity_rps?, s.cold_capacity_rps?)));
    if let (FaultKind::Outage | FaultKind::Fail, Some((warm, cold))) = (fault.kind, warm_cold)
        && cold > 0.0
        && cold < warm
    {
        let factor = (warm / cold).min(1000.0);
        let restart = spec(SimFault::Restart, fault.end_s(), COLD_S);
        v.push(FaultSpec { cold_factor: Some(factor), ..restart });
        notes.push(format!(
            "{} comes back cold: a restart at {} s, {COLD_S} s at {cold} rps ({factor:.2}× slower)",
            bottom.name,
            fault.end_s()
        ));
    }
    if bottom.workers == 0 {
        notes.push(format!("{} has no capacity_rps: unlimited workers", bottom.name));
    }
    v
}

/// Builds the scenario of the path given as hop indices, for a run of `duration_s` seconds.
pub fn build(
    graph: &Graph,
    path: &[usize],
    fault: &Fault,
    duration_s: f64,
) -> Option<PathScenario> {
    let l = layout(graph, path)?;
    let hops: Vec<_> = path.iter().filter_map(|&i| graph.hops.get(i)).collect();
    let entry = &hops.first()?.from;
    let dependency = hops.last()?.to.clone();
    let mut names = vec![entry.clone()];
    names.extend(hops.iter().map(|h| h.to.clone()));
    let label = names.join(" → ");
    let mut notes = Vec::new();
    let rate = graph.service(entry).and_then(|s| s.rps).unwrap_or_else(|| {
        notes.push(format!("{entry} gives no rps: {DEFAULT_RATE} rps assumed"));
        DEFAULT_RATE
    });
    let deadline = l.deadline_ms.unwrap_or_else(|| {
        notes.push(format!("{entry} sets no timeout: a {DEFAULT_DEADLINE_MS} ms deadline assumed"));
        DEFAULT_DEADLINE_MS
    });
    let (policy, simulated_worst) = configured_policy(&l, entry, &mut notes);
    notes.push(owner_note(&l, entry));
    let edge = Edge {
        rate,
        arrivals: Default::default(),
        ramp: Vec::new(),
        spike: Vec::new(),
        herd: Vec::new(),
        deadline_ms: deadline,
        retries: l.edge.attempts > 1,
        timeout_ms: l.edge.per_try_ms.map(|ms| ms.max(1.0)),
        refresh: None,
        instances: 1,
    };
    let mut tiers = Vec::with_capacity(l.tiers.len());
    for tier in &l.tiers {
        if let Some(c) = graph.service(&tier.name).and_then(|s| s.capacity_rps) {
            // Little's law made the worker count; saying so lets the reader check it.
            notes.push(format!(
                "{}: {c} rps warm = {} workers × {:.1} ms mean service",
                tier.name,
                tier.workers,
                tier.service.mean_ms()
            ));
        }
        tiers.push(Tier {
            name: tier.name.clone(),
            workers: tier.workers,
            queue_limit: DEFAULT_QUEUE_LIMIT,
            service: service(tier.service),
            degrade: None,
            timeout_ms: tier.client.as_ref().and_then(|c| c.per_try_ms).map(|ms| ms.max(1.0)),
            retries: tier.client.as_ref().is_none_or(|c| c.attempts > 1),
            ..Tier::new(String::new())
        });
    }
    let faults = faults(graph, &l, fault, &mut notes);
    let file = ScenarioFile {
        name: format!("audit-{dependency}"),
        description: format!("{label}: {fault}"),
        duration_s,
        default_policies: vec![CONFIGURED.into(), "seawall".into()],
        edge,
        tiers,
        faults,
        operator: Vec::new(),
        policies: BTreeMap::from([(CONFIGURED.to_string(), policy)]),
    };
    let audited_worst = hops.iter().fold(1u64, |a, h| a.saturating_mul(h.worst_case()));
    Some(PathScenario { label, dependency, file, audited_worst, simulated_worst, notes })
}
