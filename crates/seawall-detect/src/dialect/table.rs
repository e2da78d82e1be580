//! The table itself: each dialect's expression per signal (see the [module docs](super)).

use super::{Dialect, Signal};
use crate::names;

/// A signal a dialect lacks (or a blind spot it has), and which verdicts are weaker for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weakness {
    /// The missing signal; `None` for a blind spot of the dialect's counting itself.
    pub signal: Option<Signal>,
    /// What is weaker, in a sentence.
    pub text: &'static str,
}

/// `metric{a, b}` with the empty matchers left out.
fn sel(metric: &str, matchers: &[&str]) -> String {
    let m: Vec<&str> = matchers.iter().copied().filter(|m| !m.is_empty()).collect();
    format!("{metric}{{{}}}", m.join(","))
}

fn rate(metric: &str, matchers: &[&str], w: &str) -> String {
    format!("sum(rate({}[{w}]))", sel(metric, matchers))
}

fn resets(metrics: &[(&str, &[&str])], w: &str) -> String {
    let parts: Vec<String> =
        metrics.iter().map(|(m, ms)| format!("sum(resets({}[{w}]))", sel(m, ms))).collect();
    parts.join(" + ")
}

/// `a` when empty, else itself: the other selector stands in on single-client dialects.
fn or<'a>(s: &'a str, other: &'a str) -> &'a str {
    if s.is_empty() { other } else { s }
}

type Pairs = Vec<(Signal, String)>;

/// The larger of `received` and the attempts the caller's client layers (`caller`) sent: the
/// caller's series get a `from="caller"` label so `or` keeps both, and `max` picks one. Either
/// alone stands in when the other matches nothing.
fn with_caller_attempts(received: &str, caller: &str, w: &str) -> String {
    format!(
        "max(({received}) or label_replace({}, \"from\", \"caller\", \"\", \"\"))",
        rate(names::CLIENT_ATTEMPTS, &[caller], w)
    )
}

pub(super) fn build(d: Dialect, e: &str, dep: &str, caller: &str, w: &str) -> (Pairs, Pairs) {
    use Signal::*;
    match d {
        Dialect::Seawall => {
            let arrivals = |m: &str| {
                format!(
                    "{} + ({} or vector(0))",
                    rate(names::SERVER_THROUGHPUT, &[m], w),
                    rate(names::SERVER_REJECTED, &[m], w)
                )
            };
            // With `--caller`, what the dependency received or what its caller sent, whichever
            // is larger (what `detect --scrape` reads off a path).
            let dependency = if caller.is_empty() {
                arrivals(dep)
            } else {
                with_caller_attempts(&arrivals(dep), caller, w)
            };
            let (dep_m, caller_m) = ([dep], [caller]);
            let mut dep_resets = vec![(names::SERVER_THROUGHPUT, &dep_m[..])];
            if !caller.is_empty() {
                dep_resets.push((names::CLIENT_ATTEMPTS, &caller_m[..]));
            }
            let q = vec![
                (Edge, arrivals(e)),
                (Dependency, dependency),
                (Goodput, rate(names::SERVER_GOODPUT, &[e], w)),
                (Overflow, rate(names::CLIENT_RETRY_OVERFLOW, &[e], w)),
                (QueueAge, format!("max({})", sel(names::SERVER_OLDEST_QUEUED, &[dep]))),
            ];
            let r = vec![
                (Edge, resets(&[(names::SERVER_THROUGHPUT, &[e])], w)),
                (Dependency, resets(&dep_resets, w)),
                (Goodput, resets(&[(names::SERVER_GOODPUT, &[e])], w)),
            ];
            (q, r)
        }
        Dialect::Grpc => {
            let (e, dep) = (or(e, dep), or(dep, e));
            let calls = super::GRPC_CALL_DURATION_COUNT;
            let attempts = "grpc_client_attempt_started_total";
            let q = vec![
                (Edge, rate(calls, &[e], w)),
                (Dependency, rate(attempts, &[dep], w)),
                (Goodput, rate(calls, &[e, "grpc_status=\"OK\""], w)),
            ];
            let r = vec![
                (Edge, resets(&[(calls, &[e])], w)),
                (Dependency, resets(&[(attempts, &[dep])], w)),
            ];
            (q, r)
        }
        Dialect::Envoy => {
            let (e, dep) = (or(e, dep), or(dep, e));
            let total = "envoy_cluster_upstream_rq_total";
            let retry = "envoy_cluster_upstream_rq_retry";
            let q = vec![
                (
                    Edge,
                    format!("{} - ({} or vector(0))", rate(total, &[e], w), rate(retry, &[e], w)),
                ),
                (Dependency, rate(total, &[dep], w)),
                (
                    Goodput,
                    rate(
                        "envoy_cluster_upstream_rq_xx",
                        &[e, "envoy_response_code_class=\"2\""],
                        w,
                    ),
                ),
                (Overflow, rate("envoy_cluster_upstream_rq_retry_overflow", &[dep], w)),
            ];
            let r = vec![
                (Edge, resets(&[(total, &[e]), (retry, &[e])], w)),
                (Dependency, resets(&[(total, &[dep])], w)),
            ];
            (q, r)
        }
        Dialect::Istio => {
            let m = "istio_requests_total";
            let rep = "reporter=\"destination\"";
            let q = vec![
                (Edge, rate(m, &[rep, e], w)),
                (Dependency, rate(m, &[rep, dep], w)),
                (Goodput, rate(m, &[rep, e, "response_code=~\"[1-4]..\""], w)),
            ];
            let r = vec![
                (Edge, resets(&[(m, &[rep, e])], w)),
                (Dependency, resets(&[(m, &[rep, dep])], w)),
            ];
            (q, r)
        }
        Dialect::OtelHttp => {
            // The stable names (HTTP semantic conventions, stable since v1.23), or else the
            // experimental ones instrumentations still emit by default until
            // `OTEL_SEMCONV_STABILITY_OPT_IN=http` (OpenTelemetry Python's, for one). Where both
            // are exported (`http/dup`), `or` keeps the stable series alone: no double count.
            let server = (
                "http_server_request_duration_seconds_count",
                "http_server_duration_milliseconds_count",
            );
            let client = (
                "http_client_request_duration_seconds_count",
                "http_client_duration_milliseconds_count",
            );
            let either = |(new, old): (&str, &str), m: &str, status: Option<&str>| {
                let with = |label: &str| status.map(|v| format!("{label}=~\"{v}\""));
                let (sn, so) = (with("http_response_status_code"), with("http_status_code"));
                let mn: Vec<&str> = [Some(m), sn.as_deref()].into_iter().flatten().collect();
                let mo: Vec<&str> = [Some(m), so.as_deref()].into_iter().flatten().collect();
                format!("({} or {})", rate(new, &mn, w), rate(old, &mo, w))
            };
            let resets_of = |(new, old): (&str, &str), m: &str| {
                format!("({} or {})", resets(&[(new, &[m])], w), resets(&[(old, &[m])], w))
            };
            let q = vec![
                (Edge, either(server, e, None)),
                (Dependency, either(client, dep, None)),
                (Goodput, either(server, e, Some("[1-4].."))),
            ];
            let r = vec![(Edge, resets_of(server, e)), (Dependency, resets_of(client, dep))];
            (q, r)
        }
    }
}

