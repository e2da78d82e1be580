//! The schema of `[policies.NAME]`: a policy defined or adjusted by a scenario, and its optional
//! per-client-layer settings (`[policies.NAME.edge]`, `[policies.NAME.tier.TIER]`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Backoff shape of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackoffKind {
    /// Retry at once.
    None,
    /// A flat `base_ms`.
    Constant,
    /// `base_ms · 2^(retry-1)`, capped, no jitter.
    Exponential,
    /// Full jitter under the exponential ceiling.
    FullJitter,
    /// Equal jitter: half the exponential ceiling, plus a uniform draw over the other half.
    EqualJitter,
    /// Decorrelated jitter: `min(cap, U[base, 3 · previous wait))` (Brooker, 2015).
    Decorrelated,
}

/// The in-flight limit of a protected tier's admission (`ShedLayer`'s two limits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerLimit {
    /// The tier's workers, always (`ShedLayer::new(n)`).
    #[default]
    Fixed,
    /// Adaptive in Netflix Gradient2's way (`ShedLayer::gradient`): starts at the tier's
    /// workers and never exceeds them, shrinks while latency rises above its long-term level.
    Gradient,
}

/// How long a tier's request holds its admission slot (a worker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerSlot {
    /// Until its local work is done: the tier's downstream calls wait without a slot (a server
    /// whose workers are its CPUs and whose handlers await their calls without holding one).
    #[default]
    Service,
    /// Until the tier answers, its downstream calls included, as `ShedLayer` holds its slot
    /// around the whole handler (and as a thread-per-request server holds its thread).
    Handler,
}

/// Budget of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetKind {
    /// Unlimited retries within the attempt cap.
    None,
    /// gRFC A6 token bucket (`seawall::budget::GrpcThrottle`, 10 tokens, ratio 0.1).
    Grpc,
    /// AWS SDK retry quota (`seawall::budget::AwsRetryQuota`, its defaults).
    Aws,
    /// Retries at most a ratio of requests over a sliding window (`seawall::budget::RatioBudget`,
    /// Finagle / Google 10 %).
    Ratio,
    /// Envoy's concurrent-retry budget (`seawall::budget::EnvoyRetryBudget`, 20 %, min 3).
    Envoy,
    /// Google SRE adaptive client throttling (`seawall::budget::AdaptiveThrottle`, k = 2).
    Adaptive,
}

/// A scenario's policy: every field optional, applied over `base` (a preset).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyOverride {
    /// The preset to start from (default: the preset of the same name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<super::Preset>,
    /// Attempts per call including the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Backoff shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffKind>,
    /// Backoff base, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<f64>,
    /// Backoff cap, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_ms: Option<f64>,
    /// Retry budget of every retrying layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetKind>,
    /// Only the top retrying layer retries; the others fail fast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub single_owner: Option<bool>,
    /// Lower tiers receive the edge deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_propagation: Option<bool>,
    /// A timed-out attempt is cancelled downstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<bool>,
    /// Give-ups are passed upward as "overloaded; don't retry".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushback: Option<bool>,
    /// Servers serve first attempts first, shed retries when the queue is long, drop doomed work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_protection: Option<bool>,
    /// A protected tier's in-flight limit: `fixed` (default) or `gradient`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_limit: Option<ServerLimit>,
    /// How long a request holds its tier's slot: `service` (default) or `handler`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_slot: Option<ServerSlot>,
    /// Clients act on server hints: a shed answer's `Retry-After`, a fail-fast tier's "don't
    /// retry" (default true; false shows what the hints are worth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub honour_hints: Option<bool>,
    /// Replaces every herd's spread (the clients' reconnect jitter), seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub herd_spread_s: Option<f64>,
    /// Hedging at every retrying layer: copies per call including the first, in [2, 5]
    /// (gRFC A6 `maxAttempts`; 1 turns hedging off). A hedged layer sends copies instead of
    /// retrying; they count against its budget (`grpc` or `none` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedge_max_attempts: Option<u32>,
    /// Hedging delay between copies, milliseconds (gRFC A6 `hedgingDelay`; default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedge_delay_ms: Option<f64>,
    /// The edge client's own settings under this policy (`[policies.NAME.edge]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<ClientOverride>,
    /// Tier clients' own settings under this policy, by the calling tier's name
    /// (`[policies.NAME.tier.TIER]`: that tier's client of the next tier).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tier: BTreeMap<String, ClientOverride>,
}

/// One client layer's own settings under a policy, replacing the policy's for that layer only:
/// how a path whose places are configured differently (an app with 3 plain attempts over an
/// Envoy with 3 jittered ones over a gRPC client with 4 and a throttling budget) runs as it is.
///
/// Whether the layer retries at all (`retries` of the tier or edge) and who owns retries under
/// `single_owner` do not change.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientOverride {
    /// Attempts per call including the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Backoff shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffKind>,
    /// Backoff base, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<f64>,
    /// Backoff cap, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_ms: Option<f64>,
    /// Retry budget of this layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetKind>,
    /// Per-attempt timeout, milliseconds (replaces the tier's or edge's `timeout_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    /// Hedged copies per call including the first, in [2, 5] (1: no hedging at this layer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedge_max_attempts: Option<u32>,
    /// Hedging delay between copies at this layer, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedge_delay_ms: Option<f64>,
}
