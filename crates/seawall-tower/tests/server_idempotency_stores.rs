//! IdempotencyLayer over PostgreSQL and Redis: two server instances on 127.0.0.1 sharing one
//! store execute each key exactly once; 409/422; and the crash guarantee.
#![cfg(all(feature = "postgres", feature = "redis-store"))]

mod common_server;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common_server::{pay, pay_app, send, serve, thousand_requests_hundred_keys, unique};
use http::StatusCode;
use seawall_tower::server::IdempotencyLayer;
use seawall_tower::server::idempotency::key::{StoreKey, fingerprint, scope_of};
use seawall_tower::server::idempotency::store::postgres::PostgresStore;
use seawall_tower::server::idempotency::store::redis::{RESPONSE_TIMEOUT, RedisStore};
use seawall_tower::server::idempotency::{Begin, IdempotencyStore};

fn pg_pool() -> deadpool_postgres::Pool {
    let mut cfg = deadpool_postgres::Config::new();
    cfg.host = Some("127.0.0.1".into());
    cfg.port = Some(5432);
    cfg.user = Some(std::env::var("SEAWALL_PG_USER").unwrap_or_else(|_| "postgres".into()));
    cfg.dbname = Some("test".into());
    cfg.create_pool(Some(deadpool_postgres::Runtime::Tokio1), tokio_postgres::NoTls).expect("pool")
}

async fn pg_store(table: &str) -> PostgresStore {
    let store = PostgresStore::with_table(pg_pool(), table).expect("valid table name");
    store.migrate().await.expect("migration applies");
    store.migrate().await.expect("migration is idempotent");
    store
}

async fn drop_table(table: &str) {
    let client = pg_pool().get().await.expect("pg");
    client.batch_execute(&format!("DROP TABLE IF EXISTS {table}")).await.expect("drop");
}

async fn redis_store(prefix: &str) -> RedisStore {
    let client = redis::Client::open("redis://127.0.0.1:6379/").expect("redis url");
    let cfg = redis::AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
    let conn = client.get_multiplexed_async_connection_with_config(&cfg).await.expect("redis");
    RedisStore::new(conn, prefix)
}

