//! Tell a retry storm from a traffic spike while it happens.
//!
//! Seed 000's dashboards were green for eleven minutes: error rate zero, every request eventually
//! succeeding after a retry. The signal that would have caught it was the ratio of outbound to
//! inbound requests. A storm's signature is that cause and effect run in the opposite order to a
//! normal overload (seed 002, "Symptoms you'd see"):
//!
//! - **traffic spike**: edge traffic rises first; attempts per call stay ≈ 1;
//! - **retry storm**: errors come first, the edge is flat, and attempts per call and the
//!   dependency-to-edge ratio jump;
//! - **metastable**: the trigger is over and goodput has not returned.
//!
//! [`Classifier`] turns a stream of per-interval [`Sample`]s into [`Verdict`]s with the evidence,
//! the same way for a recorded series ([`replay`]) and for live scrapes.
#![warn(missing_docs)]

pub mod alerts;
pub mod classifier;
pub mod dialect;
pub mod escape;
pub mod names;
pub mod prom;
pub mod prometheus;
pub mod sample;
pub mod scrape;

pub use classifier::{Classifier, Thresholds, Verdict, VerdictKind};
pub use sample::{Sample, SampleError, replay, samples_from_csv, samples_from_run};
