//! Istio `VirtualService` YAML: `http[].retries`, `perTryTimeout`, `timeout`, and the mesh default.
//!
//! - A route with no `retries` gets Istio's default: **2 retries** (3 attempts), retried on
//!   `connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes` (503). The
//!   layer is marked implicit: nobody wrote it, and it multiplies all the same.
//! - `retries.attempts: N` means N retries, N + 1 attempts; `attempts: 0` (or a `retries` block
//!   without `attempts`) disables retries. Istio sets no jitter knob: Envoy's retry back-off is
//!   fully jittered (25 ms base), so the layer counts as jittered. A VirtualService cannot declare
//!   a ratio budget, so the layer has none.
//! - Multi-document streams are read document by document; documents of other kinds are skipped.
//! - Unknown fields are ignored, as the Kubernetes API server prunes unknown fields of a
//!   structural CRD (it rejects them only under `kubectl --validate=strict`): any manifest that
//!   applies can be audited. Fields that are read are checked as Istio's validation checks them.

use std::path::Path;

use serde::Deserialize;

use super::{Select, loc, parse_duration, yaml_documents, yaml_error};
use crate::error::Error;
use crate::model::{Place, RetryLayer};

/// Istio's retries when a route says nothing: `attempts: 2`.
pub const DEFAULT_RETRIES: u32 = 2;

#[derive(Deserialize)]
struct Head {
    kind: Option<String>,
}

#[derive(Deserialize)]
struct VirtualService {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: Spec,
}

#[derive(Deserialize, Default)]
struct Meta {
    name: Option<String>,
}

#[derive(Deserialize, Default)]
struct Spec {
    #[serde(default)]
    http: Vec<HttpRoute>,
}

#[derive(Deserialize)]
struct HttpRoute {
    name: Option<String>,
    timeout: Option<String>,
    retries: Option<HttpRetry>,
}

#[derive(Deserialize)]
struct HttpRetry {
    attempts: Option<i64>,
    #[serde(rename = "perTryTimeout")]
    per_try_timeout: Option<String>,
    #[serde(rename = "retryOn")]
    retry_on: Option<String>,
}

/// Parses a VirtualService stream and returns the layer for the selected route (see
/// [`Select`]: `name` picks the VirtualService, `route` the http route; otherwise the worst).
pub fn parse(path: &Path, text: &str, select: &Select) -> Result<Vec<RetryLayer>, Error> {
    let mut candidates: Vec<RetryLayer> = Vec::new();
    let mut seen_vs = false;
    for (first, doc) in yaml_documents(text) {
        let head: Head = serde_norway::from_str(&doc).map_err(|e| yaml_error(path, first, &e))?;
        if head.kind.as_deref() != Some("VirtualService") {
            continue;
        }
        seen_vs = true;
        let vs: VirtualService =
            serde_norway::from_str(&doc).map_err(|e| yaml_error(path, first, &e))?;
        if select.name.is_some() && vs.metadata.name != select.name {
            continue;
        }
        let starts = route_lines(&doc);
        for (i, route) in vs.spec.http.iter().enumerate() {
            if select.route.is_some() && route.name != select.route {
                continue;
            }
            let start = starts.get(i).copied().unwrap_or(1);
            candidates.push(layer(path, &doc, first, start, route)?);
        }
    }
    if !seen_vs {
        return Err(Error::not_found(path, None, "a document of kind VirtualService"));
    }
    let worst = candidates.into_iter().reduce(|a, b| if b.attempts > a.attempts { b } else { a });
    match worst {
        Some(l) => Ok(vec![l]),
        None => Err(Error::not_found(path, None, describe(select))),
    }
}

fn describe(select: &Select) -> String {
    match (&select.name, &select.route) {
        (Some(n), Some(r)) => format!("http route \"{r}\" in VirtualService \"{n}\""),
        (Some(n), None) => format!("an http route in VirtualService \"{n}\""),
        (None, Some(r)) => format!("http route \"{r}\""),
        (None, None) => "an http route".to_string(),
    }
}

