//! The results of a load test: `results.json` in the shared format, plus the load's own figures.
//!
//! The file is a [`seawall_report::Results`] (`source: lab`, one run, one tier — the target),
//! so everything that reads `simulate`'s and `lab`'s results reads it too: `series.edge_rps` is
//! the offered rate, `series.goodput_rps` the requests answered 2xx within their deadline and
//! `series.bottom_attempts_rps` the requests actually sent. What the shared format has no field
//! for — drops, errors by kind, latency — sits beside it under the key `load`.

use seawall_report::{ExtraTable, Results, Run, Series, Source};
use serde::{Deserialize, Serialize};

use super::http::Connections;
use super::spec::LoadSpec;
use super::stats::{Recorder, Second};
use hdrhistogram::{Counter, Histogram};

/// Counts over an interval; see [`Second`] for the definitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Counts {
    pub offered: u64,
    pub sent: u64,
    pub dropped_late: u64,
    pub dropped_full: u64,
    pub good: u64,
    pub connect: u64,
    pub deadline: u64,
    pub status_5xx: u64,
    pub status_4xx: u64,
    pub other: u64,
}

impl Counts {
    fn of(s: &Second) -> Self {
        Self {
            offered: s.offered,
            sent: s.sent,
            dropped_late: s.dropped_late,
            dropped_full: s.dropped_full,
            good: s.good,
            connect: s.connect,
            deadline: s.deadline,
            status_5xx: s.status_5xx,
            status_4xx: s.status_4xx,
            other: s.other,
        }
    }

    fn add(&mut self, o: &Self) {
        self.offered += o.offered;
        self.sent += o.sent;
        self.dropped_late += o.dropped_late;
        self.dropped_full += o.dropped_full;
        self.good += o.good;
        self.connect += o.connect;
        self.deadline += o.deadline;
        self.status_5xx += o.status_5xx;
        self.status_4xx += o.status_4xx;
        self.other += o.other;
    }

    /// Requests not sent.
    pub fn dropped(&self) -> u64 {
        self.dropped_late + self.dropped_full
    }
}

/// Latency percentiles, milliseconds; `None` without samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Latency {
    pub count: u64,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Latency {
    fn of<C: Counter>(h: &Histogram<C>) -> Self {
        let ms = |us: u64| (!h.is_empty()).then(|| us as f64 / 1000.0);
        Self {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
        }
    }
}

/// One second of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondReport {
    /// Start of the second, from the start of the run.
    pub t: f64,
    /// Counts of the requests due in it.
    #[serde(flatten)]
    pub counts: Counts,
    /// Their latency, from the schedule.
    pub latency_ms: Latency,
    /// Their latency from the actual send: the target's own response time (absent from files
    /// written before it existed).
    #[serde(default)]
    pub latency_from_send_ms: Latency,
    /// Worst lag behind the schedule of a request due in this second (absent from files
    /// written before it existed).
    #[serde(default)]
    pub max_lag_ms: f64,
}

/// What `results.json` holds under `load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// `METHOD URL`.
    pub request: String,
    /// Rate at the start, rps.
    pub start_rate: f64,
    /// The stages: `[seconds, target rps]`.
    pub stages: Vec<(f64, f64)>,
    /// Each request's deadline.
    pub deadline_ms: u64,
    /// The in-flight (and connection) bound.
    pub max_in_flight: usize,
    /// The lateness bound.
    pub max_lateness_ms: u64,
    /// Counts over the run.
    pub totals: Counts,
    /// Latency over the run, from each request's scheduled send time.
    pub latency_ms: Latency,
    /// Latency over the run from each request's actual send: the target's own response time,
    /// without the generator's lag behind its schedule (its timer's ticks, a wait for a free
    /// connection). Absent from files written before it existed.
    #[serde(default)]
    pub latency_from_send_ms: Latency,
    /// Worst lag of a sent request behind its schedule: the generator's own saturation.
    pub max_lag_ms: f64,
    /// Most requests in flight at once.
    pub peak_in_flight: usize,
    /// Most connections open at once.
    pub peak_connections: usize,
    /// Connections opened over the run (absent from files written before it existed).
    #[serde(default)]
    pub connections_opened: usize,
    /// Per second.
    pub per_second: Vec<SecondReport>,
}

