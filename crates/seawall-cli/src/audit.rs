//! `seawall audit`: read a call graph and the configs it imports, print the multipliers and findings.
//!
//! Exit status: 0 when no finding is at or above `--fail-on`, 1 when one is, 2 when the input
//! cannot be read or understood (the error names the file, the line and what was expected).

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
    #[arg(long, value_name = "SEVERITY", default_value = "error",
          value_parser = clap::builder::PossibleValuesParser::new(["error", "warning", "info", "none"]))]
    fail_on: String,
    /// Hand the graph to the simulator with this fault (not available yet).
    #[arg(long, value_name = "FAULT")]
    simulate: Option<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(fault) = &args.simulate {
        // The simulator's API is still being built; failing loudly beats a silent no-op.
        anyhow::bail!(
            "--simulate {fault}: not available yet (the simulator cannot take an audited call graph); \
             run without --simulate for the static audit"
        );
    }
    let report = seawall_audit::audit_file(&args.graph)
        .with_context(|| format!("cannot audit {}", args.graph.display()))?;
    let name = args.graph.display().to_string();
    let text = if args.json {
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
    let threshold = Severity::parse(&args.fail_on);
    let failed = matches!((threshold, report.worst_severity()), (Some(t), Some(w)) if w >= t);
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
