//! `seawall escape`: the storm runbook as a command — retries off, admission cut, watched ramp.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::bail;
use seawall_detect::dialect::{QuerySet, Signal};
use seawall_detect::prometheus::PromApi;
use seawall_detect::prometheus::source::PromSource;
use seawall_escape::mesh::{self, MeshStep};
use seawall_escape::{self as escape, EscapeConfig, Outcome};

use crate::detect::Metrics;

/// Arguments of `seawall escape`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Act. Without it, every step is printed with what it would change, and nothing is touched.
    #[arg(long)]
    apply: bool,
    /// Redis holding the fleet's retry switch (what `seawall_tower::client::fleet::follow`
    /// watches), e.g. redis://127.0.0.1:6379. Without it the switch is a printed manual step.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// The switch's key and pub/sub channel.
    #[arg(long, value_name = "KEY", default_value = "seawall:retries")]
    key: String,
    /// Admin URL of a shedding layer's admission knob (`POST URL?percent=N`); repeatable.
    /// Without one, the admission cut is a printed manual step.
    #[arg(long = "admission-url", value_name = "URL")]
    admission_urls: Vec<String>,
    /// Admin URL that drops queued work older than the callers' timeout (`POST
    /// URL?older_than_ms=N`, step 3), for servers without a DeadlineLayer; repeatable.
    #[arg(long = "flush-url", value_name = "URL")]
    flush_urls: Vec<String>,
    /// Bearer token for the admission and flush URLs (`Authorization: Bearer TOKEN`). Prefer
    /// --admin-token-file or $SEAWALL_ADMIN_TOKEN: a command line is visible to local users.
    #[arg(long, value_name = "TOKEN", conflicts_with = "admin_token_file")]
    admin_token: Option<String>,
    /// File holding the bearer token (e.g. the `admin-token` that `seawall lab` writes).
    #[arg(long, value_name = "PATH")]
    admin_token_file: Option<std::path::PathBuf>,
    /// Admission while escaping, percent of normal.
    #[arg(long, value_name = "PERCENT", default_value_t = 30, value_parser = clap::value_parser!(u8).range(1..=100))]
    admission: u8,
    /// Metrics endpoints to watch, edge first (as for `seawall detect --scrape`).
    #[arg(long, value_name = "URL", num_args = 1..)]
    scrape: Vec<String>,
    /// Ramp stages for retries, percent, comma-separated.
    #[arg(long, value_name = "P,P,…", value_delimiter = ',', default_values_t = [10u8, 25, 50, 100])]
    ramp: Vec<u8>,
    /// Seconds each ramp stage is held and watched.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    hold: f64,
    /// Seconds to wait for goodput to return before ramping (then stop, retries left off).
    #[arg(long, value_name = "S", default_value_t = 120.0)]
    max_wait: f64,
    /// Seconds between scrapes while watching.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    interval: f64,
    /// The callers' timeout, seconds: a queue older than this is a regression.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    caller_timeout: f64,
    /// Whose retries to turn off: seawall's layers (the fleet switch), or a mesh's proxies —
    /// `istio` (VirtualService patches through kubectl) or `envoy` (runtime `upstream.use_retry`
    /// through the admin endpoint).
    #[arg(long, value_enum, value_name = "DIALECT", default_value_t = Metrics::Seawall)]
    metrics: Metrics,
    /// Istio: the VirtualService whose routes retry.
    #[arg(long, value_name = "NAME")]
    virtual_service: Option<String>,
    /// Istio: its namespace.
    #[arg(long, value_name = "NS", default_value = "default")]
    namespace: String,
    /// Istio: index of a route in `spec.http` to patch (repeatable).
    #[arg(long = "route", value_name = "N", default_values_t = [0usize])]
    routes: Vec<usize>,
    /// Istio: the attempts to ramp back to (Istio's default is 2).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10))]
    istio_attempts: u32,
    /// Envoy: an admin listener, e.g. http://127.0.0.1:9901 (repeatable).
    #[arg(long = "envoy-admin", value_name = "URL")]
    envoy_admins: Vec<String>,
    /// Mesh: a Prometheus server (`http://host:9090`) to watch the edge's goodput through the
    /// dialect's queries (`seawall detect --explain --metrics …`) while ramping back: wait for
    /// it to return once retries are off, and set the previous stage again if it falls.
    /// Without it the ramp goes on time alone.
    #[arg(long, value_name = "URL")]
    prometheus: Option<String>,
    /// Mesh, with --prometheus: label matchers of the edge's series (as for `seawall detect`).
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    edge: String,
    /// Mesh, with --prometheus: label matchers of the dependency's series.
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    dependency: String,
    /// Mesh, with --prometheus: the window of every `rate(…[W])`.
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    rate_window: String,
}

