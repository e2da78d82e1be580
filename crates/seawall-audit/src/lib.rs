//! # seawall-audit — the multiplier nobody chose
//!
//! Retry settings live in many places nobody reads together: application code, SDK defaults,
//! gRPC service configs, mesh sidecars and proxies. Each is reasonable alone; multiplied along a
//! call path they become 27×, 64×, 243×. This crate reads them together — a call-graph file plus
//! the Istio, Envoy, gRPC and AWS configs it references — and answers the question every retry
//! review should ask: *if every caller does this at once, what multiple of normal traffic reaches
//! each dependency, and can it survive that while cold?*
//!
//! - [`graph`]: the call-graph TOML schema, and loading it with its imports;
//! - [`import`]: the importers, with each tool's defaults (Istio's 2 retries, Envoy's 1, gRPC's
//!   cap of 5, the AWS SDKs' 3 attempts) and their sources;
//! - [`analysis`]: worst-case and budget-bounded multipliers, peak loads;
//! - [`rules`]: the findings, each with a one-line fix;
//! - [`report`]: the table, JSON and SARIF renderings;
//! - `simulate` (feature `simulate`): the audited paths as simulator scenarios.
//!
//! ```
//! use seawall_audit::{analysis, graph};
//! use std::path::Path;
//!
//! // mobile → gateway → orders → database, three attempts at each of three layers.
//! let mut toml = String::from("[services.mobile]\nentry = true\nrps = 2000\n");
//! for s in ["gateway", "orders", "database"] {
//!     toml += &format!("[services.{s}]\n");
//! }
//! for (from, to) in [("mobile", "gateway"), ("gateway", "orders"), ("orders", "database")] {
//!     toml += &format!("[[calls]]\nfrom = \"{from}\"\nto = \"{to}\"\n");
//!     toml += "[[calls.retries]]\nplace = \"app\"\nattempts = 3\n";
//! }
//! let g = graph::parse(Path::new("checkout.toml"), &toml).unwrap();
//! let report = analysis::analyse(&g);
//! let to_db = report.paths.iter().find(|p| p.path.last().unwrap() == "database").unwrap();
//! assert_eq!(to_db.worst_case_attempts, 27);
//! assert_eq!(to_db.peak_rps, Some(54_000.0));
//! assert!(report.findings.iter().any(|f| f.rule == "SW001"));
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod analysis;
pub mod error;
pub mod graph;
pub mod import;
pub mod model;
pub mod report;
pub mod rules;
#[cfg(feature = "simulate")]
pub mod simulate;

pub use error::{Error, ErrorKind};
pub use report::{Finding, Report, Severity};

/// Loads the call graph at `path` (and its imports) and audits it.
pub fn audit_file(path: &std::path::Path) -> Result<Report, Error> {
    let graph = graph::load(path)?;
    Ok(analysis::analyse(&graph))
}
