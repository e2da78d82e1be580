//! Each budget driven by `RetryPolicy` itself (through `AnyBudget`) against a dependency that
//! always fails: the budget, not the attempt cap, bounds the retries, and every budget's books
//! balance when the calls are over.

use seawall::budget::{
    AdaptiveThrottle, AnyBudget, AwsRetryQuota, EnvoyRetryBudget, GrpcThrottle, RatioBudget,
    Unlimited,
};
use seawall::classify::Transient;
use seawall::policy::GiveUpReason;
use seawall::prelude::*;

const CALLS: u64 = 1000;

/// Runs `CALLS` sequential calls, 1 ms apart, every attempt failing with a 503-like error, and
/// returns (retries sent, calls refused by the budget, calls refused locally, the policy).
fn storm(budget: AnyBudget) -> (u64, u64, u64, RetryPolicy<AnyBudget>) {
    // No deadline, so the backoff waits (not slept here) do not matter.
    let p = RetryPolicy::new(PolicyConfig::default(), budget).with_seed(3);
    let (mut retries, mut overflow, mut local) = (0, 0, 0);
    for i in 0..CALLS {
        let now = Instant::from_nanos(i * 1_000_000);
        let mut call = p.start(now, RequestInfo::idempotent(), None);
        loop {
            match p.before_attempt(&mut call, now) {
                Ok(a) if a.is_retry() => retries += 1,
                Ok(_) => {}
                Err(g) => {
                    assert_eq!(g.reason(), GiveUpReason::ThrottledLocally);
                    local += 1;
                    break;
                }
            }
            let class = Class::Retryable(Transient::ServerError);
            match p.after_attempt(&mut call, now, class, Hint::None) {
                Decision::Retry { .. } => {}
                Decision::GiveUp(g) => {
                    overflow += u64::from(g.reason() == GiveUpReason::BudgetExhausted);
                    break;
                }
                Decision::Success => unreachable!("every attempt fails"),
            }
        }
    }
    (retries, overflow, local, p)
}

#[test]
fn unlimited_retries_to_the_cap() {
    assert_eq!(storm(AnyBudget::from(Unlimited)).0, 2 * CALLS);
}

#[test]
fn grpc_stops_at_half() {
    // 10 tokens: failures take 1 each; retries stop at 5 tokens. First call: 10→9 retry, 9→8
    // retry, 8→7 gives up at the cap; second: 7→6 retry, 6→5 refused.
    let (retries, overflow, _, _) = storm(GrpcThrottle::default().into());
    assert_eq!((retries, overflow), (3, CALLS - 1));
}

#[test]
fn aws_buys_35_transient_retries() {
    let (retries, _, _, p) = storm(AwsRetryQuota::default().into());
    assert_eq!(retries, 35);
    let AnyBudget::Aws(q) = p.budget() else { unreachable!() };
    assert_eq!(q.tokens(), 10);
}

#[test]
fn ratio_allows_reserve_plus_share() {
    // 1000 calls over 1 s: 10 % of requests (100) + 10/s × 10 s of reserve (100).
    let (retries, _, _, _) = storm(RatioBudget::default().into());
    assert_eq!(retries, 200);
}

#[test]
fn envoy_books_balance() {
    // Calls are sequential, so a retry slot is always free; the budget's counters must return
    // to zero after every call.
    let (retries, _, _, p) = storm(EnvoyRetryBudget::default().into());
    assert_eq!(retries, 2 * CALLS);
    let AnyBudget::Envoy(b) = p.budget() else { unreachable!() };
    assert_eq!((b.active(), b.retries_in_flight()), (0, 0));
}

#[test]
fn adaptive_refuses_locally_as_accepts_vanish() {
    let (retries, overflow, local, _) = storm(AdaptiveThrottle::default().into());
    assert_eq!(overflow, 0, "the adaptive throttle never refuses in withdraw");
    // With no accepts p = r / (r + 1): almost everything is refused once history builds up.
    assert!(local > CALLS * 9 / 10, "refused locally: {local}");
    assert!(retries < CALLS / 10, "retries sent: {retries}");
}
