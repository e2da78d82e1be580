//! `seawall load`'s generator on real sockets (127.0.0.1, free ports) against an in-test HTTP
//! server whose speed, status and capacity each test chooses.
//!
//! # Robust on a busy machine
//!
//! These tests run on the wall clock, which a loaded machine can stop for a while. So none of
//! them rests on the 100 ms lateness bound the CLI defaults to: each gives the generator a
//! lateness bound just below its deadline (the most [`LoadSpec`] accepts), and asserts on the
//! tool's own accounting — what it counted as sent, dropped (and why), answered by kind, the
//! most in flight — and on what the server saw, rather than on how long something took. What
//! lateness itself does is pinned down on tokio's paused clock in `tests/load_drive.rs`.
//!
//! The change that turns each red (each checked):
//! - awaiting each request before the next (closed loop: one worker) → `a_slow_server_…` (the
//!   server never sees more than one request at a time, one connection);
//! - not giving up at the deadline (the call awaited without its `timeout_at`) →
//!   `the_client_gives_up_…` (every request waits out the server's 30 s hang: none counted at
//!   its deadline, and the run outlasts the test's 15 s);
//! - no in-flight bound (a worker per arrival) → `max_in_flight_…` (all 50 sent, 50 in flight);
//! - 5xx counted as good → `errors_are_counted_…`;
//! - ignoring the ramp (arrivals at the start rate) → `the_ramp_…`.

use seawall_report::{NotJudged, Verdict};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Uri};
use seawall_load::{LoadResults, LoadSpec, Schedule, Stage, Target, parse_header, run};

struct Srv {
    /// Time to answer each request.
    delay: Duration,
    /// One request at a time (capacity 1 / delay), the rest queue.
    serial: Option<tokio::sync::Mutex<()>>,
    /// The first requests seen.
    seen: Mutex<Vec<(Method, HeaderMap, Bytes)>>,
    /// Requests being handled now, and the most at once.
    open: Mutex<(usize, usize)>,
}

/// Counts a request as open at the server while it lives.
struct Open<'a>(&'a Mutex<(usize, usize)>);

impl<'a> Open<'a> {
    fn new(m: &'a Mutex<(usize, usize)>) -> Self {
        let mut o = m.lock().unwrap();
        o.0 += 1;
        o.1 = o.1.max(o.0);
        Self(m)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap().0 -= 1;
    }
}

async fn handle(
    State(s): State<Arc<Srv>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let _open = Open::new(&s.open);
    {
        let mut seen = s.seen.lock().unwrap();
        if seen.len() < 1000 {
            seen.push((method, headers, body));
        }
    }
    match uri.path() {
        "/503" => return StatusCode::SERVICE_UNAVAILABLE,
        "/404" => return StatusCode::NOT_FOUND,
        "/hang" => tokio::time::sleep(Duration::from_secs(30)).await,
        _ => {}
    }
    let _turn = match &s.serial {
        Some(m) => Some(m.lock().await),
        None => None,
    };
    tokio::time::sleep(s.delay).await;
    StatusCode::OK
}

