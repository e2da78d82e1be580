//! Tell a retry storm from a traffic spike while it happens.
//!
//! In a typical retry storm the dashboards stay green for minutes: error rate zero, every request
//! eventually succeeding after a retry. The signal that catches it is the ratio of outbound to
//! inbound requests. A storm's signature is that cause and effect run in the opposite order to a
//! normal overload:
//!
//! - **traffic spike**: edge traffic rises first; attempts per call stay ≈ 1;
//! - **retry storm**: errors come first, the edge is flat, and attempts per call and the
//!   dependency-to-edge ratio jump;
//! - **metastable**: the trigger is over and goodput has not returned.
//!
//! [`Classifier`] turns a stream of per-interval [`Sample`]s into [`Verdict`]s with the evidence,
//! the same way for a recorded series ([`replay`]), for live scrapes ([`scrape`]) and for a
//! Prometheus server ([`prometheus`]: instant queries live, range queries to replay a past
//! window).
//!
//! Two sources look where metrics do not: [`traces`] (feature `traces`) reads spans — the
//! staircase of attempts under one parent, `http.request.resend_count`, server spans that
//! outlive their caller — and feeds the same classifier; [`postgres`] (feature `postgres`)
//! samples `pg_stat_activity` for many copies of one statement older than their callers'
//! timeout.
//!
//! # On the metrics a team already has
//!
//! A team in a storm has not adopted seawall yet; it has a Prometheus full of what its stack
//! exports. [`dialect`] holds, for seawall's names, gRPC's OpenTelemetry metrics (gRFC A66),
//! Envoy's cluster statistics, Istio's standard metrics and the OpenTelemetry HTTP semantic
//! conventions, the PromQL for each signal the classifier needs, and says which verdicts are
//! weaker where a dialect lacks one (`seawall detect --explain --metrics …` prints both).
//! [`alerts`] writes rules and a dashboard on the same names, with `promtool test rules` unit
//! tests; the `seawall-escape` crate turns retries off with the mesh's own switches (an Istio VirtualService's
//! `retries.attempts`, Envoy's runtime `upstream.use_retry`).
//!
//! How each dialect is tested against the real thing:
//!
//! - **seawall**: a real Prometheus (Debian's `prometheus`) scraping a server whose seawall
//!   counters follow a storm, a spike and a restart (`seawall-cli/tests/detect_prometheus.rs`);
//!   and a real Prometheus scraping a running `seawall lab` stack (the nodes found through
//!   file-based discovery from the lab's `nodes.json`), where `detect --prometheus` live and a
//!   `--last` replay give the verdicts `detect --scrape` gives on the same run: a storm after
//!   the fault for the baseline (held as long as `--scrape` holds it, once the rate window has
//!   seen the fault), never one for seawall (`seawall-cli/tests/detect_lab_prometheus.rs`).
//!   There `--caller` names the dependency's caller, so the dependency's rate is the larger of
//!   its own count and its caller's attempts, as `--scrape` reads it; without it the
//!   dependency's own count misses the requests abandoned in its queue, so `detect
//!   --prometheus --metrics seawall` refuses to judge without `--caller` (or `--query
//!   dependency=…`) and says why ([`dialect`], "The seawall dialect's dependency count and
//!   `--caller`").
//! - **gRPC**: a real Python `grpcio` client with a retry policy in its service config and
//!   `grpcio-observability`'s OpenTelemetry plugin, exporting through the OpenTelemetry
//!   Prometheus exporter to a real Prometheus (`seawall-cli/tests/detect_grpc.rs`). Version 1.85
//!   of the plugin measures `grpc.client.call.duration` but leaves it out of its default metric
//!   set; the test script puts it back (the plugin's own recorder, gRPC's own name).
//! - **Envoy, Istio**: neither runs on this machine; their dialects are tested on recorded pages
//!   in the exact format they export (`tests/recorded/*.prom`, sources cited in each file),
//!   scraped by a real Prometheus (`seawall-cli/tests/detect_mesh_recorded.rs`).
//! - **OpenTelemetry HTTP**: a Python edge service under OpenTelemetry's WSGI instrumentation
//!   calling a failing dependency with `requests` (OpenTelemetry's requests instrumentation)
//!   and retrying 5xx in the application, exported through the OpenTelemetry Prometheus
//!   exporter to a real Prometheus (`seawall-cli/tests/detect_otel_http.rs`), once with the
//!   stable HTTP conventions and once with the instrumentations' default, older names (which
//!   the dialect also reads: see [`dialect`]).
//!
//! # Detection delay
//!
//! Seconds from the start of the fault to the first `retry_storm` (or `metastable`) verdict, at
//! 1 s intervals. "Direct" classifies the simulated series in-process
//! (`tests/sim_must_show.rs`, seeds 1–3, the bound asserted); "Prometheus" backfills the same
//! series (seed 1) into a real Prometheus with `promtool tsdb create-blocks-from openmetrics`
//! and replays it with `detect --prometheus --from --to --rate-window 2s`
//! (`seawall-cli/tests/detect_sim_backfill.rs`; the verdict of an interval is stamped at its
//! end, hence about one interval more). The spike is never called a storm on either path.
//!
//! | scenario | policy | direct (bound) | Prometheus, seed 1 |
//! |---|---|---|---|
//! | bronson | naive | ≤ 2 s | 3 s |
//! | layered | naive | ≤ 1 s | 1 s |
//! | index-slowdown | fixed | ≤ 5 s | 2 s |
//! | traffic-spike | naive | never a storm | never a storm |
//!
//! Live through Prometheus (1 s scrapes, `--rate-window 3s`), one run each, printed by those
//! tests with `--nocapture`: the storm of `detect_prometheus.rs` is called 1 s after the fault
//! (its `--last` replay 0 s), the gRPC storm of `detect_grpc.rs` 1 s after the server starts
//! failing, the recorded Envoy and Istio storms of `detect_mesh_recorded.rs` 2 s after, and the
//! OpenTelemetry HTTP storm of `detect_otel_http.rs` 2 s after, on both sets of names. On a
//! running `seawall lab` baseline, `detect_lab_prometheus.rs` asserts that `--prometheus` live
//! and its `--last` replay call the storm when `--scrape` does, within the rate window.
//!
//! # Judging by default
//!
//! The defaults are meant to be right on ordinary data without tuning ([`Thresholds`]): through
//! Prometheus the rate window is 4 × the server's scrape interval (asked of the server) and the
//! first window is neither learned from nor judged; the baseline is learned from full windows
//! only, or given (`--baseline FROM..TO`), and an edge that holds a new level for a minute
//! without errors or amplification becomes the new baseline; an interval with fewer than 10
//! requests is `quiet`, not judged; the edge is "flat" only within 1/1.3 ..= 1.3 × the
//! baseline, and below it amplification must also be load (a client that stops is not a
//! storm); attempts per call are judged over one and two intervals, so a counter flushed in
//! batches is not a jump; `metastable` needs the trigger's end (`--trigger-end`, or a recorded
//! fault window), since without it a long storm cannot be told from a long trigger.
//!
//! # Bad input
//!
//! Every `detect --prometheus` answer that cannot be trusted exits 2 with a message naming the
//! problem, never a panic and never a verdict printed as if sure: an HTML page (a login page
//! in front of Prometheus), a Prometheus error body, a query error, an empty selector match, a
//! NaN, a body that is not JSON, no server at all (`seawall-cli/tests/detect_prometheus_errors.rs`),
//! a query that is not summed, and a replay of too many points
//! (`seawall-cli/tests/detect_prometheus.rs`). A counter reset inside the window makes those
//! intervals `unsure`, not judged; the run exits 0 when any interval was judged, 2 when none
//! could be.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod alerts;
pub mod classifier;
pub mod dialect;
pub mod names;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
pub mod prom;
pub mod prometheus;
pub mod sample;
pub mod scrape;
#[cfg(feature = "traces")]
#[cfg_attr(docsrs, doc(cfg(feature = "traces")))]
pub mod traces;

pub use classifier::{Baseline, Classifier, Thresholds, Verdict, VerdictKind};
pub use sample::{Sample, SampleError, replay, samples_from_csv, samples_from_run};
