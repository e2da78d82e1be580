//! One audited path as a simulator scenario (TOML text, validated by `Scenario::parse`) and the
//! "as configured" policy, with every approximation written down as a note.
//!
//! The simulator runs one policy per run: one attempt cap, one backoff and one budget kind for
//! every retrying layer (the engine builds each layer from the same `PolicySpec`). Per-layer
//! differences in the graph are therefore folded into that one policy here, and each fold is
//! listed so the reader knows which numbers are the graph's and which are the simulator's.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use seawall_audit::model::{Budget, Graph};

use super::fault::{Fault, FaultKind, SLOW_FACTOR};
use super::layout::{Client, Layout, ServiceTime, layout};

/// Name of the policy that runs the graph's own settings.
pub(crate) const CONFIGURED: &str = "as-configured";
/// How long a dependency stays cold after coming back from an outage, seconds: the graph gives
/// a cold capacity but not how long caches take to warm.
pub(crate) const COLD_S: f64 = 10.0;
/// Edge deadline when the entry hop sets no timeout, milliseconds.
const DEFAULT_DEADLINE_MS: f64 = 10_000.0;
/// Entry rate when the entry service gives none, requests per second.
const DEFAULT_RATE: f64 = 100.0;

/// A path ready to simulate.
#[derive(Debug, Clone)]
pub(crate) struct PathScenario {
    /// `entry → … → dependency`.
    pub(crate) label: String,
    /// The dependency (bottom tier) the fault hits.
    pub(crate) dependency: String,
    /// Scenario TOML text.
    pub(crate) text: String,
    /// The path's worst-case attempts per the audit.
    pub(crate) audited_worst: u64,
    /// The worst case the simulated policy can reach (the cap to the power of retrying layers).
    pub(crate) simulated_worst: u64,
    /// What was assumed or approximated.
    pub(crate) notes: Vec<String>,
}

