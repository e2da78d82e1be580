//! Real faults under the idempotency layer and the fleet switch: a replica killed with
//! `SIGKILL` in the middle of a keyed request, PostgreSQL stopped and started during traffic,
//! Redis shut down and restarted under the fleet switch and the Redis store.
//!
//! These tests restart the machine's shared PostgreSQL (127.0.0.1:5432) and Redis
//! (127.0.0.1:6379), so they live in their own test binary (cargo runs test binaries one after
//! another) and take [`SERIAL`] so its tests never overlap each other. Each restart is bounded in
//! time and a guard restarts the server when the test ends, passing or panicking. Other processes
//! using those servers at the same moment see a few seconds of refused connections (measured
//! here: PostgreSQL down 3.4–4.5 s, Redis about 0.6 s).
//!
//! They need the `postgres`, `redis-store` and `redis-control` features, so `cargo test
//! --workspace` (default features) never builds them; `cargo test -p seawall-tower
//! --all-features` (`.ci/run`) does, one binary after another, so no other store test of that
//! run is running while a server is down. PostgreSQL is driven with `pg_ctlcluster
//! --skip-systemctl-redirect <version> main stop|start` and Redis with `redis-cli shutdown
//! nosave` and the `redis-server` command line `.ci/run` uses; both need the rights to do so
//! (root on the CI machine).
//!
//! Time here is the wall clock on purpose: the lease and the pool live in other processes
//! (PostgreSQL's `now()`, Redis's `TIME`), which no paused tokio clock reaches. Every wait is a
//! poll with a hard bound.
#![cfg(all(feature = "postgres", feature = "redis-store", feature = "redis-control"))]

mod common_server;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use common_server::{Got, pay, send_within, serve, unique};
use http::{HeaderMap, StatusCode};
use seawall::control::Control;
use seawall_tower::client::fleet::{self, FleetKey};
use seawall_tower::server::IdempotencyLayer;
use seawall_tower::server::idempotency::store::postgres::PostgresStore;
use seawall_tower::server::idempotency::store::redis::RedisStore;
use tokio::sync::{Notify, mpsc};

/// One fault test at a time: they stop servers the others use.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const REDIS: &str = "redis://127.0.0.1:6379/";
const TENANT: &[u8] = b"fault-tenant";
const CHILD_ENV: &str = "SEAWALL_FAULT_REPLICA_TABLE";
const CHILD_TEST: &str = "replica_child";
/// The lease the killed replica takes on its key.
const CHILD_LEASE: Duration = Duration::from_secs(1);

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
    store
}

async fn drop_table(table: &str) {
    if let Ok(client) = pg_pool().get().await {
        let _ = client.batch_execute(&format!("DROP TABLE IF EXISTS {table}")).await;
    }
}

/// The layer every server here uses: one tenant, a short store timeout (the store's outage shows
/// as `503` within it).
fn layer(store: impl seawall_tower::server::idempotency::IdempotencyStore) -> IdempotencyLayer {
    IdempotencyLayer::new(store)
        .with_scope(|_| Some(TENANT.to_vec()))
        .with_store_timeout(Duration::from_secs(1))
}

/// The `code` member of a problem body, or `""`.
fn code(g: &Got) -> String {
    let body = String::from_utf8_lossy(&g.body);
    body.split(r#""code":""#).nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_string()
}

/// `POST /pay` counting executions per `Idempotency-Key`, taking `work`.
fn counting_app(seen: Arc<Mutex<HashMap<String, u32>>>, work: Duration) -> Router {
    Router::new().route(
        "/pay",
        post(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                *seen.lock().unwrap().entry(key).or_insert(0) += 1;
                tokio::time::sleep(work).await;
                (StatusCode::CREATED, "paid")
            }
        }),
    )
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `limit`.
async fn within<T, F: std::future::Future<Output = Option<T>>>(
    limit: Duration,
    mut f: impl FnMut() -> F,
) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if t0.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs a command to completion within `limit` (killed past it); its duration, or why it failed.
fn run(cmd: &mut Command, limit: Duration) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) if s.success() => return Ok(t0.elapsed()),
            Some(s) => return Err(format!("{cmd:?}: {s}")),
            None if t0.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?}: still running after {limit:?}"));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The local servers, stopped and started for real.