fn seconds(flag: &str, s: f64) -> anyhow::Result<Duration> {
    if !(s.is_finite() && (0.0..=86_400.0).contains(&s)) {
        anyhow::bail!("--{flag} must be a number of seconds between 0 and 86400");
    }
    Ok(Duration::from_secs_f64(s))
}

fn admin_token(args: &Args) -> anyhow::Result<Option<String>> {
    crate::token::admin_token(args.admin_token.as_deref(), args.admin_token_file.as_deref())
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if matches!(args.metrics, Metrics::Istio | Metrics::Envoy) {
        return run_mesh(&args);
    }
    if args.apply
        && args.redis.is_none()
        && args.admission_urls.is_empty()
        && args.flush_urls.is_empty()
    {
        bail!(
            "--apply needs something to act on: --redis URL (the fleet's retry switch), \
             --admission-url URL (a shedding layer's admission knob) or --flush-url URL; \
             without --apply every step is printed as a dry run"
        );
    }
    let admin_token = admin_token(&args)?;
    let cfg = EscapeConfig {
        redis: args.redis,
        key: args.key,
        admission_urls: args.admission_urls,
        admission_percent: args.admission,
        flush_urls: args.flush_urls,
        admin_token,
        ramp: args.ramp,
        hold: seconds("hold", args.hold)?,
        max_wait: seconds("max-wait", args.max_wait)?,
        scrape: args.scrape,
        interval: seconds("interval", args.interval)?.max(Duration::from_millis(10)),
        caller_timeout_s: args.caller_timeout,
        apply: args.apply,
    };
    let outcome = escape::run(&cfg, &mut |line| println!("{line}"))?;
    // Exit 1 when the escape stopped short: the fleet is not back to normal.
    Ok(match outcome {
        Outcome::Stopped { .. } => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// Retries off in the mesh, then the ramp back, one stage per `--hold`, watched through
/// Prometheus when `--prometheus` is given.
fn run_mesh(args: &Args) -> anyhow::Result<ExitCode> {
    let hold = seconds("hold", args.hold)?;
    let (what, plan) = match args.metrics {
        Metrics::Istio => {
            let Some(vs) = &args.virtual_service else {
                bail!("--metrics istio needs --virtual-service NAME");
            };
            let stages = mesh::istio_plan(&args.namespace, vs, &args.routes, args.istio_attempts);
            (format!("retries.attempts of VirtualService {}/{vs}", args.namespace), stages)
        }
        _ => {
            if args.envoy_admins.is_empty() {
                bail!("--metrics envoy needs --envoy-admin URL");
            }
            (
                "runtime upstream.use_retry".to_string(),
                mesh::envoy_plan(&args.envoy_admins, &args.ramp),
            )
        }
    };
    // The questions are checked even in a dry run: a bad selector is a usage error either way.
    let source = match &args.prometheus {
        Some(url) => {
            let q = QuerySet::new(
                args.metrics.dialect(),
                &args.edge,
                &args.dependency,
                &args.rate_window,
            )?;
            Some(PromSource::new(PromApi::new(url, Duration::from_secs(5))?, q))
        }
        None => None,
    };
    let interval = seconds("interval", args.interval)?.max(Duration::from_millis(10));
    let mut goodput = || -> Result<f64, String> {
        let Some(src) = &source else { return Err("no --prometheus".into()) };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let p = src.at(now, now).map_err(|e| e.to_string())?;
        if !p.problems.is_empty() {
            let why: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
            return Err(why.join("; "));
        }
        // No edge traffic: nothing is failing (as the seawall watch reads it).
        let e = p.sample.edge_rps;
        Ok(if e > 0.0 { p.sample.goodput_rps / e } else { 1.0 })
    };
    let max_wait = seconds("max-wait", args.max_wait)?;
    let watch =
        source.as_ref().map(|_| mesh::RampWatch { goodput: &mut goodput, interval, max_wait });
    let mode = if args.apply { "APPLY" } else { "DRY RUN (add --apply to act)" };
    println!("seawall escape ({}) — {mode}", args.metrics.dialect().as_str());
    if let (false, Some(src)) = (args.apply, &source) {
        println!(
            "would watch the edge's goodput share through {}: ({}) / ({})",
            src.api().url(),
            src.queries().query(Signal::Goodput).unwrap_or("?"),
            src.queries().query(Signal::Edge).unwrap_or("?")
        );
    }
    let outcome = mesh::run_plan(
        &plan,
        &what,
        hold,
        args.apply,
        &mut |step: &MeshStep| mesh::apply(step),
        watch,
        &mut |d| std::thread::sleep(d),
        &mut |line| println!("{line}"),
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    // Exit 1 when the ramp stopped short: the mesh is not back to normal.
    Ok(match outcome {
        mesh::MeshOutcome::Stopped { .. } => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}
