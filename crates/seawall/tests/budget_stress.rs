//! Concurrent stress tests: threads hammering one budget lose no update and overspend nothing.

use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use seawall::budget::{
    AdaptiveThrottle, AttemptOutcome, AwsRetryQuota, Budget, EnvoyRetryBudget, RatioBudget,
    RetryCause,
};
use seawall::time::Instant;

const THREADS: usize = 4;

/// Runs `f(thread index)` on [`THREADS`] threads started together; returns their results.
fn together<T: Send>(f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(THREADS);
    thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    f(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("stress thread panicked")).collect()
    })
}

#[test]
fn ratio_budget_loses_no_deposit_and_overspends_nothing() {
    const DEPOSITS: u64 = 50_000;
    let b = RatioBudget::new(Duration::from_secs(10), 1, 0.1).unwrap();
    // Deposits from every thread, spread over three slots of the same window.
    let at = |i: u64| Instant::from_nanos((i % 3) * 1_000_000_000 + 7);
    together(|_| {
        for i in 0..DEPOSITS {
            b.admit(at(i), false, 0.0);
        }
    });
    let now = Instant::from_nanos(3_000_000_000);
    let expected = (THREADS as u64 * DEPOSITS) / 10 + 10; // 10 % + 1/s × 10 s of reserve
    assert_eq!(b.available(now), expected, "a deposit was lost");

    // Now every thread withdraws far more than is available.
    let granted: u64 = together(|_| {
        (0..expected).filter(|_| b.withdraw(now, RetryCause::Transient).is_some()).count() as u64
    })
    .into_iter()
    .sum();
    assert!(granted <= expected, "overspent: {granted} > {expected}");
    // Racing withdrawals may refuse each other at the very end; whatever was refused that way
    // is still there, exactly.
    let rest = (0..expected).filter(|_| b.withdraw(now, RetryCause::Transient).is_some()).count();
    assert_eq!(granted + rest as u64, expected);
    assert_eq!(b.available(now), 0);
}

#[test]
fn aws_quota_refunds_and_charges_exactly() {
    let q = AwsRetryQuota::default();
    let t = Instant::ZERO;
    // Withdraw-and-refund churn from every thread leaves the bucket full…
    together(|_| {
        for _ in 0..20_000 {
            if let Some(w) = q.withdraw(t, RetryCause::Transient) {
                q.record(t, Some(w), AttemptOutcome::Answered);
            }
        }
    });
    assert_eq!(q.tokens(), 500);
    // …and failures drain it to exactly 500 / 14 = 35 retries among all threads.
    let granted: usize =
        together(|_| (0..100).filter(|_| q.withdraw(t, RetryCause::Timeout).is_some()).count())
            .into_iter()
            .sum();
    assert_eq!((granted, q.tokens()), (35, 10));
}

#[test]
fn envoy_budget_never_exceeds_its_floor_and_balances() {
    // With few attempts in flight the limit is the floor, 3: no thread may ever see more than
    // 3 retries held, however the threads interleave.
    let b = EnvoyRetryBudget::default();
    let t = Instant::ZERO;
    let max_seen: Vec<u64> = together(|_| {
        let mut max_seen = 0;
        for _ in 0..20_000 {
            b.admit(t, false, 0.0);
            b.record(t, None, AttemptOutcome::Failed(RetryCause::Transient));
            if let Some(w) = b.withdraw(t, RetryCause::Transient) {
                max_seen = max_seen.max(b.retries_in_flight());
                b.admit(t, true, 0.0);
                b.record(t, Some(w), AttemptOutcome::Answered);
            }
        }
        max_seen
    });
    // 4 threads hold at most 4 attempts (limit 3 until 15 are active, which never happens).
    assert!(max_seen.iter().all(|&m| m <= 3), "{max_seen:?}");
    assert_eq!((b.active(), b.retries_in_flight()), (0, 0), "an update was lost");
}

#[test]
fn adaptive_throttle_loses_no_count_and_keeps_no_stale_cache() {
    // Threads count requests and accepts all over one window — in the newest slot, and late
    // into finished slots whose sums other threads are caching at the same time — and read it
    // from every slot. Once they are done, the window read from each slot must hold exactly the
    // events up to that slot: a lost update or a cache entry that missed a late write shows.
    const CALLS: u64 = 40_000;
    const SLOT: u64 = 10_000_000_000; // 10 s
    let t = AdaptiveThrottle::default();
    // Call `i` of thread `n`: slot 0..=12, mostly the newest reached so far, often late.
    let slot_of = |n: usize, i: u64| {
        let newest = (i * 13 / CALLS).min(12);
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (n as u64) << 40;
        if x >> 61 == 0 { (x >> 20) % (newest + 1) } else { newest }
    };
    let at = |slot: u64, i: u64| Instant::from_nanos(slot * SLOT + i % SLOT);
    together(|n| {
        for i in 0..CALLS {
            let slot = slot_of(n, i);
            t.admit(at(slot, i), false, 0.5);
            if i % 3 != 0 {
                t.record(at(slot, i), None, AttemptOutcome::Answered);
            }
        }
    });
    for g in 0..13 {
        let (mut requests, mut accepts) = (0, 0);
        for n in 0..THREADS {
            for i in 0..CALLS {
                if slot_of(n, i) <= g {
                    requests += 1;
                    accepts += u64::from(i % 3 != 0);
                }
            }
        }
        assert_eq!(t.counts(at(g, 0)), (requests, accepts), "window read at slot {g}");
    }
}
