//! Reproduction: the shape of a retry-sustained metastable failure as Huang, Magnusson,
//! Bangalore Muralikrishna, Estyak, Isaacs, Aghayev, Zhu and Charapko, "Metastable Failures in
//! the Wild" (OSDI 2022), reproduce it in their example applications: a trigger tips a service
//! whose clients retry into a state that outlasts it only when it is both strong and long
//! enough, and once tipped the way out is to cut the load.
//!
//! The catalog's `huang-retry`: 160 requests/s against about 200/s of capacity (ρ = 0.8), three
//! attempts, each sent as soon as the last one's 1 s per-try timeout fires, and a capacity-decrease
//! trigger: from t = 10 s only `capacity` of the 20 workers serve, for `duration_s`. While it lasts
//! the queue grows by about (ρ − capacity) · 200 requests a second, so when capacity comes back
//! it holds about (ρ − capacity) · duration seconds of work. More than one per-try timeout of
//! it, and every attempt times out: each request becomes three, 480/s are offered to 200/s,
//! the queue stays full and goodput stays at zero after the trigger has gone. Hence the boundary
//! in (depth × duration): a trigger that leaves capacity above the load never tips it, one that
//! leaves less tips it once (ρ − capacity) · duration passes about 1 s — a shallower trigger
//! must last longer. In the stuck state every request makes three attempts, so only a load
//! below capacity / 3 ≈ 67/s drains the queue: 40 % of the trigger-free load.
//!
//! What breaks it (each tried): one attempt per request (every point recovers: the control
//! below), a 2 s per-try timeout (the boundary moves to longer triggers: 0.6 of capacity for
//! 8 s passes), no load cut after the worst trigger (it stays down), and `budget` without its
//! token bucket (it stays down, as `jitter` does).

use std::num::NonZeroUsize;

use seawall_report::Run;
use seawall_report::sweep::{BoundaryKind, Point, Sweep};
use seawall_sim::sweep::{Plan, parse_axis};
use seawall_sim::{load, simulate};

/// Share of workers left during the trigger: the lower, the deeper.
const CAPACITY: &str = "fault.0.capacity=0,0.2,0.4,0.6,0.7,0.8,0.9";
/// The trigger's length, seconds.
const DURATION: &str = "fault.0.duration_s=1,2,4,8,16,32";
/// Load over capacity without the trigger.
const RHO: f64 = 0.8;
/// The per-try timeout, seconds.
const TIMEOUT_S: f64 = 1.0;

/// The phase diagram of `naive` over `capacity` × `duration` with `sets`, 3 seeds a point.
fn sweep(capacity: &str, duration: &str, sets: &[&str]) -> Sweep {
    let axes = vec![parse_axis(capacity).unwrap(), parse_axis(duration).unwrap()];
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let plan = Plan::new("huang-retry", &sets, axes, &["naive".into()], 1, 3).unwrap();
    plan.run(NonZeroUsize::new(2).unwrap(), &|_, _| {}).unwrap()
}

/// The point at (capacity, duration).
fn at(sweep: &Sweep, c: f64, d: f64) -> &Point {
    let p = sweep.points.iter();
    p.filter(|p| p.at["fault.0.capacity"] == c).find(|p| p.at["fault.0.duration_s"] == d).unwrap()
}

#[test]
fn the_trigger_tips_it_when_deep_and_long_enough_and_the_boundary_is_monotone() {
    let sweep = sweep(CAPACITY, DURATION, &[]);
    let at = |c: f64, d: f64| at(&sweep, c, d);
    let (caps, durs) = (&sweep.axes[0].values, &sweep.axes[1].values);

    // Short: a 1 s trigger passes at every depth, a full outage included, in every seed.
    for &c in caps {
        assert_eq!(at(c, 1.0).recovered_seeds, 3, "capacity {c}, 1 s: {:?}", at(c, 1.0).runs);
    }
    // Shallow: a trigger that leaves capacity at or above the load passes however long it lasts.
    for &d in durs {
        for c in [0.8, 0.9] {
            assert_eq!(at(c, d).recovered_seeds, 3, "capacity {c}, {d} s: {:?}", at(c, d).runs);
        }
    }
    // Deep and long: stuck in every seed, goodput after the trigger near zero.
    let worst = at(0.0, 32.0);
    assert_eq!(worst.recovered_seeds, 0, "{:?}", worst.runs);
    assert!(worst.goodput_after < 0.05, "{}", worst.goodput_after);

    // Monotone: if (capacity, duration) stays down, so does every deeper and longer point.
    for p in sweep.points.iter().filter(|p| !p.recovered) {
        let (c, d) = (p.at["fault.0.capacity"], p.at["fault.0.duration_s"]);
        for q in &sweep.points {
            let (c2, d2) = (q.at["fault.0.capacity"], q.at["fault.0.duration_s"]);
            if c2 <= c && d2 >= d {
                assert!(!q.recovered, "({c}, {d} s) stays down but ({c2}, {d2} s) recovers");
            }
        }
    }

    // Depth and duration trade: the same depth passes when shorter and tips when longer, the
    // same duration passes when shallower and tips when deeper.
    assert!(at(0.6, 2.0).recovered && !at(0.6, 8.0).recovered);
    assert!(at(0.7, 4.0).recovered && !at(0.4, 4.0).recovered);

    // Along each duration the boundary is a capacity that rises with the duration, near the
    // first-order estimate ρ − timeout / duration (the backlog left is one per-try timeout of
    // work). Short deep triggers tip sooner than that: with few workers left the queue passes
    // one timeout of *their* work early, and the retries start during the trigger itself.
    let mut last = f64::NEG_INFINITY;
    for &d in &durs[1..] {
        let b = sweep.boundaries.iter().find(|b| b.at["fault.0.duration_s"] == d).unwrap();
        assert_eq!(b.kind, BoundaryKind::HealsAbove, "{d} s: {}", b.words);
        let v = b.value.unwrap();
        assert!(v >= last, "{d} s: boundary {v} below {last} at a shorter trigger: {}", b.words);
        last = v;
        let estimate = RHO - TIMEOUT_S / d;
        let tolerance = if d >= 4.0 { 0.1 } else { 0.2 };
        assert!((v - estimate).abs() <= tolerance, "{d} s: boundary {v}, estimate {estimate}");
    }
}

