//! A Prometheus server as a source: its HTTP API (`/api/v1/query`, `/api/v1/query_range`).
//!
//! # Why through Prometheus and not only by scraping
//!
//! A team in the middle of a storm has a Prometheus full of the metrics its stack already
//! exports, and yesterday's incident is in it too. Asking that server — instant queries each
//! interval while watching, one range query per signal to replay a past window — works on
//! whatever names the stack exports ([`crate::dialect`]) and needs no access to the pods.
//!
//! The server is untrusted input like any other: every request has a timeout, every answer a
//! size cap ([`MAX_BYTES`]), and the JSON is read strictly ([`json`]). An HTML page, an error
//! body, a bad query and an empty match each give their own [`ApiError`].

pub mod json;
pub mod source;
pub mod time;

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub use json::{Answer, Series};

/// Largest answer accepted, in bytes. A `sum(rate(…))` over a day at 1 s steps is ~3 MB.
pub const MAX_BYTES: usize = 16 << 20;

/// Why a query could not be answered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApiError {
    /// The URL is not an `http://host:port[/prefix]` URL.
    InvalidUrl(String),
    /// Connecting, sending or reading failed, or timed out (the server is unreachable).
    Unreachable(String),
    /// The answer is not JSON (an HTML page, an empty body, …).
    NotJson(String),
    /// The answer is JSON but not the API's shape.
    Malformed(String),
    /// Prometheus answered `status: error` (a bad query, a timeout on its side, …).
    Prometheus {
        /// `errorType`, e.g. `bad_data`, `timeout`, `execution`.
        error_type: String,
        /// Prometheus's message.
        error: String,
    },
    /// A non-200 status without an API error body.
    Status(u16),
    /// The answer is larger than [`MAX_BYTES`] or holds too many series or points.
    TooLarge(String),
    /// The async runtime could not be started.
    Runtime(String),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::InvalidUrl(m) => write!(f, "invalid Prometheus URL: {m}"),
            ApiError::Unreachable(m) => write!(f, "Prometheus unreachable: {m}"),
            ApiError::NotJson(m) | ApiError::Malformed(m) => write!(f, "{m}"),
            ApiError::Prometheus { error_type, error } => {
                write!(f, "Prometheus refused the query ({error_type}): {error}")
            }
            ApiError::Status(s) => write!(f, "Prometheus answered HTTP {s} without an error body"),
            ApiError::TooLarge(m) => write!(f, "Prometheus's answer is too large: {m}"),
            ApiError::Runtime(m) => write!(f, "cannot start the runtime: {m}"),
        }
    }
}

impl std::error::Error for ApiError {}

/// A blocking client of one Prometheus server (it owns a small current-thread runtime).
#[derive(Debug)]
pub struct PromApi {
    rt: tokio::runtime::Runtime,
    http: Client<HttpConnector, Empty<Bytes>>,
    base: String,
    timeout: Duration,
}

impl PromApi {
    /// A client of the server at `url` (`http://host:9090`, or with a path prefix such as
    /// `http://host/prometheus`); `timeout` bounds each request, connection included.
    pub fn new(url: &str, timeout: Duration) -> Result<PromApi, ApiError> {
        let uri: http::Uri = url.parse().map_err(|_| ApiError::InvalidUrl(format!("{url:?}")))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() || uri.query().is_some() {
            return Err(ApiError::InvalidUrl(format!(
                "{url:?}: expected http://HOST:PORT[/PREFIX] (https is not supported)"
            )));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ApiError::Runtime(e.to_string()))?;
        let http = {
            let _guard = rt.enter();
            Client::builder(TokioExecutor::new()).build(HttpConnector::new())
        };
        Ok(PromApi { rt, http, base: url.trim_end_matches('/').to_string(), timeout })
    }

    /// The server's URL, as given (without a trailing slash).
    pub fn url(&self) -> &str {
        &self.base
    }

    /// An instant query evaluated at `time` (unix seconds).
    pub fn instant(&self, query: &str, time: f64) -> Result<Answer, ApiError> {
        let params = [("query", query.to_string()), ("time", format!("{time:.3}"))];
        self.get("/api/v1/query", &params, false)
    }

    /// A range query from `start` to `end` (unix seconds) every `step` seconds.
    pub fn range(&self, query: &str, start: f64, end: f64, step: f64) -> Result<Answer, ApiError> {
        let params = [
            ("query", query.to_string()),
            ("start", format!("{start:.3}")),
            ("end", format!("{end:.3}")),
            ("step", format!("{step}")),
        ];
        self.get("/api/v1/query_range", &params, true)
    }

