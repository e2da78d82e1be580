//! Issues 15 and 17: the lab and the simulator, given the same parameters, agree within 15 % on
//! peak amplification, goodput during and after the fault, mean goodput per second and wasted
//! work, for the baseline and the seawall configurations, at the default lab's shape and at
//! twice the dependency's capacity.
//!
//! The labs are scaled down from the default (25 s at 160 rps on a 200 rps dependency, about a
//! minute): too slow for a debug test on 2 cores. Nodes run in-process, as in `short_lab.rs`.
//! When the lab measured itself capped by the machine, the baseline's storm figures are lower
//! bounds (the report says so), and only that is asserted of them: not above the prediction;
//! its wasted work, a share of the dependency's time, is asserted as long as the load
//! generator kept its schedule. Seawall's figures are asserted whenever it did; see
//! [`compared`] for what a late generator leaves. The two labs take turns ([`LAB`]): run side
//! by side on 2 cores they would cap each other.

use std::time::Duration;

use tokio::sync::Mutex;

use seawall_lab::saturation::LAG_BOUND;
use seawall_lab::sim::{Figure, TOLERANCE, gaps};
use seawall_lab::{FaultKind, FaultSpec, LabParams, Launcher, Stack, run_lab};

/// One lab at a time.
static LAB: Mutex<()> = Mutex::const_new(());

/// How a machine too slow for the lab capped one configuration's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capped {
    /// Not: every figure is compared.
    No,
    /// The machine's CPU was busy to the end (the baseline's storm is what a busy machine
    /// caps), but the generator kept its schedule: the load offered was the one asked.
    Cpu,
    /// The generator fell behind its schedule and sent the backlog late, at once.
    Late,
    /// The machine could not carry even the healthy load: goodput before the fault short of
    /// the prediction (a baseline whose 250 ms per-try timeouts fire on a starved CPU storms
    /// before any fault).
    Overwhelmed,
}

/// What `capped` leaves of a comparison of `figure`: `Some(true)` compared within the
/// tolerance, `Some(false)` only as a lower bound, `None` not at all.
fn compared(figure: Figure, capped: Capped) -> Option<bool> {
    match (figure, capped) {
        (_, Capped::No) => Some(true),
        // A share of the dependency's time, which it spends on timers, not CPU: a busy CPU
        // shrinks the storm above it (fewer attempts arrive) but not how the dependency's time
        // divides between answers someone used and the rest.
        (Figure::WastedWork, Capped::Cpu) => Some(true),
        // The worst second of a starved machine has no direction: its timers fire late and
        // then together, so one second's attempts bunch into the next (603, 813, 1,028 where a
        // steady 810 a second was due). The mean over the run is still a lower bound, and
        // `assert_agrees` asserts that instead.
        (Figure::PeakAmplification, Capped::Cpu) => None,
        // The storm a busy machine could carry, the goodput it could serve.
        (_, Capped::Cpu) => Some(false),
        // A late backlog sent at once is a burst the dependency sheds and the edge retries:
        // more attempts in that second than an even load gives, and another mix of work, so
        // the amplification and the wasted work have no direction. Goodput is still bounded
        // by what a slow machine could serve.
        // The same when the storm began before the fault, for want of CPU.
        (Figure::PeakAmplification | Figure::WastedWork, Capped::Late | Capped::Overwhelmed) => {
            None
        }
        (_, Capped::Late | Capped::Overwhelmed) => Some(false),
    }
}

