//! One configuration's run on the user's stack, and the report of all of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use seawall::time::SystemClock;
use seawall_report::{Fault as ReportFault, Results, Run, Series, Source};
use serde::Serialize;
use tokio::time::Instant;

use super::child::{STOP_GRACE, StackCommand};
use super::{ConfigArg, TargetParams};
use crate::LabError;
use crate::progress::LabProgress;
use crate::saturation::{Saturation, sample_each_second};
use seawall_load::LoadResults;
use seawall_proxy::Proxy;

/// What one configuration did to each proxied dependency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DependencyFigures {
    /// The proxy's name.
    pub name: String,
    /// Requests reaching it per edge request before the fault.
    pub per_edge_before: f64,
    /// … during the fault (whole seconds within the fault window).
    pub per_edge_during: f64,
    /// … after the fault.
    pub per_edge_after: f64,
    /// Requests it saw over the run (HTTP requests; PostgreSQL statements).
    pub requests: u64,
    /// Connections it accepted over the run.
    pub connections: u64,
    /// Requests or connections the proxy's faults answered itself (never reached it).
    pub faulted: u64,
}

/// One configuration's figures beyond the shared [`Run`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetFigures {
    /// The configuration.
    pub config: String,
    /// Its command, if the lab started it.
    pub command: Option<String>,
    /// Each proxied dependency, in `--proxy` order.
    pub dependencies: Vec<DependencyFigures>,
    /// The lab's own saturation: when capped, the attempts figures are lower bounds.
    pub saturation: Saturation,
    /// Whether they are.
    pub lower_bound: bool,
    /// Seconds the stack took to accept connections at the target.
    pub ready_s: f64,
}

/// What `seawall lab --target` produced.
#[derive(Debug, Clone)]
pub struct TargetOutcome {
    /// The shared results: one run per configuration.
    pub results: Results,
    /// The figures beyond them, same order.
    pub figures: Vec<TargetFigures>,
    /// Each configuration's load results (per-second counts and latency), same order.
    pub loads: Vec<LoadResults>,
}

