//! Helpers for the `detect --prometheus` tests: a metrics server whose counters follow a storm
//! or a spike in wall-clock time (what a real Prometheus scrapes at its own pace), a real
//! Prometheus started on a free loopback port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `(t, verdict)` of each line of `detect --json`.
pub(crate) fn verdicts(stdout: &[u8]) -> Vec<(f64, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            (v["t"].as_f64().unwrap(), v["verdict"].as_str().unwrap().to_string())
        })
        .collect()
}

/// `(start_unix_s, verdict)` of each line of a trace source's `detect --json` (the closing
/// signals line has neither).
pub(crate) fn unix_verdicts(lines: &[serde_json::Value]) -> Vec<(f64, String)> {
    lines
        .iter()
        .filter_map(|l| Some((l["start_unix_s"].as_f64()?, l["verdict"].as_str()?.to_string())))
        .collect()
}

/// The interval starts of those verdicts that call a storm (`retry_storm`, `metastable`).
pub(crate) fn unix_storms(lines: &[serde_json::Value]) -> Vec<f64> {
    unix_verdicts(lines)
        .into_iter()
        .filter(|(_, v)| v == "retry_storm" || v == "metastable")
        .map(|(t, _)| t)
        .collect()
}

/// A free loopback port (bound, then released for the program that will listen on it).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A counter growing at `r1`/s until `T_FAULT`, then `r2`/s, after a ramp of `ramp` seconds.
#[allow(non_snake_case)]
fn counter(t: f64, T_FAULT: f64, r1: f64, r2: f64, ramp: f64) -> f64 {
    let before = r1 * t.min(T_FAULT);
    let ramp_t = (t - T_FAULT).clamp(0.0, ramp);
    // Linear ramp from r1 to r2 over `ramp` seconds, then r2.
    let during =
        if ramp > 0.0 { r1 * ramp_t + (r2 - r1) * ramp_t * ramp_t / (2.0 * ramp) } else { 0.0 };
    let after = r2 * (t - T_FAULT - ramp).max(0.0);
    before + during + after
}

/// The page of `path` at `t` seconds: both tiers of one scenario on one page (one scrape, so
/// the ratio is never skewed by two targets scraped a few hundred milliseconds apart).
#[allow(non_snake_case)]
pub(crate) fn page(path: &str, t: f64, T_FAULT: f64) -> Option<String> {
    let (edge, good, dep) = match path {
        // Retry storm: edge flat at 100 rps; from T_FAULT every call fails and is retried: 400
        // attempts/s reach the dependency, goodput 0.
        "/storm" => (
            counter(t, T_FAULT, 100.0, 100.0, 0.0),
            counter(t, T_FAULT, 100.0, 0.0, 0.0),
            counter(t, T_FAULT, 100.0, 400.0, 0.0),
        ),
        // Traffic spike: edge 100 → 300 rps over 4 s; one attempt per call; all good.
        "/spike" => {
            let c = counter(t, T_FAULT, 100.0, 300.0, 4.0);
            (c, c, c)
        }
        // A restart at T_FAULT: every counter starts again from 0.
        "/restart" => {
            let c = if t < T_FAULT { 100.0 * t } else { 100.0 * (t - T_FAULT) };
            (c, c, c)
        }
        _ => return None,
    };
    Some(format!(
        "# TYPE seawall_server_throughput_total counter\n\
         seawall_server_throughput_total{{tier=\"edge\"}} {edge:.3}\n\
         seawall_server_throughput_total{{tier=\"dep\"}} {dep:.3}\n\
         # TYPE seawall_client_attempt_started_total counter\n\
         seawall_client_attempt_started_total{{tier=\"caller\"}} {dep:.3}\n\
         # TYPE seawall_server_goodput_total counter\n\
         seawall_server_goodput_total{{tier=\"edge\"}} {good:.3}\n"
    ))
}

