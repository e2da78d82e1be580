//! `seawall detect --traces FILE` and `--otlp-listen ADDR`: spans (OTLP JSON or protobuf,
//! Jaeger JSON) judged by the same classifier as the metric sources, with the signals only
//! traces carry — staircases, resend counts, work nobody used (see
//! [`seawall_detect::traces`]).

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use seawall_detect::traces::receiver::{Receiver, ReceiverOptions};
use seawall_detect::traces::{Analysis, Limits, Span, TraceSignals, parse_any};
use seawall_detect::{Classifier, Thresholds, Verdict};

use super::{Args, Entry, timeline_of};

/// A file of spans may be large (a Collector's file exporter over an incident): 1 GiB, 10 M spans.
const FILE_LIMITS: Limits = Limits { max_bytes: 1 << 30, max_spans: 10_000_000 };

fn interval(args: &Args) -> anyhow::Result<f64> {
    if !(args.interval.is_finite() && (0.1..=3600.0).contains(&args.interval)) {
        anyhow::bail!("--interval must be a number of seconds in [0.1, 3600]");
    }
    Ok(args.interval)
}

/// The sentences the trace-only signals add under the timeline.
fn signals_lines(a: &Analysis) -> String {
    let s: &TraceSignals = &a.signals;
    let mut out = String::new();
    let dep = a.dependency.as_deref().unwrap_or("(no client span seen)");
    out.push_str(&format!("traces: dependency {dep}: {} attempts", s.attempts));
    if a.peers.len() > 1 {
        let others: Vec<String> =
            a.peers.iter().skip(1).take(4).map(|(p, n)| format!("{p} ({n})")).collect();
        out.push_str(&format!("; other peers: {} (choose with --peer)", others.join(", ")));
    }
    out.push('\n');
    match &s.example {
        None => {
            out.push_str("traces: no staircase (no parent call sent the dependency two attempts)\n")
        }
        Some(e) => {
            out.push_str(&format!(
                "traces: {} staircases (parent calls with 2 or more attempts at the dependency), {} of them \
                 ending at one duration; the longest: {} attempts in trace {}{}\n",
                s.staircases,
                s.at_timeout,
                e.attempts,
                e.trace,
                e.at_timeout_s.map_or(String::new(), |t| format!(", each failing at {:.0} ms (a timeout)", t * 1e3))
            ));
        }
    }
    if s.resends > 0 {
        out.push_str(&format!(
            "traces: {} attempts carry http.request.resend_count ≥ 1\n",
            s.resends
        ));
    }
    if s.server_s > 0.0 {
        out.push_str(&format!(
            "traces: work nobody used: {:.1} s of the dependency's {:.1} s of server spans ran after their caller had left ({:.0} %)\n",
            s.wasted_s,
            s.server_s,
            100.0 * s.wasted_s / s.server_s
        ));
    }
    out
}

/// `--explain` for spans: what the classifier reads from them, and for each change of verdict
/// the signal that decided it (the classifier's first sentence; the trace-only signals are
/// evidence beside it, never the judge).
fn explain_lines(a: &Analysis, verdicts: &[Verdict]) -> String {
    let dep = a.dependency.as_deref().unwrap_or("(none seen)");
    let mut out = format!(
        "explain: edge calls = root SERVER spans starting in each interval; goodput = those \
         not failed\n\
         explain: attempts = CLIENT spans to the dependency {dep} (the peer with the most \
         client spans, or --peer)\n\
         explain: the verdict is the classifier's on those two, as for every source; \
         staircases, resends and server time after the caller left are evidence beside it\n"
    );
    let mut last = None;
    for v in verdicts {
        if last == Some(v.verdict) {
            continue;
        }
        last = Some(v.verdict);
        let why = v.evidence.first().map_or("no evidence given", String::as_str);
        out.push_str(&format!("explain: t={:.0}s {} decided by: {why}\n", v.t, v.verdict.as_str()));
    }
    out
}

fn judge(a: &Analysis, thresholds: &Thresholds) -> Vec<Verdict> {
    let mut c = Classifier::new(thresholds.clone());
    a.intervals
        .iter()
        .map(|i| {
            let mut v = c.push(i.sample);
            if i.staircases > 0 {
                v.evidence.push(format!("{} staircases in this interval", i.staircases));
            }
            if i.wasted_share > 0.05 {
                v.evidence.push(format!(
                    "{:.0} % of the dependency's server time unused",
                    100.0 * i.wasted_share
                ));
            }
            v
        })
        .collect()
}

