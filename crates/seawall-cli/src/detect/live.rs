//! `seawall detect --scrape`: scrape a call path every interval and print the verdict live.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use seawall_detect::scrape::{Interval, Scraper, TargetRates, Totals};
use seawall_detect::{Classifier, Thresholds, Verdict, VerdictKind};

use super::Args;

/// Longest interval accepted: a day. Longer is a typo, and would overflow nothing but patience.
const MAX_INTERVAL_S: f64 = 86_400.0;

pub(super) fn run(args: &Args, thresholds: Thresholds) -> anyhow::Result<ExitCode> {
    if !(args.interval.is_finite() && args.interval > 0.0 && args.interval <= MAX_INTERVAL_S) {
        anyhow::bail!("--interval must be a number of seconds in (0, {MAX_INTERVAL_S}]");
    }
    let every = Duration::from_secs_f64(args.interval);
    // A scrape slower than the interval (or 10 s) is a failed scrape, not a stalled watch.
    let timeout = every.min(Duration::from_secs(10)).max(Duration::from_millis(200));
    let mut scraper = Scraper::new(&args.scrape, timeout).context("first scrape")?;
    let mut classifier = Classifier::new(thresholds);
    let mut out = std::io::stdout().lock();
    if !args.json {
        // On stderr, so stdout stays one line per interval for `| grep` and friends.
        eprintln!(
            "watching {} (edge first, dependency last), every {:.1} s; Ctrl-C stops",
            scraper.urls().join(" → "),
            args.interval
        );
    }
    let mut view = None;
    // No signal handler on purpose: Ctrl-C's default action ends the process between two
    // complete lines (stdout is line-buffered), and nothing here needs undoing.
    let mut n = 0u64;
    while args.max_intervals.is_none_or(|max| n < max) {
        n += 1;
        let line = match scraper.next_interval(every) {
            Ok(interval) => {
                // A family appears on a page with its first sample, so the view can change once
                // the first request arrives; it is said whenever it does.
                if let ([only], false) = (scraper.last_totals(), args.json) {
                    let now = one_target_view(only);
                    if view != Some(now) {
                        eprintln!("one target, judged by {now}");
                        view = Some(now);
                    }
                }
                let v = classifier.push(interval.sample);
                if args.json { json_line(&v, &interval)? } else { text_lines(&v, &interval) }
            }
            Err(e) => {
                eprintln!("seawall: scrape failed (interval {n} skipped): {e}");
                continue;
            }
        };
        // A closed pipe (`| head`) is the reader's way of saying stop.
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                break;
            }
            return Err(e.into());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn json_line(v: &Verdict, i: &Interval) -> anyhow::Result<String> {
    let mut line = serde_json::to_value(v)?;
    if let Some(obj) = line.as_object_mut() {
        obj.insert("dependency_to_edge".into(), serde_json::json!(i.sample.ratio()));
        obj.insert("goodput_rps".into(), serde_json::json!(i.sample.goodput_rps));
        obj.insert("dependency_rps".into(), serde_json::json!(i.sample.dependency_rps));
        obj.insert("targets".into(), serde_json::to_value(&i.targets)?);
    }
    Ok(format!("{}\n", serde_json::to_string(&line)?))
}

fn text_lines(v: &Verdict, i: &Interval) -> String {
    let s = &i.sample;
    let throughput = i.targets.first().and_then(|t| t.throughput_rps).unwrap_or(s.edge_rps);
    let per_call: Vec<String> = i
        .targets
        .iter()
        .enumerate()
        .filter_map(|(k, t)| t.attempts_per_call.map(|a| format!("#{}:{a:.2}", k + 1)))
        .collect();
    let per_call = if per_call.is_empty() { "—".to_string() } else { per_call.join(" ") };
    let mut out = format!(
        "t={:>6.0}s  {:<14} edge {:>8.1} rps  attempts/call {per_call}  dep/edge {:>5.2}  \
         refusals {:>6.1}/s  goodput {:.0}/{:.0} rps  queue {:.2} s\n",
        s.t,
        v.verdict.as_str(),
        s.edge_rps,
        s.ratio(),
        s.refusals_rps,
        s.goodput_rps,
        throughput,
        s.queue_age_s,
    );
    if !matches!(v.verdict, VerdictKind::Healthy | VerdictKind::Learning) {
        for e in &v.evidence {
            out.push_str(&format!("           · {e}\n"));
        }
        door_lines(&mut out, &i.targets);
    }
    out
}

/// Who is sending the load, at each door that counts it: the share of retries and the heaviest
/// callers (the server-side slices a storm is traced back with).
fn door_lines(out: &mut String, targets: &[TargetRates]) {
    for (k, t) in targets.iter().enumerate() {
        if let Some(share) = t.retry_share {
            let rps = t.door_rps.unwrap_or(0.0);
            out.push_str(&format!(
                "           · #{}: {:.0} % of {rps:.0} arrivals/s are retries (attempt ≥ 2)\n",
                k + 1,
                share * 100.0
            ));
        }
        if !t.top_callers.is_empty() {
            let callers: Vec<String> = t
                .top_callers
                .iter()
                .map(|c| format!("{} {:.0} % ({:.0}/s)", c.caller, c.share * 100.0, c.rps))
                .collect();
            out.push_str(&format!("           · #{} top callers: {}\n", k + 1, callers.join(", ")));
        }
    }
}

/// What a path of one target is judged by, said once at the start: the numbers mean different
/// things for a client, a server and a proxy.
fn one_target_view(t: &Totals) -> &'static str {
    if t.attempts.is_some() {
        "its client layer: calls at the edge, attempts to its dependency"
    } else if t.first_arrivals.is_some() {
        "its door: first attempts at the edge, all attempts as the dependency (retry share)"
    } else {
        "its served and rejected requests only: no attempt numbers, so no amplification"
    }
}