/// What a recorded series counts, for [`recorded`] to rewrite its value.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// Edge requests answered well.
    Good,
    /// Edge requests answered badly (edge − good).
    Bad,
    /// Attempts at the dependency.
    Dep,
    /// Attempts at the dependency beyond the logical calls (dep − edge: retries).
    Retry,
    /// Attempts at the dependency that failed (dep − good).
    DepBad,
    /// Retries refused for overflow.
    Overflow,
}

fn role(line: &str) -> Option<Role> {
    let has = |s: &str| line.contains(s);
    if has("envoy_cluster_name=\"orders\"") {
        return match line.split('{').next()? {
            "envoy_cluster_upstream_rq_total" => Some(Role::Dep),
            "envoy_cluster_upstream_rq_retry" => Some(Role::Retry),
            "envoy_cluster_upstream_rq_retry_overflow" => Some(Role::Overflow),
            "envoy_cluster_upstream_rq_xx" if has("class=\"2\"") => Some(Role::Good),
            "envoy_cluster_upstream_rq_xx" if has("class=\"5\"") => Some(Role::DepBad),
            _ => None,
        };
    }
    if !line.starts_with("istio_requests_total{") {
        return None;
    }
    let ok = has("response_code=\"200\"");
    if has("destination_workload=\"productpage-v1\"") {
        Some(if ok { Role::Good } else { Role::Bad })
    } else if has("destination_workload=\"reviews-v1\"") {
        Some(if ok { Role::Good } else { Role::DepBad })
    } else {
        None
    }
}

/// A recorded Envoy or Istio page (`/envoy/storm`, `/istio/spike`, …) with the values of its
/// call-path counters rewritten to follow the scenario; every other line exactly as recorded.
pub(crate) fn recorded(path: &str, t: f64, fault: f64) -> Option<String> {
    let (fixture, scenario) = path.trim_start_matches('/').split_once('/')?;
    let text = match fixture {
        "envoy" => include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../seawall-detect/tests/recorded/envoy.prom"
        )),
        "istio" => include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../seawall-detect/tests/recorded/istio.prom"
        )),
        _ => return None,
    };
    let c = |r1, r2, ramp| counter(t, fault, r1, r2, ramp);
    let (edge, good, dep, overflow) = match scenario {
        "storm" => {
            (c(100.0, 100.0, 0.0), c(100.0, 0.0, 0.0), c(100.0, 400.0, 0.0), c(0.0, 50.0, 0.0))
        }
        "spike" => {
            let e = c(100.0, 300.0, 4.0);
            (e, e, e, 0.0)
        }
        _ => return None,
    };
    let mut out = String::new();
    for line in text.lines() {
        let value = match role(line) {
            None => {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            Some(Role::Good) => good,
            Some(Role::Bad) => edge - good,
            Some(Role::Dep) => dep,
            Some(Role::Retry) => dep - edge,
            Some(Role::DepBad) => dep - good,
            Some(Role::Overflow) => overflow,
        };
        let (series, _) = line.rsplit_once(' ')?;
        out.push_str(&format!("{series} {}\n", value.max(0.0).round()));
    }
    Some(out)
}

/// An HTTP/1.1 server on 127.0.0.1 answering `page`s (and `canned` bodies for other paths by
/// prefix); stopped when dropped.
/// What a server answers for a path at `t` seconds, the fault at `fault` seconds.
pub(crate) type Pages = fn(&str, f64, f64) -> Option<String>;

pub(crate) struct Server {
    pub(crate) addr: String,
    pub(crate) started: Instant,
    stop: Arc<AtomicBool>,
    fault_ms: Arc<AtomicU64>,
}

