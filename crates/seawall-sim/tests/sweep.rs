//! Sweeps: a point's figures depend only on the base seed and its values (not on the thread
//! count, the order, or the grid around it), `simulate` repeats any point from its seed, and
//! bad paths and ranges fail before anything runs.

use std::num::NonZeroUsize;

use seawall_report::sweep::{BoundaryKind, Sweep};
use seawall_sim::sweep::{Plan, parse_axis};
use seawall_sim::{load, simulate};

fn plan(axes: &[&str], sets: &[&str], policies: &[&str], seeds: u32) -> Plan {
    let axes = axes.iter().map(|a| parse_axis(a).unwrap()).collect();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let policies: Vec<String> = policies.iter().map(|s| s.to_string()).collect();
    Plan::new("bronson", &sets, axes, &policies, 7, seeds).unwrap()
}

fn run(p: &Plan, jobs: usize) -> Sweep {
    p.run(NonZeroUsize::new(jobs).unwrap(), &|_, _| {}).unwrap()
}

fn error(axes: &[&str], sets: &[&str]) -> String {
    let axes = axes.iter().map(|a| parse_axis(a).unwrap()).collect();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Plan::new("bronson", &sets, axes, &[], 1, 1).unwrap_err().to_string()
}

#[test]
fn points_do_not_depend_on_threads_order_or_grid() {
    let p = plan(&["edge.rate=120..180:30", "fault.0.duration_s=5,10"], &["duration_s=30"], &[], 2);
    let one = run(&p, 1);
    let three = run(&p, 3);
    assert_eq!(one.to_json(), three.to_json());
    assert_eq!(one.points.len(), 3 * 2 * 2); // values × policies
    // The same point inside a smaller grid: the same seeds, the same figures.
    let small =
        run(&plan(&["edge.rate=150", "fault.0.duration_s=10"], &["duration_s=30"], &[], 2), 2);
    for sp in &small.points {
        let twin = one.points.iter().find(|q| q.at == sp.at && q.policy == sp.policy).unwrap();
        assert_eq!(twin, sp);
    }
    // Seeds differ between points and between the seeds of a point.
    let seeds: Vec<u64> = one.points.iter().flat_map(|p| p.runs.iter().map(|r| r.seed)).collect();
    let mut uniq = seeds.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), seeds.len() / 2); // each policy reuses its point's seeds
}

#[test]
fn simulate_repeats_any_point_from_its_seed() {
    let sweep = run(&plan(&["edge.rate=140..160:20"], &["duration_s=40"], &["naive"], 2), 2);
    for point in &sweep.points {
        let rate = point.at["edge.rate"];
        let s = load("bronson", &["duration_s=40".into(), format!("edge.rate={rate}")]).unwrap();
        for r in &point.runs {
            let again = simulate(&s, &["naive".into()], r.seed, &mut |_, _| {}).unwrap();
            let again = &again.runs[0];
            assert_eq!(
                (again.verdict, again.goodput_after, again.peak_amplification),
                (r.verdict, r.goodput_after, r.peak_amplification),
                "edge.rate={rate} seed {}",
                r.seed
            );
        }
    }
}

#[test]
fn the_json_names_swept_values_by_path_beside_the_figures() {
    let sweep = run(&plan(&["edge.rate=100,250"], &["duration_s=40"], &["naive"], 1), 1);
    let v: serde_json::Value = serde_json::from_str(&sweep.to_json()).unwrap();
    let p0 = &v["points"][0];
    assert_eq!(p0["edge.rate"], serde_json::json!(100));
    assert_eq!(p0["recovered"], true);
    assert!(p0["recovery_s"].is_number() && p0["peak_amplification"].is_number());
    assert!(p0["goodput_after"].is_number());
    assert_eq!(v["points"][1]["recovered"], false);
    assert_eq!(v["boundaries"][0]["kind"], "heals_below");
    assert_eq!(v["boundaries"][0]["value"], serde_json::json!(175.0));
    // And it reads back (figures to within serde_json's float parsing, the rest exactly).
    let back: Sweep = serde_json::from_value(v).unwrap();
    assert_eq!(back.boundaries, sweep.boundaries);
    for (a, b) in back.points.iter().zip(&sweep.points) {
        assert_eq!((&a.at, a.recovered, a.recovery_s), (&b.at, b.recovered, b.recovery_s));
        assert!((a.goodput_after - b.goodput_after).abs() < 1e-12);
    }
    assert_eq!(sweep.boundaries[0].kind, BoundaryKind::HealsBelow);
}

#[test]
fn bad_paths_values_and_grids_fail_before_running() {
    for (axes, sets, says) in [
        (&["edge.rtae=1..2:1"][..], &[][..], "edge.rtae=1: --set edge.rtae=1"),
        (&["tier.nope.workers=1..2:1"], &[], "`tier.nope`: no element"),
        // A list named without an index says how to name one of its elements.
        (
            &["fault.duration_s=5..10:5"],
            &[],
            "`fault` is a list of 1: name one, e.g. `fault.0.duration_s`",
        ),
        (&["edge.rate=-10..10:10"], &[], "edge.rate"),
        (&["tier.db.workers=1.5..2.5:0.5"], &[], "tier.db.workers=1.5"),
        (&["edge.rate=1..2:1"], &["edge.rate=5"], "also given with --set"),
        (&["edge.rate=1..2:1", "edge.rate=3,4"], &[], "swept twice"),
        (
            &["edge.rate=1..2:1", "duration_s=10,20", "tier.db.workers=1,2"],
            &[],
            "1 or 2 parameters",
        ),
        (&["edge.rate=1..1000:1", "duration_s=1..1000:1"], &[], "at most 10000"),
    ] {
        let e = error(axes, sets);
        assert!(e.starts_with("--sweep"), "{e}");
        assert!(e.contains(says), "{axes:?}: {e}");
    }
}
