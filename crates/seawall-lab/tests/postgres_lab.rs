//! A short PostgreSQL-backed lab (nodes as in-process threads): the order service queries a real
//! PostgreSQL through a pool of 2 connections while the parent locks the table for 4 s. Both
//! configurations produce a per-second series and `pg_stat_activity` figures: the
//! baseline's statements outlive their callers (the oldest is as old as the lock); seawall
//! cancels them when the caller's deadline passes.
//!
//! Needs PostgreSQL on 127.0.0.1:5432 with trust auth and a database `test` (or
//! `SEAWALL_LAB_PG=postgres://…`); ignored unless asked for (`--ignored`).

use std::time::Duration;

use seawall_lab::{FaultKind, FaultSpec, LabParams, Launcher, Stack, run_lab};

fn url() -> String {
    std::env::var("SEAWALL_LAB_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL on 127.0.0.1:5432"]
async fn postgres_lab_reports_running_copies_and_their_age() {
    if std::env::var("SEAWALL_LAB_PG").is_err() {
        seawall_testkit::require_service("PostgreSQL", "127.0.0.1:5432".parse().unwrap());
    }
    let params = LabParams {
        stacks: vec![Stack::Baseline, Stack::Seawall],
        fault: Some(FaultSpec { kind: FaultKind::Hang, duration: Duration::from_secs(4) }),
        at: Duration::from_secs(2),
        duration: Duration::from_secs(8),
        rate: 40.0,
        capacity: 50.0,
        workers: 2,
        backend: Some(url()),
        ..LabParams::default()
    };
    let out = run_lab(&params, &Launcher::InProcess, |_| {}).await.expect("postgres lab runs");
    eprintln!("{}", out.figures_table());
    assert_eq!(out.results.tiers.last().map(String::as_str), Some("postgres"));
    for ((r, f), pg) in out.results.runs.iter().zip(&out.figures).zip(&out.postgres) {
        eprintln!("{}: good {:?}", r.policy, r.series.goodput_rps);
        eprintln!("{}: at postgres {:?}", r.policy, r.series.bottom_attempts_rps);
        eprintln!("{}: pg_stat_activity {pg:?}", r.policy);
        assert_eq!(r.series.t.len(), 8, "{}: one point a second", r.policy);
        assert_eq!(pg.len(), 9, "{}: one reading a second, 0 ..= 8 s", r.policy);
        assert!(r.series.goodput_rps[1] > 30.0, "{}: healthy before the fault", r.policy);
        let peak = f.pg_peak.expect("pg_stat_activity figures");
        assert!(
            (1..=2).contains(&peak.running_copies),
            "{}: the pool bounds the copies to 2: {peak:?}",
            r.policy
        );
    }
    let (base, sea) = (out.figures[0].pg_peak.unwrap(), out.figures[1].pg_peak.unwrap());
    // The lock holds for 4 s; the baseline's statements wait it out for callers long gone (their
    // per-try timeout is 250 ms), seawall's are cancelled at the caller's 1 s deadline.
    assert!(base.oldest_s >= 2.5, "baseline oldest {}", base.oldest_s);
    assert!(sea.oldest_s <= 2.0, "seawall oldest {}", sea.oldest_s);
}
