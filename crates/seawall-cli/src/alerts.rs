//! `seawall alerts`: Prometheus alerting rules or a Grafana dashboard for seawall's metrics.

use std::io::Write;
use std::process::ExitCode;

use seawall_detect::alerts::{AlertConfig, grafana_dashboard, prometheus_rules};

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A Prometheus rule file (YAML).
    Prometheus,
    /// A Grafana dashboard (JSON model; import it, then pick the Prometheus datasource).
    Grafana,
}

/// Arguments of `seawall alerts`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Rules for Prometheus, or a dashboard for Grafana.
    #[arg(long, value_enum, default_value_t = Format::Prometheus)]
    format: Format,
    /// The Prometheus `job` label of the edge service.
    #[arg(long, value_name = "JOB", default_value = "edge")]
    edge_job: String,
    /// The Prometheus `job` label of the dependency under watch.
    #[arg(long, value_name = "JOB", default_value = "dependency")]
    dependency_job: String,
    /// The callers' timeout in seconds: queued work older than this is already dead.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    caller_timeout: f64,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !(args.caller_timeout.is_finite() && args.caller_timeout > 0.0) {
        anyhow::bail!("--caller-timeout must be a positive number of seconds");
    }
    // A job name lands inside a PromQL string literal: keep it to what Prometheus jobs use.
    for job in [&args.edge_job, &args.dependency_job] {
        if job.is_empty() || !job.chars().all(|c| c.is_ascii_alphanumeric() || "_-.:/".contains(c))
        {
            anyhow::bail!("job name {job:?}: use letters, digits and _-.:/ only");
        }
    }
    let cfg = AlertConfig {
        edge_job: args.edge_job,
        dependency_job: args.dependency_job,
        caller_timeout_s: args.caller_timeout,
        ..AlertConfig::default()
    };
    let mut text = match args.format {
        Format::Prometheus => prometheus_rules(&cfg),
        Format::Grafana => grafana_dashboard(&cfg),
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
