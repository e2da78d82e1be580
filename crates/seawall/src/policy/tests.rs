use super::*;
use crate::budget::{GrpcThrottle, Unlimited};
use crate::classify::HttpClassifier;

const T0: Instant = Instant::ZERO;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn fail_503() -> Class {
    HttpClassifier::default().classify(503)
}

fn policy() -> RetryPolicy<Unlimited> {
    RetryPolicy::new(PolicyConfig::default(), Unlimited).with_seed(1)
}

/// Runs a call in which every attempt gets `class`; returns the decisions.
fn run_all<B: Budget>(
    p: &RetryPolicy<B>,
    info: RequestInfo,
    class: Class,
    hint: Hint,
) -> (Vec<Decision>, Instant) {
    let mut now = T0;
    let mut call = p.start(now, info, Some(Deadline::after(now, Duration::from_secs(10))));
    let mut out = Vec::new();
    while p.before_attempt(&mut call, now).is_ok() {
        let d = p.after_attempt(&mut call, now, class, hint);
        out.push(d);
        match d {
            Decision::Retry { after } => now = now + after,
            _ => break,
        }
    }
    (out, now)
}

#[test]
fn three_attempts_then_exhausted() {
    let p = policy();
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::None);
    assert_eq!(ds.len(), 3);
    assert!(matches!(ds[0], Decision::Retry { .. }));
    assert!(matches!(ds[1], Decision::Retry { .. }));
    assert_eq!(
        ds[2],
        Decision::GiveUp(GiveUp { reason: GiveUpReason::AttemptsExhausted, overloaded: true })
    );
    let s = p.metrics().snapshot();
    assert_eq!((s.calls, s.attempts, s.retries), (1, 3, 2));
    assert_eq!(s.give_ups(GiveUpReason::AttemptsExhausted), 1);
    assert_eq!(s.attempts_per_call[2], 1);
}

#[test]
fn fail_fast_makes_one_attempt_and_signals_only_overload() {
    let p = RetryPolicy::new(PolicyConfig::fail_fast(), Unlimited).with_seed(1);
    let give_up = |reason, overloaded| [Decision::GiveUp(GiveUp { reason, overloaded })];
    // A transient failure is passed up as it is: the one owner above may retry it.
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::None);
    assert_eq!(ds, give_up(GiveUpReason::AttemptsExhausted, false));
    // Throttling below becomes "overloaded; don't retry" above, and so does a pushback.
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), Class::Throttled, Hint::None);
    assert_eq!(ds, give_up(GiveUpReason::AttemptsExhausted, true));
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::DontRetry);
    assert_eq!(ds, give_up(GiveUpReason::ServerSaidDontRetry, true));
    assert!(PolicyConfig::fail_fast().with_max_attempts(3).is_err());
}

#[test]
fn four_xx_is_never_retried_nor_signalled_as_overload() {
    let p = policy();
    for status in [400, 401, 403, 404, 422] {
        let (ds, _) = run_all(
            &p,
            RequestInfo::idempotent(),
            HttpClassifier::default().classify(status),
            Hint::None,
        );
        assert_eq!(
            ds,
            [Decision::GiveUp(GiveUp { reason: GiveUpReason::NotRetryable, overloaded: false })]
        );
    }
}

#[test]
fn explicit_overload_is_not_retried() {
    let p = policy();
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), Class::Overloaded, Hint::None);
    assert_eq!(ds.len(), 1);
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::DontRetry);
    assert_eq!(
        ds,
        [Decision::GiveUp(GiveUp { reason: GiveUpReason::ServerSaidDontRetry, overloaded: true })]
    );
}

#[test]
fn non_idempotent_only_when_never_sent() {
    let p = policy();
    let (ds, _) = run_all(&p, RequestInfo::http("POST", false), fail_503(), Hint::None);
    assert_eq!(
        ds[0],
        Decision::GiveUp(GiveUp { reason: GiveUpReason::NotIdempotent, overloaded: false })
    );
    let refused = Class::Retryable(Transient::ConnectRefused);
    let (ds, _) = run_all(&p, RequestInfo::http("POST", false), refused, Hint::None);
    assert_eq!(ds.len(), 3, "connect refused proves the request never reached the server");
    let (ds, _) = run_all(&p, RequestInfo::http("POST", true), fail_503(), Hint::None);
    assert_eq!(ds.len(), 3, "an idempotency key makes a POST retryable");
}

