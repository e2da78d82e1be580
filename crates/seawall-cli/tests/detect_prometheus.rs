//! `seawall detect --prometheus` against a real Prometheus (Debian's `prometheus`), started on a
//! free loopback port with a 1 s scrape interval, scraping a server whose counters follow a
//! retry storm, a traffic spike and a restart in wall-clock time. Live: the storm is called a
//! storm within two intervals of the fault and the spike never is; a `--last` replay of the same
//! window says the same; a counter reset, a NaN, a bad query and an empty selector match each
//! exit 2 with a message naming the problem.

mod detect_support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use detect_support::{Prometheus, Server, seawall, text, verdicts};
use seawall_testkit::require_external;

fn sel(job: &str, tier: &str) -> String {
    format!("job=\"{job}\",tier=\"{tier}\"")
}

/// The client series of the dependency's callers, beside `dep` (`--caller`).
fn caller(dep: &str) -> &'static str {
    Box::leak(dep.replace("tier=\"dep\"", "tier=\"caller\"").into_boxed_str())
}

fn args<'a>(url: &'a str, edge: &'a str, dep: &'a str) -> Vec<&'a str> {
    let mut a = vec!["detect", "--prometheus", url, "--edge", edge, "--dependency", dep];
    a.extend(["--caller", caller(dep)]);
    a.extend(["--rate-window", "3s", "--interval", "1", "--warmup", "4", "--json"]);
    a
}

fn first(vs: &[(f64, String)], kind: &str) -> Option<f64> {
    vs.iter().find(|(_, k)| k == kind).map(|(t, _)| *t)
}

#[test]
#[ignore = "needs prometheus"]
fn storm_and_spike_through_a_real_prometheus() {
    require_external("prometheus");
    let server = Server::start(vec![]);
    let prom = Prometheus::start(
        &server.addr,
        &[("storm", "/storm"), ("spike", "/spike"), ("restart", "/restart")],
    );
    let url = prom.url();
    // The default rate window comes from the server: 4 × its 1 s scrape interval.
    let explain =
        text(&seawall(&["detect", "--prometheus", &url, "--caller", "a=\"b\"", "--explain"]));
    assert!(
        explain.contains("rate window 4s: 4 × the server's scrape interval of 1 s"),
        "{explain}"
    );
    assert!(explain.contains("[4s]"), "{explain}");
    for job in ["storm", "spike", "restart"] {
        let q = format!(r#"sum(rate(seawall_server_throughput_total{{job="{job}"}}[3s]))"#);
        prom.wait_for(&q, Duration::from_secs(30));
    }
    let data_at = Instant::now();
    // The fault 8 s after the data begins (the watches learn for 4 s); watch until 8 s after.
    let t_fault = server.fault_in(8.0);
    let s0 = server.now();
    let n = ((t_fault + 8.0 - s0).ceil() as u64).to_string();
    let (storm_e, storm_d, spike_e, spike_d) =
        (sel("storm", "edge"), sel("storm", "dep"), sel("spike", "edge"), sel("spike", "dep"));
    let spawn = |edge: &str, dep: &str| {
        let mut a = args(&url, edge, dep);
        a.extend(["--max-intervals", &n]);
        Command::new(env!("CARGO_BIN_EXE_seawall"))
            .args(&a)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (storm, spike) = (spawn(&storm_e, &storm_d), spawn(&spike_e, &spike_d));
    let (storm, spike) = (storm.wait_with_output().unwrap(), spike.wait_with_output().unwrap());
    assert!(storm.status.success(), "{}", text(&storm));
    assert!(spike.status.success(), "{}", text(&spike));
    let fault = t_fault - s0; // the fault, on the watches' clock
    let vs = verdicts(&storm.stdout);
    let called = first(&vs, "retry_storm").unwrap_or_else(|| panic!("no storm called: {vs:?}"));
    eprintln!("live: storm called {:.1} s after the fault", called - fault);
    assert!(called >= fault - 0.5, "storm called before the fault: {vs:?}");
    assert!(called <= fault + 2.5, "storm called {:.1} s after the fault: {vs:?}", called - fault);
    let vs = verdicts(&spike.stdout);
    assert!(first(&vs, "traffic_spike").is_some(), "{vs:?}");
    assert!(
        !vs.iter().any(|(_, k)| k == "retry_storm" || k == "metastable"),
        "spike called a storm: {vs:?}"
    );

    // Replay of the same window from Prometheus's storage: the same verdicts.
    let last = format!("{}s", data_at.elapsed().as_secs().saturating_sub(1).max(10));
    let replay = |edge: &str, dep: &str| {
        let mut a = args(&url, edge, dep);
        a.extend(["--last", &last]);
        seawall(&a)
    };
    let out = replay(&storm_e, &storm_d);
    assert!(out.status.success(), "{}", text(&out));
    let vs = verdicts(&out.stdout);
    let start = server.now() - vs.last().unwrap().0 - 1.0;
    let called = first(&vs, "retry_storm").unwrap_or_else(|| panic!("replay: no storm: {vs:?}"));
    eprintln!("replay: storm called {:.1} s after the fault", called - (t_fault - start));
    assert!((called - (t_fault - start)).abs() <= 3.0, "replay storm at {called}: {vs:?}");
    let out = replay(&spike_e, &spike_d);
    assert!(out.status.success(), "{}", text(&out));
    let vs = verdicts(&out.stdout);
    assert!(first(&vs, "traffic_spike").is_some(), "{vs:?}");
    assert!(!vs.iter().any(|(_, k)| k == "retry_storm" || k == "metastable"), "{vs:?}");

    // A restart inside the window: those intervals are not judged (the rest are: exit 0).
    let (re, rd) = (sel("restart", "edge"), sel("restart", "dep"));
    let out = replay(&re, &rd);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("counter reset in edge") && t.contains("not judged"), "{t}");

    // Bad questions to a real server: exit 2, the reason named.
    let bad = |extra: &[&str], edge: &str, want: &str| {
        let mut a = vec!["detect", "--prometheus", &url, "--edge", edge, "--dependency", &storm_d];
        a.extend(["--caller", caller(&storm_d)]);
        a.extend(["--rate-window", "3s", "--max-intervals", "1"]);
        a.extend(extra);
        let out = seawall(&a);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {}", text(&out));
        assert!(text(&out).contains(want), "{a:?}: want {want:?} in {}", text(&out));
    };
    bad(&["--query", "edge=sum(rate(x[1m])"], &storm_e, "bad_data");
    bad(&["--query", "edge=vector(0)/vector(0)"], &storm_e, "edge is NaN");
    bad(&[], r#"job="nope""#, "no series match");
    bad(&["--query", "edge=seawall_server_throughput_total"], &storm_e, "wrap it in sum");
    bad(&["--last", "1h", "--interval", "0.1"], &storm_e, "at most 11000");
}