fn q(s: &str) -> String {
    // A JSON string is a valid TOML basic string (same escapes), and quoting every name keeps
    // service names with dots or spaces from being read as dotted keys.
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

fn budget_note(b: &Budget) -> String {
    match b {
        Budget::Ratio { ratio } => format!("ratio {}% ≈ gRPC bucket ratio 0.1", ratio * 100.0),
        Budget::GrpcThrottle { max_tokens, token_ratio } => {
            format!("gRPC {max_tokens}/{token_ratio} ≈ the simulator's 10/0.1")
        }
        Budget::Envoy { percent, .. } => {
            format!(
                "Envoy {percent}% of concurrent requests ≈ a token bucket (rate, not concurrency)"
            )
        }
        Budget::AwsQuota => "AWS quota (500 tokens, 5 per retry) ≈ gRPC bucket 10/0.1".into(),
        _ => format!("{b} ≈ gRPC bucket 10/0.1"),
    }
}

/// The policy table for the graph's own settings, and notes on how it was folded.
fn configured_policy(l: &Layout, notes: &mut Vec<String>) -> (String, u32, usize) {
    let clients: Vec<&Client> =
        std::iter::once(&l.edge).chain(l.tiers.iter().filter_map(|t| t.client.as_ref())).collect();
    let retrying: Vec<&Client> = clients.iter().copied().filter(|c| c.attempts > 1).collect();
    // One cap for every retrying layer: the most common one (ties: the larger).
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for c in &retrying {
        *counts.entry(c.attempts.min(seawall::policy::MAX_ATTEMPTS)).or_default() += 1;
    }
    let cap = counts.iter().max_by_key(|(a, n)| (**n, **a)).map_or(1, |(a, _)| *a);
    let others: Vec<String> =
        retrying.iter().filter(|c| c.attempts != cap).map(|c| c.attempts.to_string()).collect();
    if !others.is_empty() {
        notes.push(format!(
            "one attempt cap per run in the simulator: every retrying place makes {cap} attempts \
             (the graph also has {})",
            others.join(", ")
        ));
    }
    let jittered = retrying.iter().filter(|c| c.jitter).count();
    let backoff = if !retrying.is_empty() && jittered * 2 >= retrying.len() {
        "backoff = \"full-jitter\"\nbase_ms = 50\ncap_ms = 20000\n"
    } else {
        "backoff = \"none\"\n"
    };
    if !retrying.is_empty() {
        notes.push(if jittered * 2 >= retrying.len() {
            "jittered places: full jitter from 50 ms (the graph gives no base)".into()
        } else {
            "unjittered places retry at once (the graph gives no wait: the worst case)".into()
        });
        if jittered != 0 && jittered != retrying.len() {
            notes.push(format!(
                "{jittered} of {} places jitter; the majority's shape is used for all",
                retrying.len()
            ));
        }
    }
    let budgets: Vec<&Budget> = retrying.iter().filter_map(|c| c.budget.as_ref()).collect();
    let all_budgeted = !retrying.is_empty() && budgets.len() == retrying.len();
    if all_budgeted {
        let kinds: Vec<String> = budgets.iter().map(|b| budget_note(b)).collect();
        notes.push(format!("budgets as the gRPC token bucket: {}", kinds.join("; ")));
    } else if !budgets.is_empty() {
        notes.push(format!(
            "{} of {} retrying places have a budget; the simulator applies one to every layer or \
             none, so none is simulated (the configured run is the unbudgeted worst case)",
            budgets.len(),
            retrying.len()
        ));
    }
    let mut t =
        format!("[policies.{}]\nbase = \"naive\"\nattempts = {cap}\n{backoff}", q(CONFIGURED));
    let budget = if all_budgeted { "grpc" } else { "none" };
    let _ = writeln!(t, "budget = \"{budget}\"\nsingle_owner = false");
    let _ = writeln!(t, "deadline_propagation = {}", l.deadline_propagated);
    t.push_str("cancellation = false\npushback = false\nserver_protection = false\n");
    (t, cap, retrying.len())
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

fn service_toml(s: ServiceTime) -> String {
    match s {
        ServiceTime::LogNormal(p50, p99) => format!("{{ p50_ms = {p50}, p99_ms = {p99} }}"),
        ServiceTime::Mean(m) => format!("{{ mean_ms = {m} }}"),
    }
}

/// The fault tables for the bottom tier; a cold restart follows an outage when the dependency
/// has a cold capacity below its warm one.
fn fault_toml(graph: &Graph, l: &Layout, fault: &Fault, notes: &mut Vec<String>) -> String {
    let Some(bottom) = l.tiers.last() else { return String::new() };
    let tier = q(&bottom.name);
    let head = format!(
        "[[fault]]\ntier = {tier}\nstart_s = {}\nduration_s = {}\n",
        fault.start_s, fault.duration_s
    );
    let mut t = match fault.kind {
        FaultKind::Outage => format!("{head}kind = \"outage\"\nmode = \"hold\"\n"),
        FaultKind::Fail => format!("{head}kind = \"outage\"\nmode = \"fail\"\n"),
        FaultKind::Slow => {
            let (p50, p99) = bottom.service.percentiles();
            let (a, b) = (p50 * SLOW_FACTOR, p99 * SLOW_FACTOR);
            notes.push(format!(
                "{} ×{SLOW_FACTOR}: p50 {p50:.1} → {a:.1} ms, p99 {p99:.1} → {b:.1} ms",
                bottom.name
            ));
            format!("{head}kind = \"latency\"\np50_ms = {a}\np99_ms = {b}\n")
        }
        FaultKind::Gc => format!("{head}kind = \"capacity\"\ncapacity = 0.0\n"),
    };
    let svc = graph.service(&bottom.name);
    let warm_cold = svc.and_then(|s| Some((s.capacity_rps?, s.cold_capacity_rps?)));
    if let (FaultKind::Outage | FaultKind::Fail, Some((warm, cold))) = (fault.kind, warm_cold)
        && cold > 0.0
        && cold < warm
    {
        let factor = (warm / cold).min(1000.0);
        let _ = write!(
            t,
            "[[fault]]\ntier = {tier}\nkind = \"restart\"\nstart_s = {}\nduration_s = {COLD_S}\n\
             cold_factor = {factor}\n",
            fault.end_s()
        );
        notes.push(format!(
            "{} comes back cold: a restart at {} s, {COLD_S} s at {cold} rps ({factor:.2}× slower)",
            bottom.name,
            fault.end_s()
        ));
    }
    if bottom.workers == 0 {
        notes.push(format!("{} has no capacity_rps: unlimited workers", bottom.name));
    }
    t
}

/// Builds the scenario of the path given as hop indices, for a run of `duration_s` seconds.
pub(crate) fn build(
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
    let (policy, cap, retrying) = configured_policy(&l, &mut notes);
    notes.push(owner_note(&l, entry));
    let mut t = format!(
        "name = {}\ndescription = {}\nduration_s = {duration_s}\ndefault_policies = [{}, \"seawall\"]\n",
        q(&format!("audit-{dependency}")),
        q(&format!("{label}: {fault}")),
        q(CONFIGURED)
    );
    let _ = writeln!(
        t,
        "[edge]\nrate = {rate}\ndeadline_ms = {deadline}\nretries = {}",
        l.edge.attempts > 1
    );
    if let Some(ms) = l.edge.per_try_ms {
        let _ = writeln!(t, "timeout_ms = {}", ms.max(1.0));
    }
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
        let _ = writeln!(
            t,
            "[[tier]]\nname = {}\nworkers = {}\nservice = {}",
            q(&tier.name),
            tier.workers,
            service_toml(tier.service)
        );
        if let Some(c) = &tier.client {
            let _ = writeln!(t, "retries = {}", c.attempts > 1);
            if let Some(ms) = c.per_try_ms {
                let _ = writeln!(t, "timeout_ms = {}", ms.max(1.0));
            }
        }
    }
    t.push_str(&fault_toml(graph, &l, fault, &mut notes));
    t.push_str(&policy);
    let simulated_worst = u64::from(cap).saturating_pow(retrying as u32);
    let audited_worst = hops.iter().fold(1u64, |a, h| a.saturating_mul(h.worst_case()));
    Some(PathScenario { label, dependency, text: t, audited_worst, simulated_worst, notes })
}
