//! `seawall detect --postgres URL`: sample `pg_stat_activity` every interval and say, per
//! interval, whether the database is working for callers who have left (see
//! [`seawall_detect::postgres`]).

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use seawall_detect::postgres::{PgOptions, PgSampler, judge};

use super::Args;

/// Longest interval accepted (as `--scrape`'s).
const MAX_INTERVAL_S: f64 = 86_400.0;

pub(super) fn run(args: &Args, url: &str) -> anyhow::Result<ExitCode> {
    if !(args.interval.is_finite() && args.interval >= 0.1 && args.interval <= MAX_INTERVAL_S) {
        anyhow::bail!("--interval must be a number of seconds in [0.1, {MAX_INTERVAL_S}]");
    }
    let caller_timeout = match &args.caller_timeout {
        None => None,
        Some(s) => Some(
            seawall_detect::prometheus::time::parse_duration(s)
                .filter(|d| *d > 0.0 && *d <= MAX_INTERVAL_S)
                .map(Duration::from_secs_f64)
                .with_context(|| {
                    format!("--caller-timeout {s:?}: give a duration such as 2s, 500ms or 1m")
                })?,
        ),
    };
    if args.min_copies == 0 {
        anyhow::bail!("--min-copies must be at least 1");
    }
    let options = PgOptions { caller_timeout, min_copies: args.min_copies, ..PgOptions::default() };
    let every = Duration::from_secs_f64(args.interval);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let sampler = PgSampler::connect(url, &options).await?;
        let mut out = std::io::stdout().lock();
        if !args.json {
            eprintln!(
                "watching pg_stat_activity every {:.1} s ({}); Ctrl-C stops",
                args.interval,
                match options.caller_timeout {
                    Some(t) => format!("callers give up after {:.1} s", t.as_secs_f64()),
                    None => "no --caller-timeout: old queues, not callers who left".into(),
                }
            );
        }
        let start = Instant::now();
        let mut judged = 0u64;
        let mut n = 0u64;
        while args.max_intervals.is_none_or(|max| n < max) {
            let due = start + every.mul_f64(n as f64);
            tokio::time::sleep_until(due.into()).await;
            n += 1;
            let activity = match sampler.sample().await {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("seawall: interval {n} not judged: {e}");
                    continue;
                }
            };
            judged += 1;
            let j = judge(&activity, &options);
            let t = start.elapsed().as_secs_f64();
            let line = if args.json {
                let mut v = serde_json::json!({ "t": t, "verdict": j.as_str(), "judgement": &j });
                v["activity"] = serde_json::to_value(&activity)?;
                format!("{}\n", serde_json::to_string(&v)?)
            } else {
                format!("{t:>7.1} s  {}\n", j.sentence())
            };
            if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    break;
                }
                return Err(e.into());
            }
        }
        // As the other sources: exit 0 when anything was judged, 2 when nothing could be.
        Ok(if judged > 0 || n == 0 { ExitCode::SUCCESS } else { ExitCode::from(2) })
    })
}
