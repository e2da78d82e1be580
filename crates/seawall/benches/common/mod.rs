//! Shared pieces of the budget benches: the operations timed, the budgets' bench configurations,
//! and the two anchors (a bare `AtomicU64::fetch_add` and tower's `TpsBudget`).
//!
//! Every budget is driven exactly as `RetryPolicy` drives it, on an `Instant` that advances with
//! each call, so the windowed budgets move through their slots as in production: 100 ns per
//! first attempt (10 M calls/s), 2 µs per retry decision (500 k retries/s). The anchors compute
//! the same instant, so the loop overhead is equal. Everything is monomorphised: no virtual call
//! is timed.

#![allow(dead_code)] // each bench file uses a different part

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use seawall::budget::{AttemptOutcome, Budget, RatioBudget, RetryCause};
use seawall::time::Instant;
use tower::retry::budget::{Budget as _, TpsBudget};

/// Virtual nanoseconds per first attempt.
pub(crate) const SUCCESS_STEP: u64 = 100;
/// Virtual nanoseconds per retry decision.
pub(crate) const RETRY_STEP: u64 = 2_000;

/// The instant of call `i` at `step` nanoseconds per call.
#[inline(always)]
pub(crate) fn at(i: u64, step: u64) -> Instant {
    Instant::from_nanos(1_000_000_000 + i * step)
}

/// seawall's ratio budget at its default window and ratio, with the largest reserve (1 M/s ×
/// 10 s): enough that every retry in the retry bench (500 k/s, no deposits) is granted, so the
/// bench times the grant path. The reserve does not change the cost of a deposit.
pub(crate) fn ratio() -> RatioBudget {
    RatioBudget::new(Duration::from_secs(10), 1_000_000, 0.1).expect("valid")
}

/// tower's `TpsBudget` with the same window and ratio and a reserve (its largest) that grants
/// every withdrawal at any speed this machine reaches.
pub(crate) fn tower_tps() -> TpsBudget {
    TpsBudget::new(Duration::from_secs(10), i32::MAX as u32 - 1, 0.1)
}

/// One first attempt that succeeds: `admit(first)` + `record(None, Answered)`.
#[inline(always)]
pub(crate) fn success<B: Budget>(b: &B, i: u64) {
    let now = black_box(at(i, SUCCESS_STEP));
    black_box(b.admit(now, false, 0.5));
    b.record(now, None, AttemptOutcome::Answered);
}

/// One retry decision and the retry's life: `withdraw` + `admit(retry)` + `record(Some(w), ..)`.
#[inline(always)]
pub(crate) fn retry<B: Budget>(b: &B, i: u64) {
    let now = black_box(at(i, RETRY_STEP));
    if let Some(w) = black_box(b.withdraw(now, RetryCause::Transient)) {
        black_box(b.admit(now, true, 0.5));
        b.record(now, Some(w), AttemptOutcome::Answered);
    }
}

/// The anchor: one relaxed `fetch_add`, after the same instant computation as the budgets.
#[inline(always)]
pub(crate) fn atomic_add(c: &AtomicU64, i: u64) {
    black_box(at(i, SUCCESS_STEP));
    c.fetch_add(1, Ordering::Relaxed);
}

/// tower's deposit (it reads `Instant::now()` and takes a mutex itself: part of its cost).
#[inline(always)]
pub(crate) fn tower_deposit(b: &TpsBudget, i: u64) {
    black_box(at(i, SUCCESS_STEP));
    b.deposit();
}

/// tower's withdraw.
#[inline(always)]
pub(crate) fn tower_withdraw(b: &TpsBudget, i: u64) {
    black_box(at(i, RETRY_STEP));
    black_box(b.withdraw());
}

/// Registers the 16 benchmarks — two anchors and six budgets for each of the two operations —
/// with `$run!(group, name, subject, operation)`.
#[macro_export]
macro_rules! all_subjects {
    ($c:expr, $prefix:literal, $run:ident) => {{
        use seawall::budget::{
            AdaptiveThrottle, AwsRetryQuota, EnvoyRetryBudget, GrpcThrottle, Unlimited,
        };
        use std::sync::atomic::AtomicU64;
        let mut g = $c.benchmark_group(concat!($prefix, "success_path"));
        $run!(g, "atomic_fetch_add", AtomicU64::new(0), common::atomic_add);
        $run!(g, "tower_tps_deposit", common::tower_tps(), common::tower_deposit);
        $run!(g, "unlimited", Unlimited, common::success);
        $run!(g, "grpc", GrpcThrottle::default(), common::success);
        $run!(g, "aws", AwsRetryQuota::default(), common::success);
        $run!(g, "ratio", common::ratio(), common::success);
        $run!(g, "envoy", EnvoyRetryBudget::default(), common::success);
        $run!(g, "adaptive", AdaptiveThrottle::default(), common::success);
        g.finish();
        let mut g = $c.benchmark_group(concat!($prefix, "retry_decision"));
        $run!(g, "atomic_fetch_add", AtomicU64::new(0), common::atomic_add);
        $run!(g, "tower_tps_withdraw", common::tower_tps(), common::tower_withdraw);
        $run!(g, "unlimited", Unlimited, common::retry);
        $run!(g, "grpc", GrpcThrottle::default(), common::retry);
        $run!(g, "aws", AwsRetryQuota::default(), common::retry);
        $run!(g, "ratio", common::ratio(), common::retry);
        $run!(g, "envoy", EnvoyRetryBudget::default(), common::retry);
        $run!(g, "adaptive", AdaptiveThrottle::default(), common::retry);
        g.finish();
    }};
}