/// `results.json` of `seawall load`: the shared [`Results`] with the load's figures beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadResults {
    /// The shared format.
    #[serde(flatten)]
    pub results: Results,
    /// The load's own figures.
    pub load: LoadReport,
}

impl LoadResults {
    /// Builds the results of `spec` from what the driver counted.
    pub fn new(spec: &LoadSpec, url: &str, rec: &Recorder, connections: Connections) -> Self {
        let per_second: Vec<SecondReport> = rec
            .seconds
            .iter()
            .enumerate()
            .map(|(i, s)| SecondReport {
                t: i as f64,
                counts: Counts::of(s),
                latency_ms: Latency::of(&s.latency),
                latency_from_send_ms: Latency::of(&s.from_send),
                max_lag_ms: s.max_lag.as_micros() as f64 / 1000.0,
            })
            .collect();
        let mut totals = Counts::default();
        per_second.iter().for_each(|s| totals.add(&s.counts));
        let col = |f: fn(&Counts) -> u64| {
            per_second.iter().map(|s| f(&s.counts) as f64).collect::<Vec<_>>()
        };
        let n = per_second.len();
        let sent = col(|c| c.sent);
        let series = Series {
            t: per_second.iter().map(|s| s.t).collect(),
            edge_rps: col(|c| c.offered),
            goodput_rps: col(|c| c.good),
            bottom_attempts_rps: sent.clone(),
            tier_attempts_rps: vec![sent],
            queue_age_s: vec![0.0; n],
            budget_refusals_rps: vec![0.0; n],
            shed_rps: vec![0.0; n],
            breaker_open: vec![0.0; n],
        };
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let s = &spec.schedule;
        let stages: Vec<(f64, f64)> =
            s.stages().iter().map(|st| (st.duration.as_secs_f64(), st.target)).collect();
        let request = format!("{} {url}", spec.method);
        // No fault: the judgement says "not judged", never "degraded" for a load test.
        let mut run = Run::judged("open-loop", series, None);
        run.attempts_per_call = ratio(totals.sent, totals.offered);
        run.events = totals.sent;
        let results = Results {
            scenario: "load".into(),
            description: format!(
                "open-loop load: {request}, {} rps{}, deadline {} ms",
                s.start_rate(),
                if stages.len() == 1 && stages[0].1 == s.start_rate() {
                    format!(" for {} s", stages[0].0)
                } else {
                    stages.iter().map(|(d, r)| format!(" → {r} over {d} s")).collect()
                },
                spec.deadline.as_millis()
            ),
            seed: 0,
            source: Source::Lab,
            duration_s: s.duration().as_secs_f64(),
            fault: None,
            tiers: vec!["target".into()],
            runs: vec![run],
        };
        let load = LoadReport {
            request,
            start_rate: s.start_rate(),
            stages,
            deadline_ms: spec.deadline.as_millis() as u64,
            max_in_flight: spec.bounds.max_in_flight.get(),
            max_lateness_ms: spec.bounds.max_lateness.as_millis() as u64,
            totals,
            latency_ms: Latency::of(&rec.overall),
            latency_from_send_ms: Latency::of(&rec.from_send),
            // Whole microseconds, as the latencies: a value that survives a JSON round trip.
            max_lag_ms: rec.max_lag.as_micros() as f64 / 1000.0,
            peak_in_flight: rec.peak_in_flight,
            peak_connections: connections.peak,
            connections_opened: connections.opened,
            per_second,
        };
        Self { results, load }
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("results serialize");
        s.push('\n');
        s
    }