fn pg_version() -> String {
    let dir = std::fs::read_dir("/etc/postgresql").expect("/etc/postgresql (Debian's layout)");
    let mut v: Vec<String> =
        dir.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v.pop().expect("a PostgreSQL cluster version")
}

fn pg_ctl(action: &str) -> Result<Duration, String> {
    let mut cmd = Command::new("pg_ctlcluster");
    cmd.args(["--skip-systemctl-redirect", &pg_version(), "main", action]);
    run(&mut cmd, Duration::from_secs(20))
}

fn pg_up() -> bool {
    run(Command::new("pg_isready").args(["-h", "127.0.0.1", "-q"]), Duration::from_secs(3)).is_ok()
}

fn redis_up() -> bool {
    let ping = Command::new("redis-cli").args(["-h", "127.0.0.1", "ping"]).output();
    ping.is_ok_and(|o| o.stdout.starts_with(b"PONG"))
}

/// Shuts Redis down without saving (`redis-cli shutdown nosave`).
fn redis_stop() -> Result<Duration, String> {
    let t0 = Instant::now();
    // The command's connection drops when the server exits, so its exit status is not the test.
    let _ = run(
        Command::new("redis-cli").args(["-h", "127.0.0.1", "shutdown", "nosave"]),
        Duration::from_secs(10),
    );
    if redis_up() { Err("redis still answers after shutdown".into()) } else { Ok(t0.elapsed()) }
}

