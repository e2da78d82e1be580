//! `seawall detect --prometheus`: the verdicts from a Prometheus server, live or over a past
//! window, for any metric dialect; `--explain` prints the queries.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use seawall_detect::dialect::QuerySet;
use seawall_detect::prometheus::source::{Point, PromSource, SourceError};
use seawall_detect::prometheus::{PromApi, time};
use seawall_detect::{Classifier, Thresholds, VerdictKind};

use super::{Args, Entry};

pub(super) fn run(args: &Args, thresholds: Thresholds) -> anyhow::Result<ExitCode> {
    let queries = query_set(args)?;
    if args.explain {
        print!("{}", queries.explain());
        return Ok(ExitCode::SUCCESS);
    }
    let Some(url) = &args.prometheus else { bail!("--explain or --prometheus URL") };
    if !(args.interval.is_finite() && args.interval >= 0.001 && args.interval <= 86_400.0) {
        bail!("--interval must be a number of seconds in [0.001, 86400]");
    }
    let replay = args.last.is_some() || args.from.is_some();
    // A live query slower than the interval (or 10 s) is a failed interval; a replay's range
    // queries may take longer on a big window.
    let timeout = if replay {
        Duration::from_secs(30)
    } else {
        Duration::from_secs_f64(args.interval.clamp(1.0, 10.0))
    };
    let source = PromSource::new(PromApi::new(url, timeout)?, queries);
    if !args.json {
        for w in source.queries().weaknesses() {
            println!("# weaker ({}): {}", source.queries().dialect.as_str(), w.text);
        }
    }
    if replay { replay_window(args, &source, thresholds) } else { live(args, &source, thresholds) }
}

fn query_set(args: &Args) -> anyhow::Result<QuerySet> {
    let mut q = QuerySet::with_caller(
        args.metrics.dialect(),
        &args.edge,
        &args.dependency,
        &args.caller,
        &args.rate_window,
    )?;
    for spec in &args.queries {
        q.override_with(spec)?;
    }
    Ok(q)
}

fn now_unix() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn window(args: &Args) -> anyhow::Result<(f64, f64)> {
    if let Some(last) = &args.last {
        let d = time::parse_duration(last)
            .with_context(|| format!("--last {last:?}: expected e.g. 30m, 1h, 2d"))?;
        let end = now_unix();
        return Ok((end - d, end));
    }
    let parse = |flag: &str, v: &Option<String>| -> anyhow::Result<f64> {
        let v = v.as_deref().unwrap_or("");
        time::parse_rfc3339(v).with_context(|| {
            format!("--{flag} {v:?}: expected RFC 3339, e.g. 2026-03-01T09:00:00Z")
        })
    };
    let (from, to) = (parse("from", &args.from)?, parse("to", &args.to)?);
    if from >= to {
        bail!("--from must be before --to");
    }
    Ok((from, to))
}

fn unsure_why(p: &Point) -> String {
    let why: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
    format!("not judged: {}", why.join("; "))
}

fn replay_window(args: &Args, source: &PromSource, th: Thresholds) -> anyhow::Result<ExitCode> {
    let (start, end) = window(args)?;
    let points = source.range(start, end, args.interval)?;
    let mut c = Classifier::new(th);
    let mut entries = Vec::with_capacity(points.len());
    for p in &points {
        entries.push(if p.problems.is_empty() {
            Entry::Judged(c.push(p.sample))
        } else {
            Entry::Unsure { t: p.sample.t, why: unsure_why(p) }
        });
    }
    let unsure = entries.iter().filter(|e| matches!(e, Entry::Unsure { .. })).count();
    let mut out = String::new();
    if args.json {
        for (p, e) in points.iter().zip(&entries) {
            out.push_str(&json_line(p, e)?);
        }
    } else {
        let name = format!(
            "{} ({}), {:.0} s from unix {start:.0}, every {} s",
            source.api().url(),
            source.queries().dialect.as_str(),
            end - start,
            args.interval
        );
        out.push_str(&super::timeline_of(&name, &entries));
    }
    print!("{out}");
    Ok(finish(unsure))
}