    /// What the page and the table say about recovery. A load run injects no fault, so there
    /// is no recovery to judge.
    /// `report.html`: a load report, not the simulator's page. Charts, second by second, of
    /// offered / sent / good / dropped requests, errors by kind, latency percentiles from the
    /// schedule and from the send, and the generator's own lag behind its schedule; then the
    /// latency over the run and the per-second table. No amplification, tier or queue charts
    /// (a black-box target has none to show) and no recovery verdict (no fault was injected).
    pub fn render_html(&self) -> String {
        use seawall_report::{Chart, ChartLine, Page};
        let l = &self.load;
        let t: Vec<f64> = l.per_second.iter().map(|s| s.t).collect();
        let line = |name: &str, f: &dyn Fn(&SecondReport) -> f64| ChartLine {
            name: name.into(),
            t: t.clone(),
            v: l.per_second.iter().map(f).collect(),
        };
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        let charts = vec![
            Chart {
                title: "Requests, by the second they were due".into(),
                unit: "requests / s".into(),
                why: "Offered is the schedule; sent, what left the generator; good, the 2xx \
                      answers within the deadline (goodput); dropped, what the generator could \
                      not send in time."
                    .into(),
                lines: vec![
                    line("offered", &|s| s.counts.offered as f64),
                    line("sent", &|s| s.counts.sent as f64),
                    line("good", &|s| s.counts.good as f64),
                    line("dropped", &|s| s.counts.dropped() as f64),
                ],
            },
            Chart {
                title: "Errors, by kind".into(),
                unit: "requests / s".into(),
                why: "connect: no connection; deadline: no answer in time; 5xx, 4xx: answered \
                      so; other: a broken connection or a malformed answer."
                    .into(),
                lines: vec![
                    line("connect", &|s| s.counts.connect as f64),
                    line("deadline", &|s| s.counts.deadline as f64),
                    line("5xx", &|s| s.counts.status_5xx as f64),
                    line("4xx", &|s| s.counts.status_4xx as f64),
                    line("other", &|s| s.counts.other as f64),
                ],
            },
            Chart {
                title: "Latency from the schedule".into(),
                unit: "ms".into(),
                why: "From each request's scheduled time to the end of its answer: what a user \
                      arriving then waits, the generator's own lag and any wait for a \
                      connection included (no coordinated omission)."
                    .into(),
                lines: vec![
                    line("p50", &|s| nan(s.latency_ms.p50)),
                    line("p90", &|s| nan(s.latency_ms.p90)),
                    line("p99", &|s| nan(s.latency_ms.p99)),
                ],
            },
            Chart {
                title: "Latency from the send".into(),
                unit: "ms".into(),
                why: "From the moment each request was written: the target's own response time."
                    .into(),
                lines: vec![
                    line("p50", &|s| nan(s.latency_from_send_ms.p50)),
                    line("p90", &|s| nan(s.latency_from_send_ms.p90)),
                    line("p99", &|s| nan(s.latency_from_send_ms.p99)),
                ],
            },
            Chart {
                title: "The generator's own lag behind its schedule".into(),
                unit: "ms".into(),
                why: format!(
                    "The worst lag of a request due in each second. Its timer fires on 1 ms \
                     ticks; above {} ms a request is dropped rather than sent late: a lag near \
                     that bound, or drops, mean the generator, not the target, was the limit.",
                    l.max_lateness_ms
                ),
                lines: vec![line("worst lag", &|s| s.max_lag_ms)],
            },
        ];
        let ms = |v: Option<f64>| v.map_or_else(|| "—".into(), |v| format!("{v:.3}"));
        let pct = |lat: &Latency| vec![ms(lat.p50), ms(lat.p90), ms(lat.p99), ms(lat.max)];
        let heads = |first: &[&str]| {
            let mut h: Vec<String> = first.iter().map(|s| s.to_string()).collect();
            h.extend(["p50 ms", "p90 ms", "p99 ms", "max ms"].map(String::from));
            h
        };
        let row = |name: &str, lat: &Latency| {
            let mut r = vec![name.to_string(), lat.count.to_string()];
            r.extend(pct(lat));
            r
        };
        let overall = ExtraTable {
            title: "Latency over the run".into(),
            note: format!(
                "From the schedule: from each request's scheduled send time to the end of its \
                 answer, so the generator's own lag (worst {:.1} ms) and any wait for a free \
                 connection count, and a request at its deadline counts at the deadline. From \
                 the send: the target's own response time.",
                l.max_lag_ms
            ),
            header: heads(&["measured", "requests"]),
            rows: vec![
                row("from the schedule", &l.latency_ms),
                row("from the send", &l.latency_from_send_ms),
            ],
        };
        let c = &l.totals;
        let per_second = ExtraTable {
            title: "Each second".into(),
            note: format!(
                "Requests by the second they were due. Dropped: not sent within {} ms of their \
                 time, or waiting for one of {} connections ({} open at most, {} opened in all). \
                 Latency from the schedule.",
                l.max_lateness_ms, l.max_in_flight, l.peak_connections, l.connections_opened
            ),
            header: heads(&[
                "t (s)", "offered", "sent", "dropped", "good", "connect", "deadline", "5xx", "4xx",
                "other",
            ]),
            rows: l
                .per_second
                .iter()
                .map(|s| (s.t.to_string(), &s.counts, &s.latency_ms))
                .chain([("all".to_string(), c, &l.latency_ms)])
                .map(|(t, c, lat)| {
                    let mut r = vec![t];
                    r.extend(
                        [
                            c.offered,
                            c.sent,
                            c.dropped(),
                            c.good,
                            c.connect,
                            c.deadline,
                            c.status_5xx,
                            c.status_4xx,
                            c.other,
                        ]
                        .map(|v| v.to_string()),
                    );
                    r.extend(pct(lat));
                    r
                })
                .collect(),
        };
        let share = |a: u64| {
            if c.offered == 0 {
                "—".into()
            } else {
                format!("{:.1} %", 100.0 * a as f64 / c.offered as f64)
            }
        };
        let page = Page {
            title: "seawall load".into(),
            description: self.results.description.clone(),
            facts: vec![
                ("offered".into(), c.offered.to_string()),
                ("good".into(), format!("{} ({})", c.good, share(c.good))),
                (
                    "errors".into(),
                    share(c.connect + c.deadline + c.status_5xx + c.status_4xx + c.other),
                ),
                ("dropped".into(), format!("{} ({})", c.dropped(), share(c.dropped()))),
                ("peak in flight".into(), format!("{} of {}", l.peak_in_flight, l.max_in_flight)),
                ("generator lag".into(), format!("worst {:.1} ms", l.max_lag_ms)),
            ],
            verdict: self.verdict(),
            charts,
            duration_s: self.results.duration_s,
            tables: vec![overall, per_second],
            from: "results.json".into(),
        };
        seawall_report::render_page(&page)
    }

