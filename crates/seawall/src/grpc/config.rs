//! The gRPC service config (JSON), as far as retries go: `methodConfig[]` with `name`, `timeout`,
//! `retryPolicy` / `hedgingPolicy`, and `retryThrottling`.
//!
//! Parsing follows gRFC A6 and the validation grpc-go and grpc-java apply, because a config
//! gRPC rejects must not be one seawall quietly runs:
//!
//! - `retryPolicy.maxAttempts` and `hedgingPolicy.maxAttempts` are integers of at least 2;
//!   **values above 5 are treated as 5** (A6, *Limits on Retries and Hedges*) and the configured
//!   value is kept for reporting.
//! - `initialBackoff` and `maxBackoff` are proto3 JSON durations greater than zero;
//!   `backoffMultiplier` a finite number greater than zero; `retryableStatusCodes` and
//!   `nonFatalStatusCodes` non-empty lists of status names in any case (`"UNAVAILABLE"`,
//!   `"unavailable"`) or numbers (0–16), as A6 allows.
//!   `perAttemptRecvTimeout`, if set, is greater than zero; `hedgingDelay` defaults to `0s`.
//! - A method config holds at most one of the two policies.
//! - `name` entries: `{"service": s, "method": m}` for one method, `{"service": s}` for every
//!   method of a service, `{}` for every method of every service; a method without a service is
//!   refused, and so is a name listed twice (in any method config).
//! - `retryThrottling.maxTokens` is an integer in (0, 1000] and `tokenRatio` a number in
//!   [0.001, 1000]: the range [`GrpcThrottle`] accepts.
//! - Unknown fields are ignored, as gRPC ignores them; keys are matched case-insensitively,
//!   as grpc-go (Go's `encoding/json`) matches them, since its own retry example writes
//!   `"MaxAttempts"`.
//!
//! Source: gRFC A6, "gRPC Retry Design",
//! <https://github.com/grpc/proposal/blob/master/A6-client-retries.md>, *Integration with
//! Service Config*.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;

use super::code::{Code, CodeSet};
use super::duration::{DurationError, parse_duration};
use crate::backoff::Backoff;
use crate::budget::GrpcThrottle;

/// gRFC A6's client-side cap on `maxAttempts` for both policies.
pub const MAX_ATTEMPTS_CAP: u32 = 5;

/// A parsed, validated service config.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServiceConfig {
    method_configs: Vec<MethodConfig>,
    throttling: Option<Throttling>,
}

/// One `methodConfig` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodConfig {
    /// The methods it applies to.
    pub names: Vec<Name>,
    /// `timeout`: the call's deadline when the caller sets none shorter.
    pub timeout: Option<Duration>,
    /// `retryPolicy` or `hedgingPolicy`, if either is set.
    pub policy: Option<Policy>,
}

/// A `name` entry: which methods a method config covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Name {
    /// `{}` (or an empty service): every method without a more specific entry.
    Default,
    /// `{"service": s}`: every method of the service.
    Service(String),
    /// `{"service": s, "method": m}`: one method.
    Method(String, String),
}

/// What a method config does with failures.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// Retry after a failure (`retryPolicy`).
    Retry(RetryConfig),
    /// Send copies without waiting for a failure (`hedgingPolicy`).
    Hedging(HedgingConfig),
}

/// `retryPolicy`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Attempts including the first, 2..=5 (after A6's clamp).
    pub max_attempts: u32,
    /// The `maxAttempts` the config asked for, before the clamp.
    pub configured_max_attempts: u64,
    /// `initialBackoff` (> 0).
    pub initial_backoff: Duration,
    /// `maxBackoff` (> 0).
    pub max_backoff: Duration,
    /// `backoffMultiplier` (finite, > 0).
    pub backoff_multiplier: f64,
    /// `retryableStatusCodes` (non-empty).
    pub retryable: CodeSet,
    /// `perAttemptRecvTimeout`: an attempt still waiting this long is cancelled (`CANCELLED`).
    pub per_attempt_recv_timeout: Option<Duration>,
}

