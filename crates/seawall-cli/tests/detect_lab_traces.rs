//! `seawall detect --otlp-listen` watching `seawall lab --otlp`: the lab's tiers export their
//! spans (a server span per request, a client span per attempt with
//! `http.request.resend_count`, linked by `traceparent`), and the traces alone judge the run.
//! The real `seawall lab` binary runs each stack; `detect` sees only the spans. The baseline
//! (every tier retrying) is called a storm within 5 s of the fault and not before, with
//! staircases, resends and work nobody used; the seawall stack never; the baseline under a
//! rising load without a fault never. The live spans, recorded with `--record`, are replayed
//! with `--traces` and judged the same.

mod detect_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use detect_support::{
    TempDir, lab_nodes, otlp_detect, small_lab, text, unix_storms, unix_verdicts,
};

const AT: f64 = 10.0;
const DURATION: f64 = 20.0;

struct Run {
    live: Vec<serde_json::Value>,
    replay: Vec<serde_json::Value>,
    /// Wall-clock second of the fault (the lab's t = AT).
    fault_unix_s: f64,
    /// The spans `detect` received, as it recorded them.
    record: std::path::PathBuf,
}

fn lines(b: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(b)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Runs one stack exporting to a fresh `detect --otlp-listen`, then replays the recording.
fn watch(root: &Path, stack: &str, load: &[&str]) -> Run {
    let out = root.join(format!("{stack}{}", load.join("")));
    let record = root.join(format!("{stack}{}.jsonl", load.join("")));
    let (detect, endpoint, _err) = otlp_detect(DURATION as u32 + 6, &record);
    let mut lab = small_lab(stack, load, AT, DURATION, &["--otlp", &endpoint], &out);
    let (_, up) = lab_nodes(&out, &mut lab);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let fault_unix_s = now - up.elapsed().as_secs_f64() + AT;
    let lab_done = Instant::now() + Duration::from_secs_f64(DURATION + 30.0);
    while lab.try_wait().unwrap().is_none() {
        assert!(Instant::now() < lab_done, "{stack}: the lab did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = detect.wait_with_output().unwrap();
    assert!(o.status.success(), "{stack}: detect failed: {}", text(&o));
    let replayed = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["detect", "--traces"])
        .arg(&record)
        .arg("--json")
        .output()
        .unwrap();
    assert!(replayed.status.success(), "{stack}: {}", text(&replayed));
    Run { live: lines(&o.stdout), replay: lines(&replayed.stdout), fault_unix_s, record }
}

/// The sum of `key` over the intervals.
fn total(lines: &[serde_json::Value], key: &str) -> f64 {
    lines.iter().filter_map(|l| l[key].as_f64()).sum()
}

#[test]
#[ignore = "slow: three lab runs of 20 s"]
fn the_labs_own_spans_tell_a_storm_and_only_a_storm() {
    let root = TempDir::new("lab-traces");
    let fault = ["--rate", "40", "--fault", "fail:4"];

    let run = watch(&root.0, "baseline", &fault);
    for (how, lines) in [("live", &run.live), ("replay", &run.replay)] {
        let vs = unix_verdicts(lines);
        eprintln!("baseline {how} (fault at {:.1}): {vs:?}", run.fault_unix_s);
        let called = unix_storms(lines)
            .first()
            .copied()
            .unwrap_or_else(|| panic!("baseline {how}: no storm"));
        // A verdict's time is the start of its 1 s interval: the fault may land inside it.
        assert!(called > run.fault_unix_s - 1.0, "baseline {how}: storm before the fault");
        assert!(
            called <= run.fault_unix_s + 5.0,
            "baseline {how}: storm {:.1} s after the fault",
            called - run.fault_unix_s
        );
    }
    // What only traces show: parents with several attempts, resends, work after the caller left.
    assert!(total(&run.live, "staircases") >= 100.0, "{:?}", run.live.last());
    assert!(total(&run.live, "resends") >= 1000.0, "{:?}", run.live.last());
    assert!(run.live.iter().any(|l| l["wasted_share"].as_f64() > Some(0.3)));
    // `--explain` names what decided the storm: the attempts the client spans show.
    let explained = Command::new(env!("CARGO_BIN_EXE_seawall"))
        .args(["detect", "--explain", "--traces"])
        .arg(&run.record)
        .output()
        .unwrap();
    let says = text(&explained);
    assert!(explained.status.success(), "{says}");
    assert!(says.contains("retry_storm decided by: attempts per call"), "{says}");

    let run = watch(&root.0, "seawall", &fault);
    for (how, lines) in [("live", &run.live), ("replay", &run.replay)] {
        let vs = unix_verdicts(lines);
        eprintln!("seawall {how}: {vs:?}");
        assert!(
            unix_storms(lines).first().copied().is_none(),
            "seawall {how} called a storm: {vs:?}"
        );
        let judged = vs
            .iter()
            .filter(|(t, k)| *t > run.fault_unix_s && k != "learning" && k != "quiet")
            .count();
        assert!(judged >= 4, "seawall {how}: too few judged intervals after the fault: {vs:?}");
    }

    let run = watch(&root.0, "baseline", &["--rate", "16", "--ramp-to", "40", "--fault", "none"]);
    for (how, lines) in [("live", &run.live), ("replay", &run.replay)] {
        let vs = unix_verdicts(lines);
        eprintln!("baseline, rising load, no fault, {how}: {vs:?}");
        assert!(
            unix_storms(lines).first().copied().is_none(),
            "a rising load called a storm ({how}): {vs:?}"
        );
    }
}
