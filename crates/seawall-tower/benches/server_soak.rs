//! Soak: 10× overload for `--duration` (default 600 s) through `DeadlineLayer` →
//! `IdempotencyLayer` (PostgreSQL on 127.0.0.1:5432, db `test`) → `ShedLayer` → a handler of
//! fixed capacity. Not a test: it prints goodput as a fraction of capacity, the process's RSS
//! over time, and how many answers came after their deadline.
//!
//! `cargo bench -p seawall-tower --features postgres --bench server_soak -- --duration 600`
//!
//! Options: `--duration <secs>` (default 600), `--overload <factor>` (default 10).
//!
//! The handler runs on `WORKERS` slots of `WORK` each (capacity `WORKERS / WORK` per second);
//! the `ShedLayer` admits `WORKERS` at a time with its default queue. Every request is a `POST`
//! with its own `Idempotency-Key` and `Request-Timeout-Ms: 500`, sent open loop (a Poisson-free
//! fixed interval) through one pooled reqwest client; a caller stops waiting after 2 s. So every
//! request costs the store a `begin` (an `INSERT`), and then a `complete` (`UPDATE`, executed) or
//! a `release` (`DELETE`, shed). Goodput counts `201`s received within the deadline. An answer
//! is *late* when it arrives more than `SLACK` after the deadline the caller sent (the server's
//! `504` is due at the deadline; the slack is the client's own scheduling on a loaded machine);
//! a `201` that arrives after the deadline at all is counted separately. RSS is the whole
//! process (server and load generator), read from `/proc/self/status` every 10 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use http::StatusCode;
use seawall_tower::server::idempotency::store::postgres::PostgresStore;
use seawall_tower::server::{DeadlineLayer, IdempotencyLayer, ShedLayer};
use tower::ServiceBuilder;

#[path = "server_common/mod.rs"]
mod common;

const WORKERS: usize = 2;
const WORK: Duration = Duration::from_millis(50);
const DEADLINE: Duration = Duration::from_millis(500);
const SLACK: Duration = Duration::from_millis(50);
const GIVE_UP: Duration = Duration::from_secs(2);
const SAMPLE: Duration = Duration::from_secs(10);

const HELP: &str =
    "server_soak: 10x overload through DeadlineLayer + IdempotencyLayer(PostgreSQL) + ShedLayer

usage: cargo bench -p seawall-tower --features postgres --bench server_soak -- [options]
  --duration <secs>   how long to run (default 600, at least 10)
  --overload <x>      offered load as a multiple of capacity (default 10, 1-50)";

struct Args {
    duration: Duration,
    overload: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { duration: Duration::from_secs(600), overload: 10.0 };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            // cargo bench passes `--bench` to every harness-less bench binary.
            "--bench" => {}
            "--duration" => {
                let v = it.next().ok_or("--duration needs a value")?;
                let s: u64 = v.parse().map_err(|_| format!("--duration {v}: not whole seconds"))?;
                if !(10..=86_400).contains(&s) {
                    return Err(format!("--duration {s}: must be 10-86400 seconds"));
                }
                args.duration = Duration::from_secs(s);
            }
            "--overload" => {
                let v = it.next().ok_or("--overload needs a value")?;
                let x: f64 = v.parse().map_err(|_| format!("--overload {v}: not a number"))?;
                if !(1.0..=50.0).contains(&x) {
                    return Err(format!("--overload {x}: must be 1-50"));
                }
                args.overload = x;
            }
            "-h" | "--help" => return Err(HELP.to_string()),
            other => return Err(format!("unknown argument {other:?}\n\n{HELP}")),
        }
    }
    Ok(args)
}

/// The process's resident set, KiB (`VmRSS`), 0 where `/proc` is missing.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    good: AtomicU64,
    ok_late: AtomicU64,
    shed: AtomicU64,
    timed_out: AtomicU64,
    other: AtomicU64,
    late: AtomicU64,
    no_answer: AtomicU64,
    worst_over_ms: AtomicU64,
}

fn n(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

fn pool() -> deadpool_postgres::Pool {
    let mut cfg = deadpool_postgres::Config::new();
    cfg.host = Some("127.0.0.1".into());
    cfg.port = Some(5432);
    cfg.user = Some(std::env::var("SEAWALL_PG_USER").unwrap_or_else(|_| "postgres".into()));
    cfg.dbname = Some("test".into());
    cfg.create_pool(Some(deadpool_postgres::Runtime::Tokio1), tokio_postgres::NoTls).expect("pool")
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(if msg == HELP { 0 } else { 2 });
        }
    };
    let rt = common::runtime();
    rt.block_on(soak(args));
}

