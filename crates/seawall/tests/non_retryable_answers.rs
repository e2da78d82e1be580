//! A non-retryable answer (an HTTP 4xx, a gRPC status outside `retryableStatusCodes`)
//! is neither a success nor a failure for a token budget. Driven through `RetryPolicy` itself,
//! with the statuses classified by seawall's own classifiers, so what is checked is what the
//! policy reports to the budget, not only what the budget does with it.
//!
//! Mutation checked for both tests: mapping `Class::NeverRetry` to `AttemptOutcome::Answered` in
//! `RetryPolicy::after_attempt` (the behaviour before the fix) turns both red.

use seawall::budget::{AwsRetryCosts, AwsRetryQuota, GrpcThrottle};
use seawall::classify::{Transient, grpc_code};
use seawall::prelude::*;

/// One call whose attempts get `classes` in turn; returns how many attempts were sent. No
/// deadline, so the backoff waits (advanced, never slept) do not matter.
fn call<B: Budget>(p: &RetryPolicy<B>, now: &mut Instant, classes: &[Class]) -> usize {
    let mut c = p.start(*now, RequestInfo::idempotent(), None);
    let mut sent = 0;
    for &class in classes {
        p.before_attempt(&mut c, *now).expect("the test's calls are all admitted");
        sent += 1;
        match p.after_attempt(&mut c, *now, class, Hint::None) {
            Decision::Retry { after } => *now = *now + after,
            Decision::Success | Decision::GiveUp(_) => break,
        }
    }
    assert!(c.is_finished(), "each sequence ends the call");
    sent
}

/// A mix of 5xx and 4xx against the AWS retry quota with the legacy standard-mode prices, whose
/// expected token counts are worked out by hand from botocore's documented algorithm
/// (`botocore/retries/standard.py`, `RetryQuotaChecker`): the quota starts at 500
/// (`RetryQuota.INITIAL_CAPACITY`); a retry acquires 5 (`_RETRY_COST`), 10 after a timeout
/// (`_TIMEOUT_RETRY_REQUEST`); when the call ends, `release_retry_quota` gives back the last
/// acquisition if the final status is 2xx and the call was retried, 1 (`_NO_RETRY_INCREMENT`) if
/// it is 2xx and was not, and nothing for any other status.
#[test]
fn aws_quota_after_mixed_5xx_and_4xx_matches_botocore() {
    let http = HttpClassifier::default();
    let s = |status| http.classify(status);
    let timeout = Class::Retryable(Transient::Timeout); // botocore's ReadTimeoutError
    let p = RetryPolicy::new(PolicyConfig::default(), AwsRetryQuota::new(AwsRetryCosts::Legacy))
        .with_seed(19);
    let mut now = Instant::ZERO;
    let steps: [(&[Class], usize, u32, &str); 8] = [
        (&[s(503), s(404)], 2, 495, "retry acquires 5; ends 404: nothing back"),
        (&[s(404)], 1, 495, "first-try 404: no _NO_RETRY_INCREMENT"),
        (&[s(503), s(200)], 2, 495, "acquires 5, ends 2xx: the 5 come back"),
        (&[s(200)], 1, 496, "first-try 2xx: +1"),
        (&[s(503), s(503), s(400)], 3, 486, "two retries, 5 each; ends 400: nothing back"),
        (&[timeout, s(403)], 2, 476, "a timeout's retry acquires 10; ends 403: nothing back"),
        (&[s(429), s(200)], 2, 476, "a throttled retry acquires 5, ends 2xx: back"),
        (&[s(422), s(401), s(409)], 1, 476, "non-retryable: one attempt, nothing back"),
    ];
    let mut trajectory = Vec::new();
    for (classes, attempts, _, why) in steps {
        assert_eq!(call(&p, &mut now, classes), attempts, "{why}");
        trajectory.push(p.budget().tokens());
    }
    let expected: Vec<u32> = steps.iter().map(|s| s.2).collect();
    assert_eq!(trajectory, expected);

    // Control: the same quota does credit successes, so the figures above are not a quota that
    // never moves.
    for _ in 0..30 {
        call(&p, &mut now, &[s(200)]);
    }
    assert_eq!(p.budget().tokens(), 500);
}

/// gRFC A6: only a retryable status (UNAVAILABLE here) takes a token and only OK gives one back
/// (0.1); INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, INTERNAL… leave the throttle alone.
#[test]
fn grpc_throttle_is_unchanged_by_non_retryable_codes() {
    let g = classify_grpc;
    let p = RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::new(10, 0.1).unwrap())
        .with_seed(19);
    let mut now = Instant::ZERO;
    let unavailable = g(grpc_code::UNAVAILABLE);
    call(&p, &mut now, &[unavailable, g(grpc_code::INVALID_ARGUMENT)]);
    assert_eq!(p.budget().tokens(), 9.0, "UNAVAILABLE takes 1; INVALID_ARGUMENT nothing");
    for code in [
        grpc_code::NOT_FOUND,
        grpc_code::PERMISSION_DENIED,
        grpc_code::INTERNAL,
        grpc_code::UNAUTHENTICATED,
        grpc_code::FAILED_PRECONDITION,
    ] {
        for _ in 0..20 {
            call(&p, &mut now, &[g(code)]);
        }
    }
    assert_eq!(p.budget().tokens(), 9.0, "100 non-retryable answers refill nothing");
    call(&p, &mut now, &[g(grpc_code::OK)]);
    assert_eq!(p.budget().tokens(), 9.1, "control: OK refills tokenRatio");
    call(&p, &mut now, &[unavailable, unavailable, unavailable]);
    assert_eq!(p.budget().tokens(), 6.1, "three UNAVAILABLE take three");
}