pub(super) fn replay(
    args: &Args,
    path: &std::path::Path,
    thresholds: Thresholds,
) -> anyhow::Result<ExitCode> {
    let every = interval(args)?;
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.len() > FILE_LIMITS.max_bytes as u64 {
        anyhow::bail!(
            "{} is {} bytes, more than the {} bytes --traces reads",
            path.display(),
            meta.len(),
            FILE_LIMITS.max_bytes
        );
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let parsed =
        parse_any(&bytes, FILE_LIMITS).with_context(|| format!("in {}", path.display()))?;
    if parsed.dropped > 0 {
        eprintln!("seawall: {} malformed spans dropped from {}", parsed.dropped, path.display());
    }
    if parsed.spans.is_empty() {
        anyhow::bail!("{} holds no spans", path.display());
    }
    let a = Analysis::of(&parsed.spans, every, args.peer.as_deref());
    if let (Some(want), None) = (&args.peer, &a.dependency) {
        anyhow::bail!("no client span calls a peer containing {want:?}; peers seen: {:?}", a.peers);
    }
    let verdicts = judge(&a, &thresholds);
    if args.json {
        let mut out = String::new();
        for (v, i) in verdicts.iter().zip(&a.intervals) {
            let mut line = serde_json::to_value(v)?;
            line["start_unix_s"] = serde_json::json!(i.start_unix_ns as f64 / 1e9);
            line["staircases"] = serde_json::json!(i.staircases);
            line["resends"] = serde_json::json!(i.resends);
            line["wasted_share"] = serde_json::json!(i.wasted_share);
            out.push_str(&serde_json::to_string(&line)?);
            out.push('\n');
        }
        out.push_str(&serde_json::to_string(
            &serde_json::json!({ "signals": &a.signals, "dependency": &a.dependency }),
        )?);
        out.push('\n');
        print!("{out}");
    } else {
        let explain = if args.explain { explain_lines(&a, &verdicts) } else { String::new() };
        let entries: Vec<Entry> = verdicts.into_iter().map(Entry::Judged).collect();
        let timeline = timeline_of(&path.display().to_string(), &entries);
        print!("{timeline}{}{explain}", signals_lines(&a));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn listen(args: &Args, addr: &str, thresholds: Thresholds) -> anyhow::Result<ExitCode> {
    let every = interval(args)?;
    let addr: SocketAddr = addr
        .parse()
        .with_context(|| format!("--otlp-listen {addr:?}: give HOST:PORT, e.g. 127.0.0.1:4318"))?;
    let lag = seawall_detect::prometheus::time::parse_duration(&args.lag)
        .filter(|s| (0.0..=600.0).contains(s))
        .with_context(|| format!("--lag {:?}: a duration up to 10m, e.g. 6s", args.lag))?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let mut record = match &args.record {
            Some(p) => Some(std::io::BufWriter::new(
                std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
            )),
            None => None,
        };
        let options = ReceiverOptions { record: record.is_some(), ..ReceiverOptions::default() };
        let receiver = Receiver::bind(addr, options)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let origin_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let start = Instant::now();
        eprintln!(
            "receiving OTLP/HTTP traces on http://{}/v1/traces; each {:.1} s interval judged {lag:.0} s after it ends \
             (spans arrive in the exporters' batches); Ctrl-C stops",
            receiver.local_addr(),
            every
        );
        let mut spans: Vec<Span> = Vec::new();
        let mut classifier = Classifier::new(thresholds);
        let mut dependency: Option<String> = None;
        let mut done = 0usize;
        let mut out = std::io::stdout().lock();
        let window_ns = 300_000_000_000u64;
        while args.max_intervals.is_none_or(|max| (done as u64) < max) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            spans.extend(receiver.drain());
            if let Some(w) = record.as_mut() {
                for line in receiver.drain_records() {
                    writeln!(w, "{line}").and_then(|()| w.flush()).context("writing --record")?;
                }
            }
            let now_s = start.elapsed().as_secs_f64();
            // Intervals that ended `lag` ago are final.
            let final_n = ((now_s - lag) / every).floor().max(0.0) as usize;
            if final_n <= done {
                continue;
            }
            let a = Analysis::since(&spans, Some(origin_ns), every, dependency.as_deref());
            if dependency.is_none() {
                dependency = a.dependency.clone();
            }
            for k in done..final_n {
                let mut sample = a.intervals.get(k).map(|i| i.sample).unwrap_or_default();
                sample.t = k as f64 * every;
                let v = classifier.push(sample);
                let line = if args.json {
                    let mut j = serde_json::to_value(&v)?;
                    if let Some(i) = a.intervals.get(k) {
                        j["staircases"] = serde_json::json!(i.staircases);
                        j["resends"] = serde_json::json!(i.resends);
                        j["wasted_share"] = serde_json::json!(i.wasted_share);
                    }
                    j["dependency"] = serde_json::json!(&dependency);
                    j["start_unix_s"] = serde_json::json!((origin_ns as f64 / 1e9) + k as f64 * every);
                    format!("{}\n", serde_json::to_string(&j)?)
                } else {
                    let stairs = a.intervals.get(k).map_or(0, |i| i.staircases);
                    format!(
                        "t={:>6.0}s  {:<14} edge {:>7.1} rps  attempts/call {:>5.2}  goodput {:>3.0} %  staircases {stairs}\n",
                        v.t,
                        v.verdict.as_str(),
                        v.edge_rps,
                        v.attempts_per_call,
                        100.0 * v.goodput
                    )
                };
                if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        return Ok(ExitCode::SUCCESS);
                    }
                    return Err(e.into());
                }
            }
            done = final_n;
            // Keep five minutes of spans (parents must be found for late children).
            let keep_from = origin_ns + (now_s * 1e9) as u64;
            spans.retain(|s| s.end_ns + window_ns >= keep_from);
        }
        let stats = receiver.stats();
        eprintln!("received {} bodies, refused {}, dropped {} malformed spans", stats.accepted, stats.refused, stats.dropped_spans);
        Ok(ExitCode::SUCCESS)
    })
}
