//! The sweep's page and table: deterministic, escaped, a cell per point with the boundary
//! drawn, and no input that makes rendering panic.

use seawall_report::sweep::{Axis, Point, SeedRun, Sweep, boundaries, render_sweep_table};
use seawall_report::{Verdict, render_sweep_html};

fn seed_run(seed: u64, recovered: bool, recovery_s: f64) -> SeedRun {
    SeedRun {
        seed,
        verdict: if recovered { Verdict::Recovered { recovery_s } } else { Verdict::StaysDown },
        peak_amplification: 2.0,
        goodput_before: 1.0,
        goodput_during: 0.0,
        goodput_after: if recovered { 0.9 } else { 0.0 },
        wasted_work: 0.4,
    }
}

/// A grid over edge.rate (× fault.0.duration_s when `two_d`): heals below 150 + 2 × duration.
fn sweep(two_d: bool) -> Sweep {
    let mut axes =
        vec![Axis { path: "edge.rate".into(), values: vec![130.0, 140.0, 150.0, 160.0] }];
    if two_d {
        axes.push(Axis { path: "fault.0.duration_s".into(), values: vec![5.0, 10.0] });
    }
    let policies = vec!["naive".to_string()];
    let mut points = Vec::new();
    for d in axes.get(1).map_or(vec![0.0], |a| a.values.clone()) {
        for &r in &axes[0].values {
            let heals = r < 150.0 - d;
            let mut at = vec![("edge.rate".to_string(), r)];
            if two_d {
                at.push(("fault.0.duration_s".into(), d));
            }
            let runs = vec![
                seed_run(1, heals, r / 20.0),
                seed_run(2, heals || (r == 150.0 && d < 10.0), 3.0),
            ];
            points.push(Point::new(at, "naive", runs));
        }
    }
    let boundaries = boundaries(&axes, &policies, &points);
    Sweep {
        scenario: "bronson".into(),
        description: "d".into(),
        seed: 1,
        seeds: 2,
        sets: vec![],
        axes,
        policies,
        fault: None,
        points,
        boundaries,
    }
}

#[test]
fn a_strip_has_a_cell_per_point_and_the_boundary_in_words_and_drawn() {
    let s = sweep(false);
    let html = render_sweep_html(&s);
    assert_eq!(html, render_sweep_html(&s.clone()));
    assert_eq!(html.matches("<rect ").count(), 4);
    assert!(html.contains("naive heals by itself below ≈ 150 QPS"), "{}", s.boundaries[0].words);
    assert!(html.contains(r#"<line class="edge""#) && html.contains("≈ 150"));
    assert!(html.contains(">1/2<"), "the split point says how many seeds healed");
    let table = render_sweep_table(&s);
    assert!(table.contains("150  naive   1/2"), "{table}");
}

#[test]
fn healed_late_is_told_apart_from_stuck() {
    let mut s = sweep(false);
    // 160 QPS: both seeds healthy by the end, but after losing most post-fault requests.
    for r in &mut s.points[3].runs {
        r.verdict = Verdict::HealedLate { healthy_from_s: 30.0 };
    }
    s.points[3] =
        Point::new(s.points[3].at.clone().into_iter().collect(), "naive", s.points[3].runs.clone());
    assert_eq!((s.points[3].recovered_seeds, s.points[3].late_seeds), (0, 2));
    let html = render_sweep_html(&s);
    assert!(html.contains(">late<") && html.contains("healed late"));
    let table = render_sweep_table(&s);
    assert!(table.contains("0/2 (2 late)") && table.contains("a longer --duration"), "{table}");
}

#[test]
fn a_heat_map_has_a_row_per_second_axis_value_and_a_boundary_per_row() {
    let s = sweep(true);
    let html = render_sweep_html(&s);
    assert_eq!(html.matches("<rect ").count(), 8);
    assert_eq!(s.boundaries.len(), 2);
    assert_eq!(html.matches(r#"<line class="edge""#).count(), 2, "{:?}", s.boundaries);
    assert!(html.contains("with fault.0.duration_s = 10"), "{:?}", s.boundaries);
    // The header's fault line says it is swept (without that sentence it reads as if every
    // point had the scenario's one fault).
    assert!(html.contains("none injected in the scenario; each point sets fault.0.duration_s"));
    assert!(!render_sweep_html(&sweep(false)).contains("each point sets"));
}

#[test]
fn text_is_escaped_and_odd_input_does_not_panic() {
    let mut s = sweep(true);
    s.scenario = "<script>x</script>".into();
    s.axes[0].path = "a<b".into();
    s.policies.push("\"><img>".into());
    let html = render_sweep_html(&s);
    assert!(!html.contains("<script>x") && !html.contains("a<b") && !html.contains("\"><img>"));
    // Empty, NaN, mismatched: still a page.
    s.points[0].recovery_s = Some(f64::NAN);
    s.points[1].peak_amplification = f64::INFINITY;
    s.points[2].at.clear();
    s.axes[1].values.clear();
    let _ = render_sweep_html(&s);
    let _ = render_sweep_table(&s);
    s.axes.clear();
    s.points.clear();
    s.boundaries.clear();
    assert!(render_sweep_html(&s).contains("</html>"));
    let _ = render_sweep_table(&s);
}
