//! Property tests of the budgets' invariants, each against a plain model, on explicit instants.

use std::time::Duration;

use proptest::prelude::*;
use seawall::budget::{
    AdaptiveThrottle, AttemptOutcome, AwsRetryCosts, AwsRetryQuota, Budget, EnvoyRetryBudget,
    RatioBudget, RetryCause, Withdrawal,
};
use seawall::time::Instant;

fn ms(t: u64) -> Instant {
    Instant::from_nanos(t * 1_000_000)
}

fn cause(i: u8) -> RetryCause {
    [RetryCause::Transient, RetryCause::Timeout, RetryCause::Throttled][usize::from(i % 3)]
}

/// The ratio budget's window invariant: at every granted retry at time `x`, the retries of the
/// trailing window `(x − W, x]` (itself included) are at most `ratio × requests` in
/// `(x − W − W/10, x]` (one slot of granularity) plus the reserve. Integer milli-units:
/// `1000 × retries ≤ round(1000 × ratio) × requests + 1000 × reserve`.
///
/// `events` are `(time in ms, is_retry)` in the order they happened; only granted retries appear.
fn check_ratio_window(
    window_ms: u64,
    per_request: u64,
    reserve_milli: u64,
    events: &[(u64, bool)],
) -> Result<(), TestCaseError> {
    let slot = window_ms / 10;
    for (i, &(x, retry)) in events.iter().enumerate() {
        if !retry {
            continue;
        }
        let before = &events[..=i];
        let r = before.iter().filter(|&&(t, is_r)| is_r && t + window_ms > x).count() as u64;
        let d =
            before.iter().filter(|&&(t, is_r)| !is_r && t + window_ms + slot > x).count() as u64;
        prop_assert!(
            1000 * r <= per_request * d + reserve_milli,
            "retry #{i} at {x} ms: {r} retries in the window for {d} requests"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn ratio_never_exceeds_ratio_times_requests_plus_reserve(
        window_s in 1u64..=5,
        ratio_milli in 0u64..=1500,
        min_per_sec in 0u32..=2,
        ops in proptest::collection::vec((0u64..700, any::<bool>()), 1..300),
    ) {
        let window = Duration::from_secs(window_s);
        let b = RatioBudget::new(window, min_per_sec, ratio_milli as f64 / 1000.0).unwrap();
        let (mut now, mut events) = (0u64, Vec::new());
        for (dt, deposit) in ops {
            now += dt;
            if deposit {
                b.admit(ms(now), false, 0.0);
                events.push((now, false));
            } else if b.withdraw(ms(now), RetryCause::Transient).is_some() {
                events.push((now, true));
            }
        }
        let reserve = u64::from(min_per_sec) * window_s * 1000;
        check_ratio_window(window_s * 1000, ratio_milli, reserve, &events)?;
    }

    #[test]
    fn aws_quota_stays_in_bounds_and_matches_model(
        legacy in any::<bool>(),
        ops in proptest::collection::vec((0u8..5, any::<u8>()), 0..400),
    ) {
        let costs = if legacy { AwsRetryCosts::Legacy } else { AwsRetryCosts::Updated2026 };
        let q = AwsRetryQuota::new(costs);
        let mut model: i64 = 500;
        let mut held: Vec<Withdrawal> = Vec::new();
        let t = Instant::ZERO;
        for (op, arg) in ops {
            match op {
                0 | 1 => {
                    let c = costs.cost(cause(arg));
                    let w = q.withdraw(t, cause(arg));
                    prop_assert_eq!(w.is_some(), model >= i64::from(c));
                    if let Some(w) = w {
                        model -= i64::from(c);
                        held.push(w);
                    }
                }
                2 => {
                    q.record(t, None, AttemptOutcome::Answered);
                    model = (model + 1).min(500);
                }
                3 => {
                    if let Some(w) = held.pop() {
                        let ok = arg % 2 == 0;
                        let outcome =
                            if ok { AttemptOutcome::Answered } else { AttemptOutcome::Failed(cause(arg)) };
                        q.record(t, Some(w), outcome);
                        if ok {
                            model = (model + i64::from(w.cost())).min(500);
                        }
                    }
                }
                _ => {
                    if let Some(w) = held.pop() {
                        q.release(t, w);
                    }
                }
            }
            prop_assert!((0..=500).contains(&q.tokens()));
            prop_assert_eq!(i64::from(q.tokens()), model);
        }
    }

    #[test]
    fn envoy_never_grants_beyond_its_formula(
        percent in 0u32..=100,
        min in 0u32..=5,
        ops in proptest::collection::vec((0u8..4, any::<u8>()), 0..400),
    ) {
        let b = EnvoyRetryBudget::new(f64::from(percent), min).unwrap();
        let t = Instant::ZERO;
        // Attempts in flight, each with the withdrawal that paid for it (if a retry), and
        // withdrawals whose retry has not been admitted yet (in backoff).
        let mut in_flight: Vec<Option<Withdrawal>> = Vec::new();
        let mut waiting: Vec<Withdrawal> = Vec::new();
        for (op, arg) in ops {
            match op {
                0 => {
                    b.admit(t, false, 0.0);
                    in_flight.push(None);
                }
                1 => {
                    let active = in_flight.len() as u64;
                    let limit = ((f64::from(percent) / 100.0 * active as f64) as u64).max(u64::from(min));
                    let held = (in_flight.iter().flatten().count() + waiting.len()) as u64;
                    let w = b.withdraw(t, RetryCause::Transient);
                    prop_assert_eq!(w.is_some(), held < limit, "limit {} held {}", limit, held);
                    waiting.extend(w);
                }
                2 => {
                    // A waiting retry is sent, or dropped.
                    if let Some(w) = waiting.pop() {
                        if arg % 4 == 0 {
                            b.release(t, w);
                        } else {
                            b.admit(t, true, 0.0);
                            in_flight.push(Some(w));
                        }
                    }
                }
                _ => {
                    if !in_flight.is_empty() {
                        let paid = in_flight.swap_remove(usize::from(arg) % in_flight.len());
                        b.record(t, paid, AttemptOutcome::Failed(RetryCause::Transient));
                    }
                }
            }
            let held = (in_flight.iter().flatten().count() + waiting.len()) as u64;
            prop_assert_eq!(b.active(), in_flight.len() as u64);
            prop_assert_eq!(b.retries_in_flight(), held);
        }
    }

    #[test]
    fn adaptive_refuses_with_the_formula_probability(
        k_tenths in 10u32..=40,
        ops in proptest::collection::vec((0u64..20, 0u8..3, 0u32..1000), 0..300),
    ) {
        let k = f64::from(k_tenths) / 10.0;
        let t = AdaptiveThrottle::new(Duration::from_secs(120), k).unwrap();
        // Model: every event with its time; the window is the 10 s slot of `now` and the 12
        // before it.
        let mut requests: Vec<u64> = Vec::new();
        let mut accepts: Vec<u64> = Vec::new();
        let mut now = 0u64;
        let in_window = |events: &[u64], now: u64| {
            events.iter().filter(|&&e| now / 10 - e / 10 < 13).count() as u64
        };
        for (dt, op, draw) in ops {
            now += dt;
            let at = Instant::from_nanos(now * 1_000_000_000);
            match op {
                0 | 1 => {
                    let (r, a) = (in_window(&requests, now), in_window(&accepts, now));
                    prop_assert_eq!(t.counts(at), (r, a));
                    let p = ((r as f64 - k * a as f64) / (r as f64 + 1.0)).max(0.0);
                    prop_assert_eq!(t.rejection_probability(at), p);
                    let draw = f64::from(draw) / 1000.0;
                    prop_assert_eq!(t.admit(at, op == 1, draw), draw >= p);
                    requests.push(now);
                }
                _ => {
                    let answered = draw % 2 == 0;
                    let outcome = if answered {
                        AttemptOutcome::Answered
                    } else {
                        AttemptOutcome::Failed(RetryCause::Throttled)
                    };
                    t.record(at, None, outcome);
                    if answered {
                        accepts.push(now);
                    }
                }
            }
        }
    }
}

proptest! {
    /// As above with `now` out of order: each call happens up to 29 s (under four 10 s slots)
    /// before the newest instant so far, so late calls write into finished slots (which the
    /// throttle's cache of the finished slots' sums must notice) and read windows older than
    /// the newest. The ring holds 16 slots and a window 13, so within that lateness nothing a
    /// window needs is overwritten and the model stays exact.
    #[test]
    fn adaptive_is_exact_with_out_of_order_instants(
        k_tenths in 10u32..=40,
        ops in proptest::collection::vec((0u64..20, 0u64..30, 0u8..3, 0u32..1000), 0..400),
    ) {
        let k = f64::from(k_tenths) / 10.0;
        let t = AdaptiveThrottle::new(Duration::from_secs(120), k).unwrap();
        let mut requests: Vec<u64> = Vec::new();
        let mut accepts: Vec<u64> = Vec::new();
        let mut newest = 30u64;
        // Events in the slot of `now` and the 12 before it; later events are not in the window.
        let in_window = |events: &[u64], now: u64| {
            events.iter().filter(|&&e| e / 10 <= now / 10 && now / 10 - e / 10 < 13).count() as u64
        };
        for (dt, late, op, draw) in ops {
            newest += dt;
            let now = newest - late;
            let at = Instant::from_nanos(now * 1_000_000_000);
            match op {
                0 | 1 => {
                    let (r, a) = (in_window(&requests, now), in_window(&accepts, now));
                    prop_assert_eq!(t.counts(at), (r, a));
                    let p = ((r as f64 - k * a as f64) / (r as f64 + 1.0)).max(0.0);
                    let draw = f64::from(draw) / 1000.0;
                    prop_assert_eq!(t.admit(at, op == 1, draw), draw >= p);
                    requests.push(now);
                }
                _ => {
                    if draw % 2 == 0 {
                        t.record(at, None, AttemptOutcome::Answered);
                        accepts.push(now);
                    } else {
                        t.record(at, None, AttemptOutcome::Failed(RetryCause::Throttled));
                    }
                }
            }
        }
    }
}

#[test]
fn ratio_window_checker_catches_an_overspend() {
    // The checker must fail on a budget that lets one retry too many.
    let mut events = vec![(0, false); 10];
    events.push((10, true));
    assert!(check_ratio_window(1000, 100, 0, &events).is_ok());
    events.push((20, true));
    assert!(check_ratio_window(1000, 100, 0, &events).is_err());
    // A deposit older than the window plus one slot (1.1 s) funds nothing.
    let old = [(0, false), (0, false), (0, false), (0, false), (0, false)];
    let mut events = [old, old].concat();
    events.push((1100, true));
    assert!(check_ratio_window(1000, 100, 0, &events).is_err());
    events.pop();
    events.push((1099, true));
    assert!(check_ratio_window(1000, 100, 0, &events).is_ok());
    // Retries that left the window no longer count.
    events.push((2199, true));
    assert!(check_ratio_window(1000, 100, 1000, &events).is_ok());
}
