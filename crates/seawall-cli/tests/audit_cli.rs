//! `seawall audit` end to end: exit codes 0/1/2 and the JSON and SARIF shapes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../seawall-audit/examples").join(name)
}

fn audit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).arg("audit").args(args).output().unwrap()
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn clean_graph_exits_0() {
    let out = audit(&[path_str(&example("checkout-fixed.toml"))]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("survives cold: yes — 2,200 rps against a cold capacity of 2,400"),
        "{stdout}"
    );
    let strict = audit(&["--fail-on", "info", path_str(&example("checkout-fixed.toml"))]);
    assert_eq!(strict.status.code(), Some(0));
}

#[test]
fn storm_exits_1_and_json_has_the_documented_shape() {
    let storm = example("checkout.toml");
    assert_eq!(audit(&[path_str(&storm)]).status.code(), Some(1));
    assert_eq!(audit(&["--fail-on", "none", path_str(&storm)]).status.code(), Some(0));
    let out = audit(&["--json", path_str(&storm)]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let paths = v["paths"].as_array().unwrap();
    let db = paths
        .iter()
        .find(|p| p["path"] == serde_json::json!(["mobile", "gateway", "orders", "database"]))
        .expect("the database path");
    assert_eq!(db["worst_case_attempts"], 27);
    assert!(db["bounded_attempts"].is_number());
    assert_eq!(db["peak_rps"], 54000.0);
    assert_eq!(db["capacity_rps"], 6000.0);
    assert_eq!(db["cold_capacity_rps"], 2400.0);
    assert_eq!(db["survives_cold"], false);
    for p in paths {
        for key in [
            "path",
            "worst_case_attempts",
            "bounded_attempts",
            "peak_rps",
            "capacity_rps",
            "cold_capacity_rps",
            "survives_cold",
        ] {
            assert!(p.get(key).is_some(), "paths[] lacks {key}");
        }
    }
    let findings = v["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    for f in findings {
        for key in ["rule", "location", "message", "fix"] {
            assert!(f[key].is_string(), "findings[] lacks {key}");
        }
        assert!(["error", "warning", "info"].contains(&f["severity"].as_str().unwrap()));
    }
    assert!(findings.iter().any(|f| f["rule"] == "SW001" && f["severity"] == "error"));
}

#[test]
fn sarif_is_2_1_0_with_physical_locations() {
    let out = audit(&["--sarif", path_str(&example("checkout.toml"))]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["version"], "2.1.0");
    let run = &v["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "seawall-audit");
    let results = run["results"].as_array().unwrap();
    assert!(!results.is_empty());
    for r in results {
        let loc = &r["locations"][0]["physicalLocation"];
        assert!(loc["artifactLocation"]["uri"].is_string());
        assert!(loc["region"]["startLine"].as_u64().unwrap() >= 1);
        assert!(["error", "warning", "note"].contains(&r["level"].as_str().unwrap()));
    }
}

#[test]
fn unreadable_input_exits_2_with_file_and_line() {
    let dir = std::env::temp_dir().join(format!("seawall-cli-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[services.a]\nentry = true\n[[calls]]\nfrom = \"a\"\nto = \n").unwrap();
    let out = audit(&[path_str(&bad)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad.toml:5"), "{stderr}");
    let out = audit(&[path_str(&dir.join("missing.toml"))]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn simulate_rejects_a_fault_it_cannot_read() {
    // The simulation itself is tested in audit_simulate.rs; here only the exit-2 contract.
    let out = audit(&["--simulate", "db-outage", path_str(&example("checkout.toml"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected KIND:SECONDS[@START]"));
}
