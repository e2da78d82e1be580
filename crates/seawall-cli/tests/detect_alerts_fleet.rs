//! `seawall alerts --metrics grpc` on a fleet: ten real grpcio clients (each its own process,
//! server and metrics endpoint: `crates/seawall-detect/tests/grpc/storm.py`), one of them
//! storming, scraped and evaluated every second by a real Prometheus loaded with the generated
//! rules. The storming client's amplification alert goes pending (then the 15 s warning fires)
//! and no other client's does — while the fleet's attempts per call, the old `sum(…)` rule's
//! number, stays under the 1.5 threshold (the control: a fleet-wide rule would never page).

mod detect_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use detect_support::{Prometheus, TempDir, free_port, seawall, text};
use seawall_testkit::require_external;

struct Fleet(Vec<Child>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The jobs whose alert `name` is pending or firing, with the states.
fn alerting(prom: &Prometheus, name: &str) -> Vec<(String, String)> {
    let r = prom.query(&format!("ALERTS{{alertname=\"{name}\"}}"));
    let mut out: Vec<(String, String)> = r
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let m = &s["metric"];
                    (
                        m["job"].as_str().unwrap_or("").into(),
                        m["alertstate"].as_str().unwrap_or("").into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
#[ignore = "needs prometheus and Python grpcio"]
fn one_storming_client_of_ten_fires_its_own_alert_and_no_other() {
    require_external("prometheus");
    seawall_testkit::require_python(
        &["grpc", "grpc_observability", "opentelemetry.exporter.prometheus"],
        ".ci/setup/python-grpc.sh",
    );
    let dir = TempDir::new("fleet");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../seawall-detect/tests/grpc/storm.py");
    let never = dir.0.join("never");
    let fail = dir.0.join("fail");
    let mut fleet = Fleet(Vec::new());
    let mut jobs = Vec::new();
    for i in 0..10 {
        let port = free_port();
        let trigger = if i == 0 { &fail } else { &never };
        // 10 calls/s each: ten Python processes share two cores.
        let mut child = Command::new("python3")
            .args([script, &port.to_string(), trigger.to_str().unwrap(), "90", "10"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
        fleet.0.push(child);
        assert_eq!(ready.trim(), "ready", "client {i}");
        jobs.push((format!("client-{i}"), format!("127.0.0.1:{port}")));
    }
    let rules = seawall(&["alerts", "--metrics", "grpc", "--call-path", "fleet -> orders"]);
    assert!(rules.status.success(), "{}", text(&rules));
    let prom = Prometheus::start_with_rules(&String::from_utf8_lossy(&rules.stdout), &jobs);
    prom.wait_for(
        "count(rate(grpc_client_call_duration_seconds_count[1m]) > 0) >= 10",
        Duration::from_secs(40),
    );
    // Healthy first: no alert for anyone.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(alerting(&prom, "SeawallRetryAmplification"), vec![]);
    std::fs::write(&fail, b"").unwrap();
    let fault = Instant::now();
    let fleet_ratio = "sum(rate(grpc_client_attempt_started_total[1m])) / \
                       sum(rate(grpc_client_call_duration_seconds_count[1m]))";
    let mut max_fleet: f64 = 0.0;
    let mut warned_after = None;
    while fault.elapsed() < Duration::from_secs(50) {
        std::thread::sleep(Duration::from_secs(1));
        let v = prom.query(fleet_ratio);
        if let Some(x) = v[0]["value"][1].as_str().and_then(|s| s.parse::<f64>().ok()) {
            max_fleet = max_fleet.max(x);
        }
        for name in ["SeawallRetryAmplification", "SeawallRetryAmplificationWarning"] {
            let who = alerting(&prom, name);
            assert!(who.iter().all(|(job, _)| job == "client-0"), "{name}: {who:?}");
        }
        let warn = alerting(&prom, "SeawallRetryAmplificationWarning");
        if warn.iter().any(|(_, state)| state == "firing") {
            warned_after = Some(fault.elapsed());
            break;
        }
    }
    let warned_after = warned_after.expect("client-0's warning never fired");
    let page = alerting(&prom, "SeawallRetryAmplification");
    assert_eq!(
        page,
        vec![("client-0".to_string(), "pending".to_string())],
        "the page is on its way"
    );
    eprintln!(
        "fleet: client-0's warning fired {:.0} s after its fault; fleet attempts per call at most {max_fleet:.2}",
        warned_after.as_secs_f64()
    );
    assert!(max_fleet < 1.5, "the control: the fleet's ratio reached {max_fleet:.2}");
}
