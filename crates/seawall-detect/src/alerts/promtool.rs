//! `promtool test rules` unit tests for the generated rules: a storm series fires every alert,
//! a traffic-spike series fires none.
//!
//! The series are the raw counters each dialect exports, sampled every 15 s: 30 minutes at 100
//! requests per second, then either a **storm** (edge flat at 100/s, every call failing and
//! tried four times: 400 attempts/s at the dependency, goodput 0, 50 retries/s refused, the
//! oldest queued request at twice the callers' timeout) or a **spike** (edge and dependency
//! both up to 300/s, one attempt per call, all good). Both are evaluated 4 minutes in (the
//! rules hold 2 minutes) and the spike again at 15 minutes. At the dependency's door (its
//! server's and its proxy's attempt counts) the storm's 400/s are 100 first attempts and 300
//! retries; six callers share them unevenly, and the storm test checks the top-callers records
//! hold the five heaviest with their rates. With a seawall `caller` selector,
//! the storm's dependency server counts only the 100/s it answered (the rest were abandoned in
//! its queue) and the caller's client layer the 400 attempts/s it sent, so the
//! dependency-to-edge alert fires only if the rule reads the caller's attempts.

use std::fmt::Write;

use super::AlertConfig;
use super::rules::Rule;
use crate::dialect::{Dialect, parse_matchers};

/// Rates of one scenario after the 30-minute baseline (the baseline is 100/s, all good).
struct Rates {
    edge: f64,
    good: f64,
    dep: f64,
    overflow: f64,
    queue_s: f64,
}

const STEP_S: f64 = 15.0;

/// The dependency's callers and their shares of its arrivals, heaviest first (the sixth is
/// left out of a top five).
const CALLERS: [(&str, f64); 6] = [
    ("checkout", 0.375),
    ("search", 0.25),
    ("cart", 0.15),
    ("ads", 0.125),
    ("mail", 0.075),
    ("audit", 0.025),
];

/// A counter at 100/s (or `base`) for 30 minutes, then at `after`/s for 20 minutes.
fn counter(base: f64, after: f64) -> String {
    let b = base * STEP_S;
    format!("0+{b}x119 {}+{}x80", b * 120.0, after * STEP_S)
}

fn gauge(base: f64, after: f64) -> String {
    format!("{base}+0x119 {after}+0x80")
}

/// `{a="x",b="y"}` from equality matchers, or why the selector cannot seed a series.
fn labels(sel: &str, extra: &[(&str, &str)]) -> Result<String, String> {
    let ms = parse_matchers(sel).map_err(|e| e.to_string())?;
    let mut parts = Vec::new();
    for m in ms {
        if m.op != "=" {
            return Err(format!(
                "unit tests need `label=\"value\"` selectors, not {}{}",
                m.name, m.op
            ));
        }
        parts.push(format!("{}=\"{}\"", m.name, m.value));
    }
    parts.extend(extra.iter().map(|(k, v)| format!("{k}=\"{v}\"")));
    Ok(format!("{{{}}}", parts.join(",")))
}