/// Starts Redis exactly as `.ci/run` does.
fn redis_start() -> Result<Duration, String> {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379"]);
    cmd.args(["--save", "", "--appendonly", "no", "--dir", "/var/lib/redis"]);
    cmd.args(["--logfile", "/var/log/redis/ci.log"]);
    let t0 = Instant::now();
    run(&mut cmd, Duration::from_secs(10))?;
    for _ in 0..200 {
        if redis_up() {
            return Ok(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err("redis-server started but does not answer PING within 5 s".into())
}

/// Starts the server again when the test ends (passing or panicking), if it is down.
struct Restore {
    what: &'static str,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let r = match self.what {
            "postgres" if !pg_up() => pg_ctl("start").map(drop),
            "redis" if !redis_up() => redis_start().map(drop),
            _ => Ok(()),
        };
        if let Err(e) = r {
            eprintln!("could not restore {}: {e}", self.what);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// kill -9 of a replica in the middle of a keyed request.

/// The replica that gets killed: an IdempotencyLayer on PostgreSQL (table from the environment,
/// lease [`CHILD_LEASE`]) whose handler prints `executing` and then works for 30 s. Prints
/// `addr=<addr>` once it listens; exits on its own after 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "child process of kill_9_mid_request_the_key_is_never_executed_again"]
async fn replica_child() {
    let Ok(table) = std::env::var(CHILD_ENV) else { return };
    let store = PostgresStore::with_table(pg_pool(), &table).expect("table name");
    let app = Router::new().route(
        "/pay",
        post(|| async {
            let mut out = std::io::stdout();
            let _ = writeln!(out, "executing").and_then(|()| out.flush());
            tokio::time::sleep(Duration::from_secs(30)).await;
            (StatusCode::CREATED, "paid by the child")
        }),
    );
    let addr = serve(app.layer(layer(store).with_lease(CHILD_LEASE))).await;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "addr={addr}").and_then(|()| out.flush());
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// Kills the child (`SIGKILL`) when dropped.
struct Replica(Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The next line of the child's stdout within `limit`.
async fn line(rx: &mut mpsc::UnboundedReceiver<String>, limit: Duration, what: &str) -> String {
    match tokio::time::timeout(limit, rx.recv()).await {
        Ok(Some(l)) => l,
        Ok(None) => panic!("the replica exited while waiting for {what}"),
        Err(_) => panic!("no {what} from the replica within {limit:?}"),
    }
}

/// A replica (its own OS process) takes a key, starts the handler and is killed with `SIGKILL`:
/// nothing settles the key (no drop guard runs in a killed process). Another replica on the same
/// PostgreSQL table answers the client's retry `409 idempotency-in-flight` while the dead
/// replica's lease runs, then `409 outcome-unknown`, and never executes the key.
///
/// Breaks if the store executes a key whose lease expired without a response (in
/// `store::decide`, `Pending { lease_expired: true } => Begin::Execute`): the survivor's
/// handler then runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_request_the_key_is_never_executed_again() {
    let _serial = SERIAL.lock().await;
    let table = unique("seawall_fault_kill");
    let survivor_store = pg_store(&table).await;
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--ignored"])
        .env(CHILD_ENV, &table)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Replica(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let addr: SocketAddr = loop {
        let l = line(&mut rx, Duration::from_secs(20), "`addr=`").await;
        if let Some(a) = l.strip_prefix("addr=") {
            break a.parse().unwrap();
        }
    };

    let doomed =
        tokio::spawn(send_within(addr, pay(addr, "k1", "10 EUR"), Duration::from_secs(10)));
    while line(&mut rx, Duration::from_secs(10), "`executing`").await != "executing" {}
    let killed_at = Instant::now();
    drop(child); // SIGKILL, then reaped
    assert!(doomed.await.unwrap().is_none(), "the killed replica answered");

    let seen = Arc::new(Mutex::new(HashMap::new()));
    let app = counting_app(seen.clone(), Duration::ZERO);
    let survivor = serve(app.layer(layer(survivor_store))).await;
    let retry = || send_within(survivor, pay(survivor, "k1", "10 EUR"), Duration::from_secs(5));
    let first = retry().await.expect("the survivor answers");
    // The lease was taken before `executing` was printed, so it may already have run out here.
    if killed_at.elapsed() < CHILD_LEASE - Duration::from_millis(200) {
        assert_eq!(
            (first.status, code(&first).as_str()),
            (StatusCode::CONFLICT, "idempotency-in-flight")
        );
    }
    let unknown = within(CHILD_LEASE + Duration::from_secs(3), || async {
        let g = retry().await?;
        assert_eq!(g.status, StatusCode::CONFLICT, "{g:?}");
        (code(&g) == "outcome-unknown").then_some(g)
    })
    .await
    .expect("outcome-unknown within the lease plus 3 s");
    eprintln!("outcome-unknown {:?} after the kill", killed_at.elapsed());
    assert!(killed_at.elapsed() >= CHILD_LEASE - Duration::from_millis(200), "{unknown:?}");
    for _ in 0..3 {
        let g = retry().await.unwrap();
        assert_eq!((g.status, code(&g).as_str()), (StatusCode::CONFLICT, "outcome-unknown"));
    }
    assert!(seen.lock().unwrap().is_empty(), "the key ran again: {:?}", seen.lock().unwrap());
    // Control: a fresh key executes on the survivor (the table and layer work).
    let fresh = send_within(survivor, pay(survivor, "k2", "10 EUR"), Duration::from_secs(5)).await;
    assert_eq!(fresh.map(|g| g.status), Some(StatusCode::CREATED));
    drop_table(&table).await;
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL stopped and started during traffic.

/// Keyed traffic from `workers` clients until `stop`: each client sends each of its keys twice in
/// a row (the second after the first answered, as a retrying client would). Returns, per key,
/// the statuses seen.
fn traffic(
    addr: SocketAddr,
    workers: usize,
    stop: Arc<AtomicBool>,
    tag: &str,
) -> Vec<tokio::task::JoinHandle<BTreeMap<String, Vec<Option<u16>>>>> {
    (0..workers)
        .map(|w| {
            let (stop, tag) = (stop.clone(), tag.to_string());
            tokio::spawn(async move {
                let mut out = BTreeMap::new();
                // Bounded: at most 3,000 keys per client (and 40 s by `stop`).
                for i in 0..3000 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let key = format!("{tag}-{w}-{i}");
                    let mut got = Vec::new();
                    for _ in 0..2 {
                        let g =
                            send_within(addr, pay(addr, &key, "10 EUR"), Duration::from_secs(5));
                        got.push(g.await.map(|g| g.status.as_u16()));
                    }
                    out.insert(key, got);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                out
            })
        })
        .collect()
}

/// PostgreSQL is stopped and started again (`pg_ctlcluster … stop` / `start`) while four clients
/// send keyed requests, and one request is inside its handler when the database goes: while it
/// is down, keyed requests get `503` and do not execute; the request caught inside its handler
/// answers, cannot store its response, and its key is then `409` (never run again); once the
/// database is back the pool recovers within 10 s; and no key is ever executed twice.
///
/// Breaks if the layer fails open (in `future.rs`, on a `begin` error, execute anyway): keys
/// sent while the database is down run twice. Also breaks under the `decide` mutation of the
/// kill test (the caught key runs again after its lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_during_traffic_recovers_and_executes_nothing_twice() {
    let _serial = SERIAL.lock().await;
    assert!(pg_up(), "PostgreSQL on 127.0.0.1:5432 is up before the test");
    let table = unique("seawall_fault_pg");
    let store = pg_store(&table).await;
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let gate = Arc::new(Notify::new());
    let lease = Duration::from_millis(500);
    let app = counting_app(seen.clone(), Duration::from_millis(2));
    let caught_app = {
        let (seen, gate) = (seen.clone(), gate.clone());
        Router::new().route(
            "/pay",
            post(move || {
                let (seen, gate) = (seen.clone(), gate.clone());
                async move {
                    *seen.lock().unwrap().entry("caught".to_string()).or_insert(0) += 1;
                    gate.notified().await;
                    (StatusCode::CREATED, "paid")
                }
            }),
        )
    };
    let addr = serve(app.layer(layer(store.clone()).with_lease(lease))).await;
    let caught_addr = serve(caught_app.layer(layer(store).with_lease(lease))).await;

    let stop = Arc::new(AtomicBool::new(false));
    let clients = traffic(addr, 4, stop.clone(), &table);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let caught = tokio::spawn(send_within(
        caught_addr,
        pay(caught_addr, "caught", "1"),
        Duration::from_secs(20),
    ));
    within(Duration::from_secs(5), || async { seen.lock().unwrap().get("caught").copied() })
        .await
        .expect("the caught request reached its handler");

    let restore = Restore { what: "postgres" };
    let stopped = tokio::task::spawn_blocking(|| pg_ctl("stop")).await.unwrap().expect("stop");
    let down_at = Instant::now();
    gate.notify_one();
    let caught = caught.await.unwrap().expect("the caught request is answered");
    assert_eq!(caught.status, StatusCode::CREATED, "the handler's own answer");
    // Traffic meets the stopped database for a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = tokio::task::spawn_blocking(|| pg_ctl("start")).await.unwrap().expect("start");
    let downtime = down_at.elapsed() + stopped;
    drop(restore);
    let back = within(Duration::from_secs(10), || async {
        let key = format!("probe-{}", unique(""));
        let g = send_within(addr, pay(addr, &key, "1"), Duration::from_secs(3)).await?;
        (g.status == StatusCode::CREATED).then_some(())
    })
    .await;
    let recovered = down_at.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let mut statuses: BTreeMap<Option<u16>, usize> = BTreeMap::new();
    let mut answers = BTreeMap::new();
    for c in clients {
        for (k, v) in c.await.unwrap() {
            for s in &v {
                *statuses.entry(*s).or_insert(0) += 1;
            }
            answers.insert(k, v);
        }
    }
    eprintln!(
        "postgres: stop {stopped:?}, start {started:?}, down {downtime:?}; first 201 after the \
         stop {recovered:?}; statuses {statuses:?}"
    );
    assert!(back.is_some(), "the pool did not recover within 10 s of the restart");
    assert!(
        statuses.keys().all(|s| matches!(s, Some(201 | 409 | 503))),
        "only the response, 409 or 503: {statuses:?}"
    );
    let seen = seen.lock().unwrap().clone();
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "executed more than once: {twice:?}");
    assert!(statuses.get(&Some(503)).copied().unwrap_or(0) > 0, "traffic met the outage");
    for (k, v) in &answers {
        // A key refused twice with 503 never ran (fail closed).
        if v.iter().all(|s| *s == Some(503)) {
            assert!(!seen.contains_key(k), "{k} answered 503 twice but ran");
        }
    }
    // The caught key could not store its response: after its lease it is outcome unknown.
    let repeat = within(lease + Duration::from_secs(3), || async {
        let g = send_within(caught_addr, pay(caught_addr, "caught", "1"), Duration::from_secs(3))
            .await?;
        assert_eq!(g.status, StatusCode::CONFLICT, "{g:?}");
        (code(&g) == "outcome-unknown").then_some(())
    })
    .await;
    assert!(repeat.is_some(), "the caught key is outcome unknown after its lease");
    assert_eq!(seen.get("caught"), Some(&1));
    drop_table(&table).await;
}

// ---------------------------------------------------------------------------------------------
// Redis restarted under the fleet switch and the Redis store.

/// Redis is shut down (`shutdown nosave`) and started again as `.ci/run` starts it, under a fleet
/// follower (poll 200 ms) that had switched retries off, and under an IdempotencyLayer on the
/// Redis store. While Redis is down the follower keeps its last value (retries stay off) and
/// keyed requests get `503` without executing; once it is back, the follower reconverges to what
/// Redis then holds (set without a `PUBLISH`, so only re-reading the key can find it) within 3 s,
/// and the store path answers again within 3 s.
///
/// Breaks if the follower or the store keep their first connection for good (no reconnection):
/// the follower never leaves 0 and the store answers `503` for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restart_followers_reconverge_and_the_store_fails_closed_meanwhile() {
    let _serial = SERIAL.lock().await;
    assert!(redis_up(), "Redis on 127.0.0.1:6379 is up before the test");
    let name = format!("seawall:test:fault-fleet:{}", unique(""));
    let mut at = FleetKey::new(&name);
    at.poll = Duration::from_millis(200);
    let client = redis::Client::open(REDIS).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    fleet::publish(&mut admin, &at, 0).await.unwrap();
    let control = Arc::new(Control::new());
    let follower = fleet::follow(client.clone(), at.clone(), control.clone()).await.unwrap();
    assert_eq!(control.percent(), 0);

    let store = RedisStore::connect(REDIS).await.expect("redis store");
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let addr = serve(counting_app(seen.clone(), Duration::ZERO).layer(layer(store))).await;
    let ok = send_within(addr, pay(addr, &format!("{name}-before"), "1"), Duration::from_secs(5));
    assert_eq!(ok.await.map(|g| g.status), Some(StatusCode::CREATED), "store works before");

    let restore = Restore { what: "redis" };
    let stopped = tokio::task::spawn_blocking(redis_stop).await.unwrap().expect("redis stops");
    let down_at = Instant::now();
    for i in 0..3 {
        let key = format!("{name}-down-{i}");
        let t0 = Instant::now();
        let g = send_within(addr, pay(addr, &key, "1"), Duration::from_secs(5)).await.unwrap();
        assert_eq!(
            (g.status, code(&g).as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "idempotency-store-unavailable")
        );
        assert!(t0.elapsed() < Duration::from_secs(2), "within the 1 s store timeout");
    }
    assert!(seen.lock().unwrap().keys().all(|k| !k.contains("-down-")), "fail closed");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(control.percent(), 0, "the follower holds its last value while Redis is down");
    let started = tokio::task::spawn_blocking(redis_start).await.unwrap().expect("redis starts");
    let downtime = down_at.elapsed() + stopped;
    drop(restore);

    // The stored state after the restart (nothing persisted: an operator sets it again).
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let t0 = Instant::now();
    redis::cmd("SET").arg(&at.key).arg(25).query_async::<()>(&mut admin).await.unwrap();
    let converged =
        within(Duration::from_secs(3), || async { (control.percent() == 25).then_some(()) }).await;
    let converge_after = t0.elapsed();
    let store_back = within(Duration::from_secs(3), || async {
        let key = format!("{name}-after-{}", unique(""));
        let g = send_within(addr, pay(addr, &key, "1"), Duration::from_secs(3)).await?;
        (g.status == StatusCode::CREATED).then_some(())
    })
    .await;
    let store_after = t0.elapsed();
    eprintln!(
        "redis: stop {stopped:?}, start {started:?}, down {downtime:?}; follower at 25 after \
         {converge_after:?}, store answering after {store_after:?}"
    );
    follower.abort();
    let _ = redis::cmd("DEL").arg(&at.key).query_async::<i64>(&mut admin).await;
    assert!(converged.is_some(), "follower still at {} 3 s after the restart", control.percent());
    assert!(store_back.is_some(), "the Redis store still refuses 3 s after the restart");
}
