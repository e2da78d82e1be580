//! A retry storm in traces: the staircase, the resend count, and work nobody used.
//!
//! In a distributed trace a storm is a staircase: one parent span with several child spans to
//! the same dependency, each ending at the caller's timeout (or failing fast, one after the
//! other). OpenTelemetry's HTTP conventions put `http.request.resend_count` on each repeated
//! attempt. On the server side, a span that ends after its caller's span ended is work nobody
//! used. This module reads spans from what OpenTelemetry and Jaeger write —
//!
//! - OTLP JSON ([`parse_otlp_json`]): an `ExportTraceServiceRequest` per line, as the
//!   OpenTelemetry Collector's file exporter writes it, or one such object; the OTLP/HTTP body
//!   of `Content-Type: application/json`;
//! - OTLP protobuf ([`parse_otlp_protobuf`]): the OTLP/HTTP body of
//!   `Content-Type: application/x-protobuf`;
//! - Jaeger's JSON ([`parse_jaeger_json`]): the `{"data": [trace…]}` its UI and query API
//!   export —
//!
//! and [`Analysis::of`] turns them into the per-interval [`Sample`](crate::Sample)s the
//! classifier judges (edge calls from root server spans, goodput from those that did not fail,
//! attempts from client spans to the dependency) beside the signals only traces carry
//! ([`TraceSignals`]). Decoding uses OpenTelemetry's own generated types
//! (`opentelemetry-proto`) and their JSON mapping (hex ids, 64-bit integers as strings).
//!
//! # Bounds
//!
//! Spans are untrusted input: a body or file larger than [`Limits::max_bytes`] or holding more
//! than [`Limits::max_spans`] spans is refused with [`TraceError`] before any span is kept; ids
//! of the wrong length, end times before start times and timestamps more than a day apart from
//! the first span's are dropped and counted ([`Parsed::dropped`]).

use std::collections::HashMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde::{Deserialize, Serialize};

mod analysis;
pub mod receiver;
#[cfg(test)]
mod tests;

#[cfg(test)]
use analysis::same_duration as analysis_same_duration;
pub use analysis::{Analysis, Interval, Staircase, TraceSignals};

/// What one span says, in the terms the analysis needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The trace's id.
    pub trace: u128,
    /// The span's id.
    pub id: u64,
    /// The parent span's id (`None` for a root).
    pub parent: Option<u64>,
    /// The service that recorded it (`service.name`; `unknown` without one).
    pub service: String,
    /// The span's name.
    pub name: String,
    /// Server, client or other.
    pub kind: Kind,
    /// Start, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// End, nanoseconds since the Unix epoch (≥ `start_ns`).
    pub end_ns: u64,
    /// The span failed: status `ERROR`, an `error` tag, or an HTTP status ≥ 500.
    pub error: bool,
    /// `http.request.resend_count` (OpenTelemetry's HTTP conventions): how many times this
    /// request was sent before (1 on the first retry).
    pub resend_count: Option<u32>,
    /// Which dependency a client span calls: `server.address[:server.port]`, else
    /// `net.peer.name[:net.peer.port]`, else the host of `url.full` / `http.url`, else
    /// `rpc.service`, else the span's name.
    pub peer: Option<String>,
}

impl Span {
    /// Duration, seconds.
    pub fn duration_s(&self) -> f64 {
        (self.end_ns - self.start_ns) as f64 / 1e9
    }
}

/// A span's kind, as far as the analysis cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Handles a request (OTLP `SPAN_KIND_SERVER`, Jaeger `span.kind=server`).
    Server,
    /// Sends a request (OTLP `SPAN_KIND_CLIENT`, Jaeger `span.kind=client`).
    Client,
    /// Anything else (internal, producer, consumer, unspecified).
    Other,
}

/// How much one body or file may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes (default 16 MiB for a request body; `seawall detect --traces` allows 1 GiB for a
    /// file).
    pub max_bytes: usize,
    /// Spans (default 100,000 per body).
    pub max_spans: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bytes: 16 << 20, max_spans: 100_000 }
    }
}

