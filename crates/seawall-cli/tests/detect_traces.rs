//! `seawall detect --otlp-listen` and `--traces` on spans a real OpenTelemetry SDK made: the
//! Python SDK (opentelemetry-sdk, the WSGI and requests instrumentations, the OTLP/HTTP
//! protobuf exporter) tracing an edge that retries a hanging dependency 4 times at a 300 ms
//! timeout (`crates/seawall-detect/tests/otel_traces/storm.py`). Each run is received live
//! (`--otlp-listen`, recorded with `--record`) and the recording replayed (`--traces`):
//!
//! - the storm: a `retry_storm` within 5 s of the fault, none before it; staircases, failing at
//!   one duration (the timeout), and server time nobody used;
//! - the same stack without a fault: no storm, no staircase;
//! - a traffic spike (20 → 50 calls/s) without a fault: no storm.
//!
//! Needs Python with those packages (`.ci/setup/python-grpc.sh` installs them); ignored unless
//! asked for (`--ignored`).

mod detect_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use detect_support::{unix_storms, unix_verdicts};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../seawall-detect/tests/otel_traces/storm.py")
}

struct Run {
    live: Vec<serde_json::Value>,
    replay: Vec<serde_json::Value>,
    /// Wall-clock second the storm script started its load.
    started: f64,
}

/// Runs storm.py with `args` (after ENDPOINT) against `detect --otlp-listen`, then replays the
/// recording with `--traces`.
fn run(python: &Path, name: &str, args: &[&str]) -> Run {
    let record =
        std::env::temp_dir().join(format!("seawall-traces-{}-{name}.jsonl", std::process::id()));
    let (detect, endpoint, _err) = detect_support::otlp_detect(24, &record);
    let mut py = Command::new(python)
        .arg(script())
        .arg(&endpoint)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let mut ready = String::new();
    BufReader::new(py.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    let started: f64 = ready
        .strip_prefix("ready ")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name}: storm.py did not start: {ready:?}"));
    let out = detect.wait_with_output().expect("detect ends");
    drop(py.stdin.take());
    let _ = py.wait();
    assert!(out.status.success(), "{name}: detect failed");
    let parse = |b: &[u8]| -> Vec<serde_json::Value> {
        String::from_utf8_lossy(b)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON lines"))
            .collect()
    };
    let live = parse(&out.stdout);
    let replayed = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["detect", "--traces"])
        .arg(&record)
        .arg("--json")
        .output()
        .expect("seawall detect --traces runs");
    assert!(replayed.status.success(), "{name}: {}", String::from_utf8_lossy(&replayed.stderr));
    let _ = std::fs::remove_file(&record);
    Run { live, replay: parse(&replayed.stdout), started }
}

fn signals(lines: &[serde_json::Value]) -> &serde_json::Value {
    &lines.last().expect("a signals line")["signals"]
}

#[test]
#[ignore = "needs Python with opentelemetry-sdk and its OTLP/HTTP exporter"]
fn traces_call_the_storm_and_only_the_storm() {
    let python = seawall_testkit::require_python(
        &[
            "opentelemetry.sdk.trace",
            "opentelemetry.exporter.otlp.proto.http.trace_exporter",
            "opentelemetry.instrumentation.wsgi",
            "opentelemetry.instrumentation.requests",
        ],
        "bash .ci/setup/python-grpc.sh",
    );
    // Three independent stacks at once (each its own ports, its own detect; 20–50 calls/s
    // each): the storm, the dependency hanging from 8 s for 6 s; the control, no fault; a
    // traffic spike (20 → 50 calls/s from 8 s), no fault.
    let (storm, calm, spike) = std::thread::scope(|s| {
        let storm = s.spawn(|| run(&python, "storm", &["18", "8", "6", "naive"]));
        let calm = s.spawn(|| run(&python, "calm", &["18", "0", "0", "naive"]));
        let spike = s.spawn(|| run(&python, "spike", &["18", "0", "0", "naive", "20", "50", "8"]));
        (storm.join().unwrap(), calm.join().unwrap(), spike.join().unwrap())
    });
    let fault = storm.started + 8.0;
    for (how, lines) in [("live", &storm.live), ("replay", &storm.replay)] {
        let s = unix_storms(lines);
        eprintln!(
            "storm {how}: {:?}",
            unix_verdicts(lines)
                .iter()
                .map(|(t, v)| format!("{:.0}:{v}", t - storm.started))
                .collect::<Vec<_>>()
        );
        let first = *s.first().unwrap_or_else(|| panic!("{how}: no storm called"));
        // An interval's verdict covers [start, start + 1 s): called within 5 s of the fault.
        assert!(
            first + 1.0 >= fault && first <= fault + 5.0,
            "{how}: storm at {:.1} s, fault at 8 s",
            first - storm.started
        );
    }
    let sig = signals(&storm.replay);
    eprintln!("storm signals: {sig}");
    assert!(sig["staircases"].as_u64() > Some(20), "{sig}");
    assert!(
        sig["at_timeout"].as_u64() > Some(10),
        "staircases failing at the 300 ms timeout: {sig}"
    );
    assert!(sig["wasted_s"].as_f64() > Some(0.3 * sig["server_s"].as_f64().unwrap()), "{sig}");

    // The control: the same stack, no fault.
    for (how, lines) in [("live", &calm.live), ("replay", &calm.replay)] {
        assert!(unix_storms(lines).is_empty(), "calm {how}: {:?}", unix_verdicts(lines));
    }
    assert_eq!(signals(&calm.replay)["staircases"], 0, "no retries without a fault");

    // A traffic spike without a fault.
    for (how, lines) in [("live", &spike.live), ("replay", &spike.replay)] {
        eprintln!(
            "spike {how}: {:?}",
            unix_verdicts(lines)
                .iter()
                .map(|(t, v)| format!("{:.0}:{v}", t - spike.started))
                .collect::<Vec<_>>()
        );
        assert!(unix_storms(lines).is_empty(), "spike {how}: {:?}", unix_verdicts(lines));
    }
}
