//! gRPC service config JSON: `methodConfig[].retryPolicy` / `hedgingPolicy`, `retryThrottling`.
//!
//! Rules from gRFC A6 ("gRPC Retry Design"):
//!
//! - `maxAttempts` counts the first attempt, must be greater than 1, and **values above 5 are
//!   treated as 5**; the layer notes the cap. A hedging policy sends up to `maxAttempts` copies,
//!   so it counts the same way.
//! - The most specific `name` wins: `{service, method}`, then `{service}`, then `{}` (every
//!   method).
//! - `retryThrottling` (`maxTokens` in (0, 1000], `tokenRatio` > 0) is the layer's budget,
//!   validated by seawall's own [`seawall::budget::GrpcThrottle`].
//! - gRPC backs off with jitter (`current_backoff · random(0.8, 1.2)` since gRFC A6's revision
//!   of 2024-08-29, `random(0, current_backoff)` before), so the layer counts as jittered.
//! - Validation is the core's own, [`seawall::grpc::ServiceConfig`] (the parser `GrpcRetryLayer`
//!   runs on the client), so the audit refuses exactly the configs the layer refuses; this
//!   module adds the line numbers and the worst-case view.
//! - **Transparent retries** are always listed, as an implicit layer of one attempt: gRPC retries
//!   RPCs that never reached the server application even without a retry policy, but those never
//!   reach the application either, so they add no load there and do not multiply.
//! - An invalid retry policy makes gRPC reject the whole service config; so does this importer,
//!   with the line. Unknown fields are ignored, as gRPC's JSON parsing ignores them. Keys are
//!   matched case-insensitively, as grpc-go (Go's `encoding/json`) matches them — its own retry
//!   example writes `"MaxAttempts"`. Status names are matched exactly (`"UNAVAILABLE"`), as
//!   grpc-go and grpc-java match them.

use std::path::Path;

use seawall::grpc::{self, Code, CodeSet, MethodConfig, Name, Policy, ServiceConfig};
use serde_json::Value;

use super::{MAX_TIMEOUT, Select, loc};
use crate::error::{Error, ErrorKind};
use crate::model::{Budget, Place, RetryLayer};

/// gRFC A6's cap on `maxAttempts`.
pub const MAX_ATTEMPTS_CAP: u32 = grpc::config::MAX_ATTEMPTS_CAP;

/// Status codes gRPC maps to HTTP 4xx other than 408/429: retrying them cannot succeed
/// (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION,
/// OUT_OF_RANGE, UNAUTHENTICATED).
const CLIENT_ERRORS: [u8; 7] = [3, 5, 6, 7, 9, 11, 16];

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
}

