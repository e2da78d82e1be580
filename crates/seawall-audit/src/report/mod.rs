//! What the audit found: per-path multipliers and loads, per-hop layers, findings; three renderings.
//!
//! [`Report`] serialises to the JSON the CLI prints with `--json`:
//!
//! ```json
//! {"paths": [{"path": ["edge", "gateway", "orders", "db"], "worst_case_attempts": 27,
//!   "bounded_attempts": null, "peak_rps": 54000, "bounded_peak_rps": 54000,
//!   "capacity_rps": 6000, "cold_capacity_rps": 1200, "survives_warm": false,
//!   "survives_cold": false}],
//!  "dependencies": [...], "hops": [...],
//!  "findings": [{"rule": "SW001", "severity": "error", "location": "edge → … → db",
//!   "message": "...", "fix": "..."}]}
//! ```
//!
//! `peak_rps` is this path's share (entry rate × worst case), `bounded_peak_rps` the same with
//! budgets applied. `survives_warm`/`survives_cold` judge the dependency under *all* its paths at
//! once — "everything fails at once" is the question — using the bounded total (the worst case
//! where no budget applies); the per-dependency totals are in `dependencies`.

use serde::Serialize;

use crate::model::Place;

pub mod sarif;
pub mod table;

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing (an implicit default).
    Info,
    /// Risky; fix when convenient.
    Warning,
    /// Multiplies load or breaks a rule outright; fails the audit by default.
    Error,
}

impl Severity {
    /// Parses `info`, `warning` or `error`.
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One finding: a rule broken somewhere, and the one-line fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Rule id, e.g. `SW001` (see [`crate::rules::RULES`]).
    pub rule: &'static str,
    /// How bad it is.
    pub severity: Severity,
    /// `file:line`, or the hop (`a → b`) or path it concerns.
    pub location: String,
    /// What is wrong, with the numbers.
    pub message: String,
    /// The fix, in one line.
    pub fix: String,
}

/// One path from an entry point to a dependency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathReport {
    /// Service names from the entry point to the dependency.
    pub path: Vec<String>,
    /// Attempts reaching the dependency per entry request when everything fails: the product of
    /// every retrying place on every hop.
    pub worst_case_attempts: u64,
    /// The same when budgets hold; `null` when no retrying place on the path has a budget.
    pub bounded_attempts: Option<f64>,
    /// Entry rate × worst case, when the entry rate is known.
    pub peak_rps: Option<f64>,
    /// Entry rate × bounded (or worst) case.
    pub bounded_peak_rps: Option<f64>,
    /// The dependency's warm capacity.
    pub capacity_rps: Option<f64>,
    /// The dependency's cold capacity.
    pub cold_capacity_rps: Option<f64>,
    /// Whether the dependency's total peak (bounded by budgets where they apply) fits its warm
    /// capacity.
    pub survives_warm: Option<bool>,
    /// Whether the dependency's total peak (bounded by budgets where they apply) fits its cold
    /// capacity.
    pub survives_cold: Option<bool>,
}

/// The load on one dependency from all paths that reach it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DependencyLoad {
    /// The service.
    pub service: String,
    /// Normal load: the sum of entry rates over paths reaching it.
    pub normal_rps: f64,
    /// Worst-case load: the sum of `peak_rps` over paths reaching it.
    pub peak_rps: f64,
    /// Load when budgets hold.
    pub bounded_peak_rps: f64,
    /// Warm capacity.
    pub capacity_rps: Option<f64>,
    /// Cold capacity.
    pub cold_capacity_rps: Option<f64>,
}

/// One place that retries a hop, as reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerReport {
    /// Where it lives.
    pub place: Place,
    /// Attempts including the first.
    pub attempts: u32,
    /// Attempts when its budget holds.
    pub bounded_attempts: f64,
    /// True for defaults nobody wrote.
    pub implicit: bool,
    /// The budget, described.
    pub budget: Option<String>,
    /// `file:line` it comes from.
    pub source: String,
    /// What the audit assumed or noticed.
    pub note: Option<String>,
}

/// One hop and everything that retries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopReport {
    /// The caller.
    pub from: String,
    /// The callee.
    pub to: String,
    /// Product of its layers' attempts.
    pub worst_case_attempts: u64,
    /// Product of its layers' bounded attempts.
    pub bounded_attempts: f64,
    /// Its layers, outermost first.
    pub layers: Vec<LayerReport>,
}

/// The whole audit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Every path from an entry point to every service it reaches.
    pub paths: Vec<PathReport>,
    /// Totals per dependency with a known load.
    pub dependencies: Vec<DependencyLoad>,
    /// Every hop with its layers.
    pub hops: Vec<HopReport>,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
}

impl Report {
    /// The most severe finding, if any.
    pub fn worst_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain structs of strings and numbers cannot fail; NaN never occurs
        // because every figure is validated finite, and would print as null anyway.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}
