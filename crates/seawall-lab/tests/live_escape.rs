//! `seawall escape --apply` against a running baseline lab in storm : after the fault
//! has ended and the baseline is still down, retries go off through the Redis fleet switch the
//! tiers follow, the edge's admission knob is cut, the dependency's dead queue is flushed
//! through the dependency's flush URL (escape's step 3, `--flush-url`: the baseline has no
//! `DeadlineLayer`), and the ramp brings goodput back. Needs Redis at 127.0.0.1:6379 (a unique key, deleted afterwards):
//! ignored unless asked for (`--ignored`).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seawall_escape::{self as escape, EscapeConfig, Outcome};
use seawall_lab::run::Measured;
use seawall_lab::{FaultKind, FaultSpec, LabParams, Stack};

const REDIS: &str = "127.0.0.1:6379";

fn redis_del(key: &str) {
    if let Ok(mut s) = TcpStream::connect(REDIS) {
        let cmd = format!("*2\r\n$3\r\nDEL\r\n${}\r\n{key}\r\n", key.len());
        let _ = s.write_all(cmd.as_bytes());
        let _ = s.read(&mut [0u8; 64]);
    }
}

fn share(m: &Measured, secs: std::ops::Range<usize>) -> f64 {
    let good: u64 = m.load.good[secs.clone()].iter().sum();
    let offered: u64 = m.load.offered[secs].iter().sum();
    good as f64 / offered.max(1) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis on 127.0.0.1:6379"]
async fn escape_brings_the_baseline_back() {
    seawall_testkit::require_service("Redis", REDIS.parse().unwrap());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let key = format!("seawall-lab-test:{}:{nanos}", std::process::id());
    // The short lab's small stack; the fault ends at 7 s and the escape starts at 9 s.
    let escape_at = Duration::from_secs(9);
    let params = LabParams {
        fault: Some(FaultSpec { kind: FaultKind::Fail, duration: Duration::from_secs(3) }),
        at: Duration::from_secs(4),
        duration: Duration::from_secs(32),
        rate: 40.0,
        capacity: 50.0,
        workers: 2,
        fleet: Some(format!("redis://{REDIS}#{key}")),
        ..LabParams::default()
    };
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = lines.clone();
    let k = key.clone();
    let (m, outcome) = common::with_running_lab(&params, Stack::Baseline, move |info| {
        let start = Instant::now();
        std::thread::sleep(escape_at.saturating_sub(start.elapsed()));
        let flush = info.nodes.last().and_then(|n| n.flush.clone()).expect("a flush URL");
        let cfg = EscapeConfig {
            redis: Some(format!("redis://{REDIS}")),
            key: k,
            admission_urls: vec![info.nodes[0].admission.clone()],
            admission_percent: 30,
            flush_urls: vec![flush],
            admin_token: Some(info.admin_token.clone()),
            hold: Duration::from_secs(2),
            max_wait: Duration::from_secs(8),
            scrape: info.scrape_urls(),
            interval: Duration::from_secs(1),
            caller_timeout_s: 1.0,
            apply: true,
            ..EscapeConfig::default()
        };
        let mut say = |line: &str| {
            let t = start.elapsed().as_secs_f64();
            eprintln!("[{t:>5.1}s] {line}");
            log.lock().unwrap().push(line.to_string());
        };
        let out = escape::run(&cfg, &mut say);
        (out, start.elapsed())
    })
    .await;
    redis_del(&key);
    let (outcome, took) = outcome;
    let outcome = outcome.expect("escape ran");
    let lines = lines.lock().unwrap().clone();
    let good: Vec<f64> = m
        .load
        .good
        .iter()
        .zip(&m.load.offered)
        .map(|(g, o)| (*g as f64 / (*o).max(1) as f64 * 100.0).round())
        .collect();
    eprintln!("goodput % of offered, per second: {good:?}; escape took {took:?}");
    assert_eq!(outcome, Outcome::Completed, "{lines:#?}");
    for step in ["step 1", "step 2", "step 3", "step 4", "step 5", "step 6", "step 7", "step 8"] {
        assert!(lines.iter().any(|l| l.starts_with(step)), "no {step}: {lines:#?}");
    }
    let before = share(&m, 7..9);
    let end = m.load.offered.len();
    let after = share(&m, end - 3..end);
    assert!(before < 0.1, "the baseline was not down before the escape: {good:?}");
    assert!(after >= 0.8, "goodput did not come back: {good:?}");
}
