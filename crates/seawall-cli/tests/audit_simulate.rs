//! `seawall audit GRAPH --simulate FAULT` end to end, on the example graphs: the configured
//! storm's 27× at the database, seawall's ≤ 1.2, the fixed graph recovering, bad faults exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example(name: &str) -> String {
    let p: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../seawall-audit/examples").join(name);
    p.to_str().unwrap().to_string()
}

fn audit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).arg("audit").args(args).output().unwrap()
}

/// The runs of the simulation of the path into `dep`, from `--json`.
fn runs(out: &Output, dep: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON array");
    let sim = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scenario"] == format!("audit-{dep}"))
        .unwrap_or_else(|| panic!("no simulation of {dep}"));
    sim["runs"].as_array().unwrap().clone()
}

#[test]
fn checkout_fail_shows_27x_configured_and_seawall_below_1_2() {
    let graph = example("checkout.toml");
    let mut args = vec![
        graph.as_str(),
        "--simulate",
        "fail:5@5",
        "--duration",
        "20",
        "--dependency",
        "database",
    ];
    let out = audit(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "findings still set the status\n{stdout}");
    assert!(stdout.contains("simulated mobile → gateway → orders → database"), "{stdout}");
    assert!(stdout.contains("audited worst case: 27 attempts per request at database"), "{stdout}");
    assert!(stdout.contains("as-configured") && stdout.contains("seawall"), "{stdout}");

    args.push("--json");
    let json = audit(&args);
    let runs = runs(&json, "database");
    let amp = |i: usize| runs[i]["peak_amplification"].as_f64().unwrap();
    assert_eq!(runs[0]["policy"], "as-configured");
    assert!((26.0..=27.5).contains(&amp(0)), "configured peak {}", amp(0));
    assert!(amp(1) <= 1.2, "seawall peak {}", amp(1));
}

#[test]
fn checkout_fixed_recovers_and_writes_the_report() {
    let dir = std::env::temp_dir().join(format!("seawall-audit-sim-{}", std::process::id()));
    let dir_s = dir.to_str().unwrap().to_string();
    let graph = example("checkout-fixed.toml");
    let out =
        audit(&[&graph, "--simulate", "fail:5@5", "--duration", "25", "--json", "--out", &dir_s]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for run in runs(&out, "database") {
        assert_eq!(run["recovered"], true, "{} did not recover", run["policy"]);
        assert!(run["peak_amplification"].as_f64().unwrap() <= 3.0);
    }
    assert!(dir.join("database/results.json").is_file());
    assert!(dir.join("database/report.html").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_faults_exit_2_with_what_was_expected() {
    let graph = example("checkout.toml");
    for bad in ["crash:10", "fail", "fail:-3", "fail:10@x"] {
        let out = audit(&[&graph, "--simulate", bad]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("expected KIND:SECONDS[@START]"), "{bad}: {stderr}");
    }
    let late = audit(&[&graph, "--simulate", "fail:5@30", "--duration", "20"]);
    assert_eq!(late.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&late.stderr).contains("after the 20 s run"));
    let nowhere = audit(&[&graph, "--simulate", "fail:5", "--dependency", "nope"]);
    assert_eq!(nowhere.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nowhere.stderr).contains("no path from an entry point"));
}
