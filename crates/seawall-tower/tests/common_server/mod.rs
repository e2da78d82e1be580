//! Helpers for the server integration tests: real axum servers and a tiny hyper client, all on
//! 127.0.0.1.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// Serves `app` on an ephemeral loopback port until the test's runtime ends.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// A response as the tests look at it.
#[derive(Debug)]
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Sends one request on a fresh connection; `None` if the connection failed.
pub async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Option<Got> {
    let stream = TcpStream::connect(addr).await.ok()?;
    stream.set_nodelay(true).ok()?;
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(conn);
    let res = tx.send_request(req).await.ok()?;
    let (parts, body) = res.into_parts();
    let body = body.collect().await.ok()?.to_bytes();
    Some(Got { status: parts.status, headers: parts.headers, body })
}

/// A request builder with the host header hyper's client needs.
pub fn req(method: &str, addr: SocketAddr, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
}

/// `send` with a hard limit: `None` past `limit` (the connection is dropped, as a caller that
/// gave up would).
pub async fn send_within(
    addr: SocketAddr,
    req: Request<Full<Bytes>>,
    limit: Duration,
) -> Option<Got> {
    tokio::time::timeout(limit, send(addr, req)).await.ok().flatten()
}

/// A unique suffix for table names and key prefixes, so parallel runs never collide.
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{tag}_{}_{}", std::process::id(), nanos % 1_000_000_000)
}

/// A payment endpoint for idempotency tests: counts executions, takes `work`, answers 201 with a
/// body derived from the request.
pub fn pay_app(executions: std::sync::Arc<std::sync::atomic::AtomicU64>, work: Duration) -> Router {
    use axum::routing::post;
    Router::new().route(
        "/pay",
        post(move |body: Bytes| {
            let executions = executions.clone();
            async move {
                let n = executions.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                tokio::time::sleep(work).await;
                (
                    StatusCode::CREATED,
                    [("content-type", "text/plain"), ("x-not-stored", "1")],
                    format!("paid {} #{n}", String::from_utf8_lossy(&body)),
                )
            }
        }),
    )
}

/// An in-memory `IdempotencyLayer` whose requests all belong to one tenant (the tests' traffic
/// carries no credentials; a real service scopes by its authenticated principal).
pub fn one_tenant() -> seawall_tower::server::IdempotencyLayer {
    seawall_tower::server::IdempotencyLayer::in_memory()
        .with_scope(|_| Some(b"test-tenant".to_vec()))
}

/// A `POST /pay` with an idempotency key and a body.
pub fn pay(addr: SocketAddr, key: &str, body: &'static str) -> Request<Full<Bytes>> {
    req("POST", addr, "/pay")
        .header("idempotency-key", key)
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

/// Fires 1,000 concurrent requests carrying 100 distinct keys (10 each, same payload per key)
/// at two servers: request `i` goes to server `i % 2` with key `(i / 2) % 100`, so every key
/// reaches *both* servers (5 times each). Returns the status counts. Bounded: each request gives
/// up after 20 s.
pub async fn thousand_requests_hundred_keys(
    a: SocketAddr,
    b: SocketAddr,
    tag: &str,
) -> std::collections::BTreeMap<u16, usize> {
    let mut tasks = Vec::with_capacity(1000);
    for i in 0..1000usize {
        let addr = if i % 2 == 0 { a } else { b };
        let key = format!("{tag}-{}", (i / 2) % 100);
        tasks.push(tokio::spawn(async move {
            let r = pay(addr, &key, "10 EUR");
            send_within(addr, r, Duration::from_secs(20)).await.map(|g| g.status.as_u16())
        }));
    }
    let mut counts = std::collections::BTreeMap::new();
    for t in tasks {
        let status = t.await.expect("task").unwrap_or(0);
        *counts.entry(status).or_insert(0) += 1;
    }
    counts
}
