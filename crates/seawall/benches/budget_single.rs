//! Budgets on one thread: the success path and a retry decision, against a bare atomic add and
//! tower's `TpsBudget` in the same run. Figures and the command are in BENCHMARKS.md.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

mod common;

/// Times `op(&subject, i)` with `i` counting calls across every sample, so virtual time only
/// moves forward.
macro_rules! single {
    ($g:expr, $name:expr, $subject:expr, $op:path) => {{
        let subject = $subject;
        let mut i = 0u64;
        $g.bench_function($name, |b| {
            b.iter(|| {
                i += 1;
                $op(&subject, i)
            })
        });
    }};
}

fn budgets(c: &mut Criterion) {
    all_subjects!(c, "single/", single);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = budgets
}
criterion_main!(benches);
