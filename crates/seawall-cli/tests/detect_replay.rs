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

fn csv(rows: impl Iterator<Item = (f64, f64, f64, f64)>) -> String {
    let mut out = "t,edge_rps,goodput_rps,dependency_rps\n".to_string();
    for (t, e, g, d) in rows {
        out.push_str(&format!("{t},{e},{g},{d}\n"));
    }
    out
}

fn kinds(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["verdict"].to_string())
        .collect()
}

/// A series of a user's own: a level shift becomes the baseline; `--trigger-end` turns a storm
/// that outlives it into `metastable` (and nothing else does); `--baseline` replaces the
/// warm-up; bad values are errors naming the flag.
#[test]
fn csv_level_shift_trigger_end_and_given_baseline() {
    let dir = std::env::temp_dir().join(format!("seawall-detect-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shift = dir.join("shift.csv");
    let rows = (0..300).map(|i| {
        let r = if i < 60 { 100.0 } else { 200.0 };
        (i as f64, r, r, r)
    });
    std::fs::write(&shift, csv(rows)).unwrap();
    let out = seawall(&["detect", "--replay", shift.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let v = kinds(&out.stdout);
    assert_eq!(v[70], "\"traffic_spike\"");
    assert!(v[130..].iter().all(|k| k == "\"healthy\""), "{:?}", &v[110..140]);

    let storm = dir.join("storm.csv");
    let rows = (0..200).map(|i| {
        let bad = i >= 30;
        (i as f64, 100.0, if bad { 0.0 } else { 100.0 }, if bad { 400.0 } else { 100.0 })
    });
    std::fs::write(&storm, csv(rows)).unwrap();
    let p = storm.to_str().unwrap();
    let blind = kinds(&seawall(&["detect", "--replay", p, "--json"]).stdout);
    assert!(!blind.contains(&"\"metastable\"".to_string()), "no trigger end, no metastable");
    let told = kinds(&seawall(&["detect", "--replay", p, "--json", "--trigger-end", "60"]).stdout);
    assert_eq!(told[65], "\"retry_storm\"", "within the grace");
    assert_eq!(told[80], "\"metastable\"");

    // The warm-up would learn the storm (it starts at 0 here); the given baseline does not.
    let given = kinds(&seawall(&["detect", "--replay", p, "--json", "--baseline", "0..20"]).stdout);
    assert_eq!(given[0], "\"healthy\"");
    assert_eq!(given[40], "\"retry_storm\"");

    for bad in [
        ["--baseline", "20..10"],
        ["--baseline", "0-20"],
        ["--baseline", "500..600"],
        ["--trigger-end", "soon"],
        ["--trigger-end", "2026-03-01T09:00:00Z"],
    ] {
        let mut a = vec!["detect", "--replay", p];
        a.extend(bad);
        let out = seawall(&a);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(bad[0]), "{bad:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
