//! The call-graph file (TOML): its schema, its validation, and resolving its imports.
//!
//! ```toml
//! [services.mobile]
//! entry = true            # traffic enters here (default: services nobody calls)
//! rps = 2000              # normal request rate entering here
//!
//! [services.database]
//! capacity_rps = 6000     # warm
//! cold_capacity_rps = 1200
//! p50_ms = 4
//! p99_ms = 40
//!
//! [[calls]]
//! from = "orders"
//! to = "database"
//! method = "GET"          # or `idempotent = true|false` (default true)
//! idempotency_key = false # a key reused across attempts makes retried writes safe
//! timeout_ms = 800        # the caller's overall timeout for this call
//! deadline_propagated = true  # default false: the audit assumes what it is not told
//! mesh = "istio"          # the call goes through an Istio sidecar (its default retries apply)
//! breaker = { half_open_max = 1 }
//!
//! [[calls.retries]]       # one table per place that retries, in any order
//! place = "app"           # app | sdk | rpc | mesh | proxy
//! attempts = 3            # including the first, in [1, 10] (seawall::policy::MAX_ATTEMPTS)
//! jitter = true           # default false for app code: unknown means unjittered
//! per_try_timeout_ms = 250
//! timeout_ms = 800
//! retry_on_4xx = false
//! budget = { kind = "ratio", ratio = 0.1 }   # or grpc / envoy / aws, see below
//!
//! [[calls.import]]        # settings from files people already have
//! format = "istio"        # istio | envoy | grpc | aws
//! file = "istio/orders.yaml"   # relative to this file
//! name = "orders"         # optional selectors: name, route, service, method, profile
//! ```
//!
//! Budgets: `{ kind = "ratio", ratio = 0.1 }`, `{ kind = "grpc", max_tokens = 10, token_ratio =
//! 0.1 }`, `{ kind = "envoy", percent = 20, min_concurrency = 3 }`, `{ kind = "aws" }`.
//!
//! Unknown keys are **rejected** (with their line): this is seawall's own format, and a typo
//! such as `atempts` must not silently audit as "no retries".

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::error::{Error, ErrorKind, read};
use crate::import::{self, Format, Select};
use crate::model::{BreakerSpec, Budget, Graph, Hop, Place, RetryLayer, Service};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    services: std::collections::BTreeMap<String, Spanned<ServiceToml>>,
    #[serde(default)]
    calls: Vec<Spanned<CallToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceToml {
    #[serde(default)]
    entry: bool,
    rps: Option<f64>,
    capacity_rps: Option<f64>,
    cold_capacity_rps: Option<f64>,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallToml {
    from: String,
    to: String,
    method: Option<String>,
    idempotent: Option<bool>,
    #[serde(default)]
    idempotency_key: bool,
    timeout_ms: Option<f64>,
    #[serde(default)]
    deadline_propagated: bool,
    mesh: Option<String>,
    breaker: Option<BreakerToml>,
    #[serde(default)]
    retries: Vec<Spanned<LayerToml>>,
    #[serde(default)]
    import: Vec<Spanned<ImportToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BreakerToml {
    half_open_max: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayerToml {
    place: String,
    attempts: i64,
    jitter: Option<bool>,
    per_try_timeout_ms: Option<f64>,
    timeout_ms: Option<f64>,
    #[serde(default)]
    retry_on_4xx: bool,
    budget: Option<BudgetToml>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum BudgetToml {
    Ratio { ratio: f64 },
    Grpc { max_tokens: u32, token_ratio: f64 },
    Envoy { percent: Option<f64>, min_concurrency: Option<u32> },
    Aws {},
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportToml {
    format: String,
    file: String,
    name: Option<String>,
    route: Option<String>,
    service: Option<String>,
    method: Option<String>,
    profile: Option<String>,
}

/// Reads a call-graph file and every file it imports into a [`Graph`].
pub fn load(path: &Path) -> Result<Graph, Error> {
    let text = read(path)?;
    parse(path, &text)
}

/// Parses call-graph TOML read from `path` (imports resolve relative to its directory).
pub fn parse(path: &Path, text: &str) -> Result<Graph, Error> {
    // Byte-based, so a span that is not on a char boundary can never panic.
    let line_at = |offset: usize| {
        text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
    };
    let file: FileToml = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_at(s.start));
        Error::new(path, line, ErrorKind::Syntax(e.message().trim().to_string()))
    })?;
    let here = |s: &std::ops::Range<usize>| format!("{}:{}", path.display(), line_at(s.start));
    let mut graph = Graph::default();
    let mut services: Vec<_> = file.services.into_iter().collect();
    services.sort_by_key(|(_, s)| s.span().start);
    for (name, s) in services {
        let line = Some(line_at(s.span().start));
        let span = s.span();
        let s = s.into_inner();
        let num = |field: &str, v: Option<f64>| {
            nonneg(path, line, &format!("services.{name}.{field}"), v)
        };
        graph.services.push(Service {
            entry: s.entry,
            rps: num("rps", s.rps)?,
            capacity_rps: num("capacity_rps", s.capacity_rps)?,
            cold_capacity_rps: num("cold_capacity_rps", s.cold_capacity_rps)?,
            p50: num("p50_ms", s.p50_ms)?.map(ms),
            p99: num("p99_ms", s.p99_ms)?.map(ms),
            location: here(&span),
            name,
        });
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    for (i, c) in file.calls.into_iter().enumerate() {
        let line = Some(line_at(c.span().start));
        let location = here(&c.span());
        let c = c.into_inner();
        for end in [&c.from, &c.to] {
            if graph.service(end).is_none() {
                return Err(Error::not_found(
                    path,
                    line,
                    format!("service \"{end}\" (declare it under [services.{end}])"),
                ));
            }
        }
        if c.from == c.to {
            return Err(Error::invalid(
                path,
                line,
                format!("calls[{i}]"),
                "a call between two different services",
            ));
        }
        let idempotent = c.idempotent.unwrap_or_else(|| {
            c.method
                .as_deref()
                .is_none_or(|m| seawall::classify::is_idempotent_method(&m.to_ascii_uppercase()))
        });
        let mut layers = Vec::new();
        for (j, l) in c.retries.into_iter().enumerate() {
            let lline = Some(line_at(l.span().start));
            layers.push(layer(
                path,
                lline,
                &format!("calls[{i}].retries[{j}]"),
                here(&l.span()),
                l.into_inner(),
            )?);
        }
        let mut istio_imported = false;
        for imp in c.import {
            let iline = Some(line_at(imp.span().start));
            let imp = imp.into_inner();
            let format = Format::parse(&imp.format).ok_or_else(|| {
                Error::invalid(path, iline, "import.format", "istio, envoy, grpc or aws")
            })?;
            istio_imported |= format == Format::Istio;
            let select = Select {
                name: imp.name,
                route: imp.route,
                service: imp.service,
                method: imp.method,
                profile: imp.profile,
            };
            layers.extend(import::load(format, &dir.join(&imp.file), &select)?);
        }
        match c.mesh.as_deref() {
            None => {}
            Some("istio") if !istio_imported => {
                let mut l = RetryLayer::new(
                    Place::Mesh,
                    import::istio::DEFAULT_RETRIES + 1,
                    location.clone(),
                );
                l.implicit = true;
                l.jitter = true;
                l.note = Some(
                    "Istio default: 2 retries (no VirtualService imported for this call)".into(),
                );
                layers.push(l);
            }
            Some("istio") => {}
            Some(_) => return Err(Error::invalid(path, line, "mesh", "\"istio\"")),
        }
        layers.sort_by_key(|l| l.place as u8);
        let timeout = nonneg(path, line, "timeout_ms", c.timeout_ms)?.map(ms);
        graph.hops.push(Hop {
            from: c.from,
            to: c.to,
            idempotent,
            idempotency_key: c.idempotency_key,
            timeout,
            deadline_propagated: c.deadline_propagated,
            breaker: c
                .breaker
                .map(|b| BreakerSpec { half_open_max: b.half_open_max.filter(|&n| n > 0) }),
            layers,
            location,
        });
    }
    Ok(graph)
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1000.0)
}

fn nonneg(
    path: &Path,
    line: Option<usize>,
    what: &str,
    v: Option<f64>,
) -> Result<Option<f64>, Error> {
    match v {
        Some(x) if !(x.is_finite() && (0.0..=1e12).contains(&x)) => {
            Err(Error::invalid(path, line, what, "a finite number ≥ 0"))
        }
        _ => Ok(v),
    }
}

fn layer(
    path: &Path,
    line: Option<usize>,
    what: &str,
    source: String,
    l: LayerToml,
) -> Result<RetryLayer, Error> {
    let place = match l.place.as_str() {
        "app" => Place::App,
        "sdk" => Place::Sdk,
        "rpc" => Place::Rpc,
        "mesh" => Place::Mesh,
        "proxy" => Place::Proxy,
        _ => {
            return Err(Error::invalid(
                path,
                line,
                format!("{what}.place"),
                "app, sdk, rpc, mesh or proxy",
            ));
        }
    };
    let max = seawall::policy::MAX_ATTEMPTS;
    let attempts =
        u32::try_from(l.attempts).ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
            Error::invalid(
                path,
                line,
                format!("{what}.attempts"),
                format!("an integer in [1, {max}] (first attempt included)"),
            )
        })?;
    let mut out = RetryLayer::new(place, attempts, source);
    out.jitter = l.jitter.unwrap_or(false);
    out.retries_4xx = l.retry_on_4xx;
    out.per_try_timeout =
        nonneg(path, line, &format!("{what}.per_try_timeout_ms"), l.per_try_timeout_ms)?.map(ms);
    out.timeout = nonneg(path, line, &format!("{what}.timeout_ms"), l.timeout_ms)?.map(ms);
    let bad = |field: &str, expected: &str| {
        Error::invalid(path, line, format!("{what}.budget.{field}"), expected)
    };
    out.budget = match l.budget {
        None => None,
        Some(BudgetToml::Ratio { ratio }) if ratio.is_finite() && (0.0..=1.0).contains(&ratio) => {
            Some(Budget::Ratio { ratio })
        }
        Some(BudgetToml::Ratio { .. }) => return Err(bad("ratio", "a number in [0, 1]")),
        Some(BudgetToml::Grpc { max_tokens, token_ratio }) => {
            seawall::budget::GrpcThrottle::new(max_tokens, token_ratio)
                .map_err(|e| bad(e.field().trim_start_matches("budget."), e.allowed()))?;
            Some(Budget::GrpcThrottle { max_tokens: f64::from(max_tokens), token_ratio })
        }
        Some(BudgetToml::Envoy { percent, min_concurrency }) => {
            let percent = percent.unwrap_or(20.0);
            if !(percent.is_finite() && (0.0..=100.0).contains(&percent)) {
                return Err(bad("percent", "a number in [0, 100]"));
            }
            Some(Budget::Envoy { percent, min_concurrency: min_concurrency.unwrap_or(3) })
        }
        Some(BudgetToml::Aws {}) => Some(Budget::AwsQuota),
    };
    Ok(out)
}
