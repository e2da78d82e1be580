//! IdempotencyLayer over PostgreSQL and Redis: two server instances on 127.0.0.1 sharing one
//! store execute each key exactly once; 409/422; and the crash guarantee.
#![cfg(all(feature = "postgres", feature = "redis-store"))]

mod common_server;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common_server::{pay, pay_app, send, serve, thousand_requests_hundred_keys, unique};
use http::StatusCode;
use http_body_util::Full;
use seawall_tower::server::IdempotencyLayer;
use seawall_tower::server::idempotency::key::{Owner, StoreKey, fingerprint, scope_of};
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
    let owner = Owner::random();
    let began = store.begin(&key, &fp, &owner, lease, Duration::from_secs(60)).await.unwrap();
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
    assert_eq!(store.begin(&key, &fp, &owner, long, long).await.unwrap(), Begin::Execute);
    assert_eq!(store.begin(&key, &fp, &owner, long, long).await.unwrap(), Begin::InFlight);
    store.abandon(&key, &owner).await.unwrap();
    assert_eq!(store.begin(&key, &fp, &owner, long, long).await.unwrap(), Begin::Unknown);
    let other = fingerprint(&http::Method::POST, "/pay", b"other");
    assert_eq!(store.begin(&key, &other, &owner, long, long).await.unwrap(), Begin::Mismatch);
    // And a released key executes again.
    let key = StoreKey { scope: scope_of(Some(TENANT)), key: "released-key".into() };
    assert_eq!(store.begin(&key, &fp, &owner, long, long).await.unwrap(), Begin::Execute);
    store.release(&key, &owner).await.unwrap();
    assert_eq!(store.begin(&key, &fp, &owner, long, long).await.unwrap(), Begin::Execute);
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

// ---------- cut requests settle exactly their own key ----------

/// Executions per `Idempotency-Key`, counted when the handler starts.
type PerKey = Arc<std::sync::Mutex<std::collections::HashMap<String, u32>>>;

/// `/pay` in the documented layer order (DeadlineLayer → IdempotencyLayer → ShedLayer →
/// handler): 8 slots, a 64-deep queue, 20 ms of work per execution.
fn cut_app(store: impl IdempotencyStore, runs: PerKey) -> axum::Router {
    use axum::routing::post;
    use seawall_tower::server::{DeadlineLayer, ShedLayer};
    let handler = move |headers: http::HeaderMap| {
        let runs = runs.clone();
        async move {
            let key = headers["idempotency-key"].to_str().unwrap_or("").to_owned();
            *runs.lock().unwrap().entry(key).or_insert(0) += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
            (StatusCode::CREATED, "paid")
        }
    };
    let shed = ShedLayer::new(std::num::NonZeroUsize::new(8).unwrap()).with_queue(64);
    // axum: the last `.layer` is the outermost.
    axum::Router::new()
        .route("/pay", post(handler))
        .layer(shed)
        .layer(patient(IdempotencyLayer::new(store)))
        .layer(DeadlineLayer::new())
}

fn pay_within(addr: std::net::SocketAddr, key: &str, ms: u64) -> http::Request<Full<Bytes>> {
    common_server::req("POST", addr, "/pay")
        .header("idempotency-key", key)
        .header("request-timeout-ms", ms.to_string())
        .body(Full::new(Bytes::from_static(b"10 EUR")))
        .unwrap()
}

