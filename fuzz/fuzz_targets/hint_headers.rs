//! `Retry-After` (delay-seconds and the three HTTP-date forms) and `Retry-Pushback-Ms` /
//! `grpc-retry-pushback-ms` (seawall::hint): never panic, clamp to the documented maxima, and
//! delay-seconds round-trip through `format_retry_after`.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use seawall::hint::{Hint, format_retry_after, parse_pushback_ms, parse_retry_after};

/// Saturation value for more than ten digits of delay-seconds.
const RETRY_AFTER_SATURATED: Duration = Duration::from_secs(u64::MAX / 2);
/// Saturation value for more than twelve digits of pushback milliseconds.
const PUSHBACK_MAX: Duration = Duration::from_millis(999_999_999_999);

fuzz_target!(|data: &[u8]| {
    let Ok(value) = std::str::from_utf8(data) else { return };
    // Sun, 06 Nov 1994 08:49:30 GMT: the RFC 9110 example date, so seeds near it are meaningful.
    let now = UNIX_EPOCH + Duration::from_secs(784_111_770);

    match parse_retry_after(value, now) {
        Hint::DontRetry => panic!("Retry-After never means don't retry: {value:?}"),
        Hint::None => {}
        Hint::After(d) => {
            let v = value.trim_matches([' ', '\t']);
            if v.bytes().all(|b| b.is_ascii_digit()) {
                assert!(d <= RETRY_AFTER_SATURATED, "{value:?} → {d:?}");
                if d < RETRY_AFTER_SATURATED {
                    let printed = format_retry_after(d);
                    assert_eq!(parse_retry_after(&printed, now), Hint::After(d), "{printed:?}");
                }
            } else {
                // An HTTP-date: at most year 9999, and never before `now`.
                let latest = SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_800);
                assert!(d <= latest.duration_since(now).unwrap(), "{value:?} → {d:?}");
            }
        }
    }

    match parse_pushback_ms(value) {
        Hint::None => panic!("pushback is a wait or don't-retry, never none: {value:?}"),
        Hint::DontRetry => {}
        Hint::After(d) => {
            assert!(d <= PUSHBACK_MAX, "{value:?} → {d:?}");
            assert_eq!(d.subsec_nanos() % 1_000_000, 0, "whole milliseconds");
        }
    }
});
