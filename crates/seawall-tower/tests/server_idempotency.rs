//! IdempotencyLayer (in-memory store) and bad headers, on a real axum server on 127.0.0.1.
#![cfg(feature = "server")]

mod common_server;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common_server::{one_tenant, pay, pay_app, req, send, serve, thousand_requests_hundred_keys};
use http::{HeaderName, StatusCode};
use http_body_util::Full;
use seawall_tower::server::idempotency::scope::header_scope;
use seawall_tower::server::{DeadlineLayer, IdempotencyLayer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_409_while_in_flight_and_422_on_a_different_payload() {
    let n = Arc::new(AtomicU64::new(0));
    let app = pay_app(n.clone(), Duration::from_millis(200)).layer(one_tenant());
    let addr = serve(app).await;

    let first = tokio::spawn(send(addr, pay(addr, "k-1", "10 EUR")));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let busy = send(addr, pay(addr, "k-1", "10 EUR")).await.unwrap();
    assert_eq!(busy.status, StatusCode::CONFLICT);
    let other = send(addr, pay(addr, "k-1", "99 EUR")).await.unwrap();
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(other.headers["content-type"], "application/problem+json");

    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    let again = send(addr, pay(addr, "k-1", "10 EUR")).await.unwrap();
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.body, first.body, "the stored body, not a new execution");
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.headers["content-type"], "text/plain");
    assert!(again.headers.get("x-not-stored").is_none(), "only the configured headers are stored");
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_scoped_per_principal_over_http() {
    let n = Arc::new(AtomicU64::new(0));
    // A gateway in front authenticated the caller and set `x-tenant`.
    let layer =
        IdempotencyLayer::in_memory().with_scope(header_scope(HeaderName::from_static("x-tenant")));
    let app = pay_app(n.clone(), Duration::ZERO).layer(layer);
    let addr = serve(app).await;
    let as_client = |who: &'static str| {
        req("POST", addr, "/pay")
            .header("idempotency-key", "same")
            .header("x-tenant", who)
            .body(Full::new(Bytes::from_static(b"1 EUR")))
            .unwrap()
    };
    let a = send(addr, as_client("alice")).await.unwrap();
    let b = send(addr, as_client("bob")).await.unwrap();
    assert_eq!((a.status, b.status), (StatusCode::CREATED, StatusCode::CREATED));
    assert!(b.headers.get("idempotent-replayed").is_none(), "bob never sees alice's response");
    assert_eq!(n.load(Ordering::SeqCst), 2);
    // No tenant: refused, not pooled.
    let anon = send(addr, pay(addr, "same", "1 EUR")).await.unwrap();
    assert_eq!(anon.status, StatusCode::UNAUTHORIZED);
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

