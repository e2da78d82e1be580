//! A black-holed PostgreSQL: the store's address accepts TCP connections and never answers
//! (a hung server, a half-dead proxy). Keyed requests must get `503` + `Retry-After` within the
//! store timeout, not hang until the client gives up. Loopback only; the listener is ours.
#![cfg(feature = "postgres")]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use seawall_tower::server::IdempotencyLayer;
use seawall_tower::server::idempotency::scope::Principal;
use seawall_tower::server::idempotency::store::postgres::PostgresStore;
use tower::{Layer, ServiceExt};

/// Accepts every connection and holds it open without a byte in reply, until dropped.
struct BlackHole {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl BlackHole {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            // Bounded: a test makes a handful of connections.
            while held.len() < 64 {
                match listener.accept().await {
                    Ok((sock, _)) => held.push(sock),
                    Err(_) => break,
                }
            }
            std::future::pending::<()>().await;
        });
        BlackHole { port, task }
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_postgres_answers_503_within_the_store_timeout() {
    let hole = BlackHole::start().await;
    let mut cfg = deadpool_postgres::Config::new();
    cfg.host = Some("127.0.0.1".into());
    cfg.port = Some(hole.port);
    cfg.user = Some("postgres".into());
    cfg.dbname = Some("test".into());
    let pool = cfg
        .create_pool(Some(deadpool_postgres::Runtime::Tokio1), tokio_postgres::NoTls)
        .expect("pool");
    let n = Arc::new(AtomicU64::new(0));
    let count = n.clone();
    let handler = tower::service_fn(move |_req: Request<Full<Bytes>>| {
        count.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"paid")))) }
    });
    let layer = IdempotencyLayer::new(PostgresStore::new(pool))
        .with_store_timeout(Duration::from_millis(300));
    let metrics = layer.metrics_handle();
    let svc = layer.layer(handler);
    for i in 0..3 {
        let req = Request::post("/pay")
            .header("idempotency-key", format!("k{i}"))
            .extension(Principal::user("t"))
            .body(Full::new(Bytes::from_static(b"10 EUR")))
            .unwrap();
        let t0 = Instant::now();
        let res = tokio::time::timeout(Duration::from_secs(5), svc.clone().oneshot(req))
            .await
            .expect("answered within 5 s, not hung")
            .unwrap();
        let took = t0.elapsed();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        let ra: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=5).contains(&ra));
        assert!(took < Duration::from_secs(2), "bounded by the 300 ms store timeout: {took:?}");
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert!(String::from_utf8_lossy(&body).contains("idempotency-store-unavailable"));
    }
    let s = metrics.snapshot();
    assert_eq!((s.store_timeouts, s.store_unavailable), (3, 3), "{s:?}");
    assert_eq!(n.load(Ordering::SeqCst), 0, "fail closed");
}
