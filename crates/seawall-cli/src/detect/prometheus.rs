//! `seawall detect --prometheus`: the verdicts from a Prometheus server, live or over a past
//! window, for any metric dialect; `--explain` prints the queries.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use seawall_detect::dialect::{Dialect, QuerySet};
use seawall_detect::prometheus::source::{Point, Problem, PromSource, SourceError};
use seawall_detect::prometheus::{PromApi, time};
use seawall_detect::{Classifier, Thresholds, VerdictKind};

use super::{Args, Entry};

pub(super) fn run(args: &Args, mut thresholds: Thresholds) -> anyhow::Result<ExitCode> {
    if args.explain && args.prometheus.is_none() {
        let window = if args.rate_window == "auto" { "1m" } else { &args.rate_window };
        if args.rate_window == "auto" {
            println!("# --rate-window auto: 4 × the server's scrape interval; 1m without a server");
        }
        print!("{}", query_set(args, window)?.explain());
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
    let api = PromApi::new(url, timeout)?;
    let (window, note) = rate_window(args, &api)?;
    let queries = query_set(args, &window)?;
    if args.explain {
        if let Some(note) = note {
            println!("# {note}");
        }
        print!("{}", queries.explain());
        return Ok(ExitCode::SUCCESS);
    }
    let own_dependency = args.queries.iter().any(|q| q.trim_start().starts_with("dependency"));
    if queries.dialect == Dialect::Seawall && args.caller.trim().is_empty() && !own_dependency {
        bail!(
            "cannot judge retry storms from --metrics seawall without --caller: a server counts \
             a request when it answers or rejects it, so the attempts its callers abandon while \
             they wait (the bulk of a storm against a slow dependency) are in no series it \
             exports, and any verdict would be a guess. Give --caller MATCHERS picking the \
             callers' client series (seawall_client_attempt_started_total, e.g. \
             --caller 'job=\"orders\"'), or --query dependency=PROMQL"
        );
    }
    if let Some(note) = &note {
        eprintln!("seawall: {note}");
    }
    // A rate over a window longer than the series' age extrapolates from less than a window of
    // data: until the window is full — one step after the first rate exists, less than a
    // window later — nothing is learned or judged.
    let w = time::parse_duration(&window).unwrap_or(0.0);
    thresholds.settle_s = (w - args.interval).max(0.0);
    let source = PromSource::new(api, queries);
    if !args.json {
        for w in source.queries().weaknesses() {
            println!("# weaker ({}): {}", source.queries().dialect.as_str(), w.text);
        }
    }
    if replay { replay_window(args, &source, thresholds) } else { live(args, &source, thresholds) }
}

/// `--rate-window`: as given, or for `auto` 4 × the server's longest scrape interval (clamped
/// to 1 s ..= 1 h), with a note saying which.
fn rate_window(args: &Args, api: &PromApi) -> anyhow::Result<(String, Option<String>)> {
    if args.rate_window != "auto" {
        return Ok((args.rate_window.clone(), None));
    }
    Ok(match api.scrape_interval() {
        Ok(Some(si)) => {
            let w = (4.0 * si).clamp(1.0, 3600.0);
            let text =
                if w.fract() == 0.0 { format!("{w:.0}s") } else { format!("{:.0}ms", w * 1000.0) };
            let note = format!("rate window {text}: 4 × the server's scrape interval of {si} s");
            (text, Some(note))
        }
        Ok(None) => (
            "4m".into(),
            Some("rate window 4m: the server names no scrape_interval (default 1m)".into()),
        ),
        Err(e) => (
            "1m".into(),
            Some(format!(
                "rate window 1m: could not read the server's scrape interval ({e}); give \
                 --rate-window"
            )),
        ),
    })
}

fn query_set(args: &Args, window: &str) -> anyhow::Result<QuerySet> {
    let mut q = QuerySet::with_caller(
        args.metrics.dialect(),
        &args.edge,
        &args.dependency,
        &args.caller,
        window,
    )?;
    for spec in &args.queries {
        q.override_with(spec)?;
    }
    Ok(q)
}

/// A classifier for a series starting at `t0` (Unix seconds): wall-clock times in its evidence,
/// `--trigger-end`, and `--baseline` (from `points` when they cover it, else a range query).
fn classifier(
    args: &Args,
    source: &PromSource,
    th: Thresholds,
    t0: f64,
    points: &[Point],
) -> anyhow::Result<Classifier> {
    let mut c = Classifier::new(th);
    c.set_origin_unix(t0);
    if let Some(w) = &args.trigger_end {
        c.set_trigger_end(super::when("--trigger-end", w, Some(t0))?);
    }
    if let Some(spec) = &args.baseline {
        let (from, to) = super::baseline_window(spec, Some(t0))?;
        let (from, to) = (t0 + from, t0 + to);
        if to > now_unix() {
            bail!("--baseline {spec}: the window must be in the past");
        }
        let covered = points.first().is_some_and(|p| p.unix <= from)
            && points.last().is_some_and(|p| p.unix >= to);
        let fetched;
        let pts = if covered {
            points
        } else {
            fetched = source.range(from, to, args.interval.max((to - from) / 1000.0))?;
            &fetched[..]
        };
        let good: Vec<_> = pts
            .iter()
            .filter(|p| p.problems.is_empty() && p.unix >= from && p.unix < to)
            .map(|p| p.sample)
            .collect();
        let b = seawall_detect::Baseline::of(&good)
            .with_context(|| format!("--baseline {spec}: no edge traffic in that window"))?;
        c.set_baseline(b);
    }
    Ok(c)
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
    let mut c = classifier(args, source, th, start, &points)?;
    let mut entries = Vec::with_capacity(points.len());
    for p in &points {
        entries.push(if p.problems.is_empty() {
            Entry::Judged(c.push(p.sample))
        } else {
            Entry::Unsure { t: p.sample.t, why: unsure_why(p) }
        });
    }
    let mut out = String::new();
    if args.json {
        for (p, e) in points.iter().zip(&entries) {
            out.push_str(&json_line(p, e)?);
        }
    } else {
        let name = format!(
            "{} ({}), {:.0} s from {}, every {} s",
            source.api().url(),
            source.queries().dialect.as_str(),
            end - start,
            time::format_rfc3339(start),
            args.interval
        );
        out.push_str(&super::timeline_of(&name, &entries));
    }
    print!("{out}");
    let unsure = entries.iter().filter(|e| matches!(e, Entry::Unsure { .. })).count();
    Ok(finish(entries.len() - unsure, unsure))
}

/// Exit 0 when some intervals were judged (the others are `unsure` lines, counted on stderr);
/// exit 2 when none could be: there is no verdict to act on.
fn finish(judged: usize, unsure: usize) -> ExitCode {
    if unsure == 0 {
        return ExitCode::SUCCESS;
    }
    if judged == 0 {
        eprintln!(
            "seawall: no interval could be judged ({unsure} without trustworthy data: see the \
             `unsure` lines)"
        );
        return ExitCode::from(2);
    }
    eprintln!(
        "seawall: {judged} interval(s) judged, {unsure} not (their data cannot be trusted: see \
         the `unsure` lines)"
    );
    ExitCode::SUCCESS
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
    if !args.json {
        eprintln!(
            "watching {} ({}), every {:.1} s; Ctrl-C stops",
            source.api().url(),
            source.queries().dialect.as_str(),
            args.interval
        );
    }
    let mut c = classifier(args, source, th, t0, &[])?;
    let mut out = std::io::stdout().lock();
    let (mut n, mut judged, mut unsure) = (0u64, 0usize, 0usize);
    let mut next = Instant::now();
    while args.max_intervals.is_none_or(|max| n < max) {
        if n > 0 {
            next += every;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        n += 1;
        let p = match source.at(now_unix(), t0) {
            Ok(p) => p,
            // The questions themselves are wrong (a parse error, a query answering several
            // series): no later interval will do better.
            Err(
                e @ (SourceError::NotOneSeries { .. }
                | SourceError::Api {
                    error: seawall_detect::prometheus::ApiError::Prometheus { .. },
                    ..
                }),
            ) => return Err(e.into()),
            Err(e) => {
                eprintln!("seawall: query failed (interval {n} not judged): {e}");
                unsure += 1;
                continue;
            }
        };
        let entry = if p.problems.is_empty() {
            judged += 1;
            Entry::Judged(c.push(p.sample))
        } else if judged == 0 && p.problems.iter().all(|x| matches!(x, Problem::NoData(_))) {
            Entry::Unsure { t: p.sample.t, why: waiting_why(source, &p) }
        } else {
            Entry::Unsure { t: p.sample.t, why: unsure_why(&p) }
        };
        unsure += usize::from(matches!(entry, Entry::Unsure { .. }));
        let line = if args.json { json_line(&p, &entry)? } else { text_line(&p, &entry) };
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                break;
            }
            return Err(e.into());
        }
    }
    Ok(finish(judged, unsure))
}

/// Before the first data: which signal matches nothing yet, and how to check the question.
fn waiting_why(source: &PromSource, p: &Point) -> String {
    let missing: Vec<String> = p
        .problems
        .iter()
        .filter_map(|x| match x {
            Problem::NoData(s) => Some(
                SourceError::NoMatch {
                    signal: *s,
                    query: source.queries().query(*s).unwrap_or("").to_string(),
                }
                .to_string(),
            ),
            _ => None,
        })
        .collect();
    format!("waiting for data: {}", missing.join("; "))
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
