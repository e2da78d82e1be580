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

/// The README's first command and `detect --replay` of its results.json read the same verdict
/// for each configuration (the one judgement), and the replay's timeline calls nothing
/// metastable in a run the judgement calls recovered (seawall's run has a 2 s dip at 41 s,
/// well after it came back).
#[test]
fn detect_replay_agrees_with_simulate_on_the_first_command() {
    let dir = std::env::temp_dir().join(format!("seawall-agree-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let sim = seawall(&["simulate", "--out", d]);
    assert!(sim.status.success(), "{}", String::from_utf8_lossy(&sim.stderr));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let replay = seawall(&["detect", "--replay", &format!("{d}/results.json")]);
    assert!(replay.status.success());
    let text = String::from_utf8(replay.stdout).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for run in results["runs"].as_array().unwrap() {
        let policy = run["policy"].as_str().unwrap();
        let section = text.split("== ").find(|s| s.starts_with(policy)).expect("a section per run");
        let verdict = section.lines().find(|l| l.starts_with("verdict: ")).expect("a verdict line");
        let kind = run["verdict"]["kind"].as_str().unwrap();
        match kind {
            "recovered" => {
                assert!(
                    verdict.contains("recovered"),
                    "{policy}: simulate says {kind}, detect {verdict}"
                );
                assert!(!section.contains("metastable"), "{policy} recovered, yet:\n{section}");
            }
            _ => assert!(
                !verdict.contains("recovered "),
                "{policy}: simulate says {kind}, detect {verdict}"
            ),
        }
    }
}
