//! A whole `RetryPolicy` success-path call — `start` + `before_attempt` + `after_attempt(Success)`
//! with `AnyBudget::Grpc` — against a bare atomic add in the same run.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use seawall::budget::{AnyBudget, GrpcThrottle};
use seawall::prelude::*;

fn policy(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy/success_call");
    let counter = AtomicU64::new(0);
    g.bench_function("atomic_fetch_add", |b| {
        b.iter(|| black_box(counter.fetch_add(1, Ordering::Relaxed)))
    });
    let p = RetryPolicy::new(PolicyConfig::default(), AnyBudget::Grpc(GrpcThrottle::default()))
        .with_seed(1);
    let mut i = 0u64;
    g.bench_function("retry_policy_grpc", |b| {
        b.iter(|| {
            i += 1;
            let now = Instant::from_nanos(i * 100);
            let mut call = p.start(now, RequestInfo::idempotent(), None);
            let attempt = p.before_attempt(&mut call, now);
            black_box(&attempt);
            black_box(p.after_attempt(&mut call, now, Class::Success, Hint::None))
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = policy
}
criterion_main!(benches);
