//! `seawall alerts`: the rule file has the six alerts with their holds and the top-callers
//! records; the dashboard is JSON Grafana can import; the jobs and timeout given end up in the
//! queries.

use std::process::Command;

fn seawall(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).args(args).output().unwrap()
}

#[test]
fn prometheus_rules_have_the_six_alerts() {
    let out = seawall(&["alerts", "--edge-job", "gateway", "--caller-timeout", "0.25"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.starts_with("# Generated") && text.contains("groups:\n  - name: seawall\n"));
    for (alert, hold) in [
        ("SeawallRetryAmplification", "2m"),
        ("SeawallDependencyToEdgeRatioUp", "2m"),
        ("SeawallRetryOverflowRising", "2m"),
        ("SeawallQueueOlderThanCallerTimeout", "1m"),
        ("SeawallRetriesAtTheDoor", "2m"),
        ("SeawallRetriesThroughTheProxy", "2m"),
    ] {
        let at =
            text.find(&format!("alert: {alert}\n")).unwrap_or_else(|| panic!("{alert}\n{text}"));
        let block = &text[at..];
        let next = block[1..].find("- alert:").map_or(block.len(), |i| i + 1);
        assert!(block[..next].contains(&format!("for: {hold}\n")), "{alert}: {}", &block[..next]);
    }
    assert!(text.contains("> 1.5\n"), "attempts per call above 1.5:\n{text}");
    assert!(text.contains("> 0.333\n"), "a retry share above a third:\n{text}");
    assert!(text.contains("record: seawall:server_top_callers:rate1m\n"), "{text}");
    assert!(text.contains("job=\"gateway\"") && text.contains("> 0.25\n"), "{text}");
    // Every rule line is indented YAML (no tabs, no stray columns).
    assert!(text.lines().all(|l| !l.contains('\t')));
}

#[test]
fn grafana_dashboard_is_json_with_the_storm_panels() {
    let out = seawall(&["alerts", "--format", "grafana"]);
    assert!(out.status.success());
    let dash: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let panels = dash["panels"].as_array().unwrap();
    assert!(panels.len() >= 6);
    let exprs: Vec<&str> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .map(|t| t["expr"].as_str().unwrap())
        .collect();
    assert!(exprs.iter().any(|e| e.contains("seawall_client_attempt_started_total")));
    assert!(exprs.iter().any(|e| e.contains("seawall_server_oldest_queued_seconds")));
    assert!(panels[0]["title"].as_str().unwrap().starts_with("Dependency-to-edge ratio"));
}

#[test]
fn bad_input_is_exit_2() {
    assert_eq!(seawall(&["alerts", "--edge-job", "a\"b"]).status.code(), Some(2));
    assert_eq!(seawall(&["alerts", "--caller-timeout", "-1"]).status.code(), Some(2));
    assert_eq!(seawall(&["alerts", "--format", "yaml"]).status.code(), Some(2));
}
