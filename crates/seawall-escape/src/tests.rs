use super::*;

#[test]
fn admission_ramps_from_the_cut_to_all() {
    assert_eq!(admission_at(30, 0), 30);
    assert_eq!(admission_at(30, 10), 37);
    assert_eq!(admission_at(30, 50), 65);
    assert_eq!(admission_at(30, 100), 100);
    assert_eq!(admission_at(200, 200), 100);
}

#[test]
fn dry_run_prints_every_step_and_contacts_nothing() {
    let cfg = EscapeConfig {
        // Unreachable on purpose: a dry run must not try.
        redis: Some("redis://127.0.0.1:1".into()),
        scrape: vec!["http://127.0.0.1:1/metrics".into()],
        admission_urls: vec!["http://127.0.0.1:1/admin/admission".into()],
        ..EscapeConfig::default()
    };
    let mut lines = Vec::new();
    let out = run(&cfg, &mut |l| lines.push(l.to_string())).unwrap();
    assert_eq!(out, Outcome::DryRun);
    let text = lines.join("\n");
    assert!(text.contains("step 1: would set retries → 0 %"), "{text}");
    assert!(text.contains("would POST http://127.0.0.1:1/admin/admission?percent=30"), "{text}");
    for (step, p, adm) in [(5, 10, 37), (6, 25, 47), (7, 50, 65), (8, 100, 100)] {
        assert!(text.contains(&format!("step {step}: would set retries → {p} %")), "{text}");
        assert!(text.contains(&format!("percent={adm}:")), "{text}");
    }
    assert!(text.ends_with("dry run: nothing was changed"), "{text}");
}

#[test]
fn bad_ramps_are_refused() {
    for ramp in [vec![], vec![50, 25], vec![10, 10], vec![10, 101]] {
        let cfg = EscapeConfig { ramp, ..EscapeConfig::default() };
        assert!(matches!(run(&cfg, &mut |_| {}), Err(EscapeError::Config(_))));
    }
}

mod mesh_ramp {
    use std::time::Duration;

    use crate::mesh::{MeshOutcome, MeshStep, RampWatch, envoy_plan, run_plan};

    /// Runs the Envoy plan 0 → 10 → 50 → 100 % with goodput read from `shares` (one value per
    /// read, the last repeated): the steps applied, in order, and the outcome.
    fn ramp(shares: &[f64]) -> (Vec<String>, MeshOutcome, String) {
        let plan = envoy_plan(&["http://127.0.0.1:9901".into()], &[10, 50, 100]);
        let mut applied = Vec::new();
        let mut reads = shares.iter().copied();
        let last = *shares.last().unwrap();
        let mut goodput = || Ok(reads.next().unwrap_or(last));
        let watch = RampWatch {
            goodput: &mut goodput,
            interval: Duration::from_secs(1),
            max_wait: Duration::from_secs(5),
        };
        let mut lines = Vec::new();
        let mut waited = Duration::ZERO;
        let out = run_plan(
            &plan,
            "runtime upstream.use_retry",
            Duration::from_secs(3),
            true,
            &mut |s: &MeshStep| {
                applied.push(s.to_string());
                Ok(String::new())
            },
            Some(watch),
            &mut |d| waited += d,
            &mut |l| lines.push(l.to_string()),
        )
        .unwrap();
        let pct: Vec<String> = applied
            .iter()
            .map(|s| s.rsplit('=').next().unwrap().trim_matches('\'').into())
            .collect();
        (pct, out, lines.join("\n"))
    }

    #[test]
    fn steady_goodput_ramps_all_the_way() {
        let (applied, out, text) = ramp(&[0.2, 0.95]);
        assert_eq!(applied, ["0", "10", "50", "100"], "{text}");
        assert_eq!(out, MeshOutcome::Completed, "{text}");
    }

    #[test]
    fn a_fall_in_goodput_sets_the_previous_stage_and_stops() {
        // Off: 0.3, then back (0.95). 10 %: held 3 reads. 50 %: goodput falls to 0.6.
        let (applied, out, text) = ramp(&[0.3, 0.95, 0.95, 0.96, 0.95, 0.95, 0.6]);
        assert_eq!(applied, ["0", "10", "50", "10"], "{text}");
        assert!(
            matches!(&out, MeshOutcome::Stopped { stage: 1, reason } if reason.contains("fell from 95 % to 60 %")),
            "{out:?}\n{text}"
        );
    }

    #[test]
    fn goodput_that_never_returns_leaves_retries_off() {
        let (applied, out, text) = ramp(&[0.1]);
        assert_eq!(applied, ["0"], "{text}");
        assert!(matches!(out, MeshOutcome::Stopped { stage: 0, .. }), "{out:?}");
        assert!(text.contains("did not return within 5 s"), "{text}");
    }

    #[test]
    fn failed_reads_end_the_ramp_rather_than_go_on_blind() {
        let plan = envoy_plan(&["http://127.0.0.1:9901".into()], &[10, 100]);
        let mut n = 0;
        let mut goodput = || {
            n += 1;
            if n <= 1 { Ok(0.95) } else { Err("prometheus down".to_string()) }
        };
        let watch = RampWatch {
            goodput: &mut goodput,
            interval: Duration::from_secs(1),
            max_wait: Duration::from_secs(5),
        };
        let mut applied = 0;
        let out = run_plan(
            &plan,
            "x",
            Duration::from_secs(10),
            true,
            &mut |_| {
                applied += 1;
                Ok(String::new())
            },
            Some(watch),
            &mut |_| {},
            &mut |_| {},
        )
        .unwrap();
        // Off, 10 %, then back to off once the reads fail.
        assert_eq!(applied, 3);
        assert!(matches!(out, MeshOutcome::Stopped { stage: 0, .. }), "{out:?}");
    }
}
