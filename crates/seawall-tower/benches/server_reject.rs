//! Cheap rejection: responses/s of a saturated `ShedLayer` (every request answered 503) against
//! the same axum/hyper server answering a no-op 200, same load generator, same run.
//!
//! `cargo bench -p seawall-tower --no-default-features --features server --bench server_reject`

#[path = "server_common/mod.rs"]
mod common;

use std::num::NonZeroUsize;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use seawall_tower::server::ShedLayer;

fn app() -> Router {
    Router::new().route("/noop", get(|| async { "" })).route(
        "/hang",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            ""
        }),
    )
}

fn main() {
    let rt = common::runtime();
    rt.block_on(async {
        let run = Duration::from_secs(3);
        let conns = 16;
        let plain = common::serve(app()).await;
        // One slot, no queue; a hanging request holds the slot, so every other request is shed.
        let shed = ShedLayer::new(NonZeroUsize::new(1).expect("1")).with_queue(0);
        let saturated = common::serve(app().layer(shed)).await;
        let hold = tokio::spawn(common::closed_loop(
            saturated,
            "/hang",
            1,
            Duration::from_millis(1),
            StatusCode::OK,
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;

        let mut rows = Vec::new();
        for round in 0..2 {
            let (noop, _) = common::closed_loop(plain, "/noop", conns, run, StatusCode::OK).await;
            let (reject, n503) = common::closed_loop(
                saturated,
                "/noop",
                conns,
                run,
                StatusCode::SERVICE_UNAVAILABLE,
            )
            .await;
            let total = reject * run.as_secs_f64();
            assert!(
                n503 as f64 >= total * 0.99,
                "saturated server must be shedding: {n503} of {total}"
            );
            rows.push((round, noop, reject));
        }
        println!(
            "server_reject: {conns} keep-alive connections on loopback, {run:?} per measurement"
        );
        println!("round  no-op 200 (req/s)  ShedLayer 503 (req/s)  ratio");
        for (round, noop, reject) in rows {
            println!("{round:>5}  {noop:>17.0}  {reject:>21.0}  {:.2}", reject / noop);
        }
        hold.abort();
    });
}
