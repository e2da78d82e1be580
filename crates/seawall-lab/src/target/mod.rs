//! `seawall lab --target`: the lab on the user's own stack.
//!
//! The synthetic lab ([`crate::run_lab`]) starts seawall's own tiers. This one starts nothing
//! of seawall's but the load and the proxies: the user names the edge of their stack
//! (`--target http://127.0.0.1:8080/checkout`), puts a [`seawall_proxy`] in front of each
//! dependency worth breaking (`--proxy db=127.0.0.1:7000,127.0.0.1:5432,tcp`: their stack
//! talks to 7000, the proxy to 5432), and says what breaks when (`--fault db:fail:10@5`). The
//! lab then, for each configuration of the stack (`--config before='./start.sh --retries 3'`,
//! `--config after='./start.sh --seawall'`), starts the proxies and the configuration's command,
//! waits until the target accepts connections, drives open-loop load at it
//! ([`seawall_load::drive()`]) while the faults act through the proxies, and counts each second
//! what reached every proxied dependency. It writes the same `results.json` and `report.html`
//! as the synthetic lab ([`seawall_report`]): recovered or not, recovery time, goodput before,
//! during and after, attempts reaching each dependency per edge request (the tiers are `edge`
//! then the proxies), and what it knows of wasted work.
//!
//! # Bounds
//!
//! Only loopback targets, proxy listeners and upstreams. Everything is bounded in time: the
//! load (at most [`seawall_load::schedule::MAX_DURATION`]), the wait for the stack to come up
//! ([`TargetParams::ready_timeout`]), its stop (SIGTERM, then SIGKILL after
//! [`child::STOP_GRACE`]); in count: at most [`MAX_CONFIGS`] configurations, [`MAX_PROXIES`]
//! proxies, the load's in-flight bound. Each configuration's command runs in a process group
//! of its own, stopped at the end of its run, on an error and on Ctrl-C; with a reaper
//! ([`child::run_reaper`]) also when the lab is killed.
//!
//! # Example
//!
//! ```no_run
//! use seawall_lab::target::{TargetParams, run_target_blocking};
//!
//! let mut p = TargetParams::new("http://127.0.0.1:8080/checkout")?;
//! p.add_proxy("db=127.0.0.1:7000,127.0.0.1:5432,tcp")?;
//! p.add_fault("db:fail:10")?;
//! p.add_config("before=./start-stack.sh --retries 3")?;
//! p.add_config("after=./start-stack.sh --seawall")?;
//! let out = run_target_blocking(&p, std::path::Path::new("out/lab"), None, |_| {})?;
//! if let Some(out) = out {
//!     print!("{}", seawall_report::render_table(&out.results));
//! }
//! # Ok::<(), seawall_lab::LabError>(())
//! ```

pub mod child;
mod run;

use std::net::SocketAddr;
use std::time::Duration;

use crate::LabError;
use seawall_load::{LoadSpec, Schedule, Target};
use seawall_proxy::{Fault, Mode, ProxyConfig};

pub use run::{TargetFigures, TargetOutcome, run_target, run_target_blocking};

/// Most configurations one run compares.
pub const MAX_CONFIGS: usize = 8;
/// Most proxies.
pub const MAX_PROXIES: usize = 8;
/// Longest a configuration's command may take to accept connections at the target.
pub const MAX_READY: Duration = Duration::from_secs(120);

/// A dependency put behind a fault-injecting proxy: `NAME=LISTEN,UPSTREAM[,tcp|http]`.
#[derive(Debug, Clone)]
pub struct ProxyArg {
    /// The dependency's name (a tier of the results).
    pub name: String,
    /// The proxy: where the user's stack connects, where it forwards, TCP or HTTP.
    pub config: ProxyConfig,
}

/// A fault on a named proxy: `NAME:KIND:SECONDS[@START][,KEY=VALUE…]` ([`seawall_proxy`]'s
/// grammar); `START` counts from the start of the load (default [`TargetParams::at`]).
#[derive(Debug, Clone)]
pub struct FaultArg {
    /// Which proxy.
    pub proxy: String,
    /// The fault, its start from the start of the load.
    pub fault: Fault,
    /// Whether the spec gave a start (`@START`); if not, [`TargetParams::at`] applies.
    pub explicit_start: bool,
}

/// A configuration of the user's stack: `NAME=COMMAND` (run with `sh -c`), or `NAME` alone
/// for a stack the user started themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigArg {
    /// Its name in the results (`before`, `after`, …).
    pub name: String,
    /// The command that starts it, if the lab starts it.
    pub command: Option<String>,
}

