//! `seawall proxy --tcp` in front of the real PostgreSQL on 127.0.0.1:5432 (trust auth,
//! database `test`): statements pass and are counted, and each fault kind acts as documented.
//! Faults are added live (`Proxy::add_fault`), so no test waits on a schedule's wall-clock
//! timing; the schedule itself is tested on virtual time in the module.
//!
//! Ignored unless asked for (`--ignored`): it needs that PostgreSQL.

use std::sync::Arc;
use std::time::{Duration, Instant};

use seawall::time::SystemClock;
use seawall_proxy::{Mode, Proxy, ProxyConfig};
use tokio_postgres::{Client, NoTls};

const PG: &str = "127.0.0.1:5432";

fn pg_up() {
    seawall_testkit::require_service("PostgreSQL", PG.parse().unwrap());
}

async fn proxy() -> Proxy {
    let config = ProxyConfig::new("127.0.0.1:0", PG, Mode::Tcp).unwrap();
    Proxy::start(config, Arc::new(SystemClock)).await.unwrap()
}

fn url(p: &Proxy) -> String {
    let a = p.listen_addr();
    format!("host={} port={} user=postgres dbname=test connect_timeout=5", a.ip(), a.port())
}

async fn connect(p: &Proxy) -> Result<Client, tokio_postgres::Error> {
    let (client, conn) = tokio_postgres::connect(&url(p), NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

async fn one(c: &Client) -> Result<i32, tokio_postgres::Error> {
    c.query_one("SELECT 1", &[]).await.map(|r| r.get(0))
}

/// A bound on every step: a test that hangs is a failed test.
async fn within<T>(s: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(s), f).await.expect("step took too long")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn statements_pass_and_identical_copies_are_counted() {
    pg_up();
    let p = proxy().await;
    let mut clients = Vec::new();
    for _ in 0..6 {
        clients.push(Arc::new(within(10, connect(&p)).await.unwrap()));
    }
    assert_eq!(one(&clients[0]).await.unwrap(), 1);
    // Six copies of one statement at once: the storm's signature, seen on the wire.
    let mut runs = tokio::task::JoinSet::new();
    for c in &clients {
        let c = c.clone();
        runs.spawn(async move { c.simple_query("SELECT pg_sleep(1)").await.map(|_| ()) });
    }
    while let Some(r) = within(20, runs.join_next()).await {
        r.unwrap().unwrap();
    }
    let text = p.stats().prometheus();
    assert!(text.contains("seawall_proxy_identical_in_flight_peak 6\n"), "{text}");
    assert!(text.contains("seawall_proxy_identical_in_flight 0\n"), "{text}");
    // 1 extended-protocol SELECT 1 + 6 simple queries.
    assert_eq!(p.stats().requests(), 7);
    assert_eq!(p.stats().connections(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn fail_refuses_pooled_and_new_connections_then_clears() {
    pg_up();
    let p = proxy().await;
    let pooled = within(10, connect(&p)).await.unwrap();
    assert_eq!(one(&pooled).await.unwrap(), 1);
    p.add_fault("fail:60".parse().unwrap()).unwrap();
    assert!(within(10, one(&pooled)).await.is_err(), "a pooled connection meets the fault");
    assert!(within(10, connect(&p)).await.is_err(), "a new connection is refused");
    p.clear_faults();
    let fresh = within(10, connect(&p)).await.unwrap();
    assert_eq!(one(&fresh).await.unwrap(), 1);
    assert!(p.stats().prometheus().contains("seawall_proxy_faulted_total{fault=\"fail\"} 2\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn hang_holds_within_its_bound_and_releases_when_it_ends() {
    pg_up();
    let p = proxy().await;
    let c = within(10, connect(&p)).await.unwrap();
    one(&c).await.unwrap();
    // A hang longer than its bound: the statement is held ~1 s, then the connection is reset.
    p.add_fault("hang:30,max=1".parse().unwrap()).unwrap();
    let t = Instant::now();
    assert!(within(10, one(&c)).await.is_err());
    let held = t.elapsed();
    assert!(held >= Duration::from_millis(950) && held < Duration::from_secs(4), "{held:?}");
    p.clear_faults();
    // A hang shorter than its bound: held until it ends, then the statement runs.
    let c = within(10, connect(&p)).await.unwrap();
    one(&c).await.unwrap();
    p.add_fault("hang:1,max=10".parse().unwrap()).unwrap();
    let t = Instant::now();
    assert_eq!(within(10, one(&c)).await.unwrap(), 1);
    assert!(t.elapsed() >= Duration::from_millis(950), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn slow_adds_its_latency_once_per_statement() {
    pg_up();
    let p = proxy().await;
    let c = within(10, connect(&p)).await.unwrap();
    one(&c).await.unwrap();
    p.add_fault("slow:60,latency=300".parse().unwrap()).unwrap();
    let t = Instant::now();
    assert_eq!(within(10, one(&c)).await.unwrap(), 1);
    let took = t.elapsed();
    // Prepare and execute are two round trips; the delay is the statement's, paid once.
    assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(590), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn restart_cold_refuses_then_recovers_and_bandwidth_paces() {
    pg_up();
    let p = proxy().await;
    p.add_fault("restart-cold:1,warmup=1,floor=0".parse().unwrap()).unwrap();
    assert!(within(10, connect(&p)).await.is_err(), "refused while restarting");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let c = within(10, connect(&p)).await.unwrap();
    assert_eq!(one(&c).await.unwrap(), 1, "serves again once warm");
    // The listener was closed for the restart (counted once as `refuse`).
    let text = p.stats().prometheus();
    assert!(text.contains("seawall_proxy_faulted_total{fault=\"refuse\"} 1\n"), "{text}");
    // 60 KB back at 50 KB/s: 1.2 s (each chunk waits its time before it is sent).
    p.add_fault("bandwidth:60,rate=50".parse().unwrap()).unwrap();
    let t = Instant::now();
    let row = within(15, c.query_one("SELECT repeat('x', 60000)", &[])).await.unwrap();
    assert_eq!(row.get::<_, String>(0).len(), 60_000);
    assert!(t.elapsed() >= Duration::from_millis(1150), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn partial_fails_its_share_of_connections() {
    pg_up();
    let p = proxy().await;
    p.add_fault("partial:60,pct=50".parse().unwrap()).unwrap();
    let mut ok = 0;
    for _ in 0..16 {
        if let Ok(c) = within(10, connect(&p)).await
            && one(&c).await.is_ok()
        {
            ok += 1;
        }
    }
    // Seeded draws: some pass, some fail (both statements and connections are drawn).
    assert!((1..16).contains(&ok), "{ok} of 16 passed");
}

/// The lab's own PostgreSQL pieces through the proxy: `PgLab` (table, the `pg_stat_activity` query)
/// and the order service's `PgBackend` pool, which meets the proxy's faults as the lab's tiers do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn the_postgres_lab_backend_works_through_the_proxy() {
    use http::StatusCode;
    use seawall_lab::Stack;
    use seawall_lab::node::backend::{PgBackend, PgService};
    use tower::ServiceExt;

    pg_up();
    let p = proxy().await;
    let a = p.listen_addr();
    let lab_url = format!("postgres://postgres@{}:{}/test", a.ip(), a.port());
    let lab = within(10, seawall_lab::pg::PgLab::setup(&lab_url, Duration::from_millis(300)))
        .await
        .unwrap();
    let backend =
        within(10, PgBackend::connect(&lab_url, lab.table(), 3, Stack::Baseline)).await.unwrap();
    let call = |b: &std::sync::Arc<PgBackend>| {
        let req = http::Request::new(http_body_util::Empty::<bytes::Bytes>::new());
        PgService(b.clone()).oneshot(req)
    };
    // Three orders at once: three copies of the lab's statement in flight at the proxy.
    let (r1, r2, r3) =
        within(10, async { tokio::join!(call(&backend), call(&backend), call(&backend)) }).await;
    for r in [r1, r2, r3] {
        assert_eq!(r.unwrap().status(), StatusCode::OK);
    }
    assert!(p.stats().prometheus().contains("seawall_proxy_identical_in_flight_peak 3\n"));
    within(10, lab.sample()).await.unwrap();
    p.add_fault("slow:60,latency=200".parse().unwrap()).unwrap();
    let t = Instant::now();
    assert_eq!(within(10, call(&backend)).await.unwrap().status(), StatusCode::OK);
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "300 ms statement + 200 ms: {:?}",
        t.elapsed()
    );
    p.clear_faults();
    p.add_fault("fail:60".parse().unwrap()).unwrap();
    assert_eq!(within(10, call(&backend)).await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    p.clear_faults();
    within(10, lab.teardown()).await.unwrap();
}