async fn assert_agrees(params: &LabParams) {
    let _turn = LAB.lock().await;
    let out = run_lab(params, &Launcher::InProcess, |_| {}).await.expect("lab runs");
    eprintln!("{}", out.figures_table());
    eprintln!("{}", out.gap_table());
    eprintln!("{}", out.results.description);
    let all = gaps(&out.results, &out.predicted);
    // Each second's attempts at the dependency, for the bunching a starved machine shows.
    for (side, r) in [("lab", &out.results), ("sim", &out.predicted)] {
        for run in &r.runs {
            let a: Vec<u64> = run.series.bottom_attempts_rps.iter().map(|x| *x as u64).collect();
            eprintln!("{} {side}: attempts at the dependency each second {a:?}", run.policy);
        }
    }
    let mut within = 0;
    for (run, f) in out.results.runs.iter().zip(&out.figures) {
        let p = out.predicted.runs.iter().find(|p| p.policy == run.policy).expect("predicted");
        // Seawall's load is the offered rate, not a storm a busy CPU caps, so only a late
        // generator caps it.
        let capped = if f.saturation.max_lag_s > LAG_BOUND.as_secs_f64() {
            Capped::Late
        } else if run.goodput_before < (1.0 - TOLERANCE) * p.goodput_before {
            Capped::Overwhelmed
        } else if run.policy != "seawall" && f.saturation.is_lower_bound() {
            Capped::Cpu
        } else {
            Capped::No
        };
        if capped == Capped::Cpu {
            // Attempts per edge request over the whole run: a busy CPU sends fewer, never more.
            let (lab, sim) = (run.attempts_per_call, p.attempts_per_call);
            eprintln!("{}: attempts per edge request, lab {lab:.2}, sim {sim:.2}", run.policy);
            assert!(lab <= sim * (1.0 + TOLERANCE), "{}: {lab} attempts, sim {sim}", run.policy);
        }
        if params.fault.is_some() && capped == Capped::No {
            assert_eq!(run.recovered(), p.recovered(), "{}: the verdicts differ", run.policy);
        }
        for g in all.iter().filter(|g| g.policy == run.policy) {
            match compared(g.figure, capped) {
                Some(true) => {
                    assert!(!g.too_far(), "{g:?}\n{}", out.gap_table());
                    within += 1;
                }
                Some(false) => {
                    eprintln!(
                        "{}: capped by this machine ({capped:?}), {} only a lower bound",
                        run.policy, g.figure
                    );
                    // Short of the prediction by any amount, but not above it by more than the
                    // tolerance.
                    assert!(g.lab <= g.sim || !g.too_far(), "{g:?} (capped)");
                }
                None => eprintln!(
                    "{}: capped by this machine ({capped:?}), {} not compared",
                    run.policy, g.figure
                ),
            }
        }
    }
    // A run in which the machine capped everything proves nothing: say so by failing, rather
    // than passing on no comparison at all.
    eprintln!("{within} of {} figures compared within the tolerance", all.len());
    assert!(within > 0, "no figure was compared: every run was capped by this machine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_and_simulator_agree_within_15_percent() {
    // The default lab's shape — 80 % of capacity, a 1 s deadline, a fail fault — scaled to 40
    // rps on a 50 rps dependency of 2 workers (as in `short_lab.rs`), 14 s instead of 25.
    let faulted = LabParams {
        stacks: vec![Stack::Baseline, Stack::Seawall],
        fault: Some(FaultSpec { kind: FaultKind::Fail, duration: Duration::from_secs(5) }),
        at: Duration::from_secs(3),
        duration: Duration::from_secs(14),
        rate: 40.0,
        capacity: 50.0,
        workers: 2,
        ..LabParams::default()
    };
    assert_agrees(&faulted).await;
}

/// Seawall at twice capacity: `--rate 400` on the default 200 rps dependency, no fault,
/// scaled as above: 100 rps on 50. The dependency's `ShedLayer` turns half of it away; what it
/// admits is served at capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seawall_at_twice_capacity_agrees_within_15_percent() {
    assert_agrees(&twice_capacity(Stack::Seawall, 100.0)).await;
}

/// The baseline at twice capacity: the unbounded queue grows without end, every attempt at every
/// tier times out at 250 ms, and each of the three tiers sends 3 attempts per call: 27 at the
/// dependency per edge request, in the lab and in the simulator.
///
/// At seawall's 100 rps on 50 that is 2,700 attempts a second at the dependency and a new
/// connection for each (a timed-out HTTP/1 request closes its connection), more than this debug,
/// in-process lab can carry on 2 cores: it measured 14.7–16.1x there, its order tier sending 1.5–1.9
/// attempts per gateway attempt, at 89–100 % CPU. That was the machine, not the model: the
/// release build, nodes in their own processes, measures 27.1x against the simulator's 27.0x at
/// that load (`seawall lab --config baseline --rate 100 --capacity 50 --workers 2 --duration 8
/// --fault none`), and 27.1x / 27.0x at 30 on 15 and at 20 on 10. So the debug test runs it at
/// 30 rps on 15 (810 attempts a second), where the order tier sends its 2.8 per gateway attempt.
///
/// Breaks if the simulator's tiers retry less than the lab's (`attempts: Some(2)` in
/// `seawall_lab::sim::scenario`'s baseline policy: 8x predicted; checked red), and would if the
/// lab's tiers stopped retrying timeouts (not run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_at_twice_capacity_agrees_within_15_percent() {
    assert_agrees(&twice_capacity(Stack::Baseline, 30.0)).await;
}

/// `stack` alone at `rate` on a dependency of half that capacity (2 workers), no fault, 8 s.
fn twice_capacity(stack: Stack, rate: f64) -> LabParams {
    LabParams {
        stacks: vec![stack],
        fault: None,
        duration: Duration::from_secs(8),
        rate,
        capacity: rate / 2.0,
        workers: 2,
        ..LabParams::default()
    }
}
