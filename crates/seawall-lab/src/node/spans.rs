//! The nodes' spans, exported as OTLP/HTTP JSON (`seawall lab --otlp URL`), so the lab can be
//! watched as an application's own OpenTelemetry SDK would show it: `seawall detect
//! --otlp-listen`, or any OTLP collector.
//!
//! Each request a node serves is a `SERVER` span; each attempt a tier sends downstream is a
//! `CLIENT` span under it, with `server.address`/`server.port` of the next tier and, on a
//! repeated attempt, `http.request.resend_count` (OpenTelemetry's HTTP semantic conventions,
//! stable since v1.23). Context travels in the W3C `traceparent` header (Trace Context, Level
//! 1: `00-{trace id}-{parent id}-{flags}`); a request without one starts a trace, so the edge's
//! server spans are the roots. A span is recorded when its work ends — on a baseline node,
//! when the detached work finishes, even after the caller left; when a seawall node cancels the
//! work, at the cancellation — so the spans show the work nobody used.
//!
//! Spans wait in a bounded buffer ([`MAX_BUFFERED`]; beyond it they are dropped and counted)
//! and leave once a second in bodies of at most [`MAX_PER_BODY`] spans; an export that fails is
//! dropped, never retried (the lab must not add load of its own to a sick collector).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Uri};
use http_body_util::{Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use seawall_tower::wire::REQUEST_ATTEMPT;
use serde_json::{Value, json};
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use super::client::Inner;
pub use super::client::TRACEPARENT;

/// Spans a node holds between two exports; more are dropped and counted.
pub const MAX_BUFFERED: usize = 200_000;
/// Spans in one export body (under the OTLP receivers' usual per-request limits).
pub const MAX_PER_BODY: usize = 5_000;
/// How often a node exports.
pub const EVERY: Duration = Duration::from_secs(1);

/// `traceparent`'s trace id and parent span id; `None` if absent or malformed (then the
/// request starts a trace). Version `00` only, ids non-zero, as the spec requires.
pub fn parse_traceparent(headers: &HeaderMap) -> Option<(u128, u64)> {
    let v = headers.get(TRACEPARENT)?.to_str().ok()?;
    let mut parts = v.split('-');
    let (ver, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if ver != "00"
        || parts.next().is_some()
        || !hex(trace, 32)
        || !hex(parent, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let trace = u128::from_str_radix(trace, 16).ok()?;
    let parent = u64::from_str_radix(parent, 16).ok()?;
    (trace != 0 && parent != 0).then_some((trace, parent))
}

fn traceparent(trace: u128, id: u64) -> HeaderValue {
    // Hex digits and dashes are always a valid header value.
    HeaderValue::from_str(&format!("00-{trace:032x}-{id:016x}-01")).expect("ascii")
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// `inner` with a `CLIENT` span for each request that carries a `traceparent` (one attempt:
/// the retry layers sit above), at `authority`; the request leaves with the attempt's own
/// `traceparent`, so the next node's server span is its child.
pub fn traced(inner: Inner, tracer: Arc<Tracer>, authority: String) -> Inner {
    BoxCloneSyncService::new(tower::service_fn(move |mut req: Request<Empty<Bytes>>| {
        let (inner, tracer, authority) = (inner.clone(), tracer.clone(), authority.clone());
        async move {
            let Some(parent) = parse_traceparent(req.headers()) else {
                return inner.oneshot(req).await;
            };
            let attempt = req
                .headers()
                .get(REQUEST_ATTEMPT)
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.parse().ok())
                .unwrap_or(1);
            let mut span = tracer.client(parent, &authority, attempt);
            req.headers_mut().insert(TRACEPARENT, span.traceparent());
            let r = inner.oneshot(req).await;
            match &r {
                Ok(resp) if resp.status().is_server_error() => {
                    span.fail(Some(resp.status().as_u16()));
                }
                Ok(_) => span.succeed(),
                Err(_) => span.fail(None),
            }
            r
        }
    }))
}

/// One node's spans: the service name they carry and the buffer the exporter drains.
#[derive(Debug)]
pub struct Tracer {
    service: &'static str,
    spans: Mutex<Vec<Value>>,
    dropped: AtomicU64,
    ids: AtomicU64,
}

impl Tracer {
    /// A tracer for the service `service` (its `service.name`).
    pub fn new(service: &'static str, seed: u64) -> Arc<Self> {
        Arc::new(Tracer {
            service,
            spans: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
            ids: AtomicU64::new(seed ^ now_ns()),
        })
    }

    /// A fresh non-zero id (SplitMix64 over a shared counter: unique per node, spread).
    fn id(&self) -> u64 {
        let mut z = self.ids.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)).max(1)
    }

    /// A `SERVER` span for a request with `headers`: the child of its `traceparent`, or a root.
    pub fn server(self: &Arc<Self>, headers: &HeaderMap) -> SpanGuard {
        let (trace, parent) = match parse_traceparent(headers) {
            Some((t, p)) => (t, Some(p)),
            None => ((u128::from(self.id()) << 64) | u128::from(self.id()), None),
        };
        self.start(trace, parent, 2, Vec::new())
    }

    /// A `CLIENT` span under the span `traceparent` names, for an attempt at `authority`
    /// (`host:port`) that is its `attempt`-th (1 = first).
    pub fn client(
        self: &Arc<Self>,
        parent: (u128, u64),
        authority: &str,
        attempt: u32,
    ) -> SpanGuard {
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<i64>().ok()),
            None => (authority, None),
        };
        let mut attrs = vec![kv("server.address", json!({ "stringValue": host }))];
        if let Some(p) = port {
            attrs.push(kv("server.port", json!({ "intValue": p.to_string() })));
        }
        if attempt >= 2 {
            attrs.push(kv(
                "http.request.resend_count",
                json!({ "intValue": (attempt - 1).to_string() }),
            ));
        }
        let mut span = self.start(parent.0, Some(parent.1), 3, attrs);
        // Failed until an answer says otherwise: an attempt cut at its timeout is a failure.
        span.error = true;
        span
    }

    fn start(
        self: &Arc<Self>,
        trace: u128,
        parent: Option<u64>,
        kind: u8,
        attrs: Vec<Value>,
    ) -> SpanGuard {
        SpanGuard {
            tracer: self.clone(),
            trace,
            id: self.id(),
            parent,
            kind,
            start_ns: now_ns(),
            error: false,
            attrs,
        }
    }

    fn record(&self, span: Value) {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        if spans.len() < MAX_BUFFERED {
            spans.push(span);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Spans dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The buffered spans as OTLP JSON bodies (`ExportTraceServiceRequest`), emptying the
    /// buffer.
    pub fn drain_bodies(&self) -> Vec<Vec<u8>> {
        let spans = std::mem::take(&mut *self.spans.lock().unwrap_or_else(|p| p.into_inner()));
        spans
            .chunks(MAX_PER_BODY)
            .map(|chunk| {
                let body = json!({ "resourceSpans": [{
                    "resource": { "attributes": [kv("service.name", json!({ "stringValue": self.service }))] },
                    "scopeSpans": [{ "scope": { "name": "seawall-lab" }, "spans": chunk }],
                }]});
                serde_json::to_vec(&body).unwrap_or_default()
            })
            .collect()
    }

    /// Exports the buffer to `url` (`…/v1/traces`) every [`EVERY`] until the task is aborted.
    pub async fn export(self: Arc<Self>, url: Uri) {
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tick.tick().await;
            self.flush(&client, &url).await;
        }
    }

    /// One export of everything buffered; failures are dropped.
    pub async fn flush(&self, client: &Client<HttpConnector, Full<Bytes>>, url: &Uri) {
        for body in self.drain_bodies() {
            let req = Request::post(url.clone())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)));
            if let Ok(req) = req {
                let _ = tokio::time::timeout(Duration::from_secs(5), client.request(req)).await;
            }
        }
    }
}

