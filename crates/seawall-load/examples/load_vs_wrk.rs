//! `seawall load` against Debian's `wrk` on the same loopback nginx, in the same run.
//!
//! wrk is closed-loop: its connections send as fast as answers come back, so its req/s is the
//! most the server and the client machine manage together. An open-loop generator has no such
//! figure of its own; its equivalent is the highest rate it *sustains*: at least 99 % of the
//! scheduled requests sent (not dropped late or at max in flight) and answered 2xx within the
//! deadline.
//! This example measures wrk's req/s with one thread and with two (before and after), then runs
//! `seawall load` (the library the CLI calls) at rising rates from a fraction of wrk's best (half
//! by default) until a step is not sustained, narrows that last step down by halving it three
//! times, and prints them and the ratio against wrk's best:
//! wrk's `-t1` or `-t2`, whichever managed more (the mean of its before and after), so the
//! generator's thread layout is not compared against a handicapped wrk.
//!
//! ```text
//! cargo run --release -p seawall-load --example load_vs_wrk -- [--threads N] [SECONDS_PER_STEP] [START_FRACTION] [CONNECTIONS]...
//! ```
//! `--threads` sets the generator's threads (default: `seawall_load::default_threads()`).
//! Needs `nginx` and `wrk` on PATH (Debian packages of those names). nginx runs as one process
//! (`master_process off`, one worker) on a free port with a generated config, and is killed on
//! exit, also on a panic.

use std::net::TcpStream;
use std::num::NonZeroUsize;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seawall_load::{LoadResults, LoadSpec, Schedule, Target, default_threads, run_blocking};

