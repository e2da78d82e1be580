//! Prometheus alerting rules and a Grafana dashboard for the metrics seawall exports.
//!
//! # Why these six alerts
//!
//! In a retry storm, dashboards that watch error rate and latency can stay green for minutes: every
//! request was eventually succeeding after a retry. The alerts here watch what a storm changes
//! first:
//!
//! 1. **attempts per logical call above 1.5 for 2 minutes** — the client's own multiplier, for
//!    each client (`by (job)`, or the label of [`AlertConfig::by`]): one storming client among
//!    ten pages although the fleet's ratio stays near 1.3; the same above 1.5 for 15 seconds
//!    is a `warning`, about two minutes sooner;
//! 2. **the dependency-to-edge ratio up while the edge is flat** — more requests reach the bottom
//!    than the users explain (the ratio worth putting on the first dashboard anyone opens);
//! 3. **retry overflow rising** — budgets are refusing retries: the dependency is sick, and
//!    without the budget this would be a storm;
//! 4. **oldest queued request older than the callers' timeout** — the queue holds work whose
//!    caller has already given up (and is retrying it);
//! 5. and 6. **retries at the door** — more than a third of the requests arriving at a server
//!    (counted by `ShedLayer`) or passing `seawall proxy` carry an attempt number of 2 or more
//!    (`Request-Attempt`, `grpc-previous-rpc-attempts`): the callers are retrying it, which new
//!    users, who arrive as first attempts, do not explain. A third is the share at which
//!    attempts per first attempt, `1 / (1 − share)`, pass 1.5. This one needs only the
//!    dependency's own page.
//!
//! Two recording rules keep each server's and each proxy's five heaviest callers by request
//! rate (`seawall:server_top_callers:rate1m`, `seawall:proxy_top_callers:rate1m`): who to call
//! first when one of them pages.
//!
//! For the other dialects ([`dialect_rules`]) the same alerts are written on the dialect's own
//! names, from the queries `seawall detect --explain` prints: attempts per call (gRPC, Envoy:
//! one client counts both calls and attempts), the dependency-to-edge ratio, and retry overflow
//! where the dialect counts it (Envoy). Istio and OpenTelemetry HTTP count the edge and the
//! dependency at two services, whose normal ratio is their fan-out, not 1: only the relative
//! rule (the ratio up 1.5× in 10 minutes while the edge is flat) applies there. No dialect but
//! seawall's exports a queue age. [`promtool_tests`] writes `promtool test rules` unit tests
//! for any dialect: a storm series fires each alert, a traffic-spike series fires none.
//!
//! Thresholds are the classifier's ([`crate::Thresholds`]): 1.5× attempts, edge "flat" below
//! 1.3× its level 10 minutes earlier. Services are told apart by the `job` label Prometheus adds
//! at scrape time; name the edge's and the dependency's jobs in [`AlertConfig`], or pick their
//! series with any label matchers ([`AlertConfig::edge`], [`AlertConfig::dependency`]: the
//! call-path alerts, the ratio, the queue age and the door's retry share, then read those
//! series). Attempts per call and
//! retry overflow are each client's own, by `job` ([`AlertConfig::by`]), for every client on the
//! edge's selector when one is given (the edge's client layer: the one that owns the retries),
//! else for all.
//!
//! Every alert carries a `call_path` label (the edge and the dependency it watches, or
//! [`AlertConfig::call_path`]) and a `delay` annotation: how long after the change it can fire
//! (the 1 m rate window's share plus its `for:`, plus up to one evaluation interval).

mod dialect;
mod grafana;
mod promtool;
mod rules;

pub use dialect::{dialect_dashboard, dialect_rules};
pub use grafana::grafana_dashboard;
pub use promtool::promtool_tests;
pub use rules::prometheus_rules;

use crate::Thresholds;
use crate::dialect::Dialect;

