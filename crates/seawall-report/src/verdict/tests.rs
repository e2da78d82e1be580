use super::*;

/// 100 edge requests a second, `good` answered, the fault from 2 s to 4 s.
fn series(good: &[f64]) -> Series {
    let n = good.len();
    Series {
        t: (0..n).map(|i| i as f64).collect(),
        edge_rps: vec![100.0; n],
        goodput_rps: good.to_vec(),
        bottom_attempts_rps: good.iter().map(|g| if *g < 50.0 { 300.0 } else { 100.0 }).collect(),
        ..Series::default()
    }
}

fn fault() -> Fault {
    Fault { kind: "outage".into(), start_s: 2.0, end_s: 4.0 }
}

fn verdict(good: &[f64]) -> Verdict {
    judge(&series(good), Some(&fault())).verdict
}

/// `head`, then `k` seconds of `v`.
fn then(head: &[f64], k: usize, v: f64) -> Vec<f64> {
    let mut out = head.to_vec();
    out.extend(std::iter::repeat_n(v, k));
    out
}

#[test]
fn recovers_two_seconds_after_the_fault() {
    let j = judge(&series(&then(&[100.0, 100.0, 0.0, 0.0, 0.0, 50.0], 6, 100.0)), Some(&fault()));
    assert_eq!(j.verdict, Verdict::Recovered { recovery_s: 2.0 });
    assert_eq!((j.goodput_before, j.goodput_during), (1.0, 0.0));
    assert_eq!(j.peak_amplification, 3.0);
}

#[test]
fn a_dip_shorter_than_the_window_does_not_restart_the_clock() {
    // Back one second after the fault, then two seconds at 70 % (a burst of arrivals near
    // capacity): the old per-second rule said "recovered 7 s after the fault".
    let mut good = then(&[100.0, 100.0, 0.0, 0.0, 40.0], 6, 100.0);
    good.extend([70.0, 70.0]);
    good.extend([100.0; 6]);
    assert_eq!(verdict(&good), Verdict::Recovered { recovery_s: 1.0 });
    // The same dip lasting the window is a relapse: the clock restarts after it.
    let mut good = then(&[100.0, 100.0, 0.0, 0.0, 40.0], 6, 100.0);
    good.extend([70.0; 5]);
    good.extend([100.0; 6]);
    assert_eq!(verdict(&good), Verdict::Recovered { recovery_s: 12.0 });
}

#[test]
fn the_level_is_the_runs_own() {
    // A stack that answers 96 % before the fault is healthy at 96 %, and at 87 % (≥ 90 % of it).
    let good = then(&[96.0, 96.0, 0.0, 0.0], 8, 87.0);
    assert_eq!(verdict(&good), Verdict::Recovered { recovery_s: 0.0 });
    let good = then(&[96.0, 96.0, 0.0, 0.0], 8, 85.0);
    assert_eq!(verdict(&good), Verdict::Degraded);
}

#[test]
fn a_return_too_short_is_not_recovery() {
    // Four healthy seconds at the end of the run are not yet a sustained return.
    let good = then(&then(&[100.0, 100.0, 0.0, 0.0], 6, 0.0), 4, 100.0);
    assert_eq!(verdict(&good), Verdict::StaysDown);
    let good = then(&[100.0, 100.0, 0.0, 0.0], 10, 0.0);
    assert_eq!(verdict(&good), Verdict::StaysDown);
}

#[test]
fn partly_back_or_flapping_is_degraded() {
    // Six seconds up, four down, over and over: never a relapse of five, never back for good.
    let mut good = vec![100.0, 100.0, 0.0, 0.0];
    for _ in 0..4 {
        good.extend([100.0; 6]);
        good.extend([0.0; 4]);
    }
    assert_eq!(verdict(&good), Verdict::Degraded);
    // At 60 % for good.
    assert_eq!(verdict(&then(&[100.0, 100.0, 0.0, 0.0], 10, 60.0)), Verdict::Degraded);
}

#[test]
fn most_requests_failing_after_the_fault_is_not_recovery() {
    // A reconnect herd in miniature: every second after the fault is healthy but the one the
    // herd of 10,000 lands in, and 94 % of that herd is refused.
    let mut s = series(&then(&[100.0, 100.0, 0.0, 0.0, 600.0], 8, 100.0));
    s.edge_rps[4] = 10_000.0;
    let j = judge(&s, Some(&fault()));
    assert!(j.goodput_after < MOST * j.goodput_before, "{}", j.goodput_after);
    assert_eq!(j.verdict, Verdict::HealedLate { healthy_from_s: 1.0 });
    // The same herd answered in full is recovery.
    s.goodput_rps[4] = 10_000.0;
    assert_eq!(judge(&s, Some(&fault())).verdict, Verdict::Recovered { recovery_s: 0.0 });
}