struct Nginx {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn nginx(port: u16) -> Nginx {
    let dir = std::env::temp_dir().join(format!("seawall-load-vs-wrk-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\nmaster_process off;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 10000000;\n  keepalive_timeout 60s;\n\
           client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n  fastcgi_temp_path {d}/tmp;\n\
           uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n\
           server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new("nginx")
        .args([
            "-p",
            &d.to_string(),
            "-e",
            &format!("{d}/error.log"),
            "-c",
            &format!("{d}/nginx.conf"),
        ])
        .stdin(Stdio::null())
        .spawn()
        .expect("nginx on PATH (apt-get install nginx)");
    let n = Nginx { child, dir };
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "nginx did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    n
}

fn wrk(url: &str, threads: usize, secs: u64, conns: usize) -> f64 {
    let args = [&format!("-t{threads}"), &format!("-c{conns}"), &format!("-d{secs}s"), url];
    eprintln!("$ wrk {}", args.join(" "));
    let out = Command::new("wrk").args(args).output().expect("wrk on PATH (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout);
    eprint!("{text}");
    let line =
        text.lines().find(|l| l.starts_with("Requests/sec:")).expect("wrk prints Requests/sec");
    line["Requests/sec:".len()..].trim().parse().expect("a number")
}

fn seawall(url: &str, rate: f64, secs: u64, conns: usize, threads: NonZeroUsize) -> LoadResults {
    let mut spec = LoadSpec::new(
        Target::parse(url).unwrap(),
        "GET",
        vec![],
        "",
        Schedule::constant(rate, Duration::from_secs(secs)).unwrap(),
        Duration::from_millis(1000),
        conns,
        Duration::from_millis(100),
    )
    .unwrap();
    spec.threads = threads;
    run_blocking(&spec, url, |_| {}).unwrap()
}

/// Whether `seawall load` sustains `rate` with `conns` in flight (printing the step).
fn sustains(url: &str, rate: f64, secs: u64, conns: usize, threads: NonZeroUsize) -> bool {
    let r = seawall(url, rate, secs, conns, threads);
    let (t, l) = (&r.load.totals, &r.load);
    // Sustained: at least 99 % of the scheduled requests sent and answered 2xx in time. (A
    // stricter "none dropped" measures the machine's scheduling stalls, not throughput: on a
    // shared machine a thread off the CPU for 50 ms at 10,000 rps owes 500 requests at once.)
    let ok = t.good as f64 >= 0.99 * t.offered as f64;
    eprintln!(
        "seawall load --rate {rate} --duration {secs} --max-in-flight {conns} ({threads} threads): offered {} sent {} dropped {} (late {}, full {}) good {} p50 {:.2} ms p99 {:.2} ms max {:.2} ms lag {:.1} ms, {} connections → {}",
        t.offered,
        t.sent,
        t.dropped(),
        t.dropped_late,
        t.dropped_full,
        t.good,
        l.latency_ms.p50.unwrap_or(0.0),
        l.latency_ms.p99.unwrap_or(0.0),
        l.latency_ms.max.unwrap_or(0.0),
        l.max_lag_ms,
        l.peak_connections,
        if ok { "sustained" } else { "NOT sustained" }
    );
    ok
}

/// The highest rate `seawall load` sustains with `conns` in flight: from `from` rps upwards by
/// 15 % a step (at most 24 steps: up to 28× the start), then three halvings of the interval
/// between the last rate sustained and the first not (to within 2 % of it, where the steps
/// alone left up to 15 % unmeasured).
fn search(url: &str, from: f64, secs: u64, conns: usize, threads: NonZeroUsize) -> f64 {
    let mut rate = (from / 100.0).round().max(1.0) * 100.0;
    let mut best = 0.0;
    let mut failed = None;
    for _ in 0..24 {
        if !sustains(url, rate, secs, conns, threads) {
            failed = Some(rate);
            break;
        }
        best = rate;
        rate = (rate * 1.15 / 100.0).ceil() * 100.0;
    }
    let Some(mut hi) = failed else { return best };
    for _ in 0..3 {
        let mid = ((best + hi) / 2.0 / 10.0).round() * 10.0;
        if mid <= best || mid >= hi {
            break;
        }
        if sustains(url, mid, secs, conns, threads) {
            best = mid;
        } else {
            hi = mid;
        }
    }
    best
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut threads = default_threads();
    if let Some(i) = args.iter().position(|a| a == "--threads") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).expect("--threads N, N ≥ 1");
        threads = n;
        args.drain(i..i + 2);
    }
    let mut a = args.into_iter();
    let secs: u64 = a.next().map_or(3, |s| s.parse().expect("SECONDS_PER_STEP"));
    let start: f64 = a.next().map_or(0.5, |s| s.parse().expect("START_FRACTION"));
    let conns: Vec<usize> = a.map(|s| s.parse().expect("CONNECTIONS")).collect();
    let conns = if conns.is_empty() { vec![64] } else { conns };
    let port = free_port();
    let _nginx = nginx(port);
    let url = format!("http://127.0.0.1:{port}/");
    let mut lines = Vec::new();
    for c in conns {
        // wrk before and after the search, with one thread and with two: the machine's load
        // moves every figure, so each is the mean of its two runs, and the ratio is against
        // the better of the two layouts.
        let before = [wrk(&url, 1, secs, c), wrk(&url, 2, secs, c)];
        let best_before = before[0].max(before[1]);
        let best = search(&url, best_before * start, secs, c, threads);
        let after = [wrk(&url, 1, secs, c), wrk(&url, 2, secs, c)];
        let mean = [(before[0] + after[0]) / 2.0, (before[1] + after[1]) / 2.0];
        let wrk_rps = mean[0].max(mean[1]);
        lines.push(format!(
            "{c} connections: wrk -t1 {:.0} then {:.0}, -t2 {:.0} then {:.0} req/s; seawall load ({threads} threads) highest sustained {best:.0} rps; ratio {:.2} against wrk's best (-t{}), {:.2} against -t2",
            before[0],
            after[0],
            before[1],
            after[1],
            best / wrk_rps,
            if mean[0] >= mean[1] { 1 } else { 2 },
            best / mean[1],
        ));
    }
    for l in lines {
        println!("{l}");
    }
}