fn series(c: &AlertConfig, r: &Rates) -> Result<Vec<(String, String)>, String> {
    let or = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.to_string() };
    let (e, d) = match c.dialect {
        Dialect::Seawall => (c.edge_selector(), c.dependency_selector()),
        Dialect::Grpc | Dialect::Envoy => (or(&c.edge, &c.dependency), or(&c.dependency, &c.edge)),
        _ => (c.edge.clone(), c.dependency.clone()),
    };
    let l = |sel: &str, extra: &[(&str, &str)]| labels(sel, extra);
    let s = |name: &str, labels: String, values: String| (format!("{name}{labels}"), values);
    let bad = r.edge - r.good;
    Ok(match c.dialect {
        Dialect::Seawall => {
            // With a caller named, the dependency's server counts what it answered in time;
            // the caller's attempts hold the rest.
            let received = if c.caller.is_empty() { r.dep } else { r.dep.min(r.edge) };
            let attempts = crate::names::CLIENT_ATTEMPTS;
            let mut v = vec![
                s(crate::names::SERVER_THROUGHPUT, l(&e, &[])?, counter(100.0, r.edge)),
                s(crate::names::SERVER_GOODPUT, l(&e, &[])?, counter(100.0, r.good)),
                s(crate::names::SERVER_THROUGHPUT, l(&d, &[])?, counter(100.0, received)),
                s(crate::names::CLIENT_CALLS, l(&e, &[])?, counter(100.0, r.edge)),
                s(attempts, l(&e, &[])?, counter(100.0, r.dep)),
                s(crate::names::CLIENT_RETRY_OVERFLOW, l(&e, &[])?, counter(0.0, r.overflow)),
                s(crate::names::SERVER_OLDEST_QUEUED, l(&d, &[])?, gauge(0.0, r.queue_s)),
            ];
            // The door: first attempts are the edge's, the rest retries; the callers share
            // the dependency's arrivals unevenly, six of them, so the top five leave one out.
            for metric in [crate::names::SERVER_ARRIVALS, crate::names::PROXY_ATTEMPTS] {
                v.push(s(metric, l(&d, &[("attempt", "1")])?, counter(100.0, r.edge)));
                v.push(s(metric, l(&d, &[("attempt", "2")])?, counter(0.0, r.dep - r.edge)));
            }
            for metric in
                [crate::names::SERVER_CALLER_ARRIVALS, crate::names::PROXY_CALLER_REQUESTS]
            {
                for (name, share) in CALLERS {
                    let rates = counter(100.0 * share, r.dep * share);
                    v.push(s(metric, l(&d, &[("caller", name)])?, rates));
                }
            }
            let caller = s(attempts, l(&c.caller, &[])?, counter(100.0, r.dep));
            if !c.caller.is_empty() && !v.iter().any(|(name, _)| *name == caller.0) {
                v.push(caller);
            }
            v
        }
        Dialect::Grpc => vec![
            s(
                "grpc_client_call_duration_seconds_count",
                l(&e, &[("grpc_status", "OK")])?,
                counter(100.0, r.good),
            ),
            s(
                "grpc_client_call_duration_seconds_count",
                l(&e, &[("grpc_status", "UNAVAILABLE")])?,
                counter(0.0, bad),
            ),
            s("grpc_client_attempt_started_total", l(&d, &[])?, counter(100.0, r.dep)),
        ],
        Dialect::Envoy if e == d => vec![
            s("envoy_cluster_upstream_rq_total", l(&d, &[])?, counter(100.0, r.dep)),
            s("envoy_cluster_upstream_rq_retry", l(&d, &[])?, counter(0.0, r.dep - r.edge)),
            s(
                "envoy_cluster_upstream_rq_xx",
                l(&d, &[("envoy_response_code_class", "2")])?,
                counter(100.0, r.good),
            ),
            s(
                "envoy_cluster_upstream_rq_xx",
                l(&d, &[("envoy_response_code_class", "5")])?,
                counter(0.0, r.dep - r.good),
            ),
            s("envoy_cluster_upstream_rq_retry_overflow", l(&d, &[])?, counter(0.0, r.overflow)),
        ],
        Dialect::Istio if e != d => {
            let rep = ("reporter", "destination");
            vec![
                s(
                    "istio_requests_total",
                    l(&e, &[rep, ("response_code", "200")])?,
                    counter(100.0, r.good),
                ),
                s(
                    "istio_requests_total",
                    l(&e, &[rep, ("response_code", "503")])?,
                    counter(0.0, bad),
                ),
                s(
                    "istio_requests_total",
                    l(&d, &[rep, ("response_code", "200")])?,
                    counter(100.0, r.good),
                ),
                s(
                    "istio_requests_total",
                    l(&d, &[rep, ("response_code", "503")])?,
                    counter(0.0, r.dep - r.good),
                ),
            ]
        }
        Dialect::OtelHttp => {
            let code = |v| [("http_response_status_code", v)];
            vec![
                s(
                    "http_server_request_duration_seconds_count",
                    l(&e, &code("200"))?,
                    counter(100.0, r.good),
                ),
                s(
                    "http_server_request_duration_seconds_count",
                    l(&e, &code("503"))?,
                    counter(0.0, bad),
                ),
                s(
                    "http_client_request_duration_seconds_count",
                    l(&d, &code("200"))?,
                    counter(100.0, r.good),
                ),
                s(
                    "http_client_request_duration_seconds_count",
                    l(&d, &code("503"))?,
                    counter(0.0, r.dep - r.good),
                ),
            ]
        }
        _ => {
            return Err("unit tests need one Envoy cluster, or two distinct Istio workloads".into());
        }
    })
}

