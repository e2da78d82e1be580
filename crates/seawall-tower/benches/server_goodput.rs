//! Goodput at 2× and 4× overload as a fraction of capacity: no protection, `ShedLayer`, and
//! tower's `load_shed` + `ConcurrencyLimit`, in the same run.
//!
//! `cargo bench -p seawall-tower --no-default-features --features server --bench server_goodput`

#[path = "server_common/mod.rs"]
mod common;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::routing::get;
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

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let capacity = WORKERS as f64 / WORK.as_secs_f64();
        let run = Duration::from_secs(2);
        let n = NonZeroUsize::new(WORKERS).expect("workers");
        let none = common::serve(app()).await;
        let shed = common::serve(app().layer(ShedLayer::new(n))).await;
        let tower_ls = common::serve(
            app().layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(|_: axum::BoxError| async { StatusCode::SERVICE_UNAVAILABLE }))
                    .load_shed()
                    .concurrency_limit(WORKERS),
            ),
        )
        .await;
        println!("server_goodput: capacity {capacity:.0} req/s ({WORKERS} workers x {WORK:?}); goodput = 200s within {DEADLINE:?}, {run:?} open loop");
        println!("overload  none   ShedLayer  tower load_shed+ConcurrencyLimit");
        for factor in [2.0, 4.0] {
            let rate = capacity * factor;
            let g_none = common::open_loop_goodput(none, "/work", rate, run, DEADLINE).await / capacity;
            let g_shed = common::open_loop_goodput(shed, "/work", rate, run, DEADLINE).await / capacity;
            let g_tower = common::open_loop_goodput(tower_ls, "/work", rate, run, DEADLINE).await / capacity;
            println!("{factor:>7.0}x  {g_none:>4.2}  {g_shed:>9.2}  {g_tower:>32.2}");
        }
    });
}