async fn redis_cleanup(prefix: &str) {
    let client = redis::Client::open("redis://127.0.0.1:6379/").expect("redis url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.expect("keys");
    if !keys.is_empty() {
        let _: i64 = redis::cmd("DEL").arg(keys).query_async(&mut conn).await.expect("del");
    }
}

/// The tests' single tenant (their traffic carries no credentials).
fn tenant(layer: IdempotencyLayer) -> IdempotencyLayer {
    layer.with_scope(|_| Some(TENANT.to_vec()))
}

/// The fleet tests measure exactly-once under a 1,000-request burst on a shared 2-core machine,
/// not latency: a generous store timeout keeps pool queueing from turning into 503s.
fn patient(layer: IdempotencyLayer) -> IdempotencyLayer {
    tenant(layer).with_store_timeout(Duration::from_secs(20))
}

const TENANT: &[u8] = b"test-tenant";

/// Two instances, one store: 1,000 concurrent requests, 100 keys, each key sent to both
/// instances, exactly 100 executions. (The control with private stores, which must show more,
/// is `control_two_private_stores_execute_keys_more_than_once` in `server_idempotency.rs`.)
async fn fleet_runs_each_key_once(
    a_store: impl IdempotencyStore,
    b_store: impl IdempotencyStore,
    tag: &str,
) {
    let n = Arc::new(AtomicU64::new(0));
    let work = Duration::from_millis(20);
    let a = serve(pay_app(n.clone(), work).layer(patient(IdempotencyLayer::new(a_store)))).await;
    let b = serve(pay_app(n.clone(), work).layer(patient(IdempotencyLayer::new(b_store)))).await;
    let counts = thousand_requests_hundred_keys(a, b, tag).await;
    eprintln!("{tag}: statuses {counts:?}");
    assert_eq!(n.load(Ordering::SeqCst), 100, "exactly one execution per key: {counts:?}");
    let ok = counts.get(&201).copied().unwrap_or(0);
    let busy = counts.get(&409).copied().unwrap_or(0);
    assert_eq!(ok + busy, 1000, "every answer is the response or 409 in flight: {counts:?}");
    assert!(ok >= 100);
}

/// 409 while in flight, 422 on another payload, and the crash guarantee: a key whose execution
/// started but never stored a response is never executed again.
async fn conflicts_and_crash(store: impl IdempotencyStore + Clone) {
    let n = Arc::new(AtomicU64::new(0));
    let lease = Duration::from_millis(300);
    let layer = tenant(IdempotencyLayer::new(store.clone())).with_lease(lease);
    let addr = serve(pay_app(n.clone(), Duration::from_millis(200)).layer(layer)).await;

    let first = tokio::spawn(send(addr, pay(addr, "k", "10 EUR")));
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(send(addr, pay(addr, "k", "10 EUR")).await.unwrap().status, StatusCode::CONFLICT);
    assert_eq!(
        send(addr, pay(addr, "k", "11 EUR")).await.unwrap().status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let first = first.await.unwrap().unwrap();
    let again = send(addr, pay(addr, "k", "10 EUR")).await.unwrap();
    assert_eq!((again.status, &again.body), (StatusCode::CREATED, &first.body));
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(n.load(Ordering::SeqCst), 1);

    // A replica begins "crash-key" and dies before storing: simulate with the store directly,
    // exactly as the layer would have begun it (the tenant's scope, same fingerprint).
    let key = StoreKey { scope: scope_of(Some(TENANT)), key: "crash-key".into() };
    let fp = fingerprint(&http::Method::POST, "/pay", b"10 EUR");
    let began = store.begin(&key, &fp, lease, Duration::from_secs(60)).await.unwrap();
    assert_eq!(began, Begin::Execute);
    let during = send(addr, pay(addr, "crash-key", "10 EUR")).await.unwrap();
    assert_eq!(during.status, StatusCode::CONFLICT, "in flight during the lease");
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    let after = send(addr, pay(addr, "crash-key", "10 EUR")).await.unwrap();
    assert_eq!(
        after.status,
        StatusCode::CONFLICT,
        "after the lease: outcome unknown, not re-executed"
    );
    assert!(String::from_utf8_lossy(&after.body).contains("outcome-unknown"));
    assert_eq!(n.load(Ordering::SeqCst), 1, "the crashed key's handler never ran here");

    // A cancelled execution (the layer's lease guard calls `abandon`): outcome unknown at once,
    // without waiting for the lease, and the expiry is kept (a later begin still sees it).
    let key = StoreKey { scope: scope_of(Some(TENANT)), key: "cancelled-key".into() };
    let long = Duration::from_secs(600);
    assert_eq!(store.begin(&key, &fp, long, long).await.unwrap(), Begin::Execute);
    assert_eq!(store.begin(&key, &fp, long, long).await.unwrap(), Begin::InFlight);
    store.abandon(&key, &fp).await.unwrap();
    assert_eq!(store.begin(&key, &fp, long, long).await.unwrap(), Begin::Unknown);
    let other = fingerprint(&http::Method::POST, "/pay", b"other");
    assert_eq!(store.begin(&key, &other, long, long).await.unwrap(), Begin::Mismatch);
    // And a released key executes again.
    let key = StoreKey { scope: scope_of(Some(TENANT)), key: "released-key".into() };
    assert_eq!(store.begin(&key, &fp, long, long).await.unwrap(), Begin::Execute);
    store.release(&key, &fp).await.unwrap();
    assert_eq!(store.begin(&key, &fp, long, long).await.unwrap(), Begin::Execute);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_instances_execute_each_key_once() {
    let table = unique("seawall_idem_fleet");
    let (a, b) = (pg_store(&table).await, pg_store(&table).await);
    fleet_runs_each_key_once(a, b, &table).await;
    drop_table(&table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_conflicts_and_crash_guarantee() {
    let table = unique("seawall_idem_crash");
    conflicts_and_crash(pg_store(&table).await).await;
    drop_table(&table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_two_instances_execute_each_key_once() {
    let prefix = format!("{}:", unique("seawall-test-fleet"));
    let (a, b) = (redis_store(&prefix).await, redis_store(&prefix).await);
    fleet_runs_each_key_once(a, b, &prefix).await;
    redis_cleanup(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_conflicts_and_crash_guarantee() {
    let prefix = format!("{}:", unique("seawall-test-crash"));
    conflicts_and_crash(redis_store(&prefix).await).await;
    redis_cleanup(&prefix).await;
}
