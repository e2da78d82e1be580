//! The client layers where a user sees them: around reqwest, against an HTTP server on loopback.
//! The same calls through the same client with no layer, through `tower::retry::Retry` with a
//! `TpsBudget` policy, and through seawall's `RetryLayer` on its default clock and on
//! `CoarseClock`, alternating in one run. Every call succeeds (the success path), so the figure
//! is what each layer adds to a real round trip, the measure the complexity budget names: a
//! speed-up is worth its complexity when it shows here, not only in `client_overhead`'s
//! nanoseconds.
//!
//! ```text
//! cargo bench -p seawall-tower --features reqwest --bench client_loopback -- --requests 40000 --rounds 7
//! ```
//!
//! Options: `--requests <n>` per case and round (default 20000), `--concurrency <n>` callers at
//! once, each with its own keep-alive connection (default 8), `--rounds <n>` (default 5). The
//! server is axum on a current-thread runtime of its own thread, answering `200 ok`; the
//! callers share one current-thread runtime on the main thread, so each side has a core on a
//! 2-core machine. For each case it prints the median over the rounds of the wall time and the
//! process's CPU time (client and server) per call, and the median of the per-round ratios to
//! tower's and to no layer.

#[path = "client_common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use seawall::time::CoarseClock;
use seawall_tower::client::RetryLayer;
use seawall_tower::client::reqwest::ReqwestService;
use tower::retry::budget::TpsBudget;
use tower::{Layer, Service, ServiceExt};

use common::TowerPolicy;

const HELP: &str =
    "client_loopback: each client layer's cost on a loopback round trip through reqwest

usage: cargo bench -p seawall-tower --features reqwest --bench client_loopback -- [options]
  --requests <n>     calls per case and round (default 20000, 100-10000000)
  --concurrency <n>  callers at once, one connection each (default 8, 1-256)
  --rounds <n>       rounds, the cases alternating in each (default 5, 1-50)";

struct Args {
    requests: u64,
    concurrency: u64,
    rounds: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { requests: 20_000, concurrency: 8, rounds: 5 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let (slot, range) = match flag.as_str() {
            "--bench" => continue, // cargo bench passes it to harness-less benches
            "-h" | "--help" => return Err(HELP.into()),
            "--requests" => (&mut a.requests, 100..=10_000_000),
            "--concurrency" => (&mut a.concurrency, 1..=256),
            "--rounds" => (&mut a.rounds, 1..=50),
            other => return Err(format!("unknown argument {other:?}\n\n{HELP}")),
        };
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let n: u64 = v.parse().map_err(|_| format!("{flag} {v}: not a whole number"))?;
        if !range.contains(&n) {
            return Err(format!("{flag} {n}: out of range\n\n{HELP}"));
        }
        *slot = n;
    }
    Ok(a)
}

/// CPU time of the whole process (both runtimes), in nanoseconds.
fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// Starts the server on a thread of its own; returns its address.
fn server() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.set_nonblocking(true).expect("nonblocking listener");
    let addr = listener.local_addr().expect("local address");
    std::thread::Builder::new()
        .name("server".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            rt.expect("server runtime").block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
                axum::serve(listener, app).await.expect("serve");
            })
        })
        .expect("server thread");
    addr
}

/// `n` calls of `svc` from `concurrency` callers at once, each call answered 200; the wall and
/// CPU time they took, per call, in nanoseconds.
async fn run<S>(svc: S, uri: &http::Uri, n: u64, concurrency: u64) -> (f64, f64)
where
    S: Service<Request<Bytes>, Response = Response<Bytes>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    let (t0, c0) = (Instant::now(), cpu_ns());
    let mut callers = tokio::task::JoinSet::new();
    for i in 0..concurrency {
        let (svc, uri) = (svc.clone(), uri.clone());
        let share = n / concurrency + u64::from(i < n % concurrency);
        callers.spawn(async move {
            for _ in 0..share {
                let req = Request::get(uri.clone()).body(Bytes::new()).expect("request");
                let resp = svc.clone().oneshot(req).await.expect("the call succeeds");
                assert_eq!(resp.status(), 200);
            }
        });
    }
    while let Some(r) = callers.join_next().await {
        r.expect("a caller panicked");
    }
    let per = |ns: f64| ns / n as f64;
    (per(t0.elapsed().as_nanos() as f64), per((cpu_ns() - c0) as f64))
}

const CASES: [&str; 4] = ["no layer", "tower Retry + TpsBudget", "seawall", "seawall, CoarseClock"];

/// Picks the wall or the CPU time out of a `(wall, cpu)` pair.
type Pick = fn(&(f64, f64)) -> f64;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let addr = server();
    let uri: http::Uri = format!("http://{addr}/").parse().expect("uri");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    // [case][round] → (wall ns, cpu ns) per call.
    let mut got = vec![Vec::new(); CASES.len()];
    rt.block_on(async {
        let reqwest = reqwest::Client::builder().no_proxy().build().expect("reqwest client");
        let plain = ReqwestService::new(reqwest);
        let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2));
        let tower = tower::retry::RetryLayer::new(TowerPolicy(budget)).layer(plain.clone());
        let seawall = RetryLayer::new().layer(plain.clone());
        let coarse = RetryLayer::new().with_clock(CoarseClock).layer(plain.clone());
        // Warm up: connections open, allocator and caches settle.
        run(plain.clone(), &uri, args.requests.min(5_000), args.concurrency).await;
        let (n, c) = (args.requests, args.concurrency);
        for round in 0..args.rounds as usize {
            // Each round starts with a different case, so no case always runs first.
            for k in 0..CASES.len() {
                let case = (k + round) % CASES.len();
                let r = match case {
                    0 => run(plain.clone(), &uri, n, c).await,
                    1 => run(tower.clone(), &uri, n, c).await,
                    2 => run(seawall.clone(), &uri, n, c).await,
                    _ => run(coarse.clone(), &uri, n, c).await,
                };
                got[case].push(r);
            }
            eprintln!("round {} of {} done", round + 1, args.rounds);
        }
    });
    println!(
        "{} calls per case and round, {} callers, {} rounds; medians over the rounds",
        args.requests, args.concurrency, args.rounds
    );
    println!(
        "{:<26} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "case", "wall µs", "CPU µs", "wall/tower", "CPU/tower", "wall/none", "CPU/none"
    );
    let ratio = |case: usize, base: usize, pick: Pick| {
        median(got[case].iter().zip(&got[base]).map(|(a, b)| pick(a) / pick(b)).collect())
    };
    let (wall, cpu): (Pick, Pick) = (|r| r.0, |r| r.1);
    for (case, name) in CASES.iter().enumerate() {
        println!(
            "{:<26} {:>10.2} {:>10.2} {:>12.3} {:>12.3} {:>12.3} {:>12.3}",
            name,
            median(got[case].iter().map(wall).collect()) / 1000.0,
            median(got[case].iter().map(cpu).collect()) / 1000.0,
            ratio(case, 1, wall),
            ratio(case, 1, cpu),
            ratio(case, 0, wall),
            ratio(case, 0, cpu),
        );
    }
}
