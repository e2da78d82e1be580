//! The gRPC dialect on gRPC's own metrics, not a copy of their names: a Python `grpcio` client
//! with a retry policy in its service config calls a server that answers UNAVAILABLE while a
//! trigger file exists; `grpcio-observability`'s OpenTelemetry plugin exports
//! `grpc_client_attempt_started_total` and `grpc_client_call_duration_seconds_count` through the
//! OpenTelemetry Prometheus exporter; a real Prometheus scrapes them every second; and
//! `seawall detect --prometheus --metrics grpc` calls the fault a retry storm (and nothing before
//! it), live and in a `--last` replay.

mod detect_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use detect_support::{Prometheus, TempDir, free_port, seawall, text, verdicts};
use seawall_testkit::require_external;

/// The Python client and server; killed and reaped when dropped (and it exits by itself when
/// its stdin closes or after its run time).
struct Python(Child);

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs prometheus and Python grpcio"]
fn grpc_retry_storm_from_grpcs_own_metrics() {
    require_external("prometheus");
    seawall_testkit::require_python(
        &[
            "grpc",
            "grpc_observability",
            "opentelemetry.sdk.metrics",
            "opentelemetry.exporter.prometheus",
        ],
        ".ci/setup/python-grpc.sh",
    );
    let dir = TempDir::new("grpc");
    let trigger = dir.0.join("fail");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../seawall-detect/tests/grpc/storm.py");
    let port = free_port();
    let mut child = Command::new("python3")
        .args([script, &port.to_string(), trigger.to_str().unwrap(), "90"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    let _python = Python(child);
    assert_eq!(ready.trim(), "ready");
    let prom = Prometheus::start(&format!("127.0.0.1:{port}"), &[("grpc", "/metrics")]);
    let url = prom.url();
    for m in ["grpc_client_attempt_started_total", "grpc_client_call_duration_seconds_count"] {
        prom.wait_for(&format!("sum(rate({m}[3s]))"), Duration::from_secs(30));
    }
    let data_at = Instant::now();
    let args = |extra: &[&str]| {
        let mut a = vec!["detect", "--prometheus", &url, "--metrics", "grpc"];
        a.extend(["--rate-window", "3s", "--interval", "1", "--warmup", "4", "--json"]);
        a.extend(extra.iter().copied());
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let watch = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(args(&["--dependency", "grpc_method=\"other\"", "--max-intervals", "16"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // The fault after 8 s of learning; the watch goes on 8 s into it.
    std::thread::sleep(Duration::from_secs(8));
    std::fs::write(&trigger, b"").unwrap();
    let fault = started.elapsed().as_secs_f64();
    let out = watch.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let vs = verdicts(&out.stdout);
    let called = vs
        .iter()
        .find(|(_, k)| k == "retry_storm")
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("no storm called: {vs:?}"));
    eprintln!("grpc live: storm called {:.1} s after the fault", called - fault);
    assert!(called >= fault - 1.0, "storm before the fault: {vs:?}");
    assert!(called <= fault + 3.0, "storm called {:.1} s late: {vs:?}", called - fault);

    let last = format!("{}s", data_at.elapsed().as_secs().saturating_sub(1));
    let out = seawall(&args(&["--last", &last]).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out));
    let vs = verdicts(&out.stdout);
    assert!(vs.iter().any(|(_, k)| k == "retry_storm"), "replay: {vs:?}");
    let _ = std::fs::remove_file(&trigger);
}