impl RetryConfig {
    /// The backoff between its retries, gRFC A6's as revised on 2024-08-29: the n-th retry
    /// since the last pushback waits `min(initialBackoff · backoffMultiplier^(n−1), maxBackoff)
    /// · random(0.8, 1.2)`.
    pub fn backoff(&self) -> Backoff {
        Backoff::grpc(self.initial_backoff, self.max_backoff, self.backoff_multiplier)
    }
}

/// `hedgingPolicy`.
#[derive(Debug, Clone, PartialEq)]
pub struct HedgingConfig {
    /// Attempts including the first, 2..=5 (after A6's clamp).
    pub max_attempts: u32,
    /// The `maxAttempts` the config asked for, before the clamp.
    pub configured_max_attempts: u64,
    /// `hedgingDelay` between copies (default 0: all at once).
    pub hedging_delay: Duration,
    /// `nonFatalStatusCodes` (non-empty): failures after which the other copies go on.
    pub non_fatal: CodeSet,
}

/// `retryThrottling`, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttling {
    /// `maxTokens`, in (0, 1000].
    pub max_tokens: u32,
    /// `tokenRatio`, in [0.001, 1000].
    pub token_ratio: f64,
}

impl Throttling {
    /// A full token bucket with these settings.
    pub fn throttle(&self) -> GrpcThrottle {
        GrpcThrottle::new(self.max_tokens, self.token_ratio).expect("validated when parsed")
    }
}

/// The value under `key`, matched case-insensitively.
pub(crate) fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
}

impl ServiceConfig {
    /// Parses and validates a service config. See the [module docs](self) for the rules.
    pub fn from_json(text: &str) -> Result<ServiceConfig, ServiceConfigError> {
        let root: Value = serde_json::from_str(text).map_err(|e| ServiceConfigError {
            path: String::new(),
            method_config: None,
            kind: ErrorKind::Syntax { message: e.to_string(), line: e.line(), column: e.column() },
        })?;
        Self::from_value(&root)
    }

    /// Validates an already-parsed JSON value.
    pub fn from_value(root: &Value) -> Result<ServiceConfig, ServiceConfigError> {
        if !root.is_object() {
            return Err(ServiceConfigError::invalid(String::new(), None, "a JSON object"));
        }
        let throttling = get(root, "retryThrottling").map(throttling).transpose()?;
        let mut method_configs = Vec::new();
        let mut seen = HashSet::new();
        match get(root, "methodConfig") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (i, mc) in list.iter().enumerate() {
                    let parsed = method_config(i, mc)?;
                    for (j, n) in parsed.names.iter().enumerate() {
                        if !seen.insert(n.clone()) {
                            return Err(ServiceConfigError {
                                path: format!("methodConfig[{i}].name[{j}]"),
                                method_config: Some(i),
                                kind: ErrorKind::DuplicateName,
                            });
                        }
                    }
                    method_configs.push(parsed);
                }
            }
            Some(_) => {
                return Err(ServiceConfigError::invalid("methodConfig".into(), None, "a list"));
            }
        }
        Ok(ServiceConfig { method_configs, throttling })
    }

    /// The method configs, in file order.
    pub fn method_configs(&self) -> &[MethodConfig] {
        &self.method_configs
    }

    /// `retryThrottling`, if set.
    pub fn throttling(&self) -> Option<Throttling> {
        self.throttling
    }

    /// The method config for `service`/`method`: an exact `{service, method}` entry, else the
    /// service's `{service}` entry, else the `{}` default, else none (the call is sent once).
    pub fn lookup(&self, service: &str, method: &str) -> Option<&MethodConfig> {
        let find = |want: &dyn Fn(&Name) -> bool| {
            self.method_configs.iter().find(|mc| mc.names.iter().any(want))
        };
        find(&|n| matches!(n, Name::Method(s, m) if s == service && m == method))
            .or_else(|| find(&|n| matches!(n, Name::Service(s) if s == service)))
            .or_else(|| find(&|n| *n == Name::Default))
    }

    /// [`lookup`](Self::lookup) by an HTTP/2 `:path` (`/package.Service/Method`). A path not of
    /// that form matches only the default entry.
    pub fn lookup_path(&self, path: &str) -> Option<&MethodConfig> {
        let split = path.strip_prefix('/').and_then(|p| p.split_once('/'));
        match split {
            Some((service, method)) if !method.contains('/') => self.lookup(service, method),
            _ => self.lookup("", ""),
        }
    }
}

