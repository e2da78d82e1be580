//! The `otel-http` dialect on what OpenTelemetry's own HTTP instrumentation exports, not a copy
//! of its names: a Python edge service under `opentelemetry-instrumentation-wsgi` calls a
//! dependency with `requests` (instrumented by `opentelemetry-instrumentation-requests`) and
//! retries each 5xx up to 3 more times; the dependency answers 503 while a trigger file exists.
//! The OpenTelemetry Prometheus exporter serves the metrics, a real Prometheus scrapes them
//! every second, and `seawall detect --prometheus --metrics otel-http` calls the fault a retry
//! storm (and nothing before it), live and in a `--last` replay. Twice at once: one process with
//! the stable HTTP conventions (`OTEL_SEMCONV_STABILITY_OPT_IN=http`:
//! `http_server_request_duration_seconds_count`, …) and one with the instrumentations' default,
//! older names (`http_server_duration_milliseconds_count`, …).

mod detect_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use detect_support::{Prometheus, TempDir, free_port, seawall, text, verdicts};
use seawall_testkit::require_external;

/// A Python process; killed and reaped when dropped (it also exits when its stdin closes or
/// after its run time).
struct Python(Child);

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(port: u16, trigger: &std::path::Path, conventions: &str) -> Python {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../seawall-detect/tests/otel_http/storm.py");
    let mut child = Command::new("python3")
        .args([script, &port.to_string(), trigger.to_str().unwrap(), "90", conventions])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    let p = Python(child);
    assert_eq!(ready.trim(), "ready");
    p
}

#[test]
#[ignore = "needs prometheus and Python OpenTelemetry"]
fn http_retry_storm_from_opentelemetrys_own_metrics() {
    require_external("prometheus");
    seawall_testkit::require_python(
        &[
            "requests",
            "opentelemetry.sdk.metrics",
            "opentelemetry.exporter.prometheus",
            "opentelemetry.instrumentation.requests",
            "opentelemetry.instrumentation.wsgi",
        ],
        ".ci/setup/python-grpc.sh",
    );
    let dir = TempDir::new("otel-http");
    let trigger = dir.0.join("fail");
    let (stable_port, old_port) = (free_port(), free_port());
    let _stable = start(stable_port, &trigger, "stable");
    let _old = start(old_port, &trigger, "old");
    let prom = Prometheus::start_file_sd(TempDir::new("otel-http-tsdb"));
    prom.set_targets(&[
        (format!("127.0.0.1:{stable_port}"), vec![("conv", "stable".to_string())]),
        (format!("127.0.0.1:{old_port}"), vec![("conv", "old".to_string())]),
    ]);
    let url = prom.url();
    for m in [
        r#"http_server_request_duration_seconds_count{conv="stable"}"#,
        r#"http_client_request_duration_seconds_count{conv="stable"}"#,
        r#"http_server_duration_milliseconds_count{conv="old"}"#,
        r#"http_client_duration_milliseconds_count{conv="old"}"#,
    ] {
        prom.wait_for(&format!("sum(rate({m}[3s]))"), Duration::from_secs(30));
    }
    let data_at = Instant::now();
    let args = |conv: &str, extra: &[&str]| {
        let sel = format!("conv=\"{conv}\"");
        let mut a = vec!["detect", "--prometheus", &url, "--metrics", "otel-http"];
        a.extend(["--edge", &sel, "--dependency", &sel]);
        a.extend(["--rate-window", "3s", "--interval", "1", "--warmup", "4", "--json"]);
        a.extend(extra.iter().copied());
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let watch = |conv: &str| {
        Command::new(env!("CARGO_BIN_EXE_seawall"))
            .args(args(conv, &["--max-intervals", "16"]))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (stable, old) = (watch("stable"), watch("old"));
    let started = Instant::now();
    // The fault after 8 s of learning; the watches go on 8 s into it.
    std::thread::sleep(Duration::from_secs(8));
    std::fs::write(&trigger, b"").unwrap();
    let fault = started.elapsed().as_secs_f64();
    for (conv, child) in [("stable", stable), ("old", old)] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{conv}: {}", text(&out));
        let vs = verdicts(&out.stdout);
        let called = vs
            .iter()
            .find(|(_, k)| k == "retry_storm")
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("{conv}: no storm called: {vs:?}"));
        eprintln!("otel-http {conv} live: storm called {:.1} s after the fault", called - fault);
        assert!(called >= fault - 1.0, "{conv}: storm before the fault: {vs:?}");
        assert!(called <= fault + 3.0, "{conv}: storm {:.1} s late: {vs:?}", called - fault);
    }

    let last = format!("{}s", data_at.elapsed().as_secs().saturating_sub(1));
    for conv in ["stable", "old"] {
        let a = args(conv, &["--last", &last]);
        let out = seawall(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "{conv}: {}", text(&out));
        let vs = verdicts(&out.stdout);
        assert!(vs.iter().any(|(_, k)| k == "retry_storm"), "{conv} replay: {vs:?}");
    }
    let _ = std::fs::remove_file(&trigger);
}
