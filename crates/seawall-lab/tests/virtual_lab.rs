//! The virtual lab (`seawall_lab::vlab`): the lab's own tiers on a paused clock, in memory.
//!
//! - the default lab, virtually: the baseline's 27 attempts per edge request and no recovery,
//!   seawall's 1 and a recovery, and the same figures as the simulator's prediction;
//! - the same seed twice gives byte-identical results; another seed gives other jitter;
//! - at a scale both can run, the virtual lab's figures lie within 15 % of the process lab's
//!   (the same parameters, `Launcher::InProcess`) — a test that fails if the virtual stack's
//!   tier code stops being the process lab's, or if the in-memory link changes what the layers
//!   see;
//! - the article's verification test at a tenth of its rate (200 requests a second, 40 ms
//!   statements on 10 workers): 27 attempts per edge request at the dependency before, 1 after
//!   (its full scale, 2,000 a second, is a release-build command in the lab's BENCHMARKS.md);
//! - a scenario over the in-flight budget stops with an error, not an exhausted machine.

use std::time::Duration;

use seawall_lab::vlab::{self, Budget, VirtualParams};
use seawall_lab::{
    FaultKind, FaultSpec, LabError, LabOutcome, LabParams, Launcher, Stack, run_lab,
};

fn run_virtual(params: &LabParams, v: VirtualParams) -> Result<LabOutcome, LabError> {
    vlab::runtime().unwrap().block_on(run_lab(params, &Launcher::Virtual(v), |_| {}))
}

fn show(out: &LabOutcome) {
    eprintln!("{}", seawall_report::render_table(&out.results));
    eprintln!("{}", out.figures_table());
}

#[test]
fn the_default_lab_runs_virtually_and_agrees_with_the_simulator() {
    let out = run_virtual(&LabParams::default(), VirtualParams::default()).unwrap();
    show(&out);
    let (base, sea) = (&out.results.runs[0], &out.results.runs[1]);
    assert!(!base.recovered(), "baseline: {}", base.sentence());
    assert!(sea.recovered(), "seawall: {}", sea.sentence());
    assert!((out.figures[0].amplification_during - 27.0).abs() < 0.5);
    assert!(out.figures[1].amplification_during <= 1.1);
    let gaps = out.gap_table();
    let over = gaps
        .lines()
        .filter(|l| !l.starts_with('(') && l.contains(" gap ") && l.contains('!'))
        .count();
    assert_eq!(over, 0, "a gap over 15 % from the simulator:\n{gaps}");
    assert!(out.results.description.starts_with("virtual lab"), "{}", out.results.description);
}

#[test]
fn one_seed_gives_byte_identical_results() {
    let params = LabParams {
        duration: Duration::from_secs(12),
        at: Duration::from_secs(3),
        fault: Some(FaultSpec { kind: FaultKind::Fail, duration: Duration::from_secs(4) }),
        ..LabParams::default()
    };
    let a = run_virtual(&params, VirtualParams::default()).unwrap().results.to_json();
    // A paused clock starts where the wall clock is: start the second run at another phase of
    // it (what a loaded machine does by itself), so the result cannot depend on when it ran.
    std::thread::sleep(Duration::from_millis(337));
    let b = run_virtual(&params, VirtualParams::default()).unwrap().results.to_json();
    assert!(a == b, "two runs of one seed differ");
    let other = LabParams { seed: 99, ..params };
    let c = run_virtual(&other, VirtualParams::default()).unwrap().results.to_json();
    assert!(c != a, "the seed changes nothing: jitter is not drawn from it");
}

#[test]
fn the_verification_test_at_a_tenth_of_its_rate() {
    let params = LabParams {
        rate: 200.0,
        capacity: 250.0,
        workers: 10,
        fault: Some(FaultSpec { kind: FaultKind::Fail, duration: Duration::from_secs(10) }),
        at: Duration::from_secs(10),
        duration: Duration::from_secs(40),
        ..LabParams::default()
    };
    let out = run_virtual(&params, VirtualParams::default()).unwrap();
    show(&out);
    let (base, sea) = (&out.results.runs[0], &out.results.runs[1]);
    let peak = |r: &seawall_report::Run| {
        r.series.bottom_attempts_rps[10..20].iter().copied().fold(0.0, f64::max)
    };
    assert!(
        peak(base) >= 0.95 * 200.0 * 27.0,
        "before: {} attempts/s at the dependency",
        peak(base)
    );
    assert!(peak(sea) <= 1.1 * 200.0, "after: {} attempts/s", peak(sea));
    assert!(!base.recovered() && sea.recovered(), "{} / {}", base.sentence(), sea.sentence());
}

#[test]
fn a_scenario_over_the_in_flight_budget_stops_with_an_error() {
    let tight = VirtualParams {
        budget: Budget { max_in_flight: 500, ..Budget::default() },
        ..VirtualParams::default()
    };
    let err =
        run_virtual(&LabParams { stacks: vec![Stack::Baseline], ..LabParams::default() }, tight)
            .unwrap_err();
    assert!(err.to_string().contains("over the budget of 500"), "{err}");
    // The control: the default budget runs the same scenario.
    assert!(
        run_virtual(
            &LabParams { stacks: vec![Stack::Baseline], ..LabParams::default() },
            VirtualParams::default()
        )
        .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_virtual_lab_agrees_with_the_process_lab() {
    let params = LabParams {
        stacks: vec![Stack::Baseline, Stack::Seawall],
        fault: Some(FaultSpec { kind: FaultKind::Fail, duration: Duration::from_secs(5) }),
        at: Duration::from_secs(3),
        duration: Duration::from_secs(14),
        rate: 40.0,
        capacity: 50.0,
        workers: 2,
        ..LabParams::default()
    };
    let process = run_lab(&params, &Launcher::InProcess, |_| {}).await.expect("process lab runs");
    let p2 = params.clone();
    let virt = tokio::task::spawn_blocking(move || run_virtual(&p2, VirtualParams::default()))
        .await
        .unwrap()
        .unwrap();
    show(&process);
    show(&virt);
    let lower_bound = process.figures.iter().any(|f| f.saturation.is_lower_bound());
    for i in 0..2 {
        let (p, v) = (&process.results.runs[i], &virt.results.runs[i]);
        assert_eq!(
            p.recovered(),
            v.recovered(),
            "{}: process {} / virtual {}",
            p.policy,
            p.sentence(),
            v.sentence()
        );
        let close = |name: &str, a: f64, b: f64| {
            let gap = (a - b).abs() / a.abs().max(b.abs()).max(0.05);
            assert!(
                gap <= 0.15,
                "{}: {name} process {a:.3} virtual {b:.3} ({:.0} % apart)",
                p.policy,
                gap * 100.0
            );
        };
        close("goodput before", p.goodput_before, v.goodput_before);
        close("goodput after", p.goodput_after, v.goodput_after);
        if !lower_bound {
            close(
                "attempts per edge request",
                process.figures[i].amplification_during,
                virt.figures[i].amplification_during,
            );
        }
    }
}