#[test]
fn hint_is_a_lower_bound_with_jitter_on_top() {
    let p = policy();
    let mut waits = Vec::new();
    for _ in 0..200 {
        let mut call = p.start(T0, RequestInfo::idempotent(), None);
        p.before_attempt(&mut call, T0).unwrap();
        match p.after_attempt(&mut call, T0, Class::Throttled, Hint::After(Duration::from_secs(2)))
        {
            Decision::Retry { after } => waits.push(after),
            d => panic!("{d:?}"),
        }
    }
    assert!(waits.iter().all(|w| *w >= Duration::from_secs(2) && *w <= Duration::from_secs(3)));
    let distinct: std::collections::HashSet<_> = waits.iter().collect();
    assert!(distinct.len() > 150, "hinted waits are jittered");
}

#[test]
fn hint_past_deadline_gives_up_at_once() {
    let p = policy();
    let mut call =
        p.start(T0, RequestInfo::idempotent(), Some(Deadline::after(T0, Duration::from_secs(1))));
    p.before_attempt(&mut call, T0).unwrap();
    let d = p.after_attempt(&mut call, T0, fail_503(), Hint::After(Duration::from_secs(5)));
    assert_eq!(
        d,
        Decision::GiveUp(GiveUp { reason: GiveUpReason::DeadlineTooClose, overloaded: true })
    );
}

#[test]
fn hint_past_max_wait_gives_up() {
    let p = policy();
    let (ds, _) =
        run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::After(Duration::from_secs(3600)));
    assert_eq!(
        ds,
        [Decision::GiveUp(GiveUp { reason: GiveUpReason::ServerSaidDontRetry, overloaded: true })]
    );
}

#[test]
fn attempt_timeout_is_min_of_per_try_and_time_left() {
    let cfg = PolicyConfig::default().with_per_try_timeout(ms(250)).unwrap();
    let p = RetryPolicy::new(cfg, Unlimited).with_seed(1);
    let mut call = p.start(T0, RequestInfo::idempotent(), Some(Deadline::after(T0, ms(1000))));
    let a = p.before_attempt(&mut call, T0).unwrap();
    assert_eq!(a.timeout(), Some(ms(250)));
    let _ = p.after_attempt(&mut call, T0, fail_503(), Hint::None);
    let late = T0 + ms(900);
    let a = p.before_attempt(&mut call, late).unwrap();
    assert_eq!(a.timeout(), Some(ms(100)));
    assert_eq!(a.time_left(), Some(ms(100)));
}

#[test]
fn no_attempt_with_less_than_min_time_left() {
    let p = policy();
    let mut call = p.start(T0, RequestInfo::idempotent(), Some(Deadline::after(T0, ms(4))));
    assert_eq!(p.before_attempt(&mut call, T0).unwrap_err().reason, GiveUpReason::DeadlineTooClose);
    assert!(call.is_finished());
}

#[test]
fn kill_switch_stops_retries_on_next_decision() {
    let p = policy();
    let mut call = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut call, T0).unwrap();
    let Decision::Retry { after } = p.after_attempt(&mut call, T0, fail_503(), Hint::None) else {
        panic!()
    };
    p.control().disable();
    let e = p.before_attempt(&mut call, T0 + after).unwrap_err();
    assert_eq!(e.reason, GiveUpReason::RetriesDisabled);
    // first attempts are unaffected
    let mut call = p.start(T0, RequestInfo::idempotent(), None);
    assert!(p.before_attempt(&mut call, T0).is_ok());
    assert_eq!(
        p.after_attempt(&mut call, T0, fail_503(), Hint::None),
        Decision::GiveUp(GiveUp { reason: GiveUpReason::RetriesDisabled, overloaded: true })
    );
}

#[test]
fn budget_refusal_is_retry_overflow() {
    let p =
        RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::new(2, 0.1).unwrap()).with_seed(1);
    // 2 tokens: the first failure leaves 1 = max/2 → no retry.
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::None);
    assert_eq!(
        ds,
        [Decision::GiveUp(GiveUp { reason: GiveUpReason::BudgetExhausted, overloaded: true })]
    );
    assert_eq!(p.metrics().snapshot().retry_overflow(), 1);
}