/// Control for the fleet tests: two replicas with *private* in-memory stores, under the same
/// traffic, execute keys more than once. If this ever showed exactly 100, the traffic would not
/// be reaching both replicas with the same key, and the shared-store tests would prove nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_two_private_stores_execute_keys_more_than_once() {
    let n = Arc::new(AtomicU64::new(0));
    let work = Duration::from_millis(20);
    let a = serve(pay_app(n.clone(), work).layer(one_tenant())).await;
    let b = serve(pay_app(n.clone(), work).layer(one_tenant())).await;
    let counts = thousand_requests_hundred_keys(a, b, "private").await;
    let executions = n.load(Ordering::SeqCst);
    eprintln!("private stores: {executions} executions, statuses {counts:?}");
    assert!(executions > 100, "private stores must re-execute keys seen by both: {executions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_headers_get_a_clear_4xx_or_are_clamped_never_a_panic() {
    let n = Arc::new(AtomicU64::new(0));
    let app = pay_app(n.clone(), Duration::ZERO).layer(one_tenant()).layer(DeadlineLayer::new());
    let addr = serve(app).await;
    let with = |name: &'static str, value: &'static [u8]| {
        req("POST", addr, "/pay")
            .header(name, http::HeaderValue::from_bytes(value).unwrap())
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let cases: [(&str, &[u8], StatusCode); 9] = [
        ("request-timeout-ms", b"-5", StatusCode::BAD_REQUEST),
        ("request-timeout-ms", b"5.0", StatusCode::BAD_REQUEST),
        ("request-timeout-ms", b"0", StatusCode::GATEWAY_TIMEOUT),
        ("request-timeout-ms", b"99999999999999999999999", StatusCode::CREATED),
        ("request-timeout-ms", b"9999999999", StatusCode::CREATED),
        ("grpc-timeout", b"1Q", StatusCode::BAD_REQUEST),
        ("idempotency-key", b"has space", StatusCode::BAD_REQUEST),
        ("idempotency-key", b"\"unterminated", StatusCode::BAD_REQUEST),
        ("idempotency-key", b"\xff\xfe", StatusCode::BAD_REQUEST),
    ];
    for (name, value, want) in cases {
        let got = send(addr, with(name, value)).await.expect("answered");
        assert_eq!(got.status, want, "{name}: {value:?}");
    }
    let long = "k".repeat(256);
    let r = req("POST", addr, "/pay")
        .header("idempotency-key", long)
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(send(addr, r).await.unwrap().status, StatusCode::BAD_REQUEST);
    let r = req("POST", addr, "/pay")
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(send(addr, r).await.unwrap().status, StatusCode::BAD_REQUEST, "two keys");
    assert_eq!(n.load(Ordering::SeqCst), 2, "only the two clamped-timeout requests ran");
}

/// A keyed request declaring a 10 GiB body, whose body never comes: `413` at once over real
/// HTTP, not a slot held until some timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_gib_content_length_is_refused_413_at_once_over_http() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let n = Arc::new(AtomicU64::new(0));
    let addr = serve(pay_app(n.clone(), Duration::ZERO).layer(one_tenant())).await;
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = "POST /pay HTTP/1.1\r\nhost: x\r\nidempotency-key: big\r\n\
                content-length: 10737418240\r\n\r\n";
    sock.write_all(head.as_bytes()).await.unwrap();
    let t0 = std::time::Instant::now();
    let mut buf = vec![0u8; 1024];
    let got = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf))
        .await
        .expect("answered without waiting for the body")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..got]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(n.load(Ordering::SeqCst), 0);
}

/// Slow bodies must not hold admission slots: with the layers in the documented order
/// (`IdempotencyLayer` outside `ShedLayer`), 8 connections trickling keyed bodies at a server
/// admitting 4 at once leave a normal request served at once. (In the other order the trickles
/// hold all 4 slots and the normal request is shed: 503.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_bodies_read_outside_admission_hold_no_slot() {
    use std::num::NonZeroUsize;
    use tokio::io::AsyncWriteExt;
    let n = Arc::new(AtomicU64::new(0));
    let shed = seawall_tower::server::ShedLayer::new(NonZeroUsize::new(4).unwrap());
    // axum: the last `.layer` is the outermost.
    let app = pay_app(n.clone(), Duration::ZERO).layer(shed).layer(one_tenant());
    let addr = serve(app).await;
    let mut trickles = Vec::new();
    for i in 0..8 {
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /pay HTTP/1.1\r\nhost: x\r\nidempotency-key: slow-{i}\r\ncontent-length: 100\r\n\r\nx"
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        trickles.push(sock); // held open, 99 bytes short
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let normal = req("POST", addr, "/pay").body(Full::new(Bytes::from_static(b"1 EUR"))).unwrap();
    let got = common_server::send_within(addr, normal, Duration::from_secs(3))
        .await
        .expect("answered within 3 s");
    assert_eq!(got.status, StatusCode::CREATED);
    assert_eq!(n.load(Ordering::SeqCst), 1, "only the normal request ran");
    drop(trickles);
}
