//! A driver for instruction counts (`valgrind --tool=callgrind`): runs the success path of one
//! budget `SEAWALL_COST_N` times. Ignored by `cargo test`; see BENCHMARKS.md.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use seawall::budget::{AdaptiveThrottle, AttemptOutcome, Budget, EnvoyRetryBudget};
use seawall::time::Instant;

fn n() -> u64 {
    std::env::var("SEAWALL_COST_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

fn success<B: Budget>(b: &B) {
    for i in 0..n() {
        let now = black_box(Instant::from_nanos(1_000_000_000 + i * 100));
        black_box(b.admit(now, false, 0.5));
        b.record(now, None, AttemptOutcome::Answered);
    }
}

#[test]
#[ignore = "a callgrind driver, not a test"]
fn cost_atomic() {
    let c = AtomicU64::new(0);
    for i in 0..n() {
        black_box(Instant::from_nanos(1_000_000_000 + i * 100));
        c.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
#[ignore = "a callgrind driver, not a test"]
fn cost_adaptive() {
    success(&AdaptiveThrottle::default());
}

#[test]
#[ignore = "a callgrind driver, not a test"]
fn cost_envoy() {
    success(&EnvoyRetryBudget::default());
}
