use super::*;

fn s(t: f64, edge: f64, good: f64, dep: f64) -> Sample {
    Sample { t, edge_rps: edge, goodput_rps: good, dependency_rps: dep, ..Sample::default() }
}

fn run(c: &mut Classifier, samples: &[Sample]) -> Vec<VerdictKind> {
    samples.iter().map(|x| c.push(*x).verdict).collect()
}

fn steady(n: usize) -> Vec<Sample> {
    (0..n).map(|i| s(i as f64, 100.0, 100.0, 100.0)).collect()
}

#[test]
fn learns_then_healthy() {
    let mut c = Classifier::new(Thresholds::default());
    let v = run(&mut c, &steady(12));
    assert_eq!(v[5], VerdictKind::Healthy, "5 s of warm-up by default");
    assert!(v[..4].iter().all(|k| *k == VerdictKind::Learning), "{v:?}");
    assert_eq!(v[11], VerdictKind::Healthy);
}

#[test]
fn storm_errors_first_edge_flat() {
    let mut c = Classifier::new(Thresholds::default());
    let mut xs = steady(15);
    xs.push(s(15.0, 100.0, 20.0, 110.0)); // errors first
    xs.push(s(16.0, 100.0, 0.0, 300.0)); // then amplification, edge flat
    let v = run(&mut c, &xs);
    assert_eq!(v[15], VerdictKind::Degraded);
    assert_eq!(v[16], VerdictKind::RetryStorm);
    let verdict = c.push(s(17.0, 100.0, 0.0, 300.0));
    assert!(verdict.evidence.iter().any(|e| e.contains("edge flat")), "{:?}", verdict.evidence);
}

#[test]
fn spike_edge_first_attempts_flat() {
    let mut c = Classifier::new(Thresholds::default());
    let mut xs = steady(15);
    xs.push(s(15.0, 250.0, 200.0, 250.0));
    let v = run(&mut c, &xs);
    assert_eq!(v[15], VerdictKind::TrafficSpike);
    // the overload then tips into amplification: still attributed to the spike
    let v = c.push(s(16.0, 250.0, 50.0, 600.0));
    assert_eq!(v.verdict, VerdictKind::RetryStorm);
    assert!(v.evidence.iter().any(|e| e.contains("spike")));
}

#[test]
fn metastable_after_trigger_end() {
    let mut c = Classifier::new(Thresholds::default());
    c.set_trigger_end(20.0);
    let mut xs = steady(15);
    xs.extend((15..40).map(|i| s(i as f64, 100.0, 0.0, 200.0)));
    let v = run(&mut c, &xs);
    assert_eq!(v[25], VerdictKind::RetryStorm, "within the grace after the trigger");
    assert_eq!(v[30], VerdictKind::Metastable);
}

#[test]
fn baseline_is_not_taught_by_a_storm() {
    let mut c = Classifier::new(Thresholds::default());
    let mut xs = steady(15);
    xs.extend((15..300).map(|i| s(i as f64, 100.0, 0.0, 300.0)));
    let v = run(&mut c, &xs);
    assert!(v[15..].iter().all(|k| *k == VerdictKind::RetryStorm), "{v:?}");
    // Without the trigger's end, a long storm stays a storm and says what would judge it.
    let last = c.push(s(300.0, 100.0, 0.0, 300.0));
    assert_eq!(last.verdict, VerdictKind::RetryStorm);
    assert!(last.evidence.iter().any(|e| e.contains("--trigger-end")), "{:?}", last.evidence);
    // The control: the old fixed age calls it metastable while the trigger may be active.
    let th = Thresholds { metastable_after_s: Some(120.0), ..Thresholds::default() };
    let mut c = Classifier::new(th);
    assert_eq!(*run(&mut c, &xs).last().unwrap(), VerdictKind::Metastable);
}

