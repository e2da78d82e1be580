//! An OTLP/HTTP trace receiver (`POST /v1/traces`, protobuf or JSON), bounded: what
//! `seawall detect --otlp-listen` runs so that an application's own OpenTelemetry SDK can
//! export straight to it.
//!
//! Per the OTLP/HTTP specification: a body is `application/x-protobuf` or `application/json`;
//! success is `200` with an empty `ExportTraceServiceResponse` in the request's encoding; a
//! body that cannot be decoded is `400`, and the exporter does not retry it. The bounds, each a
//! clear refusal the exporter's log shows:
//!
//! - a declared or read body over [`Limits::max_bytes`]: `413`, before the body is read when
//!   `Content-Length` declares it;
//! - more than [`Limits::max_spans`] spans in one body: `413`;
//! - a body not complete within [`ReceiverOptions::body_timeout`] (a slow sender): `408`;
//! - more than [`ReceiverOptions::max_buffered`] spans waiting to be analysed, or more than
//!   [`ReceiverOptions::max_connections`] connections at once: `503` with `Retry-After: 1`
//!   (retryable under OTLP/HTTP), so memory stays bounded whatever the senders do.
//!
//! It listens where it is told; `seawall detect` defaults to `127.0.0.1:4318` (OTLP/HTTP's
//! port, on loopback only).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::{Limits, Span, TraceError, decode_request, request_spans};

/// The receiver's bounds beyond one body's [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverOptions {
    /// One body's bytes and spans (default 16 MiB, 100,000 spans).
    pub limits: Limits,
    /// Time to receive one body (default 10 s, the OTLP exporters' default export timeout).
    pub body_timeout: Duration,
    /// Spans held until [`Receiver::drain`] takes them (default 1,000,000).
    pub max_buffered: usize,
    /// Connections served at once (default 64).
    pub max_connections: usize,
    /// Keep each accepted body as one line of OTLP JSON (the Collector's file exporter's
    /// format) for [`Receiver::drain_records`]: `seawall detect --record FILE`.
    pub record: bool,
}

impl Default for ReceiverOptions {
    fn default() -> Self {
        ReceiverOptions {
            limits: Limits::default(),
            body_timeout: Duration::from_secs(10),
            max_buffered: 1_000_000,
            max_connections: 64,
            record: false,
        }
    }
}

/// What the receiver has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Bodies accepted.
    pub accepted: u64,
    /// Bodies refused (400, 408, 413, 415, 503).
    pub refused: u64,
    /// Spans dropped as malformed inside accepted bodies.
    pub dropped_spans: u64,
}

#[derive(Debug, Default)]
struct Shared {
    spans: Vec<Span>,
    records: Vec<String>,
    stats: ReceiverStats,
}

/// A running receiver. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    /// Binds `addr` and serves on the current Tokio runtime.
    pub async fn bind(addr: SocketAddr, options: ReceiverOptions) -> std::io::Result<Receiver> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let gate = Arc::new(Semaphore::new(options.max_connections.max(1)));
        let s = shared.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let shared = s.clone();
                let permit = gate.clone().try_acquire_owned();
                tokio::spawn(async move {
                    let busy = permit.is_err();
                    let service = hyper::service::service_fn(move |req| {
                        let shared = shared.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                handle(req, &shared, options, busy).await,
                            )
                        }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(options.body_timeout)
                        .serve_connection(TokioIo::new(stream), service);
                    let _ = conn.await;
                    drop(permit);
                });
            }
        });
        Ok(Receiver { addr, shared, task })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Takes the spans received so far.
    pub fn drain(&self) -> Vec<Span> {
        std::mem::take(&mut self.shared.lock().unwrap_or_else(|p| p.into_inner()).spans)
    }

    /// Takes the recorded bodies so far (OTLP JSON, one per element), when
    /// [`ReceiverOptions::record`] is on.
    pub fn drain_records(&self) -> Vec<String> {
        std::mem::take(&mut self.shared.lock().unwrap_or_else(|p| p.into_inner()).records)
    }

    /// The counts so far.
    pub fn stats(&self) -> ReceiverStats {
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).stats
    }
}

fn answer(
    status: StatusCode,
    content_type: &'static str,
    body: &'static str,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    r
}

fn refuse(shared: &Mutex<Shared>, status: StatusCode, why: &'static str) -> Response<Full<Bytes>> {
    shared.lock().unwrap_or_else(|p| p.into_inner()).stats.refused += 1;
    answer(status, "text/plain; charset=utf-8", why)
}

async fn handle(
    req: Request<Incoming>,
    shared: &Mutex<Shared>,
    options: ReceiverOptions,
    busy: bool,
) -> Response<Full<Bytes>> {
    if busy {
        return refuse(shared, StatusCode::SERVICE_UNAVAILABLE, "too many connections\n");
    }
    if req.method() != http::Method::POST || req.uri().path() != "/v1/traces" {
        return refuse(shared, StatusCode::NOT_FOUND, "POST /v1/traces only\n");
    }
    let json = match req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        Some(ct) if ct.starts_with("application/x-protobuf") => false,
        Some(ct) if ct.starts_with("application/json") => true,
        _ => {
            return refuse(
                shared,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Type must be application/x-protobuf or application/json\n",
            );
        }
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > options.limits.max_bytes as u64) {
        return refuse(
            shared,
            StatusCode::PAYLOAD_TOO_LARGE,
            "body over the receiver's size limit\n",
        );
    }
    let body = Limited::new(req.into_body(), options.limits.max_bytes);
    let bytes = match tokio::time::timeout(options.body_timeout, body.collect()).await {
        Err(_) => {
            return refuse(shared, StatusCode::REQUEST_TIMEOUT, "body not received in time\n");
        }
        Ok(Err(_)) => {
            return refuse(
                shared,
                StatusCode::PAYLOAD_TOO_LARGE,
                "body over the receiver's size limit\n",
            );
        }
        Ok(Ok(b)) => b.to_bytes(),
    };
    let decoded = decode_request(&bytes, json, options.limits);
    let record = match (&decoded, options.record) {
        (Ok(req), true) => serde_json::to_string(req).ok(),
        _ => None,
    };
    let parsed = match decoded.and_then(|req| request_spans(req, options.limits)) {
        Ok(p) => p,
        Err(TraceError::TooLarge { .. } | TraceError::TooManySpans { .. }) => {
            return refuse(shared, StatusCode::PAYLOAD_TOO_LARGE, "too many spans in one body\n");
        }
        Err(_) => {
            return refuse(
                shared,
                StatusCode::BAD_REQUEST,
                "not an OTLP ExportTraceServiceRequest\n",
            );
        }
    };
    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
    if s.spans.len() + parsed.spans.len() > options.max_buffered {
        s.stats.refused += 1;
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            "receiver full; retry\n",
        );
    }
    s.stats.accepted += 1;
    s.stats.dropped_spans += parsed.dropped as u64;
    s.spans.extend(parsed.spans);
    s.records.extend(record);
    if json {
        answer(StatusCode::OK, "application/json", "{}")
    } else {
        answer(StatusCode::OK, "application/x-protobuf", "")
    }
}
