//! `seawall load`: open-loop HTTP load with honest latency.
//!
//! # Why open loop
//!
//! A retry storm is a system offered more work than it can do, by callers that do not wait
//! politely. A closed-loop tool (wrk, ab, most benchmarks: a fixed set of connections, each
//! sending its next request when the last one returned) cannot produce that: when the server
//! slows, the tool slows with it, the offered load falls to what the server can take, and the
//! latency it reports leaves out the time requests *would* have waited — coordinated omission.
//! Users do not wait for each other. So this generator sends on a schedule (a constant rate, or
//! k6-style ramping stages), never waits for a response before the next send, and measures each
//! request's latency from its scheduled time into an HdrHistogram.
//!
//! Each request carries its deadline as `Request-Timeout-Ms` (seawall's wire convention) and the
//! generator gives up at it; a request counts as goodput only if answered 2xx within it. What
//! the generator could not send — more than the lateness bound behind schedule, or at the
//! in-flight bound — is counted as dropped, never silently skipped, so a saturated generator is
//! visible in its own results (`max_lag_ms`, `dropped_late`).
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use seawall_lab::load::{LoadSpec, Schedule, Target, run_blocking};
//!
//! let spec = LoadSpec::new(
//!     Target::parse("http://127.0.0.1:8080/checkout")?,
//!     "GET",
//!     vec![],
//!     "",                           // body
//!     Schedule::constant(500.0, Duration::from_secs(10))?,
//!     Duration::from_millis(1000),  // deadline
//!     512,                          // max in flight
//!     Duration::from_millis(100),   // max lateness
//! )?;
//! let results = run_blocking(&spec, "http://127.0.0.1:8080/checkout", |_| {})?;
//! println!("{}", results.render_table());
//! # Ok::<(), seawall_lab::load::LoadError>(())
//! ```

pub mod drive;
pub mod error;
pub mod http;
pub mod report;
pub mod schedule;
pub mod spec;
pub mod stats;

use std::sync::Arc;

pub use drive::{Admit, Bounds, Progress, Timer, TokioTimer, Transport, admit, drive};
pub use error::{LoadError, LoadErrorKind};
pub use http::HttpTransport;
pub use report::{Counts, Latency, LoadReport, LoadResults, SecondReport};
pub use schedule::{Schedule, Stage};
pub use spec::{LoadSpec, Target, parse_duration, parse_header, parse_stage};
pub use stats::{Outcome, Recorder};

/// Runs `spec` on the current tokio runtime; `url` is the target as the user wrote it (for the
/// report).
pub async fn run(spec: &LoadSpec, url: &str, progress: impl FnMut(&Progress)) -> LoadResults {
    let transport = Arc::new(HttpTransport::new(spec));
    let rec =
        drive(&spec.schedule, spec.bounds, spec.deadline, transport.clone(), TokioTimer, progress)
            .await;
    LoadResults::new(spec, url, &rec, transport.peak_connections())
}

/// Runs `spec` on a multi-threaded runtime of its own (one worker per core).
pub fn run_blocking(
    spec: &LoadSpec,
    url: &str,
    progress: impl FnMut(&Progress),
) -> Result<LoadResults, LoadError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::new(LoadErrorKind::Run, format!("starting the runtime: {e}")))?;
    Ok(rt.block_on(run(spec, url, progress)))
}