#[test]
fn a_level_shift_becomes_the_baseline() {
    // 100 → 200 rps, all served, attempts per call unchanged: a spike for a minute, then the
    // new level. The control: never relearning keeps calling it a spike.
    let mut xs = steady(15);
    xs.extend((15..200).map(|i| s(i as f64, 200.0, 200.0, 200.0)));
    let mut c = Classifier::new(Thresholds::default());
    let v = run(&mut c, &xs);
    assert_eq!(v[20], VerdictKind::TrafficSpike);
    assert!(v[80..].iter().all(|k| *k == VerdictKind::Healthy), "{:?}", &v[70..90]);
    let th = Thresholds { relearn_after_s: f64::INFINITY, ..Thresholds::default() };
    let mut c = Classifier::new(th);
    assert_eq!(*run(&mut c, &xs).last().unwrap(), VerdictKind::TrafficSpike);
    // After the shift, a storm at the new level is still a storm.
    let mut c = Classifier::new(Thresholds::default());
    run(&mut c, &xs);
    c.push(s(200.0, 200.0, 0.0, 600.0));
    assert_eq!(c.push(s(201.0, 200.0, 0.0, 600.0)).verdict, VerdictKind::RetryStorm);
}

#[test]
fn a_client_that_stops_is_not_a_storm() {
    // The edge falls to 0.3× and the last attempts arrive after their calls were counted: the
    // ratio jumps, the dependency's load does not. The control: the same ratio with the
    // dependency's load amplified (the callers left, their retries did not) is a storm.
    let mut xs = steady(15);
    xs.extend((15..20).map(|i| s(i as f64, 30.0, 30.0, 80.0)));
    let mut c = Classifier::new(Thresholds::default());
    let v = run(&mut c, &xs);
    assert!(!v.contains(&VerdictKind::RetryStorm), "{v:?}");
    let mut xs = steady(15);
    xs.extend((15..20).map(|i| s(i as f64, 30.0, 0.0, 300.0)));
    let mut c = Classifier::new(Thresholds::default());
    assert_eq!(*run(&mut c, &xs).last().unwrap(), VerdictKind::RetryStorm);
}

#[test]
fn attempts_flushed_in_batches_are_not_a_jump() {
    // Attempts counted late, in alternate intervals (0, 200, 0, 200 …) against a steady 100
    // calls/s: 1 attempt per call over any two intervals. The control: 200 every interval is a
    // storm.
    let mut xs = steady(15);
    xs.extend((15..30).map(|i| s(i as f64, 100.0, 100.0, if i % 2 == 1 { 0.0 } else { 200.0 })));
    let mut c = Classifier::new(Thresholds::default());
    let v = run(&mut c, &xs);
    assert!(v[15..].iter().all(|k| *k == VerdictKind::Healthy), "{v:?}");
    let mut xs = steady(15);
    xs.extend((15..30).map(|i| s(i as f64, 100.0, 100.0, 200.0)));
    let mut c = Classifier::new(Thresholds::default());
    assert!(run(&mut c, &xs)[16..].iter().all(|k| *k == VerdictKind::RetryStorm));
}

#[test]
fn too_little_traffic_is_not_judged() {
    let mut xs = steady(15);
    xs.extend((15..20).map(|i| s(i as f64, 2.0, 0.0, 8.0)));
    let mut c = Classifier::new(Thresholds::default());
    let v = run(&mut c, &xs);
    assert!(v[15..].iter().all(|k| *k == VerdictKind::Quiet), "{v:?}");
    // The control: the same ratios at ten times the traffic are judged.
    let mut xs = steady(15);
    xs.extend((15..20).map(|i| s(i as f64, 20.0, 0.0, 80.0)));
    let mut c = Classifier::new(Thresholds { min_requests: 0.0, ..Thresholds::default() });
    assert!(!run(&mut c, &xs)[15..].contains(&VerdictKind::Quiet));
}

