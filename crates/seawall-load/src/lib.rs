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
//! generator gives up at it; a request counts as goodput only if answered 2xx within it. A
//! request due while all `max_in_flight` connections are busy waits for the first to come free
//! and is sent then, its latency still measured from its scheduled time (wrk2's correction);
//! what the generator could not send within the lateness bound — waiting for a connection
//! (`dropped_full`) or itself off the CPU (`dropped_late`) — is counted as dropped, never
//! silently skipped, so a saturated generator is visible in its own results (`max_lag_ms`,
//! the drops). [The `drive` module](mod@drive) says why, and how.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use seawall_load::{LoadSpec, Schedule, Target, run_blocking};
//!
//! let spec = LoadSpec::new(
//!     Target::parse("http://127.0.0.1:8080/checkout")?,
//!     "GET",
//!     vec![],
//!     "",                           // body
//!     Schedule::constant(500.0, Duration::from_secs(10))?,
//!     Duration::from_millis(1000),  // deadline
//!     seawall_load::DEFAULT_MAX_IN_FLIGHT,
//!     Duration::from_millis(100),   // max lateness
//! )?;
//! let results = run_blocking(&spec, "http://127.0.0.1:8080/checkout", |_| {})?;
//! println!("{}", results.render_table());
//! # Ok::<(), seawall_load::LoadError>(())
//! ```

pub mod drive;
pub mod error;
pub mod http;
pub mod report;
pub mod schedule;
pub mod spec;
pub mod stats;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;

pub use drive::{
    Admit, Bounds, Progress, Shard, Timer, TokioTimer, Transport, admit, drive, drive_shard,
};
pub use error::{LoadError, LoadErrorKind};
pub use http::{Connections, HttpTransport};
pub use report::{Counts, Latency, LoadReport, LoadResults, SecondReport};
pub use schedule::{Schedule, Stage};
pub use spec::{
    LoadSpec, MAX_THREADS, Target, default_threads, parse_duration, parse_header, parse_stage,
};
pub use stats::{Outcome, Recorder};

/// The in-flight bound `seawall load` defaults to. Chosen by measurement against nginx on
/// loopback (`examples/inflight.rs`, the crate's BENCHMARKS.md): it sustained at least 0.9× the
/// best bound's rate, where 512 fell below that; and it leaves room for a slow target (at
/// 500 ms a response, 256 in flight carry 512 rps).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;

/// Runs `spec` on the current tokio runtime; `url` is the target as the user wrote it (for the
/// report).
pub async fn run(spec: &LoadSpec, url: &str, progress: impl FnMut(&Progress)) -> LoadResults {
    let transport = Arc::new(HttpTransport::new(spec));
    let rec =
        drive(&spec.schedule, spec.bounds, spec.deadline, transport.clone(), TokioTimer, progress)
            .await;
    LoadResults::new(spec, url, &rec, transport.connections())
}

/// Runs `spec` on `spec.threads` threads of its own (at most [`MAX_THREADS`], at most max in
/// flight), each a single-threaded runtime with its own connections, driving every n-th
/// arrival and an n-th of the in-flight bound ([`Shard`]); `progress` sees the sum once every
/// thread has reported a second.
pub fn run_blocking(
    spec: &LoadSpec,
    url: &str,
    mut progress: impl FnMut(&Progress),
) -> Result<LoadResults, LoadError> {
    let run_err = |m: String| LoadError::new(LoadErrorKind::Run, m);
    let max = spec.bounds.max_in_flight.get();
    let of = spec.threads.get().clamp(1, MAX_THREADS).min(max);
    let (tx, rx) = std::sync::mpsc::channel::<Progress>();
    let mut threads = Vec::with_capacity(of);
    for index in 0..of {
        let (spec, tx) = (spec.clone(), tx.clone());
        // This shard's part of the in-flight bound: an n-th, the remainder to the first ones.
        let share = max / of + usize::from(index < max % of);
        let max_in_flight = NonZeroUsize::new(share).expect("of ≤ max");
        let bounds = Bounds { max_in_flight, ..spec.bounds };
        let t =
            std::thread::Builder::new().name(format!("seawall-load-{index}")).spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                Ok::<_, std::io::Error>(rt.block_on(async {
                    let transport = Arc::new(HttpTransport::new(&spec));
                    let shard = Shard { index, of };
                    let send = |p: &Progress| {
                        let _ = tx.send(*p);
                    };
                    let (s, d) = (&spec.schedule, spec.deadline);
                    let rec =
                        drive_shard(s, shard, bounds, d, transport.clone(), TokioTimer, send).await;
                    (rec, transport.connections())
                }))
            });
        threads.push(t.map_err(|e| run_err(format!("starting a thread: {e}")))?);
    }
    drop(tx);
    // Each thread reports every second once; a second is shown when all have reported it.
    let mut pending: BTreeMap<usize, (Progress, usize)> = BTreeMap::new();
    for p in rx {
        let blank = Progress { second: p.second, ..Progress::default() };
        let e = pending.entry(p.second).or_insert((blank, 0));
        e.0.offered += p.offered;
        e.0.sent += p.sent;
        e.0.dropped += p.dropped;
        e.0.good += p.good;
        e.0.in_flight += p.in_flight;
        e.1 += 1;
        if e.1 == of {
            progress(&e.0);
            pending.remove(&p.second);
        }
    }
    let mut rec = Recorder::new(spec.schedule.seconds());
    // Each thread's peak is summed: an upper bound of the peak of the sum, as for in flight.
    let mut conns = Connections::default();
    for t in threads {
        let (r, c) = t
            .join()
            .map_err(|_| run_err("a generator thread panicked".into()))?
            .map_err(|e| run_err(format!("starting the runtime: {e}")))?;
        rec.merge(&r);
        conns.peak += c.peak;
        conns.opened += c.opened;
    }
    Ok(LoadResults::new(spec, url, &rec, conns))
}
