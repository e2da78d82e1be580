//! `seawall audit`: read a call graph and the configs it imports, print the multipliers and findings.
//!
//! Exit status: 0 when no finding is at or above `--fail-on`, 1 when one is, 2 when the input
//! cannot be read or understood (the error names the file, the line and what was expected).
//!
//! With `--simulate FAULT`, the audited paths are also run through the simulator (see
//! [`simulate`]) and its tables replace the static report; the exit status still follows the
//! findings, so a CI job reads the same 0/1/2 either way.

mod simulate;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use seawall_audit::Severity;
use seawall_audit::report::{sarif, table};

/// Arguments of `seawall audit`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The call-graph file (TOML); imported configs resolve relative to it.
    graph: PathBuf,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "sarif")]
    json: bool,
    /// Print the findings as SARIF 2.1.0, for code scanning in CI.
    #[arg(long)]
    sarif: bool,
    /// Exit 1 when a finding at or above this severity exists.
    #[arg(long, value_name = "SEVERITY", value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,
    /// Simulate the fault at each dependency under the graph's settings and seawall's:
    /// outage:S, fail:S, slow:S (latency ×6) or gc:S (capacity loss), optionally @START
    /// (default 10 s in).
    #[arg(long, value_name = "FAULT", conflicts_with = "sarif")]
    simulate: Option<String>,
    /// With --simulate: only the worst path into this service.
    #[arg(long, value_name = "SERVICE", requires = "simulate")]
    dependency: Option<String>,
    /// With --simulate: simulated seconds.
    #[arg(long, value_name = "S", default_value_t = 60.0, requires = "simulate")]
    duration: f64,
    /// With --simulate: seed of the runs (the same seed gives byte-identical results).
    #[arg(long, default_value_t = 1, requires = "simulate")]
    seed: u64,
    /// With --simulate: write DIR/DEPENDENCY/results.json and report.html.
    #[arg(long, value_name = "DIR", requires = "simulate")]
    out: Option<PathBuf>,
}

/// `--fail-on`: the least severity that fails the audit, or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FailOn {
    // (Plain comments: doc comments on the variants would switch `--help` to its long form.)
    // Fail on errors only.
    Error,
    // Fail on warnings and errors.
    Warning,
    // Fail on any finding.
    Info,
    // Never fail on findings (exit 0 unless the input is unreadable).
    None,
}

impl FailOn {
    /// The severity at or above which the audit fails.
    fn threshold(self) -> Option<Severity> {
        match self {
            FailOn::Error => Some(Severity::Error),
            FailOn::Warning => Some(Severity::Warning),
            FailOn::Info => Some(Severity::Info),
            FailOn::None => None,
        }
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let graph = seawall_audit::graph::load(&args.graph)
        .with_context(|| format!("cannot audit {}", args.graph.display()))?;
    let report = seawall_audit::analysis::analyse(&graph);
    let name = args.graph.display().to_string();
    let text = if let Some(fault) = &args.simulate {
        let req = simulate::Request {
            fault,
            dependency: args.dependency.as_deref(),
            duration_s: args.duration,
            seed: args.seed,
            out: args.out.as_deref(),
            json: args.json,
        };
        simulate::run(&graph, &req)?
    } else if args.json {
        report.to_json() + "\n"
    } else if args.sarif {
        sarif::render(&report, &name) + "\n"
    } else {
        table::render(&report, &name)
    };
    // `println!` panics when stdout is a closed pipe (`| head`); a reader that stops early is
    // not an error, and the exit status still reports the findings.
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(e).context("cannot write the report");
        }
        _ => {}
    }
    let threshold = args.fail_on.threshold();
    let failed = matches!((threshold, report.worst_severity()), (Some(t), Some(w)) if w >= t);
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
