//! The reject path against the reference everyone runs: Debian's nginx answering every request
//! `503` (`return 503;`) and `ShedLayer` servers rejecting at their cap, all driven by `wrk` on
//! loopback with the same threads and connections, alternating in one run.
//!
//! `cargo bench -p seawall-tower --bench server_reject_nginx -- --seconds 10 --rounds 3`
//!
//! Options: `--seconds <n>` per measurement (default 10), `--rounds <n>` (default 2).
//!
//! nginx runs as its own master process from a config written to a temporary directory
//! (`daemon off;`, pid, error log and temp paths there; `-p <dir> -c <dir>/nginx.conf`), with
//! two worker processes, each with its own accept loop. seawall runs on two server stacks, each
//! measured with and without the layer, so the layer's cost and the stack's are told apart:
//!
//! - **axum**: `axum::serve` (hyper-util's auto builder) of a `Router` with `.layer(ShedLayer)`
//!   (applied per route, after routing) on one 2-thread tokio runtime: what a first axum server
//!   looks like.
//! - **core**: what a performance-minded user runs, shaped like nginx: two threads, each with
//!   its own current-thread runtime and its own listener on one port (`SO_REUSEPORT`), hyper's
//!   HTTP/1-only `http1::Builder` (through hyper-util's `TowerToHyperService`), `TCP_NODELAY`,
//!   and the `ShedLayer` wrapping the whole service. One layer, so one limit for both threads.
//! - **no-op**: the same stack answering `503` + `Retry-After: 1` itself, without seawall: the
//!   same bytes as the layer's answer (whose `Retry-After` is a jittered 1–5, one digit too).
//!
//! Each `ShedLayer` has one slot and no queue, and one request that never finishes holds the
//! slot, so every other request is refused `503` + `Retry-After` by the layer (the handler
//! never runs). Everything keeps connections alive. nginx's `503` carries its default HTML error
//! page; seawall's its static RFC 9457 problem body (`server::problem::OVERLOADED`). Without nginx or wrk the bench says so and exits 0, or 1
//! when `SEAWALL_REQUIRE_EXTERNAL=1` (as `.ci/run` sets).

#[path = "server_common/mod.rs"]
mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use seawall_tower::server::ShedLayer;
use tower::Layer;

const THREADS: u32 = 2;
const CONNECTIONS: u32 = 64;

const HELP: &str = "server_reject_nginx: 503s per second, nginx `return 503` vs a saturated ShedLayer, both under wrk

usage: cargo bench -p seawall-tower --bench server_reject_nginx -- [options]
  --seconds <n>   length of each wrk run (default 10, 1-120)
  --rounds <n>    nginx/ShedLayer pairs (default 2, 1-10)";

fn parse_args() -> Result<(u64, u32), String> {
    let (mut seconds, mut rounds) = (10u64, 2u32);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bench" => {} // cargo bench passes it to harness-less benches
            "--seconds" | "--rounds" => {
                let v = it.next().ok_or(format!("{a} needs a value"))?;
                let n: u64 = v.parse().map_err(|_| format!("{a} {v}: not a whole number"))?;
                match a.as_str() {
                    "--seconds" if (1..=120).contains(&n) => seconds = n,
                    "--rounds" if (1..=10).contains(&n) => rounds = n as u32,
                    _ => return Err(format!("{a} {n}: out of range\n\n{HELP}")),
                }
            }
            "-h" | "--help" => return Err(HELP.into()),
            other => return Err(format!("unknown argument {other:?}\n\n{HELP}")),
        }
    }
    Ok((seconds, rounds))
}

/// Skips (exit 0) or, under `SEAWALL_REQUIRE_EXTERNAL=1`, fails (exit 1).
fn missing(what: &str) -> ! {
    if std::env::var("SEAWALL_REQUIRE_EXTERNAL").is_ok_and(|v| v == "1") {
        eprintln!("server_reject_nginx: {what} is required (SEAWALL_REQUIRE_EXTERNAL=1)");
        std::process::exit(1);
    }
    eprintln!("server_reject_nginx: skipped, {what} not found (install nginx and wrk)");
    std::process::exit(0);
}

fn found(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    l.local_addr().expect("addr").port()
}

fn nginx_conf(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nworker_processes {THREADS};\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  \
         keepalive_requests 1000000;\n  \
         server {{\n    listen 127.0.0.1:{port};\n    location / {{ return 503; }}\n  }}\n}}\n"
    )
}

