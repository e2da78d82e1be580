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
