//! Envoy route `retry_policy` (route or virtual host) and cluster `retry_budget`, YAML or JSON.
//!
//! The file may be a bootstrap (`static_resources`), a `RouteConfiguration`, or anything holding
//! `virtual_hosts` and `clusters`: the importer walks the tree for them.
//!
//! - A route's `retry_policy` overrides its virtual host's. `num_retries` defaults to **1** when a
//!   policy exists; Envoy retries only on the conditions in `retry_on`, so a policy with an empty
//!   `retry_on` makes one attempt (it only arms the `x-envoy-retry-on` header) and is noted.
//! - Route `timeout` defaults to 15 s (Envoy's `RouteAction.timeout`).
//! - Back-off is Envoy's fully jittered exponential (25 ms base), so the layer counts as jittered.
//! - The route's cluster's `circuit_breakers.thresholds[].retry_budget` is the layer's budget:
//!   `budget_percent` default 20 %, `min_retry_concurrency` default 3. `max_retries` (3
//!   concurrent retries by default) is a concurrency cap, not a share of traffic, and is not
//!   counted as a budget.
//! - Unknown fields inside `retry_policy` are **rejected**, as Envoy rejects unknown fields in
//!   static configuration; both `snake_case` and protobuf JSON `camelCase` names are accepted.
//!   The rest of the file is walked, not validated.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_norway::Value;

use super::{Select, loc, parse_duration, yaml_documents, yaml_error};
use crate::error::Error;
use crate::model::{Budget, Place, RetryLayer};

/// Envoy's default `num_retries` when a retry policy exists.
pub const DEFAULT_NUM_RETRIES: u32 = 1;
/// Envoy's default route timeout.
pub const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);

/// `config.route.v3.RetryPolicy`, every field named so unknown ones are caught.
// Most fields are named only so that `deny_unknown_fields` knows them; the audit reads four.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RetryPolicy {
    #[serde(alias = "retryOn")]
    retry_on: Option<String>,
    #[serde(alias = "numRetries")]
    num_retries: Option<u32>,
    #[serde(alias = "perTryTimeout")]
    per_try_timeout: Option<Value>,
    #[serde(alias = "perTryIdleTimeout")]
    per_try_idle_timeout: Option<Value>,
    #[serde(alias = "retryPriority")]
    retry_priority: Option<Value>,
    #[serde(alias = "retryHostPredicate")]
    retry_host_predicate: Option<Value>,
    #[serde(alias = "retryOptionsPredicates")]
    retry_options_predicates: Option<Value>,
    #[serde(alias = "hostSelectionRetryMaxAttempts")]
    host_selection_retry_max_attempts: Option<Value>,
    #[serde(alias = "retriableStatusCodes", default)]
    retriable_status_codes: Vec<u32>,
    #[serde(alias = "retryBackOff")]
    retry_back_off: Option<Value>,
    #[serde(alias = "rateLimitedRetryBackOff")]
    rate_limited_retry_back_off: Option<Value>,
    #[serde(alias = "retriableHeaders")]
    retriable_headers: Option<Value>,
    #[serde(alias = "retriableRequestHeaders")]
    retriable_request_headers: Option<Value>,
}

/// Whether `retry_on` (Envoy or Istio syntax) and `retriable_status_codes` retry a 4xx other
/// than 408 and 429: `retriable-4xx` (409), or a listed 4xx status.
pub fn retries_4xx(retry_on: &str, codes: &[u32]) -> bool {
    let bad = |c: u32| (400..500).contains(&c) && c != 408 && c != 429;
    retry_on.split(',').map(str::trim).any(|c| {
        c == "retriable-4xx"
            || c.parse::<u32>().is_ok_and(bad)
            || (c == "retriable-status-codes" && codes.iter().any(|&c| bad(c)))
    })
}

/// One route found in the file, with what applies to it.
struct Found {
    vhost: Option<String>,
    name: Option<String>,
    policy: Option<Value>,
    cluster: Option<String>,
    timeout: Option<Value>,
}

