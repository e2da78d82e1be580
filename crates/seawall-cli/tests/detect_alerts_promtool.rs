//! `seawall alerts --metrics DIALECT`: every generated rule file passes `promtool check rules`,
//! and the generated `promtool test rules` unit tests pass (a storm series fires every alert, a
//! traffic-spike series none), for every dialect, with default and with given selectors. The
//! Grafana dashboard of each dialect is JSON with the dialect's names in it.

mod detect_support;

use std::process::Command;

use detect_support::{TempDir, seawall, text};
use seawall_testkit::require_external;

const CASES: &[(&str, &[&str], &str)] = &[
    ("seawall", &[], "seawall_client_attempt_started_total"),
    ("seawall", &["--edge-job", "gateway", "--dependency-job", "db"], "job=\"db\""),
    // Selectors apply to seawall's names too: the call path on labels other than `job`.
    (
        "seawall",
        &["--edge", "service=\"gw\",env=\"prod\"", "--dependency", "service=\"db\",env=\"prod\""],
        "seawall_server_oldest_queued_seconds{service=\"db\",env=\"prod\"}",
    ),
    ("seawall", &["--edge", "job=\"gw\"", "--dependency", "job=\"db\""], "job=\"gw\""),
    // The dependency's callers named: in the storm series the dependency's server counts only
    // what it answered (the edge's rate), so the ratio alert fires through the callers' attempts.
    (
        "seawall",
        &["--edge", "job=\"gw\"", "--dependency", "job=\"db\"", "--caller", "job=\"orders\""],
        "seawall_client_attempt_started_total{job=\"orders\"}[1m]",
    ),
    ("grpc", &[], "grpc_client_attempt_started_total"),
    // Per client by another label, on a named call path: the unit tests expect both labels.
    (
        "grpc",
        &[
            "--edge",
            "job=\"orders\",instance=\"a\"",
            "--by",
            "instance",
            "--call-path",
            "orders -> inventory",
        ],
        "instance=\"a\"",
    ),
    (
        "grpc",
        &["--dependency", "grpc_method=\"orders.Orders/Get\""],
        "grpc_method=\"orders.Orders/Get\"",
    ),
    (
        "envoy",
        &["--dependency", "envoy_cluster_name=\"orders\""],
        "envoy_cluster_upstream_rq_retry_overflow",
    ),
    ("istio", &[], "istio_requests_total"),
    (
        "istio",
        &["--edge", "destination_workload=\"gw\"", "--dependency", "destination_workload=\"db\""],
        "\"db\"",
    ),
    ("otel-http", &[], "http_client_request_duration_seconds_count"),
];

fn promtool(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("promtool").args(args).current_dir(dir).output().unwrap();
    let t = text(&out);
    assert!(out.status.success(), "promtool {args:?}:\n{t}");
    t
}

#[test]
#[ignore = "needs promtool"]
fn every_dialects_rules_pass_promtool_check_and_unit_tests() {
    require_external("promtool");
    for (dialect, extra, name) in CASES {
        let dir = TempDir::new("promtool");
        let mut a = vec!["alerts", "--metrics", dialect];
        a.extend(extra.iter().copied());
        let rules = seawall(&a);
        assert!(rules.status.success(), "{a:?}: {}", text(&rules));
        let yaml = String::from_utf8(rules.stdout).unwrap();
        assert!(yaml.contains(name), "{a:?}: {name} missing:\n{yaml}");
        std::fs::write(dir.0.join("rules.yml"), &yaml).unwrap();
        a.extend(["--format", "promtool-test"]);
        let tests = seawall(&a);
        assert!(tests.status.success(), "{a:?}: {}", text(&tests));
        std::fs::write(dir.0.join("test.yml"), &tests.stdout).unwrap();
        let checked = promtool(&dir.0, &["check", "rules", "rules.yml"]);
        assert!(checked.contains("SUCCESS"), "{checked}");
        let tested = promtool(&dir.0, &["test", "rules", "test.yml"]);
        assert!(tested.contains("SUCCESS"), "{tested}");
        // The spike tests must exist and expect silence; the storm tests must expect alerts.
        let t = String::from_utf8_lossy(&tests.stdout).to_string();
        assert!(t.contains("- name: storm") && t.contains("- name: spike"), "{t}");
        assert!(t.contains("exp_alerts: []") && t.contains("exp_labels:"), "{t}");
    }
}

#[test]
fn dashboards_and_weaknesses_per_dialect() {
    for (dialect, extra, name) in CASES {
        let mut a = vec!["alerts", "--metrics", dialect, "--format", "grafana"];
        a.extend(extra.iter().copied());
        let out = seawall(&a);
        assert!(out.status.success(), "{a:?}: {}", text(&out));
        let dash: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(dash["panels"].as_array().unwrap().len() >= 3);
        assert!(dash.to_string().contains(&name.replace('"', "\\\"")), "{a:?}");
    }
    let out = seawall(&["alerts", "--metrics", "istio"]);
    assert!(text(&out).contains("# weaker:"), "{}", text(&out));
    // A regex selector cannot seed a unit-test series: exit 2, saying why.
    let out = seawall(&[
        "alerts",
        "--metrics",
        "grpc",
        "--dependency",
        "grpc_method=~\"orders.*\"",
        "--format",
        "promtool-test",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("label=\"value\""), "{}", text(&out));
    assert_eq!(
        seawall(&["alerts", "--metrics", "envoy", "--edge", "{x=\"y\"}"]).status.code(),
        Some(2)
    );
    // --caller: a selector, and only for seawall's names.
    for (dialect, caller, says) in [
        ("seawall", "job=orders", "double quotes"),
        ("envoy", "job=\"orders\"", "--metrics seawall"),
    ] {
        let out = seawall(&["alerts", "--metrics", dialect, "--caller", caller]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(says), "{}", text(&out));
    }
}
