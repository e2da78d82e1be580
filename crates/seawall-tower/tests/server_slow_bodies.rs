//! Slow unkeyed bodies cannot hold the door: 96 connections trickling their bodies at a server
//! whose handler reads the body inside a `ShedLayer` slot (32 slots, 16 queued). With a
//! `BufferBodyLayer` outside admission every other request is still served; the control without
//! it shows the attack working (the trickles hold every slot and the rest is shed).
#![cfg(feature = "axum")]

mod common_server;
#[path = "../benches/server_common/slow_bodies.rs"]
mod slow_bodies;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common_server::{req, send_within, serve};
use http_body_util::Full;
use seawall_tower::server::BufferBodyLayer;
use slow_bodies::{app, trickles};

/// 4 closed-loop clients sending small bodies for `span` (at most 5,000 requests): (served,
/// refused or failed, served per second).
async fn normal_load(addr: std::net::SocketAddr, span: Duration) -> (u64, u64, f64) {
    let t0 = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..4 {
        workers.push(tokio::spawn(async move {
            let (mut ok, mut bad) = (0u64, 0u64);
            while t0.elapsed() < span && ok + bad < 1_250 {
                let r = req("POST", addr, "/upload")
                    .body(Full::new(Bytes::from_static(b"hello")))
                    .unwrap();
                match send_within(addr, r, Duration::from_secs(2)).await {
                    Some(g) if g.status == http::StatusCode::OK => ok += 1,
                    _ => bad += 1,
                }
            }
            (ok, bad)
        }));
    }
    let (mut ok, mut bad) = (0, 0);
    for w in workers {
        let (o, b) = w.await.unwrap();
        ok += o;
        bad += b;
    }
    (ok, bad, ok as f64 / t0.elapsed().as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_read_before_admission_leave_every_other_request_served() {
    let addr = serve(app(true)).await;
    let span = Duration::from_millis(800);
    let (ok0, bad0, rate0) = normal_load(addr, span).await;
    assert_eq!(bad0, 0, "no attack: everything served");
    let attack = trickles(addr).await;
    let (ok1, bad1, rate1) = normal_load(addr, span).await;
    eprintln!(
        "buffered: {ok0} served at {rate0:.0}/s without the attack, {ok1} at {rate1:.0}/s \
         ({:.2}x) with 96 slow bodies; {bad1} refused",
        rate1 / rate0
    );
    assert_eq!(bad1, 0, "with 96 slow bodies, every other request is still served");
    assert!(ok1 > 0);
    attack.iter().for_each(tokio::task::JoinHandle::abort);
}

/// The control: without the layer the trickles hold all 32 slots and fill the queue, and the
/// other requests are shed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_slow_bodies_read_inside_a_slot_shed_everyone_else() {
    let addr = serve(app(false)).await;
    let attack = trickles(addr).await;
    let (ok, bad, _) = normal_load(addr, Duration::from_millis(800)).await;
    eprintln!("unbuffered: {ok} served, {bad} refused with 96 slow bodies");
    assert!(bad > 9 * ok, "the attack works without the layer: {ok} served, {bad} refused");
    attack.iter().for_each(tokio::task::JoinHandle::abort);
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_413_before_any_slot_is_taken() {
    use tower::{Layer, ServiceExt};
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let inner = {
        let seen = seen.clone();
        tower::service_fn(move |_r: http::Request<axum::body::Body>| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::empty()))
            }
        })
    };
    let svc = BufferBodyLayer::new().with_max(10).layer(inner);
    let big = http::Request::post("/")
        .header("content-length", "11")
        .body(axum::body::Body::from("x"))
        .unwrap();
    let res = svc.clone().oneshot(big).await.unwrap();
    assert_eq!(res.status(), http::StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    // Undeclared but longer than the limit: 413 while reading; within it: passed on, read.
    let long = http::Request::post("/").body(axum::body::Body::from("0123456789ab")).unwrap();
    assert_eq!(
        svc.clone().oneshot(long).await.unwrap().status(),
        http::StatusCode::PAYLOAD_TOO_LARGE
    );
    let fine = http::Request::post("/").body(axum::body::Body::from("0123456789")).unwrap();
    assert_eq!(svc.oneshot(fine).await.unwrap().status(), http::StatusCode::OK);
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1, "only the small body reached it");
}
