//! The must-show scenarios (bronson, layered, index-slowdown, traffic-spike), simulated, written
//! as seawall's counters with timestamps, backfilled into a real Prometheus's storage with
//! `promtool tsdb create-blocks-from openmetrics`, and replayed with `detect --prometheus --from
//! --to`: each storm is called within two intervals of its fault, the spike never, and the
//! delay through Prometheus is printed beside the one of the direct replay.

mod detect_support;

use std::fmt::Write;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use detect_support::{Prometheus, TempDir, seawall, text};
use seawall_testkit::require_external;

/// RFC 3339 of a whole Unix second (UTC).
fn rfc3339(unix: i64) -> String {
    seawall_detect::prometheus::time::format_rfc3339(unix as f64)
}

/// The run's series as OpenMetrics counters at 1 s steps from `t0` (Unix seconds), job `name`.
fn openmetrics(out: &mut String, name: &str, run: &seawall_report::Run, t0: i64) {
    let s = &run.series;
    for (family, tier, series) in [
        ("seawall_server_throughput", "edge", &s.edge_rps),
        ("seawall_server_goodput", "edge", &s.goodput_rps),
        ("seawall_server_throughput", "dep", &s.bottom_attempts_rps),
        ("seawall_client_attempt_started", "caller", &s.bottom_attempts_rps),
    ] {
        let _ = writeln!(out, "# TYPE {family} counter");
        let mut total = 0.0;
        for (i, &t) in s.t.iter().enumerate() {
            total += series.get(i).copied().filter(|v| v.is_finite() && *v >= 0.0).unwrap_or(0.0);
            let _ = writeln!(
                out,
                "{family}_total{{job=\"{name}\",tier=\"{tier}\"}} {total} {}",
                t0 + t as i64 + 1
            );
        }
    }
}

#[test]
#[ignore = "needs prometheus and promtool"]
fn simulated_scenarios_backfilled_into_prometheus() {
    require_external("prometheus");
    require_external("promtool");
    // (scenario, policy, sets, warm-up seconds): `layered` starts its fault at 5 s, and the
    // first rate through Prometheus exists at 2 s (two samples) and its 2 s window is full a
    // second later, so it learns for 2 s.
    let scenarios: [(&str, &str, &[&str], &str); 4] = [
        ("bronson", "naive", &["duration_s=40"], "5"),
        ("layered", "naive", &[], "2"),
        ("index-slowdown", "fixed", &["duration_s=60"], "5"),
        ("traffic-spike", "naive", &[], "5"),
    ];
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    // Two hours back, on an hour: old enough to be out of the head block, well within retention.
    let t0 = now / 3600 * 3600 - 2 * 3600;
    let mut om = String::new();
    let mut runs = Vec::new();
    for (name, policy, sets, warmup) in scenarios {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let sc = seawall_sim::load(name, &sets).unwrap();
        let mut r = seawall_sim::simulate(&sc, &[policy.to_string()], 1, &mut |_, _| {}).unwrap();
        let run = r.runs.remove(0);
        let mut job = String::new();
        openmetrics(&mut job, name, &run, t0);
        om.push_str(&job);
        runs.push((name, sc.fault_window(), run.series.t.len(), warmup));
    }
    // OpenMetrics wants each family in one block: group the lines by family.
    let mut grouped = String::new();
    for family in ["seawall_server_throughput", "seawall_server_goodput"] {
        let _ = writeln!(grouped, "# TYPE {family} counter");
        for l in om.lines().filter(|l| l.starts_with(&format!("{family}_total{{"))) {
            grouped.push_str(l);
            grouped.push('\n');
        }
    }
    grouped.push_str("# EOF\n");
    let dir = TempDir::new("backfill");
    let input = dir.0.join("series.om");
    std::fs::write(&input, grouped).unwrap();
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(dir.0.join("data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let prom = Prometheus::start_in(dir, "127.0.0.1:1", &[]);
    let url = prom.url();
    for (name, window, len, warmup) in runs {
        let (from, to) = (rfc3339(t0 + 2), rfc3339(t0 + len as i64));
        let (edge, dep) =
            (format!("job=\"{name}\",tier=\"edge\""), format!("job=\"{name}\",tier=\"dep\""));
        let caller = format!("job=\"{name}\",tier=\"caller\"");
        let out = seawall(&[
            "detect",
            "--prometheus",
            &url,
            "--edge",
            &edge,
            "--dependency",
            &dep,
            "--caller",
            &caller,
            "--rate-window",
            "2s",
            "--interval",
            "1",
            "--warmup",
            warmup,
            "--from",
            &from,
            "--to",
            &to,
            "--json",
        ]);
        assert!(out.status.success(), "{name}: {}", text(&out));
        if name == "bronson" {
            // The same replay as a timeline a person reads.
            let a = ["detect", "--prometheus", &url, "--edge", &edge, "--dependency", &dep];
            let mut a = a.to_vec();
            a.extend(["--caller", &caller]);
            a.extend(["--rate-window", "2s", "--from", &from, "--to", &to]);
            let t = text(&seawall(&a));
            assert!(t.contains("== http://") && t.contains("(seawall)"), "{t}");
            assert!(t.contains("retry_storm") && t.contains("edge flat"), "{t}");
            assert!(t.contains("worst: retry_storm"), "{t}");
        }
        let vs: Vec<(f64, String)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["t"].as_f64().unwrap() + 2.0, v["verdict"].as_str().unwrap().to_string())
            })
            .collect();
        let storm =
            vs.iter().find(|(_, k)| k == "retry_storm" || k == "metastable").map(|(t, _)| *t);
        if name == "traffic-spike" {
            assert!(storm.is_none(), "{name}: {vs:?}");
            assert!(vs.iter().any(|(_, k)| k == "traffic_spike"), "{name}: {vs:?}");
            continue;
        }
        let (start, _) = window.unwrap();
        let storm = storm.unwrap_or_else(|| panic!("{name}: no storm: {vs:?}"));
        eprintln!(
            "{name}: storm called {:.0} s after the fault began (through Prometheus)",
            storm - start
        );
        assert!(storm >= start - 1.0, "{name}: storm before the fault: {vs:?}");
        // Within two scrape intervals and one rate window of the jump (1 s + 1 s + 2 s): the
        // amplification is judged over two intervals as well as one, so that a counter flushed
        // late is not a jump, and a storm that ramps up is called an interval later.
        assert!(
            storm <= start + 4.0,
            "{name}: storm {:.0} s after the fault: {vs:?}",
            storm - start
        );
    }
}