/// What the generated rules need to know about the deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertConfig {
    /// The Prometheus `job` of the edge service (default `edge`).
    pub edge_job: String,
    /// The Prometheus `job` of the dependency under watch (default `dependency`).
    pub dependency_job: String,
    /// The callers' timeout, seconds: queued work older than this is dead (default 1 s, the
    /// app's timeout in Bronson et al.).
    pub caller_timeout_s: f64,
    /// Attempts per call that is amplification (default 1.5; a healthy client sits near 1.0).
    pub amplification: f64,
    /// Edge rate, relative to 10 minutes earlier, still called flat (default 1.3).
    pub edge_flat: f64,
    /// The metric family the rules read (default [`Dialect::Seawall`]).
    pub dialect: Dialect,
    /// Label matchers of the edge's series (see [`crate::dialect`]); for [`Dialect::Seawall`],
    /// when given, in place of `job="EDGE_JOB"`.
    pub edge: String,
    /// Label matchers of the dependency's series; for [`Dialect::Seawall`], when given, in
    /// place of `job="DEPENDENCY_JOB"`.
    pub dependency: String,
    /// For [`Dialect::Seawall`]: label matchers of the client series of the dependency's
    /// callers (empty: none). The dependency's rate is then the larger of what it received and
    /// what they sent (a server does not count requests abandoned in its queue; see
    /// [`crate::dialect`]).
    pub caller: String,
    /// The label that names each client in the per-client rules (default `job`, the label
    /// Prometheus adds at scrape time; `instance` for one job of many replicas, or a label of
    /// your own such as `service`). Attempts per call, retry overflow and the queue age are
    /// judged `by` it, so one storming client among many pages even when the fleet's ratio
    /// stays under the threshold.
    pub by: String,
    /// The value of every alert's `call_path` label (default: the edge's and the dependency's
    /// selectors, `EDGE -> DEPENDENCY`), so two call paths' alerts are told apart.
    pub call_path: String,
}

impl Default for AlertConfig {
    fn default() -> Self {
        let th = Thresholds::default();
        AlertConfig {
            edge_job: "edge".into(),
            dependency_job: "dependency".into(),
            caller_timeout_s: 1.0,
            amplification: th.amplification,
            edge_flat: th.edge_flat,
            dialect: Dialect::Seawall,
            edge: String::new(),
            dependency: String::new(),
            caller: String::new(),
            by: "job".into(),
            call_path: String::new(),
        }
    }
}

impl AlertConfig {
    /// The edge's series: [`AlertConfig::edge`] when given, else `job="EDGE_JOB"`.
    fn edge_selector(&self) -> String {
        selector_or_job(&self.edge, &self.edge_job)
    }

    /// The dependency's series: [`AlertConfig::dependency`] when given, else
    /// `job="DEPENDENCY_JOB"`.
    fn dependency_selector(&self) -> String {
        selector_or_job(&self.dependency, &self.dependency_job)
    }

    /// Requests arriving at the series `sel` picks per second (served plus rejected), as PromQL.
    fn arrivals(&self, sel: &str, offset: &str) -> String {
        let m = |name: &str| format!("sum(rate({name}{{{sel}}}[1m]{offset}))");
        format!(
            "({} + ({} or vector(0)))",
            m(crate::names::SERVER_THROUGHPUT),
            m(crate::names::SERVER_REJECTED)
        )
    }

    /// Requests reaching the dependency per second: its arrivals, or with
    /// [`AlertConfig::caller`] the larger of those and the attempts its callers sent.
    fn dependency_rate(&self, offset: &str) -> String {
        let received = self.arrivals(&self.dependency_selector(), offset);
        if self.caller.is_empty() {
            return received;
        }
        format!(
            "max({received} or label_replace(sum(rate({}{{{}}}[1m]{offset})), \"from\", \"caller\", \"\", \"\"))",
            crate::names::CLIENT_ATTEMPTS,
            self.caller
        )
    }

    /// The dependency-to-edge ratio, as PromQL (`offset` e.g. `" offset 10m"` or `""`).
    fn dependency_to_edge(&self, offset: &str) -> String {
        format!(
            "{} / {}",
            self.dependency_rate(offset),
            self.arrivals(&self.edge_selector(), offset)
        )
    }

    /// Attempts per logical call by [`AlertConfig::by`], as PromQL.
    fn attempts_per_call(&self) -> String {
        format!(
            "sum by ({by}) (rate({}{sel}[1m])) / sum by ({by}) (rate({}{sel}[1m]))",
            crate::names::CLIENT_ATTEMPTS,
            crate::names::CLIENT_CALLS,
            by = self.by,
            sel = rules::braces(&self.edge),
        )
    }

    /// The `call_path` label's value: [`AlertConfig::call_path`], or `EDGE -> DEPENDENCY`.
    fn path(&self) -> String {
        if !self.call_path.is_empty() {
            return self.call_path.clone();
        }
        let name = |sel: &str, job: &str| match self.dialect {
            Dialect::Seawall => selector_or_job(sel, job),
            _ if sel.is_empty() => "*".to_string(),
            _ => sel.to_string(),
        };
        format!(
            "{} -> {}",
            name(&self.edge, &self.edge_job),
            name(&self.dependency, &self.dependency_job)
        )
    }
}

fn selector_or_job(sel: &str, job: &str) -> String {
    if sel.is_empty() { format!("job=\"{job}\"") } else { sel.to_string() }
}

/// The distinct `seawall_…` metric names a generated text uses (for checking them).
pub fn metric_names_in(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("seawall_") {
        let tail = &rest[i..];
        let end =
            tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
        rest = &tail[end..];
    }
    names
}