/// The client label's value (besides severity and call path) and the summary an alert fires
/// with in the storm.
fn expected(c: &AlertConfig, r: &Rule) -> (Option<String>, String) {
    // The value of the label the rule groups by: the selector's, or none in it.
    let value_of = |sel: String| {
        parse_matchers(&sel).ok()?.into_iter().find(|m| m.name == c.by).map(|m| m.value)
    };
    let or = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.to_string() };
    let value = match (c.dialect, r.name) {
        _ if !r.per_client => None,
        (
            Dialect::Seawall,
            "SeawallQueueOlderThanCallerTimeout"
            | "SeawallRetriesAtTheDoor"
            | "SeawallRetriesThroughTheProxy",
        ) => value_of(c.dependency_selector()),
        (Dialect::Seawall, _) => value_of(c.edge_selector()),
        _ => value_of(or(&c.edge, &c.dependency)),
    };
    let summary = r
        .summary
        .replace(&format!("{{{{ $labels.{} }}}}", c.by), value.as_deref().unwrap_or(""))
        .replace("{{ $value | printf \"%.2f\" }}", "4.00")
        // The storm's door: 300 of 400 arrivals per second are retries.
        .replace("{{ $value | humanizePercentage }}", "75%");
    (value, summary)
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A `promtool test rules` file for the rules of `c` (read from `rule_file`, relative to the
/// test file): the storm fires every alert, the spike none. Errors when a selector is not made
/// of `label="value"` matchers (a series cannot be written for a regex).
pub fn promtool_tests(c: &AlertConfig, rule_file: &str) -> Result<String, String> {
    let rules = match c.dialect {
        Dialect::Seawall => super::rules::seawall_rules(c),
        _ => super::dialect::rules(c),
    };
    let storm = Rates {
        edge: 100.0,
        good: 0.0,
        dep: 400.0,
        overflow: 50.0,
        queue_s: 2.0 * c.caller_timeout_s,
    };
    let spike = Rates { edge: 300.0, good: 300.0, dep: 300.0, overflow: 0.0, queue_s: 0.0 };
    let mut out = format!(
        "# Generated by `seawall alerts --metrics {} --format promtool-test`: run with\n\
         # `promtool test rules FILE` beside the rule file.\n\
         rule_files:\n  - {}\nevaluation_interval: 15s\ntests:\n",
        c.dialect.as_str(),
        quote(rule_file)
    );
    for (name, rates, fires, at) in
        [("storm", &storm, true, &["34m"][..]), ("spike", &spike, false, &["34m", "45m"])]
    {
        let _ = writeln!(out, "  - name: {name}\n    interval: 15s\n    input_series:");
        for (s, v) in series(c, rates)? {
            let _ = writeln!(out, "      - series: {}\n        values: '{v}'", quote(&s));
        }
        if fires && c.dialect == Dialect::Seawall {
            top_callers_test(c, rates.dep, &mut out)?;
        }
        let _ = writeln!(out, "    alert_rule_test:");
        for t in at {
            for r in &rules {
                let _ = writeln!(out, "      - eval_time: {t}\n        alertname: {}", r.name);
                if !fires {
                    let _ = writeln!(out, "        exp_alerts: []");
                    continue;
                }
                let (value, summary) = expected(c, r);
                let _ = writeln!(
                    out,
                    "        exp_alerts:\n          - exp_labels:\n              severity: {}",
                    r.severity
                );
                let _ = writeln!(out, "              call_path: {}", quote(&c.path()));
                if let Some(v) = value {
                    let _ = writeln!(out, "              {}: {}", c.by, quote(&v));
                }
                let _ = writeln!(
                    out,
                    "            exp_annotations:\n              summary: {}\n              delay: {}",
                    quote(&summary),
                    quote(&r.delay)
                );
            }
        }
    }
    Ok(out)
}

/// The storm's top-callers records: the five heaviest callers with their rates, not the sixth.
fn top_callers_test(c: &AlertConfig, dep: f64, out: &mut String) -> Result<(), String> {
    let by = parse_matchers(&c.dependency_selector())
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|m| m.name == c.by)
        .map(|m| format!(",{}=\"{}\"", c.by, m.value))
        .unwrap_or_default();
    let _ = writeln!(out, "    promql_expr_test:");
    for r in super::rules::seawall_records(c) {
        let _ =
            writeln!(out, "      - expr: {}\n        eval_time: 34m\n        exp_samples:", r.name);
        for (caller, share) in &CALLERS[..5] {
            let _ = writeln!(
                out,
                "          - labels: {}\n            value: {}",
                quote(&format!("{}{{caller=\"{caller}\"{by}}}", r.name)),
                dep * share
            );
        }
    }
    Ok(())
}