/// Exit 2 when some intervals were not judged: the verdicts printed are not the whole story.
fn finish(unsure: usize) -> ExitCode {
    if unsure == 0 {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "seawall: {unsure} interval(s) not judged: their data cannot be trusted (see the `unsure` lines)"
    );
    ExitCode::from(2)
}

fn json_line(p: &Point, e: &Entry) -> anyhow::Result<String> {
    let mut v = match e {
        Entry::Judged(v) => serde_json::to_value(v)?,
        Entry::Unsure { t, why } => {
            serde_json::json!({ "t": t, "verdict": "unsure", "evidence": [why] })
        }
    };
    if let Some(obj) = v.as_object_mut() {
        obj.insert("unix".into(), serde_json::json!(p.unix));
        obj.insert("dependency_rps".into(), serde_json::json!(p.sample.dependency_rps));
        obj.insert("goodput_rps".into(), serde_json::json!(p.sample.goodput_rps));
    }
    Ok(format!("{}\n", serde_json::to_string(&v)?))
}

fn live(args: &Args, source: &PromSource, th: Thresholds) -> anyhow::Result<ExitCode> {
    let every = Duration::from_secs_f64(args.interval);
    let t0 = now_unix();
    // The first evaluation decides whether the questions make sense at all: an empty selector
    // match or an API error now is a usage error, not a gap.
    let first = source.at(t0, t0)?;
    if let Some(p) = first.problems.iter().find_map(|p| match p {
        seawall_detect::prometheus::source::Problem::NoData(s) => Some(*s),
        _ => None,
    }) {
        let query = source.queries().query(p).unwrap_or("").to_string();
        return Err(SourceError::NoMatch { signal: p, query }.into());
    }
    if !args.json {
        eprintln!(
            "watching {} ({}), every {:.1} s; Ctrl-C stops",
            source.api().url(),
            source.queries().dialect.as_str(),
            args.interval
        );
    }
    let mut c = Classifier::new(th);
    let mut out = std::io::stdout().lock();
    let (mut n, mut unsure) = (0u64, 0usize);
    let mut next = Instant::now();
    let mut point = Some(first);
    while args.max_intervals.is_none_or(|max| n < max) {
        n += 1;
        let p = match point.take() {
            Some(p) => p,
            None => {
                next += every;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                match source.at(now_unix(), t0) {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("seawall: query failed (interval {n} not judged): {e}");
                        unsure += 1;
                        continue;
                    }
                }
            }
        };
        let entry = if p.problems.is_empty() {
            Entry::Judged(c.push(p.sample))
        } else {
            unsure += 1;
            Entry::Unsure { t: p.sample.t, why: unsure_why(&p) }
        };
        let line = if args.json { json_line(&p, &entry)? } else { text_line(&p, &entry) };
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                break;
            }
            return Err(e.into());
        }
    }
    Ok(finish(unsure))
}

fn text_line(p: &Point, e: &Entry) -> String {
    let s = &p.sample;
    let v = match e {
        Entry::Unsure { t, why } => return format!("t={t:>6.0}s  {:<14} · {why}\n", "unsure"),
        Entry::Judged(v) => v,
    };
    let mut out = format!(
        "t={:>6.0}s  {:<14} edge {:>8.1} rps  dependency {:>8.1} rps  dep/edge {:>5.2}  \
         goodput {:.0} rps  refusals {:.1}/s  queue {:.2} s\n",
        s.t,
        v.verdict.as_str(),
        s.edge_rps,
        s.dependency_rps,
        s.ratio(),
        s.goodput_rps,
        s.refusals_rps,
        s.queue_age_s,
    );
    if !matches!(v.verdict, VerdictKind::Healthy | VerdictKind::Learning) {
        for e in &v.evidence {
            out.push_str(&format!("           · {e}\n"));
        }
    }
    out
}
