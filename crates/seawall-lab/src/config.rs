//! What a lab run is asked to do: the stack configuration, the load, the fault, validated.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::LabError;

/// How the tiers retry and protect themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    /// Every tier's usual settings: every tier retries (3 attempts, flat 100 ms, no jitter, no
    /// budget, no deadline, a 250 ms per-try timeout), servers queue without limit and finish work
    /// whose caller has gone.
    Baseline,
    /// seawall: one owner layer at the edge (full jitter, budget, deadline), fail-fast below,
    /// servers shed (retries first) and drop doomed work.
    Seawall,
}

impl Stack {
    /// The name used on the command line and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Stack::Baseline => "baseline",
            Stack::Seawall => "seawall",
        }
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Stack {
    type Err = LabError;
    fn from_str(s: &str) -> Result<Self, LabError> {
        match s {
            "baseline" => Ok(Stack::Baseline),
            "seawall" => Ok(Stack::Seawall),
            _ => Err(LabError::bad_input(
                "--config",
                format!("expected baseline or seawall, got {s:?}"),
            )),
        }
    }
}

/// What the dependency does during the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Every request fails at once with a 503 (a verification test: every database query failing).
    Fail,
    /// Requests are held, unanswered, until the fault ends (a GC pause, a lock).
    Hang,
    /// Service time ×6 (an index slowdown: p50 40 → 240 ms).
    Slow,
    /// Down (fails fast) for the fault, then back with a cold cache: service time ×4, warming
    /// linearly over the next five seconds' worth of capacity (a cold restart).
    Restart,
}

impl FaultKind {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Fail => "fail",
            FaultKind::Hang => "hang",
            FaultKind::Slow => "slow",
            FaultKind::Restart => "restart",
        }
    }
}

/// A fault: what, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultSpec {
    /// What the dependency does.
    pub kind: FaultKind,
    /// For how long.
    pub duration: Duration,
}

impl FromStr for FaultSpec {
    type Err = LabError;
    /// `KIND:SECONDS`, e.g. `fail:10`, `hang:5`, `slow:10`, `restart:3`.
    fn from_str(s: &str) -> Result<Self, LabError> {
        let bad = || {
            LabError::bad_input(
                "--fault",
                format!(
                    "expected KIND:SECONDS with KIND fail|hang|slow|restart and 1..=600 s, got {s:?}"
                ),
            )
        };
        let (k, secs) = s.split_once(':').ok_or_else(bad)?;
        let kind = match k {
            "fail" => FaultKind::Fail,
            "hang" => FaultKind::Hang,
            "slow" => FaultKind::Slow,
            "restart" => FaultKind::Restart,
            _ => return Err(bad()),
        };
        let secs: f64 = secs.parse().map_err(|_| bad())?;
        if !(1.0..=600.0).contains(&secs) {
            return Err(bad());
        }
        Ok(FaultSpec { kind, duration: Duration::from_secs_f64(secs) })
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.duration.as_secs_f64())
    }
}

/// The parameters of a lab run. Build with [`LabParams::default`] and the `with_*` setters, then
/// [`LabParams::validate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabParams {
    /// Configurations to run, one after the other.
    pub stacks: Vec<Stack>,
    /// Offered load at the edge, requests per second.
    pub rate: f64,
    /// Offered load at the end of the run (a linear ramp from `rate`); `None` for a fixed rate.
    pub ramp_to: Option<f64>,
    /// The dependency's capacity, requests per second (`workers / service_time`).
    pub capacity: f64,
    /// Dependency workers (concurrency).
    pub workers: u32,
    /// The fault, if any.
    pub fault: Option<FaultSpec>,
    /// When the fault starts, from the start of the load.
    pub at: Duration,
    /// Length of the load, per configuration.
    pub duration: Duration,
    /// Deadline of each edge request (the user gives up after it).
    pub deadline: Duration,
    /// `postgres://…`: the order service queries this PostgreSQL instead of the built-in
    /// dependency, through a pool of `workers` connections running a statement of
    /// `workers / capacity` seconds (see [`crate::pg`]).
    pub backend: Option<String>,
    /// Seed for the jitter and the load generator.
    pub seed: u64,
    /// `redis://HOST:PORT[/DB][#KEY]`: every tier's retry policy follows this fleet switch
    /// (`seawall_tower::client::fleet::follow`, key `seawall:retries` unless `#KEY` is given), so
    /// `seawall escape --redis` can turn retries off across the lab.
    #[serde(default)]
    pub fleet: Option<String>,
    /// `http://HOST:PORT[/PATH]`: every node exports its spans there as OTLP/HTTP JSON (path
    /// `/v1/traces` unless given; see [`crate::node::spans`] and [`otlp_traces_url`]), so the
    /// lab can be watched through `seawall detect --otlp-listen` or a collector.
    #[serde(default)]
    pub otlp: Option<String>,
    /// Where to write each running stack's node URLs (see [`crate::run::NodeInfo`]) as soon as
    /// the stack is up, so an external tool (`seawall detect`, `seawall escape`) can find them.
    #[serde(default)]
    pub nodes_file: Option<std::path::PathBuf>,
}

