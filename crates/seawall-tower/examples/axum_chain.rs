//! A 3-tier chain of axum services on loopback — edge → mid → db — where the db is down: the
//! edge owns retries (`RetryLayer`), the mid tier fails fast (`FailFastLayer`). The db sees one
//! attempt per edge request, not 27. The mid tier also mounts the retry admin endpoint and the
//! Prometheus page.
//!
//! Run: `cargo run -p seawall-tower --example axum_chain`

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::routing::{any, get};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use seawall::control::Control;
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall_tower::admin::{AdminAuth, AdminToken};
use seawall_tower::client::{
    ClientMetrics, FailFastLayer, RetryLayer, admin_response, metrics_response,
};
use tower::{Layer, ServiceExt};

/// The smallest HTTP/1 client: one connection per request (hyper's low-level API).
#[derive(Clone, Debug)]
struct Http1;

impl tower::Service<http::Request<Empty<Bytes>>> for Http1 {
    type Response = http::Response<axum::body::Body>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;
    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: http::Request<Empty<Bytes>>) -> Self::Future {
        Box::pin(async move {
            let authority = req.uri().authority().ok_or("no authority")?.as_str().to_owned();
            let stream = tokio::net::TcpStream::connect(authority).await?;
            let (mut send, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let resp = send.send_request(req).await?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok(http::Response::from_parts(parts, axum::body::Body::from(body)))
        })
    }
}

async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

fn to(addr: SocketAddr, path: &str) -> http::Request<Empty<Bytes>> {
    let mut req = http::Request::new(Empty::new());
    *req.uri_mut() = format!("http://{addr}{path}").parse().expect("valid uri");
    req
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let db_hits = Arc::new(AtomicU32::new(0));
    let hits = db_hits.clone();
    let db = serve(axum::Router::new().route(
        "/",
        any(move || {
            hits.fetch_add(1, Ordering::SeqCst);
            async { http::StatusCode::SERVICE_UNAVAILABLE }
        }),
    ))
    .await;

    // The mid tier: fail fast towards the db; admin + metrics endpoints.
    let control = Arc::new(Control::new());
    // The admin endpoint checks a bearer token (a fixed one here; read yours from a secret).
    const ADMIN_TOKEN: &str = "example-admin-token-0123456789";
    let auth = Arc::new(AdminAuth::Bearer(AdminToken::new(ADMIN_TOKEN)?));
    let metrics = Arc::new(ClientMetrics::new());
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let registry = Arc::new(registry);
    let to_db = FailFastLayer::new().with_metrics(metrics.clone()).layer(Http1);
    let mid = serve(
        axum::Router::new()
            .route(
                "/",
                any(move |_: Request| {
                    let svc = to_db.clone();
                    async move { svc.oneshot(to(db, "/")).await.expect("fail-fast answers") }
                }),
            )
            .route(
                "/admin/retries",
                any(move |req: Request| {
                    let (c, a) = (control.clone(), auth.clone());
                    async move { admin_response(&c, &a, &req) }
                }),
            )
            .route(
                "/metrics",
                get(move || {
                    let r = registry.clone();
                    async move { metrics_response(&r) }
                }),
            ),
    )
    .await;

    // The edge owns retries.
    let policy = RetryPolicy::new(PolicyConfig::default(), seawall::budget::Unlimited);
    let edge =
        RetryLayer::from_policy(policy).with_default_timeout(Duration::from_secs(1)).layer(Http1);
    let n = 10;
    for _ in 0..n {
        match edge.clone().oneshot(to(mid, "/")).await {
            Ok(resp) => println!("edge: {}", resp.status()),
            Err(e) => println!("edge: {e}"),
        }
    }
    println!(
        "db saw {} attempts for {n} edge requests (naive 3×3×3 would be {})",
        db_hits.load(Ordering::SeqCst),
        27 * n
    );
    let off = Http1
        .oneshot(
            http::Request::post(format!("http://{mid}/admin/retries?action=off"))
                .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
                .body(Empty::new())?,
        )
        .await?;
    println!("admin: {:?}", off.into_body().collect().await?.to_bytes());
    let page = Http1.oneshot(to(mid, "/metrics")).await?.into_body().collect().await?.to_bytes();
    let page = String::from_utf8_lossy(&page);
    for line in page.lines().filter(|l| l.contains("_total") && !l.starts_with('#')) {
        println!("mid metrics: {line}");
    }
    Ok(())
}
