//! `seawall alerts`: Prometheus alerting rules or a Grafana dashboard for seawall's metrics.

use std::io::Write;
use std::process::ExitCode;

use seawall_detect::alerts::{AlertConfig, dialect_dashboard, dialect_rules, promtool_tests};
use seawall_detect::dialect::{Dialect, DialectError, check_selector};

use crate::detect::Metrics;

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A Prometheus rule file (YAML).
    Prometheus,
    /// A Grafana dashboard (JSON model; import it, then pick the Prometheus datasource).
    Grafana,
    /// `promtool test rules` unit tests of the rules (a storm fires each alert, a spike none).
    PromtoolTest,
}

/// Arguments of `seawall alerts`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Rules for Prometheus, or a dashboard for Grafana.
    #[arg(long, value_enum, default_value_t = Format::Prometheus)]
    format: Format,
    /// Which metric names the stack exports (rules on gRPC's, Envoy's, Istio's or OTel HTTP's
    /// names; `seawall detect --explain --metrics …` prints the queries).
    #[arg(long, value_enum, value_name = "DIALECT", default_value_t = Metrics::Seawall)]
    metrics: Metrics,
    /// Label matchers of the edge's series, e.g. `destination_workload="gateway"`. Default for
    /// seawall: `job="EDGE_JOB"` (--edge-job), for istio: `destination_workload="edge"`, for
    /// otel-http: `job="edge"`.
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    edge: String,
    /// Label matchers of the dependency's series. Default for seawall: `job="DEPENDENCY_JOB"`
    /// (--dependency-job).
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    dependency: String,
    /// `--metrics seawall`: label matchers of the client series of the dependency's callers
    /// (and nothing else), e.g. `job="orders"`. The dependency's rate is then the larger of
    /// what it received and what they sent: a server does not count requests abandoned in its
    /// queue, the bulk of a storm.
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    caller: String,
    /// The rule file a `--format promtool-test` file loads (relative to the test file).
    #[arg(long, value_name = "FILE", default_value = "rules.yml")]
    rule_file: String,
    /// The Prometheus `job` label of the edge service (seawall, when --edge is not given).
    #[arg(long, value_name = "JOB", default_value = "edge")]
    edge_job: String,
    /// The Prometheus `job` label of the dependency under watch (seawall, when --dependency is
    /// not given).
    #[arg(long, value_name = "JOB", default_value = "dependency")]
    dependency_job: String,
    /// The label naming each client in the per-client alerts (attempts per call, retry
    /// overflow, queue age): one storming client among many pages even when the fleet's ratio
    /// stays low. `job` (the label Prometheus adds at scrape time), or e.g. `instance`,
    /// `service`.
    #[arg(long, value_name = "LABEL", default_value = "job")]
    by: String,
    /// The value of every alert's `call_path` label (default `EDGE -> DEPENDENCY`, from the
    /// selectors), so that two call paths' alerts are told apart.
    #[arg(long, value_name = "NAME")]
    call_path: Option<String>,
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
    let label_name = |l: &str| {
        l.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !label_name(&args.by) {
        anyhow::bail!("--by {:?}: a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)", args.by);
    }
    if let Some(p) = &args.call_path
        && (p.is_empty() || p.len() > 200 || p.chars().any(char::is_control))
    {
        anyhow::bail!("--call-path: 1 to 200 printable characters");
    }
    check_selector(&args.edge)?;
    check_selector(&args.dependency)?;
    check_selector(&args.caller)?;
    let dialect = args.metrics.dialect();
    if !args.caller.trim().is_empty() && dialect != Dialect::Seawall {
        return Err(DialectError::Caller(dialect.as_str()).into());
    }
    // Two services at two ends of the path need telling apart: name them when the user did not.
    let default = |given: String, label: &str, tier: &str| match dialect {
        _ if !given.is_empty() => given,
        Dialect::Istio => format!("destination_workload=\"{tier}\""),
        Dialect::OtelHttp => format!("{label}=\"{tier}\""),
        _ => given,
    };
    let cfg = AlertConfig {
        edge: default(args.edge, "job", "edge"),
        dependency: default(args.dependency, "job", "dependency"),
        caller: args.caller.trim().to_string(),
        dialect,
        edge_job: args.edge_job,
        dependency_job: args.dependency_job,
        caller_timeout_s: args.caller_timeout,
        by: args.by,
        call_path: args.call_path.unwrap_or_default(),
        ..AlertConfig::default()
    };
    let mut text = match args.format {
        Format::Prometheus => dialect_rules(&cfg),
        Format::Grafana => dialect_dashboard(&cfg),
        Format::PromtoolTest => {
            promtool_tests(&cfg, &args.rule_file).map_err(|e| anyhow::anyhow!("{e}"))?
        }
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