fn get<'a>(v: &'a Value, snake: &str, camel: &str) -> Option<&'a Value> {
    v.get(snake).or_else(|| v.get(camel))
}

fn collect(v: &Value, routes: &mut Vec<Found>, clusters: &mut Vec<Value>) {
    match v {
        Value::Mapping(m) => {
            if let Some(Value::Sequence(vhosts)) = get(v, "virtual_hosts", "virtualHosts") {
                for vh in vhosts {
                    let vh_policy = get(vh, "retry_policy", "retryPolicy");
                    for r in vh.get("routes").and_then(Value::as_sequence).into_iter().flatten() {
                        let action = r.get("route");
                        let own = action.and_then(|a| get(a, "retry_policy", "retryPolicy"));
                        routes.push(Found {
                            vhost: vh.get("name").and_then(Value::as_str).map(str::to_owned),
                            name: r.get("name").and_then(Value::as_str).map(str::to_owned),
                            policy: own.or(vh_policy).cloned(),
                            cluster: action
                                .and_then(|a| a.get("cluster"))
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            timeout: action.and_then(|a| a.get("timeout")).cloned(),
                        });
                    }
                }
            }
            if let Some(Value::Sequence(cs)) = v.get("clusters") {
                clusters.extend(cs.iter().cloned());
            }
            for (_, child) in m {
                collect(child, routes, clusters);
            }
        }
        Value::Sequence(s) => s.iter().for_each(|c| collect(c, routes, clusters)),
        Value::Tagged(t) => collect(&t.value, routes, clusters),
        _ => {}
    }
}

/// A protobuf duration: `"2s"` or `{seconds, nanos}`.
fn duration(v: &Value) -> Option<Duration> {
    match v {
        Value::String(s) => parse_duration(s),
        Value::Mapping(_) => {
            let secs = v.get("seconds").and_then(Value::as_u64).unwrap_or(0);
            let nanos = v.get("nanos").and_then(Value::as_u64).unwrap_or(0);
            Duration::from_secs(secs).checked_add(Duration::from_nanos(nanos))
        }
        _ => None,
    }
}

fn budget(clusters: &[Value], name: &str) -> Option<Budget> {
    let c = clusters.iter().find(|c| c.get("name").and_then(Value::as_str) == Some(name))?;
    let thresholds = get(c, "circuit_breakers", "circuitBreakers")?.get("thresholds")?;
    thresholds.as_sequence()?.iter().find_map(|t| {
        let b = get(t, "retry_budget", "retryBudget")?;
        let percent = get(b, "budget_percent", "budgetPercent")
            .and_then(|p| p.get("value").and_then(Value::as_f64))
            .unwrap_or(20.0);
        let min = get(b, "min_retry_concurrency", "minRetryConcurrency")
            .and_then(Value::as_u64)
            .unwrap_or(3);
        Some(Budget::Envoy { percent, min_concurrency: u32::try_from(min).unwrap_or(u32::MAX) })
    })
}

/// Parses an Envoy config and returns the layer for the selected route (`name`: virtual host,
/// `route`: route name; otherwise the worst route).
pub fn parse(path: &Path, text: &str, select: &Select) -> Result<Vec<RetryLayer>, Error> {
    let mut best: Option<RetryLayer> = None;
    let mut any_route = false;
    for (first, doc) in yaml_documents(text) {
        let v: Value = serde_norway::from_str(&doc).map_err(|e| yaml_error(path, first, &e))?;
        let (mut routes, mut clusters) = (Vec::new(), Vec::new());
        collect(&v, &mut routes, &mut clusters);
        for r in &routes {
            any_route = true;
            if (select.name.is_some() && r.vhost != select.name)
                || (select.route.is_some() && r.name != select.route)
            {
                continue;
            }
            let anchor = r.name.as_deref().or(r.vhost.as_deref()).unwrap_or("virtual_hosts");
            // Prefer the `name:` line over any other mention (a domain may contain the name).
            let start =
                [format!("name: {anchor}"), format!("\"name\": \"{anchor}\""), anchor.to_string()]
                    .iter()
                    .find_map(|needle| super::line_of(&doc, 1, needle))
                    .unwrap_or(1);
            let line = first - 1
                + super::line_of(&doc, start, "etry_policy")
                    .or_else(|| super::line_of(&doc, start, "etryPolicy"))
                    .filter(|_| r.policy.is_some())
                    .unwrap_or(start);
            let l = layer(path, line, r, &clusters)?;
            if best.as_ref().is_none_or(|b| l.attempts > b.attempts) {
                best = Some(l);
            }
        }
    }
    match best {
        Some(l) => Ok(vec![l]),
        None if !any_route => Err(Error::not_found(path, None, "a route under virtual_hosts")),
        None => Err(Error::not_found(path, None, "the selected virtual host or route")),
    }
}