const NO_OVERFLOW: &str = "overflow: this dialect exports no count of retries refused by a \
    budget, so the evidence cannot say whether a budget is holding the storm back";
const NO_QUEUE: &str = "queue_age: no oldest-queued age, so the evidence cannot say whether the \
    dependency is serving requests whose callers have already given up";

/// `with_caller`: the seawall dialect reads the caller's attempts too (`--caller`), which
/// closes its blind spot.
pub(super) fn weaknesses(d: Dialect, with_caller: bool) -> Vec<Weakness> {
    use Signal::*;
    let w = |signal, text| Weakness { signal, text };
    match d {
        Dialect::Seawall if with_caller => Vec::new(),
        Dialect::Seawall => vec![w(
            None,
            "dependency: a server counts a request when it answers or rejects it, so the \
            requests its callers abandon while they wait (the bulk of a storm against a slow or \
            queueing dependency) are missing from its own count and the storm can look smaller \
            or end early; `--caller MATCHERS` picking the caller's client series fixes it (the \
            dependency is then the larger of what it received and the caller's \
            seawall_client_attempt_started_total, as `detect --scrape` reads it)",
        )],
        Dialect::Grpc => vec![
            w(Some(Overflow), NO_OVERFLOW),
            w(Some(QueueAge), NO_QUEUE),
            w(
                None,
                "edge: gRPC counts a call when it ends, so the edge lags by a call's \
                duration; a storm of long calls shows its amplification a little late",
            ),
        ],
        Dialect::Envoy => vec![
            w(Some(QueueAge), NO_QUEUE),
            w(
                None,
                "edge: requests the application itself retried reach Envoy as new \
                requests, so only Envoy's own retries count as amplification",
            ),
        ],
        Dialect::Istio => vec![
            w(Some(Overflow), NO_OVERFLOW),
            w(Some(QueueAge), NO_QUEUE),
            w(
                None,
                "dependency: Istio has no per-attempt count; attempts that never reached \
                the destination's sidecar (connect failures, overflowed circuit breakers) are \
                missing, so a storm against a dead dependency looks smaller, and retry_storm is \
                called later",
            ),
        ],
        Dialect::OtelHttp => vec![
            w(Some(Overflow), NO_OVERFLOW),
            w(Some(QueueAge), NO_QUEUE),
            w(
                None,
                "dependency: a client library that retries below the instrumentation \
                (inside one instrumented request) hides its attempts",
            ),
        ],
    }
}
