//! Importers: the retry settings people already have (Istio, Envoy, gRPC, AWS) as retry layers.
//!
//! Each importer reads one file and returns the [`RetryLayer`]s it implies for one call,
//! including the defaults that apply when the file says nothing — those are marked
//! [`RetryLayer::implicit`]. Defaults and their sources:
//!
//! | tool | default | source |
//! |---|---|---|
//! | Istio | 2 retries (3 attempts) when a route has no `retries`; `attempts: 0` disables | Istio `HTTPRetry` reference; `pilot` retry defaults |
//! | Envoy | `num_retries` 1 when a `retry_policy` exists | Envoy `config.route.v3.RetryPolicy` |
//! | Envoy | `retry_budget`: 20 %, `min_retry_concurrency` 3 | Envoy `CircuitBreakers.Thresholds.RetryBudget` |
//! | gRPC | `maxAttempts` capped at 5; transparent retries always on | gRFC A6 |
//! | AWS SDK | `standard` mode, 3 attempts, retry quota | AWS SDKs and Tools Reference Guide, "Retry behavior" |
//!
//! Unknown fields: each format is read the way its tool reads it — see each module.

use std::path::Path;
use std::time::Duration;

use crate::error::Error;
use crate::model::RetryLayer;

pub mod aws;
pub mod envoy;
pub mod grpc;
pub mod istio;

/// Which tool's format an imported file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// Istio `VirtualService` YAML (multi-document).
    Istio,
    /// Envoy route configuration or bootstrap, YAML or JSON.
    Envoy,
    /// gRPC service config JSON.
    Grpc,
    /// AWS shared config file (`~/.aws/config`).
    Aws,
}

impl Format {
    /// Parses `istio`, `envoy`, `grpc` or `aws`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "istio" => Some(Format::Istio),
            "envoy" => Some(Format::Envoy),
            "grpc" => Some(Format::Grpc),
            "aws" => Some(Format::Aws),
            _ => None,
        }
    }
}

/// Which part of an imported file applies to the hop. Every field is optional; when a file holds
/// several candidates and none is named, the importer takes the worst (most attempts), because
/// an audit that guesses should guess high.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Select {
    /// Istio: `metadata.name` of the VirtualService. Envoy: a virtual host's name.
    pub name: Option<String>,
    /// Istio: an http route's `name`. Envoy: a route's `name`.
    pub route: Option<String>,
    /// gRPC: the service (`package.Service`).
    pub service: Option<String>,
    /// gRPC: the method.
    pub method: Option<String>,
    /// AWS: the profile (default `default`).
    pub profile: Option<String>,
}

/// Reads `path` in `format` and returns the layers it implies for the selected call.
pub fn load(format: Format, path: &Path, select: &Select) -> Result<Vec<RetryLayer>, Error> {
    let text = crate::error::read(path)?;
    match format {
        Format::Istio => istio::parse(path, &text, select),
        Format::Envoy => envoy::parse(path, &text, select),
        Format::Grpc => grpc::parse(path, &text, select),
        Format::Aws => aws::parse(path, &text, select),
    }
}

/// The longest timeout an imported layer holds: 10 years (of 365 days). [`parse_duration`]
/// refuses longer ones; a gRPC service config may legally say up to 10,000 years (the
/// `google.protobuf.Duration` range), which the gRPC importer clamps to this, since any such
/// timeout outlasts every run the audit reasons about.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(315_360_000);

/// Parses a duration as Go (`1h2m3.5s`, `250ms`) and protobuf JSON (`0.25s`) write them.
/// Returns `None` for anything else, including negative or absurd (> [`MAX_TIMEOUT`]) values.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    (total.is_finite() && total <= MAX_TIMEOUT.as_secs_f64())
        .then(|| Duration::from_secs_f64(total))
}

/// `file:line` for locations in findings.
pub(crate) fn loc(path: &Path, line: usize) -> String {
    format!("{}:{line}", path.display())
}

/// The 1-based number of the first line at or after `from` (1-based) containing `needle`.
pub(crate) fn line_of(text: &str, from: usize, needle: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
}

/// Splits a YAML stream into documents at `---` lines: `(first line, text)` pairs, so each
/// document can be parsed alone and its errors and locations reported with the stream's line
/// numbers.
pub(crate) fn yaml_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = vec![(1usize, String::new())];
    for (i, line) in text.lines().enumerate() {
        let is_marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if is_marker {
            // Content after the marker on the same line belongs to the new document, whose
            // first text line is the marker's line.
            let after = line.get(4..).unwrap_or("");
            docs.push((i + 1, format!("{after}\n")));
        } else if let Some(last) = docs.last_mut() {
            last.1.push_str(line);
            last.1.push('\n');
        }
    }
    docs.retain(|(_, d)| {
        d.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    });
    docs
}

/// A YAML parse error as an [`Error`], with the line shifted to the stream's numbering.
pub(crate) fn yaml_error(path: &Path, first_line: usize, e: &serde_norway::Error) -> Error {
    let line = e.location().map(|l| l.line() + first_line - 1);
    Error::new(path, line, crate::error::ErrorKind::Syntax(strip_position(&e.to_string())))
}

/// Drops a parser's trailing "at line X column Y", since the error reports the line itself.
fn strip_position(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_go_and_protobuf_forms() {
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("0.25s"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration(".01s"), Some(Duration::from_millis(10)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("100ms"), Some(Duration::from_millis(100)));
        for bad in ["", "s", "2", "2x", "-1s", "1e9999s", "99999999999h"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn documents_keep_their_line_numbers() {
        let docs = yaml_documents("a: 1\n---\nb: 2\n\n--- \n# only a comment\n---\nc: 3\n");
        let firsts: Vec<usize> = docs.iter().map(|d| d.0).collect();
        assert_eq!(firsts, vec![1, 2, 7]);
        assert_eq!(line_of("x\ny\nretries:\n", 1, "retries"), Some(3));
    }
}
