//! One call under a `hedgingPolicy`: when to send the next copy, and what a failure means.
//!
//! gRFC A6, *Hedging Policy*: the first attempt goes at once, another every `hedgingDelay`
//! until `maxAttempts` are out; the first `OK` wins and every other copy is cancelled. A
//! *non-fatal* failure (`nonFatalStatusCodes`) sends the next copy at once, and later ones
//! resume `hedgingDelay` after it; any other status is returned at once, the rest cancelled. A
//! valid pushback delays the next copy by exactly its value; a "don't retry" pushback stops new
//! copies (those in flight go on). Every copy after the first needs the throttle above half, and
//! failures are charged as for retries: non-fatal codes and "don't retry" pushbacks cost a token,
//! fatal codes do not.
//!
//! Sans-io: the caller owns the clock, the attempts and their cancellation; this type only says
//! when the next copy is due ([`HedgeState::next_at`]) and whether a failure ends the call.

use super::code::Code;
use super::config::HedgingConfig;
use super::pushback::Pushback;
use crate::budget::GrpcThrottle;
use crate::time::Instant;

/// The schedule of one hedged call.
#[derive(Debug, Clone)]
pub struct HedgeState {
    sent: u32,
    next_at: Option<Instant>,
}

/// What a failed copy means for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeVerdict {
    /// Non-fatal: wait for the other copies (and send the next when due).
    Continue,
    /// Fatal: cancel every other copy and return this failure.
    Fatal,
}

impl HedgeState {
    /// A call whose first copy is sent at `now`.
    pub fn new(policy: &HedgingConfig, now: Instant) -> Self {
        let next_at = (policy.max_attempts > 1).then(|| now + policy.hedging_delay);
        HedgeState { sent: 1, next_at }
    }

    /// Copies sent so far.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// When the next copy is due; `None` when no more will be sent.
    pub fn next_at(&self) -> Option<Instant> {
        self.next_at
    }

    /// If a copy is due at `now` and the throttle allows it, counts it as sent and returns its
    /// `grpc-previous-rpc-attempts` value. A throttle at or below half stops new copies.
    pub fn send_due(
        &mut self,
        policy: &HedgingConfig,
        now: Instant,
        throttle: Option<&GrpcThrottle>,
    ) -> Option<u32> {
        if self.next_at? > now {
            return None;
        }
        if throttle.is_some_and(|t| !t.allows_retry()) {
            self.next_at = None;
            return None;
        }
        let previous = self.sent;
        self.sent += 1;
        self.next_at = (self.sent < policy.max_attempts).then(|| now + policy.hedging_delay);
        Some(previous)
    }

    /// A copy answered `OK`: the throttle gains `tokenRatio`; the caller cancels the others.
    pub fn on_success(&mut self, throttle: Option<&GrpcThrottle>) {
        self.next_at = None;
        if let Some(t) = throttle {
            t.record_success();
        }
    }

