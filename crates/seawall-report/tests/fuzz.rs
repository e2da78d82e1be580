//! No input makes the report panic or break its markup: seeded random results, NaN, infinities,
//! negative and huge values, series of mismatched lengths, backwards time, inverted faults.
//!
//! A small xorshift generator instead of proptest keeps the crate free of dependencies (and the
//! shared Cargo.lock untouched); the seed is fixed, so a failure reproduces.

mod common;

use common::balanced_tags;
use seawall_report::html::render_html_compare;
use seawall_report::{
    Fault, NotJudged, Results, Run, Series, Source, Verdict, render_html, render_notes,
    render_table,
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn value(&mut self) -> f64 {
        match self.below(12) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => -5.0,
            4 => 0.0,
            5 => 1e300,
            6 => f64::MIN_POSITIVE,
            _ => (self.below(100_000) as f64) / 10.0,
        }
    }
    fn values(&mut self) -> Vec<f64> {
        let n = self.below(40);
        (0..n).map(|_| self.value()).collect()
    }
    fn name(&mut self) -> String {
        const PARTS: [&str; 8] = ["naive", "<b>", "&amp;", "\"q\"", "'", "\u{0}", "é→", ""];
        (0..self.below(3) + 1).map(|_| PARTS[self.below(8) as usize]).collect()
    }
}

fn verdict(rng: &mut Rng) -> Verdict {
    match rng.below(9) {
        0 => Verdict::Recovered { recovery_s: rng.value() },
        1 => Verdict::HealedLate { healthy_from_s: rng.value() },
        2 => Verdict::Degraded,
        3 => Verdict::StaysDown,
        4 => Verdict::NotJudged { because: NotJudged::NoFault },
        5 => Verdict::NotJudged {
            because: NotJudged::TooLittleTraffic { requests_before: rng.value() },
        },
        6 => Verdict::NotJudged { because: NotJudged::UnhealthyBefore { level: rng.value() } },
        7 => Verdict::NotJudged { because: NotJudged::EndedTooSoon { after_fault_s: rng.value() } },
        _ => Verdict::Recovered { recovery_s: 0.0 },
    }
}

fn run(rng: &mut Rng) -> Run {
    let t = match rng.below(3) {
        0 => (0..rng.below(40)).map(|i| i as f64).collect(),
        _ => rng.values(),
    };
    Run {
        policy: rng.name(),
        verdict: verdict(rng),
        peak_amplification: rng.value(),
        attempts_per_call: rng.value(),
        goodput_before: rng.value(),
        goodput_during: rng.value(),
        goodput_after: rng.value(),
        wasted_work: rng.value(),
        events: rng.next(),
        hedging: (0..rng.below(3))
            .map(|_| seawall_report::Hedging {
                caller: rng.name(),
                tier: rng.name(),
                sent: rng.next(),
                won: rng.next(),
                cancelled: rng.next(),
                refused: rng.next(),
            })
            .collect(),
        series: Series {
            t,
            edge_rps: rng.values(),
            goodput_rps: rng.values(),
            bottom_attempts_rps: rng.values(),
            tier_attempts_rps: (0..rng.below(9)).map(|_| rng.values()).collect(),
            queue_age_s: rng.values(),
            budget_refusals_rps: rng.values(),
            shed_rps: rng.values(),
            breaker_open: rng.values(),
        },
    }
}

fn results(rng: &mut Rng) -> Results {
    Results {
        scenario: rng.name(),
        description: rng.name(),
        seed: rng.next(),
        source: if rng.below(2) == 0 { Source::Simulation } else { Source::Lab },
        duration_s: rng.value(),
        fault: (rng.below(3) > 0).then(|| Fault {
            kind: rng.name(),
            start_s: rng.value(),
            end_s: rng.value(),
        }),
        tiers: (0..rng.below(5)).map(|_| rng.name()).collect(),
        runs: (0..rng.below(7)).map(|_| run(rng)).collect(),
    }
}

/// Figures a real run can have (wild ones print in scientific notation and may widen the table).
fn plausible(r: &Run) -> bool {
    let fraction = |f: f64| (0.0..=1.0).contains(&f) || f.is_nan();
    let modest = |x: f64| (0.0..1e4).contains(&x) || x.is_nan();
    [r.goodput_before, r.goodput_during, r.goodput_after, r.wasted_work].into_iter().all(fraction)
        && [r.peak_amplification, r.attempts_per_call, r.verdict.healthy_from_s().unwrap_or(0.0)]
            .into_iter()
            .all(modest)
}

#[test]
fn plausible_figures_fit_in_100_columns() {
    let mut rng = Rng(7);
    for _ in 0..300 {
        let mut r = results(&mut rng);
        for run in &mut r.runs {
            let mut fraction = || rng.below(1001) as f64 / 1000.0;
            (run.goodput_before, run.goodput_during) = (fraction(), fraction());
            (run.goodput_after, run.wasted_work) = (fraction(), fraction());
            run.peak_amplification = rng.below(99_999) as f64 / 10.0;
            run.attempts_per_call = rng.below(99_999) as f64 / 10.0;
            run.verdict = Verdict::Recovered { recovery_s: rng.below(99_999) as f64 / 10.0 };
            run.policy = "p".repeat(rng.below(40) as usize);
            assert!(plausible(run));
        }
        let table = render_table(&r);
        assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
    }
}

#[test]
fn random_results_render_well_formed_and_deterministic() {
    let mut rng = Rng(0x5eed_5eed_5eed_5eed);
    for case in 0..200 {
        let a = results(&mut rng);
        let b = results(&mut rng);
        let html = render_html(&a);
        if let Err(e) = balanced_tags(&html) {
            panic!("case {case}: {e}\n{a:?}");
        }
        assert!(!html.contains("NaN") && !html.contains("inf"), "case {case}: {a:?}");
        assert_eq!(html, render_html(&a.clone()), "case {case}");
        let cmp = render_html_compare(&a, &b);
        if let Err(e) = balanced_tags(&cmp) {
            panic!("case {case} (compare): {e}");
        }
        let table = render_table(&a);
        assert_eq!(table.lines().count(), a.runs.len() + 1, "case {case}:\n{table}");
        let notes = render_notes(&a);
        assert!(notes.lines().all(|l| l.chars().count() <= 100), "case {case}:\n{notes}");
        if a.runs.iter().all(plausible) {
            assert!(table.lines().all(|l| l.chars().count() <= 100), "case {case}:\n{table}");
        }
    }
}

/// A figure written to results.json reads back as the same `f64` (fuzz/detect_json found one
/// that serde_json's default float parser read one unit in the last place off).
#[test]
fn figures_read_back_exactly() {
    let v = 1.0844444444444444e58_f64;
    let mut r = Results {
        scenario: "s".into(),
        description: String::new(),
        seed: 1,
        source: Source::Simulation,
        duration_s: 1.0,
        fault: None,
        tiers: vec!["a".into()],
        runs: Vec::new(),
    };
    r.duration_s = v;
    let again: Results = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(again.duration_s.to_bits(), v.to_bits());
}
