//! `seawall escape`: the storm runbook as a command — retries off, admission cut, watched ramp.

use std::process::ExitCode;
use std::time::Duration;

use seawall_detect::escape::{self, EscapeConfig, Outcome};

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
}

fn seconds(flag: &str, s: f64) -> anyhow::Result<Duration> {
    if !(s.is_finite() && (0.0..=86_400.0).contains(&s)) {
        anyhow::bail!("--{flag} must be a number of seconds between 0 and 86400");
    }
    Ok(Duration::from_secs_f64(s))
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = EscapeConfig {
        redis: args.redis,
        key: args.key,
        admission_urls: args.admission_urls,
        admission_percent: args.admission,
        flush_urls: args.flush_urls,
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
