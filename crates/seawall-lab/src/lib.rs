//! # seawall-lab — load-test the recovery, not just the load
//!
//! Ordinary load tests never fail anything, so they never find a storm. The lab starts a real
//! stack on 127.0.0.1 — edge → gateway → order service → dependency, each its own process with
//! a real HTTP client to the next — drives it with an open-loop load, breaks the dependency for a
//! while, and measures whether the system heals by itself: once as teams commonly configure it
//! (`baseline`: every tier retries), once with seawall (`seawall`: one owner layer at the edge,
//! fail-fast below, deadlines and server protection).
//!
//! The results are [`seawall_report::Results`] with `source: Lab`, the same shape as
//! `seawall simulate`, so the two can be laid side by side.
#![warn(missing_docs)]

pub mod config;
pub mod error;
pub mod example;
pub mod launch;
pub mod loadgen;
pub mod node;

pub use config::{FaultKind, FaultSpec, LabParams, Stack};
pub use error::LabError;
pub use launch::{Launcher, NodeHandle};
pub mod outcome;
pub mod pg;
pub mod progress;
pub mod prom;
pub mod report;
pub mod run;
pub mod saturation;
pub mod scrape;
pub mod sim;
pub mod target;
pub mod vlab;

pub use outcome::{LabOutcome, run_lab, run_lab_blocking};
pub use progress::LabProgress;