    /// A copy failed with `code` at `now`.
    pub fn on_failure(
        &mut self,
        policy: &HedgingConfig,
        code: Code,
        pushback: Pushback,
        now: Instant,
        throttle: Option<&GrpcThrottle>,
    ) -> HedgeVerdict {
        let non_fatal = policy.non_fatal.contains(code);
        if let Some(t) = throttle.filter(|_| non_fatal || pushback == Pushback::DontRetry) {
            t.record_failure();
        }
        if !non_fatal {
            self.next_at = None;
            return HedgeVerdict::Fatal;
        }
        self.next_at = match (self.next_at, pushback) {
            (None, _) | (_, Pushback::DontRetry) => None,
            (Some(_), Pushback::After(d)) => Some(now + d),
            (Some(_), Pushback::Absent) => Some(now),
        };
        HedgeVerdict::Continue
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::grpc::CodeSet;

    const MS: Duration = Duration::from_millis(1);

    fn policy() -> HedgingConfig {
        HedgingConfig {
            max_attempts: 4,
            configured_max_attempts: 4,
            hedging_delay: 500 * MS,
            non_fatal: CodeSet::of(&[Code::UNAVAILABLE]),
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn a6_schedule_every_delay() {
        let p = policy();
        let mut h = HedgeState::new(&p, at(0));
        assert_eq!(h.send_due(&p, at(499), None), None);
        assert_eq!(h.send_due(&p, at(500), None), Some(1));
        assert_eq!(h.next_at(), Some(at(1000)));
        assert_eq!(h.send_due(&p, at(1000), None), Some(2));
        assert_eq!(h.send_due(&p, at(1500), None), Some(3));
        assert_eq!((h.next_at(), h.sent()), (None, 4), "maxAttempts copies, no more");
    }

    #[test]
    fn non_fatal_shortcuts_pushback_delays_and_stops() {
        let p = policy();
        let t = GrpcThrottle::new(10, 0.1).unwrap();
        let mut h = HedgeState::new(&p, at(0));
        let none = Pushback::Absent;
        assert_eq!(
            h.on_failure(&p, Code::UNAVAILABLE, none, at(100), Some(&t)),
            HedgeVerdict::Continue
        );
        assert_eq!(h.next_at(), Some(at(100)), "the next copy goes at once");
        assert_eq!(h.send_due(&p, at(100), Some(&t)), Some(1));
        assert_eq!(h.next_at(), Some(at(600)), "and later ones resume hedgingDelay after it");
        let push = Pushback::After(40 * MS);
        h.on_failure(&p, Code::UNAVAILABLE, push, at(200), Some(&t));
        assert_eq!(h.next_at(), Some(at(240)), "pushback: exactly its value");
        h.on_failure(&p, Code::UNAVAILABLE, Pushback::DontRetry, at(210), Some(&t));
        assert_eq!(h.next_at(), None, "don't retry: no more copies");
        assert_eq!(t.tokens(), 7.0, "three non-fatal failures");
        assert_eq!(h.on_failure(&p, Code::INTERNAL, none, at(300), Some(&t)), HedgeVerdict::Fatal);
        assert_eq!(t.tokens(), 7.0, "a fatal code costs nothing");
        h.on_success(Some(&t));
        assert_eq!(t.tokens(), 7.1);
    }

    proptest::proptest! {
        /// Whatever the answers and timing: never more than maxAttempts copies, never a copy
        /// once a "don't retry" pushback or a fatal code was seen, and tokens move only on
        /// non-fatal codes and "don't retry" pushbacks.
        #[test]
        fn schedule_invariants(max in 2u32..=5, delay_ms in 0u64..100,
                               events in proptest::collection::vec((0u64..200, 0u8..4, 0u8..3), 0..30)) {
            let p = HedgingConfig { max_attempts: max, configured_max_attempts: u64::from(max),
                                    hedging_delay: Duration::from_millis(delay_ms),
                                    non_fatal: CodeSet::of(&[Code::UNAVAILABLE]) };
            let t = GrpcThrottle::new(1000, 0.1).unwrap();
            let mut h = HedgeState::new(&p, at(0));
            let (mut now, mut stopped) = (0, false);
            for (step, code, push) in events {
                now += step;
                let before = h.sent();
                if h.send_due(&p, at(now), Some(&t)).is_some() {
                    proptest::prop_assert!(!stopped, "a copy after a stop");
                    proptest::prop_assert_eq!(h.sent(), before + 1);
                }
                proptest::prop_assert!(h.sent() <= max);
                let code = [Code::UNAVAILABLE, Code::INTERNAL, Code::INVALID_ARGUMENT, Code::UNAVAILABLE][usize::from(code)];
                let push = [Pushback::Absent, Pushback::DontRetry, Pushback::After(Duration::from_millis(5))][usize::from(push)];
                let tokens = t.tokens();
                let v = h.on_failure(&p, code, push, at(now), Some(&t));
                let charged = code == Code::UNAVAILABLE || push == Pushback::DontRetry;
                proptest::prop_assert_eq!(t.tokens(), if charged { tokens - 1.0 } else { tokens });
                proptest::prop_assert_eq!(v == HedgeVerdict::Fatal, code != Code::UNAVAILABLE);
                if v == HedgeVerdict::Fatal || push == Pushback::DontRetry {
                    stopped = true;
                }
                if stopped {
                    proptest::prop_assert_eq!(h.next_at(), None);
                }
            }
        }
    }

    #[test]
    fn throttle_at_half_stops_copies() {
        let p = policy();
        let t = GrpcThrottle::new(2, 0.1).unwrap();
        t.record_failure();
        let mut h = HedgeState::new(&p, at(0));
        assert_eq!(h.send_due(&p, at(500), Some(&t)), None, "1 token of 2: at half");
        assert_eq!(h.next_at(), None);
    }
}