/// Why spans could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceError {
    /// More bytes than [`Limits::max_bytes`].
    TooLarge {
        /// What arrived (or was declared).
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// More spans than [`Limits::max_spans`].
    TooManySpans {
        /// The limit.
        limit: usize,
    },
    /// Not OTLP JSON / Jaeger JSON: the parser's message, with the line when it is known.
    Json(String),
    /// Not an OTLP protobuf `ExportTraceServiceRequest`.
    Protobuf(String),
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceError::TooLarge { bytes, limit } => {
                write!(f, "{bytes} bytes of spans, more than the limit of {limit}")
            }
            TraceError::TooManySpans { limit } => write!(f, "more than {limit} spans in one body"),
            TraceError::Json(m) => write!(f, "not OTLP JSON or Jaeger JSON: {m}"),
            TraceError::Protobuf(m) => write!(f, "not an OTLP ExportTraceServiceRequest: {m}"),
        }
    }
}

impl std::error::Error for TraceError {}

/// Spans read from one body or file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// The spans kept.
    pub spans: Vec<Span>,
    /// Spans dropped as malformed (bad ids, end before start, absurd times).
    pub dropped: usize,
}

fn check_size(bytes: &[u8], limits: Limits) -> Result<(), TraceError> {
    if bytes.len() > limits.max_bytes {
        return Err(TraceError::TooLarge { bytes: bytes.len(), limit: limits.max_bytes });
    }
    Ok(())
}

/// Reads OTLP JSON: one `ExportTraceServiceRequest` object, or one per line (the Collector's
/// file exporter).
pub fn parse_otlp_json(bytes: &[u8], limits: Limits) -> Result<Parsed, TraceError> {
    check_size(bytes, limits)?;
    let text = std::str::from_utf8(bytes).map_err(|e| TraceError::Json(e.to_string()))?;
    let mut out = Parsed::default();
    let whole = serde_json::from_str::<ExportTraceServiceRequest>(text);
    match whole {
        Ok(req) => add_request(&mut out, req, limits)?,
        Err(first) => {
            let mut any = false;
            for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                let req: ExportTraceServiceRequest = serde_json::from_str(line).map_err(|e| {
                    if any {
                        TraceError::Json(format!("line {}: {e}", n + 1))
                    } else {
                        TraceError::Json(first.to_string())
                    }
                })?;
                any = true;
                add_request(&mut out, req, limits)?;
            }
        }
    }
    Ok(out)
}

/// Reads an OTLP protobuf `ExportTraceServiceRequest` (an OTLP/HTTP body).
pub fn parse_otlp_protobuf(bytes: &[u8], limits: Limits) -> Result<Parsed, TraceError> {
    check_size(bytes, limits)?;
    let req = ExportTraceServiceRequest::decode(bytes)
        .map_err(|e| TraceError::Protobuf(e.to_string()))?;
    let mut out = Parsed::default();
    add_request(&mut out, req, limits)?;
    Ok(out)
}

/// Decodes one OTLP/HTTP body (protobuf, or JSON when `json`) to the request itself, within
/// `limits`' bytes.
pub(crate) fn decode_request(
    bytes: &[u8],
    json: bool,
    limits: Limits,
) -> Result<ExportTraceServiceRequest, TraceError> {
    check_size(bytes, limits)?;
    if json {
        serde_json::from_slice(bytes).map_err(|e| TraceError::Json(e.to_string()))
    } else {
        ExportTraceServiceRequest::decode(bytes).map_err(|e| TraceError::Protobuf(e.to_string()))
    }
}

/// The spans of one decoded request.
pub(crate) fn request_spans(
    req: ExportTraceServiceRequest,
    limits: Limits,
) -> Result<Parsed, TraceError> {
    let mut out = Parsed::default();
    add_request(&mut out, req, limits)?;
    Ok(out)
}

