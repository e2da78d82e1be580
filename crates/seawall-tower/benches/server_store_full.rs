//! A full in-memory idempotency store under a new-key hammer: the latency of replays (stored
//! keys answered from the store) while another task sends new keys that are all refused, against
//! the same replays with no hammer, same store, same run. A refusal that scanned the store under
//! its lock would show here as a p99 several times the quiet one.
//!
//! `cargo bench -p seawall-tower --no-default-features --features server --bench server_store_full`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use seawall_tower::server::IdempotencyLayer;
use seawall_tower::server::idempotency::scope::header_scope;
use seawall_tower::server::idempotency::store::memory::MemoryStore;
use tower::{Layer, Service, ServiceExt};

type Body = Full<Bytes>;

fn pay(tenant: &str, key: &str) -> Request<Body> {
    Request::post("/pay")
        .header("x-tenant", tenant)
        .header("idempotency-key", key)
        .body(Full::new(Bytes::from_static(b"10 EUR")))
        .expect("request")
}

/// p50 and p99 of `n` sequential replays, in microseconds.
async fn replays<S>(svc: &S, n: usize) -> (f64, f64)
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let r = pay(&format!("t{}", i % 10), &format!("k{}", (i / 10) % 1_000));
        let t0 = Instant::now();
        let res = svc.clone().oneshot(r).await.expect("answer");
        lat.push(t0.elapsed());
        assert_eq!(res.status(), StatusCode::CREATED, "a replay");
    }
    lat.sort();
    let us = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6;
    (us(0.5), us(0.99))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let handler = tower::service_fn(|_r: Request<Body>| async {
            let mut res = Response::new(Full::new(Bytes::from_static(b"paid")));
            *res.status_mut() = StatusCode::CREATED;
            Ok::<_, std::convert::Infallible>(res)
        });
        // 10,000 records: ten principals with 1,000 each (within their shares) fill it.
        let svc = IdempotencyLayer::new(MemoryStore::new())
            .with_scope(header_scope(http::HeaderName::from_static("x-tenant")))
            .layer(handler);
        for t in 0..10 {
            for k in 0..1_000 {
                let res = svc.clone().oneshot(pay(&format!("t{t}"), &format!("k{k}"))).await;
                assert_eq!(res.expect("answer").status(), StatusCode::CREATED);
            }
        }
        let n = 20_000;
        println!("server_store_full: replays from a full 10,000-record memory store, {n} per row");
        for round in 0..3 {
            let quiet = replays(&svc, n).await;
            let stop = Arc::new(AtomicBool::new(false));
            let hammer = {
                let (svc, stop) = (svc.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut refused = 0u64;
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let r = pay("mallory", &format!("new-{round}-{i}"));
                        let res = svc.clone().oneshot(r).await.expect("answer");
                        refused += u64::from(res.status() == StatusCode::SERVICE_UNAVAILABLE);
                        tokio::task::yield_now().await;
                    }
                    refused
                })
            };
            tokio::time::sleep(Duration::from_millis(50)).await;
            let hammered = replays(&svc, n).await;
            stop.store(true, Ordering::Relaxed);
            let refused = hammer.await.expect("hammer");
            println!(
                "round {round}: quiet p50 {:.1} µs p99 {:.1} µs | hammered p50 {:.1} µs p99 {:.1} µs \
                 ({refused} new keys refused meanwhile) | p99 ratio {:.2}",
                quiet.0,
                quiet.1,
                hammered.0,
                hammered.1,
                hammered.1 / quiet.1
            );
        }
    });
}