#[test]
fn waits_grow_and_stay_under_ceiling() {
    let p = policy();
    for _ in 0..100 {
        let (ds, _) = run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::None);
        if let Decision::Retry { after } = ds[0] {
            assert!(after < ms(50));
        }
        if let Decision::Retry { after } = ds[1] {
            assert!(after < ms(100));
        }
    }
}

#[test]
fn concurrent_calls_draw_different_jitter() {
    let p = policy();
    let mut a = p.start(T0, RequestInfo::idempotent(), None);
    let mut b = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut a, T0).unwrap();
    p.before_attempt(&mut b, T0).unwrap();
    let da = p.after_attempt(&mut a, T0, fail_503(), Hint::None);
    let db = p.after_attempt(&mut b, T0, fail_503(), Hint::None);
    assert_ne!(da, db);
}

#[test]
fn same_seed_same_decisions() {
    let run = || {
        let p = policy();
        (0..20)
            .map(|_| run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::None).1)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn misuse_does_not_panic() {
    let p = policy();
    let mut call = p.start(T0, RequestInfo::idempotent(), None);
    assert!(matches!(
        p.after_attempt(&mut call, T0, Class::Success, Hint::None),
        Decision::GiveUp(_)
    ));
    p.before_attempt(&mut call, T0).unwrap();
    assert!(p.before_attempt(&mut call, T0).is_err(), "two attempts in flight");
    assert_eq!(p.after_attempt(&mut call, T0, Class::Success, Hint::None), Decision::Success);
    assert!(p.before_attempt(&mut call, T0).is_err());
    p.abandon(&mut call, T0);
    assert_eq!(p.metrics().snapshot().successes, 1);
}

#[test]
fn abandon_releases_and_counts_once() {
    let p = policy();
    let mut call = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut call, T0).unwrap();
    p.abandon(&mut call, T0);
    p.abandon(&mut call, T0);
    let s = p.metrics().snapshot();
    assert_eq!(s.give_ups.iter().sum::<u64>(), 1);
}

#[test]
fn send_once_is_never_retried_even_when_refused() {
    let p = policy();
    let refused = Class::Retryable(Transient::ConnectRefused);
    let (ds, _) = run_all(&p, RequestInfo::send_once(), refused, Hint::None);
    assert_eq!(
        ds,
        [Decision::GiveUp(GiveUp { reason: GiveUpReason::NotReplayable, overloaded: false })]
    );
}

#[test]
fn abandon_counts_as_abandoned() {
    let p = policy();
    let mut call = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut call, T0).unwrap();
    p.abandon(&mut call, T0);
    assert_eq!(p.metrics().snapshot().give_ups(GiveUpReason::Abandoned), 1);
}

#[test]
fn a_call_that_never_draws_takes_no_random_stream() {
    // With a budget that does not draw on admission, a successful call never seeds a stream: a
    // failing call after it draws exactly what it would have drawn first.
    let waits = |successes_first: usize| {
        let budget = crate::budget::AnyBudget::Grpc(GrpcThrottle::default());
        let p = RetryPolicy::new(PolicyConfig::default(), budget).with_seed(9);
        for _ in 0..successes_first {
            let mut call = p.start(T0, RequestInfo::idempotent(), None);
            p.before_attempt(&mut call, T0).unwrap();
            assert_eq!(
                p.after_attempt(&mut call, T0, Class::Success, Hint::None),
                Decision::Success
            );
            assert!(call.rng.is_none());
        }
        run_all(&p, RequestInfo::idempotent(), fail_503(), Hint::None).0
    };
    assert_eq!(waits(0), waits(5));
    assert!(matches!(waits(0)[0], Decision::Retry { after } if after > Duration::ZERO));
}

