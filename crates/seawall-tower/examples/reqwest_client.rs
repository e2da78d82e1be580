//! reqwest behind seawall's `RetryLayer`, against a local server that is briefly unavailable:
//! each call's first attempt gets `503 + Retry-Pushback-Ms: 100`, the retry succeeds no sooner.
//! Prints the Prometheus metrics at the end.
//!
//! Run: `cargo run -p seawall-tower --example reqwest_client`

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use prometheus_client::registry::Registry;
use seawall_tower::client::{ClientMetrics, RetryLayer, metrics_text};
use tower::{Layer, ServiceExt};

/// reqwest's `Client` speaks `reqwest::Request`; the layers speak `http::Request`. This is the
/// whole adapter.
#[derive(Clone, Debug)]
struct Reqwest(reqwest::Client);

impl tower::Service<http::Request<Bytes>> for Reqwest {
    type Response = http::Response<Bytes>;
    type Error = reqwest::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Bytes>) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move {
            let resp = client.execute(reqwest::Request::try_from(req)?).await?;
            let mut out = http::Response::builder().status(resp.status());
            for (k, v) in resp.headers() {
                out = out.header(k, v);
            }
            Ok(out.body(resp.bytes().await?).expect("status and headers came from a response"))
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = axum::Router::new().route(
        "/menu",
        axum::routing::get(|headers: http::HeaderMap| async move {
            // A first attempt carries no `Request-Attempt` (absent = 1); retries carry 2, 3, …
            if !headers.contains_key("request-attempt") {
                (http::StatusCode::SERVICE_UNAVAILABLE, [("retry-pushback-ms", "100")], "busy")
            } else {
                (http::StatusCode::OK, [("retry-pushback-ms", "0")], "menu")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut registry = Registry::default();
    let metrics = Arc::new(ClientMetrics::new());
    metrics.register(&mut registry);
    let layer =
        RetryLayer::new().with_default_timeout(Duration::from_secs(2)).with_metrics(metrics);
    let client = layer.layer(Reqwest(reqwest::Client::builder().no_proxy().build()?));

    for _ in 0..3 {
        let t0 = Instant::now();
        let req = http::Request::get(format!("http://{addr}/menu")).body(Bytes::new())?;
        let resp = client.clone().oneshot(req).await?;
        println!("{} {:?} in {:?}", resp.status(), resp.body(), t0.elapsed());
        assert!(t0.elapsed() >= Duration::from_millis(100), "the pushback is a lower bound");
    }
    let text = metrics_text(&registry);
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.contains("_bucket")) {
        println!("{line}");
    }
    Ok(())
}
