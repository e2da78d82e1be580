//! `seawall detect`: a verdict per interval — healthy, traffic spike, retry storm, metastable.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use seawall_detect::{Baseline, Classifier, Thresholds, Verdict, VerdictKind};

mod live;
mod postgres;
mod prometheus;
mod traces;

/// The metric family on the command line (`--metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Metrics {
    /// seawall's own layers (`seawall_…`).
    Seawall,
    /// gRPC's OpenTelemetry metrics (gRFC A66): `grpc_client_attempt_started_total` and
    /// `grpc_client_call_duration_seconds_count`. Stock grpcio-observability 1.85 does not
    /// export the call duration: add `CLIENT_RPC_DURATION` to its `base_metrics()` (see the
    /// error's text), or give `--query edge=PROMQL`.
    Grpc,
    /// Envoy's cluster statistics: `envoy_cluster_upstream_rq_total`, ….
    Envoy,
    /// Istio's `istio_requests_total`.
    Istio,
    /// OpenTelemetry HTTP semantic conventions: `http_{client,server}_request_duration_seconds`.
    OtelHttp,
}

impl Metrics {
    pub(crate) fn dialect(self) -> seawall_detect::dialect::Dialect {
        use seawall_detect::dialect::Dialect;
        match self {
            Metrics::Seawall => Dialect::Seawall,
            Metrics::Grpc => Dialect::Grpc,
            Metrics::Envoy => Dialect::Envoy,
            Metrics::Istio => Dialect::Istio,
            Metrics::OtelHttp => Dialect::OtelHttp,
        }
    }
}