/// The deepest, longest trigger of the grid: every worker gone for 32 s (t = 10 to 42 s).
const WORST: [&str; 2] = ["fault.0.capacity=0", "fault.0.duration_s=32"];

/// Runs of `policy` at the worst trigger with `sets`, seeds 1 to 3.
fn worst(policy: &str, sets: &[&str]) -> Vec<Run> {
    let sets: Vec<String> = WORST.iter().chain(sets).map(|s| s.to_string()).collect();
    let s = load("huang-retry", &sets).unwrap();
    let run = |seed| simulate(&s, &[policy.to_string()], seed, &mut |_, _| {}).unwrap().runs;
    (1..=3).flat_map(run).collect()
}

/// Goodput over the last 30 s of the run (of 100).
fn late_goodput(r: &Run) -> f64 {
    let s = &r.series;
    let (good, all) =
        (s.goodput_rps[70..100].iter().sum::<f64>(), s.edge_rps[70..100].iter().sum::<f64>());
    good / all
}

#[test]
fn stuck_it_heals_only_once_the_load_is_cut_below_capacity_over_attempts() {
    // The same runs three ways: the load left alone, cut to 100/s and cut to 40/s for 15 s
    // starting 3 s after the trigger, then back to 160/s.
    let cut = |rate: u32| {
        format!(
            "edge.ramp=[{{ at_s = 44, rate = 160 }}, {{ at_s = 45, rate = {rate} }}, \
                 {{ at_s = 59, rate = {rate} }}, {{ at_s = 60, rate = 160 }}]"
        )
    };
    let alone = worst("naive", &[]);
    let (to_100, to_40) = (cut(100), cut(40));
    let shallow = worst("naive", &[&to_100]);
    let deep = worst("naive", &[&to_40]);
    for ((a, s), d) in alone.iter().zip(&shallow).zip(&deep) {
        // Left alone: down to the end of the run.
        assert!(!a.recovered() && a.goodput_after < 0.05, "{a:?}");
        assert!(late_goodput(a) < 0.05, "{}", late_goodput(a));
        // Cut to 100/s, below the trigger-free 160/s and below capacity, but three attempts
        // each are 300/s: still down once the load is back.
        assert!(!s.recovered() && late_goodput(s) < 0.05, "{}", late_goodput(s));
        // Cut to 40/s (120 attempts/s < 200/s): the queue drains, and at 160/s again it stays
        // healthy.
        assert!(d.recovered(), "{:?}", d.series.goodput_rps);
        assert!(late_goodput(d) > 0.99, "{}", late_goodput(d));
    }
}

#[test]
fn seawall_heals_by_itself_after_the_worst_trigger_and_backoff_alone_does_not() {
    for r in worst("seawall", &[]) {
        assert!(r.recovered() && r.recovery_s().unwrap() <= 5.0, "{:?}", r.recovery_s());
        assert!(r.goodput_after > 0.95 && late_goodput(&r) > 0.95, "{}", r.goodput_after);
    }
    // What does it: the budget. Full-jitter backoff alone (`jitter`: 50 ms base, no budget)
    // still sends three attempts per request and stays down; the gRPC token bucket on top of
    // it (`budget`) stops the retries and heals, more slowly than with seawall's shedding.
    for r in worst("jitter", &[]) {
        assert!(!r.recovered() && late_goodput(&r) < 0.05, "{}", late_goodput(&r));
    }
    for r in worst("budget", &[]) {
        assert!(r.recovered() && late_goodput(&r) > 0.95, "{:?}", r.recovery_s());
    }
}

#[test]
fn without_retries_nothing_stays_down() {
    // The control: one attempt per request and the backlog drains once capacity returns, at
    // every depth and duration — the retries are what sustains the stuck state.
    let sweep =
        sweep("fault.0.capacity=0,0.4", "fault.0.duration_s=8,32", &["policies.naive.attempts=1"]);
    for p in &sweep.points {
        assert_eq!(p.recovered_seeds, 3, "{:?}: {:?}", p.at, p.runs);
    }
}
