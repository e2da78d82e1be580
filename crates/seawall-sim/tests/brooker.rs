//! Brooker's backoff comparison (Marc Brooker, "Exponential Backoff And Jitter", AWS
//! Architecture Blog, 2015): N clients contend for one row under optimistic concurrency — a
//! write fails when another landed first — and each retries until it succeeds. Without backoff
//! the herd keeps colliding; exponential backoff alone keeps the clients in lockstep; jitter
//! spreads them. The post finds full and equal jitter about equal in calls, both far below the
//! unjittered approaches.
//!
//! The row is a tier with `contention_window_ms`: a write succeeds only if no other succeeded
//! within the window before it. The post's simulator reads the version, then writes, each hop a
//! network delay of about 10 ms, with base 5 ms and cap 2 s: a window of 20 ms, a write taking
//! 20–30 ms, the same base and cap. The clients are a herd of 20 arriving at once; every backoff
//! is the core's own (`seawall::backoff::Jitter`), under the core's attempt cap (10), so a client
//! that loses ten times gives up where the post's would go on: the comparison is the calls per
//! write that landed.
//!
//! Found here and not in the post: the core's decorrelated jitter (the post's formula) needs no
//! more calls than full jitter in this model (printed, not asserted).
//!
//! What would break it: no contention (window 0: every write lands at once, one call each),
//! jitter that is not drawn per client (the herd stays in lockstep), or a backoff kind wired to
//! the wrong `Jitter` variant.

use std::path::PathBuf;

use seawall_sim::{load, simulate};

const HERD: &str = r#"
name = "brooker"
description = "100 clients writing one record under optimistic concurrency"
duration_s = 60
[edge]
rate = 0
deadline_ms = 60000
retries = true
herd = [{ at_s = 0, clients = 20, spread_s = 0 }]
[[tier]]
name = "record"
workers = 1000
service = { p50_ms = 20, p99_ms = 30 }
contention_window_ms = 20
[policies.contend]
base = "jitter"
attempts = 10
base_ms = 5
cap_ms = 2000
"#;

/// The file, one per caller (tests run in parallel).
fn scenario(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seawall-brooker-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("brooker-{tag}.toml"));
    std::fs::write(&path, HERD).unwrap();
    path
}

/// Calls to the row and writes that landed, over five seeds.
fn calls(backoff: &str, window_ms: f64) -> (f64, f64) {
    let sets = vec![
        format!("policies.contend.backoff=\"{backoff}\""),
        format!("tier.record.contention_window_ms={window_ms}"),
    ];
    let s = load(scenario(&format!("{backoff}-{window_ms}")).to_str().unwrap(), &sets).unwrap();
    let (mut calls, mut written) = (0.0, 0.0);
    for seed in 1..=5 {
        let run = simulate(&s, &["contend".to_string()], seed, &mut |_, _| {}).unwrap();
        let run = &run.runs[0];
        calls += run.series.tier_attempts_rps[0].iter().sum::<f64>();
        written += run.series.goodput_rps.iter().sum::<f64>();
    }
    (calls, written)
}

#[test]
fn calls_per_write_order_as_in_brookers_post() {
    let kinds = ["full-jitter", "equal-jitter", "decorrelated", "exponential", "none"];
    let per_write = kinds.map(|b| {
        let (c, w) = calls(b, 20.0);
        eprintln!("{b:>12}: {c} calls, {w} of 100 writes landed, {:.2} calls per write", c / w);
        (c / w, w)
    });
    let [full, equal, decorrelated, exponential, none] = per_write;
    assert!((full.0 - equal.0).abs() < 0.1 * full.0, "full {full:?} ≈ equal {equal:?}");
    for jittered in [full, equal, decorrelated] {
        assert!(jittered.0 * 1.5 < exponential.0, "{jittered:?} vs exponential {exponential:?}");
        assert!(jittered.0 * 2.0 < none.0, "{jittered:?} vs none {none:?}");
    }
    // With full or equal jitter every client gets its write in within the core's ten attempts;
    // without backoff about half give up.
    assert!(full.1 == 100.0 && equal.1 == 100.0, "{full:?} {equal:?}");
    assert!(none.1 < 70.0, "{none:?}");
}

#[test]
fn without_contention_every_write_lands_at_once() {
    // The control: a window of 0 is no contention, so the order above is the contention's.
    for b in ["full-jitter", "none"] {
        assert_eq!(calls(b, 0.0), (100.0, 100.0), "{b}");
    }
}