    /// The longest `scrape_interval` in the server's configuration (`/api/v1/status/config`),
    /// in seconds: what a rate window must span several of. `Ok(None)` when the configuration
    /// names none (Prometheus's default, 1 m, then applies).
    pub fn scrape_interval(&self) -> Result<Option<f64>, ApiError> {
        let (status, text) = self.fetch("/api/v1/status/config", &[])?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ApiError::NotJson(format!("HTTP {status}: {e}")))?;
        let yaml = v.pointer("/data/yaml").and_then(|y| y.as_str()).ok_or_else(|| {
            ApiError::NotJson(format!("HTTP {status}: no data.yaml in the config answer"))
        })?;
        Ok(max_scrape_interval(yaml))
    }

    fn get(&self, path: &str, params: &[(&str, String)], matrix: bool) -> Result<Answer, ApiError> {
        let (status, text) = self.fetch(path, params)?;
        // Prometheus sends its error bodies with 400 (bad_data), 422 (execution) and 503
        // (timeout, unavailable): read the body first, the status only when it is not the API's.
        match json::parse_answer(&text, matrix) {
            Ok(a) if status == 200 => Ok(a),
            Ok(_) => Err(ApiError::Status(status)),
            Err(e @ ApiError::Prometheus { .. }) => Err(e),
            Err(ApiError::NotJson(m)) if status != 200 => {
                Err(ApiError::NotJson(format!("HTTP {status}: {m}")))
            }
            Err(_) if status != 200 => Err(ApiError::Status(status)),
            Err(e) => Err(e),
        }
    }

    fn fetch(&self, path: &str, params: &[(&str, String)]) -> Result<(u16, String), ApiError> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let url = format!("{}{path}?{query}", self.base);
        let uri: http::Uri = url.parse().map_err(|_| ApiError::InvalidUrl(self.base.clone()))?;
        let (status, body) = self.rt.block_on(async {
            let call = async {
                let resp =
                    self.http.get(uri).await.map_err(|e| {
                        ApiError::Unreachable(format!("{}: {}", self.base, chain(&e)))
                    })?;
                let status = resp.status().as_u16();
                let body =
                    Limited::new(resp.into_body(), MAX_BYTES).collect().await.map_err(|e| {
                        if e.is::<http_body_util::LengthLimitError>() {
                            ApiError::TooLarge(format!("more than {MAX_BYTES} bytes"))
                        } else {
                            ApiError::Unreachable(format!("{}: reading the answer: {e}", self.base))
                        }
                    })?;
                Ok::<_, ApiError>((status, body.to_bytes()))
            };
            tokio::time::timeout(self.timeout, call).await.map_err(|_| {
                ApiError::Unreachable(format!("{}: no answer within {:?}", self.base, self.timeout))
            })?
        })?;
        let text = String::from_utf8(body.to_vec())
            .map_err(|_| ApiError::NotJson("the answer is not UTF-8".into()))?;
        Ok((status, text))
    }
}

/// The longest `scrape_interval:` value in a Prometheus configuration's YAML (global or per
/// job), in seconds. A line scan, not a YAML parser: the server writes its configuration back
/// in its own canonical form, one `key: value` a line, durations such as `15s` or `1m30s`.
///
/// ```
/// use seawall_detect::prometheus::max_scrape_interval;
/// let yaml = "global:\n  scrape_interval: 15s\nscrape_configs:\n- job_name: a\n  scrape_interval: 1m30s\n";
/// assert_eq!(max_scrape_interval(yaml), Some(90.0));
/// assert_eq!(max_scrape_interval("global: {}\n"), None);
/// ```
pub fn max_scrape_interval(yaml: &str) -> Option<f64> {
    yaml.lines()
        .filter_map(|l| l.trim().strip_prefix("scrape_interval:"))
        .filter_map(|v| prom_duration(v.trim().trim_matches(|c| c == '"' || c == '\'')))
        .reduce(f64::max)
}

/// A Prometheus duration (`1h30m`, `15s`, `500ms`: units y w d h m s ms, largest first), in
/// seconds; `None` when malformed or zero.
fn prom_duration(s: &str) -> Option<f64> {
    const UNITS: [(&str, f64); 7] = [
        ("ms", 0.001),
        ("y", 365.0 * 86_400.0),
        ("w", 7.0 * 86_400.0),
        ("d", 86_400.0),
        ("h", 3600.0),
        ("m", 60.0),
        ("s", 1.0),
    ];
    let mut rest = s;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, secs) = UNITS.iter().find(|(u, _)| rest.starts_with(u))?;
        total += n as f64 * secs;
        rest = &rest[unit.len()..];
    }
    (total > 0.0 && total.is_finite()).then_some(total)
}

/// An error with its sources (hyper's top-level message alone is "client error (Connect)").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_durations() {
        assert_eq!(prom_duration("1m30s"), Some(90.0));
        assert_eq!(prom_duration("500ms"), Some(0.5));
        assert_eq!(prom_duration("1h"), Some(3600.0));
        for bad in ["", "0s", "1", "s", "1.5s", "1x", "-1s", " 1s"] {
            assert_eq!(prom_duration(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_config_text_is_read_without_panic(yaml in "(\\PC{0,30}\n){0,8}") {
            let _ = max_scrape_interval(&yaml);
        }

        #[test]
        fn composed_durations_add_up(h in 0u64..48, m in 0u64..60, s in 1u64..60) {
            let text = format!("{h}h{m}m{s}s");
            proptest::prop_assert_eq!(prom_duration(&text), Some((h * 3600 + m * 60 + s) as f64));
        }
    }
}
