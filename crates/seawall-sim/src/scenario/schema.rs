//! The TOML schema of a scenario file, field by field (see `SCENARIOS.md` for a guide).
//!
//! Every table denies unknown fields, so a typo is an error with its line, not a silent default.
//! [`ScenarioFile`] is the file as written (it serializes back to TOML, so a generator builds it
//! in code); [`Scenario`](super::Scenario) is one that passed validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::PolicyOverride;

/// A whole scenario file, as written: not yet validated. [`Scenario::new`](super::Scenario::new)
/// checks it; [`ScenarioFile::to_toml`] writes it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Short name (`bronson`); used for the default output folder.
    pub name: String,
    /// One line on what the scenario shows.
    pub description: String,
    /// Simulated seconds of edge traffic (the run then drains for one edge deadline).
    pub duration_s: f64,
    /// Policies run when the command names none, in order (e.g. the seed's "before" and
    /// `seawall`).
    #[serde(default = "default_pair")]
    pub default_policies: Vec<String>,
    /// Edge traffic.
    pub edge: Edge,
    /// The tiers, top (edge side) first; the last one is the bottom (the database).
    #[serde(rename = "tier")]
    pub tiers: Vec<Tier>,
    /// Faults injected into tiers.
    #[serde(default, rename = "fault", skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultSpec>,
    /// The operator's admission knob turned down on a tier for a while (`ShedLayer`'s
    /// `with_admission` knob): only a protected tier has one.
    #[serde(default, rename = "operator", skip_serializing_if = "Vec::is_empty")]
    pub operator: Vec<AdmissionCut>,
    /// Policies defined or adjusted by this scenario, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policies: BTreeMap<String, PolicyOverride>,
}

fn default_pair() -> Vec<String> {
    vec!["naive".into(), "seawall".into()]
}

/// Open-loop edge traffic and the edge client (the user or the mobile app).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    /// Steady arrival rate, requests per second.
    #[serde(default)]
    pub rate: f64,
    /// How arrivals are spaced at that rate: Poisson (the default) or evenly.
    #[serde(default, skip_serializing_if = "Arrivals::is_poisson")]
    pub arrivals: Arrivals,
    /// Changes of the steady rate: linear ramps between points (`{ at_s, rate }`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ramp: Vec<RatePoint>,
    /// Extra traffic added for a window (a spike that is not a storm).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spike: Vec<Spike>,
    /// Herds: many clients arriving at once or over a window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub herd: Vec<Herd>,
    /// Deadline of each logical request at the edge, milliseconds.
    pub deadline_ms: f64,
    /// Whether retry presets apply to the edge client (a mobile app that retries) or it makes a
    /// single attempt (a person).
    #[serde(default)]
    pub retries: bool,
    /// Per-attempt timeout of the edge client, milliseconds (default: the deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    /// Users who retry by hand after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<Refresh>,
    /// Instances of the edge client (apps, gateways), each with its own policy state: budget,
    /// breaker, jitter stream. Edge requests are spread over them uniformly at random.
    #[serde(default = "one")]
    pub instances: u32,
}

/// How the edge's arrivals are spaced in time.
///
/// Many independent users make a Poisson stream: gaps are exponential, so arrivals bunch and a
/// small queue overflows now and then even below capacity (an M/D/c queue). A load generator
/// that sends on a fixed schedule — `wrk2`, `vegeta`'s constant pacer, `seawall lab` and
/// `seawall load` — makes an evenly spaced stream, which never bunches (D/D/c): the same mean
/// rate fills a queue far less. Model the one the traffic really has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    /// Exponential gaps at the current rate (thinned for ramps and spikes).
    #[default]
    Poisson,
    /// Evenly spaced: the next arrival one gap of `1 / rate` after this one, at the rate in
    /// force now (ramps and spikes included). The first arrives at 0 s.
    Uniform,
}

impl Arrivals {
    /// Whether these are the default Poisson arrivals (which a written file omits).
    pub fn is_poisson(&self) -> bool {
        *self == Arrivals::Poisson
    }
}

/// A point of the steady rate's piecewise-linear profile.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RatePoint {
    /// Seconds from the start.
    pub at_s: f64,
    /// Rate at that point, requests per second.
    pub rate: f64,
}

/// Extra arrivals at a constant rate within a window.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spike {
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Extra requests per second.
    pub rate: f64,
}

/// N clients arriving together (spread 0) or uniformly over a window.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Herd {
    /// When the first client arrives, seconds.
    pub at_s: f64,
    /// How many clients.
    pub clients: u64,
    /// Window over which they arrive, seconds (0 = all at once). A policy's `herd_spread_s`
    /// replaces it (the clients' reconnect jitter).
    #[serde(default)]
    pub spread_s: f64,
}

