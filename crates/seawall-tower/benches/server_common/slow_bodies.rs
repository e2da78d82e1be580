//! The slow-body attack, shared by `benches/server_slow_bodies.rs` (the figure) and
//! `tests/server_slow_bodies.rs` (the claim): a handler that reads its body inside a
//! `ShedLayer` slot, and 96 connections that trickle theirs.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use seawall_tower::server::{BufferBodyLayer, ShedLayer};
use tokio::io::AsyncWriteExt;

/// `POST /upload` (and `GET`) reading its body, behind `ShedLayer` (32 slots, 16 queued), with
/// a `BufferBodyLayer` outside admission if `buffered`.
pub(crate) fn app(buffered: bool) -> Router {
    let handler = |body: Bytes| async move { body.len().to_string() };
    let app = Router::new().route("/upload", post(handler).get(handler));
    // axum: the last `.layer` is the outermost.
    let app = app.layer(ShedLayer::new(NonZeroUsize::new(32).expect("32 > 0")).with_queue(16));
    if buffered { app.layer(BufferBodyLayer::new()) } else { app }
}

/// 96 connections that declare 1,000-byte bodies and send a byte every 100 ms (for at most
/// 30 s, or until aborted); returns once every trickle is in the server.
pub(crate) async fn trickles(addr: SocketAddr) -> Vec<tokio::task::JoinHandle<()>> {
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