/// Arguments of `seawall detect`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Classify a recorded series: a results.json from `seawall simulate` / `seawall lab`, or a
    /// CSV with the header `t,edge_rps,goodput_rps,dependency_rps[,queue_age_s,refusals_rps]`.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["scrape", "prometheus"]
    )]
    replay: Option<PathBuf>,
    /// Watch live: the Prometheus endpoints of a call path, in call order — the edge first, the
    /// dependency under watch last (e.g. `--scrape http://edge:9000/metrics
    /// http://db-proxy:9100/metrics`). A URL without a path gets `/metrics`.
    #[arg(long, value_name = "URL", num_args = 1.., conflicts_with = "prometheus")]
    scrape: Vec<String>,
    /// Ask a Prometheus server (`http://host:9090`): instant queries every interval (live), or
    /// range queries over `--last` / `--from`..`--to` (replay of a past window).
    #[arg(long, value_name = "URL")]
    prometheus: Option<String>,
    /// Sample a PostgreSQL's `pg_stat_activity` every interval (`postgres://user@host/db`):
    /// copies of one statement running at once and the oldest one's age. Read only, with a
    /// 500 ms statement timeout; the role needs `pg_read_all_stats` to see other roles'
    /// statements.
    #[arg(long, value_name = "URL", conflicts_with_all = ["replay", "scrape", "prometheus"])]
    postgres: Option<String>,
    /// Classify spans from a file: OTLP JSON (the OpenTelemetry Collector's file exporter, one
    /// request a line), OTLP protobuf, or Jaeger's JSON export. Prints the verdict timeline and
    /// the trace-only signals: staircases, resend counts, work nobody used.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["replay", "scrape", "prometheus", "postgres"])]
    traces: Option<PathBuf>,
    /// Receive OTLP/HTTP traces (`POST /v1/traces`, protobuf or JSON) on this address and judge
    /// them live, e.g. `127.0.0.1:4318` (point OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at
    /// `http://127.0.0.1:4318/v1/traces`). Bounded: 16 MiB and 100,000 spans a body.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["replay", "scrape", "prometheus", "postgres", "traces"])]
    otlp_listen: Option<String>,
    /// `--traces` / `--otlp-listen`: the dependency is the client spans' peer containing this
    /// (`server.address[:port]`, `net.peer.name`, the URL's host); default: the most called.
    #[arg(long, value_name = "NAME")]
    peer: Option<String>,
    /// `--otlp-listen`: also write every body received to FILE as OTLP JSON, one request a
    /// line (what `--traces FILE` reads back).
    #[arg(long, value_name = "FILE", requires = "otlp_listen")]
    record: Option<PathBuf>,
    /// `--otlp-listen`: how long after an interval ends it is judged (spans arrive in the
    /// exporters' batches: the OpenTelemetry SDKs' batch processor exports every 5 s).
    #[arg(long, value_name = "DURATION", default_value = "6s")]
    lag: String,
    /// `--postgres`: the callers' timeout (e.g. `2s`): copies older than this are work for
    /// callers who have left. Without it, many copies older than 10 s read "old queue".
    #[arg(long, value_name = "DURATION", requires = "postgres")]
    caller_timeout: Option<String>,
    /// `--postgres`: copies of one statement that count as many.
    #[arg(long, value_name = "N", default_value_t = seawall_detect::postgres::PgOptions::default().min_copies, requires = "postgres")]
    min_copies: u64,
    /// Which metric names the stack exports (`--explain` prints the queries).
    #[arg(long, value_enum, value_name = "DIALECT", default_value_t = Metrics::Seawall)]
    metrics: Metrics,
    /// Label matchers picking the edge's series, e.g. `job="gateway"` (no braces).
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    edge: String,
    /// Label matchers picking the dependency's series, e.g. `envoy_cluster_name="orders"`.
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    dependency: String,
    /// `--metrics seawall`: label matchers picking the client series of the dependency's
    /// callers (and nothing else), e.g. `job="orders"`. The dependency rate is then the larger
    /// of what it received and what they sent, as `--scrape` reads it: a server does not count
    /// requests abandoned in its queue, the bulk of a storm.
    #[arg(long, value_name = "MATCHERS", default_value = "", conflicts_with_all = ["scrape", "replay"])]
    caller: String,
    /// Replace one signal's PromQL: `NAME=EXPR`, NAME one of edge, dependency, goodput,
    /// overflow, queue_age (repeatable).
    #[arg(long = "query", value_name = "NAME=PROMQL")]
    queries: Vec<String>,
    /// The window of every `rate(…[W])`. `auto`: 4 × the longest `scrape_interval` the
    /// Prometheus server is configured with (asked at `/api/v1/status/config`; Grafana's
    /// `$__rate_interval` uses the same 4 ×, so a window always holds several scrapes), or 1m
    /// when the server does not say. Intervals before the first full window are not judged.
    #[arg(long, value_name = "DURATION", default_value = "auto")]
    rate_window: String,
    /// When the trigger ended (the fault was fixed, the deploy rolled back): seconds from the
    /// start of the series, or RFC 3339 with `--prometheus`. A failure that persists past it
    /// (plus 10 s of grace) is `metastable`; without it a long storm stays `retry_storm` and
    /// says so. A results.json's recorded fault window gives it (unless `--blind`).
    #[arg(long, value_name = "WHEN")]
    trigger_end: Option<String>,
    /// Learn the baseline from this window instead of the first `--warmup` seconds:
    /// `FROM..TO`, each seconds from the start of the series or RFC 3339 with `--prometheus`
    /// (e.g. `2026-03-01T08:00:00Z..2026-03-01T08:30:00Z`, a quiet half hour before the
    /// incident).
    #[arg(long, value_name = "FROM..TO")]
    baseline: Option<String>,
    /// Replay the last DURATION (e.g. `1h`, `90m`) from Prometheus instead of watching.
    #[arg(long, value_name = "DURATION", requires = "prometheus", conflicts_with_all = ["from", "to"])]
    last: Option<String>,
    /// Replay from this instant (RFC 3339, e.g. 2026-03-01T09:00:00Z).
    #[arg(long, value_name = "RFC3339", requires_all = ["prometheus", "to"])]
    from: Option<String>,
    /// Replay up to this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339", requires = "from")]
    to: Option<String>,
    /// Print the PromQL each signal is read with (and what the dialect lacks), then exit. With
    /// --traces: also say how the spans are read and which signal decided each verdict.
    #[arg(long)]
    explain: bool,
    /// Seconds between scrapes or queries (live), or between points (Prometheus replay).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many intervals (live only; default: until Ctrl-C).
    #[arg(long, value_name = "N")]
    max_intervals: Option<u64>,
    /// Seconds of traffic used to learn the baseline before judging.
    #[arg(long, value_name = "S", default_value_t = Thresholds::default().warmup_s)]
    warmup: f64,
    /// Which run of a results.json to classify (default: every run, one after another).
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,
    /// Print one JSON verdict per interval (JSON Lines) instead of the timeline.
    #[arg(long)]
    json: bool,
    /// Ignore the fault window recorded in results.json (judge as if live, without knowing when
    /// the trigger ended).
    #[arg(long)]
    blind: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !(args.warmup.is_finite() && args.warmup >= 0.0) {
        anyhow::bail!("--warmup must be a non-negative number of seconds");
    }
    let thresholds = Thresholds { warmup_s: args.warmup, ..Thresholds::default() };
    if args.prometheus.is_none() {
        // Checked before anything runs, whatever the source: a typo is an error, not ignored.
        if let Some(w) = &args.trigger_end {
            when("--trigger-end", w, None)?;
        }
        if let Some(b) = &args.baseline {
            baseline_window(b, None)?;
        }
    }
    if let Some(url) = &args.postgres {
        return postgres::run(&args, url);
    }
    if let Some(path) = &args.traces {
        return traces::replay(&args, path, thresholds);
    }
    if let Some(addr) = &args.otlp_listen {
        return traces::listen(&args, addr, thresholds);
    }
    if args.prometheus.is_some() || args.explain {
        return prometheus::run(&args, thresholds);
    }
    if args.replay.is_none() && args.scrape.is_empty() {
        anyhow::bail!(
            "no source to classify: give one of --replay FILE (a results.json or a CSV series), \
             --scrape URL... (live /metrics pages, edge first), --prometheus URL (a Prometheus \
             server: live, or a past window with --last / --from --to), --traces FILE (OTLP or \
             Jaeger JSON spans), --otlp-listen ADDR (receive an SDK's OTLP/HTTP traces) or \
             --postgres URL (pg_stat_activity)"
        );
    }
    let Some(path) = args.replay.clone() else {
        return live::run(&args, thresholds);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut runs: Vec<(String, Vec<seawall_detect::Sample>, Option<f64>)> = Vec::new();
    // For a results.json: each run's verdict from the one judgement (`seawall_report::verdict`),
    // the same sentence `simulate` and `lab` print, under its interval timeline.
    let mut judged: Vec<Option<String>> = Vec::new();
    if text.trim_start().starts_with('{') {
        let results: seawall_report::Results = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a seawall results.json", path.display()))?;
        let trigger_end = results.fault.as_ref().map(|f| f.end_s).filter(|_| !args.blind);
        let chosen: Vec<&seawall_report::Run> = match &args.policy {
            Some(_) => vec![seawall_detect::replay(&results, args.policy.as_deref())?],
            None => results.runs.iter().collect(),
        };
        for r in chosen {
            runs.push((r.policy.clone(), seawall_detect::samples_from_run(r), trigger_end));
            judged.push(Some(r.sentence()));
        }
    } else {
        let samples = seawall_detect::samples_from_csv(&text)
            .with_context(|| format!("in {}", path.display()))?;
        runs.push((path.display().to_string(), samples, None));
        judged.push(None);
    }
    let mut stdout = String::new();
    let given_end =
        args.trigger_end.as_deref().map(|w| when("--trigger-end", w, None)).transpose()?;
    for ((name, samples, trigger_end), sentence) in runs.into_iter().zip(judged) {
        let mut c = Classifier::new(thresholds.clone());
        if let Some(t) = given_end.or(trigger_end) {
            c.set_trigger_end(t);
        }
        if let Some(spec) = &args.baseline {
            let (from, to) = baseline_window(spec, None)?;
            let inside: Vec<_> =
                samples.iter().copied().filter(|s| s.t >= from && s.t < to).collect();
            let b = Baseline::of(&inside).with_context(|| {
                format!("--baseline {spec}: no edge traffic in that window of {name}")
            })?;
            c.set_baseline(b);
        }
        let verdicts: Vec<Verdict> = samples.into_iter().map(|s| c.push(s)).collect();
        if args.json {
            for v in &verdicts {
                let mut line = serde_json::json!({ "run": name });
                let obj = line.as_object_mut().expect("object");
                if let serde_json::Value::Object(m) = serde_json::to_value(v)? {
                    obj.extend(m);
                }
                stdout.push_str(&serde_json::to_string(&line)?);
                stdout.push('\n');
            }
        } else {
            stdout.push_str(&timeline(&name, &verdicts));
            if let Some(sentence) = sentence {
                stdout.push_str(&format!("verdict: {sentence}\n"));
            }
        }
    }
    print!("{stdout}");
    Ok(ExitCode::SUCCESS)
}