fn throttling(t: &Value) -> Result<Throttling, ServiceConfigError> {
    let bad = |field: &str, expected| {
        ServiceConfigError::invalid(format!("retryThrottling.{field}"), None, expected)
    };
    let max = get(t, "maxTokens").and_then(Value::as_u64).filter(|m| (1..=1000).contains(m));
    let max = max.ok_or_else(|| bad("maxTokens", "an integer in (0, 1000]"))? as u32;
    let ratio = get(t, "tokenRatio").and_then(Value::as_f64);
    let ratio = ratio.filter(|r| (0.001..=1000.0).contains(r));
    let ratio = ratio.ok_or_else(|| bad("tokenRatio", "a number in [0.001, 1000]"))?;
    Ok(Throttling { max_tokens: max, token_ratio: ratio })
}

fn method_config(i: usize, mc: &Value) -> Result<MethodConfig, ServiceConfigError> {
    let at = |field: &str| format!("methodConfig[{i}].{field}");
    let bad = |field: &str, expected| ServiceConfigError::invalid(at(field), Some(i), expected);
    if !mc.is_object() {
        return Err(ServiceConfigError::invalid(
            format!("methodConfig[{i}]"),
            Some(i),
            "an object",
        ));
    }
    let mut names = Vec::new();
    match get(mc, "name") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (j, n) in list.iter().enumerate() {
                names.push(name(n).ok_or_else(|| {
                    bad(
                        &format!("name[{j}]"),
                        "{\"service\": s, \"method\": m}, {\"service\": s} or {} (strings; no \
                         method without a service)",
                    )
                })?);
            }
        }
        Some(_) => return Err(bad("name", "a list")),
    }
    if names.is_empty() {
        // Valid JSON for the service config's schema, but an entry that applies to no method:
        // its policy would be silently unused.
        return Err(bad(
            "name",
            "a non-empty list: without one this entry applies to no method ([{}] is every \
             method's default)",
        ));
    }
    let timeout = match get(mc, "timeout") {
        None | Some(Value::Null) => None,
        Some(v) => Some(duration(v).ok_or_else(|| bad("timeout", "a duration such as \"1.5s\""))?),
    };
    let retry = get(mc, "retryPolicy").filter(|v| !v.is_null());
    let hedging = get(mc, "hedgingPolicy").filter(|v| !v.is_null());
    let policy = match (retry, hedging) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "hedgingPolicy",
                "absent when retryPolicy is set (only one of the two)",
            ));
        }
        (Some(p), None) => Some(Policy::Retry(retry_policy(i, p)?)),
        (None, Some(p)) => Some(Policy::Hedging(hedging_policy(i, p)?)),
        (None, None) => None,
    };
    Ok(MethodConfig { names, timeout, policy })
}

fn name(n: &Value) -> Option<Name> {
    if !n.is_object() {
        return None;
    }
    let field = |key| match get(n, key) {
        None | Some(Value::Null) => Some(""),
        Some(v) => v.as_str(),
    };
    match (field("service")?, field("method")?) {
        ("", "") => Some(Name::Default),
        ("", _) => None,
        (s, "") => Some(Name::Service(s.to_owned())),
        (s, m) => Some(Name::Method(s.to_owned(), m.to_owned())),
    }
}

