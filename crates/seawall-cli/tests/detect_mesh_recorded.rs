//! The Envoy and Istio dialects on Prometheus text in the exact format those proxies export
//! (Envoy and Istio cannot run on this machine): recorded pages
//! (`crates/seawall-detect/tests/recorded/*.prom`, each citing its source) served with their
//! call-path counters evolving like a retry storm or a traffic spike, scraped by a real
//! Prometheus every second, then replayed with `detect --prometheus --last`: the storm is called
//! a storm within two intervals of the fault, the spike never.

mod detect_support;

use std::time::Duration;

use detect_support::{Prometheus, Server, recorded, seawall, text, verdicts};
use seawall_testkit::require_external;

#[test]
#[ignore = "needs prometheus"]
fn envoy_and_istio_storms_and_spikes_from_recorded_pages() {
    require_external("prometheus");
    let server = Server::with_pages(recorded, vec![]);
    let jobs = [
        ("envoy-storm", "/envoy/storm"),
        ("envoy-spike", "/envoy/spike"),
        ("istio-storm", "/istio/storm"),
        ("istio-spike", "/istio/spike"),
    ];
    let prom = Prometheus::start(&server.addr, &jobs);
    for (job, _) in jobs {
        let m = if job.starts_with("envoy") {
            "envoy_cluster_upstream_rq_total"
        } else {
            "istio_requests_total"
        };
        prom.wait_for(&format!("sum(rate({m}{{job=\"{job}\"}}[3s]))"), Duration::from_secs(30));
    }
    // Rates exist from here on: the replay window starts a second later.
    std::thread::sleep(Duration::from_secs(1));
    let begin = server.now();
    let fault = server.fault_in(8.0);
    // 8 s of storm or spike after the fault, then replay the whole window.
    std::thread::sleep(Duration::from_secs_f64(fault + 9.0 - server.now()));
    let last = format!("{}s", (server.now() - begin).floor() as u64);
    let url = prom.url();
    let cases = [
        ("envoy", "envoy-storm", "envoy_cluster_name=\"orders\"", "", true),
        ("envoy", "envoy-spike", "envoy_cluster_name=\"orders\"", "", false),
        (
            "istio",
            "istio-storm",
            "destination_workload=\"reviews-v1\"",
            "destination_workload=\"productpage-v1\"",
            true,
        ),
        (
            "istio",
            "istio-spike",
            "destination_workload=\"reviews-v1\"",
            "destination_workload=\"productpage-v1\"",
            false,
        ),
    ];
    for (dialect, job, dep, edge, storm) in cases {
        let dep = format!("job=\"{job}\",{dep}");
        let edge = if edge.is_empty() { String::new() } else { format!("job=\"{job}\",{edge}") };
        let mut a =
            vec!["detect", "--prometheus", &url, "--metrics", dialect, "--dependency", &dep];
        if !edge.is_empty() {
            a.extend(["--edge", &edge]);
        }
        a.extend([
            "--rate-window",
            "3s",
            "--interval",
            "1",
            "--warmup",
            "4",
            "--json",
            "--last",
            &last,
        ]);
        let out = seawall(&a);
        assert!(out.status.success(), "{job}: {}", text(&out));
        let vs = verdicts(&out.stdout);
        // The replay's t=0 is `last` seconds before the command ran, ≈ `begin` on the server.
        let fault_t = fault - begin;
        let called =
            vs.iter().find(|(_, k)| k == "retry_storm" || k == "metastable").map(|(t, _)| *t);
        if storm {
            let called = called.unwrap_or_else(|| panic!("{job}: no storm: {vs:?}"));
            eprintln!("{job}: storm called {:.1} s after the fault", called - fault_t);
            assert!(
                called >= fault_t - 1.5 && called <= fault_t + 3.0,
                "{job}: at {called}: {vs:?}"
            );
        } else {
            assert!(called.is_none(), "{job}: spike called a storm: {vs:?}");
            assert!(vs.iter().any(|(_, k)| k == "traffic_spike"), "{job}: {vs:?}");
        }
    }
}
