//! Two questions about `seawall load`'s client, answered against one loopback nginx
//! (`return 200`) in one run:
//!
//! 1. **Which in-flight bound to default to.** The highest rate the generator sustains (99 % of
//!    the scheduled requests sent and answered 2xx within the deadline) at each
//!    `--max-in-flight` in the list, so the default can be chosen where it sustains at least
//!    0.9× the best bound's rate.
//! 2. **Whether its hand-written HTTP/1.1 client earns its place.** The same search with
//!    hyper's pooled client (hyper-util's legacy `Client`, the pool capped at the same bound)
//!    as the transport, at the default bound and at the best one: the same driver, schedule,
//!    deadline and counting, only the client differs.
//!
//! ```text
//! cargo run --release -p seawall-load --example inflight -- [SECONDS_PER_STEP] [BOUND]...
//! ```
//! Defaults: 2 s per step, bounds 16 32 64 128 256 512. Needs `nginx` (Debian's package).
//! One generator thread (the default on two cores), so the figures compare clients, not
//! thread layouts.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use seawall_load::{
    Bounds, Connections, HttpTransport, LoadResults, LoadSpec, Outcome, Schedule, Target,
    TokioTimer, Transport, drive,
};

/// hyper's pooled HTTP/1.1 client as the generator's transport.
struct Hyper {
    client: Client<HttpConnector, Empty<Bytes>>,
    uri: http::Uri,
}

impl Hyper {
    fn new(url: &str, max_in_flight: usize) -> Self {
        let mut c = HttpConnector::new();
        c.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(max_in_flight)
            .pool_idle_timeout(Duration::from_secs(30))
            .build(c);
        Hyper { client, uri: url.parse().unwrap() }
    }
}

impl Transport for Hyper {
    async fn call(&self, remaining: Duration) -> Outcome {
        let req = http::Request::get(self.uri.clone())
            .header("request-timeout-ms", remaining.as_millis().to_string())
            .body(Empty::new())
            .unwrap();
        match self.client.request(req).await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                match resp.into_body().collect().await {
                    Ok(_) => Outcome::Status(status),
                    Err(_) => Outcome::Other,
                }
            }
            Err(e) if e.is_connect() => Outcome::Connect,
            Err(_) => Outcome::Other,
        }
    }
}

fn spec(url: &str, rate: f64, secs: u64, bound: usize) -> LoadSpec {
    LoadSpec::new(
        Target::parse(url).unwrap(),
        "GET",
        vec![],
        "",
        Schedule::constant(rate, Duration::from_secs(secs)).unwrap(),
        Duration::from_millis(1000),
        bound,
        Duration::from_millis(100),
    )
    .unwrap()
}

/// One run on a current-thread runtime of its own, with the hand-written client or hyper's.
fn run(url: &str, rate: f64, secs: u64, bound: usize, hyper: bool) -> LoadResults {
    let s = spec(url, rate, secs, bound);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let bounds = Bounds { max_in_flight: s.bounds.max_in_flight, ..s.bounds };
        if hyper {
            let t = Arc::new(Hyper::new(url, bound));
            let rec = drive(&s.schedule, bounds, s.deadline, t, TokioTimer, |_| {}).await;
            LoadResults::new(&s, url, &rec, Connections::default())
        } else {
            let t = Arc::new(HttpTransport::new(&s));
            let rec = drive(&s.schedule, bounds, s.deadline, t.clone(), TokioTimer, |_| {}).await;
            LoadResults::new(&s, url, &rec, t.connections())
        }
    })
}

fn sustains(url: &str, rate: f64, secs: u64, bound: usize, hyper: bool) -> bool {
    let r = run(url, rate, secs, bound, hyper);
    let t = &r.load.totals;
    let ok = t.good as f64 >= 0.99 * t.offered as f64;
    eprintln!(
        "{} bound {bound} rate {rate}: offered {} good {} dropped {} lag {:.1} ms p99 {:.2} ms → {}",
        if hyper { "hyper" } else { "seawall" },
        t.offered,
        t.good,
        t.dropped(),
        r.load.max_lag_ms,
        r.load.latency_ms.p99.unwrap_or(0.0),
        if ok { "sustained" } else { "not sustained" }
    );
    ok
}

/// The highest sustained rate: up by 20 % a step from 2,000 rps, then three halvings of the
/// last interval (to within 2.5 %).
fn search(url: &str, secs: u64, bound: usize, hyper: bool) -> f64 {
    let (mut best, mut rate, mut failed) = (0.0, 2000.0, None);
    for _ in 0..30 {
        if !sustains(url, rate, secs, bound, hyper) {
            failed = Some(rate);
            break;
        }
        best = rate;
        rate = (rate * 1.2 / 100.0).ceil() * 100.0;
    }
    let Some(mut hi) = failed else { return best };
    for _ in 0..3 {
        let mid = ((best + hi) / 2.0 / 100.0).round() * 100.0;
        if mid <= best || mid >= hi {
            break;
        }
        if sustains(url, mid, secs, bound, hyper) {
            best = mid;
        } else {
            hi = mid;
        }
    }
    best
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().map_or(2, |s| s.parse().expect("SECONDS_PER_STEP"));
    let mut bounds: Vec<usize> = args.map(|s| s.parse().expect("BOUND")).collect();
    if bounds.is_empty() {
        bounds = vec![16, 32, 64, 128, 256, 512];
    }
    let nginx = seawall_testkit::require_external("nginx");
    let (_nginx, url) = seawall_testkit::nginx_return_200(&nginx, 4096);
    let mut rows: Vec<(usize, f64)> = Vec::new();
    for &b in &bounds {
        rows.push((b, search(&url, secs, b, false)));
    }
    let (best_bound, best) =
        rows.iter().copied().fold((0, 0.0), |a, r| if r.1 > a.1 { r } else { a });
    println!("| --max-in-flight | highest sustained rps | × best |");
    println!("|---|---|---|");
    for (b, r) in &rows {
        println!("| {b} | {r:.0} | {:.2} |", r / best.max(1.0));
    }
    let b = best_bound;
    let h = search(&url, secs, b, true);
    println!(
        "bound {b}: hand-written client {best:.0} rps, hyper's pooled client {h:.0} rps: {:.2}×",
        best / h.max(1.0)
    );
}