impl Default for LabParams {
    /// About a minute for both configurations on 2 cores: capacity 200 rps (4 workers × 20 ms),
    /// 160 rps offered (80 %), a 10 s fail-fast fault at 5 s, 25 s per configuration, a 1 s edge
    /// deadline.
    fn default() -> Self {
        LabParams {
            stacks: vec![Stack::Baseline, Stack::Seawall],
            rate: 160.0,
            ramp_to: None,
            capacity: 200.0,
            workers: 4,
            fault: Some(FaultSpec { kind: FaultKind::Fail, duration: Duration::from_secs(10) }),
            at: Duration::from_secs(5),
            duration: Duration::from_secs(25),
            deadline: Duration::from_secs(1),
            backend: None,
            seed: 1,
            fleet: None,
            otlp: None,
            nodes_file: None,
        }
    }
}

impl LabParams {
    /// The dependency's service time per request when healthy: `workers / capacity`.
    pub fn service_time(&self) -> Duration {
        Duration::from_secs_f64(f64::from(self.workers) / self.capacity)
    }

    /// Checks every field; the error names the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        if self.stacks.is_empty() {
            return Err(LabError::bad_input("--config", "at least one configuration"));
        }
        let rate_ok = |r: f64| r.is_finite() && (1.0..=5000.0).contains(&r);
        if !rate_ok(self.rate) || !self.ramp_to.is_none_or(rate_ok) {
            return Err(LabError::bad_input(
                "--rate",
                format!("in [1, 5000] rps, got {}", self.rate),
            ));
        }
        if !(self.capacity.is_finite() && (10.0..=5000.0).contains(&self.capacity)) {
            return Err(LabError::bad_input(
                "--capacity",
                format!("in [10, 5000] rps, got {}", self.capacity),
            ));
        }
        if !(1..=256).contains(&self.workers) {
            return Err(LabError::bad_input(
                "--workers",
                format!("in [1, 256], got {}", self.workers),
            ));
        }
        let secs = self.duration.as_secs_f64();
        if !(2.0..=600.0).contains(&secs) {
            return Err(LabError::bad_input("--duration", format!("in [2, 600] s, got {secs}")));
        }
        if let Some(f) = &self.fault
            && self.at + f.duration > self.duration
        {
            return Err(LabError::bad_input(
                "--at",
                format!(
                    "the fault ({f}) starting at {:?} must end within --duration {secs} s",
                    self.at
                ),
            ));
        }
        let dl = self.deadline.as_millis();
        if !(10..=60_000).contains(&dl) {
            return Err(LabError::bad_input("--deadline-ms", format!("in [10, 60000], got {dl}")));
        }
        if let Some(b) = &self.backend
            && !(b.starts_with("postgres://") || b.starts_with("postgresql://"))
        {
            return Err(LabError::bad_input(
                "--backend",
                format!("expected postgres://…, got {b:?}"),
            ));
        }
        if let Some(f) = &self.fleet
            && !f.starts_with("redis://")
        {
            return Err(LabError::bad_input(
                "--fleet",
                format!("expected redis://HOST:PORT[#KEY], got {f:?}"),
            ));
        }
        if let Some(u) = &self.otlp {
            otlp_traces_url(u)?;
        }
        if self.backend.is_some() {
            // One connection per worker: stay well inside a default max_connections of 100.
            if self.workers > 32 {
                return Err(LabError::bad_input(
                    "--workers",
                    format!(
                        "at most 32 with --backend (one connection each), got {}",
                        self.workers
                    ),
                ));
            }
            if self.fault.is_some_and(|f| f.kind == FaultKind::Restart) {
                return Err(LabError::bad_input(
                    "--fault",
                    "restart is not offered with --backend (fail, hang or slow)",
                ));
            }
        }
        Ok(())
    }
}

