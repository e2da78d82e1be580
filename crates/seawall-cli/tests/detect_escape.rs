//! `seawall escape`: the dry run prints every step and touches nothing; `--apply` drives the
//! fleet switch in Redis on 127.0.0.1 (a unique key) through 0 → 10 → 25 → 50 → 100.

use std::process::Command;

fn seawall(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).args(args).output().unwrap()
}

#[test]
fn dry_run_is_the_default_and_prints_every_step() {
    // Redis on port 1 cannot answer: a dry run must not ask it.
    let out = seawall(&["escape", "--redis", "redis://127.0.0.1:1"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.starts_with("seawall escape — DRY RUN"), "{text}");
    for step in [
        "step 1: would set retries → 0 %",
        "step 2: would set: admission → 30 %",
        "step 3:",
        "step 4:",
        "step 5: would set retries → 10 %",
        "step 8: would set retries → 100 %",
    ] {
        assert!(text.contains(step), "{step}\n{text}");
    }
    assert!(text.trim_end().ends_with("dry run: nothing was changed"), "{text}");
}

#[test]
fn apply_walks_the_switch_in_redis() {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let key = format!("seawall:test:escape-cli:{}:{}", std::process::id(), nanos.as_nanos());
    let out = seawall(&[
        "escape",
        "--apply",
        "--redis",
        "redis://127.0.0.1:6379",
        "--key",
        &key,
        "--hold",
        "0.05",
        "--ramp",
        "10,50,100",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let changes: Vec<&str> =
        text.lines().filter(|l| l.contains("fleet-wide") && l.contains("done")).collect();
    assert_eq!(changes.len(), 4, "{text}");
    assert!(changes[0].contains("→ 0 %") && changes[0].contains("(was unset)"), "{text}");
    assert!(changes[3].contains("→ 100 %") && changes[3].contains("(was 50 %)"), "{text}");
    assert!(text.contains("no --scrape: hold blind"), "{text}");
}

#[test]
fn bad_flags_are_exit_2() {
    assert_eq!(seawall(&["escape", "--ramp", "50,25"]).status.code(), Some(2));
    assert_eq!(seawall(&["escape", "--admission", "0"]).status.code(), Some(2));
    assert_eq!(seawall(&["escape", "--hold", "NaN"]).status.code(), Some(2));
}
