//! `seawall lab`: real tiers on loopback, an injected fault, before and after.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use seawall_lab::target::TargetParams;
use seawall_lab::{FaultSpec, LabParams, LabProgress, Launcher, Stack};
use seawall_report::{NotJudged, Verdict};

/// Arguments of `seawall lab`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Configuration to run (repeatable): baseline (every tier retries) or seawall. With
    /// --target: NAME='COMMAND', a configuration of your stack, started with `sh -c COMMAND` in
    /// a process group of its own and stopped (SIGTERM, then SIGKILL) after its run, on error
    /// and on Ctrl-C; or NAME alone for a stack you started yourself.
    #[arg(long = "config", value_name = "baseline|seawall|NAME=COMMAND")]
    configs: Vec<String>,
    /// Run the lab on your own stack: open-loop load at this edge URL (loopback only), faults
    /// through --proxy, one run per --config; writes the same results.json and report.html.
    #[arg(long, value_name = "URL")]
    target: Option<String>,
    /// A lab file instead of --target, --proxy, --fault and --config (and --rate, --duration,
    /// --at, --deadline-ms, --max-in-flight, --ready-timeout, --seed: the file's, or their
    /// defaults): JSON {"target": URL, "proxies": [..], "faults": [..], "configs": [..],
    /// "rate", "duration_s", "at_s", "deadline_ms", "max_in_flight", "ready_timeout_s",
    /// "seed"}, the same strings as the flags.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["target", "proxies", "faults", "configs"])]
    file: Option<PathBuf>,
    /// With --target: NAME=LISTEN,UPSTREAM[,tcp|http] (repeatable): a fault-injecting proxy
    /// (`seawall proxy`) on LISTEN in front of the dependency at UPSTREAM; point your stack at
    /// LISTEN. Both loopback. HTTP unless `tcp`.
    #[arg(long = "proxy", value_name = "NAME=LISTEN,UPSTREAM[,MODE]")]
    proxies: Vec<String>,
    /// With --target: the most edge requests in flight.
    #[arg(long, default_value_t = seawall_load::DEFAULT_MAX_IN_FLIGHT)]
    max_in_flight: usize,
    /// With --target: how long a configuration's command may take before the target accepts
    /// connections, seconds (at most 120).
    #[arg(long, default_value_t = 30.0)]
    ready_timeout: f64,
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
    /// The fault: fail|hang|slow|restart:SECONDS, or `none` (default fail:10). With --target:
    /// PROXY:KIND:SECONDS[@START][,KEY=VALUE…] on the --proxy named PROXY, in `seawall proxy`'s
    /// grammar (repeatable; START from the start of the load, default --at).
    #[arg(long = "fault", value_name = "KIND:SECONDS")]
    faults: Vec<String>,
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
    /// http://HOST:PORT[/PATH]: every node exports its spans there, OTLP/HTTP JSON (path
    /// /v1/traces unless given), a server span per request and a client span per attempt with
    /// http.request.resend_count, linked by W3C traceparent headers; watch them with `seawall
    /// detect --otlp-listen HOST:PORT` or send them to your collector.
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// Keep the stack up, under load, for this many seconds after the fault ends (sets
    /// --duration to --at + the fault + HOLD; still at most 600 s), so an external tool —
    /// `seawall detect`, `seawall escape` — can act on its post-fault state. The node URLs are
    /// printed when each stack is up and written to OUT/nodes.json.
    #[arg(long, value_name = "SECONDS")]
    hold: Option<f64>,
    /// Run the stack in memory on a virtual clock instead of as processes on loopback: the same
    /// tiers, layers and dependency, linked with a one-way latency (`--latency-us`), faster
    /// than real time, not capped by this machine's cores, and byte-identical for one seed.
    #[arg(long = "virtual", conflicts_with_all = ["target", "file", "backend", "fleet", "hold", "otlp"])]
    virtual_lab: bool,
    /// With --virtual: each link's one-way latency, microseconds.
    #[arg(long, value_name = "US", default_value_t = seawall_lab::vlab::DEFAULT_LATENCY.as_micros() as u64, requires = "virtual_lab")]
    latency_us: u64,
    /// Write results.json (measured), sim.json (predicted) and report.html (both) here.
    #[arg(long, default_value = "out/lab")]
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