/// A moment named on the command line: seconds from the start of the series (`35`, `35.5`),
/// or RFC 3339 when the series has a wall-clock start (`t0`, Unix seconds).
pub(super) fn when(flag: &str, text: &str, t0: Option<f64>) -> anyhow::Result<f64> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>()
        && secs.is_finite()
        && secs.abs() <= 1e9
    {
        return Ok(secs);
    }
    match (seawall_detect::prometheus::time::parse_rfc3339(text), t0) {
        (Some(unix), Some(t0)) => Ok(unix - t0),
        (Some(_), None) => anyhow::bail!(
            "{flag} {text:?}: this series has no wall-clock start; give seconds from its start"
        ),
        (None, _) => anyhow::bail!(
            "{flag} {text:?}: expected seconds from the start of the series (e.g. 35) or RFC \
             3339 (e.g. 2026-03-01T09:00:00Z)"
        ),
    }
}

/// `--baseline FROM..TO`, each a [`when`]; `FROM` before `TO`.
pub(super) fn baseline_window(spec: &str, t0: Option<f64>) -> anyhow::Result<(f64, f64)> {
    let (from, to) = spec.split_once("..").with_context(|| {
        format!("--baseline {spec:?}: expected FROM..TO, e.g. 0..30 or RFC 3339..RFC 3339")
    })?;
    let (from, to) = (when("--baseline", from, t0)?, when("--baseline", to, t0)?);
    if from >= to {
        anyhow::bail!("--baseline {spec:?}: FROM must be before TO");
    }
    Ok((from, to))
}