impl TargetOutcome {
    /// Attempts per edge request at each dependency, before / during / after the fault.
    pub fn figures_table(&self) -> String {
        let mut rows = vec![
            [
                "config",
                "dependency",
                "per edge req: before",
                "during",
                "after",
                "requests",
                "lag ms",
                "dropped",
                "cpu",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for f in &self.figures {
            let mark = if f.lower_bound { "≥" } else { "" };
            for d in &f.dependencies {
                rows.push(vec![
                    f.config.clone(),
                    d.name.clone(),
                    format!("{:.2}", d.per_edge_before),
                    format!("{mark}{:.2}", d.per_edge_during),
                    format!("{:.2}", d.per_edge_after),
                    d.requests.to_string(),
                    format!("{:.1}", f.saturation.max_lag_s * 1000.0),
                    f.saturation.dropped.to_string(),
                    f.saturation.cpu_mean.map_or("—".into(), |c| format!("{:.0} %", c * 100.0)),
                ]);
            }
        }
        seawall_report::table::columns(&rows, 2)
    }

    /// The figures as JSON (`target.json`).
    pub fn figures_json(&self) -> String {
        serde_json::to_string_pretty(&self.figures).expect("figures serialize") + "\n"
    }
}

/// The fault window of the resolved faults: earliest start to latest end.
fn window(params: &TargetParams) -> Option<ReportFault> {
    let faults = params.resolved_faults();
    let start = faults.iter().map(|(_, f)| f.start).min()?;
    let end = faults.iter().map(|(_, f)| f.end()).max()?;
    let kinds: Vec<String> =
        faults.iter().map(|(i, f)| format!("{f} on {}", params.proxies[*i].name)).collect();
    Some(ReportFault {
        kind: kinds.join(", "),
        start_s: start.as_secs_f64(),
        end_s: end.as_secs_f64().min(params.duration.as_secs_f64()),
    })
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

fn accepts(addr: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok()
}

/// Waits (polled every 100 ms, at most `params.ready_timeout`) until the target accepts a
/// connection; fails early if the configuration's command exits.
async fn wait_ready(
    params: &TargetParams,
    cmd: &mut Option<StackCommand>,
    log: &Path,
) -> Result<Duration, LabError> {
    let t = Instant::now();
    let addr = params.target.addr;
    loop {
        if tokio::task::spawn_blocking(move || accepts(addr)).await.unwrap_or(false) {
            return Ok(t.elapsed());
        }
        if let Some(c) = cmd.as_mut()
            && let Some(status) = c.exited()
        {
            return Err(LabError::node(
                format!("config {}", c.name()),
                format!(
                    "its command exited ({status}) before {} accepted connections; see {}",
                    params.url,
                    log.display()
                ),
            ));
        }
        if t.elapsed() >= params.ready_timeout {
            return Err(LabError::node(
                "target",
                format!(
                    "{} did not accept connections within {} s{}",
                    params.url,
                    params.ready_timeout.as_secs_f64(),
                    if cmd.is_some() { format!("; see {}", log.display()) } else { String::new() }
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What one configuration's run measured.
struct Measured {
    load: LoadResults,
    /// `deps[k][p]`: proxy `p`'s (requests, connections, faulted) read at about `k` seconds from
    /// the load's start.
    deps: Vec<Vec<(u64, u64, u64)>>,
    /// `deps_at[k]`: when row `k` was read, seconds from the load's start (a busy runtime reads
    /// late; the per-second counts are interpolated at whole seconds).
    deps_at: Vec<f64>,
    cpu: Vec<f64>,
    ready: Duration,
}

async fn measure(
    params: &TargetParams,
    cfg: &ConfigArg,
    log_dir: &Path,
    reaper: Option<&[PathBuf]>,
    progress: &mut impl FnMut(&LabProgress<'_>),
) -> Result<Measured, LabError> {
    let spec = params.load_spec()?;
    // The proxies first: the stack connects to them as it starts.
    let mut proxies = Vec::with_capacity(params.proxies.len());
    for p in &params.proxies {
        proxies.push(
            Proxy::start(p.config.clone(), Arc::new(SystemClock))
                .await
                .map_err(|e| LabError::node(format!("proxy {}", p.name), e.to_string()))?,
        );
    }
    let log = log_dir.join(format!("{}.log", cfg.name));
    let mut cmd = match &cfg.command {
        Some(c) => {
            let addr = params.target.addr;
            if tokio::task::spawn_blocking(move || accepts(addr)).await.unwrap_or(false) {
                return Err(LabError::node(
                    format!("config {}", cfg.name),
                    format!(
                        "{} accepts connections before its command started: stop what listens \
                         there, or give --config {} without a command to test it as it is",
                        params.target.addr, cfg.name
                    ),
                ));
            }
            Some(StackCommand::start(&cfg.name, c, &log, reaper)?)
        }
        None => None,
    };
    let ready = wait_ready(params, &mut cmd, &log).await?;
    progress(&LabProgress::TargetUp {
        config: &cfg.name,
        target: &params.url,
        pgid: cmd.as_ref().map(StackCommand::pgid),
        ready_in: ready,
    });
    let start = Instant::now();
    for (i, f) in params.resolved_faults() {
        proxies[i].add_fault(f)?;
    }
    let secs = params.duration.as_secs_f64().ceil() as u64;
    let sampler = async {
        let mut rows = Vec::with_capacity(secs as usize + 1);
        let mut at = Vec::with_capacity(secs as usize + 1);
        for k in 0..=secs {
            tokio::time::sleep_until(start + Duration::from_secs(k)).await;
            at.push(start.elapsed().as_secs_f64());
            rows.push(
                proxies
                    .iter()
                    .map(|p| {
                        let s = p.stats();
                        (s.requests(), s.connections(), s.faulted_total())
                    })
                    .collect(),
            );
        }
        (rows, at)
    };
    let (load, (deps, deps_at), cpu) = tokio::join!(
        seawall_load::run(&spec, &params.url, |_| {}),
        sampler,
        sample_each_second(start, secs)
    );
    if let Some(mut c) = cmd.take() {
        // Blocking waits (bounded by the grace period) off the runtime's threads.
        let _ = tokio::task::spawn_blocking(move || c.stop(STOP_GRACE)).await;
    }
    drop(proxies);
    Ok(Measured { load, deps, deps_at, cpu, ready })
}

fn to_run(params: &TargetParams, cfg: &ConfigArg, m: &Measured) -> (Run, TargetFigures) {
    let per = &m.load.load.per_second;
    let n = per.len().min(m.deps.len().saturating_sub(1));
    let col = |f: &dyn Fn(&seawall_load::Counts) -> u64| -> Vec<f64> {
        per[..n].iter().map(|s| f(&s.counts) as f64).collect()
    };
    // Each proxy's count at whole seconds from the load's start, interpolated between the
    // readings around each: read as sampled, a reading 50 ms late on a busy machine moved the
    // first 50 ms of a fault's storm (9 attempts per edge request) into the healthy second
    // before it (1.23 attempts per edge request read against 1.00).
    let dep_rps: Vec<Vec<f64>> = (0..params.proxies.len())
        .map(|p| {
            // Times from 1 s on: `on_grid` takes a reading at 0 as "not timed".
            let readings: Vec<(f64, f64)> =
                m.deps_at.iter().zip(&m.deps).map(|(&t, row)| (t + 1.0, row[p].0 as f64)).collect();
            let grid = crate::report::on_grid(&readings);
            grid.windows(2).take(n).map(|w| (w[1] - w[0]).max(0.0)).collect()
        })
        .collect();
    let sent = col(&|c| c.sent);
    let bottom: Vec<f64> = if dep_rps.is_empty() {
        sent.clone()
    } else {
        (0..n).map(|k| dep_rps.iter().map(|d| d[k]).sum()).collect()
    };
    let mut tiers = vec![sent.clone()];
    tiers.extend(dep_rps.iter().cloned());
    let series = Series {
        t: (0..n).map(|k| k as f64).collect(),
        edge_rps: col(&|c| c.offered),
        goodput_rps: col(&|c| c.good),
        bottom_attempts_rps: bottom.clone(),
        tier_attempts_rps: tiers,
        queue_age_s: vec![0.0; n],
        budget_refusals_rps: vec![0.0; n],
        shed_rps: col(&|c| c.dropped()),
        breaker_open: vec![0.0; n],
    };
    let fault = window(params);
    let total = |v: &[f64]| v.iter().sum::<f64>();
    let (fs, fe) = fault.as_ref().map_or((n, n), |f| {
        ((f.start_s.ceil() as usize).min(n), (f.end_s.floor() as usize).min(n))
    });
    let fe = fe.max(fs);
    let edge = &series.edge_rps;
    let per_edge = |d: &[f64], a: usize, b: usize| ratio(total(&d[a..b]), total(&edge[a..b]));
    let last = m.load.load.totals;
    let good = last.good as f64;
    let dependencies: Vec<DependencyFigures> = params
        .proxies
        .iter()
        .zip(&dep_rps)
        .enumerate()
        .map(|(p, (arg, d))| DependencyFigures {
            name: arg.name.clone(),
            per_edge_before: per_edge(d, 0, fs),
            per_edge_during: per_edge(d, fs, fe),
            per_edge_after: per_edge(d, fe, n),
            requests: total(d) as u64,
            connections: m.deps[n][p].1.saturating_sub(m.deps[0][p].1),
            faulted: m.deps[n][p].2.saturating_sub(m.deps[0][p].2),
        })
        .collect();
    // Visible waste: of the requests a dependency worked on (passed by the proxy, not answered
    // by a fault), those beyond one per answered edge request — an upper bound when an edge
    // request needs more than one call to it, none when it needs none. Counted in requests: a
    // foreign dependency's service times are not seen here, so this is not the busy-time share
    // the built-in lab and the simulator report (see `report::wasted_work`).
    let wasted = if dependencies.is_empty() {
        0.0
    } else {
        dependencies
            .iter()
            .map(|d| {
                let worked = d.requests.saturating_sub(d.faulted) as f64;
                ratio((worked - good).max(0.0), worked)
            })
            .sum::<f64>()
            / dependencies.len() as f64
    };
    let saturation = Saturation::new(
        Duration::from_secs_f64(m.load.load.max_lag_ms / 1000.0),
        last.dropped(),
        last.offered,
        &m.cpu,
    );
    let mut run = Run::judged(cfg.name.clone(), series, fault.as_ref());
    run.wasted_work = wasted;
    run.events = last.sent;
    let figures = TargetFigures {
        config: cfg.name.clone(),
        command: cfg.command.clone(),
        dependencies,
        lower_bound: saturation.is_lower_bound(),
        saturation,
        ready_s: m.ready.as_secs_f64(),
    };
    (run, figures)
}

fn to_results(params: &TargetParams, runs: Vec<Run>, figures: &[TargetFigures]) -> Results {
    let proxies: Vec<String> = params
        .proxies
        .iter()
        .map(|p| format!("{} ({} → {})", p.name, p.config.listen, p.config.upstream))
        .collect();
    let mut description = format!(
        "the user's stack at {}: {} rps offered for {} s, deadline {} ms; proxied: {}",
        params.url,
        params.rate,
        params.duration.as_secs_f64(),
        params.deadline.as_millis(),
        if proxies.is_empty() { "none".into() } else { proxies.join(", ") },
    );
    for f in figures {
        if let Some(c) = &f.command {
            description.push_str(&format!("; {}: `{c}`", f.config));
        }
    }
    description.push('.');
    for (r, f) in runs.iter().zip(figures) {
        description.push_str(&f.saturation.sentence(&r.policy));
    }
    let mut tiers = vec!["edge".to_string()];
    tiers.extend(params.proxies.iter().map(|p| p.name.clone()));
    Results {
        scenario: "lab-target".into(),
        description,
        seed: params.seed,
        source: Source::Lab,
        duration_s: params.duration.as_secs_f64(),
        fault: window(params),
        tiers,
        runs,
    }
}

/// Runs every configuration of `params` in turn (validated first). Each configuration's
/// command logs to `LOG_DIR/NAME.log`; `reaper` (`[exe, args…]`, e.g. `seawall lab-reaper`)
/// guards each command's process group against the lab being killed. Everything a
/// configuration started is stopped before the next starts, on error, and if the future is
/// dropped.
pub async fn run_target(
    params: &TargetParams,
    log_dir: &Path,
    reaper: Option<&[PathBuf]>,
    mut progress: impl FnMut(&LabProgress<'_>),
) -> Result<TargetOutcome, LabError> {
    params.validate()?;
    let configs = if params.configs.is_empty() {
        vec![ConfigArg { name: "target".into(), command: None }]
    } else {
        params.configs.clone()
    };
    let (mut runs, mut figures, mut loads) = (Vec::new(), Vec::new(), Vec::new());
    for (i, cfg) in configs.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(params.settle).await;
        }
        let of = configs.len();
        progress(&LabProgress::Starting {
            config: &cfg.name,
            index: i,
            of,
            duration: params.duration,
        });
        let m = measure(params, cfg, log_dir, reaper, &mut progress).await?;
        let (run, f) = to_run(params, cfg, &m);
        progress(&LabProgress::Finished { config: &cfg.name, run: &run });
        runs.push(run);
        figures.push(f);
        loads.push(m.load);
    }
    let results = to_results(params, runs, &figures);
    Ok(TargetOutcome { results, figures, loads })
}

/// [`run_target`] on a runtime of its own: `Ok(None)` if interrupted by Ctrl-C or SIGTERM
/// (everything it started is stopped either way).
pub fn run_target_blocking(
    params: &TargetParams,
    log_dir: &Path,
    reaper: Option<&[PathBuf]>,
    progress: impl FnMut(&LabProgress<'_>),
) -> Result<Option<TargetOutcome>, LabError> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = run_target(params, log_dir, reaper, progress) => r.map(Some),
            // Dropping the run drops the command handles: their process groups are killed.
            _ = tokio::signal::ctrl_c() => Ok(None),
            _ = term.recv() => Ok(None),
        }
    })
}
