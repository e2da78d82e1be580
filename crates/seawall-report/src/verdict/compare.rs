//! Configurations side by side: what the verdicts alone do not say.

use super::Verdict;
use crate::numbers::{pct, printable};
use crate::{Results, Run};

/// Goodput during the fault differs by at least this much (5 percentage points) before a
/// comparison calls one configuration's better.
const MARGIN: f64 = 0.05;

/// Sentences that put each run beside the first (the "before" of a comparison): when the first
/// served more while the fault lasted — a cure that recovers can still cost goodput during the
/// fault, and the verdict alone hides it — and when two runs share a verdict but not their
/// goodput during the fault. Empty for a single run or without a fault.
pub fn compare(results: &Results) -> Vec<String> {
    let Some((first, rest)) = results.runs.split_first() else { return Vec::new() };
    if results.fault.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for run in rest {
        let (a, b) = (first.goodput_during, run.goodput_during);
        if !(a.is_finite() && b.is_finite()) || (a - b).abs() < MARGIN {
            continue;
        }
        let (more, less) = if a > b { (first, run) } else { (run, first) };
        out.push(sentence(more, less, same_verdict(first.verdict, run.verdict)));
    }
    out
}

fn same_verdict(a: Verdict, b: Verdict) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
}

fn sentence(more: &Run, less: &Run, same: bool) -> String {
    let figures = format!("{} against {}", pct(more.goodput_during), pct(less.goodput_during));
    let tail = if same { " although both read the same verdict" } else { "" };
    format!("{} served more while the fault lasted ({figures}){tail}.", printable(&more.policy))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fault, Series, Source};

    fn run(policy: &str, during: f64, verdict: Verdict) -> Run {
        Run {
            policy: policy.into(),
            verdict,
            peak_amplification: 1.0,
            attempts_per_call: 1.0,
            goodput_before: 1.0,
            goodput_during: during,
            goodput_after: 1.0,
            wasted_work: 0.0,
            events: 0,
            hedging: vec![],
            series: Series::default(),
        }
    }

    fn results(runs: Vec<Run>) -> Results {
        Results {
            scenario: "s".into(),
            description: String::new(),
            seed: 1,
            source: Source::Lab,
            duration_s: 30.0,
            fault: Some(Fault { kind: "partial".into(), start_s: 5.0, end_s: 10.0 }),
            tiers: vec![],
            runs,
        }
    }

    #[test]
    fn the_before_serving_more_during_the_fault_is_said() {
        let ok = Verdict::Recovered { recovery_s: 0.0 };
        let r = results(vec![run("before", 0.62, ok), run("after", 0.35, ok)]);
        let c = compare(&r);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0],
            "before served more while the fault lasted (62 % against 35 %) although both read \
             the same verdict."
        );
        // Within the margin nothing is said; without a fault neither.
        let r = results(vec![run("before", 0.36, ok), run("after", 0.35, ok)]);
        assert!(compare(&r).is_empty());
        let mut r = results(vec![run("before", 0.62, ok), run("after", 0.35, ok)]);
        r.fault = None;
        assert!(compare(&r).is_empty());
    }
}
