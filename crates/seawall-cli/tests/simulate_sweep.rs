//! `seawall simulate SCENARIO --sweep …` end to end: the JSON names swept values by path and
//! states the boundary, files are written, bad sweeps exit 2 with a clear message, and no
//! progress bar reaches a pipe.

use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).arg("simulate").args(args).output().unwrap()
}

#[test]
fn a_sweep_prints_every_point_and_the_boundary() {
    let dir = std::env::temp_dir().join(format!("seawall-sweep-{}", std::process::id()));
    let out = dir.to_str().unwrap();
    let o = simulate(&[
        "bronson",
        "--sweep",
        "edge.rate=100..250:50",
        "--policy",
        "naive",
        "--duration",
        "40",
        "--seeds",
        "2",
        "--jobs",
        "2",
        "--json",
        "--out",
        out,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "progress or noise on a pipe: {:?}", o.stderr);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    assert_eq!(points[1]["edge.rate"], serde_json::json!(150));
    for p in points {
        assert!(p.get("recovered").is_some() && p.get("peak_amplification").is_some());
        assert_eq!(p["runs"].as_array().unwrap().len(), 2);
    }
    assert_eq!(points[0]["recovered"], true);
    assert_eq!(points[3]["recovered"], false);
    let b = &v["boundaries"][0];
    assert_eq!(b["kind"], "heals_below");
    assert!(b["words"].as_str().unwrap().contains("heals by itself below"), "{b}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<svg class=\"phase\""), "no phase diagram");
    assert!(html.contains("heals by itself below"));
    assert_eq!(std::fs::read_to_string(dir.join("sweep.json")).unwrap().as_bytes(), &o.stdout[..]);
    let _ = std::fs::remove_dir_all(&dir);

    // Without --json: the table and the sentence.
    let o = simulate(&[
        "bronson",
        "--sweep",
        "edge.rate=100,250",
        "--policy",
        "naive",
        "--duration",
        "40",
        "--out",
        out,
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("edge.rate  policy  recovered"), "{text}");
    assert!(text.contains("naive heals by itself below ≈ 175 QPS"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_sweeps_exit_2_and_say_why() {
    for (args, says) in [
        (&["--sweep", "edge.rtae=1..2:1"][..], "unknown field `rtae`"),
        (&["--sweep", "edge.rate=300..100:10"], "below the start"),
        (&["--sweep", "edge.rate=1..2"], "needs a step"),
        (&["--sweep", "tier.db.workers=1.5,2"], "tier.db.workers=1.5"),
        (&["--sweep", "edge.rate=1,2", "--set", "edge.rate=3"], "also given with --set"),
        (&["--seeds", "3"], "--sweep"),
        (&["--sweep", "edge.rate=1,2", "--seeds", "0"], "0"),
        (&["--sweep", "edge.rate=1,2", "--policy", "nope"], "no policy `nope`"),
    ] {
        let mut all = vec!["bronson"];
        all.extend_from_slice(args);
        let o = simulate(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