fn add_request(
    out: &mut Parsed,
    req: ExportTraceServiceRequest,
    limits: Limits,
) -> Result<(), TraceError> {
    let n: usize =
        req.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
    if out.spans.len() + n > limits.max_spans {
        return Err(TraceError::TooManySpans { limit: limits.max_spans });
    }
    for rs in req.resource_spans {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| attr(&r.attributes, "service.name"))
            .and_then(as_string)
            .unwrap_or_else(|| "unknown".into());
        for ss in rs.scope_spans {
            for s in ss.spans {
                let ids = (id128(&s.trace_id), id64(&s.span_id));
                let parent = if s.parent_span_id.is_empty() {
                    Some(None)
                } else {
                    id64(&s.parent_span_id).map(Some)
                };
                let (Some(trace), Some(id)) = ids else {
                    out.dropped += 1;
                    continue;
                };
                let (Some(parent), true) = (parent, s.end_time_unix_nano >= s.start_time_unix_nano)
                else {
                    out.dropped += 1;
                    continue;
                };
                let kind = match s.kind {
                    2 => Kind::Server,
                    3 => Kind::Client,
                    _ => Kind::Other,
                };
                let http_status = ["http.response.status_code", "http.status_code"]
                    .iter()
                    .find_map(|k| attr(&s.attributes, k).and_then(as_int));
                let error = s.status.as_ref().is_some_and(|st| st.code == 2)
                    || http_status.is_some_and(|c| c >= 500);
                let resend_count = attr(&s.attributes, "http.request.resend_count")
                    .and_then(as_int)
                    .and_then(|n| u32::try_from(n).ok());
                let peer = peer_of(|k| attr(&s.attributes, k).and_then(as_string), kind, &s.name);
                out.spans.push(Span {
                    trace,
                    id,
                    parent,
                    service: service.clone(),
                    name: clip(&s.name),
                    kind,
                    start_ns: s.start_time_unix_nano,
                    end_ns: s.end_time_unix_nano,
                    error,
                    resend_count,
                    peer,
                });
            }
        }
    }
    drop_absurd(out);
    Ok(())
}

/// Spans more than a day from the first kept span are clock garbage, not a storm.
fn drop_absurd(out: &mut Parsed) {
    const DAY_NS: u64 = 86_400 * 1_000_000_000;
    let Some(first) = out.spans.first().map(|s| s.start_ns) else { return };
    let before = out.spans.len();
    out.spans.retain(|s| s.start_ns.abs_diff(first) <= DAY_NS && s.end_ns - s.start_ns <= DAY_NS);
    out.dropped += before - out.spans.len();
}

fn clip(s: &str) -> String {
    s.chars().take(200).map(|c| if c.is_control() { ' ' } else { c }).collect()
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref())
}

fn as_string(v: &AnyValue) -> Option<String> {
    match v.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(clip(s)),
        any_value::Value::IntValue(n) => Some(n.to_string()),
        _ => None,
    }
}

fn as_int(v: &AnyValue) -> Option<i64> {
    match v.value.as_ref()? {
        any_value::Value::IntValue(n) => Some(*n),
        any_value::Value::StringValue(s) => s.parse().ok(),
        any_value::Value::DoubleValue(d) if d.is_finite() => Some(*d as i64),
        _ => None,
    }
}

fn id128(b: &[u8]) -> Option<u128> {
    let a: [u8; 16] = b.try_into().ok()?;
    Some(u128::from_be_bytes(a)).filter(|v| *v != 0)
}

fn id64(b: &[u8]) -> Option<u64> {
    let a: [u8; 8] = b.try_into().ok()?;
    Some(u64::from_be_bytes(a)).filter(|v| *v != 0)
}

/// The dependency a client span calls (see [`Span::peer`]).
fn peer_of(get: impl Fn(&str) -> Option<String>, kind: Kind, name: &str) -> Option<String> {
    if kind != Kind::Client {
        return None;
    }
    let with_port = |host: &str, port: &str| match get(port) {
        Some(p) => format!("{}:{p}", get(host).unwrap_or_default()),
        None => get(host).unwrap_or_default(),
    };
    if get("server.address").is_some() {
        return Some(with_port("server.address", "server.port"));
    }
    if get("net.peer.name").is_some() {
        return Some(with_port("net.peer.name", "net.peer.port"));
    }
    if let Some(url) = get("url.full").or_else(|| get("http.url")) {
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        return Some(host.to_string());
    }
    Some(get("rpc.service").unwrap_or_else(|| clip(name)))
}

// Jaeger's JSON export: {"data": [{"traceID", "spans": [...], "processes": {...}}]}.