/// Users who try again by hand after a failed or late answer (the tatkal rush).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Refresh {
    /// Probability that a failed user tries again.
    pub probability: f64,
    /// Delay before trying again, milliseconds.
    pub delay_ms: f64,
    /// Most refreshes per user.
    #[serde(default = "one")]
    pub max: u32,
}

fn one() -> u32 {
    1
}

/// One tier: a server, and (unless it is the bottom) a client of the next tier.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// Name (`db`).
    pub name: String,
    /// Concurrent requests served; 0 means unlimited (a pure proxy).
    #[serde(default)]
    pub workers: u32,
    /// Queue bound; arrivals beyond it are rejected at once.
    #[serde(default = "default_queue_limit")]
    pub queue_limit: u32,
    /// Local service time.
    #[serde(default)]
    pub service: Service,
    /// Slowdown under load: above an arrival rate (Bronson et al.: ~10× above 300 QPS) or above
    /// an amount of work in the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degrade: Option<Degrade>,
    /// Per-attempt timeout of this tier's client of the next tier, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    /// Whether retry presets apply to this tier's client (false: always one attempt).
    #[serde(default = "yes")]
    pub retries: bool,
    /// Instances of this tier. Each holds its own client of the next tier — its own budget,
    /// breaker and jitter stream — so a budget's per-client reserve (a ratio budget's minimum
    /// retries per second, say) is `instances` times larger fleet-wide. A request served here
    /// is served by an instance chosen uniformly at random; under the default `servers =
    /// "pool"` the server side stays one pool of `workers`.
    #[serde(default = "one")]
    pub instances: u32,
    /// Whether the instances share one server (`"pool"`, the default) or each has its own
    /// (`"per-instance"`: its own `workers`, queue and admission control, as a replica has). Per
    /// instance, the replica is the instance: the load balancer (`balance`) picks one, and the
    /// instance whose server admitted a request is the one whose client makes its calls (a
    /// sidecar or co-located layout). Then `replicas` must stay 1 and a fault's `replica` names
    /// an instance.
    #[serde(default, skip_serializing_if = "Servers::is_pool")]
    pub servers: Servers,
    /// Replicas of this tier's server, each with its own `workers`, queue and admission control,
    /// behind a load balancer (`balance`).
    #[serde(default = "one")]
    pub replicas: u32,
    /// How the load balancer in front of the replicas picks one.
    #[serde(default)]
    pub balance: Balance,
    /// The tiers a request served here calls, by name; each must come later in the file (the
    /// calls form a tree or a DAG, top first). In a file where no tier says `calls`, each tier
    /// calls the next (a chain); once one does, a tier without `calls` calls nothing.
    #[serde(default)]
    pub calls: Option<Vec<String>>,
    /// Whether the calls go one after another or all at once.
    #[serde(default)]
    pub fan_out: FanOut,
    /// Optimistic concurrency, milliseconds: a request whose local service ends within this
    /// long after another's success at the tier fails as a retryable conflict (a write that
    /// lost the race). Absent: no contention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention_window_ms: Option<f64>,
}

/// Where a tier's instances get their server from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Servers {
    /// One server (or `replicas` of them) shared by every instance: a request is served by an
    /// instance drawn uniformly at random, whichever replica admitted it.
    #[default]
    Pool,
    /// One server per instance: the instance is the replica.
    PerInstance,
}

impl Servers {
    fn is_pool(&self) -> bool {
        *self == Servers::Pool
    }
}

/// How a tier with several dependencies calls them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FanOut {
    /// One after another; the first failure fails the request and the rest are not called.
    #[default]
    Sequence,
    /// All at once; the request succeeds when all have, and fails at the first failure, which
    /// cancels the others (`try_join`).
    Parallel,
}

/// How a load balancer picks a replica for each attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Each replica in turn (Envoy's default `ROUND_ROBIN`).
    #[default]
    RoundRobin,
    /// A replica drawn uniformly at random (Envoy's `RANDOM`).
    Random,
    /// The less loaded of two replicas drawn at random, by requests queued and in service
    /// (Envoy's `LEAST_REQUEST` with its default `choice_count` of 2: power of two choices).
    LeastRequests,
}

impl Tier {
    /// A tier called `name` with every other field at the value a file that omits it gets:
    /// unlimited workers, the default queue, no service time, retries on, one instance and
    /// replica, one server pool, a chain's calls. Build the fields you set with struct update syntax over it.
    pub fn new(name: impl Into<String>) -> Tier {
        Tier {
            name: name.into(),
            workers: 0,
            queue_limit: default_queue_limit(),
            service: Service::default(),
            degrade: None,
            timeout_ms: None,
            retries: yes(),
            instances: one(),
            servers: Servers::default(),
            replicas: one(),
            balance: Balance::default(),
            calls: None,
            fan_out: FanOut::default(),
            contention_window_ms: None,
        }
    }

