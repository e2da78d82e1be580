//! `seawall lab`: real tiers on loopback, an injected fault, before and after.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use seawall_lab::{FaultSpec, LabParams, Launcher, Stack};

/// Arguments of `seawall lab`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Configuration to run (repeatable): baseline (every tier retries) or seawall.
    #[arg(
        long = "config",
        value_name = "baseline|seawall",
        value_enum,
        hide_possible_values = true
    )]
    configs: Vec<Config>,
    /// Offered load at the edge, requests per second.
    #[arg(long, default_value_t = 160.0)]
    rate: f64,
    /// Ramp the offered load linearly to this rate by the end of the run.
    #[arg(long, value_name = "RPS")]
    ramp_to: Option<f64>,
    /// The dependency's capacity, requests per second.
    #[arg(long, default_value_t = 200.0)]
    capacity: f64,
    /// Dependency workers (capacity = workers / service time).
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// The fault: fail|hang|slow|restart:SECONDS, or `none`.
    #[arg(long, default_value = "fail:10", value_name = "KIND:SECONDS")]
    fault: String,
    /// When the fault starts, seconds from the start of the load.
    #[arg(long, default_value_t = 5.0)]
    at: f64,
    /// Length of the load per configuration, seconds.
    #[arg(long, default_value_t = 25.0)]
    duration: f64,
    /// Each edge request's deadline, milliseconds.
    #[arg(long, default_value_t = 1000)]
    deadline_ms: u64,
    /// postgres://… : the order service queries this PostgreSQL through a pool of --workers
    /// connections (statement cost workers/capacity); faults act in the database (fail: the table
    /// is renamed away; hang: it is locked; slow: the statement costs 6×), and a pg_stat_activity
    /// query (identical statements running at once, the oldest's age) runs once a second
    /// (postgres.json).
    #[arg(long, value_name = "URL")]
    backend: Option<String>,
    /// Seed for jitter.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// redis://HOST:PORT[#KEY]: every tier's retry policy follows this fleet switch (key
    /// `seawall:retries` unless #KEY is given), so `seawall escape --redis` can act on the lab.
    #[arg(long, value_name = "URL")]
    fleet: Option<String>,
    /// Keep the stack up, under load, for this many seconds after the fault ends (sets
    /// --duration to --at + the fault + HOLD; still at most 600 s), so an external tool —
    /// `seawall detect`, `seawall escape` — can act on its post-fault state. The node URLs are
    /// printed when each stack is up and written to OUT/nodes.json.
    #[arg(long, value_name = "SECONDS")]
    hold: Option<f64>,
    /// Write results.json (measured), sim.json (predicted) and report.html (both) here.
    #[arg(long, default_value = "lab-report")]
    out: PathBuf,
    /// Print results.json to stdout (the tables go to stderr).
    #[arg(long)]
    json: bool,
}

/// `--config`: the lab's configurations, as `seawall_lab::Stack` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Config {
    // (Plain comments: doc comments on the variants would switch `--help` to its long form.)
    // Every tier retries: 3 attempts, flat 100 ms, 250 ms per try, no budget.
    Baseline,
    // The edge owns retries (jitter, budget), the tiers below fail fast and shed.
    Seawall,
}

impl Config {
    fn stack(self) -> Stack {
        match self {
            Config::Baseline => Stack::Baseline,
            Config::Seawall => Stack::Seawall,
        }
    }
}

/// Arguments of the hidden `seawall lab-node`.
#[derive(Debug, clap::Args)]
pub(crate) struct NodeArgs {
    /// The node's spec, JSON.
    #[arg(long)]
    spec: String,
    /// Exit after this many seconds whatever happens.
    #[arg(long)]
    max_runtime: u64,
}

fn seconds(flag: &str, s: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        s.is_finite() && (0.0..=3600.0).contains(&s),
        "{flag}: in [0, 3600] s, got {s}"
    );
    Ok(Duration::from_secs_f64(s))
}

fn params(args: &Args) -> anyhow::Result<LabParams> {
    let stacks = if args.configs.is_empty() {
        vec![Stack::Baseline, Stack::Seawall]
    } else {
        args.configs.iter().map(|&c| c.stack()).collect()
    };
    let fault = match args.fault.as_str() {
        "none" => None,
        f => Some(f.parse::<FaultSpec>()?),
    };
    let at = seconds("--at", args.at)?;
    let duration = match args.hold {
        Some(h) => at + fault.map_or(Duration::ZERO, |f| f.duration) + seconds("--hold", h)?,
        None => seconds("--duration", args.duration)?,
    };
    let p = LabParams {
        stacks,
        rate: args.rate,
        ramp_to: args.ramp_to,
        capacity: args.capacity,
        workers: args.workers,
        fault,
        at,
        duration,
        deadline: Duration::from_millis(args.deadline_ms),
        backend: args.backend.clone(),
        seed: args.seed,
        fleet: args.fleet.clone(),
        nodes_file: Some(args.out.join("nodes.json")),
    };
    p.validate()?;
    Ok(p)
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let params = params(&args)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let exe = std::env::current_exe().context("locating the seawall binary")?;
    let launcher = Launcher::Process { exe, args: vec!["lab-node".into()] };
    let Some(out) = seawall_lab::run_lab_blocking(&params, &launcher, |c| {
        if c.parse::<Stack>().is_ok() {
            eprintln!("seawall lab: running {c} for {:?}", params.duration);
        } else {
            // The stack is up: its nodes' metrics and admin URLs (also in OUT/nodes.json).
            eprint!("{c}");
        }
    })?
    else {
        eprintln!("seawall lab: interrupted; every node stopped");
        return Ok(ExitCode::from(130));
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json = out.results.to_json();
    std::fs::write(args.out.join("results.json"), &json).context("writing results.json")?;
    // The simulator's prediction for the same parameters sits beside the measurement: sim.json
    // (same shape, `source: simulation`), and report.html shows both, column by column.
    std::fs::write(args.out.join("sim.json"), out.predicted.to_json())
        .context("writing sim.json")?;
    if params.backend.is_some() {
        let pg: Vec<_> = out
            .results
            .runs
            .iter()
            .zip(&out.postgres)
            .map(|(r, s)| serde_json::json!({ "policy": r.policy, "pg_stat_activity": s }))
            .collect();
        let pg = serde_json::to_string_pretty(&pg).context("postgres.json")?;
        std::fs::write(args.out.join("postgres.json"), pg).context("writing postgres.json")?;
    }
    let html = seawall_report::render_html_compare(&out.results, &out.predicted);
    std::fs::write(args.out.join("report.html"), html).context("writing report.html")?;
    let tables = format!(
        "{}\n{}\nmeasured (lab) vs predicted (sim):\n{}",
        seawall_report::render_table(&out.results),
        out.figures_table(),
        out.gap_table()
    );
    if args.json {
        print!("{json}");
        eprint!("{tables}");
    } else {
        print!("{tables}");
        println!("wrote {}", args.out.join("report.html").display());
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run_node(args: NodeArgs) -> anyhow::Result<ExitCode> {
    seawall_lab::launch::run_child(&args.spec, Duration::from_secs(args.max_runtime))?;
    Ok(ExitCode::SUCCESS)
}