/// nginx's master process; stopped with `SIGQUIT` (then `SIGKILL` after 5 s) when dropped, and
/// its temporary directory removed.
struct Nginx {
    child: Child,
    dir: PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-QUIT", &pid]).status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self.dir);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_nginx(nginx: &Path) -> (Nginx, SocketAddr) {
    let dir = std::env::temp_dir().join(format!("seawall-nginx-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let port = free_port();
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, nginx_conf(&dir, port)).expect("write nginx.conf");
    let child = Command::new(nginx)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start nginx");
    let mut n = Nginx { child, dir };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t0 = Instant::now();
    while TcpStream::connect(addr).is_err() {
        if t0.elapsed() > Duration::from_secs(5) || matches!(n.child.try_wait(), Ok(Some(_))) {
            let log = std::fs::read_to_string(n.dir.join("error.log")).unwrap_or_default();
            panic!("nginx did not listen on {addr} within 5 s: {log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (n, addr)
}

/// What one wrk run saw.
struct Wrk {
    rate: f64,
    requests: u64,
    non_2xx: u64,
}

/// `wrk -t THREADS -c CONNECTIONS -d <seconds>s http://addr/`, parsed.
fn wrk(wrk: &Path, addr: SocketAddr, seconds: u64) -> Wrk {
    let out = Command::new(wrk)
        .args(["-t", &THREADS.to_string(), "-c", &CONNECTIONS.to_string()])
        .arg(format!("-d{seconds}s"))
        .arg(format!("http://{addr}/"))
        .stdin(Stdio::null())
        .output()
        .expect("run wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |prefix: &str| -> Option<String> {
        text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(|r| r.trim().to_string()))
    };
    let rate = field("Requests/sec:").and_then(|v| v.parse().ok());
    let requests = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok());
    let non_2xx = field("Non-2xx or 3xx responses:").and_then(|v| v.parse().ok()).unwrap_or(0);
    match (rate, requests) {
        (Some(rate), Some(requests)) => Wrk { rate, requests, non_2xx },
        _ => panic!("could not read wrk's output:\n{text}"),
    }
}

/// The hanging handler every `ShedLayer` server wraps: the one request that reaches it holds the
/// layer's only slot for the whole run.
fn hanging() -> Router {
    Router::new().route(
        "/",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            ""
        }),
    )
}

/// The no-op's answer, byte for byte the layer's: `503`, `Retry-After: 1`, the same static
/// problem body.
fn unavailable() -> axum::response::Response {
    let body = seawall_tower::server::problem::OVERLOADED;
    let mut res = axum::response::Response::new(axum::body::Body::from(body));
    *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    res.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/problem+json"),
    );
    res
}

/// One slot, no queue, the default jittered `Retry-After` (1–5 s: one digit, as the no-op's):
/// every request but the one holding the slot is shed.
fn saturated() -> ShedLayer {
    ShedLayer::new(NonZeroUsize::new(1).expect("1")).with_queue(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) { (v[mid - 1] + v[mid]) / 2.0 } else { v[mid] }
}

fn main() {
    let (seconds, rounds) = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(if msg == HELP { 0 } else { 2 });
        }
    };
    let Some(nginx_bin) = found("nginx") else { missing("nginx") };
    let Some(wrk_bin) = found("wrk") else { missing("wrk") };
    let version = Command::new(&nginx_bin).arg("-v").output().map(|o| o.stderr).unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();

    // axum::serve (hyper-util's auto builder) on one 2-thread runtime; the layer per route.
    let rt = common::runtime();
    let axum_noop =
        rt.block_on(common::serve(Router::new().route("/", get(|| async { unavailable() }))));
    let axum_shed = rt.block_on(common::serve(hanging().layer(saturated())));
    // One current-thread runtime per core, each with its own listener on one port, HTTP/1 only;
    // the layer wraps the whole service.
    let cores = THREADS as usize;
    let noop = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
        Ok::<_, std::convert::Infallible>(unavailable())
    });
    let core_noop = common::serve_http1_per_core("core-noop", cores, noop);
    let core_shed = common::serve_http1_per_core("core-shed", cores, saturated().layer(hanging()));
    let holds: Vec<_> = [axum_shed, core_shed]
        .into_iter()
        .map(|a| rt.spawn(common::closed_loop(a, "/", 1, Duration::from_millis(1), StatusCode::OK)))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let (nginx, nginx_addr) = start_nginx(&nginx_bin);

    println!(
        "server_reject_nginx: {} ({THREADS} workers, `return 503`) vs ShedLayer (1 slot held, \
         queue 0), wrk -t{THREADS} -c{CONNECTIONS} -d{seconds}s on loopback; load average before: {}",
        String::from_utf8_lossy(&version).trim(),
        load.trim()
    );
    println!(
        "stacks: axum = axum::serve of a Router, layer per route, tokio {THREADS}-thread runtime; \
         core = hyper http1::Builder, layer around the whole service, {THREADS} current-thread \
         runtimes with a SO_REUSEPORT listener each; no-op = the same stack answering 503 itself"
    );
    println!(
        "round | nginx 503/s | axum no-op | axum ShedLayer | core no-op | core ShedLayer | \
         axum Shed/nginx | core Shed/nginx | axum Shed/no-op | core Shed/no-op"
    );
    let servers = [nginx_addr, axum_noop, axum_shed, core_noop, core_shed];
    let names = ["nginx", "axum no-op", "axum ShedLayer", "core no-op", "core ShedLayer"];
    let mut ratios: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        let mut r = [0.0; 5];
        for (i, addr) in servers.iter().enumerate() {
            let w = wrk(&wrk_bin, *addr, seconds);
            assert!(
                w.non_2xx as f64 >= w.requests as f64 * 0.99,
                "{} must answer 503 to (nearly) everything: {} of {}",
                names[i],
                w.non_2xx,
                w.requests
            );
            r[i] = w.rate;
        }
        let round_ratios = [r[2] / r[0], r[4] / r[0], r[2] / r[1], r[4] / r[3]];
        for (all, x) in ratios.iter_mut().zip(round_ratios) {
            all.push(x);
        }
        println!(
            "{round} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            round_ratios[0],
            round_ratios[1],
            round_ratios[2],
            round_ratios[3]
        );
    }
    let [a, c, an, cn] = ratios.map(median);
    println!(
        "median ratios: ShedLayer / nginx: axum {a:.2}, core {c:.2}; ShedLayer / no-op: axum \
         {an:.2}, core {cn:.2}"
    );
    drop(nginx);
    for h in holds {
        h.abort();
    }
}
