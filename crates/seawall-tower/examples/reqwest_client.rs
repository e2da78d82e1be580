//! reqwest behind seawall's `RetryLayer`, against a local server that is briefly unavailable:
//! each call's first attempt gets `503 + Retry-Pushback-Ms: 100`, the retry succeeds no sooner.
//! Prints the Prometheus metrics at the end. reqwest plugs in through the library's
//! `ReqwestService` (feature `reqwest`), which reads each response body whole, up to a cap.
//!
//! Run: `cargo run -p seawall-tower --features reqwest --example reqwest_client`

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use prometheus_client::registry::Registry;
use seawall_tower::client::reqwest::ReqwestService;
use seawall_tower::client::{ClientMetrics, RetryLayer, metrics_text};
use tower::{Layer, ServiceExt};

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
    let client = layer.layer(ReqwestService::new(reqwest::Client::builder().no_proxy().build()?));

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