/// How well a methodConfig's `name` list matches the selection: 3 exact, 2 service, 1 default.
fn specificity(mc: &MethodConfig, select: &Select) -> u8 {
    let service = select.service.as_deref();
    mc.names
        .iter()
        .map(|n| match n {
            Name::Default => 1,
            Name::Service(s) if service == Some(s) => 2,
            Name::Method(s, m) if service == Some(s) && select.method.as_deref() == Some(m) => 3,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// Parses a service config and returns the layers for the selected method (`service`,
/// `method`; otherwise the worst methodConfig), plus the transparent-retry layer.
pub fn parse(path: &Path, text: &str, select: &Select) -> Result<Vec<RetryLayer>, Error> {
    let root: Value = serde_json::from_str(text).map_err(|e| {
        Error::new(
            path,
            Some(e.line()),
            ErrorKind::Syntax(format!("{e}; expected a gRPC service config (JSON)")),
        )
    })?;
    if !root.is_object() {
        return Err(Error::invalid(path, Some(1), "service config", "a JSON object"));
    }
    let lower = text.to_ascii_lowercase();
    let raw = get(&root, "methodConfig").and_then(Value::as_array).map(Vec::as_slice);
    let raw = raw.unwrap_or(&[]);
    let config =
        ServiceConfig::from_value(&root).map_err(|e| located(path, text, &lower, raw, &e))?;
    let budget = config.throttling().map(|t| Budget::GrpcThrottle {
        max_tokens: f64::from(t.max_tokens),
        token_ratio: t.token_ratio,
    });
    let mut chosen: Option<(u8, RetryLayer)> = None;
    for (i, mc) in config.method_configs().iter().enumerate() {
        let rank = if select.service.is_some() { specificity(mc, select) } else { 1 };
        if rank == 0 {
            continue;
        }
        let mut l = policy_layer(path, text, &lower, raw, mc, i);
        if l.retries() {
            l.budget = budget;
        }
        let better = match &chosen {
            None => true,
            Some((r, c)) => rank > *r || (rank == *r && l.attempts > c.attempts),
        };
        if better {
            chosen = Some((rank, l));
        }
    }
    let layer = match (chosen, &select.service) {
        (Some((_, l)), _) => l,
        (None, Some(s)) => {
            return Err(Error::not_found(
                path,
                None,
                format!("a methodConfig matching service \"{s}\""),
            ));
        }
        (None, None) => {
            let mut l = RetryLayer::new(Place::Rpc, 1, loc(path, 1));
            l.note = Some("no methodConfig: gRPC makes one attempt".into());
            l
        }
    };
    let mut transparent = RetryLayer::new(Place::Rpc, 1, loc(path, 1));
    transparent.implicit = true;
    transparent.jitter = true;
    transparent.note = Some(
        "gRPC transparent retries: RPCs that never reached the server application are retried \
         even without a policy; they add no application load and are not counted"
            .into(),
    );
    Ok(vec![layer, transparent])
}

/// The core's error, with the line of the part of the file it names.
fn located(
    path: &Path,
    text: &str,
    lower: &str,
    raw: &[Value],
    e: &grpc::ServiceConfigError,
) -> Error {
    let (field, expected) = match e.kind() {
        grpc::ErrorKind::Invalid { expected } => (e.path(), format!("{expected} (gRFC A6)")),
        grpc::ErrorKind::DuplicateName => (e.path(), "a method named only once (gRFC A6)".into()),
        _ => (e.path(), "a valid gRPC service config (gRFC A6)".into()),
    };
    let line = match e.method_config() {
        Some(i) => {
            // "methodConfig[i].retryPolicy.maxAttempts" -> the i-th config's "retryPolicy" key.
            let key = field.split('.').nth(1).unwrap_or("name");
            let key = key.split('[').next().unwrap_or(key);
            let nth = raw[..i.min(raw.len())].iter().filter(|c| get(c, key).is_some()).count();
            nth_key_line(text, lower, key, nth)
        }
        None => nth_key_line(text, lower, field.split('.').next().unwrap_or(""), 0),
    };
    let field = field.split_once('.').map_or(field, |(_, rest)| rest);
    Error::invalid(path, Some(line), field.to_owned(), expected)
}

/// The line of the `n`-th (0-based) occurrence of `"key"` (case-insensitive).
fn nth_key_line(text: &str, lower: &str, key: &str, n: usize) -> usize {
    let needle = format!("\"{}\"", key.to_ascii_lowercase());
    lower
        .match_indices(&needle)
        .nth(n)
        .map(|(at, _)| text[..at].matches('\n').count() + 1)
        .unwrap_or(1)
}

fn policy_layer(
    path: &Path,
    text: &str,
    lower: &str,
    raw: &[Value],
    mc: &MethodConfig,
    i: usize,
) -> RetryLayer {
    let (key, attempts, configured, codes) = match &mc.policy {
        Some(Policy::Retry(p)) => {
            ("retryPolicy", p.max_attempts, p.configured_max_attempts, p.retryable)
        }
        Some(Policy::Hedging(p)) => {
            ("hedgingPolicy", p.max_attempts, p.configured_max_attempts, p.non_fatal)
        }
        None => {
            let line = nth_key_line(text, lower, "name", i);
            let mut l = RetryLayer::new(Place::Rpc, 1, loc(path, line));
            l.timeout = mc.timeout.map(|t| t.min(MAX_TIMEOUT));
            return l;
        }
    };
    let nth = raw[..i.min(raw.len())].iter().filter(|c| get(c, key).is_some()).count();
    let line = nth_key_line(text, lower, key, nth);
    let mut l = RetryLayer::new(Place::Rpc, attempts, loc(path, line));
    l.jitter = true;
    l.timeout = mc.timeout.map(|t| t.min(MAX_TIMEOUT));
    l.retries_4xx = CLIENT_ERRORS
        .iter()
        .any(|&n| Code::from_i64(i64::from(n)).is_some_and(|c| CodeSet::contains(codes, c)));
    l.note = match (key, configured > u64::from(MAX_ATTEMPTS_CAP)) {
        ("hedgingPolicy", _) => Some("hedging: up to maxAttempts copies in parallel".into()),
        (_, true) => Some(format!("maxAttempts {configured} is capped at 5 by gRPC")),
        _ => None,
    };
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &str = r#"{
  "methodConfig": [
    {"name": [{"service": "a.A"}], "retryPolicy": {"maxAttempts": 9, "initialBackoff": "0.1s",
      "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}},
    {"name": [{"service": "a.A", "method": "Get"}], "timeout": "1s"}
  ],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}"#;

    #[test]
    fn cap_specificity_and_throttle() {
        let sel = |m: Option<&str>| Select {
            service: Some("a.A".into()),
            method: m.map(Into::into),
            ..Select::default()
        };
        let l = parse(Path::new("sc.json"), CFG, &sel(Some("Put"))).unwrap();
        assert_eq!(l[0].attempts, 5);
        assert_eq!(l[0].source, "sc.json:3");
        assert!((l[0].bounded() - 1.1).abs() < 1e-9);
        assert!(l[1].implicit && l[1].attempts == 1);
        let l = parse(Path::new("sc.json"), CFG, &sel(Some("Get"))).unwrap();
        assert_eq!(l[0].attempts, 1, "the exact method has no policy");
    }

    /// A legal but absurd timeout (gRPC allows 10,000 years) is held to the audit's maximum, as
    /// every other importer's is (found by fuzz/import_grpc: 7,105,843,295.5 s).
    #[test]
    fn timeouts_are_clamped_to_the_audits_maximum() {
        let cfg = CFG.replace("\"timeout\": \"1s\"", "\"timeout\": \"007105843295.5s\"");
        let sel =
            Select { service: Some("a.A".into()), method: Some("Get".into()), ..Select::default() };
        let l = parse(Path::new("sc.json"), &cfg, &sel).unwrap();
        assert_eq!(l[0].timeout, Some(MAX_TIMEOUT));
    }

    #[test]
    fn invalid_policies_are_rejected_with_lines() {
        let bad = CFG.replace("\"maxAttempts\": 9", "\"maxAttempts\": 1");
        let e = parse(Path::new("sc.json"), &bad, &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(3), "{e}");
        let e = parse(Path::new("sc.json"), "{\n  \"methodConfig\": [\n", &Select::default())
            .unwrap_err();
        assert!(e.line().is_some(), "{e}");
        // The core's rules (the client layer's parser), with the audit's lines. Names in any
        // case are codes (A6); a name that is no code is refused.
        let lower = CFG.replace("[\"UNAVAILABLE\"]", "[\"unavailable\"]");
        assert!(parse(Path::new("sc.json"), &lower, &Select::default()).is_ok());
        let bad = CFG.replace("[\"UNAVAILABLE\"]", "[\"UNAVAILABLE_\"]");
        let e = parse(Path::new("sc.json"), &bad, &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(3), "{e}");
        assert!(e.to_string().contains("retryPolicy.retryableStatusCodes"), "{e}");
        let dup = CFG.replace("\"method\": \"Get\"", "\"method\": \"\"");
        let e = parse(Path::new("sc.json"), &dup, &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(5), "{e}");
        let bad = CFG.replace("\"tokenRatio\": 0.1", "\"tokenRatio\": 0");
        let e = parse(Path::new("sc.json"), &bad, &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(7), "{e}");
    }
}