    /// The per-second table and the totals, for a terminal.
    pub fn render_table(&self) -> String {
        use std::fmt::Write;
        let l = &self.load;
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
        let ms3 = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
        let mut out = format!("seawall load: {}\n", self.results.description);
        out += "    t  offered     sent  dropped     good  connect deadline      5xx      4xx    other    p50ms    p90ms    p99ms    maxms\n";
        let mut row = |t: &str, c: &Counts, lat: &Latency| {
            let _ = writeln!(
                out,
                "{t:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
                c.offered,
                c.sent,
                c.dropped(),
                c.good,
                c.connect,
                c.deadline,
                c.status_5xx,
                c.status_4xx,
                c.other,
                ms(lat.p50),
                ms(lat.p90),
                ms(lat.p99),
                ms(lat.max)
            );
        };
        for s in &l.per_second {
            row(&format!("{}", s.t), &s.counts, &s.latency_ms);
        }
        row("all", &l.totals, &l.latency_ms);
        let _ = writeln!(
            out,
            "dropped: {} late (> {} ms behind schedule), {} at max in flight ({}); generator lag max {:.1} ms; peak in flight {}, connections {} at once, {} opened",
            l.totals.dropped_late,
            l.max_lateness_ms,
            l.totals.dropped_full,
            l.max_in_flight,
            l.max_lag_ms,
            l.peak_in_flight,
            l.peak_connections,
            l.connections_opened
        );
        let f = &l.latency_from_send_ms;
        let _ = writeln!(
            out,
            "latency from the send (the target's own): p50 {} p90 {} p99 {} max {} ms; the table's runs from the schedule and adds the generator's lag (its timer fires on 1 ms ticks) and any wait for a free connection",
            ms3(f.p50),
            ms3(f.p90),
            ms3(f.p99),
            ms3(f.max)
        );
        out += "columns: offered = due by the schedule; sent = left the generator; dropped = not sent in \
                time; good = 2xx within the deadline; connect, deadline, 5xx, 4xx, other = errors by \
                kind; p50ms..maxms = latency from the schedule\n";
        let _ = writeln!(out, "recovery: {}", self.verdict());
        out
    }

    /// The one judgement's sentence for the run (a load test injects no fault: "not judged").
    fn verdict(&self) -> String {
        self.results.runs.first().map_or_else(String::new, |r| r.sentence().replace('\u{a0}', " "))
    }
}
