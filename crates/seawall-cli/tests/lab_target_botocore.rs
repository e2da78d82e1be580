//! `seawall lab --target` with an SDK's retrier as a "before": a backend calling its dependency
//! through botocore's standard retry mode (`crates/seawall-lab/stack/botocore_backend.py`,
//! `max_attempts` 3), against the same backend with `max_attempts` 1. During a 503 fault the
//! lab measures the attempts reaching the dependency per edge request: more than 1.5 and at
//! most botocore's 3 (its backoff spreads the retries past the fault's end, and its retry
//! quota may stop some), against ≈ 1. Ignored unless asked for (`--ignored`): it needs Python's botocore.

mod lab_support;

use lab_support::{free_port, http_server, lab_on, read_json};

const BACKEND: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../seawall-lab/stack/botocore_backend.py");

#[test]
#[ignore = "needs Python botocore"]
fn botocore_standard_mode_multiplies_at_the_dependency_and_one_attempt_does_not() {
    seawall_testkit::require_python(&["botocore"], "pip install botocore");
    let (dep, _server) = http_server();
    let (edge, lab_proxy) = (free_port(), free_port());
    let out = std::env::temp_dir().join(format!("seawall-lab-botocore-{}", std::process::id()));
    let cmd = |attempts: u32| {
        format!("exec python3 {BACKEND} {edge} http://127.0.0.1:{lab_proxy} {attempts}")
    };
    let run = lab_on(edge, "/checkout", lab_proxy, dep)
        .args(["--fault", "dep:fail:4@2", "--duration", "8", "--rate", "10"])
        .arg("--config")
        .arg(format!("botocore={}", cmd(3)))
        .arg("--config")
        .arg(format!("one-attempt={}", cmd(1)))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    eprintln!("{}", String::from_utf8_lossy(&run.stdout));
    let fig = read_json(&out.join("target.json"));
    let d = |i: usize, k: &str| fig[i]["dependencies"][0][k].as_f64().unwrap();
    assert!((0.85..=1.15).contains(&d(0, "per_edge_before")), "{fig}");
    let m = d(0, "per_edge_during");
    assert!((1.5..=3.01).contains(&m), "botocore: {m:.2} per edge request during the fault");
    let m = d(1, "per_edge_during");
    assert!((0.9..=1.1).contains(&m), "one attempt: {m:.2} per edge request during the fault");
    let _ = std::fs::remove_dir_all(&out);
}
