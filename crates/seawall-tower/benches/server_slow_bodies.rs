//! Slow bodies against the door: how much of its quiet rate a server still serves while 96
//! connections trickle their bodies (one byte every 100 ms of a declared 1,000) at a handler
//! that reads its body inside a `ShedLayer` slot (32 slots, 16 queued). With `BufferBodyLayer`
//! outside admission the trickles hold connections, not slots; without it they hold every slot.
//! Four keep-alive clients in a closed loop, 2 s per measurement, quiet and under attack
//! alternated, three rounds; the figure is the `200`s per second under attack ÷ quiet, same
//! server, same round.
//!
//! `cargo bench -p seawall-tower --no-default-features --features server,axum --bench server_slow_bodies`

mod server_common;
#[path = "server_common/slow_bodies.rs"]
mod slow_bodies;

use std::net::SocketAddr;
use std::time::Duration;

use http::StatusCode;
use server_common::{closed_loop, runtime, serve};
use slow_bodies::{app, trickles};

/// `200`s per second of 4 closed-loop clients for 2 s.
async fn served(addr: SocketAddr) -> f64 {
    let run = Duration::from_secs(2);
    let (_, ok) = closed_loop(addr, "/upload", 4, run, StatusCode::OK).await;
    ok as f64 / run.as_secs_f64()
}

fn main() {
    runtime().block_on(async {
        let servers =
            [("BufferBodyLayer", serve(app(true)).await), ("none", serve(app(false)).await)];
        println!(
            "{:<16} {:>5} {:>12} {:>14} {:>7}",
            "outside admission", "round", "quiet 200/s", "attack 200/s", "ratio"
        );
        for round in 1..=3 {
            for (name, addr) in servers {
                let quiet = served(addr).await;
                let attack = trickles(addr).await;
                let under = served(addr).await;
                attack.iter().for_each(tokio::task::JoinHandle::abort);
                tokio::time::sleep(Duration::from_millis(300)).await; // the slots come back
                println!(
                    "{name:<16} {round:>5} {quiet:>12.0} {under:>14.0} {:>7.2}",
                    if quiet > 0.0 { under / quiet } else { 0.0 }
                );
            }
        }
    });
}