#[derive(Deserialize)]
struct JaegerExport {
    data: Vec<JaegerTrace>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JaegerTrace {
    #[serde(rename = "traceID")]
    trace_id: String,
    #[serde(default)]
    spans: Vec<JaegerSpan>,
    #[serde(default)]
    processes: HashMap<String, JaegerProcess>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JaegerSpan {
    #[serde(rename = "spanID")]
    span_id: String,
    #[serde(default)]
    operation_name: String,
    #[serde(default)]
    references: Vec<JaegerRef>,
    /// Microseconds since the epoch.
    start_time: u64,
    /// Microseconds.
    duration: u64,
    #[serde(default)]
    tags: Vec<JaegerTag>,
    #[serde(rename = "processID", default)]
    process_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JaegerRef {
    ref_type: String,
    #[serde(rename = "spanID")]
    span_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JaegerProcess {
    service_name: String,
}

#[derive(Deserialize)]
struct JaegerTag {
    key: String,
    value: serde_json::Value,
}

fn hex_id(s: &str, width: usize) -> Option<u128> {
    if s.is_empty() || s.len() > width || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(s, 16).ok().filter(|v| *v != 0)
}

/// Reads Jaeger's JSON export (`{"data": [...]}`, as its UI's "Download JSON" and its query
/// API's `/api/traces` write it).
pub fn parse_jaeger_json(bytes: &[u8], limits: Limits) -> Result<Parsed, TraceError> {
    check_size(bytes, limits)?;
    let export: JaegerExport =
        serde_json::from_slice(bytes).map_err(|e| TraceError::Json(e.to_string()))?;
    let n: usize = export.data.iter().map(|t| t.spans.len()).sum();
    if n > limits.max_spans {
        return Err(TraceError::TooManySpans { limit: limits.max_spans });
    }
    let mut out = Parsed::default();
    for t in export.data {
        let Some(trace) = hex_id(&t.trace_id, 32) else {
            out.dropped += t.spans.len();
            continue;
        };
        for s in t.spans {
            let id = hex_id(&s.span_id, 16).and_then(|v| u64::try_from(v).ok());
            let parent = match s.references.iter().find(|r| r.ref_type == "CHILD_OF") {
                None => Some(None),
                Some(r) => hex_id(&r.span_id, 16).and_then(|v| u64::try_from(v).ok()).map(Some),
            };
            let times = s
                .start_time
                .checked_mul(1000)
                .and_then(|start| Some((start, start.checked_add(s.duration.checked_mul(1000)?)?)));
            let (Some(id), Some(parent), Some((start_ns, end_ns))) = (id, parent, times) else {
                out.dropped += 1;
                continue;
            };
            let tag = |k: &str| s.tags.iter().find(|t| t.key == k).map(|t| &t.value);
            let tag_str = |k: &str| {
                tag(k).and_then(|v| match v {
                    serde_json::Value::String(s) => Some(clip(s)),
                    serde_json::Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
            };
            let kind = match tag_str("span.kind").as_deref() {
                Some("server") => Kind::Server,
                Some("client") => Kind::Client,
                _ => Kind::Other,
            };
            let int = |k: &str| tag_str(k).and_then(|v| v.parse::<i64>().ok());
            let error = tag("error")
                .is_some_and(|v| v == &serde_json::Value::Bool(true) || v == "true")
                || tag_str("otel.status_code").as_deref() == Some("ERROR")
                || int("http.response.status_code")
                    .or_else(|| int("http.status_code"))
                    .is_some_and(|c| c >= 500);
            out.spans.push(Span {
                trace,
                id,
                parent,
                service: t
                    .processes
                    .get(&s.process_id)
                    .map_or_else(|| "unknown".into(), |p| clip(&p.service_name)),
                name: clip(&s.operation_name),
                kind,
                start_ns,
                end_ns,
                error,
                resend_count: int("http.request.resend_count").and_then(|n| u32::try_from(n).ok()),
                peer: peer_of(tag_str, kind, &s.operation_name),
            });
        }
    }
    drop_absurd(&mut out);
    Ok(out)
}

/// Reads a file's spans, whichever of the three formats it holds (Jaeger's is an object with a
/// `data` array; OTLP JSON has `resourceSpans`; anything else is tried as OTLP protobuf).
pub fn parse_any(bytes: &[u8], limits: Limits) -> Result<Parsed, TraceError> {
    check_size(bytes, limits)?;
    let head = bytes.iter().position(|b| !b.is_ascii_whitespace()).map(|i| bytes[i]);
    match head {
        Some(b'{') | Some(b'[') => {
            let sniff = &bytes[..bytes.len().min(4096)];
            let looks_jaeger = sniff.windows(6).any(|w| w == b"\"data\"");
            if looks_jaeger {
                parse_jaeger_json(bytes, limits)
            } else {
                parse_otlp_json(bytes, limits)
            }
        }
        _ => parse_otlp_protobuf(bytes, limits),
    }
}
