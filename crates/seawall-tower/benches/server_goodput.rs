//! Goodput at 2× and 4× overload as a fraction of capacity: no protection, `ShedLayer`, and
//! tower's `load_shed` + `ConcurrencyLimit`, in the same run.
//!
//! `cargo bench -p seawall-tower --no-default-features --features server --bench server_goodput`
//!
//! The tower anchor wraps the whole router as one service. It is *not* applied with
//! `Router::layer`: axum applies a router's layers to a handler route when the router gets its
//! state, and `axum::serve` does that once per connection (`Router::with_state(())` in its
//! make-service), so `ConcurrencyLimitLayer::layer` — which creates a fresh semaphore each time
//! — gives every connection its own limit of 4. With one connection per request nothing is ever
//! shed; the "misapplied" column measures exactly that (its 503 count is 0). `ShedLayer` keeps
//! its state in the layer, so it is shared however often axum re-applies it.

#[path = "server_common/mod.rs"]
mod common;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::routing::get;
use common::OpenLoop;
use http::StatusCode;
use seawall_tower::server::ShedLayer;
use tokio::sync::Semaphore;
use tower::ServiceBuilder;

const WORKERS: usize = 4;
const WORK: Duration = Duration::from_millis(50);
const DEADLINE: Duration = Duration::from_millis(250);

/// Fixed-time handler on a pool of `WORKERS` (requests beyond it wait for a worker, FIFO).
fn app() -> Router {
    let pool = Arc::new(Semaphore::new(WORKERS));
    Router::new().route(
        "/work",
        get(move || {
            let pool = pool.clone();
            async move {
                let _w = pool.acquire().await.expect("pool");
                tokio::time::sleep(WORK).await;
                "done"
            }
        }),
    )
}

/// Answers tower's `Overloaded` (and any other middleware error) with 503.
async fn overloaded(_: axum::BoxError) -> StatusCode {
    StatusCode::SERVICE_UNAVAILABLE
}

fn cell(r: OpenLoop, capacity: f64) -> String {
    format!("{:.2} ({}/{} shed)", r.goodput / capacity, r.shed, r.sent)
}

fn main() {
    let rt = common::runtime();
    rt.block_on(async {
        let capacity = WORKERS as f64 / WORK.as_secs_f64();
        let run = Duration::from_secs(2);
        let n = NonZeroUsize::new(WORKERS).expect("workers");
        let none = common::serve(app()).await;
        let shed = common::serve(app().layer(ShedLayer::new(n))).await;
        // The same stack twice: around the whole router (one semaphore for the server), and
        // through `Router::layer` (one semaphore per connection, see the module docs).
        let tower = common::serve_service(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(overloaded))
                .load_shed()
                .concurrency_limit(WORKERS)
                .service(app().with_state(())),
        )
        .await;
        let misapplied = common::serve(
            app().layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(overloaded))
                    .load_shed()
                    .concurrency_limit(WORKERS),
            ),
        )
        .await;
        println!(
            "server_goodput: capacity {capacity:.0} req/s ({WORKERS} workers x {WORK:?}); \
             goodput = 200s within {DEADLINE:?} / capacity, {run:?} open loop; (503s/sent)"
        );
        println!("overload | none | ShedLayer | tower around the router | tower via Router::layer");
        for factor in [2.0, 4.0] {
            let rate = capacity * factor;
            let mut cells = Vec::new();
            for addr in [none, shed, tower, misapplied] {
                let r = common::open_loop_goodput(addr, "/work", rate, run, DEADLINE).await;
                cells.push(cell(r, capacity));
            }
            println!("{factor:.0}x | {}", cells.join(" | "));
        }
    });
}