/// The layer one route implies. `first` is the document's first line in the stream, `start` the
/// route's first line within the document.
fn layer(
    path: &Path,
    doc: &str,
    first: usize,
    start: usize,
    route: &HttpRoute,
) -> Result<RetryLayer, Error> {
    let retries_line = super::line_of(doc, start, "retries:").filter(|_| route.retries.is_some());
    let line = first + retries_line.unwrap_or(start) - 1;
    let duration = |field: &str, v: &Option<String>| match v {
        None => Ok(None),
        Some(s) => parse_duration(s).filter(|d| d.as_millis() >= 1).map(Some).ok_or_else(|| {
            Error::invalid(path, Some(line), field, "a duration of at least 1ms, such as 2s")
        }),
    };
    let timeout = duration("timeout", &route.timeout)?;
    let mut l = match &route.retries {
        None => {
            let mut l = RetryLayer::new(Place::Mesh, DEFAULT_RETRIES + 1, loc(path, line));
            l.implicit = true;
            l.note = Some("Istio default: 2 retries when a route does not mention retries".into());
            l
        }
        Some(r) => {
            let n = r.attempts.unwrap_or(0);
            if n < 0 {
                return Err(Error::invalid(path, Some(line), "retries.attempts", "an integer ≥ 0"));
            }
            let attempts = u32::try_from(n).unwrap_or(u32::MAX - 1).saturating_add(1);
            let mut l = RetryLayer::new(Place::Mesh, attempts, loc(path, line));
            l.per_try_timeout = duration("retries.perTryTimeout", &r.per_try_timeout)?;
            l.retries_4xx = super::envoy::retries_4xx(r.retry_on.as_deref().unwrap_or(""), &[]);
            l
        }
    };
    l.jitter = true;
    l.timeout = timeout;
    Ok(l)
}

/// The first line (1-based, within the document) of each item of the top-level `spec.http`
/// list, in order, for block-style YAML. Flow-style lists give no lines; callers fall back to
/// the document's first line.
fn route_lines(doc: &str) -> Vec<usize> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = doc.lines().collect();
    let Some(http) = lines.iter().position(|l| l.trim_start().starts_with("http:")) else {
        return Vec::new();
    };
    let http_indent = indent(lines[http]);
    let mut item_indent = None;
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate().skip(http + 1) {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        // A sequence may sit at the key's own indentation ("http:\n- route:"), so only a
        // non-item line at or left of the key ends the list.
        if indent(l) < http_indent || (indent(l) == http_indent && !t.starts_with("- ")) {
            break;
        }
        if t.starts_with("- ") || t == "-" {
            let ind = *item_indent.get_or_insert(indent(l));
            if indent(l) == ind {
                out.push(i + 1);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempts(yaml: &str, select: &Select) -> u32 {
        parse(Path::new("vs.yaml"), yaml, select).unwrap()[0].attempts
    }

    #[test]
    fn default_zero_and_explicit() {
        let vs = "kind: VirtualService\nmetadata: {name: a}\nspec:\n  http:\n  - name: none\n    route: []\n  - name: disabled\n    retries:\n      attempts: 0\n  - name: three\n    retries: {attempts: 3, perTryTimeout: 2s}\n";
        let pick = |r: &str| Select { route: Some(r.into()), ..Select::default() };
        assert_eq!(attempts(vs, &pick("none")), 3);
        assert_eq!(attempts(vs, &pick("disabled")), 1);
        assert_eq!(attempts(vs, &pick("three")), 4);
        assert_eq!(attempts(vs, &Select::default()), 4, "the worst route when none is named");
        let l = &parse(Path::new("vs.yaml"), vs, &pick("disabled")).unwrap()[0];
        assert_eq!(l.source, "vs.yaml:8");
    }

    #[test]
    fn negative_attempts_and_bad_yaml_are_errors_with_lines() {
        let e = parse(
            Path::new("v"),
            "kind: VirtualService\nspec:\n  http:\n  - retries:\n      attempts: -1\n",
            &Select::default(),
        )
        .unwrap_err();
        assert_eq!(e.line(), Some(4));
        let e = parse(
            Path::new("v"),
            "---\nkind: Service\n---\nkind: VirtualService\nspec: [\n",
            &Select::default(),
        )
        .unwrap_err();
        assert!(e.line().is_some_and(|l| l >= 5), "{e}");
    }
}
