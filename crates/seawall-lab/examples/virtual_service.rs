//! Your own service through a retry storm, on the virtual lab: a checkout service (axum) that
//! calls the lab's dependency once per request, with the client a team often writes first
//! (3 attempts, a flat 100 ms wait, a 250 ms timeout, no budget, 500s retried) and with
//! seawall's defaults behind a `DeadlineLayer`. The lab's default scenario — 160 rps against a
//! 200 rps dependency that fails every request for 10 s from 5 s — runs through each on
//! virtual time, in about a second of wall time.
//!
//! Run: `cargo run -p seawall-lab --example virtual_service`

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use seawall::backoff::Backoff;
use seawall::budget::{AnyBudget, Unlimited};
use seawall::classify::HttpClassifier;
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall_lab::vlab::{self, Link, VirtualParams};
use seawall_lab::{LabParams, Stack};
use seawall_tower::client::RetryLayer;
use seawall_tower::server::DeadlineLayer;
use seawall_tower::time::TokioClock;
use tower::{Layer, ServiceExt};

/// The checkout service: `GET /` makes one call to `dependency` through `client` and answers
/// with its status (503 if the client gave up).
fn checkout<L>(dependency: Link, client: L) -> Router
where
    L: Layer<Link>,
    L::Service: tower::Service<Request<Empty<Bytes>>, Response = http::Response<()>>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<Request<Empty<Bytes>>>>::Future: Send,
    <L::Service as tower::Service<Request<Empty<Bytes>>>>::Error: Send,
{
    let client = client.layer(dependency);
    Router::new().route(
        "/",
        get(move || {
            let client = client.clone();
            async move {
                let req = Request::get("/").body(Empty::new()).expect("valid request");
                match client.oneshot(req).await {
                    Ok(resp) => resp.status(),
                    Err(_) => StatusCode::SERVICE_UNAVAILABLE,
                }
            }
        }),
    )
}

/// The client a team often writes first.
fn naive(dependency: Link) -> Router {
    let policy = RetryPolicy::new(
        PolicyConfig::default()
            .with_backoff(Backoff::constant(Duration::from_millis(100)).expect("valid"))
            .with_per_try_timeout(Duration::from_millis(250))
            .expect("valid"),
        AnyBudget::Unlimited(Unlimited),
    );
    let layer = RetryLayer::from_policy(policy)
        .with_classifier(HttpClassifier::new().retry_500(true))
        .with_clock(TokioClock);
    checkout(dependency, layer)
}

/// seawall's defaults (3 attempts, full jitter, the gRPC-style retry budget) and a
/// `DeadlineLayer`, so the caller's deadline bounds the retries. Both on tokio's clock, so
/// that they run on the virtual lab's time.
fn with_seawall(dependency: Link) -> Router {
    checkout(dependency, RetryLayer::new().with_clock(TokioClock))
        .layer(DeadlineLayer::new().with_clock(TokioClock))
}

/// Runs the lab's default scenario through both and returns their runs, naive first.
pub(crate) fn storm(params: &LabParams) -> Vec<seawall_report::Run> {
    let rt = vlab::runtime().expect("a runtime");
    let v = VirtualParams::default();
    rt.block_on(async {
        let before = vlab::run_service(params, v, Stack::Baseline, "naive", naive).await;
        let after = vlab::run_service(params, v, Stack::Baseline, "seawall", with_seawall).await;
        vec![before.expect("naive run"), after.expect("seawall run")]
    })
}

#[allow(dead_code)] // the test includes this file for its functions, not its main
fn main() {
    let params = LabParams::default();
    let runs = storm(&params);
    for r in &runs {
        let peak = r.series.bottom_attempts_rps.iter().copied().fold(0.0, f64::max);
        println!(
            "{:>8}: recovered {} — {:.0} attempts/s at the dependency at the peak, goodput {:.0} % before / {:.0} % during / {:.0} % after the fault",
            r.policy,
            r.recovered(),
            peak,
            r.goodput_before * 100.0,
            r.goodput_during * 100.0,
            r.goodput_after * 100.0,
        );
    }
    // The same results.json as every lab: `seawall report` draws it, `seawall detect --replay`
    // judges it.
    let results = vlab::service_results(&params, "checkout", runs);
    let dir = std::path::Path::new("out/virtual-service");
    std::fs::create_dir_all(dir).expect("out/virtual-service");
    let json = serde_json::to_string_pretty(&results).expect("results serialize");
    std::fs::write(dir.join("results.json"), json).expect("results.json written");
    println!("wrote {}", dir.join("results.json").display());
}
