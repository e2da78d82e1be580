//! An audited path laid out as the simulator's chain: the edge client, then one tier per service
//! and one pass-through tier per extra retrying place on a hop.
//!
//! Stacked places on one hop (app code → SDK → sidecar) nest: each app attempt goes through the
//! SDK, which makes its own attempts through the sidecar. A chain of clients behaves exactly like
//! that, so every retrying place after the first on a hop becomes a pass-through tier (unlimited
//! workers, no service time) whose client is that place. The simulator then multiplies them the
//! way production does, instead of being told a product.

use std::time::Duration;

use crate::model::{Budget, Graph, Hop, Place, RetryLayer, Service};

/// Mean service time assumed for a dependency whose latency the graph does not give.
pub(crate) const DEFAULT_MEAN_MS: f64 = 10.0;
/// z of the 99th percentile of a standard normal: a log-normal's σ = ln(p99/p50) / z.
const Z99: f64 = 2.326_347_874;

/// One client layer of the chain: one place that calls the next tier.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Client {
    /// Where it lives (`None` when the hop declares no place: one plain attempt).
    pub(crate) place: Option<Place>,
    /// Attempts per call including the first.
    pub(crate) attempts: u32,
    /// Per-attempt timeout, milliseconds.
    pub(crate) per_try_ms: Option<f64>,
    /// Whether its waits are jittered.
    pub(crate) jitter: bool,
    /// Its budget.
    pub(crate) budget: Option<Budget>,
}

/// A tier's service time: log-normal from p50/p99, or exponential with a mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ServiceTime {
    /// Log-normal with this median and 99th percentile, milliseconds.
    LogNormal(f64, f64),
    /// Exponential with this mean, milliseconds (0: no service time).
    Mean(f64),
}

impl ServiceTime {
    /// Mean, milliseconds: what capacity divides into a worker count.
    pub(crate) fn mean_ms(self) -> f64 {
        match self {
            ServiceTime::LogNormal(p50, p99) => {
                let sigma = (p99 / p50).ln() / Z99;
                p50 * (sigma * sigma / 2.0).exp()
            }
            ServiceTime::Mean(m) => m,
        }
    }

    /// (p50, p99), milliseconds: what a latency fault multiplies.
    pub(crate) fn percentiles(self) -> (f64, f64) {
        match self {
            ServiceTime::LogNormal(p50, p99) => (p50, p99),
            ServiceTime::Mean(m) => (m * std::f64::consts::LN_2, m * 100f64.ln()),
        }
    }
}

/// One simulator tier.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tier {
    /// Unique name: the service's, or `service/place` for a pass-through.
    pub(crate) name: String,
    /// Workers (0 = unlimited).
    pub(crate) workers: u32,
    /// Service time.
    pub(crate) service: ServiceTime,
    /// Its client of the next tier (`None` on the bottom tier).
    pub(crate) client: Option<Client>,
}

/// The whole chain of one path.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// The entry service's client (the simulator's edge).
    pub(crate) edge: Client,
    /// The entry service's overall timeout of its call: the edge deadline, milliseconds.
    pub(crate) deadline_ms: Option<f64>,
    /// Tiers, top first; the last is the dependency.
    pub(crate) tiers: Vec<Tier>,
    /// Whether every hop on the path propagates its deadline.
    pub(crate) deadline_propagated: bool,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn client_of(layer: &RetryLayer, hop: &Hop, outermost: bool) -> Client {
    // A layer without a per-try timeout is bounded by its own overall timeout, and the outermost
    // place on a hop also by the hop's: the simulator only has per-attempt timeouts.
    let outer = if outermost { hop.timeout } else { None };
    let per_try = layer.per_try_timeout.or(layer.timeout).or(outer);
    Client {
        place: Some(layer.place),
        attempts: layer.attempts,
        per_try_ms: per_try.map(ms),
        jitter: layer.jitter,
        budget: layer.budget,
    }
}

/// The hop's client layers, outermost first: one per retrying place, or one plain attempt.
pub(crate) fn clients(hop: &Hop) -> Vec<Client> {
    let retrying: Vec<&RetryLayer> = hop.retrying().collect();
    if retrying.is_empty() {
        // Nobody retries: one attempt, bounded by the tightest timeout anyone set.
        let tightest = hop
            .layers
            .iter()
            .filter_map(|l| l.per_try_timeout.or(l.timeout))
            .chain(hop.timeout)
            .min();
        let place = hop.layers.first().map(|l| l.place);
        return vec![Client {
            place,
            attempts: 1,
            per_try_ms: tightest.map(ms),
            jitter: false,
            budget: None,
        }];
    }
    retrying.iter().enumerate().map(|(i, l)| client_of(l, hop, i == 0)).collect()
}

/// A service's tier: service time from its p50/p99, workers from its warm capacity.
pub(crate) fn service_tier(name: &str, svc: Option<&Service>, bottom: bool) -> Tier {
    let p50 = svc.and_then(|s| s.p50).map(ms);
    let p99 = svc.and_then(|s| s.p99).map(ms);
    let service = match (p50, p99) {
        (Some(a), Some(b)) if a > 0.0 && b >= a => ServiceTime::LogNormal(a, b),
        (Some(a), _) if a > 0.0 => ServiceTime::Mean(a / std::f64::consts::LN_2),
        (_, Some(b)) if b > 0.0 => ServiceTime::Mean(b / 100f64.ln()),
        // A dependency always does some work; a service in the middle without figures is
        // treated as a pass-through.
        _ if bottom || svc.and_then(|s| s.capacity_rps).is_some() => {
            ServiceTime::Mean(DEFAULT_MEAN_MS)
        }
        _ => ServiceTime::Mean(0.0),
    };
    // Little's law: workers = throughput × time in service.
    let workers = svc
        .and_then(|s| s.capacity_rps)
        .map_or(0, |c| (c * service.mean_ms() / 1000.0).ceil().clamp(1.0, 1_000_000.0) as u32);
    Tier { name: name.to_string(), workers, service, client: None }
}

/// Lays out the path given as hop indices into `graph.hops` (as [`crate::analysis::paths`]
/// returns them).
pub(crate) fn layout(graph: &Graph, path: &[usize]) -> Option<Layout> {
    let hops: Vec<&Hop> = path.iter().filter_map(|&i| graph.hops.get(i)).collect();
    let first = hops.first()?;
    let mut edge = None;
    let mut tiers: Vec<Tier> = Vec::new();
    for (i, hop) in hops.iter().enumerate() {
        for (j, c) in clients(hop).into_iter().enumerate() {
            if i == 0 && j == 0 {
                edge = Some(c);
            } else if j == 0 {
                tiers.last_mut()?.client = Some(c);
            } else {
                let place = c.place.map_or_else(|| "client".to_string(), |p| p.to_string());
                let mut name = format!("{}/{place}", hop.from);
                while tiers.iter().any(|t| t.name == name) {
                    name.push('\'');
                }
                tiers.push(Tier {
                    name,
                    workers: 0,
                    service: ServiceTime::Mean(0.0),
                    client: Some(c),
                });
            }
        }
        let bottom = i + 1 == hops.len();
        tiers.push(service_tier(&hop.to, graph.service(&hop.to), bottom));
    }
    let edge = edge?;
    let first_layer = first.retrying().next().or(first.layers.first());
    let deadline = first
        .timeout
        .or(first_layer.and_then(|l| l.timeout))
        .or(first_layer.and_then(RetryLayer::total_time));
    Some(Layout {
        edge,
        deadline_ms: deadline.map(ms),
        tiers,
        deadline_propagated: hops.iter().all(|h| h.deadline_propagated),
    })
}