/// What `seawall lab --target` is asked to do.
#[derive(Debug, Clone)]
pub struct TargetParams {
    /// The edge URL, as the user wrote it.
    pub url: String,
    /// Parsed (loopback only).
    pub target: Target,
    /// The proxies, in order.
    pub proxies: Vec<ProxyArg>,
    /// The faults.
    pub faults: Vec<FaultArg>,
    /// The configurations (none: one run, `target`, of a stack already running).
    pub configs: Vec<ConfigArg>,
    /// Offered load, requests per second.
    pub rate: f64,
    /// Length of the load per configuration.
    pub duration: Duration,
    /// Default start of a fault without `@START`, from the start of the load.
    pub at: Duration,
    /// Each edge request's deadline.
    pub deadline: Duration,
    /// The load's in-flight bound.
    pub max_in_flight: usize,
    /// How long a configuration's command may take to accept connections at the target.
    pub ready_timeout: Duration,
    /// Pause between configurations.
    pub settle: Duration,
    /// Seed of the proxies' random draws.
    pub seed: u64,
}

fn name_ok(what: &'static str, name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(LabError::bad_input(what, format!("name {name:?}: 1 to 32 of A-Z a-z 0-9 - _")))
    }
}

impl TargetParams {
    /// Defaults (160 rps for 25 s, faults at 5 s, deadline 1 s) against `url` (loopback only).
    pub fn new(url: &str) -> Result<TargetParams, LabError> {
        let target =
            Target::parse(url).map_err(|e| LabError::bad_input("--target", e.to_string()))?;
        Ok(TargetParams {
            url: url.to_string(),
            target,
            proxies: Vec::new(),
            faults: Vec::new(),
            configs: Vec::new(),
            rate: 160.0,
            duration: Duration::from_secs(25),
            at: Duration::from_secs(5),
            deadline: Duration::from_secs(1),
            max_in_flight: seawall_load::DEFAULT_MAX_IN_FLIGHT,
            ready_timeout: Duration::from_secs(30),
            settle: Duration::from_secs(1),
            seed: 1,
        })
    }