    /// How many servers the tier has: `instances` with `servers = "per-instance"`, else
    /// `replicas`. A fault's `replica` indexes them.
    pub fn server_count(&self) -> u32 {
        match self.servers {
            Servers::Pool => self.replicas,
            Servers::PerInstance => self.instances,
        }
    }
}

fn yes() -> bool {
    true
}

/// A tier's queue bound when the file gives none: 10,000 queued requests, large enough never to
/// bind in the catalog's healthy states.
pub const DEFAULT_QUEUE_LIMIT: u32 = 10_000;

fn default_queue_limit() -> u32 {
    DEFAULT_QUEUE_LIMIT
}

/// A service-time distribution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// Exponential with this mean, milliseconds (used when `p50_ms` is absent).
    #[serde(default)]
    pub mean_ms: f64,
    /// Log-normal median, milliseconds (with `p99_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// Log-normal 99th percentile, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}

/// Service slows by `factor` under load. Exactly one trigger is set:
///
/// - `above_rps`: while arrivals over the last second (shed ones included) exceed it — Bronson
///   et al.'s "an order of magnitude slower above 300 QPS", a database that thrashes on what it
///   is *offered*;
/// - `above_in_system`: while the work in the system (queued + in service, counting the request
///   starting) exceeds it — a server that slows on what it *holds*, which admission control
///   bounds. With `full_in_system` the slowdown ramps linearly from 1× at `above_in_system` to
///   `factor` at `full_in_system` instead of stepping.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Degrade {
    /// Arrival-rate trigger, arrivals per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above_rps: Option<f64>,
    /// Work-in-system trigger, requests queued plus in service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above_in_system: Option<u32>,
    /// Work in system at which the full `factor` applies (a linear ramp from
    /// `above_in_system`); absent: a step at `above_in_system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_in_system: Option<u32>,
    /// Slowdown factor.
    pub factor: f64,
}

/// What kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Requests are held (no service starts) or fail at once, for the window.
    Outage,
    /// The service time becomes a log-normal with `p50_ms` / `p99_ms` for the window.
    Latency,
    /// Only `capacity` of the workers serve (a GC pause when near 0).
    Capacity,
    /// At `start_s` the server restarts: queued and running work fails; then caches are cold.
    Restart,
}

/// The operator turns a tier's admission knob to `admit_percent` from `start_s` for
/// `duration_s` (`[[operator]]`): each new request is then refused with probability
/// `1 − admit_percent / 100`, as `ShedLayer` refuses it under its knob
/// ([`seawall::admission::cut_by`]: 503 with a `Retry-After`). Only a tier with
/// `server_protection` has the knob; under another policy the cut does nothing. Not a fault:
/// the run's verdict is judged against the faults alone.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionCut {
    /// The tier, by name.
    pub tier: String,
    /// Start, seconds.
    pub start_s: f64,
    /// Length, seconds.
    pub duration_s: f64,
    /// The share of new requests admitted, in [0, 100].
    pub admit_percent: u8,
}

/// How an outage treats requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutageMode {
    /// Requests queue but nothing is served (a hung dependency).
    #[default]
    Hold,
    /// Every request fails at once (a database failing fast).
    Fail,
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// The kind.
    pub kind: FaultKind,
    /// The tier it hits, by name.
    pub tier: String,
    /// Start, seconds.
    pub start_s: f64,
    /// Length, seconds (for a restart: how long caches stay cold).
    pub duration_s: f64,
    /// Outage: hold or fail.
    #[serde(default)]
    pub mode: OutageMode,
    /// Latency: median, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// Latency: 99th percentile, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Capacity: fraction of workers left, in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<f64>,
    /// Restart: service-time factor while cold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_factor: Option<f64>,
    /// The replica it hits, by index from 0 (absent: every replica of the tier); with
    /// `servers = "per-instance"`, the instance whose server it hits.
    #[serde(default)]
    pub replica: Option<u32>,
}

impl FaultSpec {
    /// A fault of `kind` on `tier` from `start_s` for `duration_s`, every kind's own setting
    /// unset (and an outage holding): set the one its kind needs with struct update syntax.
    ///
    /// ```
    /// use seawall_sim::scenario::{FaultKind, FaultSpec};
    ///
    /// let slow = FaultSpec {
    ///     p50_ms: Some(240.0),
    ///     p99_ms: Some(600.0),
    ///     ..FaultSpec::new(FaultKind::Latency, "db", 10.0, 30.0)
    /// };
    /// assert_eq!(slow.tier, "db");
    /// ```
    pub fn new(kind: FaultKind, tier: impl Into<String>, start_s: f64, duration_s: f64) -> Self {
        FaultSpec {
            kind,
            tier: tier.into(),
            start_s,
            duration_s,
            mode: OutageMode::Hold,
            p50_ms: None,
            p99_ms: None,
            capacity: None,
            cold_factor: None,
            replica: None,
        }
    }
}