/// Serves on 127.0.0.1:0 until the test's runtime ends.
async fn server(delay: Duration, serial: bool) -> (SocketAddr, Arc<Srv>) {
    let srv = Arc::new(Srv {
        delay,
        serial: serial.then(|| tokio::sync::Mutex::new(())),
        seen: Mutex::new(Vec::new()),
        open: Mutex::new((0, 0)),
    });
    let app = Router::new().fallback(handle).with_state(srv.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    (addr, srv)
}

/// The test's load: the lateness bound 1 ms below the deadline (see the module's doc).
fn spec(url: &str, schedule: Schedule, deadline_ms: u64, max_in_flight: usize) -> LoadSpec {
    spec_late(url, schedule, deadline_ms, max_in_flight, deadline_ms - 1)
}

fn spec_late(
    url: &str,
    schedule: Schedule,
    deadline_ms: u64,
    max_in_flight: usize,
    lateness_ms: u64,
) -> LoadSpec {
    LoadSpec::new(
        Target::parse(url).unwrap(),
        "POST",
        vec![parse_header("X-Test: yes").unwrap()],
        "hello",
        schedule,
        Duration::from_millis(deadline_ms),
        max_in_flight,
        Duration::from_millis(lateness_ms),
    )
    .unwrap()
}

fn constant(rate: f64, secs: u64) -> Schedule {
    Schedule::constant(rate, Duration::from_secs(secs)).unwrap()
}

async fn load(url: &str, s: LoadSpec) -> LoadResults {
    let out =
        tokio::time::timeout(Duration::from_secs(60), run(&s, url, |_| {})).await.expect("bounded");
    eprintln!("{}", out.render_table());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_does_not_slow_the_sender() {
    // Capacity 20 rps (one at a time, 50 ms each), offered 40 rps for 2 s: requests queue at the
    // server; request k (due at 25k ms) is answered near 50(k + 1) ms, latency ≈ 25k + 50 ms.
    let (addr, srv) = server(Duration::from_millis(50), true).await;
    let url = format!("http://{addr}/");
    let out = load(&url, spec(&url, constant(40.0, 2), 5000, 200)).await;
    let l = &out.load;
    let sent: Vec<u64> = l.per_second.iter().map(|s| s.counts.sent).collect();
    assert_eq!(sent, vec![40, 40], "every request sent, none dropped");
    assert_eq!((l.totals.dropped(), l.totals.good), (0, 80));
    // Not at the server's pace: it answers one request per 50 ms whatever the machine does,
    // so by the last send (≥ 1.975 s after the first) it has answered at most 40 of the 80,
    // and the rest are at its door at once. A closed loop never has more than one there. (A
    // stall of this process stops the server's timers as well as the generator's.)
    let most = srv.open.lock().unwrap().1;
    assert!(most >= 20, "the server saw at most {most} requests at once");
    // Lower bounds: a busy machine only adds to latencies.
    let (p50, max) = (l.latency_ms.p50.unwrap(), l.latency_ms.max.unwrap());
    assert!(p50 >= 700.0, "the queueing is in the latency: p50 {p50} ms");
    assert!(max >= 1700.0, "the last request waited behind 79 others: max {max} ms");
    assert!(
        l.peak_connections > 10,
        "a connection per outstanding request: {}",
        l.peak_connections
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_gives_up_at_the_deadline_and_counts_it() {
    let (addr, srv) = server(Duration::ZERO, false).await;
    let url = format!("http://{addr}/hang");
    let t0 = Instant::now();
    let out = load(&url, spec(&url, constant(20.0, 1), 500, 100)).await;
    let elapsed = t0.elapsed();
    let l = &out.load;
    assert_eq!((l.totals.sent, l.totals.deadline, l.totals.good), (20, 20, 0));
    // Recorded at the deadline (from the scheduled time): never less, and never the server's
    // 30 s (a stalled machine can only record it later than due, within the run).
    let (p50, max) = (l.per_second[0].latency_ms.p50.unwrap(), l.latency_ms.max.unwrap());
    assert!(p50 >= 499.0, "recorded at the deadline: p50 {p50}");
    assert!(max <= elapsed.as_secs_f64() * 1000.0, "max {max} ms in a {elapsed:?} run");
    assert!(elapsed < Duration::from_secs(15), "the server hangs 30 s; the run took {elapsed:?}");
    // The deadline went out on the wire, as what was left of it when sent: the deadline less
    // the request's lag, which is at most the worst lag the generator counted.
    let lowest = 500.0 - l.max_lag_ms - 1.0;
    let seen = srv.seen.lock().unwrap();
    assert_eq!(seen.len(), 20);
    for (_, h, _) in seen.iter() {
        let ms: u64 = h["request-timeout-ms"].to_str().unwrap().parse().unwrap();
        assert!(
            ms <= 500 && ms as f64 >= lowest,
            "Request-Timeout-Ms {ms}, lag ≤ {}",
            l.max_lag_ms
        );
        assert_eq!(h["request-attempt"], "1");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_drops_are_counted() {
    // 5 slots, every request hangs to its 500 ms deadline (from its scheduled time), 50 rps for
    // 1 s, 100 ms of lateness allowed (here the bound is the point: without it every arrival
    // would be sent, 400 ms late). A slot frees at its request's time + 500 ms and then sends
    // only an arrival due at most 100 ms before: so its sends are ≥ 400 ms of schedule apart,
    // at most 3 in the 980 ms of arrivals, 15 in all, and the rest must be counted as dropped.
    // That holds on the generator's own clock, whatever the machine does; how many of the
    // drops are "full" rather than "late" does not (a stall can turn one into the other), so
    // only some must be: every arrival taken up when already overdue by a busy slot is one.
    let (addr, _srv) = server(Duration::ZERO, false).await;
    let url = format!("http://{addr}/hang");
    let out = load(&url, spec_late(&url, constant(50.0, 1), 500, 5, 100)).await;
    let t = &out.load.totals;
    assert_eq!(t.offered, 50);
    assert_eq!(t.sent + t.dropped_full + t.dropped_late, 50);
    assert!((1..=15).contains(&t.sent), "sent {}", t.sent);
    assert!(t.dropped_full >= 1, "dropped at max in flight: {}", t.dropped_full);
    assert_eq!(t.deadline, t.sent);
    assert!(out.load.peak_in_flight <= 5 && out.load.peak_connections <= 5, "{:?}", out.load);
    // Each request abandoned at its deadline closes its connection: one opened per request sent.
    assert_eq!(out.load.connections_opened as u64, t.sent, "{:?}", out.load);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_counted_by_kind() {
    let (addr, _srv) = server(Duration::ZERO, false).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (u503, u404, ucon) =
        (format!("http://{addr}/503"), format!("http://{addr}/404"), format!("http://{closed}/"));
    let (a, b, c) = tokio::join!(
        load(&u503, spec(&u503, constant(20.0, 1), 1000, 100)),
        load(&u404, spec(&u404, constant(20.0, 1), 1000, 100)),
        load(&ucon, spec(&ucon, constant(20.0, 1), 1000, 100)),
    );
    assert_eq!((a.load.totals.status_5xx, a.load.totals.good), (20, 0));
    assert_eq!((b.load.totals.status_4xx, b.load.totals.good), (20, 0));
    assert_eq!((c.load.totals.connect, c.load.totals.good), (20, 0));
    assert_eq!(c.load.latency_ms.count, 0, "a refused connection has no latency");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ramp_is_what_is_offered_and_the_results_are_the_shared_format() {
    let (addr, srv) = server(Duration::ZERO, false).await;
    let url = format!("http://{addr}/checkout?x=1");
    let ramp = Schedule::ramp(
        0.0,
        vec![
            Stage { duration: Duration::from_secs(2), target: 100.0 },
            Stage { duration: Duration::from_secs(1), target: 100.0 },
        ],
    )
    .unwrap();
    let out = load(&url, spec(&url, ramp, 1000, 100)).await;
    let offered: Vec<u64> = out.load.per_second.iter().map(|s| s.counts.offered).collect();
    assert_eq!(offered, vec![25, 75, 100]);
    // Every one sent and answered: the 999 ms lateness bound leaves nothing to drop.
    assert_eq!(out.load.totals.good, 200);
    // results.json reads as the format simulate and lab share.
    let back: seawall_report::Results = serde_json::from_str(&out.to_json()).unwrap();
    let s = &back.runs[0].series;
    assert_eq!(s.edge_rps, vec![25.0, 75.0, 100.0]);
    assert_eq!(s.goodput_rps, vec![25.0, 75.0, 100.0]);
    assert_eq!(back.source, seawall_report::Source::Lab);
    // No fault: recovery is not judged (a load test is not "degraded" for lack of one).
    let v = back.runs[0].verdict;
    assert_eq!(v, Verdict::NotJudged { because: NotJudged::NoFault });
    let again: LoadResults = serde_json::from_str(&out.to_json()).unwrap();
    assert_eq!(again, out);
    // What reached the server: the method, the body, the user's header and the Host.
    let seen = srv.seen.lock().unwrap();
    let (m, h, b) = &seen[0];
    assert_eq!((m.as_str(), &b[..]), ("POST", &b"hello"[..]));
    assert_eq!(h["x-test"], "yes");
    assert_eq!(h["host"], addr.to_string().as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_rate_reuses_a_few_warm_connections() {
    // 100 rps for 1 s under a bound of 512, answered at once: a connection comes free
    // long before the next request is due, so the pool hands it on. With a connection of each
    // worker's own (the workers take arrivals in turn) every one of the 100 requests would open
    // its own. A stall of the machine can put a few requests in flight at once; never 100.
    let (addr, _srv) = server(Duration::ZERO, false).await;
    let url = format!("http://{addr}/fast");
    let out = load(&url, spec(&url, constant(100.0, 1), 1000, 512)).await;
    let l = &out.load;
    assert_eq!(l.totals.good, 100);
    assert!(l.connections_opened <= 20, "opened {} connections", l.connections_opened);
    assert!(l.peak_connections <= l.connections_opened);
}