#[test]
fn what_cannot_be_judged_says_why() {
    let good = then(&[100.0, 100.0, 0.0, 0.0], 8, 100.0);
    let j = judge(&series(&good), None);
    assert_eq!(j.verdict, Verdict::NotJudged { because: NotJudged::NoFault });
    assert_eq!((j.goodput_during, j.goodput_after), (0.0, 0.0));
    // A stack that never served (0 % before, 0 % after): not "recovered as soon as it ended".
    let v = verdict(&[0.0; 12]);
    assert_eq!(v, Verdict::NotJudged { because: NotJudged::UnhealthyBefore { level: 0.0 } });
    // Ten requests before the fault.
    let mut s = series(&good);
    s.edge_rps[..2].copy_from_slice(&[5.0, 5.0]);
    s.goodput_rps[..2].copy_from_slice(&[5.0, 5.0]);
    let v = judge(&s, Some(&fault())).verdict;
    assert_eq!(
        v,
        Verdict::NotJudged { because: NotJudged::TooLittleTraffic { requests_before: 10.0 } }
    );
    // Three seconds after the fault.
    let v = verdict(&then(&[100.0, 100.0, 0.0, 0.0], 3, 100.0));
    assert_eq!(v, Verdict::NotJudged { because: NotJudged::EndedTooSoon { after_fault_s: 3.0 } });
}

#[test]
fn recovered_never_sits_beside_most_requests_failing() {
    // Every series of seven post-fault seconds, each 0 %, 50 % or 100 % good at 100 or 10,000
    // requests: a run that reads recovered answered most of its post-fault requests, and as
    // well as before from its recovery on.
    let mut checked = 0;
    for code in 0..6u32.pow(7) {
        let (mut s, mut c) = (series(&[100.0; 11]), code);
        for i in 4..11 {
            let (good, big) = (c % 3, (c / 3) % 2 == 1);
            c /= 6;
            s.edge_rps[i] = if big { 10_000.0 } else { 100.0 };
            s.goodput_rps[i] = s.edge_rps[i] * good as f64 / 2.0;
        }
        let j = judge(&s, Some(&fault()));
        if let Verdict::Recovered { recovery_s } = j.verdict {
            assert!(j.goodput_after >= MOST * j.goodput_before, "{code}: {j:?}");
            let from = 4 + recovery_s as usize;
            let (g, e): (f64, f64) =
                (s.goodput_rps[from..].iter().sum(), s.edge_rps[from..].iter().sum());
            assert!(g / e >= TOLERANCE * j.goodput_before, "{code}: {j:?}");
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn bad_series_never_panic() {
    let mut s = series(&[100.0; 12]);
    s.goodput_rps.truncate(3);
    s.edge_rps[1] = f64::NAN;
    s.t[5] = f64::INFINITY;
    let _ = judge(&s, Some(&fault()));
    let _ = judge(&Series::default(), Some(&fault()));
    let _ = judge(&Series::default(), None);
}

#[test]
fn every_verdict_has_its_words() {
    let cases = [
        (
            Verdict::Recovered { recovery_s: 0.0 },
            "recovered as soon as the fault ended",
            "yes, 0.0 s",
        ),
        (
            Verdict::Recovered { recovery_s: 1.0 },
            "recovered 1.0\u{a0}s after the fault",
            "yes, 1.0 s",
        ),
        (Verdict::HealedLate { healthy_from_s: 1.0 }, "healed only after losing most", "no (late)"),
        (Verdict::Degraded, "did not fully recover — goodput 60\u{a0}%", "partly"),
        (Verdict::StaysDown, "stays down — goodput 60\u{a0}% after the fault", "no"),
        (Verdict::NotJudged { because: NotJudged::NoFault }, "not judged: no fault", "not judged"),
    ];
    for (v, sentence, cell) in cases {
        assert!(
            words::sentence(v, 1.0, 0.6).starts_with(sentence),
            "{}",
            words::sentence(v, 1.0, 0.6)
        );
        assert_eq!(words::cell(v), cell);
    }
    assert!(words::legend().lines().all(|l| l.chars().count() <= 100), "{}", words::legend());
}