#[test]
fn the_baseline_waits_for_a_full_rate_window() {
    // A rate over a window longer than the series' age reads low at first (here 20, 40, 60
    // rps while the window fills, then 100): learning from those would call the real level a
    // spike. With settle_s = the window, the baseline is the real level.
    let mut xs: Vec<Sample> = (0..4)
        .map(|i| s(i as f64, 20.0 * (i + 1) as f64, 20.0 * (i + 1) as f64, 20.0 * (i + 1) as f64))
        .collect();
    xs.extend((4..30).map(|i| s(i as f64, 100.0, 100.0, 100.0)));
    let th = Thresholds { settle_s: 4.0, ..Thresholds::default() };
    let mut c = Classifier::new(th);
    let v = run(&mut c, &xs);
    assert!(!v.contains(&VerdictKind::TrafficSpike), "{v:?}");
    let mut c = Classifier::new(Thresholds::default());
    assert!(run(&mut c, &xs).contains(&VerdictKind::TrafficSpike), "the control");
}

#[test]
fn a_given_baseline_is_used() {
    let mut c = Classifier::new(Thresholds::default());
    c.set_baseline(Baseline::of(&steady(5)).unwrap());
    assert_eq!(c.push(s(0.0, 100.0, 100.0, 100.0)).verdict, VerdictKind::Healthy);
    assert_eq!(c.push(s(1.0, 300.0, 300.0, 300.0)).verdict, VerdictKind::TrafficSpike);
}

#[test]
fn evidence_names_wall_clock_times() {
    let mut c = Classifier::new(Thresholds::default());
    c.set_origin_unix(1_796_125_080.0);
    run(&mut c, &steady(15));
    c.push(s(15.0, 100.0, 0.0, 300.0));
    let v = c.push(s(16.0, 100.0, 0.0, 300.0));
    assert!(
        v.evidence.iter().any(|e| e.contains("t=15s (2026-12-01T11:38:15Z)")),
        "{:?}",
        v.evidence
    );
}

#[test]
fn recovery_goes_through_recovering() {
    let mut c = Classifier::new(Thresholds::default());
    let mut xs = steady(15);
    xs.push(s(15.0, 100.0, 0.0, 300.0));
    xs.extend((16..20).map(|i| s(i as f64, 100.0, 100.0, 100.0)));
    let v = run(&mut c, &xs);
    assert_eq!(
        &v[16..],
        [
            VerdictKind::Recovering,
            VerdictKind::Recovering,
            VerdictKind::Healthy,
            VerdictKind::Healthy
        ]
    );
}

proptest::proptest! {
    #[test]
    fn never_panics(xs in proptest::collection::vec((0.0f64..1e6, 0.0f64..1e6, 0.0f64..1e6, 0.0f64..100.0), 0..80)) {
        let mut c = Classifier::new(Thresholds::default());
        for (i, (e, g, d, q)) in xs.into_iter().enumerate() {
            let v = c.push(Sample { t: i as f64, edge_rps: e, goodput_rps: g, dependency_rps: d, queue_age_s: q, refusals_rps: 0.0 });
            proptest::prop_assert!(v.goodput.is_finite() && v.attempts_per_call.is_finite());
        }
    }
}

#[test]
fn a_new_dip_after_the_system_came_back_is_not_metastable() {
    // The trigger ends at 20 s, the system is back by 22 s; a 2 s dip at 41 s (a burst above
    // capacity) is a new episode, not the trigger's outliving it. The control: the same dip
    // with the trigger's episode never ending is metastable.
    let mut c = Classifier::new(Thresholds::default());
    c.set_trigger_end(20.0);
    let mut xs = steady(15);
    xs.extend((15..21).map(|i| s(i as f64, 100.0, 0.0, 100.0)));
    xs.extend((21..41).map(|i| s(i as f64, 100.0, 100.0, 100.0)));
    xs.extend((41..43).map(|i| s(i as f64, 110.0, 70.0, 110.0)));
    xs.extend((43..50).map(|i| s(i as f64, 100.0, 100.0, 100.0)));
    let v = run(&mut c, &xs);
    assert!(!v.contains(&VerdictKind::Metastable), "{v:?}");

    let mut c = Classifier::new(Thresholds::default());
    c.set_trigger_end(20.0);
    let mut xs = steady(15);
    xs.extend((15..43).map(|i| s(i as f64, 100.0, 0.0, 100.0)));
    assert_eq!(*run(&mut c, &xs).last().unwrap(), VerdictKind::Metastable);
}