/// One interval of a timeline: judged, or not judged because its data cannot be trusted.
#[derive(Debug)]
pub(super) enum Entry {
    /// The classifier's verdict.
    Judged(Verdict),
    /// Not judged: when, and why.
    Unsure { t: f64, why: String },
}

/// The timeline: one line per change of verdict, with its evidence, then the worst verdict.
fn timeline(name: &str, verdicts: &[Verdict]) -> String {
    let entries: Vec<Entry> = verdicts.iter().cloned().map(Entry::Judged).collect();
    timeline_of(name, &entries)
}

/// [`timeline`] with unsure intervals: each run of them is one `unsure` line with its reason.
pub(super) fn timeline_of(name: &str, entries: &[Entry]) -> String {
    let mut out = format!("== {name}\n");
    let mut last: Option<String> = None;
    for entry in entries {
        let key = match entry {
            Entry::Judged(v) => v.verdict.as_str().to_string(),
            Entry::Unsure { why, .. } => format!("unsure {why}"),
        };
        if last.as_ref() == Some(&key) {
            continue;
        }
        last = Some(key);
        let v = match entry {
            Entry::Judged(v) => v,
            Entry::Unsure { t, why } => {
                out.push_str(&format!("t={t:>6.0}s  {:<14} · {why}\n", "unsure"));
                continue;
            }
        };
        out.push_str(&format!(
            "t={:>6.0}s  {:<14} edge {:>7.1} rps ({:.2}× baseline)  attempts/call {:>5.2}  goodput {:>3.0} %\n",
            v.t,
            v.verdict.as_str(),
            v.edge_rps,
            v.edge_vs_baseline,
            v.attempts_per_call,
            100.0 * v.goodput
        ));
        for e in &v.evidence {
            out.push_str(&format!("           · {e}\n"));
        }
    }
    let rank = |k: VerdictKind| match k {
        VerdictKind::Metastable => 5,
        VerdictKind::RetryStorm => 4,
        VerdictKind::TrafficSpike => 3,
        VerdictKind::Degraded => 2,
        VerdictKind::Recovering => 1,
        _ => 0,
    };
    let judged = entries.iter().filter_map(|e| match e {
        Entry::Judged(v) => Some(v),
        Entry::Unsure { .. } => None,
    });
    let worst = judged.rev().max_by_key(|v| rank(v.verdict));
    if let Some(w) = worst {
        out.push_str(&format!("worst: {} at t={:.0}s\n", w.verdict.as_str(), w.t));
    }
    out
}