/// The virtual lab's settings (the `vlab` module), defined here so that the launcher can carry
/// them without depending on the virtual lab.
/// One-way latency of a link when none is given: a same-zone hop.
pub const DEFAULT_LATENCY: Duration = Duration::from_micros(250);

/// What a virtual run may use before it stops with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Requests in flight on every link together.
    pub max_in_flight: u64,
    /// Wall time of the whole run.
    pub max_wall: std::time::Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { max_in_flight: 200_000, max_wall: Duration::from_secs(600) }
    }
}

/// The virtual lab's settings beyond [`LabParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtualParams {
    /// One-way latency of every link.
    pub latency: Duration,
    /// The run's bounds.
    pub budget: Budget,
}

impl Default for VirtualParams {
    fn default() -> Self {
        VirtualParams { latency: DEFAULT_LATENCY, budget: Budget::default() }
    }
}

/// The OTLP/HTTP traces endpoint of `--otlp URL`: `http://HOST:PORT` gains the signal path
/// `/v1/traces` (as the OTLP exporters' `OTEL_EXPORTER_OTLP_ENDPOINT` does); a URL with a path
/// is taken as it is. Only `http://` (the lab sends plain HTTP/1.1).
pub fn otlp_traces_url(url: &str) -> Result<String, LabError> {
    let bad = |why: &str| LabError::bad_input("--otlp", format!("{url:?}: {why}"));
    let uri: http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(bad("expected http://HOST:PORT[/PATH]"));
    }
    Ok(match uri.path() {
        "" | "/" => format!("{}/v1/traces", url.trim_end_matches('/')),
        _ => url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn otlp_url_gains_the_traces_path_and_refuses_other_schemes() {
        use super::otlp_traces_url as u;
        assert_eq!(u("http://127.0.0.1:4318").unwrap(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(u("http://127.0.0.1:4318/").unwrap(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(u("http://h:1/otlp/v1/traces").unwrap(), "http://h:1/otlp/v1/traces");
        for bad in ["https://h:4318", "127.0.0.1:4318", "http://", "grpc://h:4317", ""] {
            assert!(u(bad).is_err(), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn parses_faults_and_stacks() {
        let f: FaultSpec = "slow:10".parse().unwrap();
        assert_eq!((f.kind, f.duration), (FaultKind::Slow, Duration::from_secs(10)));
        for bad in ["", "slow", "slow:", "melt:3", "fail:0", "fail:-1", "fail:nan", "fail:1e9"] {
            assert!(bad.parse::<FaultSpec>().unwrap_err().is_bad_input(), "{bad}");
        }
        assert_eq!("seawall".parse::<Stack>().unwrap(), Stack::Seawall);
        assert!("naive".parse::<Stack>().is_err());
    }

    #[test]
    fn defaults_validate_and_bad_values_name_the_flag() {
        LabParams::default().validate().unwrap();
        let p = LabParams { at: Duration::from_secs(20), ..LabParams::default() };
        assert!(p.validate().unwrap_err().to_string().starts_with("--at"));
        let p = LabParams { rate: 0.0, ..LabParams::default() };
        assert!(p.validate().unwrap_err().to_string().starts_with("--rate"));
        assert_eq!(LabParams::default().service_time(), Duration::from_millis(20));
    }
}
