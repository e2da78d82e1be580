//! `seawall detect` against a running lab: the live scraper and classifier, pointed at
//! the metrics URLs the lab announces, flag the baseline's storm after the fault and never call
//! the seawall stack a storm. Nodes run in-process (as in `seawall-lab`'s `short_lab`), every
//! one on 127.0.0.1, each stack for 15 s.

mod common;

use std::time::Duration;

use seawall_detect::scrape::Scraper;
use seawall_detect::{Classifier, Thresholds, Verdict, VerdictKind};
use seawall_lab::run::StackInfo;
use seawall_lab::{FaultKind, FaultSpec, LabParams, Stack};

/// Scrapes the stack once a second for `intervals` and classifies each interval.
fn detect(info: StackInfo, intervals: usize) -> Vec<Verdict> {
    let mut scraper =
        Scraper::new(&info.scrape_urls(), Duration::from_secs(2)).expect("first scrape");
    let mut classifier = Classifier::new(Thresholds::default());
    let mut out = Vec::new();
    for _ in 0..intervals {
        match scraper.next_interval(Duration::from_secs(1)) {
            Ok(i) => out.push(classifier.push(i.sample)),
            Err(e) => eprintln!("scrape failed: {e}"),
        }
    }
    out
}

fn timeline(stack: Stack, vs: &[Verdict]) -> Vec<VerdictKind> {
    for v in vs {
        eprintln!(
            "{stack} t={:>2.0}s {:<12} edge {:>5.1} rps  dep/edge {:>6.2}  goodput {:>3.0} %",
            v.t,
            v.verdict.as_str(),
            v.edge_rps,
            v.attempts_per_call,
            100.0 * v.goodput
        );
    }
    vs.iter().map(|v| v.verdict).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detect_flags_the_baseline_storm_and_not_seawall() {
    // The short lab's small stack (a debug build on 2 cores carries the baseline's 27-fold
    // storm); the classifier learns the healthy baseline over the first 5 s, the dependency
    // fails for 3 s from 6 s.
    let params = LabParams {
        fault: Some(FaultSpec { kind: FaultKind::Fail, duration: Duration::from_secs(3) }),
        at: Duration::from_secs(6),
        duration: Duration::from_secs(15),
        rate: 40.0,
        capacity: 50.0,
        workers: 2,
        ..LabParams::default()
    };
    let storm = [VerdictKind::RetryStorm, VerdictKind::Metastable];

    let (_, base) = common::with_running_lab(&params, Stack::Baseline, |i| detect(i, 13)).await;
    let base = timeline(Stack::Baseline, &base);
    // From 2 s after the fault starts to the end (the fault is over at 9 s): a storm.
    let after = &base[8..];
    assert!(after.iter().all(|v| storm.contains(v)), "baseline: {base:?}");

    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, sea) = common::with_running_lab(&params, Stack::Seawall, |i| detect(i, 13)).await;
    let sea = timeline(Stack::Seawall, &sea);
    assert!(!sea.iter().any(|v| storm.contains(v)), "seawall called a storm: {sea:?}");
    let calm = [VerdictKind::Healthy, VerdictKind::Degraded, VerdictKind::Recovering];
    // From the fault on. The warm-up ends once the samples cover 5 s, which live scrapes reach
    // at the sixth sample or the seventh, depending on when each scrape lands.
    assert!(sea[6..].iter().all(|v| calm.contains(v)), "seawall: {sea:?}");
    assert!(
        matches!(sea.last(), Some(VerdictKind::Healthy | VerdictKind::Recovering)),
        "seawall did not come back: {sea:?}"
    );
}