/// Arguments of the hidden `seawall lab-reaper`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReaperArgs {
    /// The process group to stop once stdin closes.
    #[arg(long)]
    pgid: u32,
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
        // The synthetic lab's configurations are the two stacks it knows (a NAME=COMMAND is
        // for --target): clap's ValueEnum parse, for its error message.
        args.configs
            .iter()
            .map(|c| {
                <Config as clap::ValueEnum>::from_str(c, false).map(Config::stack).map_err(|_| {
                    anyhow::anyhow!(
                        "--config {c}: expected baseline or seawall (a NAME=COMMAND needs --target)"
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    anyhow::ensure!(
        args.proxies.is_empty(),
        "--proxy needs --target (the synthetic lab breaks its own dependency)"
    );
    let fault = match args.faults.as_slice() {
        [] => Some("fail:10".parse::<FaultSpec>()?),
        [f] if f == "none" => None,
        [f] => Some(f.parse::<FaultSpec>()?),
        _ => anyhow::bail!("one --fault in the synthetic lab (several only with --target)"),
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
        otlp: args.otlp.clone(),
        nodes_file: Some(args.out.join("nodes.json")),
    };
    p.validate()?;
    Ok(p)
}

fn target_params(args: &Args, url: &str) -> anyhow::Result<TargetParams> {
    anyhow::ensure!(
        args.backend.is_none()
            && args.fleet.is_none()
            && args.hold.is_none()
            && args.otlp.is_none(),
        "--backend, --fleet, --hold and --otlp are for the synthetic lab, not --target"
    );
    let mut p = TargetParams::new(url)?;
    p.seed = args.seed;
    for s in &args.proxies {
        p.add_proxy(s)?;
    }
    for s in &args.faults {
        p.add_fault(s)?;
    }
    for s in &args.configs {
        p.add_config(s)?;
    }
    p.rate = args.rate;
    p.duration = seconds("--duration", args.duration)?;
    p.at = seconds("--at", args.at)?;
    p.deadline = Duration::from_millis(args.deadline_ms);
    p.max_in_flight = args.max_in_flight;
    p.ready_timeout = seconds("--ready-timeout", args.ready_timeout)?;
    p.validate()?;
    Ok(p)
}

fn run_target(args: &Args, url: Option<&str>) -> anyhow::Result<ExitCode> {
    let params = match (url, &args.file) {
        (Some(url), _) => target_params(args, url)?,
        (None, Some(path)) => {
            let mut text = String::new();
            std::fs::File::open(path)
                .and_then(|f| {
                    std::io::Read::read_to_string(
                        &mut std::io::Read::take(f, seawall_lab::target::MAX_FILE as u64 + 1),
                        &mut text,
                    )
                })
                .with_context(|| format!("--file {}", path.display()))?;
            TargetParams::from_json(&text)?
        }
        (None, None) => anyhow::bail!("--target URL or --file PATH"),
    };
    let url = params.url.as_str();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let exe = std::env::current_exe().context("locating the seawall binary")?;
    let reaper = [exe, "lab-reaper".into()];
    let out = seawall_lab::target::run_target_blocking(&params, &args.out, Some(&reaper), |p| {
        match p {
            LabProgress::Starting { config, index, of, duration } => eprintln!(
                "seawall lab: {config} ({}/{of}): starting; load for {duration:?} once {url} answers",
                index + 1
            ),
            LabProgress::TargetUp { config, ready_in, pgid, .. } => eprintln!(
                "seawall lab: {config}: up in {:.1} s{}; load and faults running",
                ready_in.as_secs_f64(),
                pgid.map_or(String::new(), |g| format!(" (process group {g})"))
            ),
            LabProgress::Finished { config, run } => eprintln!(
                "seawall lab: {config}: done, {}; everything it started is stopped",
                run.sentence().replace('\u{a0}', " ")
            ),
            _ => {}
        }
    })?;
    let Some(out) = out else {
        eprintln!("seawall lab: interrupted; every process it started is stopped");
        return Ok(ExitCode::from(130));
    };
    let json = out.results.to_json();
    std::fs::write(args.out.join("results.json"), &json).context("writing results.json")?;
    std::fs::write(args.out.join("target.json"), out.figures_json())
        .context("writing target.json")?;
    let html = seawall_report::render_html(&out.results);
    std::fs::write(args.out.join("report.html"), html).context("writing report.html")?;
    let tables = format!(
        "{}\n{}\n{}",
        seawall_report::render_table(&out.results),
        seawall_report::render_notes(&out.results),
        out.figures_table()
    );
    Ok(show(args, &json, &tables, &out.results))
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.target.is_some() || args.file.is_some() {
        return run_target(&args, args.target.as_deref());
    }
    let params = params(&args)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let launcher = if args.virtual_lab {
        anyhow::ensure!(
            args.latency_us <= 1_000_000,
            "--latency-us: at most 1000000 (1 s), got {}",
            args.latency_us
        );
        Launcher::Virtual(seawall_lab::vlab::VirtualParams {
            latency: Duration::from_micros(args.latency_us),
            ..Default::default()
        })
    } else {
        let exe = std::env::current_exe().context("locating the seawall binary")?;
        Launcher::Process { exe, args: vec!["lab-node".into()] }
    };
    let wall = std::time::Instant::now();
    let Some(out) = seawall_lab::run_lab_blocking(&params, &launcher, |p| match p {
        LabProgress::Starting { config, duration, .. } => {
            eprintln!("seawall lab: running {config} for {duration:?}");
        }
        // The stack is up: its nodes' metrics and admin URLs (also in OUT/nodes.json).
        LabProgress::StackUp(info) => eprint!("{}", info.describe()),
        _ => {}
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
    if args.virtual_lab {
        let simulated = params.duration.as_secs_f64() * params.stacks.len() as f64;
        eprintln!(
            "seawall lab --virtual: {simulated:.0} s of virtual time in {:.1} s of wall time",
            wall.elapsed().as_secs_f64()
        );
    }
    let html = seawall_report::render_html_compare(&out.results, &out.predicted);
    std::fs::write(args.out.join("report.html"), html).context("writing report.html")?;
    let tables = format!(
        "{}\n{}\n{}\nmeasured (lab) vs predicted (sim):\n{}",
        seawall_report::render_table(&out.results),
        seawall_report::render_notes(&out.results),
        out.figures_table(),
        out.gap_table()
    );
    Ok(show(&args, &json, &tables, &out.results))
}

/// Prints results.json (with --json; the tables to stderr) or the tables and where the report is.
/// Exits 1 when a configuration could not be judged because its stack did not serve before the
/// fault (a command that failed to start it, a stack that fell over under the load alone), 0
/// otherwise.
fn show(args: &Args, json: &str, tables: &str, results: &seawall_report::Results) -> ExitCode {
    if args.json {
        print!("{json}");
        eprint!("{tables}");
    } else {
        print!("{tables}");
        println!("wrote {}", args.out.join("report.html").display());
    }
    let failed: Vec<&str> = results
        .runs
        .iter()
        .filter(|r| {
            matches!(r.verdict, Verdict::NotJudged { because: NotJudged::UnhealthyBefore { .. } })
        })
        .map(|r| r.policy.as_str())
        .collect();
    if failed.is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "seawall lab: not judged: {} did not serve before the fault; check that the stack starts \
         (a --config command's output is in {}/NAME.log)",
        failed.join(", "),
        args.out.display()
    );
    ExitCode::from(1)
}

pub(crate) fn run_reaper(args: ReaperArgs) -> anyhow::Result<ExitCode> {
    seawall_lab::target::child::run_reaper(args.pgid)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run_node(args: NodeArgs) -> anyhow::Result<ExitCode> {
    seawall_lab::launch::run_child(&args.spec, Duration::from_secs(args.max_runtime))?;
    Ok(ExitCode::SUCCESS)
}
