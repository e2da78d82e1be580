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
//! # On the metrics a team already has
//!
//! A team in a storm has not adopted seawall yet; it has a Prometheus full of what its stack
//! exports. [`dialect`] holds, for seawall's names, gRPC's OpenTelemetry metrics (gRFC A66),
//! Envoy's cluster statistics, Istio's standard metrics and the OpenTelemetry HTTP semantic
//! conventions, the PromQL for each signal the classifier needs, and says which verdicts are
//! weaker where a dialect lacks one (`seawall detect --explain --metrics …` prints both).
//! [`alerts`] writes rules and a dashboard on the same names, with `promtool test rules` unit
//! tests; [`escape`] turns retries off with the mesh's own switches (an Istio VirtualService's
//! `retries.attempts`, Envoy's runtime `upstream.use_retry`).
//!
//! How each dialect is tested against the real thing:
//!
//! - **seawall**: a real Prometheus (Debian's `prometheus`) scraping a server whose seawall
//!   counters follow a storm, a spike and a restart (`seawall-cli/tests/detect_prometheus.rs`).
//! - **gRPC**: a real Python `grpcio` client with a retry policy in its service config and
//!   `grpcio-observability`'s OpenTelemetry plugin, exporting through the OpenTelemetry
//!   Prometheus exporter to a real Prometheus (`seawall-cli/tests/detect_grpc.rs`). Version 1.85
//!   of the plugin measures `grpc.client.call.duration` but leaves it out of its default metric
//!   set; the test script puts it back (the plugin's own recorder, gRPC's own name).
//! - **Envoy, Istio**: neither runs on this machine; their dialects are tested on recorded pages
//!   in the exact format they export (`tests/recorded/*.prom`, sources cited in each file),
//!   scraped by a real Prometheus (`seawall-cli/tests/detect_mesh_recorded.rs`).
//! - **OpenTelemetry HTTP**: queries and alert rules only (promtool unit tests); no live test.
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
//! | bronson | naive | ≤ 2 s | 2 s |
//! | layered | naive | ≤ 1 s | 1 s |
//! | index-slowdown | fixed | ≤ 5 s | 2 s |
//! | traffic-spike | naive | never a storm | never a storm |
//!
//! Live through Prometheus (1 s scrapes, `--rate-window 3s`): the storm of
//! `detect_prometheus.rs` is called about 1 s after the fault, the gRPC storm of
//! `detect_grpc.rs` about 1 s after the server starts failing, and the recorded Envoy and Istio
//! storms 1 s after (figures printed by those tests with `--nocapture`).
#![warn(missing_docs)]

pub mod alerts;
pub mod classifier;
pub mod dialect;
pub mod escape;
pub mod names;
pub mod prom;
pub mod prometheus;
pub mod sample;
pub mod scrape;

pub use classifier::{Classifier, Thresholds, Verdict, VerdictKind};
pub use sample::{Sample, SampleError, replay, samples_from_csv, samples_from_run};
