//! seawall's `RetryMiddleware` on a plain `reqwest::Client`, through reqwest-middleware (feature
//! `reqwest-middleware`), against a local server that is briefly unavailable:
//!
//! - `GET /menu`: the first attempt gets `503 + Retry-After: 1`; the retry, a second later,
//!   succeeds. The call stays `client.get(url).send()`.
//! - `POST /orders` without an `Idempotency-Key` is not resent (the 503 comes back, marked with
//!   why the policy stopped); with a key it is, its body replayed.
//! - `GET /feed` streams: the response is handed over before its body ends, chunk by chunk.
//!
//! Prints the Prometheus metrics at the end.
//!
//! Run: `cargo run -p seawall-tower --features reqwest-middleware --example reqwest_middleware`

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use prometheus_client::registry::Registry;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use seawall_tower::client::middleware::{GaveUp, RetryMiddleware};
use seawall_tower::client::{ClientMetrics, metrics_text};

/// Application state: the client is stored as reqwest-middleware's type.
struct App {
    http: ClientWithMiddleware,
    base: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = serve_dependency().await?;

    let mut registry = Registry::default();
    let metrics = Arc::new(ClientMetrics::new());
    metrics.register(&mut registry);
    let retry =
        RetryMiddleware::new().with_default_timeout(Duration::from_secs(5)).with_metrics(metrics);
    // The adoption: an existing reqwest client, one middleware.
    let reqwest_client = reqwest::Client::builder().no_proxy().build()?;
    let http = ClientBuilder::new(reqwest_client).with(retry).build();
    let app = App { http, base };

    let t0 = Instant::now();
    let resp = app.http.get(format!("{}/menu", app.base)).send().await?;
    println!("GET /menu: {} {:?} after {:?}", resp.status(), resp.text().await?, t0.elapsed());
    assert!(t0.elapsed() >= Duration::from_secs(1), "Retry-After is a lower bound");

    let resp = app.http.post(format!("{}/orders", app.base)).body("{\"dish\":1}").send().await?;
    let why = GaveUp::of(&resp).map(|g| g.reason());
    println!("POST /orders, no key: {} (seawall gave up: {why:?})", resp.status());

    let resp = app
        .http
        .post(format!("{}/orders", app.base))
        .header("idempotency-key", "order-7f3a")
        .body("{\"dish\":1}")
        .send()
        .await?;
    println!("POST /orders, keyed: {} {:?}", resp.status(), resp.text().await?);

    let mut resp = app.http.get(format!("{}/feed", app.base)).send().await?;
    print!("GET /feed: {}, chunks:", resp.status());
    while let Some(chunk) = resp.chunk().await? {
        print!(" {:?}", String::from_utf8_lossy(&chunk));
    }
    println!();

    let text = metrics_text(&registry);
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.contains("_bucket")) {
        println!("{line}");
    }
    Ok(())
}

/// The dependency on 127.0.0.1: `/menu` and `/orders` refuse every first attempt (an
/// `Idempotency-Key`-less POST is only ever a first attempt); `/feed` streams three chunks.
async fn serve_dependency() -> std::io::Result<String> {
    let orders = Arc::new(AtomicU32::new(0));
    let app = axum::Router::new()
        .route(
            "/menu",
            get(|h: HeaderMap| async move {
                // A first attempt carries no `Request-Attempt` (absent = 1); retries 2, 3, …
                match h.contains_key("request-attempt") {
                    false => (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")], "busy"),
                    true => (StatusCode::OK, [("retry-after", "0")], "menu"),
                }
            }),
        )
        .route(
            "/orders",
            post(move |h: HeaderMap, body: Bytes| async move {
                let n = orders.fetch_add(1, Ordering::Relaxed);
                match h.contains_key("request-attempt") {
                    false => (StatusCode::SERVICE_UNAVAILABLE, format!("busy ({n})")),
                    true => {
                        (StatusCode::CREATED, format!("created {}", String::from_utf8_lossy(&body)))
                    }
                }
            }),
        )
        .route(
            "/feed",
            get(|| async {
                let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
                tokio::spawn(async move {
                    for part in ["one ", "two ", "three"] {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        if tx.send(Bytes::from(part)).await.is_err() {
                            return;
                        }
                    }
                });
                axum::body::Body::new(Feed(rx))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}"))
}

/// A response body fed by a channel, one data frame per message.
struct Feed(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for Feed {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|c| c.map(|b| Ok(http_body::Frame::data(b))))
    }
}