fn duration(v: &Value) -> Option<Duration> {
    v.as_str().map(parse_duration).and_then(|r: Result<Duration, DurationError>| r.ok())
}

fn max_attempts(p: &Value) -> Option<(u32, u64)> {
    let n = get(p, "maxAttempts").and_then(Value::as_u64).filter(|&n| n >= 2)?;
    Some((n.min(u64::from(MAX_ATTEMPTS_CAP)) as u32, n))
}

fn codes(v: Option<&Value>) -> Option<CodeSet> {
    let list = v?.as_array()?;
    let mut set = CodeSet::EMPTY;
    for c in list {
        let code = match c {
            Value::String(s) => Code::from_name_ignore_case(s)?,
            Value::Number(n) => Code::from_i64(n.as_i64()?)?,
            _ => return None,
        };
        set = set.with(code);
    }
    (!set.is_empty()).then_some(set)
}

fn retry_policy(i: usize, p: &Value) -> Result<RetryConfig, ServiceConfigError> {
    let bad = |field: &str, expected| {
        ServiceConfigError::invalid(
            format!("methodConfig[{i}].retryPolicy.{field}"),
            Some(i),
            expected,
        )
    };
    let positive = |field: &str| {
        get(p, field)
            .and_then(duration)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| bad(field, "a duration greater than 0, such as \"0.1s\""))
    };
    let (max_attempts, configured) =
        max_attempts(p).ok_or_else(|| bad("maxAttempts", "an integer greater than 1"))?;
    let initial_backoff = positive("initialBackoff")?;
    let max_backoff = positive("maxBackoff")?;
    let backoff_multiplier = get(p, "backoffMultiplier")
        .and_then(Value::as_f64)
        .filter(|m| m.is_finite() && *m > 0.0)
        .ok_or_else(|| bad("backoffMultiplier", "a number greater than 0"))?;
    let retryable = codes(get(p, "retryableStatusCodes")).ok_or_else(|| {
        bad("retryableStatusCodes", "a non-empty list of status names (\"UNAVAILABLE\") or 0-16")
    })?;
    let per_attempt_recv_timeout = match get(p, "perAttemptRecvTimeout") {
        None | Some(Value::Null) => None,
        Some(_) => Some(positive("perAttemptRecvTimeout")?),
    };
    Ok(RetryConfig {
        max_attempts,
        configured_max_attempts: configured,
        initial_backoff,
        max_backoff,
        backoff_multiplier,
        retryable,
        per_attempt_recv_timeout,
    })
}

fn hedging_policy(i: usize, p: &Value) -> Result<HedgingConfig, ServiceConfigError> {
    let bad = |field: &str, expected| {
        ServiceConfigError::invalid(
            format!("methodConfig[{i}].hedgingPolicy.{field}"),
            Some(i),
            expected,
        )
    };
    let (max_attempts, configured) =
        max_attempts(p).ok_or_else(|| bad("maxAttempts", "an integer greater than 1"))?;
    let hedging_delay = match get(p, "hedgingDelay") {
        None | Some(Value::Null) => Duration::ZERO,
        Some(v) => duration(v)
            .ok_or_else(|| bad("hedgingDelay", "a duration of 0 or more, such as \"0.5s\""))?,
    };
    let non_fatal = codes(get(p, "nonFatalStatusCodes")).ok_or_else(|| {
        bad("nonFatalStatusCodes", "a non-empty list of status names (\"UNAVAILABLE\") or 0-16")
    })?;
    Ok(HedgingConfig {
        max_attempts,
        configured_max_attempts: configured,
        hedging_delay,
        non_fatal,
    })
}

mod error;
#[cfg(test)]
mod tests;

pub use error::{ErrorKind, ServiceConfigError};