#[test]
fn calls_count_those_refused_before_any_attempt_and_attempts_count_only_what_was_sent() {
    let p = policy();
    // One success with one attempt.
    let mut ok = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut ok, T0).unwrap();
    assert_eq!(p.after_attempt(&mut ok, T0, Class::Success, Hint::None), Decision::Success);
    // One refused before its first attempt: the deadline has passed.
    let mut late = p.start(T0 + ms(10), RequestInfo::idempotent(), Some(Deadline::at(T0)));
    assert!(p.before_attempt(&mut late, T0 + ms(10)).is_err());
    // One abandoned before its first attempt.
    let mut dropped = p.start(T0, RequestInfo::idempotent(), None);
    p.abandon(&mut dropped, T0);
    let s = p.metrics().snapshot();
    assert_eq!((s.calls, s.attempts, s.retries, s.successes), (3, 1, 0, 1));
    assert_eq!(s.give_ups(GiveUpReason::DeadlineTooClose), 1);
    assert_eq!(s.give_ups(GiveUpReason::Abandoned), 1);
}

#[test]
fn the_role_a_call_starts_in_decides_whatever_the_config_says() {
    // One owner policy shared by an owner call and a fail-fast call: the fail-fast call makes
    // one attempt, and its transient failure is not "overloaded" (the owner above may retry).
    let p = RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default()).with_seed(1);
    let mut ff = p.start_as(Role::FailFast, T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut ff, T0).unwrap();
    let d = p.after_attempt(&mut ff, T0, Class::Retryable(Transient::Connection), Hint::None);
    assert_eq!(
        d,
        Decision::GiveUp(GiveUp { reason: GiveUpReason::AttemptsExhausted, overloaded: false })
    );
    let mut owner = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut owner, T0).unwrap();
    let d = p.after_attempt(&mut owner, T0, Class::Retryable(Transient::Connection), Hint::None);
    assert!(matches!(d, Decision::Retry { .. }), "{d:?}");
}

#[test]
fn a_cancelled_retry_ends_the_call_once_as_not_replayable() {
    let budget = GrpcThrottle::new(10, 0.1).unwrap();
    let p = RetryPolicy::new(PolicyConfig::default(), budget).with_seed(2);
    let mut call = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut call, T0).unwrap();
    let d = p.after_attempt(&mut call, T0, Class::Retryable(Transient::Connection), Hint::None);
    assert!(matches!(d, Decision::Retry { .. }), "{d:?}");
    let g = p.cancel_retry(&mut call, T0);
    assert_eq!((g.reason(), g.is_overloaded()), (GiveUpReason::NotReplayable, false));
    assert!(call.is_finished());
    // Abandoning the finished call counts nothing more: one event, one reason.
    p.abandon(&mut call, T0);
    let s = p.metrics().snapshot();
    assert_eq!(s.give_ups(GiveUpReason::NotReplayable), 1);
    assert_eq!(s.give_ups(GiveUpReason::Abandoned), 0);
}

/// A simulator holds one `Call` per call in flight, millions at once in a synchronised
/// reconnect herd. Plain fields, no packing: 72 B today (the deadline, the last wait and the
/// call's 8 B random stream as `Option`s and a `Duration`, 16 B each; the withdrawal and the
/// breaker permit 8 B each). A field that grows it fails here, so the herd's memory is spent
/// on purpose.
#[test]
fn a_call_stays_small() {
    assert!(std::mem::size_of::<Call>() <= 72, "Call grew to {} B", std::mem::size_of::<Call>());
}

/// The deadline to the nanosecond, and the last wait too, up to the longest a policy allows (an
/// hour, less a nanosecond). Red if the wait is kept coarser (`prev_wait` in milliseconds).
#[test]
fn a_call_keeps_its_deadline_and_last_wait_exactly() {
    let p = RetryPolicy::new(PolicyConfig::default(), Unlimited).with_seed(3);
    let d = Deadline::at(Instant::from_nanos(u64::MAX));
    let call = p.start(T0, RequestInfo::idempotent(), Some(d));
    assert_eq!(call.deadline(), Some(d));
    assert_eq!(p.start(T0, RequestInfo::idempotent(), None).deadline(), None);
    // The longest wait a policy allows, to the nanosecond.
    let p = RetryPolicy::new(
        PolicyConfig::default()
            .with_max_wait(Duration::from_secs(3600))
            .unwrap()
            .with_backoff(crate::backoff::Backoff::constant(Duration::ZERO).unwrap())
            .with_hint_spread(0.0)
            .unwrap(),
        Unlimited,
    );
    let mut call = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut call, T0).unwrap();
    let hint = Hint::After(Duration::new(3599, 999_999_999));
    let d = p.after_attempt(&mut call, T0, Class::Retryable(Transient::ServerError), hint);
    assert_eq!(d, Decision::Retry { after: Duration::new(3599, 999_999_999) });
    assert_eq!(call.prev_wait, Duration::new(3599, 999_999_999));
}