impl Server {
    pub(crate) fn start(canned: Vec<(&'static str, u16, &'static str, &'static str)>) -> Server {
        Server::with_pages(page, canned)
    }

    pub(crate) fn with_pages(
        pages: Pages,
        canned: Vec<(&'static str, u16, &'static str, &'static str)>,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let flag = stop.clone();
        let fault_ms = Arc::new(AtomicU64::new(u64::MAX));
        let fault = fault_ms.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let canned = canned.clone();
                let fault = fault.load(Ordering::SeqCst) as f64 / 1000.0;
                std::thread::spawn(move || answer(stream, pages, started, fault, &canned));
            }
        });
        Server { addr, started, stop, fault_ms }
    }

    /// Seconds since the server started.
    pub(crate) fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Schedules the fault (storm, spike, restart) `after` seconds from now; returns its time
    /// on the server's clock.
    pub(crate) fn fault_in(&self, after: f64) -> f64 {
        let at = self.now() + after;
        self.fault_ms.store((at * 1000.0) as u64, Ordering::SeqCst);
        at
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
    }
}

fn answer(
    mut stream: TcpStream,
    pages: Pages,
    started: Instant,
    fault: f64,
    canned: &[(&str, u16, &str, &str)],
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    let _ = reader.read_line(&mut request_line);
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        header.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (status, ctype, body) = match pages(&path, started.elapsed().as_secs_f64(), fault) {
        Some(p) => (200, "text/plain; version=0.0.4", p),
        None => match canned.iter().find(|(prefix, ..)| path.starts_with(prefix)) {
            Some((_, status, ctype, body)) => (*status, *ctype, body.to_string()),
            None => (404, "text/plain", "not found".to_string()),
        },
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A plain GET on loopback; the body, or `None` on any failure.
pub(crate) fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// A real Prometheus on a free loopback port scraping `jobs` (name, metrics path) on `target`
/// every second; killed and reaped when dropped.
pub(crate) struct Prometheus {
    pub(crate) addr: String,
    child: Child,
    dir: TempDir,
}

pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "seawall-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Prometheus {
    pub(crate) fn start(target: &str, jobs: &[(&str, &str)]) -> Prometheus {
        Prometheus::start_in(TempDir::new("prometheus"), target, jobs)
    }

    /// [`Prometheus::start`] on `dir/data`, which may already hold blocks (backfilled data).
    pub(crate) fn start_in(dir: TempDir, target: &str, jobs: &[(&str, &str)]) -> Prometheus {
        let mut cfg = String::new();
        if jobs.is_empty() {
            cfg.push_str("  []\n");
        }
        for (job, path) in jobs {
            cfg.push_str(&format!(
                "  - job_name: {job}\n    metrics_path: {path}\n    static_configs:\n      - targets: ['{target}']\n"
            ));
        }
        Prometheus::start_with(dir, &cfg)
    }

    /// A Prometheus whose one job (`lab`) takes its targets from `dir/targets.json` (file-based
    /// service discovery, re-read when the file changes): for targets whose ports are known only
    /// once they are up. Write that file with [`Prometheus::set_targets`].
    pub(crate) fn start_file_sd(dir: TempDir) -> Prometheus {
        let targets = dir.0.join("targets.json");
        std::fs::write(&targets, "[]").unwrap();
        let cfg = format!(
            "  - job_name: lab\n    file_sd_configs:\n      - files: ['{}']\n",
            targets.display()
        );
        Prometheus::start_with(dir, &cfg)
    }

    /// Replaces the file-discovered targets: `(host:port, labels)` each (written whole, then
    /// renamed, so Prometheus never reads half of it).
    pub(crate) fn set_targets(&self, targets: &[(String, Vec<(&str, String)>)]) {
        let groups: Vec<serde_json::Value> = targets
            .iter()
            .map(|(t, labels)| {
                let l: serde_json::Map<String, serde_json::Value> =
                    labels.iter().map(|(k, v)| (k.to_string(), v.clone().into())).collect();
                serde_json::json!({ "targets": [t], "labels": l })
            })
            .collect();
        let tmp = self.dir.0.join("targets.tmp");
        std::fs::write(&tmp, serde_json::to_string(&groups).unwrap()).unwrap();
        std::fs::rename(&tmp, self.dir.0.join("targets.json")).unwrap();
    }

    /// A Prometheus scraping `jobs` (`(job, host:port)`, path `/metrics`) and evaluating the
    /// rule file `rules` every second.
    pub(crate) fn start_with_rules(rules: &str, jobs: &[(String, String)]) -> Prometheus {
        let dir = TempDir::new("prometheus-rules");
        let path = dir.0.join("rules.yml");
        std::fs::write(&path, rules).unwrap();
        let mut cfg = String::from(if jobs.is_empty() { "  []\n" } else { "" });
        for (job, target) in jobs {
            cfg.push_str(&format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
            ));
        }
        cfg.push_str(&format!("rule_files: ['{}']\n", path.display()));
        Prometheus::start_with(dir, &cfg)
    }

    /// An instant query's `data.result`, or `Null` when the server did not answer.
    pub(crate) fn query(&self, query: &str) -> serde_json::Value {
        let q = encode(query);
        get(&self.addr, &format!("/api/v1/query?query={q}"))
            .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
            .map_or(serde_json::Value::Null, |v| v["data"]["result"].clone())
    }

    fn start_with(dir: TempDir, scrape_configs: &str) -> Prometheus {
        let mut cfg = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nscrape_configs:\n",
        );
        cfg.push_str(scrape_configs);
        let cfg_path = dir.0.join("prometheus.yml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.0.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { addr, child, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while get(&p.addr, "/-/ready").is_none() {
            assert!(Instant::now() < deadline, "prometheus not ready within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits (at most `limit`) until `query` answers a non-empty vector.
    pub(crate) fn wait_for(&self, query: &str, limit: Duration) {
        let q = encode(query);
        let deadline = Instant::now() + limit;
        loop {
            if get(&self.addr, &format!("/api/v1/query?query={q}"))
                .is_some_and(|b| b.contains("\"value\""))
            {
                return;
            }
            assert!(Instant::now() < deadline, "no data for {query} within {limit:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `query` percent-encoded for a URL's query string (everything but ASCII letters and digits).
fn encode(query: &str) -> String {
    query
        .bytes()
        .map(
            |b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            },
        )
        .collect()
}

pub(crate) fn seawall(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).args(args).output().unwrap()
}

pub(crate) fn text(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A running `seawall lab`'s nodes (`OUT/nodes.json`, written when its stack is up) and when
/// they appeared: the lab's t = 0, near enough.
pub(crate) fn lab_nodes(out: &Path, lab: &mut Child) -> (serde_json::Value, Instant) {
    let path = out.join("nodes.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(json) = std::fs::read_to_string(&path) {
            return (serde_json::from_str(&json).expect("nodes.json"), Instant::now());
        }
        assert!(lab.try_wait().unwrap().is_none(), "the lab exited before its stack was up");
        assert!(Instant::now() < deadline, "no {} within 60 s", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `seawall detect --otlp-listen 127.0.0.1:0 --json --lag 3s --max-intervals N --record FILE`,
/// started: the child, the endpoint it says it listens on, and its stderr (kept open, so its
/// later lines do not meet a closed pipe).
pub(crate) fn otlp_detect(
    intervals: u32,
    record: &Path,
) -> (Child, String, BufReader<std::process::ChildStderr>) {
    let mut detect = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["detect", "--otlp-listen", "127.0.0.1:0", "--json", "--lag", "3s"])
        .args(["--max-intervals", &intervals.to_string(), "--record"])
        .arg(record)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("seawall detect starts");
    let mut err = BufReader::new(detect.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let endpoint = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("detect did not say where it listens: {first:?}"))
        .trim_end_matches(';')
        .to_string();
    (detect, endpoint, err)
}

/// `seawall lab --config STACK --capacity 50 --workers 2 LOAD... --at AT --duration D EXTRA...
/// --out OUT`, started quietly: the small stack the lab-watching tests run.
pub(crate) fn small_lab(
    stack: &str,
    load: &[&str],
    at: f64,
    duration: f64,
    extra: &[&str],
    out: &Path,
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["lab", "--config", stack, "--capacity", "50", "--workers", "2"])
        .args(load)
        .args(["--at", &at.to_string(), "--duration", &duration.to_string()])
        .args(extra)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("seawall lab starts")
}
