//! HTTP mode: HTTP/1.1 and HTTP/2 (prior knowledge, as gRPC speaks it) per request, forwarded
//! in the protocol it came in.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Version, header};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use seawall_tower::wire;
use tokio::net::TcpListener;

use super::Shared;
use super::accept::accept_loop;
use super::fault::FailMode;
use super::gate::{Gate, pass};
use super::stats::key_of;

type Body = Either<Incoming, Full<Bytes>>;
type Upstream = Client<HttpConnector, Full<Bytes>>;

/// Hop-by-hop headers (RFC 9110 §7.6.1), not forwarded.
const HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

#[derive(Debug)]
struct Clients {
    h1: Upstream,
    h2: Upstream,
}

/// Accepts until aborted; the connection tasks die with it.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let connector = || {
        let mut c = HttpConnector::new();
        c.set_connect_timeout(Some(shared.limits.connect_timeout));
        c.set_nodelay(true);
        c
    };
    let clients = Arc::new(Clients {
        h1: Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector()),
        h2: Client::builder(TokioExecutor::new()).http2_only(true).build(connector()),
    });
    accept_loop(listener, shared, move |stream, shared| {
        let clients = clients.clone();
        async move {
            let _open = shared.stats.open();
            let caller: Arc<str> = peer_ip(&stream).into();
            let svc =
                service_fn(move |req| handle(req, shared.clone(), clients.clone(), caller.clone()));
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        }
    })
    .await
}

/// The caller a connection's requests are counted for: its peer's IP address.
pub(super) fn peer_ip(stream: &tokio::net::TcpStream) -> String {
    stream.peer_addr().map_or_else(|_| "unknown".to_string(), |a| a.ip().to_string())
}

/// The attempt number a request declares (1 when it declares none, or nonsense).
pub(super) fn attempt_of(h: &HeaderMap) -> u32 {
    h.get(wire::REQUEST_ATTEMPT)
        .and_then(|v| wire::parse_attempt(v.as_bytes()))
        .or_else(|| {
            h.get(wire::GRPC_PREVIOUS_RPC_ATTEMPTS)
                .and_then(|v| wire::parse_grpc_previous_attempts(v.as_bytes()))
        })
        .map_or(1, |n| n.get())
}

fn is_grpc(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// A refusal in the request's own protocol: 503, or gRPC UNAVAILABLE (a trailers-only answer).
fn refusal(
    grpc: bool,
    status: StatusCode,
    grpc_status: &'static str,
    why: &'static str,
) -> Response<Body> {
    let mut r =
        Response::new(Either::Right(Full::new(if grpc { Bytes::new() } else { Bytes::from(why) })));
    if grpc {
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert("grpc-status", HeaderValue::from_static(grpc_status));
        h.insert("grpc-message", HeaderValue::from_static(why));
    } else {
        *r.status_mut() = status;
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    }
    r
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    clients: Arc<Clients>,
    caller: Arc<str>,
) -> Result<Response<Body>, io::Error> {
    shared.stats.request(shared.now(), attempt_of(req.headers()), &caller);
    let grpc = is_grpc(req.headers());
    let mut rng = shared.rng();
    match pass(&shared, &mut rng).await {
        Gate::Pass => {}
        Gate::Refuse(FailMode::Status) => {
            return Ok(refusal(
                grpc,
                StatusCode::SERVICE_UNAVAILABLE,
                "14",
                "seawall proxy: injected fault",
            ));
        }
        // An error makes hyper drop the connection (HTTP/1.1) or reset the stream (HTTP/2).
        Gate::Refuse(_) => return Err(io::Error::other("seawall proxy: injected fault")),
    }
    let (mut parts, body) = req.into_parts();
    let body = match Limited::new(body, shared.limits.max_body).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            shared.stats.rejected("body_too_large");
            return Ok(refusal(
                grpc,
                StatusCode::PAYLOAD_TOO_LARGE,
                "8",
                "seawall proxy: request body over the limit",
            ));
        }
        Err(e) => return Err(io::Error::other(e)),
    };
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let key = key_of(&[parts.method.as_str().as_bytes(), pq.as_bytes(), &body]);
    let _in_flight = shared.stats.enter(key, shared.now());
    parts.uri = format!("http://{}{pq}", shared.upstream).parse().map_err(io::Error::other)?;
    for h in HOP {
        parts.headers.remove(h);
    }
    let client = if parts.version == Version::HTTP_2 { &clients.h2 } else { &clients.h1 };
    match client.request(Request::from_parts(parts, Full::new(body))).await {
        Ok(resp) => Ok(resp.map(Either::Left)),
        Err(_) => {
            shared.stats.rejected("upstream_error");
            Ok(refusal(grpc, StatusCode::BAD_GATEWAY, "14", "seawall proxy: upstream unreachable"))
        }
    }
}