    /// Adds `NAME=LISTEN,UPSTREAM[,tcp|http]` (HTTP unless `tcp`); both addresses loopback.
    pub fn add_proxy(&mut self, s: &str) -> Result<(), LabError> {
        let bad = |d: String| LabError::bad_input("--proxy", d);
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| bad(format!("{s:?}: expected NAME=LISTEN,UPSTREAM[,tcp|http]")))?;
        name_ok("--proxy", name)?;
        let parts: Vec<&str> = rest.split(',').collect();
        let mode = match parts.as_slice() {
            [_, _] | [_, _, "http"] => Mode::Http,
            [_, _, "tcp"] => Mode::Tcp,
            _ => return Err(bad(format!("{s:?}: expected NAME=LISTEN,UPSTREAM[,tcp|http]"))),
        };
        let mut config = ProxyConfig::new(parts[0], parts[1], mode)?;
        if !config.upstream.ip().is_loopback() {
            return Err(bad(format!(
                "{s:?}: upstream {} is not a loopback address (127.0.0.0/8, ::1)",
                config.upstream
            )));
        }
        if config.listen.port() == 0 {
            return Err(bad(format!("{s:?}: the stack needs a fixed LISTEN port, not 0")));
        }
        if self.proxies.iter().any(|p| p.name == name) {
            return Err(bad(format!("{name:?} is named twice")));
        }
        if self.proxies.len() >= MAX_PROXIES {
            return Err(bad(format!("at most {MAX_PROXIES} proxies")));
        }
        config.seed = self.seed.wrapping_add(self.proxies.len() as u64);
        self.proxies.push(ProxyArg { name: name.to_string(), config });
        Ok(())
    }

    /// Adds `NAME:KIND:SECONDS[@START][,KEY=VALUE…]` on the proxy `NAME` (added before).
    pub fn add_fault(&mut self, s: &str) -> Result<(), LabError> {
        let (name, spec) = s.split_once(':').ok_or_else(|| {
            LabError::bad_input("--fault", format!("{s:?}: expected PROXY:KIND:SECONDS[@START]"))
        })?;
        if !self.proxies.iter().any(|p| p.name == name) {
            return Err(LabError::bad_input(
                "--fault",
                format!("{s:?}: no --proxy named {name:?} (give --proxy {name}=LISTEN,UPSTREAM)"),
            ));
        }
        let fault: Fault = spec.parse()?;
        let explicit_start = spec.split(',').next().is_some_and(|k| k.contains('@'));
        self.faults.push(FaultArg { proxy: name.to_string(), fault, explicit_start });
        Ok(())
    }

    /// Adds `NAME=COMMAND` (or `NAME` for a stack already running).
    pub fn add_config(&mut self, s: &str) -> Result<(), LabError> {
        let (name, command) = match s.split_once('=') {
            Some((n, c)) => (n, Some(c.trim())),
            None => (s, None),
        };
        name_ok("--config", name)?;
        if command.is_some_and(|c| c.is_empty() || c.len() > 4096) {
            return Err(LabError::bad_input(
                "--config",
                format!("{name}: the command must be 1 to 4096 bytes"),
            ));
        }
        if self.configs.iter().any(|c| c.name == name) {
            return Err(LabError::bad_input("--config", format!("{name:?} is named twice")));
        }
        self.configs
            .push(ConfigArg { name: name.to_string(), command: command.map(str::to_string) });
        Ok(())
    }

    /// The faults with their starts resolved (from the start of the load), per proxy index.
    pub fn resolved_faults(&self) -> Vec<(usize, Fault)> {
        self.faults
            .iter()
            .filter_map(|f| {
                let i = self.proxies.iter().position(|p| p.name == f.proxy)?;
                let mut fault = f.fault;
                if !f.explicit_start {
                    fault.start = self.at;
                }
                Some((i, fault))
            })
            .collect()
    }

    /// The load's spec: GET the target at `rate` for `duration`, lateness bound 100 ms.
    pub fn load_spec(&self) -> Result<LoadSpec, LabError> {
        let bad = |e: seawall_load::LoadError| LabError::bad_input("load", e.to_string());
        let schedule = Schedule::constant(self.rate, self.duration).map_err(bad)?;
        LoadSpec::new(
            self.target.clone(),
            "GET",
            vec![],
            Vec::new(),
            schedule,
            self.deadline,
            self.max_in_flight,
            Duration::from_millis(100),
        )
        .map_err(bad)
    }

    /// Checks the whole: load, bounds, configurations, faults within the run.
    pub fn validate(&self) -> Result<(), LabError> {
        self.load_spec()?;
        if self.configs.len() > MAX_CONFIGS {
            return Err(LabError::bad_input("--config", format!("at most {MAX_CONFIGS}")));
        }
        if self.ready_timeout.is_zero() || self.ready_timeout > MAX_READY {
            return Err(LabError::bad_input(
                "--ready-timeout",
                format!("in (0, {}] s", MAX_READY.as_secs()),
            ));
        }
        let listen: Vec<SocketAddr> = self.proxies.iter().map(|p| p.config.listen).collect();
        for (i, a) in listen.iter().enumerate() {
            if listen[..i].contains(a) || *a == self.target.addr {
                return Err(LabError::bad_input(
                    "--proxy",
                    format!("{a} is used twice (by two proxies, or a proxy and the target)"),
                ));
            }
        }
        for p in &self.proxies {
            p.config.validate()?;
        }
        for (_, f) in self.resolved_faults() {
            if f.start >= self.duration {
                return Err(LabError::bad_input(
                    "--fault",
                    format!(
                        "{f} starts at {} s, after the load ends ({} s)",
                        f.start.as_secs_f64(),
                        self.duration.as_secs_f64()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Largest lab file read.
pub const MAX_FILE: usize = 1 << 20;

/// A lab file: the flags of `seawall lab --target`, as JSON (unknown fields refused).
///
/// ```
/// let p = seawall_lab::target::TargetParams::from_json(r#"{
///   "target": "http://127.0.0.1:8080/checkout",
///   "proxies": ["db=127.0.0.1:7000,127.0.0.1:5432,tcp"],
///   "faults": ["db:fail:10"],
///   "configs": ["before=./start.sh --retries 3", "after=./start.sh --seawall"],
///   "rate": 200, "duration_s": 30
/// }"#)?;
/// assert_eq!((p.configs.len(), p.rate), (2, 200.0));
/// # Ok::<(), seawall_lab::LabError>(())
/// ```
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LabFile {
    target: String,
    #[serde(default)]
    proxies: Vec<String>,
    #[serde(default)]
    faults: Vec<String>,
    #[serde(default)]
    configs: Vec<String>,
    rate: Option<f64>,
    duration_s: Option<f64>,
    at_s: Option<f64>,
    deadline_ms: Option<u64>,
    max_in_flight: Option<usize>,
    ready_timeout_s: Option<f64>,
    seed: Option<u64>,
}

fn secs(what: &'static str, s: f64) -> Result<Duration, LabError> {
    if s.is_finite() && (0.0..=3600.0).contains(&s) {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(LabError::bad_input(what, format!("in [0, 3600] s, got {s}")))
    }
}

impl TargetParams {
    /// Parses a lab file (see [`MAX_FILE`]; the same strings as the flags, checked the same
    /// way, then [`validate`](Self::validate)d).
    pub fn from_json(text: &str) -> Result<TargetParams, LabError> {
        if text.len() > MAX_FILE {
            return Err(LabError::bad_input("--file", format!("larger than {MAX_FILE} bytes")));
        }
        let f: LabFile =
            serde_json::from_str(text).map_err(|e| LabError::bad_input("--file", e.to_string()))?;
        let mut p = TargetParams::new(&f.target)?;
        if let Some(s) = f.seed {
            p.seed = s;
        }
        for s in &f.proxies {
            p.add_proxy(s)?;
        }
        for s in &f.faults {
            p.add_fault(s)?;
        }
        for s in &f.configs {
            p.add_config(s)?;
        }
        p.rate = f.rate.unwrap_or(p.rate);
        p.duration = f.duration_s.map_or(Ok(p.duration), |s| secs("duration_s", s))?;
        p.at = f.at_s.map_or(Ok(p.at), |s| secs("at_s", s))?;
        p.deadline = f.deadline_ms.map_or(p.deadline, Duration::from_millis);
        p.max_in_flight = f.max_in_flight.unwrap_or(p.max_in_flight);
        p.ready_timeout =
            f.ready_timeout_s.map_or(Ok(p.ready_timeout), |s| secs("ready_timeout_s", s))?;
        p.validate()?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses_clearly() {
        let mut p = TargetParams::new("http://127.0.0.1:8080/checkout").unwrap();
        p.add_proxy("db=127.0.0.1:7000,127.0.0.1:5432,tcp").unwrap();
        p.add_proxy("api=127.0.0.1:7001,localhost:9000").unwrap();
        assert_eq!(p.proxies[0].config.mode, Mode::Tcp);
        assert_eq!(p.proxies[1].config.mode, Mode::Http);
        p.add_fault("db:fail:10").unwrap();
        p.add_fault("api:slow:3@2,latency=50").unwrap();
        let f = p.resolved_faults();
        assert_eq!(f[0].1.start, Duration::from_secs(5), "--at applies without @START");
        assert_eq!(f[1].1.start, Duration::from_secs(2));
        p.add_config("before=./run.sh --retries 3").unwrap();
        p.add_config("mine").unwrap();
        assert_eq!(p.configs[0].command.as_deref(), Some("./run.sh --retries 3"));
        assert_eq!(p.configs[1].command, None);
        p.validate().unwrap();

        let e = |r: Result<(), LabError>| r.unwrap_err().to_string();
        assert!(
            TargetParams::new("http://10.0.0.1/x").unwrap_err().to_string().contains("loopback")
        );
        assert!(e(p.add_proxy("x=127.0.0.1:7002,10.1.1.1:5432")).contains("loopback"));
        assert!(e(p.add_proxy("x=0.0.0.0:7002,127.0.0.1:5432")).contains("loopback"));
        assert!(e(p.add_proxy("db=127.0.0.1:7003,127.0.0.1:5432")).contains("twice"));
        assert!(e(p.add_proxy("x=127.0.0.1:0,127.0.0.1:5432")).contains("fixed"));
        assert!(e(p.add_proxy("x=127.0.0.1:7004")).contains("expected"));
        assert!(e(p.add_proxy("x y=127.0.0.1:7004,127.0.0.1:1")).contains("name"));
        assert!(e(p.add_fault("nope:fail:10")).contains("no --proxy named"));
        assert!(e(p.add_fault("db:melt:10")).contains("fault"));
        assert!(e(p.add_config("before=x")).contains("twice"));
        assert!(e(p.add_config("x=")).contains("command"));
        p.add_fault("db:fail:1@30").unwrap();
        assert!(e(p.validate()).contains("after the load ends"));
    }

    #[test]
    fn lab_files_are_strict() {
        let f = |s: &str| TargetParams::from_json(s).map(|_| ()).unwrap_err().to_string();
        assert!(f(r#"{"target":"http://127.0.0.1:1/","bogus":1}"#).contains("unknown field"));
        assert!(f(r#"{"target":"http://192.168.0.1/"}"#).contains("loopback"));
        assert!(f(r#"{"target":"http://127.0.0.1:1/","duration_s":-1}"#).contains("duration_s"));
        assert!(
            f(r#"{"target":"http://127.0.0.1:1/","faults":["x:fail:1"]}"#).contains("no --proxy")
        );
        assert!(f(&" ".repeat(MAX_FILE + 1)).contains("larger"));
        let p = TargetParams::from_json(r#"{"target":"http://127.0.0.1:1/","at_s":2}"#).unwrap();
        assert_eq!((p.at, p.configs.len()), (Duration::from_secs(2), 0));
    }
}