async fn soak(args: Args) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() % 1_000_000_000);
    let table = format!("seawall_soak_{}_{nanos}", std::process::id());
    let store = PostgresStore::with_table(pool(), &table).expect("table name");
    if let Err(e) = store.migrate().await {
        eprintln!("server_soak: PostgreSQL on 127.0.0.1:5432 (db test) is needed: {e}");
        std::process::exit(1);
    }
    let app = Router::new().route(
        "/pay",
        post(|| async {
            tokio::time::sleep(WORK).await;
            (StatusCode::CREATED, "paid")
        }),
    );
    let stack = ServiceBuilder::new()
        .layer(DeadlineLayer::new())
        .layer(IdempotencyLayer::new(store.clone()).with_scope(|_| Some(b"soak".to_vec())))
        .layer(ShedLayer::new(std::num::NonZeroUsize::new(WORKERS).expect("workers")));
    let addr = common::serve(app.layer(stack)).await;

    let capacity = WORKERS as f64 / WORK.as_secs_f64();
    let rate = capacity * args.overload;
    println!(
        "server_soak: capacity {capacity:.0} req/s ({WORKERS} slots x {WORK:?}), offered \
         {rate:.0} req/s ({:.0}x) for {:?}; deadline {DEADLINE:?}; late = answered over \
         {SLACK:?} past it",
        args.overload, args.duration
    );
    println!(
        "t_s | sent | 201 in time | 201 late | 503 | 504 | no answer | goodput/capacity | late | RSS MiB"
    );

    let counts = Arc::new(Counts::default());
    let http = reqwest::Client::builder().pool_max_idle_per_host(1024).build().expect("client");
    let url = format!("http://{addr}/pay");
    let start = Instant::now();
    let sampler = {
        let counts = counts.clone();
        tokio::spawn(async move {
            let mut rss = Vec::new();
            let mut prev_good = 0;
            let mut k = 1;
            loop {
                tokio::time::sleep_until((start + SAMPLE * k).into()).await;
                let good = n(&counts.good);
                let r = rss_kib();
                rss.push((start.elapsed(), r));
                println!(
                    "{:.0} | {} | {good} | {} | {} | {} | {} | {:.2} | {} | {:.1}",
                    start.elapsed().as_secs_f64(),
                    n(&counts.sent),
                    n(&counts.ok_late),
                    n(&counts.shed),
                    n(&counts.timed_out),
                    n(&counts.no_answer),
                    (good - prev_good) as f64 / SAMPLE.as_secs_f64() / capacity,
                    n(&counts.late),
                    r as f64 / 1024.0
                );
                prev_good = good;
                k += 1;
                if start.elapsed() >= args.duration {
                    return rss;
                }
            }
        })
    };

    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let total = (rate * args.duration.as_secs_f64()) as u64;
    let deadline_ms = DEADLINE.as_millis().to_string();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        tick.tick().await;
        let (counts, http, url, deadline_ms) =
            (counts.clone(), http.clone(), url.clone(), deadline_ms.clone());
        counts.sent.fetch_add(1, Ordering::Relaxed);
        tasks.spawn(async move {
            let sent = Instant::now();
            let call = async {
                let res = http
                    .post(&url)
                    .header("idempotency-key", format!("soak-{nanos}-{i}"))
                    .header("request-timeout-ms", &deadline_ms)
                    .body("10 EUR")
                    .send()
                    .await
                    .ok()?;
                let status = res.status();
                res.bytes().await.ok()?;
                Some(status)
            };
            let got = tokio::time::timeout(GIVE_UP, call).await.ok().flatten();
            let took = sent.elapsed();
            let Some(status) = got else {
                counts.no_answer.fetch_add(1, Ordering::Relaxed);
                return;
            };
            if took > DEADLINE + SLACK {
                counts.late.fetch_add(1, Ordering::Relaxed);
            }
            let over = took.saturating_sub(DEADLINE).as_millis() as u64;
            counts.worst_over_ms.fetch_max(over, Ordering::Relaxed);
            let c = match status.as_u16() {
                201 if took <= DEADLINE => &counts.good,
                201 => &counts.ok_late,
                503 => &counts.shed,
                504 => &counts.timed_out,
                _ => &counts.other,
            };
            c.fetch_add(1, Ordering::Relaxed);
        });
        // Reap finished tasks as we go, so the set stays as large as the requests in flight.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let rss = sampler.await.expect("sampler");

    let secs = start.elapsed().as_secs_f64();
    let good = n(&counts.good);
    let first_min: u64 =
        rss.iter().filter(|(t, _)| *t <= Duration::from_secs(60)).map(|s| s.1).max().unwrap_or(0);
    let after: u64 =
        rss.iter().filter(|(t, _)| *t > Duration::from_secs(60)).map(|s| s.1).max().unwrap_or(0);
    println!(
        "summary: goodput {:.3} of capacity ({good} x 201 in time over {secs:.0} s); late \
         answers {} (worst {} ms past the deadline); 201 after the deadline {}; other statuses \
         {}; no answer within {GIVE_UP:?} {}",
        good as f64 / secs / capacity,
        n(&counts.late),
        n(&counts.worst_over_ms),
        n(&counts.ok_late),
        n(&counts.other),
        n(&counts.no_answer),
    );
    if after > 0 {
        println!(
            "summary: peak RSS {:.1} MiB in the first minute, {:.1} MiB after it ({:.2}x)",
            first_min as f64 / 1024.0,
            after as f64 / 1024.0,
            after as f64 / first_min.max(1) as f64
        );
    }
    if let Ok(client) = pool().get().await {
        let _ = client.batch_execute(&format!("DROP TABLE IF EXISTS {table}")).await;
    }
}