/// A call draws each value from its own stream in turn, across decisions, the control's draw
/// (retries fully on) included: a call that retries twice waits its stream's values 1 and 3 (0
/// and 2 are the control's). Red if the control's draw is skipped when its value cannot matter
/// (`ramp_allows` returning before it draws: values 0 and 1).
#[test]
fn each_draw_is_the_next_value_of_the_calls_stream() {
    let p = policy();
    let failed = Class::Retryable(Transient::ServerError);
    let (ds, _) = run_all(&p, RequestInfo::idempotent(), failed, Hint::None);
    let mut reference = crate::rng::SeedSource::new(1).call_numbered(0);
    let mut prev = Duration::ZERO;
    for (retry, d) in (1..).zip(&ds[..2]) {
        reference.next_u64(); // the control's draw
        let wait = p.cfg.backoff.delay(retry, false, prev, &mut reference).min(p.cfg.max_wait);
        assert!(wait > Duration::ZERO);
        assert_eq!(*d, Decision::Retry { after: wait }, "retry {retry}");
        prev = wait;
    }
}

/// The control's draw takes the call's stream like any other, so streams go out
/// in the order of calls' first draws. Call A retries after a flat wait (its one draw, the
/// control's); call B then draws its hint's spread, from stream 1, value 1. Red if the
/// control's draw is skipped with retries fully on (A takes no stream: B draws from stream 0).
#[test]
fn a_counted_draw_takes_a_stream_in_turn() {
    let cfg =
        PolicyConfig::default().with_backoff(crate::backoff::Backoff::constant(ms(1)).unwrap());
    let p = RetryPolicy::new(cfg, Unlimited).with_seed(4);
    let failed = Class::Retryable(Transient::ServerError);
    let mut a = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut a, T0).unwrap();
    assert_eq!(p.after_attempt(&mut a, T0, failed, Hint::None), Decision::Retry { after: ms(1) });
    let hint = ms(200);
    let mut b = p.start(T0, RequestInfo::idempotent(), None);
    p.before_attempt(&mut b, T0).unwrap();
    let d = p.after_attempt(&mut b, T0, Class::Throttled, Hint::After(hint));
    let mut stream_1 = crate::rng::SeedSource::new(4).call_numbered(1);
    stream_1.next_u64(); // B's control draw
    let spread = hint.mul_f64(p.cfg.hint_spread * stream_1.next_f64());
    assert!(spread > Duration::ZERO);
    assert_eq!(d, Decision::Retry { after: (hint + spread).min(p.cfg.max_wait).max(hint) });
}

/// The breaker permit a call holds, kept as a probe number and two flag bits, goes back to the
/// breaker as it came: a half-open probe that succeeds through the policy closes the breaker.
/// Red if the call forgets that its permit is a probe (`hold_permit` leaving `PROBE` unset: the
/// breaker never hears from its probe and stays half-open), or forgets the permit altogether.
#[test]
fn a_probe_through_the_policy_closes_the_breaker() {
    use crate::breaker::{Breaker, BreakerConfig, BreakerState};
    let b = Breaker::new(BreakerConfig::default());
    for _ in 0..5 {
        let p = b.admit(T0, 0.5).unwrap();
        b.record(T0, p, false);
    }
    let p = RetryPolicy::new(PolicyConfig::default(), Unlimited).with_seed(5).with_breaker(b);
    let later = T0 + Duration::from_secs(7);
    assert_eq!(p.breaker().unwrap().state(T0), BreakerState::Open);
    let mut call = p.start(later, RequestInfo::idempotent(), None);
    p.before_attempt(&mut call, later).unwrap();
    assert_eq!(p.after_attempt(&mut call, later, Class::Success, Hint::None), Decision::Success);
    assert_eq!(p.breaker().unwrap().state(later), BreakerState::Closed);
}
