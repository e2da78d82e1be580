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
//! - gRPC backs off with jitter (`random(0, current_backoff)`), so the layer counts as jittered.
//! - **Transparent retries** are always listed, as an implicit layer of one attempt: gRPC retries
//!   RPCs that never reached the server application even without a retry policy, but those never
//!   reach the application either, so they add no load there and do not multiply.
//! - An invalid retry policy makes gRPC reject the whole service config; so does this importer,
//!   with the line. Unknown fields are ignored, as gRPC's JSON parsing ignores them. Keys are
//!   matched case-insensitively, as grpc-go (Go's `encoding/json`) matches them — its own retry
//!   example writes `"MaxAttempts"`.

use std::path::Path;

use serde_json::Value;

use super::{Select, loc, parse_duration};
use crate::error::{Error, ErrorKind};
use crate::model::{Budget, Place, RetryLayer};

/// gRFC A6's cap on `maxAttempts`.
pub const MAX_ATTEMPTS_CAP: u32 = 5;

/// Status names gRPC maps to HTTP 4xx other than 408/429: retrying them cannot succeed.
const CLIENT_ERRORS: [(&str, i64); 7] = [
    ("INVALID_ARGUMENT", 3),
    ("NOT_FOUND", 5),
    ("ALREADY_EXISTS", 6),
    ("PERMISSION_DENIED", 7),
    ("FAILED_PRECONDITION", 9),
    ("OUT_OF_RANGE", 11),
    ("UNAUTHENTICATED", 16),
];

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
}

/// How well a methodConfig's `name` list matches the selection: 3 exact, 2 service, 1 default.
fn specificity(mc: &Value, select: &Select) -> u8 {
    let names = get(mc, "name").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    names
        .iter()
        .map(|n| {
            let s = get(n, "service").and_then(Value::as_str).unwrap_or("");
            let m = get(n, "method").and_then(Value::as_str).unwrap_or("");
            match (s.is_empty(), m.is_empty()) {
                (true, _) => 1,
                (false, true) if select.service.as_deref() == Some(s) => 2,
                (false, false)
                    if select.service.as_deref() == Some(s)
                        && select.method.as_deref() == Some(m) =>
                {
                    3
                }
                _ => 0,
            }
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
    let budget = throttle(path, text, &root)?;
    let configs = get(&root, "methodConfig").and_then(Value::as_array).cloned().unwrap_or_default();
    let lower = text.to_ascii_lowercase();
    let mut chosen: Option<(u8, RetryLayer)> = None;
    for (i, mc) in configs.iter().enumerate() {
        let rank = if select.service.is_some() { specificity(mc, select) } else { 1 };
        if rank == 0 {
            continue;
        }
        let mut l = policy_layer(path, text, &lower, &configs, i)?;
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
    configs: &[Value],
    i: usize,
) -> Result<RetryLayer, Error> {
    let mc = &configs[i];
    let timeout = get(mc, "timeout").and_then(Value::as_str).and_then(parse_duration);
    for (key, codes_key) in
        [("retryPolicy", "retryableStatusCodes"), ("hedgingPolicy", "nonFatalStatusCodes")]
    {
        let Some(p) = get(mc, key) else { continue };
        let nth = configs[..i].iter().filter(|c| get(c, key).is_some()).count();
        let line = nth_key_line(text, lower, key, nth);
        let bad = |what: &str, expected: &str| {
            Error::invalid(
                path,
                Some(line),
                format!("{key}.{what}"),
                format!("{expected} (gRFC A6)"),
            )
        };
        let max = get(p, "maxAttempts").and_then(Value::as_u64).filter(|&n| n >= 2);
        let max = max.ok_or_else(|| bad("maxAttempts", "an integer greater than 1"))?;
        let codes = get(p, codes_key).and_then(Value::as_array).cloned().unwrap_or_default();
        if key == "retryPolicy" {
            for field in ["initialBackoff", "maxBackoff"] {
                let ok = get(p, field).and_then(Value::as_str).and_then(parse_duration);
                if ok.is_none_or(|d| d.is_zero()) {
                    return Err(bad(field, "a duration greater than 0, such as \"0.1s\""));
                }
            }
            if get(p, "backoffMultiplier").and_then(Value::as_f64).is_none_or(|m| m <= 0.0) {
                return Err(bad("backoffMultiplier", "a number greater than 0"));
            }
            if codes.is_empty() {
                return Err(bad(codes_key, "a non-empty list of status codes"));
            }
        }
        let attempts = u32::try_from(max).unwrap_or(u32::MAX).min(MAX_ATTEMPTS_CAP);
        let mut l = RetryLayer::new(Place::Rpc, attempts, loc(path, line));
        l.jitter = true;
        l.timeout = timeout;
        l.retries_4xx = codes.iter().any(|c| {
            CLIENT_ERRORS.iter().any(|(name, n)| {
                c.as_str().is_some_and(|s| s.eq_ignore_ascii_case(name)) || c.as_i64() == Some(*n)
            })
        });
        l.note = match (key, max > u64::from(MAX_ATTEMPTS_CAP)) {
            ("hedgingPolicy", _) => Some("hedging: up to maxAttempts copies in parallel".into()),
            (_, true) => Some(format!("maxAttempts {max} is capped at 5 by gRPC")),
            _ => None,
        };
        return Ok(l);
    }
    let mut l = RetryLayer::new(Place::Rpc, 1, loc(path, nth_key_line(text, lower, "name", i)));
    l.timeout = timeout;
    Ok(l)
}

fn throttle(path: &Path, text: &str, root: &Value) -> Result<Option<Budget>, Error> {
    let Some(t) = get(root, "retryThrottling") else { return Ok(None) };
    let line = nth_key_line(text, &text.to_ascii_lowercase(), "retryThrottling", 0);
    let max = get(t, "maxTokens").and_then(Value::as_f64).unwrap_or(f64::NAN);
    let ratio = get(t, "tokenRatio").and_then(Value::as_f64).unwrap_or(f64::NAN);
    let max_u32 = if max.fract() == 0.0 && (1.0..=1000.0).contains(&max) { max as u32 } else { 0 };
    seawall::budget::GrpcThrottle::new(max_u32, ratio).map_err(|e| {
        Error::invalid(path, Some(line), format!("retryThrottling ({})", e.field()), e.allowed())
    })?;
    Ok(Some(Budget::GrpcThrottle { max_tokens: max, token_ratio: ratio }))
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

    #[test]
    fn invalid_policies_are_rejected_with_lines() {
        let bad = CFG.replace("\"maxAttempts\": 9", "\"maxAttempts\": 1");
        let e = parse(Path::new("sc.json"), &bad, &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(3), "{e}");
        let e = parse(Path::new("sc.json"), "{\n  \"methodConfig\": [\n", &Select::default())
            .unwrap_err();
        assert!(e.line().is_some(), "{e}");
        let bad = CFG.replace("\"tokenRatio\": 0.1", "\"tokenRatio\": 0");
        let e = parse(Path::new("sc.json"), &bad, &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(7), "{e}");
    }
}