/// 1,000 keyed requests, each cut by a 10 ms deadline — while the store begins its key, while
/// it waits in the ShedLayer queue, or while its handler runs — then retried with time to
/// spare, as a client would (again after a `409 in progress` or a `503`, up to 100 times).
/// Every key whose handler never ran executes exactly once on retry; every key whose handler
/// ran is never run again (its retry reads outcome unknown, or replays the answer of a handler
/// that finished as its deadline passed). Without the owner token and the
/// queue mark, keys cut in `begin` stay "in progress" for the whole 60 s lease and keys cut in
/// the queue read outcome unknown with 0 runs: both fail here.
async fn cut_requests_settle_their_own_keys(store: impl IdempotencyStore, tag: &str) {
    let runs: PerKey = Arc::default();
    let addr = serve(cut_app(store, runs.clone())).await;
    let keys: Vec<String> = (0..1000).map(|i| format!("{tag}-{i}")).collect();
    let mut first = Vec::new();
    for k in &keys {
        let r = pay_within(addr, k, 10);
        first.push(tokio::spawn(common_server::send_within(addr, r, Duration::from_secs(10))));
    }
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for t in first {
        let s = t.await.unwrap().map_or(0, |g| g.status.as_u16());
        *statuses.entry(s).or_default() += 1;
    }
    let before = runs.lock().unwrap().clone();
    let ran = before.len();
    eprintln!("{tag}: first answers {statuses:?}; handlers started for {ran} of 1000 keys");
    assert!(before.values().all(|&n| n == 1), "one execution per key at most");
    // Cut by the deadline (504) or shed at a full queue (503): either way not served now. How
    // the two split depends on the machine's speed.
    let refused: usize = [503, 504].iter().map(|c| statuses.get(c).copied().unwrap_or(0)).sum();
    assert!(refused >= 500, "most were cut or shed: {statuses:?}");
    assert!(
        statuses.get(&504).copied().unwrap_or(0) >= 100,
        "many cut by the deadline: {statuses:?}"
    );
    assert!(ran < 1000, "some keys were cut before their handler ran");

    let gate = Arc::new(tokio::sync::Semaphore::new(16));
    let mut second = Vec::new();
    for k in keys.clone() {
        let gate = gate.clone();
        second.push(tokio::spawn(async move {
            let _slot = gate.acquire().await.unwrap();
            for _ in 0..100 {
                let r = pay_within(addr, &k, 10_000);
                let Some(got) = common_server::send_within(addr, r, Duration::from_secs(20)).await
                else {
                    continue;
                };
                let in_progress = String::from_utf8_lossy(&got.body).contains("in-flight");
                let busy = got.status == StatusCode::SERVICE_UNAVAILABLE
                    || (got.status == StatusCode::CONFLICT && in_progress);
                if !busy {
                    return (k, got.status, String::from_utf8_lossy(&got.body).into_owned());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (k, StatusCode::CONFLICT, "still in progress after 100 tries".to_owned())
        }));
    }
    let after = {
        let mut out = Vec::new();
        for t in second {
            out.push(t.await.unwrap());
        }
        out
    };
    let now = runs.lock().unwrap().clone();
    let mut wrong = Vec::new();
    for (k, status, body) in &after {
        let (was, is) = (before.get(k).copied().unwrap_or(0), now.get(k).copied().unwrap_or(0));
        let ok = if was == 0 {
            is == 1 && *status == StatusCode::CREATED
        } else {
            // Outcome unknown, or the replay of a first answer that beat its deadline.
            let unknown = status.as_u16() == 409 && body.contains("outcome-unknown");
            is == 1 && (unknown || *status == StatusCode::CREATED)
        };
        if !ok {
            wrong.push(format!("{k}: ran {was} then {is}, retry {status} {body}"));
        }
    }
    let never = after.len() - ran;
    eprintln!("{tag}: {never} keys never ran and executed once on retry; {ran} were never re-run");
    assert!(
        wrong.is_empty(),
        "{} of 1000 keys wrong, e.g. {:?}",
        wrong.len(),
        &wrong[..3.min(wrong.len())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_cut_requests_settle_their_own_keys() {
    use seawall_tower::server::idempotency::store::memory::MemoryStore;
    cut_requests_settle_their_own_keys(MemoryStore::new(), "memory-cut").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_cut_requests_settle_their_own_keys() {
    let table = unique("seawall_idem_cut");
    cut_requests_settle_their_own_keys(pg_store(&table).await, &table).await;
    drop_table(&table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cut_requests_settle_their_own_keys() {
    let prefix = format!("{}:", unique("seawall-test-cut"));
    cut_requests_settle_their_own_keys(redis_store(&prefix).await, &prefix).await;
    redis_cleanup(&prefix).await;
}

// ---------- one principal cannot deny new keys to the others ----------

/// `/pay` behind DeadlineLayer → IdempotencyLayer (scoped by `x-tenant`), 50 ms of work.
fn tenants_app(store: impl IdempotencyStore, runs: PerKey) -> axum::Router {
    use axum::routing::post;
    use seawall_tower::server::DeadlineLayer;
    use seawall_tower::server::idempotency::scope::header_scope;
    let handler = move |headers: http::HeaderMap| {
        let runs = runs.clone();
        async move {
            let tenant = headers["x-tenant"].to_str().unwrap_or("").to_owned();
            let key = headers["idempotency-key"].to_str().unwrap_or("").to_owned();
            *runs.lock().unwrap().entry(format!("{tenant}/{key}")).or_insert(0) += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
            (StatusCode::CREATED, "paid")
        }
    };
    let idem = IdempotencyLayer::new(store)
        .with_store_timeout(Duration::from_secs(20))
        .with_scope(header_scope(http::HeaderName::from_static("x-tenant")));
    axum::Router::new().route("/pay", post(handler)).layer(idem).layer(DeadlineLayer::new())
}

fn tenant_pay(tenant: &str, key: &str, ms: u64) -> http::Request<axum::body::Body> {
    http::Request::post("/pay")
        .header("x-tenant", tenant)
        .header("idempotency-key", key)
        .header("request-timeout-ms", ms.to_string())
        .body(axum::body::Body::from("10 EUR"))
        .unwrap()
}

/// Calls `app` in process (the same layers a server runs) with at most 64 requests at once.
async fn statuses(
    app: &axum::Router,
    reqs: Vec<http::Request<axum::body::Body>>,
) -> std::collections::BTreeMap<u16, usize> {
    use tower::ServiceExt;
    let gate = Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = Vec::with_capacity(reqs.len());
    for r in reqs {
        let (app, gate) = (app.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.unwrap();
            app.oneshot(r).await.map_or(0, |res| res.status().as_u16())
        }));
    }
    let mut out = std::collections::BTreeMap::new();
    for t in tasks {
        *out.entry(t.await.unwrap()).or_default() += 1;
    }
    out
}

/// Principal "mallory" sends 10,000 keyed requests, each cut by a `cut_ms` deadline while its
/// 50 ms handler runs (10 ms in memory; 40 ms for the networked stores, whose `begin` under
/// this burst takes longer than 10 ms, so that their handlers start too) (each then an outcome-unknown record for the whole TTL). Principal
/// "alice" then sends 100 new keys: all execute. Every key mallory got executed, sent again,
/// is never run a second time. Returns alice's answers and how many of mallory's keys executed.
async fn one_principal_cannot_fill_the_store(
    store: impl IdempotencyStore,
    cut_ms: u64,
) -> (std::collections::BTreeMap<u16, usize>, usize) {
    let runs: PerKey = Arc::default();
    let app = tenants_app(store, runs.clone());
    let flood = (0..10_000).map(|i| tenant_pay("mallory", &format!("m-{i}"), cut_ms)).collect();
    let mallory = statuses(&app, flood).await;
    let ran: Vec<String> = runs.lock().unwrap().keys().cloned().collect();
    eprintln!("mallory: {mallory:?}, {} keys executed", ran.len());
    let alice =
        statuses(&app, (0..100).map(|i| tenant_pay("alice", &format!("a-{i}"), 10_000)).collect())
            .await;
    eprintln!("alice: {alice:?}");
    let again = ran.iter().map(|k| tenant_pay("mallory", &k["mallory/".len()..], 10_000)).collect();
    let again = statuses(&app, again).await;
    eprintln!("mallory's executed keys again: {again:?}");
    let runs = runs.lock().unwrap();
    assert!(runs.values().all(|&n| n == 1), "a stored key ran twice");
    assert!(again.keys().all(|&s| s == 409 || s == 201), "{again:?}");
    (alice, ran.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_one_principal_cannot_fill_the_store() {
    use seawall_tower::server::idempotency::store::memory::MemoryStore;
    let (alice, _) = one_principal_cannot_fill_the_store(MemoryStore::new(), 10).await;
    assert_eq!(alice, [(201, 100)].into(), "the other principal's new keys all execute");
}

/// The control: the same flood against a memory store without per-principal bounds leaves the
/// other principal nothing (so the test above can fail) — except the few slots that mallory's
/// requests cut before their handler ran released again (a loaded machine cuts some there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_without_shares_one_principal_fills_the_memory_store() {
    use seawall_tower::server::idempotency::store::memory::{DEFAULT_CAPACITY, MemoryStore};
    let store = MemoryStore::new().scope_share(1.0).scope_unknown(usize::MAX);
    let (alice, executed) = one_principal_cannot_fill_the_store(store, 10).await;
    let freed = DEFAULT_CAPACITY - executed;
    assert!(freed < 50, "most of mallory's keys must execute for the control to mean anything");
    let served = alice.get(&201).copied().unwrap_or(0);
    assert!(served <= freed, "only released slots serve alice: {alice:?}, {freed} freed");
    assert_eq!(alice.get(&503).copied().unwrap_or(0), 100 - served, "store full: {alice:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_one_principal_cannot_fill_the_store() {
    let table = unique("seawall_idem_share");
    let (alice, _) = one_principal_cannot_fill_the_store(pg_store(&table).await, 40).await;
    assert_eq!(alice, [(201, 100)].into());
    drop_table(&table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_one_principal_cannot_fill_the_store() {
    let prefix = format!("{}:", unique("seawall-test-share"));
    let (alice, _) = one_principal_cannot_fill_the_store(redis_store(&prefix).await, 40).await;
    assert_eq!(alice, [(201, 100)].into());
    redis_cleanup(&prefix).await;
}
