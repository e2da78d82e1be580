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

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use http::StatusCode;
use seawall_tower::server::{BufferBodyLayer, ShedLayer};
use server_common::{closed_loop, runtime, serve};
use tokio::io::AsyncWriteExt;

fn app(buffered: bool) -> Router {
    let handler = |body: Bytes| async move { body.len().to_string() };
    let app = Router::new().route("/upload", post(handler).get(handler));
    // axum: the last `.layer` is the outermost.
    let app = app.layer(ShedLayer::new(NonZeroUsize::new(32).expect("32 > 0")).with_queue(16));
    if buffered { app.layer(BufferBodyLayer::new()) } else { app }
}

/// 96 connections that declare 1,000-byte bodies and send a byte every 100 ms (for at most
/// 30 s, or until aborted).
async fn trickles(addr: SocketAddr) -> Vec<tokio::task::JoinHandle<()>> {
    let mut out = Vec::new();
    for i in 0..96 {
        let mut sock = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "POST /upload HTTP/1.1\r\nhost: x\r\nx-trickle: {i}\r\ncontent-length: 1000\r\n\r\n"
        );
        sock.write_all(head.as_bytes()).await.expect("head");
        out.push(tokio::spawn(async move {
            for _ in 0..300 {
                if sock.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // every trickle is in the server
    out
}

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
