//! `seawall escape --metrics envoy --apply --prometheus URL`: the mesh ramp watches goodput
//! through the Envoy dialect's own queries, read from a real Prometheus (Debian's
//! `prometheus`) scraping an Envoy stand-in on loopback. The stand-in serves the cluster
//! counters Envoy's `/stats/prometheus` exports (`envoy_cluster_upstream_rq_total`, `_retry`,
//! `_xx`), growing at rates set by its runtime `upstream.use_retry` (which `POST
//! /runtime_modify` changes, as Envoy's admin does): at 50 % or more, retries keep the
//! dependency in a storm (every request fails, four attempts each); below, it serves. The
//! escape turns retries off, waits for goodput to return, holds 10 %, sees goodput fall at
//! 50 %, sets 10 % again and stops (exit 1): POSTs 0, 10, 50, 10 and never 100.

mod detect_support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use detect_support::{Prometheus, seawall, text};
use seawall_testkit::require_external;

/// The stand-in's counters, advanced at the current regime's rates whenever it is read.
struct Envoy {
    use_retry: u8,
    at: Instant,
    total: f64,
    retry: f64,
    ok: f64,
    failed: f64,
    posts: Vec<u8>,
}

impl Envoy {
    fn advance(&mut self) {
        let dt = self.at.elapsed().as_secs_f64();
        self.at = Instant::now();
        // 100 requests/s reach Envoy from the application.
        if self.use_retry >= 50 {
            // The storm: every request fails, and is tried four times.
            self.total += 400.0 * dt;
            self.retry += 300.0 * dt;
            self.failed += 400.0 * dt;
        } else {
            self.total += 100.0 * dt;
            self.ok += 100.0 * dt;
        }
    }

    fn page(&self) -> String {
        let c = "envoy_cluster_name=\"orders\"";
        format!(
            "# TYPE envoy_cluster_upstream_rq_total counter\n\
             envoy_cluster_upstream_rq_total{{{c}}} {:.0}\n\
             # TYPE envoy_cluster_upstream_rq_retry counter\n\
             envoy_cluster_upstream_rq_retry{{{c}}} {:.0}\n\
             # TYPE envoy_cluster_upstream_rq_retry_overflow counter\n\
             envoy_cluster_upstream_rq_retry_overflow{{{c}}} 0\n\
             # TYPE envoy_cluster_upstream_rq_xx counter\n\
             envoy_cluster_upstream_rq_xx{{envoy_response_code_class=\"2\",{c}}} {:.0}\n\
             envoy_cluster_upstream_rq_xx{{envoy_response_code_class=\"5\",{c}}} {:.0}\n",
            self.total, self.retry, self.ok, self.failed
        )
    }
}

fn serve(listener: TcpListener, envoy: Arc<Mutex<Envoy>>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let mut h = String::new();
        while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
            h.clear();
        }
        let mut e = envoy.lock().unwrap();
        e.advance();
        let body = if let Some(v) = line.split("upstream.use_retry=").nth(1) {
            let v: u8 = v.split_whitespace().next().unwrap().parse().unwrap();
            e.use_retry = v;
            e.posts.push(v);
            "OK\n".to_string()
        } else {
            e.page()
        };
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

#[test]
#[ignore = "needs prometheus"]
fn the_envoy_ramp_steps_back_when_goodput_falls() {
    require_external("prometheus");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let envoy = Arc::new(Mutex::new(Envoy {
        use_retry: 100,
        at: Instant::now(),
        total: 0.0,
        retry: 0.0,
        ok: 0.0,
        failed: 0.0,
        posts: Vec::new(),
    }));
    let state = envoy.clone();
    std::thread::spawn(move || serve(listener, state));
    let prom = Prometheus::start(&addr, &[("envoy", "/stats/prometheus")]);
    prom.wait_for("sum(rate(envoy_cluster_upstream_rq_total[3s]))", Duration::from_secs(30));
    let (url, admin) = (prom.url(), format!("http://{addr}"));
    let args = [
        "escape",
        "--metrics",
        "envoy",
        "--envoy-admin",
        &admin,
        "--prometheus",
        &url,
        "--dependency",
        "envoy_cluster_name=\"orders\"",
        "--rate-window",
        "3s",
        "--ramp",
        "10,50,100",
        "--hold",
        "5",
        "--interval",
        "1",
        "--max-wait",
        "20",
        "--apply",
    ];
    let out = seawall(&args);
    let t = text(&out);
    eprintln!("{t}");
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert_eq!(envoy.lock().unwrap().posts, [0, 10, 50, 10], "{t}");
    assert!(t.contains("goodput fell from") && t.contains("STOPPED at stage 1"), "{t}");

    // A dry run contacts nothing, and names the queries it would watch.
    let mut dry: Vec<&str> = args.to_vec();
    dry.pop();
    let out = seawall(&dry);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("would watch the edge's goodput share") && t.contains("nothing was changed"),
        "{t}"
    );
    assert!(t.contains("envoy_cluster_upstream_rq_xx{envoy_cluster_name=\"orders\",envoy_response_code_class=\"2\"}"), "{t}");
}