fn kv(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

/// A span in progress: recorded when dropped, with the time it was dropped as its end.
#[derive(Debug)]
pub struct SpanGuard {
    tracer: Arc<Tracer>,
    trace: u128,
    id: u64,
    parent: Option<u64>,
    kind: u8,
    start_ns: u64,
    error: bool,
    attrs: Vec<Value>,
}

impl SpanGuard {
    /// The `traceparent` for the span's children.
    pub fn traceparent(&self) -> HeaderValue {
        traceparent(self.trace, self.id)
    }

    /// Its trace id and its own id, as a child's parent.
    pub fn context(&self) -> (u128, u64) {
        (self.trace, self.id)
    }

    /// Marks the span answered (status `OK`).
    pub fn succeed(&mut self) {
        self.error = false;
    }

    /// Marks the span failed (status `ERROR`), with the HTTP status if there is one.
    pub fn fail(&mut self, status: Option<u16>) {
        self.error = true;
        if let Some(s) = status {
            self.attrs.push(kv("http.response.status_code", json!({ "intValue": s.to_string() })));
        }
    }
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        let mut span = json!({
            "traceId": format!("{:032x}", self.trace),
            "spanId": format!("{:016x}", self.id),
            "name": "GET /",
            "kind": self.kind,
            "startTimeUnixNano": self.start_ns.to_string(),
            "endTimeUnixNano": now_ns().max(self.start_ns).to_string(),
            "attributes": std::mem::take(&mut self.attrs),
            "status": { "code": if self.error { 2 } else { 1 } },
        });
        if let Some(p) = self.parent {
            span["parentSpanId"] = json!(format!("{p:016x}"));
        }
        self.tracer.record(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_parsed_strictly() {
        let mut h = HeaderMap::new();
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        h.insert(TRACEPARENT, HeaderValue::from_static(ok));
        assert_eq!(
            parse_traceparent(&h),
            Some((0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7))
        );
        for bad in [
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            h.insert(TRACEPARENT, HeaderValue::from_static(bad));
            assert_eq!(parse_traceparent(&h), None, "{bad}");
        }
    }

    /// A server span and a retried client span under it come out as OTLP JSON that
    /// OpenTelemetry's own decoder (via `seawall_detect::traces`) reads back: parent, kind,
    /// peer and resend count intact.
    #[test]
    fn spans_round_trip_through_the_otlp_decoder() {
        let t = Tracer::new("order", 7);
        let server = t.server(&HeaderMap::new());
        let mut attempt = t.client(server.context(), "127.0.0.1:4000", 2);
        attempt.fail(Some(503));
        let (trace, sid) = server.context();
        drop(attempt);
        drop(server);
        let bodies = t.drain_bodies();
        assert_eq!(bodies.len(), 1);
        let parsed =
            seawall_detect::traces::parse_otlp_json(&bodies[0], Default::default()).unwrap();
        assert_eq!(parsed.dropped, 0);
        let spans = parsed.spans;
        assert_eq!(spans.len(), 2);
        let c = &spans[0];
        assert_eq!((c.trace, c.parent, c.service.as_str()), (trace, Some(sid), "order"));
        assert_eq!(c.kind, seawall_detect::traces::Kind::Client);
        assert_eq!((c.resend_count, c.error), (Some(1), true));
        assert_eq!(c.peer.as_deref(), Some("127.0.0.1:4000"));
        assert_eq!((spans[1].parent, spans[1].kind), (None, seawall_detect::traces::Kind::Server));
        assert!(t.drain_bodies().is_empty());
    }
}
