//! `seawall detect --replay` on a results.json written by `seawall simulate`: the postmortem path.

use std::process::Command;

fn seawall(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).args(args).output().unwrap()
}

#[test]
fn bronson_naive_is_storm_then_metastable_and_seawall_never_a_storm() {
    let dir = std::env::temp_dir().join(format!("seawall-detect-replay-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let sim = seawall(&["simulate", "bronson", "--duration", "40", "--out", d]);
    assert!(sim.status.success(), "{}", String::from_utf8_lossy(&sim.stderr));
    let results = dir.join("results.json");
    let out = seawall(&["detect", "--replay", results.to_str().unwrap(), "--policy", "naive"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    let storm = text.find("retry_storm").expect(&text);
    let meta = text.find("metastable").expect(&text);
    assert!(storm < meta, "{text}");
    assert!(text.contains("worst: metastable"), "{text}");

    let out = seawall(&[
        "detect",
        "--replay",
        results.to_str().unwrap(),
        "--policy",
        "seawall",
        "--json",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 40, "one line per simulated second");
    assert!(!text.contains("retry_storm") && !text.contains("metastable"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_and_scrape_are_exclusive_and_one_is_required() {
    assert_eq!(seawall(&["detect"]).status.code(), Some(2));
    let out = seawall(&["detect", "--replay", "x.csv", "--scrape", "http://127.0.0.1:1/"]);
    assert_eq!(out.status.code(), Some(2));
}
