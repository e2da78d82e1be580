//! `seawall detect --postgres` on a real PostgreSQL under the lab's PostgreSQL backend in a
//! storm: while the order table is locked for 5 s, the baseline's statements outlive their
//! callers (a 1 s deadline, 250 ms per try) and detect says the database is working for callers
//! who have left; seawall cancels a statement when its caller's deadline passes, and detect
//! never says so. The copies are bounded by the lab's pool (30 connections here: the shared
//! server's `max_connections` is 100), not by the storm.
//!
//! Needs PostgreSQL on 127.0.0.1:5432 with trust auth and a database `test` (or
//! `SEAWALL_LAB_PG=postgres://…`); ignored unless asked for (`--ignored`).

use std::process::{Command, Stdio};

fn url() -> String {
    std::env::var("SEAWALL_LAB_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// Runs the lab's `config` against PostgreSQL with a 5 s lock from 3 s, and `detect --postgres`
/// beside it; returns detect's JSON lines.
fn storm_under(config: &str) -> Vec<serde_json::Value> {
    let out = tempfile_dir(config);
    let lab = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["lab", "--config", config, "--backend", &url(), "--workers", "30"])
        .args(["--rate", "150", "--capacity", "200", "--fault", "hang:5", "--at", "3"])
        .args(["--duration", "14", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("seawall lab starts");
    let detect = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["detect", "--postgres", &url(), "--caller-timeout", "1s", "--json"])
        .args(["--interval", "0.5", "--max-intervals", "34"])
        .output()
        .expect("seawall detect runs");
    let lab = lab.wait_with_output().expect("lab ends");
    assert!(
        lab.status.success(),
        "{config}: lab failed: {}\n{}",
        lab.status,
        String::from_utf8_lossy(&lab.stderr)
    );
    assert!(detect.status.success(), "{}", String::from_utf8_lossy(&detect.stderr));
    let _ = std::fs::remove_dir_all(&out);
    String::from_utf8(detect.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect()
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("seawall-detect-pg-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn summary(lines: &[serde_json::Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let top = &l["activity"]["statements"][0];
            format!(
                "{:.1} {} copies={} oldest={:.2}",
                l["t"].as_f64().unwrap_or(0.0),
                l["verdict"].as_str().unwrap_or("?"),
                top["running_copies"],
                top["oldest_s"].as_f64().unwrap_or(0.0)
            )
        })
        .collect()
}

#[test]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
fn detect_postgres_sees_the_baseline_work_for_callers_who_left_and_not_seawall() {
    if std::env::var("SEAWALL_LAB_PG").is_err() {
        seawall_testkit::require_service("PostgreSQL", "127.0.0.1:5432".parse().unwrap());
    }
    let base = storm_under("baseline");
    eprintln!("baseline:\n{}", summary(&base).join("\n"));
    let left: Vec<&serde_json::Value> =
        base.iter().filter(|l| l["verdict"] == "callers_left").collect();
    assert!(left.len() >= 3, "the baseline's lock holds 5 s: {:?}", summary(&base));
    let worst = left
        .iter()
        .map(|l| l["judgement"]["statement"]["running_copies"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(worst >= 25, "most of the pool's 30 connections hold a copy: {worst}");

    let sea = storm_under("seawall");
    eprintln!("seawall:\n{}", summary(&sea).join("\n"));
    assert!(
        sea.iter().all(|l| l["verdict"] != "callers_left"),
        "seawall cancels at the deadline: {:?}",
        summary(&sea)
    );
    assert!(
        sea.iter().any(|l| l["activity"]["statements"][0]["running_copies"].as_u64() >= Some(10)),
        "the control must have seen the lock's queue too, or it proves nothing: {:?}",
        summary(&sea)
    );
}
