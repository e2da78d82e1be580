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
    assert!(v[15..].iter().all(|k| matches!(k, VerdictKind::RetryStorm | VerdictKind::Metastable)));
    assert_eq!(*v.last().unwrap(), VerdictKind::Metastable, "no trigger end known: after 120 s");
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