fn layer(path: &Path, line: usize, r: &Found, clusters: &[Value]) -> Result<RetryLayer, Error> {
    let timeout = match &r.timeout {
        None => DEFAULT_ROUTE_TIMEOUT,
        Some(v) => duration(v).ok_or_else(|| {
            Error::invalid(path, Some(line), "route.timeout", "a duration such as \"15s\"")
        })?,
    };
    let Some(raw) = &r.policy else {
        let mut l = RetryLayer::new(Place::Proxy, 1, loc(path, line));
        l.timeout = Some(timeout);
        l.note = Some("no retry_policy: Envoy does not retry".into());
        return Ok(l);
    };
    let p: RetryPolicy = serde_norway::from_value(raw.clone()).map_err(|e| {
        Error::invalid(path, Some(line), "retry_policy", format!("an Envoy RetryPolicy ({e})"))
    })?;
    let retry_on = p.retry_on.clone().unwrap_or_default();
    let armed = !retry_on.trim().is_empty();
    let retries = if armed { p.num_retries.unwrap_or(DEFAULT_NUM_RETRIES) } else { 0 };
    let mut l = RetryLayer::new(Place::Proxy, retries.saturating_add(1), loc(path, line));
    l.jitter = true;
    l.timeout = Some(timeout);
    l.retries_4xx = retries_4xx(&retry_on, &p.retriable_status_codes);
    if let Some(v) = &p.per_try_timeout {
        l.per_try_timeout = Some(duration(v).ok_or_else(|| {
            Error::invalid(
                path,
                Some(line),
                "retry_policy.per_try_timeout",
                "a duration such as \"2s\"",
            )
        })?);
    }
    l.budget = r.cluster.as_deref().and_then(|c| budget(clusters, c));
    l.note = match (armed, p.num_retries) {
        (false, _) => Some("retry_on is empty: Envoy retries only on x-envoy-retry-on".into()),
        (true, None) => Some("Envoy default: num_retries 1 when a retry policy exists".into()),
        _ => None,
    };
    l.implicit = armed && p.num_retries.is_none();
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_num_retries_budget_and_unknown_fields() {
        let y = "virtual_hosts:\n- name: vh\n  routes:\n  - name: r\n    route:\n      cluster: c\n      retry_policy:\n        retry_on: 5xx\nclusters:\n- name: c\n  circuit_breakers:\n    thresholds:\n    - retry_budget: {}\n";
        let l = &parse(Path::new("e.yaml"), y, &Select::default()).unwrap()[0];
        assert_eq!(l.attempts, 2);
        assert_eq!(l.budget, Some(Budget::Envoy { percent: 20.0, min_concurrency: 3 }));
        assert_eq!(l.source, "e.yaml:7");
        let bad = y.replace("retry_on: 5xx", "retry_on: 5xx\n        num_retires: 3");
        let e = parse(Path::new("e.yaml"), &bad, &Select::default()).unwrap_err();
        assert!(e.to_string().contains("num_retires"), "{e}");
    }

    #[test]
    fn four_xx_detection() {
        assert!(retries_4xx("5xx,retriable-4xx", &[]));
        assert!(retries_4xx("retriable-status-codes", &[503, 404]));
        assert!(!retries_4xx("retriable-status-codes", &[503, 429, 408]));
        assert!(retries_4xx("connect-failure,404", &[]));
    }
}
